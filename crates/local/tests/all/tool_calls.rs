//! Tool calls against a real GGUF model on the CPU.
//!
//! Model file: env `PI_LOCAL_TEST_MODEL`, else `<default models dir>/SmolLM2-135M-Instruct.Q4_1.gguf`,
//! else the first `*.gguf` there (`scripts/fetch-default-model.sh`). Each test prints a notice
//! and passes when there is none, or fails when `PI_REQUIRE_TEST_RESOURCES=1`.

use futures::StreamExt;
use pi_ai::{
    AssistantMessageEvent, Context, Message, Model, Provider, StopReason, StreamOptions,
    ToolDefinition,
};
use pi_local::{LocalConfig, LocalProvider, SamplingConfig};
use serde_json::{json, Value};
use std::path::PathBuf;

const DEFAULT_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// One model worker per file is shared by the tests of this binary; run them one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A resource the tests need is missing: with `PI_REQUIRE_TEST_RESOURCES=1` (as in `.ci/run`)
/// that is a failure; otherwise a notice on stderr and the test passes.
fn missing_resource(what: &str, how: &str) {
    if std::env::var_os("PI_REQUIRE_TEST_RESOURCES").is_some_and(|v| v == "1") {
        panic!("missing test resource: {what}; {how} (PI_REQUIRE_TEST_RESOURCES=1 is set)");
    }
    eprintln!("SKIP: {what}; {how}");
}

fn model_file() -> Option<PathBuf> {
    let path = match std::env::var_os("PI_LOCAL_TEST_MODEL") {
        Some(p) => Some(PathBuf::from(p)),
        None => pi_local::default_models_dir().and_then(|dir| {
            let default = dir.join(DEFAULT_FILE);
            if default.is_file() {
                return Some(default);
            }
            let mut ggufs: Vec<PathBuf> = std::fs::read_dir(&dir)
                .ok()?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .is_some_and(|x| x.eq_ignore_ascii_case("gguf"))
                })
                .collect();
            ggufs.sort();
            ggufs.into_iter().next()
        }),
    };
    match path {
        Some(p) if p.is_file() => Some(p),
        other => {
            missing_resource(
                &format!(
                    "no model file ({})",
                    other.map_or_else(|| "no models folder".into(), |p| p.display().to_string())
                ),
                "run scripts/fetch-default-model.sh or set PI_LOCAL_TEST_MODEL",
            );
            None
        }
    }
}

fn model(path: &std::path::Path, tool_choice: Option<&str>) -> Model {
    let mut m = Model::unknown();
    m.id = "tool-test".into();
    m.name = "tool-test".into();
    m.api = pi_local::API.into();
    m.provider = pi_local::PROVIDER.into();
    m.base_url = path.display().to_string();
    m.context_window = 2048;
    m.max_tokens = 256;
    m.compat = tool_choice.map(|c| {
        let mut map = serde_json::Map::new();
        map.insert("toolChoice".into(), json!(c));
        map
    });
    m
}

fn tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition {
            name: "ls".into(),
            description: "List the entries of a directory (default: the working directory).".into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Directory to list"}},
            }),
        },
        ToolDefinition {
            name: "read".into(),
            description: "Read the contents of a file.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "File to read"}},
                "required": ["path"],
            }),
        },
    ]
}

fn context() -> Context {
    Context {
        system_prompt: "You are a coding assistant with access to the user's files.".into(),
        messages: vec![Message::user_text("list the files")],
        tools: tools(),
    }
}

fn provider() -> LocalProvider {
    LocalProvider::with_config(LocalConfig {
        sampling: SamplingConfig::greedy(),
        ..LocalConfig::default()
    })
}

/// Checks that a tool call is well-formed: a real tool, object arguments valid for its
/// schema's required keys and types.
fn assert_well_formed(name: &str, arguments: &Value) {
    assert!(
        name == "ls" || name == "read",
        "called an unknown tool {name:?}"
    );
    let args = arguments.as_object().expect("arguments are an object");
    for (k, v) in args {
        assert_eq!(k, "path", "unexpected argument {k:?}");
        assert!(v.is_string(), "path is not a string: {v}");
    }
    if name == "read" {
        assert!(args.contains_key("path"), "read without path");
    }
}

#[tokio::test]
async fn required_tool_call_is_well_formed() {
    let _serial = SERIAL.lock().await;
    let Some(path) = model_file() else { return };
    let started = std::time::Instant::now();
    let events: Vec<_> = provider()
        .stream(
            &model(&path, Some("required")),
            &context(),
            StreamOptions {
                max_tokens: Some(200),
                ..StreamOptions::default()
            },
        )
        .collect()
        .await;
    eprintln!("tool call in {:?}", started.elapsed());

    let mut start = None;
    let mut deltas = String::new();
    let mut end = None;
    for e in &events {
        match e {
            AssistantMessageEvent::ToolCallStart {
                content_index,
                id,
                tool_name,
            } => {
                assert!(start.is_none(), "more than one tool call: {events:?}");
                start = Some((*content_index, id.clone(), tool_name.clone()));
            }
            AssistantMessageEvent::ToolCallDelta { delta, .. } => deltas.push_str(delta),
            AssistantMessageEvent::ToolCallEnd {
                content_index,
                tool_call,
            } => end = Some((*content_index, tool_call.clone())),
            AssistantMessageEvent::TextDelta { delta, .. } => {
                panic!("text in a required tool call: {delta:?}")
            }
            _ => {}
        }
    }
    let (index, id, tool_name) = start.expect("a toolcall_start event");
    let (end_index, call) = end.expect("a toolcall_end event");
    eprintln!("call: {call:?}; streamed arguments {deltas:?}");
    assert_eq!(index, end_index);
    assert!(id.starts_with("call_local_"), "{id}");
    assert_eq!(call.id, id);
    assert_eq!(call.name, tool_name);
    assert_well_formed(&call.name, &call.arguments);
    let streamed: Value = serde_json::from_str(&deltas).expect("streamed arguments parse");
    assert_eq!(streamed, call.arguments);

    match events.last() {
        Some(AssistantMessageEvent::Done { reason, message }) => {
            assert_eq!(*reason, StopReason::ToolUse);
            assert_eq!(message.stop_reason, StopReason::ToolUse);
            let calls: Vec<_> = message.tool_calls().collect();
            assert_eq!(calls, vec![&call]);
            assert!(message.usage.output > 0);
        }
        other => panic!("expected Done, got {other:?}"),
    }
}

#[tokio::test]
async fn auto_tool_choice_ends_cleanly_and_follow_up_renders() {
    let _serial = SERIAL.lock().await;
    let Some(path) = model_file() else { return };
    let m = model(&path, None);
    let options = || StreamOptions {
        max_tokens: Some(60),
        ..StreamOptions::default()
    };
    let events: Vec<_> = provider().stream(&m, &context(), options()).collect().await;
    let message = match events.last() {
        Some(AssistantMessageEvent::Done { message, .. }) => message.clone(),
        other => panic!("expected Done, got {other:?}"),
    };
    eprintln!(
        "auto: {:?} text {:?} calls {:?}",
        message.stop_reason,
        message.text(),
        message.tool_calls().collect::<Vec<_>>()
    );
    for call in message.tool_calls() {
        assert_well_formed(&call.name, &call.arguments);
    }
    if message.tool_calls().next().is_some() {
        assert!(matches!(
            message.stop_reason,
            StopReason::ToolUse | StopReason::Length
        ));
    } else {
        assert!(matches!(
            message.stop_reason,
            StopReason::Stop | StopReason::Length
        ));
    }

    // A follow-up turn with an earlier tool call and its result renders and answers.
    let mut call_msg = pi_ai::AssistantMessage::empty(&m);
    call_msg.content = vec![pi_ai::Content::ToolCall(pi_ai::ToolCall {
        id: "call_local_1".into(),
        name: "ls".into(),
        arguments: json!({"path": "."}),
        thought_signature: None,
        extra: Default::default(),
    })];
    call_msg.stop_reason = StopReason::ToolUse;
    let mut ctx = context();
    ctx.messages.push(Message::Assistant(call_msg));
    ctx.messages
        .push(Message::ToolResult(pi_ai::ToolResultMessage {
            tool_call_id: "call_local_1".into(),
            tool_name: "ls".into(),
            content: vec![pi_ai::Content::text("Cargo.toml\nREADME.md\nsrc/")],
            details: None,
            is_error: false,
            duration_ms: None,
            nested_calls: None,
            timestamp: 0,
            extra: Default::default(),
        }));
    let options = StreamOptions {
        max_tokens: Some(200),
        ..StreamOptions::default()
    };
    let events: Vec<_> = provider()
        .stream(&model(&path, Some("required")), &ctx, options)
        .collect()
        .await;
    match events.last() {
        Some(AssistantMessageEvent::Done { reason, message }) => {
            assert_eq!(*reason, StopReason::ToolUse);
            let call = message.tool_calls().next().expect("a tool call");
            // Ids continue after the conversation's own.
            assert_eq!(call.id, "call_local_2");
            assert_well_formed(&call.name, &call.arguments);
        }
        other => panic!("expected Done, got {other:?}"),
    }
}
