//! RPC mode: JSON commands on stdin, responses and events on stdout, one per line
//! (spec rpc-protocol.md §2–§4). The wire types are in [`protocol`].
//!
//! Framing: records are split on LF only, one trailing CR is stripped, U+2028/U+2029 are never
//! separators. Every malformed record gets exactly one response and the process keeps serving.
//! Fast commands are answered inline in arrival order; slow ones (`abort`, `bash`, a prompt's
//! run) run as tasks so they never block the reader. Commands still take effect in arrival
//! order where that matters: a `bash` takes its cancellation token when it is read (so a later
//! `abort_bash` cancels it), and a `prompt` read after an `abort` waits for that abort to
//! settle. stdout has exactly one writer, which writes each record as one whole line and
//! flushes it.

/// The RPC wire types, kept under their old path as well (they live in [`crate::protocol::rpc`]).
pub use crate::protocol::rpc as protocol;

use crate::agent_session::runtime::AgentSessionRuntime;
use crate::agent_session::{
    Admission, Admitting, AgentSession, InputSource, PromptInput, QueueKind, Responder,
};
use crate::output::Output;
use crate::tasks::panic_text;
use futures::FutureExt;
use pi_ai::{ImageContent, ThinkingLevel};
use protocol::{
    CancelledData, CommandsData, CycleModelData, Disposition, DispositionData, ForkData,
    ForkMessagesData, Incoming, LastAssistantTextData, LevelData, LevelsData, MessagesResponse,
    ModelsData, PermissionsData, ResponseData, RpcCommand, RpcResponse, SandboxData,
};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinSet;

/// Splits one raw input record: strips exactly one trailing CR.
pub fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Runs RPC mode until stdin closes and the run in flight has settled.
pub async fn run(runtime: AgentSessionRuntime, out: Output) -> std::io::Result<()> {
    let mut reader = BufReader::new(tokio::io::stdin());
    let mut tasks = Tasks::default();
    // MCP problems found at startup are reported once, in a `notify` (not awaited at EOF).
    let first = runtime.session();
    // The client can be asked for tool-call permissions (agent_session/permission.rs).
    if let Some(gate) = first.permission_gate() {
        gate.client_attached();
    }
    tokio::spawn(async move { first.report_mcp_startup().await });
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // An extension's `ctx.shutdown()` ends the loop once the session is idle; commands in
        // flight still answer below.
        // After a quiet spell the idle process gives back pages it does not need (issue 15;
        // once per gap between commands). `read_until` keeps what it has read in `buf` when
        // the timer wins, and the next call goes on from there.
        let mut released = false;
        let n = loop {
            tokio::select! {
                n = reader.read_until(b'\n', &mut buf) => break Some(n?),
                () = runtime.shutdown_requested() => break None,
                () = tokio::time::sleep(crate::mem::IDLE_RELEASE_AFTER), if !released => {
                    crate::mem::release_idle_pages();
                    released = true;
                }
            }
        };
        let Some(n) = n else {
            break;
        };
        // A partial line read before a timer fired is still in `buf` at EOF.
        if n == 0 && buf.is_empty() {
            break;
        }
        let at_eof = !buf.ends_with(b"\n");
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        handle_line(&runtime, &out, strip_cr(line), &mut tasks).await;
        // MCP servers start connecting once the first command has been answered.
        runtime.session().begin_mcp_connecting();
        // Reap finished tasks so a long-lived process does not keep one entry per command.
        while tasks.set.try_join_next().is_some() {}
        tasks.aborts.retain_mut(|done| {
            matches!(
                done.try_recv(),
                Err(tokio::sync::oneshot::error::TryRecvError::Empty)
            )
        });
        if at_eof {
            break;
        }
    }
    // The run in flight is let finish, but no extension round may hold the exit: one still
    // pending after a grace fails (fail closed, extensions::host::EOF_GRACE).
    if let Some(ext) = runtime.session().extensions() {
        ext.input_closed();
    }
    // Permission dialogs still open, and later ones, are refused (fail closed).
    if let Some(gate) = runtime.session().permission_gate() {
        gate.client_closed();
    }
    // A task that panicked has already settled its run (the session's settle guard).
    while tasks.set.join_next().await.is_some() {}
    runtime.wait_settled().await;
    out.flush();
    Ok(())
}

/// The commands still being worked on.
#[derive(Default)]
struct Tasks {
    /// Every slow command and prompt run, awaited at EOF.
    set: JoinSet<()>,
    /// One receiver per `abort` not yet answered; it completes once that abort has settled
    /// and been answered.
    aborts: Vec<tokio::sync::oneshot::Receiver<()>>,
}

impl Tasks {
    /// Waits until every `abort` read so far has settled and been answered.
    async fn aborts_settled(&mut self) {
        for done in self.aborts.drain(..) {
            let _ = done.await;
        }
    }
}

/// Decodes one record and dispatches it. A `prompt` read after an `abort` is dispatched once
/// that abort has settled, so it starts a new run instead of finding the aborted one still
/// streaming; the reader waits meanwhile, keeping later commands in order.
async fn handle_line(runtime: &AgentSessionRuntime, out: &Output, line: &[u8], tasks: &mut Tasks) {
    // Invalid UTF-8 sequences decode to U+FFFD, as Node's stdin decoder does.
    let text = String::from_utf8_lossy(line);
    let value: Value = match pi_ai::json::parse_str(&text) {
        Ok(v) => v,
        Err(e) => {
            // Clients see the same text Node's JSON.parse gives (golden malformed_json); input
            // V8 would accept but serde rejects (nesting > 128, ...) keeps serde's message.
            // A line V8 parses (so upstream would answer it by its id) keeps its top-level id.
            let response = match crate::json_error::v8_json_error(&text) {
                Some(msg) => RpcResponse::parse_error(&msg),
                None => RpcResponse::parse_error_with_id(
                    protocol::recover_top_level_id(&text),
                    &e.to_string(),
                ),
            };
            out.response(response);
            return;
        }
    };
    if value.is_null() {
        // Upstream 1.6 crashes here (null_command_crash); we answer and keep serving.
        out.response(RpcResponse::parse_error(
            "a command must be a JSON object, got null",
        ));
        return;
    }
    match Incoming::from_value(value) {
        Incoming::Untyped { id } => {
            out.response(RpcResponse::error(id, None, "Unknown command: undefined"))
        }
        Incoming::Invalid { id, kind, error } => {
            out.response(RpcResponse::error(id, Some(&kind), error))
        }
        Incoming::Command { id, kind, command } => {
            if matches!(command, RpcCommand::Prompt { .. }) {
                tasks.aborts_settled().await;
            }
            dispatch(runtime, out, Call { id, kind }, command, tasks)
        }
    }
}

/// The id and `type` of the command being answered.
#[derive(Clone)]
struct Call {
    id: Option<Value>,
    kind: String,
}

impl Call {
    fn reply(&self, out: &Output, result: Result<Option<ResponseData>, String>) {
        out.response(RpcResponse::from_result(
            self.id.clone(),
            &self.kind,
            result,
        ));
    }
}

fn images_of(images: Option<Value>) -> Result<Vec<ImageContent>, String> {
    match images {
        None | Some(Value::Null) => Ok(vec![]),
        Some(v) => {
            let raw: Vec<Value> =
                serde_json::from_value(v).map_err(|e| format!("Invalid images: {e}"))?;
            raw.into_iter()
                .map(|mut i| {
                    // The block's `type` is implied; left in, it would be kept as an unknown
                    // key and written twice.
                    if let Value::Object(m) = &mut i {
                        m.remove("type");
                    }
                    serde_json::from_value::<ImageContent>(i)
                        .map_err(|e| format!("Invalid image: {e}"))
                })
                .collect()
        }
    }
}

/// The text and images of `prompt`/`steer`/`follow_up`. A missing or non-string `message` is
/// a failure, never an empty prompt, with the text upstream 1.6 answers (its handler calls
/// `text.startsWith` on whatever was sent): absent → `Cannot read properties of undefined
/// (reading 'startsWith')`, `null` → the same with `null`, any other non-string →
/// `text.startsWith is not a function`.
fn message_parts(
    message: Option<Value>,
    images: Option<Value>,
) -> Result<(String, Vec<ImageContent>), String> {
    let text = match message {
        Some(Value::String(text)) => text,
        None => return Err("Cannot read properties of undefined (reading 'startsWith')".into()),
        Some(Value::Null) => {
            return Err("Cannot read properties of null (reading 'startsWith')".into())
        }
        Some(_) => return Err("text.startsWith is not a function".into()),
    };
    Ok((text, images_of(images)?))
}

fn some(data: ResponseData) -> Result<Option<ResponseData>, String> {
    Ok(Some(data))
}

fn disposition(d: Disposition) -> ResponseData {
    ResponseData::Disposition(DispositionData { disposition: d })
}

/// Answers one command, by group ([`input_command`], [`query_command`], [`settings_command`],
/// [`session_command`]); a command none takes is unknown.
fn dispatch(
    runtime: &AgentSessionRuntime,
    out: &Output,
    call: Call,
    command: RpcCommand,
    tasks: &mut Tasks,
) {
    type Group = fn(
        &AgentSessionRuntime,
        &Output,
        Call,
        RpcCommand,
        &mut Tasks,
    ) -> Option<(Call, RpcCommand)>;
    let groups: [Group; 4] = [
        input_command,
        query_command,
        settings_command,
        session_command,
    ];
    let mut pending = (call, command);
    for group in groups {
        match group(runtime, out, pending.0, pending.1, tasks) {
            Some(next) => pending = next,
            None => return,
        }
    }
    let (call, _) = pending;
    call.reply(out, Err(format!("Unknown command: {}", call.kind)));
}

/// Prompts, queued input, aborts and `bash`. `Some` gives back a command of another group.
fn input_command(
    runtime: &AgentSessionRuntime,
    out: &Output,
    call: Call,
    command: RpcCommand,
    tasks: &mut Tasks,
) -> Option<(Call, RpcCommand)> {
    let session = runtime.session();
    let reply = |r| call.reply(out, r);
    match command {
        RpcCommand::ExtensionUiResponse {
            value,
            confirmed,
            cancelled,
            ..
        } => {
            // Never answered (§2.4); resolves the pending dialog in the extension host. The
            // id is the envelope's (a string); anything else matches no dialog.
            // A permission dialog of the session's policy is answered there first.
            let Some(Value::String(id)) = &call.id else {
                return None;
            };
            let ours = session
                .permission_gate()
                .is_some_and(|g| g.answer(id, value.clone(), cancelled));
            if let (false, Some(ext)) = (ours, session.extensions()) {
                ext.ui_response(id.clone(), value, confirmed, cancelled);
            }
        }
        RpcCommand::Prompt {
            message,
            images,
            streaming_behavior,
        } => {
            let (text, images) = match message_parts(message, images) {
                Ok(parts) => parts,
                Err(e) => {
                    reply(Err(e));
                    return None;
                }
            };
            // The session admits it (agent_session/admit.rs); the response is written when
            // the session says it is due.
            let input = PromptInput {
                text,
                images,
                streaming_behavior,
                source: InputSource::Rpc,
                commands: true,
                agent_dir: Some(runtime.factory().agent_dir.clone()),
            };
            let admitting = session.admit(input, responder(&call, out));
            run_admission(tasks, admitting);
        }
        RpcCommand::Steer { message, images } => queue_input(
            &session,
            QueueKind::Steering,
            message,
            images,
            &call,
            out,
            tasks,
        ),
        RpcCommand::FollowUp { message, images } => queue_input(
            &session,
            QueueKind::FollowUp,
            message,
            images,
            &call,
            out,
            tasks,
        ),
        RpcCommand::Abort {} => {
            let (done_tx, done_rx) = tokio::sync::oneshot::channel();
            tasks.aborts.push(done_rx);
            let work = async move {
                session.abort().await;
                Ok(None)
            };
            answer_later_then(&mut tasks.set, out, call, work, Some(done_tx));
        }
        RpcCommand::ClearQueue {} => reply(some(ResponseData::Queue(session.clear_queue()))),
        RpcCommand::Bash {
            command,
            exclude_from_context,
        } => {
            let Some(command) = command else {
                reply(Err("bash requires a string \"command\"".into()));
                return None;
            };
            let exclude = exclude_from_context.unwrap_or(false);
            let id = call.id.clone();
            // Taken now: an `abort_bash` later in the same read must cancel this command.
            let cancel = session.bash_cancel_token();
            answer_later(tasks, out, call, async move {
                let r = session.run_user_bash(&command, exclude, id, cancel).await;
                r.map(|b| Some(ResponseData::Bash(b)))
            })
        }
        RpcCommand::AbortBash {} => {
            // Upstream answers before the cancelled commands report back.
            reply(Ok(None));
            session.abort_bash();
        }
        RpcCommand::AbortRetry {} => session.abort_retry(|| reply(Ok(None))),
        other => return Some((call, other)),
    }
    None
}

/// Reads of the session: state, messages, models, commands, stats, entries, the tree, the
/// HTML export. `Some` gives back a command of another group.
fn query_command(
    runtime: &AgentSessionRuntime,
    out: &Output,
    call: Call,
    command: RpcCommand,
    _tasks: &mut Tasks,
) -> Option<(Call, RpcCommand)> {
    let session = runtime.session();
    let reply = |r| call.reply(out, r);
    match command {
        RpcCommand::GetState {} => reply(some(ResponseData::State(Box::new(session.state())))),
        RpcCommand::GetMessages {} => {
            // Streamed: the transcript is serialised straight to stdout by the writer, as it
            // stood when the command arrived (its first `n` messages), never copied.
            let n = session.message_count();
            let id = call.id.clone();
            let session = session;
            out.write_with(Box::new(move |w| {
                session.with_messages(|m| {
                    MessagesResponse::new(id.as_ref(), &m[..n.min(m.len())]).write_line(w)
                })
            }));
        }
        RpcCommand::GetLastAssistantText {} => reply(some(ResponseData::LastAssistantText(
            LastAssistantTextData {
                text: session.last_assistant_text(),
            },
        ))),
        RpcCommand::GetAvailableModels {} => reply(some(ResponseData::Models(ModelsData {
            models: session.available_models(),
        }))),
        RpcCommand::GetCommands {} => {
            let commands = session.commands();
            reply(some(ResponseData::Commands(CommandsData { commands })))
        }
        RpcCommand::GetSandbox {} => {
            let policy = runtime.factory().tool_options.sandbox;
            reply(some(ResponseData::Sandbox(SandboxData {
                mode: policy.mode.as_str().to_string(),
                network: policy.network_allowed(),
            })))
        }
        RpcCommand::GetPermissions {} => {
            let data = match session.permission_gate() {
                Some(gate) => {
                    let p = gate.policy();
                    PermissionsData {
                        mode: p.mode.as_str().to_string(),
                        allow: p.allow_rules().map(str::to_string).collect(),
                        deny: p.deny_rules().map(str::to_string).collect(),
                        ask_timeout_ms: u64::try_from(p.ask_timeout.as_millis())
                            .unwrap_or(u64::MAX),
                    }
                }
                None => PermissionsData {
                    mode: crate::permissions::PermissionMode::Off.as_str().to_string(),
                    allow: Vec::new(),
                    deny: Vec::new(),
                    ask_timeout_ms: crate::permissions::DEFAULT_ASK_TIMEOUT_MS,
                },
            };
            reply(some(ResponseData::Permissions(data)))
        }
        RpcCommand::GetSessionStats {} => {
            reply(some(ResponseData::Stats(Box::new(session.session_stats()))))
        }
        RpcCommand::GetEntries { since } => reply(
            session
                .entries(since.as_ref())
                .map(|e| Some(ResponseData::Entries(e))),
        ),
        RpcCommand::GetTree {} => reply(some(ResponseData::Tree(session.tree()))),
        RpcCommand::GetForkMessages {} => {
            reply(some(ResponseData::ForkMessages(ForkMessagesData {
                messages: session.fork_messages(),
            })))
        }
        RpcCommand::ExportHtml { output_path } => reply(
            session
                .export_html(output_path.as_deref())
                .map(|path| Some(ResponseData::Path(protocol::PathData { path }))),
        ),
        other => return Some((call, other)),
    }
    None
}

/// Model, thinking level, queue modes, auto-compaction and auto-retry. `Some` gives back a
/// command of another group.
fn settings_command(
    runtime: &AgentSessionRuntime,
    out: &Output,
    call: Call,
    command: RpcCommand,
    tasks: &mut Tasks,
) -> Option<(Call, RpcCommand)> {
    let session = runtime.session();
    let reply = |r| call.reply(out, r);
    match command {
        RpcCommand::SetModel { provider, model_id } => {
            let previous = session.model();
            let result = session.set_model(
                provider.as_deref().unwrap_or_default(),
                model_id.as_deref().unwrap_or_default(),
            );
            // `model_select` handlers run before the response (upstream awaits them).
            match (
                session.extensions().filter(|e| e.handles("model_select")),
                result,
            ) {
                (Some(ext), Ok(model)) => {
                    let ext = ext.clone();
                    answer_later(tasks, out, call, async move {
                        ext.model_select(&model, previous.as_ref(), "set").await;
                        Ok(Some(ResponseData::Model(Box::new(model))))
                    })
                }
                (_, result) => reply(result.map(|m| Some(ResponseData::Model(Box::new(m))))),
            }
        }
        RpcCommand::CycleModel {} => {
            let previous = session.model();
            let result = cycle_model(&session);
            match session.extensions().filter(|e| e.handles("model_select")) {
                Some(ext) if matches!(result, Ok(Some(ResponseData::CycleModel(_)))) => {
                    let ext = ext.clone();
                    let current = session.model();
                    answer_later(tasks, out, call, async move {
                        if let Some(model) = current {
                            ext.model_select(&model, previous.as_ref(), "cycle").await;
                        }
                        result
                    })
                }
                _ => reply(result),
            }
        }
        RpcCommand::GetAvailableThinkingLevels {} => {
            let levels = session
                .available_thinking_levels()
                .into_iter()
                .map(|l| l.as_str().to_string())
                .collect();
            reply(some(ResponseData::Levels(LevelsData { levels })))
        }
        RpcCommand::SetThinkingLevel { level } => {
            let level = level
                .as_deref()
                .and_then(ThinkingLevel::parse)
                .unwrap_or(ThinkingLevel::Off);
            session.set_thinking_level(level);
            reply(Ok(None))
        }
        RpcCommand::CycleThinkingLevel {} => reply(some(match session.cycle_thinking_level() {
            Some(level) => ResponseData::Level(LevelData {
                level: level.as_str().to_string(),
            }),
            None => ResponseData::Null,
        })),
        RpcCommand::SetSteeringMode { mode } => {
            session.set_queue_mode(QueueKind::Steering, mode_value(mode));
            reply(Ok(None))
        }
        RpcCommand::SetFollowUpMode { mode } => {
            session.set_queue_mode(QueueKind::FollowUp, mode_value(mode));
            reply(Ok(None))
        }
        RpcCommand::SetAutoCompaction { enabled } => {
            session.set_auto_compaction(enabled.unwrap_or(false));
            reply(Ok(None))
        }
        RpcCommand::SetAutoRetry { enabled } => {
            session.set_auto_retry(enabled.unwrap_or(false));
            reply(Ok(None))
        }
        other => return Some((call, other)),
    }
    None
}

/// The session file: name, clone, switch, new, fork, compact. `Some` gives back a command of
/// another group.
fn session_command(
    runtime: &AgentSessionRuntime,
    out: &Output,
    call: Call,
    command: RpcCommand,
    tasks: &mut Tasks,
) -> Option<(Call, RpcCommand)> {
    let session = runtime.session();
    let reply = |r| call.reply(out, r);
    match command {
        RpcCommand::SetSessionName { name } => reply(
            session
                .set_session_name(name.as_deref().unwrap_or_default())
                .map(|()| None),
        ),
        RpcCommand::Clone {} => {
            let rt = runtime.clone();
            answer_later(tasks, out, call, async move {
                rt.clone_session().await.map(|c| Some(cancelled(c)))
            })
        }
        RpcCommand::SwitchSession { session_path } => {
            let rt = runtime.clone();
            let path = session_path.unwrap_or_default();
            answer_later(tasks, out, call, async move {
                rt.switch_session(&path).await.map(|c| Some(cancelled(c)))
            })
        }
        RpcCommand::NewSession { parent_session } => {
            let rt = runtime.clone();
            answer_later(tasks, out, call, async move {
                rt.new_session(parent_session)
                    .await
                    .map(|c| Some(cancelled(c)))
            })
        }
        RpcCommand::Fork { entry_id } => {
            let rt = runtime.clone();
            let entry_id = entry_id.unwrap_or_default();
            answer_later(tasks, out, call, async move {
                let text = rt.fork(&entry_id).await?;
                Ok(Some(ResponseData::Fork(ForkData {
                    cancelled: text.is_none(),
                    text,
                })))
            })
        }
        RpcCommand::Compact {
            custom_instructions,
        } => answer_later(tasks, out, call, async move {
            let result = session.compact(custom_instructions).await?;
            Ok(Some(ResponseData::Compaction(Box::new(result))))
        }),
        other => return Some((call, other)),
    }
    None
}

/// Writes the response of a `prompt`/`steer`/`follow_up` when the session calls it.
fn responder(call: &Call, out: &Output) -> Responder {
    let (call, out) = (call.clone(), out.clone());
    Responder::new(move |r| call.reply(&out, r.map(|d| Some(disposition(d)))))
}

/// Drives an admission: a pending one (a command, `input` handlers) as a task of its own, so
/// the reader goes on (a command may wait on a dialog this client answers); a started run as
/// a task.
fn run_admission(tasks: &mut Tasks, admitting: Admitting) {
    match admitting {
        Admitting::Done(Admission::Started(run)) => {
            tasks.set.spawn(run);
        }
        Admitting::Done(_) => {}
        Admitting::Pending(work) => {
            tasks.set.spawn(async move {
                if let Admission::Started(run) = work.await {
                    run.await
                }
            });
        }
    }
}

/// Runs a slow command as a task and answers it when it is done. A panic inside becomes a
/// failure response, so every command is answered exactly once (rpc-protocol.md §3.2).
fn answer_later<F>(tasks: &mut Tasks, out: &Output, call: Call, work: F)
where
    F: std::future::Future<Output = Result<Option<ResponseData>, String>> + Send + 'static,
{
    answer_later_then(&mut tasks.set, out, call, work, None)
}

/// [`answer_later`], then signals `answered` once the response has been queued.
fn answer_later_then<F>(
    tasks: &mut JoinSet<()>,
    out: &Output,
    call: Call,
    work: F,
    answered: Option<tokio::sync::oneshot::Sender<()>>,
) where
    F: std::future::Future<Output = Result<Option<ResponseData>, String>> + Send + 'static,
{
    let out = out.clone();
    tasks.spawn(async move {
        let result = match std::panic::AssertUnwindSafe(work).catch_unwind().await {
            Ok(r) => r,
            Err(panic) => Err(format!("Internal error: {}", panic_text(panic.as_ref()))),
        };
        call.reply(&out, result);
        if let Some(tx) = answered {
            let _ = tx.send(());
        }
    });
}

/// `steer` / `follow_up` (§4.1): admitted by the session (`queued`, or `handled` by an
/// `input` handler); answered when the session says so.
fn queue_input(
    session: &AgentSession,
    kind: QueueKind,
    message: Option<Value>,
    images: Option<Value>,
    call: &Call,
    out: &Output,
    tasks: &mut Tasks,
) {
    let (text, images) = match message_parts(message, images) {
        Ok(parts) => parts,
        Err(e) => return call.reply(out, Err(e)),
    };
    let respond = responder(call, out);
    run_admission(
        tasks,
        session.admit_queued(kind, text, images, InputSource::Rpc, respond),
    );
}

/// A queue mode as upstream stores it: the value as sent; absent = `null` (JS `undefined`,
/// which leaves the key out of `get_state` and `settings.json`).
fn mode_value(mode: Option<Value>) -> Value {
    mode.unwrap_or(Value::Null)
}

/// `{cancelled}` of `new_session`, `switch_session`, `clone` (true when an extension's
/// `session_before_switch` / `session_before_fork` handler cancelled).
fn cancelled(cancelled: bool) -> ResponseData {
    ResponseData::Cancelled(CancelledData { cancelled })
}

fn cycle_model(session: &AgentSession) -> Result<Option<ResponseData>, String> {
    Ok(Some(match session.cycle_model()? {
        Some((model, is_scoped)) => ResponseData::CycleModel(Box::new(CycleModelData {
            model,
            thinking_level: session.thinking_level().as_str().to_string(),
            is_scoped,
        })),
        None => ResponseData::Null,
    }))
}
