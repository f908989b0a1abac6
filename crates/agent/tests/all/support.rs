//! Scripted provider, fake tools, hooks and event summaries shared by the agent-loop tests.

#![allow(dead_code)]

use async_trait::async_trait;
use futures::StreamExt;
use pi_agent::{
    run_agent_loop, AgentEvent, AgentTool, EmitFn, RunHooks, SharedMessages, ToolContext,
    ToolError, ToolOutput, TurnConfig,
};
use pi_ai::{
    AssistantMessage, AssistantMessageEvent, AssistantStream, Content, Context, Message, Model,
    Provider, StopReason, StreamOptions, ThinkingLevel, ToolCall, ToolDefinition,
};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Bound for a whole run (liveness only; runs take milliseconds).
pub const LIVENESS: Duration = Duration::from_secs(30);

/// The model every scripted reply claims to come from.
pub fn model() -> Model {
    let mut m = Model::unknown();
    m.id = "scripted-model".into();
    m.name = "Scripted".into();
    m.api = "scripted".into();
    m.provider = "test".into();
    m.context_window = 100_000;
    m.max_tokens = 4096;
    m
}

/// One step of a scripted reply.
pub enum Step {
    /// Yield this event.
    Event(AssistantMessageEvent),
    /// Wait until the request's cancel token fires, then end with `Error { Aborted }` carrying
    /// the partial message built so far.
    WaitForAbort(AssistantMessage),
}

/// A provider that answers each request with the next scripted reply and records the
/// contexts it was sent. When the script is exhausted it answers with an error message.
#[derive(Default)]
pub struct ScriptedProvider {
    replies: Mutex<VecDeque<Vec<Step>>>,
    contexts: Mutex<Vec<Context>>,
}

impl ScriptedProvider {
    pub fn new(replies: Vec<Vec<Step>>) -> Arc<Self> {
        Arc::new(ScriptedProvider {
            replies: Mutex::new(replies.into()),
            contexts: Mutex::new(Vec::new()),
        })
    }

    /// The contexts of all requests so far, in order.
    pub fn contexts(&self) -> Vec<Context> {
        self.contexts.lock().unwrap().clone()
    }
}

impl Provider for ScriptedProvider {
    fn api(&self) -> &'static str {
        "scripted"
    }

    fn stream(&self, _model: &Model, context: &Context, options: StreamOptions) -> AssistantStream {
        self.contexts.lock().unwrap().push(context.clone());
        let steps = self.replies.lock().unwrap().pop_front().unwrap_or_else(|| {
            let mut m = AssistantMessage::empty(&model());
            m.stop_reason = StopReason::Error;
            m.error_message = Some("script exhausted".into());
            vec![Step::Event(AssistantMessageEvent::Error {
                reason: StopReason::Error,
                message: Box::new(m),
            })]
        });
        let cancel = options.cancel;
        futures::stream::unfold(
            (VecDeque::from(steps), cancel),
            |(mut steps, cancel)| async move {
                let event = match steps.pop_front()? {
                    Step::Event(e) => e,
                    Step::WaitForAbort(mut partial) => {
                        cancel.cancelled().await;
                        partial.stop_reason = StopReason::Aborted;
                        partial.error_message = Some("Request was aborted".into());
                        AssistantMessageEvent::Error {
                            reason: StopReason::Aborted,
                            message: Box::new(partial),
                        }
                    }
                };
                Some((event, (steps, cancel)))
            },
        )
        .boxed()
    }
}

fn start() -> Step {
    Step::Event(AssistantMessageEvent::Start {
        partial: Box::new(AssistantMessage::empty(&model())),
    })
}

fn text_events(text: &str) -> Vec<Step> {
    vec![
        Step::Event(AssistantMessageEvent::TextStart { content_index: 0 }),
        Step::Event(AssistantMessageEvent::TextDelta {
            content_index: 0,
            delta: text.into(),
        }),
        Step::Event(AssistantMessageEvent::TextEnd {
            content_index: 0,
            content: text.into(),
        }),
    ]
}

fn done(message: AssistantMessage) -> Step {
    Step::Event(AssistantMessageEvent::Done {
        reason: message.stop_reason,
        message: Box::new(message),
    })
}

/// A complete text reply (`stopReason: "stop"`).
pub fn text_reply(text: &str) -> Vec<Step> {
    let mut m = AssistantMessage::empty(&model());
    m.content = vec![Content::text(text)];
    m.stop_reason = StopReason::Stop;
    let mut steps = vec![start()];
    steps.extend(text_events(text));
    steps.push(done(m));
    steps
}

/// A reply asking for these tool calls `(id, name, arguments)` (`stopReason: "toolUse"`).
pub fn tool_reply(calls: &[(&str, &str, Value)]) -> Vec<Step> {
    let mut m = AssistantMessage::empty(&model());
    m.stop_reason = StopReason::ToolUse;
    let mut steps = vec![start()];
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let call = ToolCall {
            id: (*id).into(),
            name: (*name).into(),
            arguments: args.clone(),
            thought_signature: None,
            extra: Default::default(),
        };
        steps.push(Step::Event(AssistantMessageEvent::ToolCallStart {
            content_index: i,
            id: call.id.clone(),
            tool_name: call.name.clone(),
        }));
        steps.push(Step::Event(AssistantMessageEvent::ToolCallEnd {
            content_index: i,
            tool_call: call.clone(),
        }));
        m.content.push(Content::ToolCall(call));
    }
    steps.push(done(m));
    steps
}

/// A reply that streams `text` and then stalls until aborted.
pub fn stalled_reply(text: &str) -> Vec<Step> {
    let mut partial = AssistantMessage::empty(&model());
    partial.content = vec![Content::text(text)];
    let mut steps = vec![start()];
    steps.extend(text_events(text).into_iter().take(2));
    steps.push(Step::WaitForAbort(partial));
    steps
}

/// A reply that starts and then ends without `Done`/`Error`.
pub fn truncated_reply() -> Vec<Step> {
    vec![start()]
}

/// Shared queue of messages (steering or follow-up).
pub type Queue = Arc<Mutex<VecDeque<Message>>>;

/// The loop's owner: fixed model and tools, one-at-a-time queues.
pub struct Hooks {
    pub provider: Arc<ScriptedProvider>,
    pub tools: Vec<Arc<dyn AgentTool>>,
    pub steering: Queue,
    pub follow_up: Queue,
}

impl Hooks {
    pub fn new(provider: Arc<ScriptedProvider>, tools: Vec<Arc<dyn AgentTool>>) -> Self {
        Hooks {
            provider,
            tools,
            steering: Queue::default(),
            follow_up: Queue::default(),
        }
    }
}

impl RunHooks for Hooks {
    fn turn_config(&self) -> futures::future::BoxFuture<'_, TurnConfig> {
        Box::pin(async move {
            TurnConfig {
                model: model(),
                provider: self.provider.clone(),
                system_prompt: "You are a test.".into(),
                tools: self.tools.clone(),
                thinking_level: ThinkingLevel::Off,
                api_key: None,
                headers: vec![],
                session_id: None,
                tuning: Default::default(),
            }
        })
    }

    fn convert_to_llm(&self, messages: &[Message]) -> Vec<Message> {
        messages
            .iter()
            .filter(|m| {
                matches!(
                    m,
                    Message::User(_) | Message::Assistant(_) | Message::ToolResult(_)
                )
            })
            .cloned()
            .collect()
    }

    fn drain_steering(&self) -> Vec<Message> {
        self.steering
            .lock()
            .unwrap()
            .pop_front()
            .into_iter()
            .collect()
    }

    fn drain_follow_up(&self) -> Vec<Message> {
        self.follow_up
            .lock()
            .unwrap()
            .pop_front()
            .into_iter()
            .collect()
    }
}

/// What one run produced.
pub struct Run {
    /// The messages `run_agent_loop` returned.
    pub created: Vec<Message>,
    /// Every event, in emission order.
    pub events: Vec<AgentEvent>,
    /// The shared transcript after the run.
    pub transcript: Vec<Message>,
}

impl Run {
    /// One line per event, see [`summary`].
    pub fn summary(&self) -> Vec<String> {
        self.events.iter().map(summary).collect()
    }

    /// The last assistant message created.
    pub fn last_assistant(&self) -> AssistantMessage {
        self.created
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant(a) => Some(a.clone()),
                _ => None,
            })
            .expect("an assistant message")
    }
}

/// Runs one agent run with prompt `prompt`; `on_event` sees every event as it is emitted.
pub async fn run_with(
    hooks: &Hooks,
    prompt: &str,
    cancel: &CancellationToken,
    on_event: impl Fn(&AgentEvent) + Send + Sync + 'static,
) -> Run {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let emit: EmitFn = Arc::new(move |e: AgentEvent| {
        on_event(&e);
        sink.lock().unwrap().push(e);
        None
    });
    let messages: SharedMessages = Arc::default();
    let created = tokio::time::timeout(
        LIVENESS,
        run_agent_loop(
            messages.clone(),
            vec![Message::user_text(prompt)],
            hooks,
            cancel,
            &emit,
        ),
    )
    .await
    .expect("the run ended");
    let events = events.lock().unwrap().clone();
    let transcript = messages.lock().unwrap().clone();
    Run {
        created,
        events,
        transcript,
    }
}

/// [`run_with`] without an abort and without an event callback.
pub async fn run(hooks: &Hooks, prompt: &str) -> Run {
    run_with(hooks, prompt, &CancellationToken::new(), |_| {}).await
}

fn message_label(m: &Message) -> String {
    match m {
        Message::User(u) => format!("user:{}", u.content.joined_text()),
        Message::Assistant(_) => "assistant".into(),
        Message::ToolResult(r) => format!("toolResult:{}", r.tool_call_id),
        other => other.role().to_owned(),
    }
}

/// A one-line label of an event, e.g. `message_start:user:hi`, `tool_execution_end:call_1`,
/// `message_update:text_delta`.
pub fn summary(e: &AgentEvent) -> String {
    match e {
        AgentEvent::AgentStart => "agent_start".into(),
        AgentEvent::AgentEnd { .. } => "agent_end".into(),
        AgentEvent::TurnStart => "turn_start".into(),
        AgentEvent::TurnEnd { .. } => "turn_end".into(),
        AgentEvent::MessageStart { message } => format!("message_start:{}", message_label(message)),
        AgentEvent::MessageEnd { message } => format!("message_end:{}", message_label(message)),
        AgentEvent::MessageUpdate { event, .. } => {
            let v = serde_json::to_value(event).expect("event json");
            format!("message_update:{}", v["type"].as_str().unwrap_or("?"))
        }
        AgentEvent::ToolExecutionStart { tool_call_id, .. } => {
            format!("tool_execution_start:{tool_call_id}")
        }
        AgentEvent::ToolExecutionUpdate { tool_call_id, .. } => {
            format!("tool_execution_update:{tool_call_id}")
        }
        AgentEvent::ToolExecutionEnd { tool_call_id, .. } => {
            format!("tool_execution_end:{tool_call_id}")
        }
    }
}

/// The text of a tool output.
pub fn output_text(out: &ToolOutput) -> String {
    out.content.iter().filter_map(Content::as_text).collect()
}

fn definition(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: format!("test tool {name}"),
        parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
    }
}

/// Returns its `text` argument (or `name` when absent).
pub struct EchoTool {
    pub name: &'static str,
}

#[async_trait]
impl AgentTool for EchoTool {
    fn definition(&self) -> ToolDefinition {
        let mut d = definition(self.name);
        d.parameters = json!({"type": "object", "required": ["text"],
            "properties": {"text": {"type": "string"}}});
        d
    }

    async fn execute(&self, _ctx: ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let text = args["text"].as_str().unwrap_or(self.name).to_owned();
        Ok(ToolOutput::text(text))
    }
}

/// Waits for `wait` (if any) before finishing, and notifies `then` (if any) when done.
pub struct GateTool {
    pub name: &'static str,
    pub wait: Option<Arc<Notify>>,
    pub then: Option<Arc<Notify>>,
}

#[async_trait]
impl AgentTool for GateTool {
    fn definition(&self) -> ToolDefinition {
        definition(self.name)
    }

    async fn execute(&self, ctx: ToolContext, _args: Value) -> Result<ToolOutput, ToolError> {
        if let Some(gate) = &self.wait {
            tokio::select! {
                _ = gate.notified() => {}
                _ = ctx.cancel.cancelled() => return Err(ToolError::Aborted),
            }
        }
        if let Some(next) = &self.then {
            next.notify_one();
        }
        Ok(ToolOutput::text(format!("{} done", self.name)))
    }
}

/// Queues a steering message while it runs.
pub struct SteerTool {
    pub queue: Queue,
    pub text: &'static str,
}

#[async_trait]
impl AgentTool for SteerTool {
    fn definition(&self) -> ToolDefinition {
        definition("steer")
    }

    async fn execute(&self, _ctx: ToolContext, _args: Value) -> Result<ToolOutput, ToolError> {
        self.queue
            .lock()
            .unwrap()
            .push_back(Message::user_text(self.text));
        Ok(ToolOutput::text("queued"))
    }
}

/// Panics with `message`.
pub struct PanicTool {
    pub message: &'static str,
}

#[async_trait]
impl AgentTool for PanicTool {
    fn definition(&self) -> ToolDefinition {
        definition("explode")
    }

    async fn execute(&self, _ctx: ToolContext, _args: Value) -> Result<ToolOutput, ToolError> {
        panic!("{}", self.message);
    }
}

/// Fails with the given error.
pub struct FailTool {
    pub error: ToolError,
}

#[async_trait]
impl AgentTool for FailTool {
    fn definition(&self) -> ToolDefinition {
        definition("fail")
    }

    async fn execute(&self, _ctx: ToolContext, _args: Value) -> Result<ToolOutput, ToolError> {
        Err(self.error.clone())
    }
}
