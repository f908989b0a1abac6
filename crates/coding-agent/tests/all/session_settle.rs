//! Every run settles on every path (issue "one typed protocol and a session runtime"): a
//! tool that panics, a provider that panics, and a run future that is dropped mid-run each
//! end with `agent_settled`, the phase back to idle, and a next prompt that runs. The
//! session is real (store, loop, OpenAI adapter) and talks to the fake LLM on 127.0.0.1.

use async_trait::async_trait;
use parking_lot::Mutex;
use pi_agent::{AgentTool, ToolContext, ToolError, ToolOutput};
use pi_ai::{Model, Provider, ToolDefinition};
use pi_coding_agent::agent_session::{
    AgentSession, EventSink, Loadout, PromptOutcome, RequestCredentials, SessionConfig,
    SessionServices,
};
use pi_coding_agent::config::Settings;
use pi_coding_agent::protocol::rpc::RpcEvent;
use pi_coding_agent::session::SessionManager;
use pi_coding_agent::system_prompt::{build_system_message, PromptTool, SystemPromptInput};
use pi_fakellm::{FakeLlm, Script, Turn};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Generous liveness bound; never a speed assertion.
const LIVENESS: Duration = Duration::from_secs(60);

struct PanicTool;

#[async_trait]
impl AgentTool for PanicTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "explode".into(),
            description: "Panics.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }
    async fn execute(&self, _ctx: ToolContext, _args: Value) -> Result<ToolOutput, ToolError> {
        panic!("tool exploded on purpose");
    }
}

/// Panics on its first call, then delegates to the real OpenAI adapter.
struct PanicOnceProvider {
    fired: AtomicBool,
    real: Arc<dyn Provider>,
}

impl Provider for PanicOnceProvider {
    fn api(&self) -> &'static str {
        "openai-completions"
    }
    fn stream(
        &self,
        model: &Model,
        context: &pi_ai::Context,
        options: pi_ai::StreamOptions,
    ) -> pi_ai::AssistantStream {
        if !self.fired.swap(true, Ordering::SeqCst) {
            panic!("provider exploded on purpose");
        }
        self.real.stream(model, context, options)
    }
}

struct Harness {
    session: AgentSession,
    events: Arc<Mutex<Vec<RpcEvent>>>,
    _fake: FakeLlm,
    _dir: tempfile::TempDir,
}

fn model(port: u16) -> Model {
    serde_json::from_value(json!({
        "id": "fake-gpt-mini", "name": "Fake GPT Mini", "api": "openai-completions",
        "provider": "fake-openai", "baseUrl": format!("http://127.0.0.1:{port}/v1"),
        "reasoning": false, "input": ["text"],
        "cost": {"input": 0.5, "output": 1.5, "cacheRead": 0.05, "cacheWrite": 0},
        "contextWindow": 32000, "maxTokens": 4096
    }))
    .unwrap()
}

fn harness(script: Script, panic_provider: bool) -> Harness {
    let fake = FakeLlm::spawn(script).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().to_path_buf();
    let model = model(fake.port());
    let real = pi_ai::providers::provider_for_api("openai-completions").unwrap();
    let provider: Arc<dyn Provider> = if panic_provider {
        Arc::new(PanicOnceProvider {
            fired: AtomicBool::new(false),
            real,
        })
    } else {
        real
    };
    let listed = model.clone();
    let services = SessionServices {
        mcp: None,
        available_models: Arc::new(move || vec![listed.clone()]),
        scoped_models: vec![],
        api_key: Arc::new(|_, _| {
            Ok(RequestCredentials {
                api_key: Some("fake-openai-key".into()),
                ..Default::default()
            })
        }),
        provider: Arc::new(move |_| Some(provider.clone())),
        settings: Arc::new(Mutex::new(Settings::default())),
        extensions: None,
        permissions: None,
    };
    let tools: Vec<Arc<dyn AgentTool>> = vec![Arc::new(PanicTool)];
    let input = SystemPromptInput::new(
        cwd.clone(),
        tools
            .iter()
            .map(|t| PromptTool::new(t.definition()))
            .collect(),
    );
    let (system_message, system_prompt) = build_system_message(&input);
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink_events = events.clone();
    let sink: EventSink = Arc::new(move |e| sink_events.lock().push(e));
    let session = AgentSession::new(
        SessionConfig {
            cwd: cwd.clone(),
            bash_options: Default::default(),
            model: Some(model),
            thinking_level: pi_ai::ThinkingLevel::Off,
            loadout: Loadout {
                tools,
                system_message,
                system_prompt,
                commands: Default::default(),
                session_env: None,
                image_policy: None,
                codemode_store: None,
                mcp_section: None,
                prompt_input: input,
            },
            store: SessionManager::in_memory(&cwd),
        },
        services,
        sink,
    );
    Harness {
        session,
        events,
        _fake: fake,
        _dir: dir,
    }
}

impl Harness {
    fn start(&self, text: &str) -> tokio::task::JoinHandle<()> {
        match self.session.prompt(text.into(), vec![], None) {
            Ok(PromptOutcome::Started(run)) => tokio::spawn(run),
            Ok(PromptOutcome::Queued) => panic!("prompt was queued, the session is not idle"),
            Err(e) => panic!("prompt refused: {e}"),
        }
    }

    async fn run(&self, text: &str) {
        let handle = self.start(text);
        tokio::time::timeout(LIVENESS, handle)
            .await
            .expect("run settles")
            .expect("run task does not panic");
    }

    fn settled_count(&self) -> usize {
        self.events
            .lock()
            .iter()
            .filter(|e| matches!(e, RpcEvent::AgentSettled { .. }))
            .count()
    }

    fn last_assistant_text(&self) -> Option<String> {
        self.session.last_assistant_text()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_becomes_an_error_result_and_the_run_settles() {
    let h = harness(
        Script::new([
            Turn::tool_call("explode", json!({})),
            Turn::text("The tool failed."),
            Turn::text("Second prompt answered."),
        ]),
        false,
    );
    h.run("Use the tool").await;
    assert_eq!(h.settled_count(), 1);
    assert!(!h.session.is_streaming());
    assert!(!h.session.state().is_streaming);
    let end = h
        .events
        .lock()
        .iter()
        .find_map(|e| match e {
            RpcEvent::ToolExecutionEnd {
                is_error, result, ..
            } => Some((*is_error, serde_json::to_string(result).unwrap())),
            _ => None,
        })
        .expect("tool_execution_end");
    assert!(end.0, "the panic is an error result");
    assert!(end.1.contains("tool exploded on purpose"), "{}", end.1);
    assert_eq!(h.last_assistant_text().as_deref(), Some("The tool failed."));

    h.run("Again").await;
    assert_eq!(h.settled_count(), 2);
    assert_eq!(
        h.last_assistant_text().as_deref(),
        Some("Second prompt answered.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_provider_ends_the_run_with_an_error_message_and_settles() {
    let h = harness(Script::new([Turn::text("Back to normal.")]), true);
    h.run("First").await;
    assert_eq!(h.settled_count(), 1);
    assert!(!h.session.is_streaming());
    {
        let events = h.events.lock();
        let end = events
            .iter()
            .find_map(|e| match e {
                RpcEvent::AgentEnd { messages, .. } => Some(messages.clone()),
                _ => None,
            })
            .expect("agent_end");
        let Some(pi_ai::Message::Assistant(a)) = end.last() else {
            panic!("agent_end ends with an assistant message: {end:?}");
        };
        assert_eq!(a.stop_reason, pi_ai::StopReason::Error);
        assert!(a
            .error_message
            .as_deref()
            .unwrap_or_default()
            .contains("provider exploded on purpose"));
        assert!(matches!(
            events.last(),
            Some(RpcEvent::AgentSettled { aborted: false })
        ));
    }
    h.run("Second").await;
    assert_eq!(h.settled_count(), 2);
    assert_eq!(h.last_assistant_text().as_deref(), Some("Back to normal."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_dropped_mid_stream_still_settles() {
    // The first reply stalls; the run future is dropped (task aborted) while it waits.
    let h = harness(
        Script::new([
            Turn::text("This reply stalls forever").stall_after(2, 30_000),
            Turn::text("Next prompt works."),
        ]),
        false,
    );
    let handle = h.start("Stall");
    let deadline = tokio::time::Instant::now() + LIVENESS;
    while !h.events.lock().iter().any(|e| {
        matches!(
            e,
            RpcEvent::MessageStart {
                message: pi_ai::Message::Assistant(_)
            }
        )
    }) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no assistant message_start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    handle.abort();
    let _ = handle.await;
    tokio::time::timeout(LIVENESS, h.session.wait_settled())
        .await
        .expect("settles after the run future was dropped");
    assert_eq!(h.settled_count(), 1);
    assert!(!h.session.is_streaming());
    h.run("Next").await;
    assert_eq!(
        h.last_assistant_text().as_deref(),
        Some("Next prompt works.")
    );
}
