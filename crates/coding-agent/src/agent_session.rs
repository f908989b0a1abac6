//! The session-level runtime behind every mode (upstream `core/agent-session.ts`).
//!
//! An [`AgentSession`] owns the context transcript, the session store, the model and thinking
//! level, the steering/follow-up queues and the run in flight. It turns low-level
//! [`AgentEvent`]s into protocol events (JSON objects handed to an [`EventSink`]), persists
//! messages on `message_end`, and closes every run with `agent_settled`
//! (spec rpc-protocol.md §5.1, upstream-1.6-notes.md §1).

pub use crate::config::QueueMode;
use crate::config::ScopedModel;
use crate::session::SessionManager;
use crate::tools::shell::{execute_user_bash, BashResult, UserBashOptions};
use crate::tools::util::json_number;
use pi_agent::{
    run_agent_loop, AgentEvent, AgentTool, EmitFn, RunHooks, SharedMessages, TurnConfig,
};
use pi_ai::BashExecutionMessage;
use pi_ai::{
    now_ms, AssistantMessage, Content, ImageContent, Message, Model, Provider, StopReason,
    SystemMessage, ThinkingLevel, UserContent, UserMessage,
};
use serde_json::{json, Map, Value};
use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Receives every protocol event as a JSON object, in order.
pub type EventSink = Arc<dyn Fn(Value) + Send + Sync>;

/// Credentials for one request: API key (if any) and extra headers.
#[derive(Debug, Clone, Default)]
pub struct RequestCredentials {
    /// The provider API key; `None` = send no key.
    pub api_key: Option<String>,
    /// Extra HTTP headers for the request (e.g. from models.json).
    pub headers: Vec<(String, String)>,
    /// The model needs no credentials (an in-process GGUF model, issue 3): a prompt is not
    /// refused for lack of a key.
    pub keyless: bool,
}

/// Looks up credentials for a model's provider at request time; `Err` = none usable.
pub type KeyResolver = Arc<dyn Fn(&Model) -> Result<RequestCredentials, String> + Send + Sync>;

/// Finds the adapter for a model's `api`.
pub type ProviderResolver = Arc<dyn Fn(&Model) -> Option<Arc<dyn Provider>> + Send + Sync>;

/// Everything a session needs at construction; filled by the CLI from settings and flags.
pub struct SessionOptions {
    /// Working directory; the RPC `bash` command runs here.
    pub cwd: PathBuf,
    /// Shell settings for the RPC `bash` command.
    pub bash_options: UserBashOptions,
    /// Initial model; `None` = no model configured (get_state shows the placeholder).
    pub model: Option<Model>,
    /// Initial thinking level.
    pub thinking_level: ThinkingLevel,
    /// Models with credentials, in registry order (`get_available_models`).
    pub available_models: Arc<dyn Fn() -> Vec<Model> + Send + Sync>,
    /// The `--models` / `enabledModels` scope that `cycle_model` walks (config.md §7.4);
    /// empty = cycle through every available model.
    pub scoped_models: Vec<ScopedModel>,
    /// Credential lookup, asked before every LLM call.
    pub api_key: KeyResolver,
    /// Adapter lookup by the model's `api`.
    pub provider: ProviderResolver,
    /// Active tools, in the order offered to the model.
    pub tools: Vec<Arc<dyn AgentTool>>,
    /// The `role:"system"` message recorded at the first run, and the flat prompt text.
    pub system_message: SystemMessage,
    /// The flat system prompt text sent to the model.
    pub system_prompt: String,
    /// The session store (file-backed or in-memory).
    pub session: SessionManager,
    /// How queued steering messages are delivered (settings `steeringMode`).
    pub steering_mode: QueueMode,
    /// How queued follow-up messages are delivered (settings `followUpMode`).
    pub follow_up_mode: QueueMode,
    /// Auto-compaction and overflow recovery on (settings `compaction.enabled`).
    pub auto_compaction: bool,
    /// Automatic retry of transient errors on (settings `retry.enabled`).
    pub auto_retry: bool,
}

/// How a `prompt` was taken (`data.disposition`).
pub enum PromptOutcome {
    /// A run must be started: write the response first, then await/spawn the future.
    Started(Pin<Box<dyn Future<Output = ()> + Send>>),
    /// Disposition `queued`: the agent was busy, so the message went into the steering or
    /// follow-up queue (rpc-protocol.md §4.1).
    Queued,
}

struct Queues {
    steering: VecDeque<Message>,
    follow_up: VecDeque<Message>,
}

struct State {
    model: Option<Model>,
    thinking_level: ThinkingLevel,
    session: SessionManager,
    system_recorded: bool,
    steering_mode: QueueMode,
    follow_up_mode: QueueMode,
    auto_compaction: bool,
    auto_retry: bool,
    cancel: Option<CancellationToken>,
    aborted: bool,
}

struct Inner {
    cwd: PathBuf,
    bash_options: UserBashOptions,
    bash_cancel: Mutex<CancellationToken>,
    deferred_bash: Mutex<Vec<Message>>,
    messages: SharedMessages,
    state: Mutex<State>,
    queues: Mutex<Queues>,
    sink: EventSink,
    streaming_tx: watch::Sender<bool>,
    /// True once the last run's `agent_settled` has been queued (what `abort` waits for).
    settled_tx: watch::Sender<bool>,
    available_models: Arc<dyn Fn() -> Vec<Model> + Send + Sync>,
    scoped_models: Vec<ScopedModel>,
    api_key: KeyResolver,
    provider: ProviderResolver,
    tools: Vec<Arc<dyn AgentTool>>,
    system_message: SystemMessage,
    system_prompt: String,
}

/// Cheap to clone handle to one session.
#[derive(Clone)]
pub struct AgentSession {
    inner: Arc<Inner>,
}

impl AgentSession {
    /// Builds a session; `sink` receives every event.
    pub fn new(opts: SessionOptions, sink: EventSink) -> Self {
        let messages = Arc::new(Mutex::new(opts.session.build_context()));
        let system_recorded = messages
            .lock()
            .unwrap()
            .iter()
            .any(|m| matches!(m, Message::System(_)));
        let (streaming_tx, _) = watch::channel(false);
        let (settled_tx, _) = watch::channel(true);
        AgentSession {
            inner: Arc::new(Inner {
                cwd: opts.cwd,
                bash_options: opts.bash_options,
                bash_cancel: Mutex::new(CancellationToken::new()),
                deferred_bash: Mutex::new(Vec::new()),
                messages,
                state: Mutex::new(State {
                    model: opts.model,
                    thinking_level: opts.thinking_level,
                    session: opts.session,
                    system_recorded,
                    steering_mode: opts.steering_mode,
                    follow_up_mode: opts.follow_up_mode,
                    auto_compaction: opts.auto_compaction,
                    auto_retry: opts.auto_retry,
                    cancel: None,
                    aborted: false,
                }),
                queues: Mutex::new(Queues {
                    steering: VecDeque::new(),
                    follow_up: VecDeque::new(),
                }),
                sink,
                streaming_tx,
                settled_tx,
                available_models: opts.available_models,
                scoped_models: opts.scoped_models,
                api_key: opts.api_key,
                provider: opts.provider,
                tools: opts.tools,
                system_message: opts.system_message,
                system_prompt: opts.system_prompt,
            }),
        }
    }

    /// The session header as a JSON object (first line of `--mode json`).
    pub fn header_json(&self) -> Value {
        let st = self.inner.state.lock().unwrap();
        serde_json::to_value(st.session.header()).unwrap_or(Value::Null)
    }

    /// True from prompt acceptance until `agent_settled`.
    pub fn is_streaming(&self) -> bool {
        *self.inner.streaming_tx.borrow()
    }

    /// Context transcript (`get_messages`).
    pub fn messages(&self) -> Vec<Message> {
        self.inner.messages.lock().unwrap().clone()
    }

    /// The current model, if any.
    pub fn model(&self) -> Option<Model> {
        self.inner.state.lock().unwrap().model.clone()
    }

    /// Models with credentials.
    pub fn available_models(&self) -> Vec<Model> {
        (self.inner.available_models)()
    }

    /// `get_state` data (spec rpc-protocol.md §4.2).
    pub fn state_json(&self) -> Value {
        let st = self.inner.state.lock().unwrap();
        let q = self.inner.queues.lock().unwrap();
        let model = st.model.clone().unwrap_or_else(Model::unknown);
        let mut data = Map::new();
        data.insert(
            "model".into(),
            serde_json::to_value(&model).unwrap_or(Value::Null),
        );
        data.insert("thinkingLevel".into(), json!(st.thinking_level.as_str()));
        data.insert("isStreaming".into(), json!(self.is_streaming()));
        data.insert("isCompacting".into(), json!(false));
        data.insert("steeringMode".into(), json!(st.steering_mode.as_str()));
        data.insert("followUpMode".into(), json!(st.follow_up_mode.as_str()));
        if let Some(f) = st.session.session_file() {
            data.insert("sessionFile".into(), json!(f.to_string_lossy()));
        }
        data.insert("sessionId".into(), json!(st.session.session_id()));
        if let Some(name) = st.session.session_name() {
            data.insert("sessionName".into(), json!(name));
        }
        data.insert("autoCompactionEnabled".into(), json!(st.auto_compaction));
        data.insert(
            "messageCount".into(),
            json!(self.inner.messages.lock().unwrap().len()),
        );
        data.insert(
            "pendingMessageCount".into(),
            json!(q.steering.len() + q.follow_up.len()),
        );
        Value::Object(data)
    }

    /// Supported thinking levels of the current model (`["off"]` without one; 1.6 notes §15).
    pub fn available_thinking_levels(&self) -> Vec<ThinkingLevel> {
        match self.model() {
            Some(m) => m.supported_thinking_levels(),
            None => vec![ThinkingLevel::Off],
        }
    }

    /// The current thinking level.
    pub fn thinking_level(&self) -> ThinkingLevel {
        self.inner.state.lock().unwrap().thinking_level
    }

    /// Clamps `level` to the model's supported levels and records a change
    /// (`thinking_level_change` entry). Returns the effective level.
    pub fn set_thinking_level(&self, level: ThinkingLevel) -> ThinkingLevel {
        let effective = match self.model() {
            Some(m) => crate::config::clamp_thinking_level(Some(&m), level),
            None => ThinkingLevel::Off,
        };
        let mut st = self.inner.state.lock().unwrap();
        if st.thinking_level != effective {
            st.thinking_level = effective;
            if let Err(e) = st.session.append_thinking_level_change(effective.as_str()) {
                tracing::warn!("could not record thinking level change: {e}");
            }
        }
        effective
    }

    /// Selects a model among the available ones (`set_model`).
    pub fn set_model(&self, provider: &str, model_id: &str) -> Result<Model, String> {
        let model = self
            .available_models()
            .into_iter()
            .find(|m| m.provider == provider && m.id == model_id)
            .ok_or_else(|| format!("Model not found: {provider}/{model_id}"))?;
        {
            let mut st = self.inner.state.lock().unwrap();
            st.model = Some(model.clone());
            if let Err(e) = st.session.append_model_change(&model.provider, &model.id) {
                tracing::warn!("could not record model change: {e}");
            }
        }
        let current = self.thinking_level();
        self.set_thinking_level(current);
        Ok(model)
    }

    /// Turns automatic compaction on or off (`set_auto_compaction`).
    pub fn set_auto_compaction(&self, enabled: bool) {
        self.inner.state.lock().unwrap().auto_compaction = enabled;
    }

    /// Turns automatic retry of transient errors on or off (`set_auto_retry`).
    pub fn set_auto_retry(&self, enabled: bool) {
        self.inner.state.lock().unwrap().auto_retry = enabled;
    }

    /// Whether transient provider errors are retried automatically.
    pub fn auto_retry(&self) -> bool {
        self.inner.state.lock().unwrap().auto_retry
    }

    /// Sets the steering (`steer = true`) or follow-up delivery mode.
    pub fn set_queue_mode(&self, steer: bool, mode: QueueMode) {
        let mut st = self.inner.state.lock().unwrap();
        if steer {
            st.steering_mode = mode;
        } else {
            st.follow_up_mode = mode;
        }
    }

    /// Selects the next model (`cycle_model`, rpc-protocol.md §4.3): from the scoped models
    /// that currently have credentials if there are any, else from every available model.
    /// Returns `None` when that list has at most one entry, else the model and whether it came
    /// from the scope; a scoped entry's `:level` becomes the thinking level.
    pub fn cycle_model(&self) -> Result<Option<(Model, bool)>, String> {
        let available = self.available_models();
        let scoped: Vec<&ScopedModel> = self
            .inner
            .scoped_models
            .iter()
            .filter(|s| {
                available
                    .iter()
                    .any(|m| m.provider == s.model.provider && m.id == s.model.id)
            })
            .collect();
        let is_scoped = !scoped.is_empty();
        let candidates: Vec<(Model, Option<ThinkingLevel>)> = if is_scoped {
            scoped
                .into_iter()
                .map(|s| (s.model.clone(), s.thinking_level))
                .collect()
        } else {
            available.into_iter().map(|m| (m, None)).collect()
        };
        if candidates.len() <= 1 {
            return Ok(None);
        }
        let current = self.model();
        let next = current
            .and_then(|c| {
                candidates
                    .iter()
                    .position(|(m, _)| m.provider == c.provider && m.id == c.id)
            })
            .map(|i| (i + 1) % candidates.len())
            .unwrap_or(0);
        let (target, level) = &candidates[next];
        let model = self.set_model(&target.provider, &target.id)?;
        if let Some(level) = level {
            self.set_thinking_level(*level);
        }
        Ok(Some((model, is_scoped)))
    }

    /// Text of the last assistant message (skipping aborted empty ones), or `None`.
    pub fn last_assistant_text(&self) -> Option<String> {
        let msgs = self.inner.messages.lock().unwrap();
        msgs.iter().rev().find_map(|m| match m {
            Message::Assistant(a) => {
                if a.stop_reason == StopReason::Aborted && a.content.is_empty() {
                    None
                } else {
                    Some(a.text())
                }
            }
            _ => None,
        })
    }

    /// `get_session_stats` data: totals over the whole session (1.6 notes §9).
    pub fn session_stats_json(&self) -> Value {
        let st = self.inner.state.lock().unwrap();
        let all: Vec<Message> = st
            .session
            .entries()
            .iter()
            .filter_map(|e| e.message().cloned())
            .collect();
        let (mut user, mut assistant, mut calls, mut results) = (0u64, 0u64, 0u64, 0u64);
        let (mut input, mut output, mut cr, mut cw, mut cost) = (0u64, 0u64, 0u64, 0u64, 0f64);
        for m in &all {
            match m {
                Message::User(_) => user += 1,
                Message::Assistant(a) => {
                    assistant += 1;
                    calls += a.tool_calls().count() as u64;
                    input += a.usage.input;
                    output += a.usage.output;
                    cr += a.usage.cache_read;
                    cw += a.usage.cache_write;
                    cost += a.usage.cost.total;
                }
                Message::ToolResult(_) => results += 1,
                _ => {}
            }
        }
        let total_messages = all.len();
        let window = st.model.as_ref().map(|m| m.context_window).unwrap_or(0);
        let msgs = self.inner.messages.lock().unwrap();
        let context_tokens = context_tokens(&msgs);
        let mut data = Map::new();
        data.insert("sessionId".into(), json!(st.session.session_id()));
        if let Some(f) = st.session.session_file() {
            data.insert("sessionFile".into(), json!(f.to_string_lossy()));
        }
        data.insert("userMessages".into(), json!(user));
        data.insert("assistantMessages".into(), json!(assistant));
        data.insert("toolCalls".into(), json!(calls));
        data.insert("toolResults".into(), json!(results));
        data.insert("totalMessages".into(), json!(total_messages));
        data.insert(
            "tokens".into(),
            json!({"input": input, "output": output, "cacheRead": cr, "cacheWrite": cw,
                   "total": input + output + cr + cw}),
        );
        data.insert("cost".into(), json_number(cost));
        if window > 0 {
            data.insert(
                "contextUsage".into(),
                json!({"tokens": context_tokens, "contextWindow": window,
                       "percent": json_number(context_tokens as f64 / window as f64 * 100.0)}),
            );
        }
        Value::Object(data)
    }

    /// Handles `prompt` (spec rpc-protocol.md §4.1).
    pub fn prompt(
        &self,
        text: String,
        images: Vec<ImageContent>,
        streaming_behavior: Option<&str>,
    ) -> Result<PromptOutcome, String> {
        let user = user_message(text, images);
        if self.is_streaming() {
            return match streaming_behavior {
                Some("steer") => {
                    self.enqueue(user, true);
                    Ok(PromptOutcome::Queued)
                }
                Some("followUp") => {
                    self.enqueue(user, false);
                    Ok(PromptOutcome::Queued)
                }
                _ => Err("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.".into()),
            };
        }
        let model = self
            .model()
            .ok_or_else(|| crate::config::no_api_key_message(None))?;
        if (self.inner.provider)(&model).is_none() {
            return Err(format!("No API provider registered for api: {}", model.api));
        }
        match (self.inner.api_key)(&model) {
            Ok(c) if c.keyless || c.api_key.is_some() || !c.headers.is_empty() => {}
            _ => return Err(crate::config::no_api_key_message(Some(&model.provider))),
        }
        let mut prompts = Vec::new();
        {
            let mut st = self.inner.state.lock().unwrap();
            if !st.system_recorded {
                let mut sys = self.inner.system_message.clone();
                sys.timestamp = now_ms();
                prompts.push(Message::System(sys));
                st.system_recorded = true;
            }
            st.aborted = false;
            st.cancel = Some(CancellationToken::new());
        }
        prompts.push(user);
        self.inner.settled_tx.send_replace(false);
        self.inner.streaming_tx.send_replace(true);
        let this = self.clone();
        Ok(PromptOutcome::Started(Box::pin(async move {
            this.run_until_settled(prompts).await;
        })))
    }

    /// Runs a user shell command (RPC `bash`, spec rpc-protocol.md §4.8). Output deltas are
    /// emitted as `bash_execution_update {id?, delta}`; the `bashExecution` message is recorded
    /// at once when idle, else when the run settles.
    pub async fn run_user_bash(
        &self,
        command: &str,
        exclude_from_context: bool,
        id: Option<Value>,
    ) -> Result<BashResult, String> {
        let cancel = self.inner.bash_cancel.lock().unwrap().clone();
        let sink = self.inner.sink.clone();
        let mut on_chunk = |delta: &str| {
            if delta.is_empty() {
                return;
            }
            let mut v = Map::new();
            v.insert("type".into(), json!("bash_execution_update"));
            if let Some(id) = &id {
                v.insert("id".into(), id.clone());
            }
            v.insert("delta".into(), json!(delta));
            sink(Value::Object(v));
        };
        let result = execute_user_bash(
            command,
            &self.inner.cwd,
            &self.inner.bash_options,
            &cancel,
            &mut on_chunk,
        )
        .await?;
        let message = Message::BashExecution(BashExecutionMessage {
            command: command.to_string(),
            output: result.output.clone(),
            exit_code: result.exit_code,
            cancelled: result.cancelled,
            truncated: result.truncated,
            full_output_path: result.full_output_path.clone(),
            exclude_from_context: exclude_from_context.then_some(true),
            timestamp: now_ms(),
            extra: Default::default(),
        });
        if self.is_streaming() {
            self.inner.deferred_bash.lock().unwrap().push(message);
        } else {
            self.record_message(message);
        }
        Ok(result)
    }

    /// Cancels every running user shell command (`abort_bash`).
    pub fn abort_bash(&self) {
        let mut token = self.inner.bash_cancel.lock().unwrap();
        token.cancel();
        *token = CancellationToken::new();
    }

    /// Appends a message to the session and the context without emitting events.
    fn record_message(&self, message: Message) {
        let mut st = self.inner.state.lock().unwrap();
        if let Err(e) = st.session.append_message(&message) {
            tracing::warn!("could not persist message: {e}");
        }
        self.inner.messages.lock().unwrap().push(message);
    }

    fn flush_deferred_bash(&self) {
        let deferred: Vec<Message> = std::mem::take(&mut *self.inner.deferred_bash.lock().unwrap());
        for m in deferred {
            self.record_message(m);
        }
    }

    /// Queues a steering (`steer = true`) or follow-up message and emits `queue_update`.
    pub fn enqueue(&self, message: Message, steer: bool) {
        {
            let mut q = self.inner.queues.lock().unwrap();
            if steer {
                q.steering.push_back(message);
            } else {
                q.follow_up.push_back(message);
            }
        }
        self.emit_queue_update();
    }

    fn emit_queue_update(&self) {
        let q = self.inner.queues.lock().unwrap();
        let texts = |d: &VecDeque<Message>| -> Vec<String> {
            d.iter()
                .map(|m| match m {
                    Message::User(u) => u.content.joined_text(),
                    _ => String::new(),
                })
                .collect()
        };
        (self.inner.sink)(json!({
            "type": "queue_update",
            "steering": texts(&q.steering),
            "followUp": texts(&q.follow_up),
        }));
    }

    /// Aborts the run in flight and waits until it has settled (`abort`).
    pub async fn abort(&self) {
        let token = {
            let mut st = self.inner.state.lock().unwrap();
            st.aborted = true;
            st.cancel.clone()
        };
        if let Some(t) = token {
            t.cancel();
        }
        self.wait_settled().await;
    }

    /// Resolves once no run is in flight.
    pub async fn wait_settled(&self) {
        let mut rx = self.inner.settled_tx.subscribe();
        while !*rx.borrow_and_update() {
            if rx.changed().await.is_err() {
                break;
            }
        }
    }

    async fn run_until_settled(&self, prompts: Vec<Message>) {
        let cancel = self
            .inner
            .state
            .lock()
            .unwrap()
            .cancel
            .clone()
            .unwrap_or_default();
        let sink = self.inner.sink.clone();
        let this = self.clone();
        let emit: EmitFn = Arc::new(move |ev: AgentEvent| this.handle_event(ev));
        let hooks = Hooks {
            session: self.clone(),
        };
        let created =
            run_agent_loop(self.inner.messages.clone(), prompts, &hooks, &cancel, &emit).await;
        // A reply cut at the output limit is hidden from the context (1.6 notes §5).
        if let Some(Message::Assistant(last)) = created.last() {
            if last.stop_reason == StopReason::Length {
                self.hide_last_assistant();
            }
        }
        let aborted = {
            let mut st = self.inner.state.lock().unwrap();
            st.cancel = None;
            st.aborted || cancel.is_cancelled()
        };
        // The flag drops before the event is queued, so a client that reacts to
        // `agent_settled` with a new prompt always finds the session idle.
        self.flush_deferred_bash();
        self.inner.streaming_tx.send_replace(false);
        sink(json!({"type": "agent_settled", "aborted": aborted}));
        self.inner.settled_tx.send_replace(true);
    }

    fn hide_last_assistant(&self) {
        let entry = {
            let mut st = self.inner.state.lock().unwrap();
            let Some(target) = st.session.leaf_id().map(str::to_string) else {
                return;
            };
            match st.session.append_context_edit(&target, None) {
                Ok(e) => {
                    let entry = serde_json::to_value(e).unwrap_or(Value::Null);
                    Some((entry, st.session.build_context()))
                }
                Err(e) => {
                    tracing::warn!("could not record context edit: {e}");
                    None
                }
            }
        };
        if let Some((entry, context)) = entry {
            *self.inner.messages.lock().unwrap() = context;
            (self.inner.sink)(json!({"type": "entry_appended", "entry": entry}));
        }
    }

    /// Converts a low-level event to its protocol form, persists on `message_end`.
    fn handle_event(&self, ev: AgentEvent) {
        let sink = &self.inner.sink;
        match ev {
            AgentEvent::AgentStart => sink(json!({"type": "agent_start"})),
            AgentEvent::TurnStart => sink(json!({"type": "turn_start"})),
            AgentEvent::MessageStart { message } => {
                sink(json!({"type": "message_start", "message": message}))
            }
            AgentEvent::MessageUpdate { usage, event } => sink(json!({
                "type": "message_update",
                "usage": usage,
                "assistantMessageEvent": event,
            })),
            AgentEvent::MessageEnd { message } => {
                sink(json!({"type": "message_end", "message": message}));
                let mut st = self.inner.state.lock().unwrap();
                if let Err(e) = st.session.append_message(&message) {
                    tracing::warn!("could not persist message: {e}");
                }
            }
            AgentEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => sink(json!({
                "type": "tool_execution_start",
                "toolCallId": tool_call_id,
                "toolName": tool_name,
                "args": args,
            })),
            AgentEvent::ToolExecutionUpdate {
                tool_call_id,
                tool_name,
                args,
                partial_result,
            } => sink(json!({
                "type": "tool_execution_update",
                "toolCallId": tool_call_id,
                "toolName": tool_name,
                "args": args,
                "partialResult": partial_result,
            })),
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
                duration_ms,
            } => {
                let mut v = json!({
                    "type": "tool_execution_end",
                    "toolCallId": tool_call_id,
                    "toolName": tool_name,
                    "result": result,
                    "isError": is_error,
                });
                if let Some(d) = duration_ms {
                    v["durationMs"] = json!(d);
                }
                sink(v)
            }
            AgentEvent::TurnEnd {
                message,
                tool_results,
            } => {
                let results: Vec<Message> =
                    tool_results.into_iter().map(Message::ToolResult).collect();
                sink(json!({
                    "type": "turn_end",
                    "message": message,
                    "toolResults": results,
                }))
            }
            AgentEvent::AgentEnd { messages } => sink(json!({
                "type": "agent_end",
                "messages": messages,
                "willRetry": false,
            })),
        }
    }

    fn drain(&self, steer: bool) -> Vec<Message> {
        let mode = {
            let st = self.inner.state.lock().unwrap();
            if steer {
                st.steering_mode
            } else {
                st.follow_up_mode
            }
        };
        let drained: Vec<Message> = {
            let mut q = self.inner.queues.lock().unwrap();
            let d = if steer {
                &mut q.steering
            } else {
                &mut q.follow_up
            };
            match mode {
                QueueMode::All => d.drain(..).collect(),
                QueueMode::OneAtATime => d.pop_front().into_iter().collect(),
            }
        };
        if !drained.is_empty() {
            self.emit_queue_update();
        }
        drained
    }
}

struct Hooks {
    session: AgentSession,
}

impl RunHooks for Hooks {
    fn turn_config(&self) -> TurnConfig {
        let inner = &self.session.inner;
        let st = inner.state.lock().unwrap();
        let model = st.model.clone().unwrap_or_else(Model::unknown);
        let creds = (inner.api_key)(&model).unwrap_or_default();
        TurnConfig {
            provider: (inner.provider)(&model).unwrap_or_else(|| Arc::new(NoProvider)),
            api_key: creds.api_key,
            headers: creds.headers,
            model,
            system_prompt: inner.system_prompt.clone(),
            tools: inner.tools.clone(),
            thinking_level: st.thinking_level,
            session_id: Some(st.session.session_id().to_string()),
        }
    }

    fn convert_to_llm(&self, messages: &[Message]) -> Vec<Message> {
        convert_to_llm(messages)
    }

    fn drain_steering(&self) -> Vec<Message> {
        self.session.drain(true)
    }

    fn drain_follow_up(&self) -> Vec<Message> {
        self.session.drain(false)
    }
}

/// Stand-in adapter when a model's `api` has no implementation: every call fails cleanly.
struct NoProvider;

impl Provider for NoProvider {
    fn api(&self) -> &'static str {
        "unknown"
    }
    fn stream(
        &self,
        model: &Model,
        _context: &pi_ai::Context,
        _options: pi_ai::StreamOptions,
    ) -> pi_ai::AssistantStream {
        let mut m = AssistantMessage::empty(model);
        m.stop_reason = StopReason::Error;
        m.error_message = Some(format!("No API provider registered for api: {}", model.api));
        Box::pin(futures::stream::iter(vec![
            pi_ai::AssistantMessageEvent::Error {
                reason: StopReason::Error,
                message: Box::new(m),
            },
        ]))
    }
}

/// A user message in the array form RPC prompts use: one text block, then the images.
pub fn user_message(text: String, images: Vec<ImageContent>) -> Message {
    let mut content = vec![Content::text(text)];
    content.extend(images.into_iter().map(Content::Image));
    Message::User(UserMessage {
        content: UserContent::Blocks(content),
        timestamp: now_ms(),
        extra: Default::default(),
    })
}

/// Context → model messages (spec sessions.md §9.4): system messages dropped, bash executions
/// and custom/summary messages become user messages.
pub fn convert_to_llm(messages: &[Message]) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        match m {
            Message::System(_) => {}
            Message::User(_) | Message::Assistant(_) | Message::ToolResult(_) => {
                out.push(m.clone())
            }
            Message::BashExecution(b) => {
                if b.exclude_from_context == Some(true) {
                    continue;
                }
                let mut text = format!("Ran `{}`\n", b.command);
                if b.output.is_empty() {
                    text.push_str("(no output)");
                } else {
                    text.push_str(&format!("```\n{}\n```", b.output));
                }
                if b.cancelled {
                    text.push_str("\n\n(command cancelled)");
                } else if let Some(code) = b.exit_code.filter(|c| *c != 0) {
                    text.push_str(&format!("\n\nCommand exited with code {code}"));
                }
                if b.truncated {
                    if let Some(p) = &b.full_output_path {
                        text.push_str(&format!("\n\n[Output truncated. Full output: {p}]"));
                    }
                }
                out.push(Message::User(UserMessage {
                    content: UserContent::Blocks(vec![Content::text(text)]),
                    timestamp: b.timestamp,
                    extra: Default::default(),
                }));
            }
            Message::Other(map) => {
                let role = map.get("role").and_then(Value::as_str).unwrap_or("");
                let ts = map.get("timestamp").and_then(Value::as_i64).unwrap_or(0);
                let content = match role {
                    "custom" => map
                        .get("content")
                        .and_then(|c| serde_json::from_value::<UserContent>(c.clone()).ok())
                        .map(|c| c.to_blocks()),
                    "compactionSummary" => map.get("summary").and_then(Value::as_str).map(|s| {
                        vec![Content::text(format!(
                            "The conversation history before this point was compacted into the following summary:\n\n<summary>\n{s}\n</summary>"
                        ))]
                    }),
                    "branchSummary" => map.get("summary").and_then(Value::as_str).map(|s| {
                        vec![Content::text(format!(
                            "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n{s}</summary>"
                        ))]
                    }),
                    _ => None,
                };
                if let Some(content) = content {
                    out.push(Message::User(UserMessage {
                        content: UserContent::Blocks(content),
                        timestamp: ts,
                        extra: Default::default(),
                    }));
                }
            }
        }
    }
    out
}

fn utf16_len(s: &str) -> u64 {
    s.encode_utf16().count() as u64
}

fn blocks_chars(blocks: &[Content]) -> u64 {
    blocks
        .iter()
        .map(|b| match b {
            Content::Text(t) => utf16_len(&t.text),
            Content::Image(_) => 4800,
            Content::Thinking(t) => utf16_len(&t.thinking),
            Content::ToolCall(c) => utf16_len(&c.name) + utf16_len(&c.arguments.to_string()),
        })
        .sum()
}

/// `estimateTokens(message)` = ⌈characters / 4⌉ (spec agent-loop.md §10.1); characters are
/// UTF-16 code units as in JavaScript.
pub fn estimate_tokens(message: &Message) -> u64 {
    let chars = match message {
        Message::User(u) => match &u.content {
            UserContent::Text(t) => utf16_len(t),
            UserContent::Blocks(b) => blocks_chars(b),
        },
        Message::Assistant(a) => blocks_chars(&a.content),
        Message::ToolResult(t) => blocks_chars(&t.content),
        Message::BashExecution(b) => utf16_len(&b.command) + utf16_len(&b.output),
        Message::System(sys) => {
            let content = match &sys.content {
                UserContent::Text(t) => utf16_len(t),
                UserContent::Blocks(b) => blocks_chars(b),
            };
            let sections: u64 = sys
                .sections
                .iter()
                .flat_map(|m| m.values())
                .filter_map(Value::as_str)
                .map(utf16_len)
                .sum();
            let tools = sys
                .tools_added
                .as_ref()
                .map(|t| utf16_len(&Value::Array(t.clone()).to_string()))
                .unwrap_or(0);
            content + sections + tools
        }
        Message::Other(m) => {
            if let Some(s) = m.get("summary").and_then(Value::as_str) {
                utf16_len(s)
            } else {
                match m.get("content") {
                    Some(Value::String(s)) => utf16_len(s),
                    Some(c) => serde_json::from_value::<Vec<Content>>(c.clone())
                        .map(|b| blocks_chars(&b))
                        .unwrap_or(0),
                    None => 0,
                }
            }
        }
    };
    chars.div_ceil(4)
}

/// `estimateContextTokens(messages)` (spec agent-loop.md §10.2): the last successful
/// assistant usage plus estimates of everything after it, else estimates of everything.
fn context_tokens(messages: &[Message]) -> u64 {
    let last = messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| match m {
            Message::Assistant(a)
                if !matches!(a.stop_reason, StopReason::Aborted | StopReason::Error)
                    && a.usage.total_tokens > 0 =>
            {
                Some((i, a.usage.total_tokens))
            }
            _ => None,
        });
    match last {
        Some((i, total)) => total + messages[i + 1..].iter().map(estimate_tokens).sum::<u64>(),
        None => messages.iter().map(estimate_tokens).sum(),
    }
}
