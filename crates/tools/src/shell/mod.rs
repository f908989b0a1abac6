//! The shell execution engine behind the `bash` tool and the RPC `bash` command
//! (spec tools.md §4.2–§4.4 and §9; rpc-protocol.md §4.8).
//!
//! A command runs as `<shell> -c <command>` in its own process group with stdin closed and
//! stdout/stderr merged in arrival order. When the shell exits, is aborted or times out, every
//! process left in its group is sent `SIGTERM`, then `SIGKILL` after [`KILL_GRACE`]; only a
//! process that left the group (`setsid`) survives. All output the group wrote is read (the
//! pipe is drained to its end, with back-pressure instead of unbounded buffering).
//! On Linux the shell runs under a per-command supervisor that also kills the group when the
//! agent process dies ([`pi_platform::child_guard::supervise_group`]).
//! The module is split by concern: the engine here (spawn, process group, output pipe,
//! timeout and abort); [`env`] (which shell, its environment, timeouts); [`text`] (decoding,
//! ANSI stripping, sanitising and accumulating output, temp logs); [`user`] (the RPC `bash`
//! command's executor).

mod env;
mod text;
mod user;

pub use env::*;
pub use text::*;
pub use user::*;

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Once the command's process group is gone, reading stops after the pipe has been idle this
/// long: only a process that left the group (`setsid`) can still hold it open.
const DRAIN_GRACE: Duration = Duration::from_millis(200);

/// Once the group is gone, reading stops when more than this arrived since (the pipe and the
/// read-ahead hold less: the rest comes from a process outside the group, `setsid`)…
const DRAIN_MAX_BYTES: usize = READ_CHUNK * (READ_AHEAD_CHUNKS + 2);

/// …or at the latest this long after the group was gone (a trickling `setsid` daemon is not
/// followed forever).
const DRAIN_MAX: Duration = Duration::from_secs(10);

pub use pi_platform::procs::{kill_process_group, KILL_GRACE};

/// How often the engine checks whether a signalled process group is empty.
const GROUP_POLL: Duration = Duration::from_millis(10);

/// Bytes per read from the output pipe.
const READ_CHUNK: usize = 64 * 1024;

/// Chunks read ahead of the sink at most (bounds memory: `READ_CHUNK * READ_AHEAD_CHUNKS`).
const READ_AHEAD_CHUNKS: usize = 4;

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
    /// The kernel sandbox the shell and its descendants run in (`full` = none;
    /// [`crate::sandbox`]).
    pub sandbox: crate::sandbox::SandboxPolicy,
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

/// Keeps a running child's process group in [`pi_platform::procs`] so that it is killed if the agent
/// exits while the command runs.
struct ProcessRegistration(i32);

impl ProcessRegistration {
    fn new(pid: u32) -> Self {
        let pid = pid as i32;
        pi_platform::procs::register(pid);
        ProcessRegistration(pid)
    }
}

impl Drop for ProcessRegistration {
    fn drop(&mut self) {
        pi_platform::procs::unregister(self.0);
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
/// commands.`; a sandbox that cannot be built gives its message
/// ([`crate::sandbox::SandboxPolicy::apply`]); spawn failures give the OS error text.
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
    // The group dies with the agent, even on SIGKILL (see pi_platform::child_guard).
    pi_platform::child_guard::supervise_group(command.as_std_mut());
    // After the supervisor's hook: the shell is sandboxed, its supervisor is not.
    cmd.sandbox.apply(command.as_std_mut(), &cmd.cwd, &shell)?;
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
