//! The shell execution engine behind the `bash` tool and the RPC `bash` command
//! (spec tools.md §4.2–§4.4 and §9; rpc-protocol.md §4.8).
//!
//! A command runs as `<shell> -c <command>` in its own process group with stdin closed and
//! stdout/stderr merged in arrival order. When the shell exits, is aborted or times out, every
//! process left in its group is sent `SIGTERM`, then `SIGKILL` after [`KILL_GRACE`]; only a
//! process that left the group (`setsid`) survives. All output the group wrote is read (the
//! pipe is drained to its end, with back-pressure instead of unbounded buffering).
//! On Linux the shell runs under a per-command supervisor that also kills the group when the
//! agent process dies ([`crate::child_guard::supervise_group`]).

use super::truncate::{truncate_tail, TruncationLimits, TruncationResult, DEFAULT_MAX_BYTES};
use serde::Serialize;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Largest accepted timeout in seconds (JavaScript's maximum timer delay).
pub const MAX_TIMEOUT_SECONDS: f64 = 2_147_483.647;

/// Once the command's process group is gone, reading stops after the pipe has been idle this
/// long: only a process that left the group (`setsid`) can still hold it open.
const DRAIN_GRACE: Duration = Duration::from_millis(200);

/// Once the group is gone, reading stops when more than this arrived since (the pipe and the
/// read-ahead hold less: the rest comes from a process outside the group, `setsid`)…
const DRAIN_MAX_BYTES: usize = READ_CHUNK * (READ_AHEAD_CHUNKS + 2);

/// …or at the latest this long after the group was gone (a trickling `setsid` daemon is not
/// followed forever).
const DRAIN_MAX: Duration = Duration::from_secs(10);

/// How long the processes of a finished, aborted or timed-out command get between `SIGTERM`
/// and `SIGKILL` (README "Background processes").
pub const KILL_GRACE: Duration = Duration::from_millis(500);

/// How often the engine checks whether a signalled process group is empty.
const GROUP_POLL: Duration = Duration::from_millis(10);

/// Bytes per read from the output pipe.
const READ_CHUNK: usize = 64 * 1024;

/// Chunks read ahead of the sink at most (bounds memory: `READ_CHUNK * READ_AHEAD_CHUNKS`).
const READ_AHEAD_CHUNKS: usize = 4;

/// Environment variables describing the session that are never inherited by commands.
pub const SESSION_ENV_VARS: [&str; 5] = [
    "PI_SESSION_ID",
    "PI_SESSION_FILE",
    "PI_PROVIDER",
    "PI_MODEL",
    "PI_REASONING_LEVEL",
];

/// Picks the shell (spec tools.md §4.2): the configured `shellPath` (must exist), else
/// `/bin/bash`, else the first `bash` on `PATH`, else `sh`.
pub fn resolve_shell(custom: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = custom {
        if p.exists() {
            return Ok(p.to_path_buf());
        }
        return Err(format!(
            "Custom shell path not found: {}\nPlease update shellPath in settings.json",
            p.display()
        ));
    }
    let bin_bash = Path::new("/bin/bash");
    if bin_bash.exists() {
        return Ok(bin_bash.to_path_buf());
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join("bash");
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Ok(PathBuf::from("sh"))
}

/// The environment for commands: the parent environment with `bin_dir` prepended to `PATH`
/// (unless already listed) and the session variables ([`SESSION_ENV_VARS`]) removed.
pub fn shell_env(bin_dir: Option<&Path>) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = std::env::vars().collect();
    for key in SESSION_ENV_VARS {
        env.remove(key);
    }
    if let Some(bin) = bin_dir {
        let bin_s = bin.to_string_lossy().into_owned();
        let key = env
            .keys()
            .find(|k| k.eq_ignore_ascii_case("PATH"))
            .cloned()
            .unwrap_or_else(|| "PATH".to_string());
        let current = env.get(&key).cloned().unwrap_or_default();
        if !current.split(':').any(|p| p == bin_s) {
            let joined = if current.is_empty() {
                bin_s
            } else {
                format!("{bin_s}:{current}")
            };
            env.insert(key, joined);
        }
    }
    env
}

/// Validates a model-supplied timeout in seconds (newer upstream rules).
pub fn validate_timeout(timeout: Option<f64>) -> Result<Option<Duration>, String> {
    match timeout {
        None => Ok(None),
        Some(t) if !t.is_finite() || t <= 0.0 => {
            Err("Invalid timeout: must be a finite number of seconds".into())
        }
        Some(t) if t > MAX_TIMEOUT_SECONDS => Err(format!(
            "Invalid timeout: maximum is {MAX_TIMEOUT_SECONDS} seconds"
        )),
        Some(t) => Ok(Some(Duration::from_secs_f64(t))),
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct ShellCommand {
    /// The command line handed to `-c` (a command prefix, if any, already prepended).
    pub command: String,
    /// Working directory; must exist.
    pub cwd: PathBuf,
    /// Shell executable; `None` = [`resolve_shell`]`(None)`.
    pub shell: Option<PathBuf>,
    /// Complete environment; `None` = [`shell_env`]`(None)`.
    pub env: Option<HashMap<String, String>>,
    /// Kill the process group after this long.
    pub timeout: Option<Duration>,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellExit {
    /// The shell exited by itself; `None` when it was ended by a signal we did not send.
    Exited(Option<i32>),
    /// The cancellation token fired; the process group was killed.
    Aborted,
    /// The timeout elapsed; the process group was killed.
    TimedOut,
}

/// Receives output while a command runs. `wakeup`/`on_wakeup` let a sink flush throttled
/// updates without new output arriving.
pub trait OutputSink: Send {
    /// A chunk of raw output (stdout and stderr interleaved in arrival order).
    fn on_data(&mut self, chunk: &[u8]);
    /// When the engine should call [`OutputSink::on_wakeup`] next, if at all.
    fn wakeup(&self) -> Option<Instant> {
        None
    }
    /// Called at or after the instant returned by [`OutputSink::wakeup`].
    fn on_wakeup(&mut self) {}
}

impl<F: FnMut(&[u8]) + Send> OutputSink for F {
    fn on_data(&mut self, chunk: &[u8]) {
        self(chunk)
    }
}

/// Sends `sig` to the process group `pgid`; `sig` 0 only checks. `true` when the group had a
/// member to signal.
fn signal_process_group(pgid: u32, sig: libc::c_int) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return false;
    };
    if pgid <= 0 {
        return false;
    }
    // SAFETY: a plain kill(2) call with a negative pid (a process group); no memory is shared.
    unsafe { libc::kill(-pgid, sig) == 0 }
}

/// Sends `SIGKILL` to a process group, falling back to the single process.
pub fn kill_process_group(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid <= 0 {
        return;
    }
    // SAFETY: plain kill(2) calls with a positive pid; no memory is shared.
    unsafe {
        if libc::kill(-pid, libc::SIGKILL) != 0 {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Keeps a running child's process group in [`crate::procs`] so that it is killed if the agent
/// exits while the command runs.
struct ProcessRegistration(i32);

impl ProcessRegistration {
    fn new(pid: u32) -> Self {
        let pid = pid as i32;
        crate::procs::register(pid);
        ProcessRegistration(pid)
    }
}

impl Drop for ProcessRegistration {
    fn drop(&mut self) {
        crate::procs::unregister(self.0);
    }
}

/// Kills the process group when dropped while armed (the caller's future was dropped mid-run).
struct GroupGuard {
    pid: Option<u32>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.take() {
            kill_process_group(pid);
        }
    }
}

/// Runs `cmd`, streaming output to `sink`, until it exits, `cancel` fires or the timeout elapses.
///
/// Errors: an already-cancelled token gives `Ok(ShellExit::Aborted)` without spawning; a missing
/// working directory gives `Working directory does not exist: <cwd>\nCannot execute bash
/// commands.`; spawn failures give the OS error text.
pub async fn run_shell(
    cmd: &ShellCommand,
    cancel: &CancellationToken,
    sink: &mut dyn OutputSink,
) -> Result<ShellExit, String> {
    if cancel.is_cancelled() {
        return Ok(ShellExit::Aborted);
    }
    if !cmd.cwd.exists() {
        return Err(format!(
            "Working directory does not exist: {}\nCannot execute bash commands.",
            cmd.cwd.display()
        ));
    }
    let shell = match &cmd.shell {
        Some(s) => s.clone(),
        None => resolve_shell(None)?,
    };
    let env = match &cmd.env {
        Some(e) => e.clone(),
        None => shell_env(None),
    };
    let mut command = tokio::process::Command::new(&shell);
    command
        .arg("-c")
        .arg(&cmd.command)
        .current_dir(&cmd.cwd)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .process_group(0);
    // The group dies with the agent, even on SIGKILL (see crate::child_guard).
    crate::child_guard::supervise_group(command.as_std_mut());
    // stdout and stderr share one pipe, so output arrives in the order the command wrote it
    // (two pipes race: `echo out; echo err >&2` could come back as "err\nout").
    let (pipe_reader, pipe_writer) =
        std::io::pipe().map_err(|e| format!("Failed to create a pipe: {e}"))?;
    let stderr_writer = pipe_writer
        .try_clone()
        .map_err(|e| format!("Failed to create a pipe: {e}"))?;
    command
        .stdout(Stdio::from(pipe_writer))
        .stderr(Stdio::from(stderr_writer));
    let spawned = command.spawn();
    // The parent's copies of the write end go away with `command`, so the reader sees EOF once
    // the command and its descendants have closed theirs.
    drop(command);
    let mut child = spawned.map_err(|e| format!("Failed to spawn {}: {e}", shell.display()))?;
    let mut output = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(pipe_reader))
        .map_err(|e| format!("Failed to read command output: {e}"))?;
    let mut guard = GroupGuard { pid: child.id() };
    let _registered = child.id().map(ProcessRegistration::new);

    // A bounded channel: when the consumer (the sink, and behind it stdout) is slower than the
    // command, the reader stops reading and the pipe fills, so the command waits instead of
    // its output piling up in memory.
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(READ_AHEAD_CHUNKS);
    let reader = tokio::spawn(async move {
        let mut buf = vec![0u8; READ_CHUNK];
        while let Ok(n) = output.read(&mut buf).await {
            if n == 0 || tx.send(buf[..n].to_vec()).await.is_err() {
                break;
            }
        }
    });

    let pgid = child.id();
    let timeout_at = cmd.timeout.map(|d| Instant::now() + d);
    let mut killed: Option<ShellExit> = None;
    let mut status: Option<Option<i32>> = None;
    let mut ending = GroupEnding::default();
    let mut exited = false;
    // When the group was found empty after the shell exited, and what arrived since.
    let mut group_gone_at: Option<Instant> = None;
    let mut bytes_since_gone = 0usize;
    let mut last_data = Instant::now();
    let mut streams_open = true;

    loop {
        if exited && group_gone_at.is_none() && ending.done(pgid) {
            group_gone_at = Some(Instant::now());
        }
        if let Some(gone) = group_gone_at {
            // Everything the group wrote is in the pipe once the group is gone, so an idle
            // pipe (or more output than the pipe holds) means a process outside the group
            // (`setsid`) keeps it open.
            let now = Instant::now();
            if !streams_open
                || now >= last_data + DRAIN_GRACE
                || bytes_since_gone > DRAIN_MAX_BYTES
                || now >= gone + DRAIN_MAX
            {
                break;
            }
        }
        let wake = sink.wakeup();
        let drain_at = group_gone_at.map(|g| (last_data + DRAIN_GRACE).min(g + DRAIN_MAX));
        let poll_group = exited && group_gone_at.is_none();
        tokio::select! {
            chunk = rx.recv(), if streams_open => match chunk {
                Some(bytes) => {
                    sink.on_data(&bytes);
                    last_data = Instant::now();
                    if group_gone_at.is_some() {
                        bytes_since_gone += bytes.len();
                    }
                }
                None => streams_open = false,
            },
            res = child.wait(), if status.is_none() => {
                let code = match res {
                    Ok(st) => st.code(),
                    Err(_) => None,
                };
                status = Some(code);
                exited = true;
                last_data = Instant::now();
                // Finished, aborted or timed out: whatever is left in the group is ended.
                ending.start(pgid);
            }
            _ = cancel.cancelled(), if killed.is_none() && status.is_none() => {
                killed = Some(ShellExit::Aborted);
                ending.start(pgid);
            }
            _ = sleep_until_opt(timeout_at), if killed.is_none() && status.is_none() && timeout_at.is_some() => {
                killed = Some(ShellExit::TimedOut);
                ending.start(pgid);
            }
            _ = sleep_until_opt(ending.kill_at), if ending.kill_at.is_some() => ending.escalate(pgid),
            _ = tokio::time::sleep(GROUP_POLL), if poll_group => {}
            _ = sleep_until_opt(drain_at), if streams_open && drain_at.is_some() => {}
            _ = sleep_until_opt(wake), if wake.is_some() => sink.on_wakeup(),
        }
    }
    // The group has been ended; the guard must not fire again for a pid that may be reused.
    guard.pid = None;
    reader.abort();
    if let Some(k) = killed {
        return Ok(k);
    }
    if cancel.is_cancelled() {
        return Ok(ShellExit::Aborted);
    }
    Ok(ShellExit::Exited(status.flatten()))
}

/// Ending a command's process group: `SIGTERM` first, `SIGKILL` once [`KILL_GRACE`] has passed
/// with members left.
#[derive(Debug, Default)]
struct GroupEnding {
    /// `SIGTERM` was sent.
    started: bool,
    /// When `SIGKILL` follows, while it is still pending.
    kill_at: Option<Instant>,
    /// `SIGKILL` was sent.
    killed: bool,
}

impl GroupEnding {
    fn start(&mut self, pgid: Option<u32>) {
        if self.started {
            return;
        }
        self.started = true;
        if let Some(pid) = pgid {
            if signal_process_group(pid, libc::SIGTERM) {
                self.kill_at = Some(Instant::now() + KILL_GRACE);
                return;
            }
        }
        // Nothing was left to signal.
        self.killed = true;
    }

    fn escalate(&mut self, pgid: Option<u32>) {
        self.kill_at = None;
        if !self.killed {
            self.killed = true;
            if let Some(pid) = pgid {
                signal_process_group(pid, libc::SIGKILL);
            }
        }
    }

    /// The group has no members left (or has been sent `SIGKILL`).
    fn done(&mut self, pgid: Option<u32>) -> bool {
        if self.killed {
            return true;
        }
        if self.started && !pgid.is_some_and(|pid| signal_process_group(pid, 0)) {
            self.killed = true;
            self.kill_at = None;
        }
        self.killed
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// A fresh temp-file path `<tmpdir>/<prefix>-<16 hex chars>.log`.
pub fn temp_log_path(prefix: &str) -> PathBuf {
    let id: u64 = rand::random();
    std::env::temp_dir().join(format!("{prefix}-{id:016x}.log"))
}

/// Creates a file readable only by the owner (mode 0600).
pub fn create_private_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

/// Incremental UTF-8 decoder: complete characters are returned, an incomplete trailing sequence
/// is kept for the next chunk, invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Decodes `bytes` (after anything kept from the previous call).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // SAFETY-free: the prefix was just validated.
                    out.push_str(std::str::from_utf8(&rest[..valid]).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &rest[valid + n..];
                        }
                        None => {
                            rest = &rest[valid..];
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// Flushes a trailing incomplete sequence as U+FFFD.
    pub fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            String::new()
        } else {
            self.pending.clear();
            "\u{FFFD}".to_string()
        }
    }
}

/// Point-in-time view of an [`OutputAccumulator`].
#[derive(Debug, Clone)]
pub struct OutputSnapshot {
    /// Tail-truncated text.
    pub content: String,
    /// Truncation over the whole output (true totals, not only the kept window).
    pub truncation: TruncationResult,
    /// Temp file holding the complete raw output, once one was needed.
    pub full_output_path: Option<PathBuf>,
    /// Bytes of the last (possibly unfinished) line.
    pub last_line_bytes: usize,
}

/// Collects streaming command output with bounded memory: a decoded tail window (twice the byte
/// limit) for display, exact line/byte totals, and a temp file `pi-bash-<hex>.log` receiving the
/// complete raw output once it exceeds the limits (spec tools.md §4.4, newer behaviour).
#[derive(Debug)]
pub struct OutputAccumulator {
    limits: TruncationLimits,
    rolling_max: usize,
    prefix: String,
    decoder: Utf8Stream,
    raw_chunks: Vec<Vec<u8>>,
    tail: String,
    tail_at_line_start: bool,
    total_raw: usize,
    total_decoded: usize,
    completed_lines: usize,
    has_open_line: bool,
    current_line_bytes: usize,
    temp_path: Option<PathBuf>,
    temp_file: Option<File>,
}

impl OutputAccumulator {
    /// A new accumulator with the given limits; temp files are named `<prefix>-<hex>.log`.
    pub fn new(limits: TruncationLimits, prefix: &str) -> Self {
        OutputAccumulator {
            limits,
            rolling_max: limits.max_bytes.saturating_mul(2).max(1),
            prefix: prefix.to_string(),
            decoder: Utf8Stream::default(),
            raw_chunks: Vec::new(),
            tail: String::new(),
            tail_at_line_start: true,
            total_raw: 0,
            total_decoded: 0,
            completed_lines: 0,
            has_open_line: false,
            current_line_bytes: 0,
            temp_path: None,
            temp_file: None,
        }
    }

    /// Adds raw output bytes.
    pub fn append(&mut self, data: &[u8]) {
        self.total_raw += data.len();
        let text = self.decoder.push(data);
        self.append_text(&text);
        if self.temp_file.is_some() || self.needs_temp_file() {
            self.ensure_temp_file();
            if let Some(f) = self.temp_file.as_mut() {
                let _ = f.write_all(data);
            }
        } else if !data.is_empty() {
            self.raw_chunks.push(data.to_vec());
        }
    }

    /// Marks the end of output (flushes the decoder, creates the temp file if needed).
    pub fn finish(&mut self) {
        let rest = self.decoder.finish();
        self.append_text(&rest);
        if self.needs_temp_file() {
            self.ensure_temp_file();
        }
        if let Some(f) = self.temp_file.as_mut() {
            let _ = f.flush();
        }
    }

    /// Total raw bytes seen.
    pub fn total_raw_bytes(&self) -> usize {
        self.total_raw
    }

    /// The current tail-truncated view; with `persist_if_truncated` a temp file is created when
    /// the output is truncated.
    pub fn snapshot(&mut self, persist_if_truncated: bool) -> OutputSnapshot {
        let window = if self.tail_at_line_start {
            self.tail.as_str()
        } else {
            match self.tail.find('\n') {
                Some(i) => &self.tail[i + 1..],
                None => self.tail.as_str(),
            }
        };
        let mut t = truncate_tail(window, self.limits);
        let total_lines = self.completed_lines + usize::from(self.has_open_line);
        let truncated =
            total_lines > self.limits.max_lines || self.total_decoded > self.limits.max_bytes;
        t.truncated_by = if truncated {
            t.truncated_by
                .or(Some(if self.total_decoded > self.limits.max_bytes {
                    super::truncate::TruncatedBy::Bytes
                } else {
                    super::truncate::TruncatedBy::Lines
                }))
        } else {
            None
        };
        t.truncated = truncated;
        t.total_lines = total_lines;
        t.total_bytes = self.total_decoded;
        if persist_if_truncated && truncated {
            self.ensure_temp_file();
        }
        if let Some(f) = self.temp_file.as_mut() {
            let _ = f.flush();
        }
        OutputSnapshot {
            content: t.content.clone(),
            truncation: t,
            full_output_path: self.temp_path.clone(),
            last_line_bytes: self.current_line_bytes,
        }
    }

    fn needs_temp_file(&self) -> bool {
        let total_lines = self.completed_lines + usize::from(self.has_open_line);
        self.total_raw > self.limits.max_bytes
            || self.total_decoded > self.limits.max_bytes
            || total_lines > self.limits.max_lines
    }

    fn ensure_temp_file(&mut self) {
        if self.temp_path.is_some() {
            return;
        }
        let path = temp_log_path(&self.prefix);
        if let Ok(mut f) = create_private_file(&path) {
            for chunk in self.raw_chunks.drain(..) {
                let _ = f.write_all(&chunk);
            }
            self.temp_file = Some(f);
        }
        self.temp_path = Some(path);
    }

    fn append_text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.total_decoded += text.len();
        self.tail.push_str(text);
        if self.tail.len() > self.rolling_max * 2 {
            self.trim_tail();
        }
        let newlines = text.bytes().filter(|b| *b == b'\n').count();
        if newlines == 0 {
            self.current_line_bytes += text.len();
            self.has_open_line = true;
        } else {
            self.completed_lines += newlines;
            let after = &text[text.rfind('\n').map_or(0, |i| i + 1)..];
            self.current_line_bytes = after.len();
            self.has_open_line = !after.is_empty();
        }
    }

    fn trim_tail(&mut self) {
        if self.tail.len() <= self.rolling_max {
            return;
        }
        let mut start = self.tail.len() - self.rolling_max;
        while start < self.tail.len() && !self.tail.is_char_boundary(start) {
            start += 1;
        }
        self.tail_at_line_start = self.tail.as_bytes()[start - 1] == b'\n';
        self.tail = self.tail[start..].to_string();
    }
}

// ---------------------------------------------------------------------------------------------
// User shell executor (RPC `bash`, spec tools.md §9)
// ---------------------------------------------------------------------------------------------

/// Result of [`execute_user_bash`]; the `data` of the RPC `bash` response (spec
/// messages-and-models.md §6.2): `{output, exitCode?, cancelled, truncated, fullOutputPath?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BashResult {
    /// Sanitised output, tail-truncated to 2000 lines / 50 KiB when it exceeds them.
    pub output: String,
    /// Exit code; `None` (omitted) when cancelled or killed by a signal.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub exit_code: Option<i32>,
    /// The command was aborted.
    pub cancelled: bool,
    /// Output was cut; then `full_output_path` names the complete log.
    pub truncated: bool,
    /// Temp file with the complete sanitised output.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub full_output_path: Option<String>,
}

/// Options for [`execute_user_bash`].
#[derive(Debug, Clone, Default)]
pub struct UserBashOptions {
    /// `shellCommandPrefix` setting, prepended as `<prefix>\n<command>`.
    pub command_prefix: Option<String>,
    /// `shellPath` setting.
    pub shell_path: Option<PathBuf>,
    /// `<agentDir>/bin`, prepended to `PATH`.
    pub bin_dir: Option<PathBuf>,
}

/// Removes ANSI escape sequences from streamed text, keeping an unfinished trailing sequence for
/// the next chunk.
#[derive(Debug, Default)]
pub struct AnsiStripper {
    pending: String,
}

impl AnsiStripper {
    /// Strips sequences from `pending + text`.
    pub fn push(&mut self, text: &str) -> String {
        let mut input = std::mem::take(&mut self.pending);
        input.push_str(text);
        let (out, rest) = strip_ansi_prefix(&input);
        // A runaway "sequence" (e.g. an unterminated OSC) is not held back forever.
        if rest.len() > 4096 {
            let mut out = out;
            out.push_str(rest);
            return out;
        }
        self.pending = rest.to_string();
        out
    }

    /// Returns whatever is still held back.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

/// Strips complete escape sequences; returns the cleaned text and an unfinished suffix.
fn strip_ansi_prefix(s: &str) -> (String, &str) {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut copy_from = 0;
    while i < b.len() {
        let c = b[i];
        let is_c1_csi = c == 0xC2 && b.get(i + 1) == Some(&0x9B);
        if c != 0x1B && !is_c1_csi {
            i += 1;
            continue;
        }
        out.push_str(&s[copy_from..i]);
        let start = i;
        let end = if is_c1_csi {
            csi_end(b, i + 2)
        } else {
            match b.get(i + 1) {
                None => None,
                Some(b'[') => csi_end(b, i + 2),
                Some(b']') | Some(b'P') | Some(b'X') | Some(b'^') | Some(b'_') => {
                    string_end(b, i + 2)
                }
                Some(_) => {
                    let mut j = i + 1;
                    while j < b.len() && (0x20..=0x2F).contains(&b[j]) {
                        j += 1;
                    }
                    // A two-byte escape ends with a final byte in 0x30..=0x7E. Anything else
                    // (e.g. U+FFFD from binary output) is not part of the sequence: only the
                    // ESC and its intermediates are dropped, the character is kept.
                    match b.get(j) {
                        None => None,
                        Some(c) if (0x30..=0x7E).contains(c) => Some(j + 1),
                        Some(_) => Some(j),
                    }
                }
            }
        };
        match end {
            Some(e) => {
                i = e;
                copy_from = e;
            }
            None => return (out, &s[start..]),
        }
    }
    out.push_str(&s[copy_from..]);
    (out, "")
}

fn csi_end(b: &[u8], mut j: usize) -> Option<usize> {
    while j < b.len() {
        if (0x40..=0x7E).contains(&b[j]) {
            return Some(j + 1);
        }
        if !(0x20..=0x3F).contains(&b[j]) {
            // Malformed: drop the introducer only.
            return Some(j);
        }
        j += 1;
    }
    None
}

fn string_end(b: &[u8], mut j: usize) -> Option<usize> {
    while j < b.len() {
        if b[j] == 0x07 {
            return Some(j + 1);
        }
        if b[j] == 0x1B {
            return match b.get(j + 1) {
                Some(b'\\') => Some(j + 2),
                Some(_) => Some(j + 1),
                None => None,
            };
        }
        j += 1;
    }
    None
}

/// Removes control characters except tab/LF/CR, the U+FFF9–U+FFFB annotation characters and
/// then every `\r` (spec tools.md §9).
pub fn sanitize_output(text: &str) -> String {
    text.chars()
        .filter(|&c| {
            let code = c as u32;
            if c == '\t' || c == '\n' {
                return true;
            }
            if code <= 0x1F {
                return false;
            }
            !(0xFFF9..=0xFFFB).contains(&code)
        })
        .collect()
}

struct UserSink<'a> {
    decoder: Utf8Stream,
    ansi: AnsiStripper,
    chunks: std::collections::VecDeque<String>,
    window_bytes: usize,
    discarded: bool,
    total_raw: usize,
    temp_path: Option<PathBuf>,
    temp_file: Option<File>,
    on_chunk: &'a mut (dyn FnMut(&str) + Send),
}

impl UserSink<'_> {
    fn append_text(&mut self, raw: &str) {
        let text = sanitize_output(raw);
        if text.is_empty() {
            return;
        }
        if self.total_raw > DEFAULT_MAX_BYTES {
            self.ensure_temp_file();
        }
        if let Some(f) = self.temp_file.as_mut() {
            let _ = f.write_all(text.as_bytes());
        }
        self.window_bytes += text.len();
        self.chunks.push_back(text.clone());
        while self.window_bytes > DEFAULT_MAX_BYTES * 2 && self.chunks.len() > 1 {
            if let Some(removed) = self.chunks.pop_front() {
                self.window_bytes -= removed.len();
                self.discarded = true;
            }
        }
        (self.on_chunk)(&text);
    }

    fn ensure_temp_file(&mut self) {
        if self.temp_path.is_some() {
            return;
        }
        let path = temp_log_path("pi-bash");
        if let Ok(mut f) = create_private_file(&path) {
            for c in &self.chunks {
                let _ = f.write_all(c.as_bytes());
            }
            self.temp_file = Some(f);
        }
        self.temp_path = Some(path);
    }
}

impl OutputSink for UserSink<'_> {
    fn on_data(&mut self, chunk: &[u8]) {
        self.total_raw += chunk.len();
        let decoded = self.decoder.push(chunk);
        let stripped = self.ansi.push(&decoded);
        self.append_text(&stripped);
    }
}

/// Runs a user command for the RPC `bash` command / `!cmd` (spec tools.md §9): output is
/// sanitised (ANSI stripped, control characters and `\r` removed) and every sanitised chunk is
/// passed to `on_chunk` (the `bash_execution_update` deltas). Non-zero exits are not errors;
/// cancellation gives `cancelled: true` and no exit code.
pub async fn execute_user_bash(
    command: &str,
    cwd: &Path,
    options: &UserBashOptions,
    cancel: &CancellationToken,
    on_chunk: &mut (dyn FnMut(&str) + Send),
) -> Result<BashResult, String> {
    let full_command = match &options.command_prefix {
        Some(p) if !p.is_empty() => format!("{p}\n{command}"),
        _ => command.to_string(),
    };
    let cmd = ShellCommand {
        command: full_command,
        cwd: cwd.to_path_buf(),
        shell: Some(resolve_shell(options.shell_path.as_deref())?),
        env: Some(shell_env(options.bin_dir.as_deref())),
        timeout: None,
    };
    let mut sink = UserSink {
        decoder: Utf8Stream::default(),
        ansi: AnsiStripper::default(),
        chunks: Default::default(),
        window_bytes: 0,
        discarded: false,
        total_raw: 0,
        temp_path: None,
        temp_file: None,
        on_chunk,
    };
    let exit = run_shell(&cmd, cancel, &mut sink).await?;
    let rest = sink.decoder.finish();
    let mut tail = sink.ansi.push(&rest);
    tail.push_str(&sink.ansi.finish());
    sink.append_text(&tail);
    let full: String = sink.chunks.iter().map(String::as_str).collect();
    let t = truncate_tail(&full, TruncationLimits::default());
    if t.truncated {
        sink.ensure_temp_file();
    }
    if let Some(f) = sink.temp_file.as_mut() {
        let _ = f.flush();
    }
    let cancelled = matches!(exit, ShellExit::Aborted | ShellExit::TimedOut);
    let exit_code = match exit {
        ShellExit::Exited(code) => code,
        _ => None,
    };
    Ok(BashResult {
        output: if t.truncated { t.content } else { full },
        exit_code,
        cancelled,
        truncated: sink.discarded || t.truncated,
        full_output_path: sink
            .temp_path
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_before_a_multibyte_character_never_splits_it() {
        // printf '\033\377abc': ESC then an invalid byte, decoded as U+FFFD.
        let (out, rest) = strip_ansi_prefix("\x1b\u{FFFD}abc");
        assert_eq!((out.as_str(), rest), ("\u{FFFD}abc", ""));
        let mut st = AnsiStripper::default();
        assert_eq!(st.push("x\x1b"), "x");
        assert_eq!(st.push("\u{e9}y"), "\u{e9}y");
        assert_eq!(st.push("\x1b7z"), "z", "ESC 7 is a complete escape");
        // Pseudo-random bytes, lossily decoded as the shell reader does: no panic, and every
        // chunk split still yields valid text.
        let mut seed: u32 = 1;
        let bytes: Vec<u8> = (0..4000)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (seed >> 16) as u8
            })
            .collect();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let mut st = AnsiStripper::default();
        for chunk in text.as_bytes().chunks(97) {
            let piece = String::from_utf8_lossy(chunk);
            let _ = st.push(&piece);
        }
    }

    #[test]
    fn strips_ansi_across_chunks() {
        let mut s = AnsiStripper::default();
        let a = s.push("red \x1b[3");
        let b = s.push("1mtext\x1b[0m end");
        assert_eq!(format!("{a}{b}"), "red text end");
        assert_eq!(s.push("\x1b]0;title\x07x"), "x");
    }

    #[test]
    fn utf8_stream_keeps_partial() {
        let mut d = Utf8Stream::default();
        let bytes = "é".as_bytes();
        assert_eq!(d.push(&bytes[..1]), "");
        assert_eq!(d.push(&bytes[1..]), "é");
        assert_eq!(d.push(&[0xFF, b'a']), "\u{FFFD}a");
    }

    #[test]
    fn sanitizes() {
        assert_eq!(sanitize_output("a\r\nb\x07\tc\u{FFFA}"), "a\nb\tc");
    }
}
