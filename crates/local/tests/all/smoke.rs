//! End-to-end checks against a real GGUF model on the CPU.
//!
//! Model file: env `PI_LOCAL_TEST_MODEL`, else
//! `<default models dir>/SmolLM2-135M-Instruct.Q4_1.gguf` (`scripts/fetch-default-model.sh`).
//! Each test prints a notice and passes when the file is absent, or fails when
//! `PI_REQUIRE_TEST_RESOURCES=1`.

use futures::StreamExt;
use pi_ai::{
    AssistantMessage, AssistantMessageEvent, Context, Message, Model, Provider, StopReason,
    StreamOptions,
};
use pi_local::{discover_models, LocalConfig, LocalProvider, SamplingConfig};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const DEFAULT_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The tests share one process-wide worker (and KV cache) per model file; run them one at a
/// time so that the cache-reuse figures are those of one conversation.
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
    let how = "run scripts/fetch-default-model.sh or set PI_LOCAL_TEST_MODEL";
    let path = match std::env::var_os("PI_LOCAL_TEST_MODEL") {
        Some(p) => PathBuf::from(p),
        None => match pi_local::default_models_dir() {
            Some(dir) => dir.join(DEFAULT_FILE),
            None => {
                missing_resource("no model file (no default models folder)", how);
                return None;
            }
        },
    };
    if path.is_file() {
        Some(path)
    } else {
        missing_resource(&format!("no model file at {}", path.display()), how);
        None
    }
}

/// The discovered model for `path` (checks `discover_models` on the way).
fn model_for(path: &Path) -> Model {
    let dir = path.parent().expect("model file has a parent folder");
    let models = discover_models(dir);
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.into());
    let found = models
        .into_iter()
        .find(|m| canonical(m.base_url.as_ref()) == canonical(path))
        .expect("discover_models lists the model file");
    assert_eq!(found.provider, "local");
    assert_eq!(found.api, pi_local::API);
    assert!(found.context_window >= 512, "{found:?}");
    assert!(found.max_tokens > 0 && found.max_tokens <= found.context_window);
    assert_eq!(found.input, vec!["text".to_string()]);
    found
}

fn provider() -> LocalProvider {
    LocalProvider::with_config(LocalConfig {
        sampling: SamplingConfig::greedy(),
        ..LocalConfig::default()
    })
}

fn context(messages: Vec<Message>) -> Context {
    Context {
        system_prompt: "You are a helpful assistant. Answer briefly.".into(),
        messages,
        tools: vec![],
    }
}

fn final_message(events: &[AssistantMessageEvent]) -> (&AssistantMessage, bool) {
    match events.last() {
        Some(AssistantMessageEvent::Done { message, .. }) => (message, true),
        Some(AssistantMessageEvent::Error { message, .. }) => (message, false),
        other => panic!("stream did not end with Done/Error: {other:?}"),
    }
}

#[tokio::test]
async fn streams_an_answer_with_real_usage() {
    let _serial = SERIAL.lock().await;
    let Some(path) = model_file() else { return };
    let model = model_for(&path);
    let started = Instant::now();
    let options = StreamOptions {
        max_tokens: Some(40),
        ..StreamOptions::default()
    };
    let events: Vec<_> = provider()
        .stream(
            &model,
            &context(vec![Message::user_text("What is the capital of France?")]),
            options,
        )
        .collect()
        .await;
    eprintln!("first answer in {:?}", started.elapsed());

    assert!(matches!(
        events.first(),
        Some(AssistantMessageEvent::Start { .. })
    ));
    assert!(events
        .iter()
        .any(|e| matches!(e, AssistantMessageEvent::TextStart { content_index: 0 })));
    let deltas: String = events
        .iter()
        .filter_map(|e| match e {
            AssistantMessageEvent::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert!(!deltas.is_empty(), "no text deltas: {events:?}");
    let text_end = events.iter().find_map(|e| match e {
        AssistantMessageEvent::TextEnd { content, .. } => Some(content.clone()),
        _ => None,
    });
    assert_eq!(text_end.as_deref(), Some(deltas.as_str()));

    let (message, done) = final_message(&events);
    assert!(done, "ended with error: {:?}", message.error_message);
    eprintln!("answer: {:?} usage: {:?}", message.text(), message.usage);
    assert_eq!(message.text(), deltas);
    assert!(matches!(
        message.stop_reason,
        StopReason::Stop | StopReason::Length
    ));
    let u = &message.usage;
    assert!(u.input + u.cache_read > 10, "prompt tokens: {u:?}");
    assert!(u.output > 0 && u.output <= 40, "completion tokens: {u:?}");
    assert_eq!(u.total_tokens, u.input + u.cache_read + u.output);
    assert_eq!(u.cost.total, 0.0);
    assert_eq!(message.provider, "local");
}

#[tokio::test]
async fn second_turn_reuses_the_kv_cache() {
    let _serial = SERIAL.lock().await;
    let Some(path) = model_file() else { return };
    let model = model_for(&path);
    let p = provider();
    let options = || StreamOptions {
        max_tokens: Some(16),
        ..StreamOptions::default()
    };
    let first_turn = vec![Message::user_text("Name a color.")];
    let events: Vec<_> = p
        .stream(&model, &context(first_turn.clone()), options())
        .collect()
        .await;
    let (first, done) = final_message(&events);
    assert!(done, "{:?}", first.error_message);

    let mut messages = first_turn;
    messages.push(Message::Assistant(first.clone()));
    messages.push(Message::user_text("Name another one."));
    let events: Vec<_> = p
        .stream(&model, &context(messages), options())
        .collect()
        .await;
    let (second, done) = final_message(&events);
    assert!(done, "{:?}", second.error_message);
    eprintln!("second turn usage: {:?}", second.usage);
    // The whole first prompt is still in the KV cache: only the new suffix is evaluated.
    let first_prompt = first.usage.input + first.usage.cache_read;
    assert!(
        second.usage.cache_read >= first_prompt,
        "re-used {} of the first turn's {first_prompt} prompt tokens",
        second.usage.cache_read
    );
    assert!(second.usage.input > 0 && second.usage.input < first_prompt);
}

#[tokio::test]
async fn cancel_stops_decoding_promptly() {
    let _serial = SERIAL.lock().await;
    let Some(path) = model_file() else { return };
    let model = model_for(&path);
    let options = StreamOptions {
        max_tokens: Some(2000),
        ..StreamOptions::default()
    };
    let cancel = options.cancel.clone();
    let mut stream = provider().stream(
        &model,
        &context(vec![Message::user_text(
            "Write a very long story about a dragon who learns to cook. Use many chapters.",
        )]),
        options,
    );

    let mut deltas = 0usize;
    let mut cancelled_at = None;
    let mut last = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    while let Some(event) = tokio::time::timeout_at(deadline.into(), stream.next())
        .await
        .expect("stream stalled")
    {
        if let AssistantMessageEvent::TextDelta { .. } = event {
            deltas += 1;
            if deltas == 3 {
                cancel.cancel();
                cancelled_at = Some((Instant::now(), deltas));
            }
        }
        last = Some(event);
    }
    let (at, seen) = cancelled_at.expect("at least 3 text deltas before the end");
    let latency = at.elapsed();
    eprintln!("abort settled {latency:?} after cancel; deltas {seen} → {deltas}");
    assert!(latency < Duration::from_secs(2), "abort took {latency:?}");

    match last {
        Some(AssistantMessageEvent::Error { reason, message }) => {
            assert_eq!(reason, StopReason::Aborted);
            assert_eq!(message.stop_reason, StopReason::Aborted);
            assert_eq!(
                message.error_message.as_deref(),
                Some("Request was aborted")
            );
            assert!(
                message.usage.output <= seen as u64 + 8,
                "kept decoding after cancel: {} tokens",
                message.usage.output
            );
        }
        other => panic!("expected an aborted Error, got {other:?}"),
    }
}
