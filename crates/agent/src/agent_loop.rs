//! The low-level run loop (spec agent-loop.md §2.2–§3; upstream `packages/agent/src/agent-loop.ts`).
//!
//! One call of [`run_agent_loop`] is one *run*: `agent_start`, one or more turns, `agent_end`.
//! Everything the loop needs from the outside (model, tools, queues, message conversion) comes
//! through [`RunHooks`], asked afresh before every LLM call so that changes made mid-run (model,
//! thinking level, tools) apply from the next turn on. Events are delivered in order through
//! the `emit` callback; the loop awaits the future it may return before it goes on
//! ([`EmitFn`]).

use crate::event::AgentEvent;
use crate::tool::{AgentTool, ToolContext, ToolError, ToolOutput};
use crate::validate::validate_tool_arguments;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use pi_ai::{
    now_ms, AssistantMessage, AssistantMessageEvent, Context, Message, Model, Provider,
    ProviderError, StopReason, StreamOptions, ThinkingLevel, ToolCall, ToolDefinition,
    ToolResultMessage,
};
use serde_json::Value;
use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Event sink. Called from the loop's task, from tool update callbacks and from the nested
/// calls of a running tool ([`crate::NestedCalls`]).
///
/// Returns `None` when the event has been handled (the common case: no allocation, e.g. for
/// every `message_update` delta), or a future the caller awaits before it goes on: the sink
/// uses it to hold the run until someone has seen the event (the coding agent waits there for
/// extension handlers, upstream's "emit to extensions first", and hands the event to its client
/// when the future completes). The loop and [`crate::NestedCalls`] always await it before
/// emitting the next event; a caller that cannot await (a tool's synchronous `on_update`) drops
/// it, so a sink that returns one must still deliver the event, without waiting, when the
/// future is dropped unfinished.
pub type EmitFn = Arc<dyn Fn(AgentEvent) -> Option<BoxFuture<'static, ()>> + Send + Sync>;

/// Emits `ev` through `emit` and awaits what the sink returned ([`EmitFn`]).
pub async fn emit_event(emit: &EmitFn, ev: AgentEvent) {
    if let Some(wait) = emit(ev) {
        wait.await;
    }
}

/// The context transcript shared between the loop and readers such as `get_messages`.
pub type SharedMessages = Arc<Mutex<Vec<Message>>>;

/// Locks the transcript. A poisoned lock (a reader panicked while holding it) is recovered: the
/// vector is only ever pushed to or read whole, so it is consistent even then.
fn lock_messages(messages: &SharedMessages) -> MutexGuard<'_, Vec<Message>> {
    messages.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one LLM call uses. Built by [`RunHooks::turn_config`] before every call.
#[derive(Clone)]
pub struct TurnConfig {
    /// The model to call.
    pub model: Model,
    /// The adapter for `model.api`.
    pub provider: Arc<dyn Provider>,
    /// Flattened system prompt text sent to the model.
    pub system_prompt: String,
    /// Active tools, in the order offered to the model.
    pub tools: Vec<Arc<dyn AgentTool>>,
    /// Thinking level for the request; `Off` sends no reasoning parameters.
    pub thinking_level: ThinkingLevel,
    /// Credential for the provider; `None` = fall back to the provider's environment variable.
    pub api_key: Option<String>,
    /// Extra HTTP headers for the request (resolved credentials and models.json headers).
    pub headers: Vec<(String, String)>,
    /// Session id passed to the provider for prompt caching; `None` = no session.
    pub session_id: Option<String>,
    /// Request settings beyond the options (settings `thinkingBudgets`, cache retention),
    /// passed through [`Provider::stream_tuned`].
    pub tuning: pi_ai::RequestTuning,
}

/// What [`RunHooks::transform_context`] gives one LLM call: the transcript to convert and
/// send, and, when an extension took over the request's system state (upstream 1.6
/// `context_with_system`: "this hook owns the prompt and tool declarations for the request"),
/// the prompt text and tool declarations that replace the turn config's for this call only.
#[derive(Debug, Clone, Default)]
pub struct RequestContext {
    /// The messages, before [`RunHooks::convert_to_llm`].
    pub messages: Vec<Message>,
    /// The system prompt of this request; `None` = the turn config's.
    pub system_prompt: Option<String>,
    /// The tool declarations of this request; `None` = the turn config's tools. Only what the
    /// model is told: a call is still executed by the turn config's tool of that name.
    pub tools: Option<Vec<pi_ai::ToolDefinition>>,
}

impl RequestContext {
    /// The messages with the turn config's prompt and tools.
    pub fn messages(messages: Vec<Message>) -> Self {
        RequestContext {
            messages,
            system_prompt: None,
            tools: None,
        }
    }
}

/// The loop's view of its owner (the coding-agent session).
pub trait RunHooks: Send + Sync {
    /// Model, tools and options for the next LLM call (async: resolving them may wait for a
    /// credential refresh or a virtual model's router). A failure is part of the config (a
    /// provider that fails the request with the error's text), so the run reports it as the
    /// assistant's `errorMessage`.
    fn turn_config(&self) -> futures::future::BoxFuture<'_, TurnConfig>;
    /// Converts the context transcript to what the model sees (`user`/`assistant`/`toolResult`
    /// only; spec sessions.md §9.4).
    fn convert_to_llm(&self, messages: &[Message]) -> Vec<Message>;
    /// Steering messages to deliver now (respecting the steering mode).
    fn drain_steering(&self) -> Vec<Message>;
    /// Follow-up messages to deliver now (respecting the follow-up mode).
    fn drain_follow_up(&self) -> Vec<Message>;
    /// Runs before every turn of a run but the first, after the previous turn's tool results
    /// are in the transcript and before the next `turn_start` (upstream `prepareNextTurn`; the
    /// coding agent compacts here when the context passed its threshold, agent-loop.md §8.2).
    /// The transcript may be replaced meanwhile. `false` ends the run there unless messages are
    /// waiting to be delivered. The default does nothing.
    fn before_next_turn(&self) -> futures::future::BoxFuture<'_, bool> {
        Box::pin(async { true })
    }

    /// Hooks around each tool call (extensions' `tool_call` / `tool_result`); `None` (the
    /// default) = tools run unhooked.
    fn tool_call_hooks(&self) -> Option<Arc<dyn ToolCallHooks>> {
        None
    }

    /// Whether [`RunHooks::transform_context`] is to be called before each LLM call (the
    /// default: no, and the transcript is not copied for it).
    fn transforms_context(&self) -> bool {
        false
    }

    /// Rewrites the transcript sent to the model for one LLM call (extensions' `context` and
    /// `context_with_system` events, upstream agent-core `transformContext`), before
    /// [`RunHooks::convert_to_llm`]. The result is not stored: the transcript itself stays as
    /// it was. Called only when [`RunHooks::transforms_context`] is true; the default returns
    /// the messages unchanged and keeps the turn's prompt and tools.
    fn transform_context(
        &self,
        messages: Vec<Message>,
    ) -> futures::future::BoxFuture<'_, RequestContext> {
        Box::pin(async move { RequestContext::messages(messages) })
    }

    /// The actionable turn boundary (upstream `turn_end` extension results): called after the
    /// turn's assistant message and tool results are in the transcript and before the
    /// `turn_end` event. It may append to (or rebuild) the transcript. Returns whether one more
    /// model request is wanted; the loop makes it only after a completed response that would
    /// otherwise end the run (tool results, steering or follow-ups satisfy it; an error or
    /// aborted response ends the run regardless). The default asks for nothing.
    fn turn_boundary<'a>(
        &'a self,
        message: &'a Message,
        tool_results: &'a [ToolResultMessage],
    ) -> futures::future::BoxFuture<'a, bool> {
        let _ = (message, tool_results);
        Box::pin(async { false })
    }

    /// Called once a message (user, assistant, tool result) is final and before it enters the
    /// context or `message_end` is emitted; what it returns takes its place everywhere (context,
    /// `message_end`, later requests). Upstream docs/extensions.md "message_end" replacement.
    /// The default keeps the message.
    fn message_end(&self, message: Message) -> futures::future::BoxFuture<'_, Message> {
        Box::pin(async move { message })
    }
}

/// What [`ToolCallHooks::before_tool_call`] decided for one call.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeToolCall {
    /// Execute the tool with these (possibly changed) arguments.
    Proceed(Value),
    /// Do not execute; the tool result is an error whose only text is the reason (upstream
    /// agent-core `beforeToolCall` `{block: true, reason}`; empty reason → `Tool execution was
    /// blocked`).
    Block(String),
}

/// Hooks the loop calls around every tool call that passed argument validation (upstream
/// agent-core `beforeToolCall` / `afterToolCall`). Implementations must never fail open: an
/// error inside a hook should come back as [`BeforeToolCall::Block`].
#[async_trait::async_trait]
pub trait ToolCallHooks: Send + Sync {
    /// Called after validation, before execution, in call order. `parent` is the id of the
    /// tool call that made this call while it ran ([`crate::NestedCalls`]); `None` for a call
    /// of the model.
    async fn before_tool_call(
        &self,
        call: &ToolCall,
        args: Value,
        parent: Option<&str>,
    ) -> BeforeToolCall;
    /// Called with the finished result (`is_error` as the loop computed it); returns the result
    /// and error flag to use. The default keeps them. `parent` as for `before_tool_call`.
    async fn after_tool_call(
        &self,
        call: &ToolCall,
        args: &Value,
        output: ToolOutput,
        is_error: bool,
        parent: Option<&str>,
    ) -> (ToolOutput, bool) {
        let _ = (call, args, parent);
        (output, is_error)
    }
}

/// The error result of a call whose [`ToolCallHooks::before_tool_call`] had not answered when
/// the run was aborted (the call is blocked; the run then ends as aborted).
pub const HOOK_ABORTED_BEFORE: &str =
    "Tool call blocked: the run was aborted before the tool_call hook answered";

/// How long a [`ToolCallHooks::after_tool_call`] round may still take once the run is aborted
/// (it may still redact the aborted tool's result; one that never settles cannot hold the
/// abort).
pub const HOOK_ABORT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Resolves [`HOOK_ABORT_GRACE`] after `cancel` fires.
pub async fn abort_grace(cancel: &CancellationToken) {
    cancel.cancelled().await;
    tokio::time::sleep(HOOK_ABORT_GRACE).await;
}

/// The error result of a call whose [`ToolCallHooks::after_tool_call`] had not answered
/// [`HOOK_ABORT_GRACE`] after the run was aborted (the tool's own result is withheld).
pub const HOOK_ABORTED_AFTER: &str =
    "Tool result withheld: the run was aborted before the tool_result hook answered";

/// Error text for tool calls of a reply cut at the output limit (agent-loop.md §2.2, newer).
pub fn length_tool_error(name: &str) -> String {
    format!(
        "Tool call \"{name}\" was not executed: the response hit the output token limit, so its arguments may be truncated. Re-issue the tool call with complete arguments."
    )
}

/// Runs one agent run to completion and returns every message it created.
///
/// `prompts` are emitted (`message_start`/`message_end`) and appended first. Provider failures
/// and aborts end the run with an assistant message whose `stopReason` is `error`/`aborted`
/// (with the typed [`ProviderError`] in `AssistantMessage::error` when the adapter gave one);
/// tool failures, unknown tools, invalid arguments and tool panics become error tool results
/// ([`ToolError`]) and the run goes on. This function itself never fails.
pub async fn run_agent_loop(
    messages: SharedMessages,
    prompts: Vec<Message>,
    hooks: &dyn RunHooks,
    cancel: &CancellationToken,
    emit: &EmitFn,
) -> Vec<Message> {
    let mut created: Vec<Message> = Vec::new();
    emit_event(emit, AgentEvent::AgentStart).await;
    emit_event(emit, AgentEvent::TurnStart).await;
    for m in prompts {
        let _ = push_message(&messages, &mut created, hooks, emit, m).await;
    }
    let mut pending = hooks.drain_steering();
    let mut first = true;
    'outer: loop {
        let mut has_more_tool_calls = true;
        while has_more_tool_calls || !pending.is_empty() {
            if !first {
                if !hooks.before_next_turn().await && pending.is_empty() {
                    break 'outer;
                }
                emit_event(emit, AgentEvent::TurnStart).await;
            }
            first = false;
            for m in std::mem::take(&mut pending) {
                let _ = push_message(&messages, &mut created, hooks, emit, m).await;
            }
            let cfg = hooks.turn_config().await;
            let streamed = stream_assistant(&messages, hooks, &cfg, cancel, emit).await;
            let assistant_msg = hooks
                .message_end(Message::Assistant(streamed.clone()))
                .await;
            let assistant = match &assistant_msg {
                Message::Assistant(a) => a.clone(),
                _ => streamed,
            };
            lock_messages(&messages).push(assistant_msg.clone());
            created.push(assistant_msg.clone());
            emit_event(
                emit,
                AgentEvent::MessageEnd {
                    message: assistant_msg.clone(),
                },
            )
            .await;
            if matches!(
                assistant.stop_reason,
                StopReason::Error | StopReason::Aborted
            ) {
                // Entries may still be appended; a continuation is not made.
                hooks.turn_boundary(&assistant_msg, &[]).await;
                emit_event(
                    emit,
                    AgentEvent::TurnEnd {
                        message: assistant_msg,
                        tool_results: vec![],
                    },
                )
                .await;
                break 'outer;
            }
            let calls: Vec<ToolCall> = assistant.tool_calls().cloned().collect();
            let results = if calls.is_empty() {
                vec![]
            } else if assistant.stop_reason == StopReason::Length {
                refuse_truncated_calls(&calls, emit).await
            } else {
                execute_tool_calls(&calls, &cfg.tools, hooks.tool_call_hooks(), cancel, emit).await
            };
            let mut results = results;
            for r in &mut results {
                let kept = push_message(
                    &messages,
                    &mut created,
                    hooks,
                    emit,
                    Message::ToolResult(r.clone()),
                )
                .await;
                if let Message::ToolResult(t) = kept {
                    *r = t;
                }
            }
            let wants_more = hooks.turn_boundary(&assistant_msg, &results).await;
            emit_event(
                emit,
                AgentEvent::TurnEnd {
                    message: assistant_msg,
                    tool_results: results,
                },
            )
            .await;
            has_more_tool_calls = !calls.is_empty();
            pending = hooks.drain_steering();
            if wants_more && !has_more_tool_calls && pending.is_empty() {
                // Queued follow-ups satisfy the request; else one context-only request.
                pending = hooks.drain_follow_up();
                has_more_tool_calls = pending.is_empty();
            }
        }
        let follow_ups = hooks.drain_follow_up();
        if follow_ups.is_empty() {
            break;
        }
        pending = follow_ups;
    }
    emit_event(
        emit,
        AgentEvent::AgentEnd {
            messages: created.clone(),
        },
    )
    .await;
    created
}

async fn push_message(
    messages: &SharedMessages,
    created: &mut Vec<Message>,
    hooks: &dyn RunHooks,
    emit: &EmitFn,
    m: Message,
) -> Message {
    emit_event(emit, AgentEvent::MessageStart { message: m.clone() }).await;
    let m = hooks.message_end(m).await;
    lock_messages(messages).push(m.clone());
    created.push(m.clone());
    emit_event(emit, AgentEvent::MessageEnd { message: m.clone() }).await;
    m
}

/// Streams one assistant response, emitting `message_start` and `message_update`s. The caller
/// emits `message_end`.
async fn stream_assistant(
    messages: &SharedMessages,
    hooks: &dyn RunHooks,
    cfg: &TurnConfig,
    cancel: &CancellationToken,
    emit: &EmitFn,
) -> AssistantMessage {
    let started = Instant::now();
    let context = if hooks.transforms_context() {
        let snapshot = lock_messages(messages).clone();
        let transformed = hooks.transform_context(snapshot).await;
        Context {
            system_prompt: transformed
                .system_prompt
                .unwrap_or_else(|| cfg.system_prompt.clone()),
            messages: hooks.convert_to_llm(&transformed.messages),
            tools: transformed
                .tools
                .unwrap_or_else(|| cfg.tools.iter().map(|t| t.definition()).collect()),
        }
    } else {
        let guard = lock_messages(messages);
        Context {
            system_prompt: cfg.system_prompt.clone(),
            messages: hooks.convert_to_llm(&guard),
            tools: cfg.tools.iter().map(|t| t.definition()).collect(),
        }
    };
    let options = StreamOptions {
        api_key: cfg.api_key.clone(),
        reasoning: match cfg.thinking_level {
            ThinkingLevel::Off => None,
            l => Some(l),
        },
        max_tokens: None,
        session_id: cfg.session_id.clone(),
        headers: cfg.headers.clone(),
        cancel: cancel.clone(),
    };
    // No `thinkingLevel` on the partial: upstream 1.6's `message_start` has none (golden
    // `abort_mid_stream`, raw transcript); the final message gets it below.
    let mut partial = AssistantMessage::empty(&cfg.model);
    let mut started_emitted = false;
    let mut stream = cfg
        .provider
        .stream_tuned(&cfg.model, &context, options, cfg.tuning.clone());
    let mut final_message: Option<AssistantMessage> = None;
    while let Some(ev) = stream.next().await {
        match ev {
            AssistantMessageEvent::Start { partial: p } => {
                partial.timestamp = p.timestamp;
                if !started_emitted {
                    started_emitted = true;
                    emit_event(
                        emit,
                        AgentEvent::MessageStart {
                            message: Message::Assistant(partial.clone()),
                        },
                    )
                    .await;
                }
            }
            AssistantMessageEvent::Done { message, .. }
            | AssistantMessageEvent::Error { message, .. } => {
                final_message = Some(*message);
                break;
            }
            AssistantMessageEvent::Usage { usage } => partial.usage = usage,
            other => {
                if !started_emitted {
                    started_emitted = true;
                    emit_event(
                        emit,
                        AgentEvent::MessageStart {
                            message: Message::Assistant(partial.clone()),
                        },
                    )
                    .await;
                }
                emit_event(
                    emit,
                    AgentEvent::MessageUpdate {
                        usage: partial.usage.clone(),
                        event: other,
                    },
                )
                .await;
            }
        }
    }
    let mut message = final_message.unwrap_or_else(|| {
        let mut m = partial.clone();
        let error = if cancel.is_cancelled() {
            m.stop_reason = StopReason::Aborted;
            ProviderError::Aborted {
                message: "Request was aborted".into(),
            }
        } else {
            m.stop_reason = StopReason::Error;
            ProviderError::StreamEndedEarly {
                message: "Stream ended without a final message".into(),
            }
        };
        m.error_message = Some(error.to_string());
        m.error = Some(Box::new(error));
        m
    });
    if message.thinking_level.is_none() {
        message.thinking_level = Some(cfg.thinking_level);
    }
    if message.duration_ms.is_none() {
        message.duration_ms = Some(started.elapsed().as_millis() as u64);
    }
    if !started_emitted {
        // No response started (HTTP or connection error): upstream's message_start already
        // carries the final message.
        emit_event(
            emit,
            AgentEvent::MessageStart {
                message: Message::Assistant(message.clone()),
            },
        )
        .await;
    }
    message
}

fn tool_result(
    call: &ToolCall,
    output: &ToolOutput,
    is_error: bool,
    duration_ms: Option<u64>,
    nested_calls: Option<pi_ai::NestedToolCalls>,
) -> ToolResultMessage {
    ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content: output.content.clone(),
        details: output.details.clone(),
        is_error,
        duration_ms,
        nested_calls,
        timestamp: now_ms(),
        extra: Default::default(),
    }
}

async fn refuse_truncated_calls(calls: &[ToolCall], emit: &EmitFn) -> Vec<ToolResultMessage> {
    let mut results = Vec::with_capacity(calls.len());
    for call in calls {
        let out = ToolOutput::error(length_tool_error(&call.name));
        emit_event(
            emit,
            AgentEvent::ToolExecutionStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: call.arguments.clone(),
                parent_tool_call_id: None,
            },
        )
        .await;
        emit_event(
            emit,
            AgentEvent::ToolExecutionEnd {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                result: out.clone(),
                is_error: true,
                duration_ms: None,
                parent_tool_call_id: None,
            },
        )
        .await;
        results.push(tool_result(call, &out, true, None, None));
    }
    results
}

enum Prepared {
    Ready(Arc<dyn AgentTool>, Value),
    Failed(ToolError),
}

/// The message of a caught panic payload (`panic!` with a literal or a formatted string).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<unknown panic>".to_owned()
    }
}

/// Runs one tool call; a panic inside the tool becomes [`ToolError::Panicked`] instead of
/// unwinding through the loop (the run goes on with an error result).
async fn execute_guarded(
    tool: Arc<dyn AgentTool>,
    ctx: ToolContext,
    args: Value,
) -> Result<ToolOutput, ToolError> {
    match AssertUnwindSafe(tool.execute(ctx, args))
        .catch_unwind()
        .await
    {
        Ok(result) => result,
        Err(payload) => Err(ToolError::Panicked(panic_message(payload.as_ref()))),
    }
}

/// A tool's outcome as the result the model sees and its error flag.
fn output_of(res: Result<ToolOutput, ToolError>) -> (ToolOutput, bool) {
    match res {
        Ok(out) => {
            let is_error = out.is_error.unwrap_or(false);
            (out, is_error)
        }
        Err(e) => (ToolOutput::error(e.to_string()), true),
    }
}

/// Executes one assistant message's tool calls: starts and argument checks in call order,
/// executions concurrently, `tool_execution_end` in completion order, results in call order
/// (agent-loop.md §3, "newer parallel").
async fn execute_tool_calls(
    calls: &[ToolCall],
    tools: &[Arc<dyn AgentTool>],
    call_hooks: Option<Arc<dyn ToolCallHooks>>,
    cancel: &CancellationToken,
    emit: &EmitFn,
) -> Vec<ToolResultMessage> {
    let mut outcomes: Vec<Option<ToolResultMessage>> = vec![None; calls.len()];
    let mut running = FuturesUnordered::new();
    // Each tool's definition (with its JSON schema) is built once per batch, not per call.
    let definitions: Vec<ToolDefinition> = tools.iter().map(|t| t.definition()).collect();
    for (idx, call) in calls.iter().enumerate() {
        emit_event(
            emit,
            AgentEvent::ToolExecutionStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: call.arguments.clone(),
                parent_tool_call_id: None,
            },
        )
        .await;
        let prepared = match tools
            .iter()
            .zip(&definitions)
            .find(|(_, def)| def.name == call.name)
        {
            None => Prepared::Failed(ToolError::NotFound(call.name.clone())),
            Some((tool, def)) => {
                let raw = call.arguments.clone();
                let prepared =
                    std::panic::catch_unwind(AssertUnwindSafe(|| tool.prepare_arguments(raw)));
                match prepared {
                    Err(payload) => {
                        Prepared::Failed(ToolError::Panicked(panic_message(payload.as_ref())))
                    }
                    Ok(args) => match validate_tool_arguments(&call.name, &def.parameters, &args) {
                        Ok(args) => Prepared::Ready(tool.clone(), args),
                        Err(e) => Prepared::Failed(ToolError::InvalidArguments(e)),
                    },
                }
            }
        };
        let prepared = match (prepared, &call_hooks) {
            (Prepared::Ready(tool, args), Some(h)) => {
                // An abort ends a hook round that has not answered (one that never settles
                // must not hold the run): the call is blocked, as by a failed gate.
                let decision = tokio::select! {
                    biased;
                    () = cancel.cancelled() => BeforeToolCall::Block(HOOK_ABORTED_BEFORE.into()),
                    d = h.before_tool_call(call, args, None) => d,
                };
                match decision {
                    BeforeToolCall::Proceed(args) => Prepared::Ready(tool, args),
                    BeforeToolCall::Block(reason) if reason.is_empty() => {
                        Prepared::Failed(ToolError::Failed("Tool execution was blocked".into()))
                    }
                    BeforeToolCall::Block(reason) => Prepared::Failed(ToolError::Failed(reason)),
                }
            }
            (p, _) => p,
        };
        match prepared {
            Prepared::Failed(error) => {
                let out = ToolOutput::error(error.to_string());
                emit_event(
                    emit,
                    AgentEvent::ToolExecutionEnd {
                        tool_call_id: call.id.clone(),
                        tool_name: call.name.clone(),
                        result: out.clone(),
                        is_error: true,
                        duration_ms: None,
                        parent_tool_call_id: None,
                    },
                )
                .await;
                outcomes[idx] = Some(tool_result(call, &out, true, None, None));
            }
            Prepared::Ready(tool, args) => {
                let emit_u = emit.clone();
                let (id, name, raw_args) =
                    (call.id.clone(), call.name.clone(), call.arguments.clone());
                let nested = crate::NestedCalls::new(call.id.clone(), Some(emit.clone()));
                let ctx = ToolContext {
                    call_id: call.id.clone(),
                    cancel: cancel.clone(),
                    // A synchronous callback: a future the sink returns is dropped, which
                    // still delivers the update ([`EmitFn`]).
                    on_update: Arc::new(move |partial: ToolOutput| {
                        drop(emit_u(AgentEvent::ToolExecutionUpdate {
                            tool_call_id: id.clone(),
                            tool_name: name.clone(),
                            args: raw_args.clone(),
                            partial_result: partial,
                            parent_tool_call_id: None,
                        }))
                    }),
                    nested: nested.clone(),
                };
                let call_hooks = call_hooks.clone();
                let cancel_h = cancel.clone();
                running.push(async move {
                    let start = Instant::now();
                    let (out, is_error) = match call_hooks {
                        None => output_of(execute_guarded(tool, ctx, args).await),
                        Some(h) => {
                            let res = output_of(execute_guarded(tool, ctx, args.clone()).await);
                            // A result hook still pending HOOK_ABORT_GRACE after an abort
                            // is given up; the result it would have vetted is withheld (a
                            // redaction cannot be skipped).
                            tokio::select! {
                                biased;
                                r = h.after_tool_call(&calls[idx], &args, res.0, res.1, None) => r,
                                () = abort_grace(&cancel_h) => {
                                    (ToolOutput::error(HOOK_ABORTED_AFTER.to_string()), true)
                                }
                            }
                        }
                    };
                    let duration = start.elapsed().as_millis() as u64;
                    (idx, out, is_error, duration, nested.record())
                });
            }
        }
    }
    while let Some((idx, out, is_error, duration, nested)) = running.next().await {
        let call = &calls[idx];
        emit_event(
            emit,
            AgentEvent::ToolExecutionEnd {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                result: out.clone(),
                is_error,
                duration_ms: Some(duration),
                parent_tool_call_id: None,
            },
        )
        .await;
        outcomes[idx] = Some(tool_result(call, &out, is_error, Some(duration), nested));
    }
    outcomes.into_iter().flatten().collect()
}
