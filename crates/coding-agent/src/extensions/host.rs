//! The Node child process that runs extensions, and the request/reply plumbing to it.

use super::wire::{
    CallResult, FromHost, LoadResult, ProviderStreamEvent, ToHost, TranspileParams, TranspileReply,
};
use crate::protocol::rpc::EventSink;
use crate::protocol::rpc::RpcEvent;
use parking_lot::Mutex;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// The host program, shipped inside the binary.
const HOST_JS: &str = include_str!("host.mjs");

/// The oldest Node that runs the host (`module.register`, stable `import()` of file URLs).
pub const MIN_NODE_MAJOR: u32 = 20;

/// Why the host could not do what was asked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HostError {
    /// `node` could not be started or is too old.
    #[error("{0}")]
    NodeUnavailable(String),
    /// The host process has exited (crashed or was killed).
    #[error("the extension host exited{0}")]
    Died(String),
    /// No reply within the allowed time.
    #[error("the extension host did not answer within {0} ms")]
    Timeout(u64),
    /// A handler threw; the text is its message.
    #[error("{0}")]
    Handler(String),
    /// The run the round belongs to was aborted and it had not answered [`ABORT_GRACE`]
    /// later (ms).
    #[error("the run was aborted and the extension did not answer within {0} ms")]
    Aborted(u64),
    /// The RPC client closed stdin and the round had not answered [`EOF_GRACE`] later (ms).
    #[error("the extension did not answer within {0} ms after stdin closed")]
    InputClosed(u64),
}

/// How long a request to the host may still take once the RPC client has closed stdin
/// ([`ExtensionHost::input_closed`]): a hook round, event handler or command still pending
/// then (or started after) fails after this long, so one that never settles (or waits on a
/// dialog nobody can answer now) cannot hold the exit. The run in flight at EOF is still let
/// finish (rpc/mod.rs); only the extension rounds are bounded. Extension tool executions are
/// not bounded by it (they are tools, like a long `bash`).
pub const EOF_GRACE: Duration = Duration::from_secs(3);

/// How long a round of a run's handlers (`message_end`, `turn_end`, `agent_before_settle`)
/// may still take once that run is aborted ([`ExtensionHost::request_until`]): a handler
/// that answers at once still takes part (e.g. in the aborted message's `message_end`), one
/// that never settles cannot hold the abort.
pub const ABORT_GRACE: Duration = pi_agent::HOOK_ABORT_GRACE;

/// Removes a request's reply slot when its waiter goes away (answered, timed out, or dropped
/// because an abort ended the round), so no slot outlives its request.
struct SlotGuard<'a> {
    pending: &'a Pending,
    id: u64,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.pending.lock().remove(&self.id);
    }
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, HostError>>>>>;

/// Receives the partial results ([`FromHost::ToolUpdate`]) of one request.
pub type UpdateSink = Arc<dyn Fn(Value) + Send + Sync>;

type Updates = Arc<Mutex<HashMap<u64, UpdateSink>>>;

/// Called by the host's reader when the reply to one request arrives, before any later line
/// of the host is handled ([`ExtensionHost::request_then`]).
pub type ReplyHook = Box<dyn FnOnce() + Send>;

type ReplyHooks = Arc<Mutex<HashMap<u64, ReplyHook>>>;

/// Where the events of each running extension-provider stream go ([`FromHost::StreamEvent`]).
type Streams = Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<ProviderStreamEvent>>>>;

/// What `pi` does with one API call from an extension ([`FromHost::Call`]): the synchronous
/// part has run when this is returned (so calls take effect in the order they were made); a
/// call that carried an id is answered with the value, at once or once the future is done.
pub enum CallReply {
    /// The answer (`call_result`), already known.
    Now(CallResult),
    /// Work that has to wait (a session replacement, `waitForIdle`); it runs as its own task
    /// so the host's replies keep flowing meanwhile.
    Later(futures::future::BoxFuture<'static, CallResult>),
}

/// Carries out API calls (`method` as upstream spells it, its params).
pub type CallHandler = Arc<dyn Fn(String, Value) -> CallReply + Send + Sync>;

/// Receives [`FromHost::Registered`] snapshots (set by [`ExtensionHost::on_registered`]).
pub type RegisteredSink = Arc<dyn Fn(Vec<super::wire::LoadedExtension>) + Send + Sync>;

type RegisteredSlot = Arc<Mutex<Option<RegisteredSink>>>;

/// A running extension host. Cheap to share (`Arc`).
pub struct ExtensionHost {
    tx: mpsc::UnboundedSender<String>,
    registered: RegisteredSlot,
    pending: Pending,
    updates: Updates,
    streams: Streams,
    reply_hooks: ReplyHooks,
    next_id: AtomicU64,
    dead: Arc<AtomicBool>,
    exit_note: Arc<Mutex<String>>,
    pid: Option<u32>,
    /// Fired once stdin of the RPC client has closed ([`EOF_GRACE`]).
    closing: tokio_util::sync::CancellationToken,
    /// Fired by [`ExtensionHost::shutdown`]: the host's stdin is closed (it exits), and it is
    /// killed if it has not exited [`SHUTDOWN_GRACE`] later.
    stop: tokio_util::sync::CancellationToken,
    /// Fired once the host process has exited and was reaped.
    exited: tokio_util::sync::CancellationToken,
}

/// How long [`ExtensionHost::shutdown`] lets the host exit by itself (its stdin closed) before
/// it is killed.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Removes a request's reply hook when its waiter goes away, so a hook never outlives its
/// request.
struct HookGuard<'a> {
    hooks: &'a ReplyHooks,
    id: u64,
}

impl Drop for HookGuard<'_> {
    fn drop(&mut self) {
        self.hooks.lock().remove(&self.id);
    }
}

/// Checks `node --version` (≥ [`MIN_NODE_MAJOR`]).
fn check_node(node: &str) -> Result<(), String> {
    let out = std::process::Command::new(node)
        .arg("--version")
        .output()
        .map_err(|e| format!("Node.js is needed to run extensions but `{node}` could not be started ({e}); install Node.js {MIN_NODE_MAJOR} or newer"))?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let major = v
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(0);
    if major < MIN_NODE_MAJOR {
        return Err(format!(
            "Node.js {MIN_NODE_MAJOR} or newer is needed to run extensions, found {v:?}; install a newer Node.js"
        ));
    }
    Ok(())
}

/// Queues `msg` as one line for the host's stdin.
fn send_line(tx: &mpsc::UnboundedSender<String>, msg: &ToHost<'_>) {
    if let Ok(mut line) = serde_json::to_string(msg) {
        line.push('\n');
        let _ = tx.send(line);
    }
}

impl ExtensionHost {
    /// Starts `node` (env `PI_NODE` or `node` on `PATH`) with the embedded host program and
    /// `cwd` as its working directory. `sdk`: the SDK cache folder ([`super::sdk`]) whose real
    /// modules the extensions' imports resolve to (`None`: the host's stand-ins). `sink`
    /// receives `extension_ui_request` and `extension_error` events; `on_call` receives API
    /// calls from extensions.
    pub fn spawn(
        cwd: &std::path::Path,
        sdk: Option<&Path>,
        sink: EventSink,
        on_call: CallHandler,
    ) -> Result<Arc<Self>, HostError> {
        let node = std::env::var("PI_NODE").unwrap_or_else(|_| "node".into());
        check_node(&node).map_err(HostError::NodeUnavailable)?;
        let mut command = tokio::process::Command::new(&node);
        if let Some(dir) = sdk {
            command.env("PI_HOST_SDK", dir);
        }
        let mut child = command
            .arg("--enable-source-maps")
            .arg("--input-type=module")
            .arg("-e")
            .arg(HOST_JS)
            .current_dir(cwd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| HostError::NodeUnavailable(format!("could not start `{node}`: {e}")))?;
        let pid = child.id();
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(HostError::NodeUnavailable(
                "no pipe to the extension host".into(),
            ));
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let stop = tokio_util::sync::CancellationToken::new();
        let exited = tokio_util::sync::CancellationToken::new();
        let writer_stop = stop.clone();
        tokio::spawn(async move {
            loop {
                let line = tokio::select! {
                    biased;
                    () = writer_stop.cancelled() => break,
                    line = rx.recv() => line,
                };
                let Some(line) = line else { break };
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
            // Dropping stdin closes it: the host exits (host.mjs ends on stdin's close).
        });
        let pending: Pending = Arc::default();
        let reply_hooks: ReplyHooks = Arc::default();
        let hooks = reply_hooks.clone();
        let updates: Updates = Arc::default();
        let ups = updates.clone();
        let streams: Streams = Arc::default();
        let stream_routes = streams.clone();
        let registered: RegisteredSlot = Arc::default();
        let registered_sink = registered.clone();
        let dead = Arc::new(AtomicBool::new(false));
        let exit_note = Arc::new(Mutex::new(String::new()));
        let (p, d, note) = (pending.clone(), dead.clone(), exit_note.clone());
        let reply_tx = tx.clone();
        let (reader_stop, reader_exited) = (stop.clone(), exited.clone());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let kill_after = {
                let stop = reader_stop.clone();
                async move {
                    stop.cancelled().await;
                    tokio::time::sleep(SHUTDOWN_GRACE).await;
                }
            };
            tokio::pin!(kill_after);
            loop {
                let line = tokio::select! {
                    line = lines.next_line() => line,
                    () = &mut kill_after => {
                        let _ = child.start_kill();
                        break;
                    }
                };
                let Ok(Some(line)) = line else { break };
                let Ok(msg) = serde_json::from_str::<FromHost>(&line) else {
                    tracing::warn!("extension host: undecodable line: {line}");
                    continue;
                };
                match msg {
                    FromHost::Reply {
                        id,
                        ok,
                        result,
                        error,
                    } => {
                        // The hook runs here, in line order: whatever the host sends after
                        // this reply (a `sendUserMessage` call, ...) comes after its effect.
                        let hook = hooks.lock().remove(&id);
                        if let Some(hook) = hook {
                            hook();
                        }
                        if let Some(tx) = p.lock().remove(&id) {
                            let _ = tx.send(if ok {
                                Ok(result)
                            } else {
                                Err(HostError::Handler(error.unwrap_or_default()))
                            });
                        }
                    }
                    FromHost::Ui { request } => sink(RpcEvent::ExtensionUiRequest(*request)),
                    FromHost::Error {
                        extension_path,
                        event,
                        error,
                    } => {
                        eprintln!("Extension error ({extension_path}, {event}): {error}");
                        sink(RpcEvent::ExtensionError {
                            extension_path,
                            event,
                            error,
                        })
                    }
                    FromHost::Call {
                        id: Some(id),
                        method,
                        params,
                    } if method == "transpile" => {
                        // The loader thread waits for this; transpiling is quick and local.
                        let path = TranspileParams::from_value(&params).path;
                        let result = CallResult::Transpile(TranspileReply::from(
                            super::typescript::transpile_file(Path::new(&path)),
                        ));
                        send_line(&reply_tx, &ToHost::CallResult { id, result });
                    }
                    FromHost::Call { id, method, params } => match (on_call(method, params), id) {
                        (CallReply::Now(result), Some(id)) => {
                            send_line(&reply_tx, &ToHost::CallResult { id, result })
                        }
                        (CallReply::Now(_), None) => {}
                        (CallReply::Later(work), id) => {
                            let tx = reply_tx.clone();
                            tokio::spawn(async move {
                                let result = work.await;
                                if let Some(id) = id {
                                    send_line(&tx, &ToHost::CallResult { id, result });
                                }
                            });
                        }
                    },
                    FromHost::Registered { extensions } => {
                        let sink = registered_sink.lock().clone();
                        if let Some(sink) = sink {
                            sink(extensions);
                        }
                    }
                    FromHost::StreamEvent { id, event } => {
                        if let Some(tx) = stream_routes.lock().get(&id) {
                            let _ = tx.send(*event);
                        }
                    }
                    FromHost::ToolUpdate { id, partial } => {
                        let sink = ups.lock().get(&id).cloned();
                        if let Some(sink) = sink {
                            sink(partial);
                        }
                    }
                }
            }
            // EOF: the host is gone. Fail everything still waiting.
            d.store(true, Ordering::SeqCst);
            let status = child.wait().await;
            let text = match status {
                Ok(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
                    (Some(c), _) => format!(" (exit code {c})"),
                    (None, Some(sig)) => format!(" (killed by signal {sig})"),
                    _ => String::new(),
                },
                Err(_) => String::new(),
            };
            *note.lock() = text.clone();
            reader_exited.cancel();
            // Never silently: the client learns that extensions are gone (tool calls are
            // blocked from now on, see Extensions::before_tool_call). A host pi stopped
            // itself ([`ExtensionHost::shutdown`]) is not an error.
            if !reader_stop.is_cancelled() {
                let error = format!("the extension host exited{text}");
                eprintln!("Error: {error}");
                sink(RpcEvent::ExtensionError {
                    extension_path: "<runtime>".into(),
                    event: "host".into(),
                    error,
                });
            }
            for (_, tx) in p.lock().drain() {
                let _ = tx.send(Err(HostError::Died(text.clone())));
            }
            stream_routes.lock().clear();
        });
        Ok(Arc::new(ExtensionHost {
            tx,
            registered,
            pending,
            updates,
            streams,
            reply_hooks,
            next_id: AtomicU64::new(1),
            dead,
            exit_note,
            pid,
            closing: tokio_util::sync::CancellationToken::new(),
            stop,
            exited,
        }))
    }

    /// Where [`FromHost::Registered`] snapshots go from now on (replacing any earlier sink).
    pub fn on_registered(&self, sink: RegisteredSink) {
        *self.registered.lock() = Some(sink);
    }

    /// The host's process id (tests kill it).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Whether the host has exited.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Stops the host: its stdin is closed, so it exits; one that has not exited
    /// [`SHUTDOWN_GRACE`] later is killed. Returns once the process has exited and was reaped
    /// (no orphan, no zombie). Requests still pending fail ([`HostError::Died`]); no
    /// `extension_error` is emitted for this exit.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.exited.cancelled().await;
    }

    /// A fresh request id.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a message without waiting for anything.
    pub fn send(&self, msg: &ToHost<'_>) {
        send_line(&self.tx, msg)
    }

    /// The RPC client closed stdin: from now on every request (pending or new) fails with
    /// [`HostError::InputClosed`] if it has not answered within [`EOF_GRACE`].
    pub fn input_closed(&self) {
        self.closing.cancel();
    }

    /// Sends request `msg` (whose id is `id`) and waits for its reply, at most `timeout`
    /// (`None` = as long as it takes, e.g. a command waiting on a dialog), and at most
    /// [`EOF_GRACE`] once stdin has closed. Dropping the future abandons the request (its
    /// late reply is discarded).
    pub async fn request(
        &self,
        id: u64,
        msg: &ToHost<'_>,
        timeout: Option<Duration>,
    ) -> Result<Value, HostError> {
        self.request_bounded(id, msg, timeout, true).await
    }

    /// [`ExtensionHost::request`]; `on_reply` is called by the host's reader as soon as the
    /// reply arrives, before the host's next line is handled (so what it writes comes before
    /// anything that line causes). It is not called when the request fails otherwise (host
    /// died, timed out, input closed) or is dropped; the caller handles those after the
    /// returned error.
    pub async fn request_then(
        &self,
        id: u64,
        msg: &ToHost<'_>,
        timeout: Option<Duration>,
        on_reply: ReplyHook,
    ) -> Result<Value, HostError> {
        self.reply_hooks.lock().insert(id, on_reply);
        let _hook = HookGuard {
            hooks: &self.reply_hooks,
            id,
        };
        self.request_bounded(id, msg, timeout, true).await
    }

    /// [`ExtensionHost::request`] for a round of the run whose token is `cancel`: given up
    /// with [`HostError::Aborted`] if it has not answered [`ABORT_GRACE`] after the token
    /// fired (before or while it waits).
    pub async fn request_until(
        &self,
        id: u64,
        msg: &ToHost<'_>,
        timeout: Option<Duration>,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<Value, HostError> {
        let aborted = async {
            cancel.cancelled().await;
            tokio::time::sleep(ABORT_GRACE).await;
        };
        tokio::select! {
            r = self.request(id, msg, timeout) => r,
            () = aborted => Err(HostError::Aborted(ABORT_GRACE.as_millis() as u64)),
        }
    }

    /// [`ExtensionHost::request`]; `eof_bounded: false` keeps waiting after stdin closed.
    async fn request_bounded(
        &self,
        id: u64,
        msg: &ToHost<'_>,
        timeout: Option<Duration>,
        eof_bounded: bool,
    ) -> Result<Value, HostError> {
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(id, tx);
        let _slot = SlotGuard {
            pending: &self.pending,
            id,
        };
        if self.is_dead() {
            return Err(HostError::Died(self.exit_note.lock().clone()));
        }
        self.send(msg);
        let died = || HostError::Died(self.exit_note.lock().clone());
        let reply = async {
            match timeout {
                None => rx.await.unwrap_or_else(|_| Err(died())),
                Some(t) => match tokio::time::timeout(t, rx).await {
                    Ok(r) => r.unwrap_or_else(|_| Err(died())),
                    Err(_) => Err(HostError::Timeout(t.as_millis() as u64)),
                },
            }
        };
        let closed = async {
            self.closing.cancelled().await;
            tokio::time::sleep(EOF_GRACE).await;
        };
        tokio::select! {
            r = reply => r,
            () = closed, if eof_bounded => Err(HostError::InputClosed(EOF_GRACE.as_millis() as u64)),
        }
    }

    /// [`ExtensionHost::request`], handing every partial result of the request to `on_update`
    /// (in order, before the reply is returned). `eof_bounded`: whether [`EOF_GRACE`] applies
    /// (not for an extension tool's execution).
    pub async fn request_with_updates(
        &self,
        id: u64,
        msg: &ToHost<'_>,
        timeout: Option<Duration>,
        on_update: UpdateSink,
        eof_bounded: bool,
    ) -> Result<Value, HostError> {
        self.updates.lock().insert(id, on_update);
        let r = self.request_bounded(id, msg, timeout, eof_bounded).await;
        self.updates.lock().remove(&id);
        r
    }

    /// Routes the [`FromHost::StreamEvent`]s of request `id` to the returned receiver until
    /// [`ExtensionHost::close_stream`] (or the host's exit).
    pub fn open_stream(&self, id: u64) -> mpsc::UnboundedReceiver<ProviderStreamEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.streams.lock().insert(id, tx);
        rx
    }

    /// Stops routing the stream events of request `id`.
    pub fn close_stream(&self, id: u64) {
        self.streams.lock().remove(&id);
    }

    /// Fires the `AbortSignal` of request `id` in the host (its reply still comes).
    pub fn abort(&self, id: u64) {
        self.updates.lock().remove(&id);
        self.send(&ToHost::Abort { id });
    }

    /// Loads `paths` (absolute entry files) for `mode` (`rpc`/`json`/`print`).
    pub async fn load(
        &self,
        paths: &[PathBuf],
        mode: &str,
        cwd: &std::path::Path,
    ) -> Result<LoadResult, HostError> {
        let id = self.next_id();
        let msg = ToHost::Load {
            id,
            paths: paths
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            mode: mode.to_string(),
            cwd: cwd.to_string_lossy().into_owned(),
        };
        let v = self
            .request(id, &msg, Some(Duration::from_secs(60)))
            .await?;
        serde_json::from_value(v).map_err(|e| HostError::Handler(format!("bad load reply: {e}")))
    }
}
