//! Child processes that do not outlive the agent, even when the agent is `SIGKILL`ed and gets
//! no chance to run [`crate::procs::kill_all`].
//!
//! Two `pre_exec` hooks (Linux; on other platforms both are no-ops):
//!
//! * [`die_with_parent`] for plain children (the `!command` of a config value): the child calls
//!   `prctl(PR_SET_PDEATHSIG, SIGKILL)` and then compares `getppid()` with the agent's pid; if
//!   they differ the agent died between `fork` and `prctl` (the signal would never come), so the
//!   child exits at once. The kernel sends the death signal when the *thread* that forked the
//!   child exits, not the process: callers spawn from a thread that outlives the child (the
//!   synchronous caller that waits for it, or a tokio worker thread, which lives as long as the
//!   runtime). Descendants of such a child get no death signal.
//!
//! * [`supervise_group`] for shell commands (the `bash` tool and the RPC `bash` command, spec
//!   tools.md §4.2; rpc-protocol.md §4.8). A death signal on the shell alone would leave its
//!   descendants (`sleep 600` in `bash -c "sleep 600; echo"`) running, so the spawned process
//!   becomes a tiny supervisor instead: in the hook it forks once more; the grandchild returns
//!   from the hook and `exec`s the shell (it inherits the process group, and gets
//!   `PR_SET_PDEATHSIG` = `SIGKILL` bound to the single-threaded supervisor, with the same
//!   `getppid` race check), while the supervisor never returns from the hook. It closes every
//!   inherited descriptor (so the standard library's exec-status pipe reports the shell's
//!   `exec`, and no output pipe is held), resets its signal handlers, ignores the signals that
//!   end a group politely (`SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT`), makes itself a child
//!   subreaper (orphaned descendants become its children, so it can reap them: a zombie is
//!   still a member of its group, and PID 1 of a container may never reap it), and waits on
//!   two pidfds: the agent's and the shell's. When the agent process exits, for any reason,
//!   the supervisor `SIGKILL`s its whole process group (itself, the shell and every
//!   descendant still in it). When the shell exits, the supervisor reaps it and keeps its
//!   status, then guards the rest of the group until it is gone: with no child left (every
//!   descendant has ended, since orphans are reparented to it) it exits at once; otherwise it
//!   leaves the group (a short-lived child creates a fresh group, the supervisor joins it, the
//!   child is ended; so neither the command's group nor the agent's holds the supervisor),
//!   exits at once if the group is empty, and otherwise sends it `SIGTERM`, waits until it is empty (reaping what
//!   dies) or `KILL_GRACE` (crate::procs) has passed, then sends `SIGKILL` — at once if
//!   the agent exits meanwhile. Only then does it exit the way the shell did (same exit code,
//!   or the same signal), so callers see the shell's status under the supervisor's pid, which
//!   is also the group id (valid while the group has members). So a background process of a
//!   finished command cannot outlive an agent that is `SIGKILL`ed before the engine ended the
//!   group. The pidfd watches the agent *process*, so unlike `PR_SET_PDEATHSIG` it does not
//!   depend on which agent thread spawned the command. Without pidfds (Linux < 5.3) the
//!   supervisor polls `getppid()` and `waitpid(WNOHANG)` every 100 ms instead (and sleeps in
//!   short steps during the grace). If the supervisor cannot leave the group (no `fork`), it
//!   exits with the shell as before and leaves the group to the engine.
//!
//! Limits: processes that leave the group (`setsid`, job control) are not followed (they stay
//! the supervisor's children only while it lives); a member that ignores `SIGTERM` delays the
//! command's end by the grace; a `SIGKILL`ed member stuck in the kernel is waited for at most
//! 100 ms. A `pre_exec` hook makes the standard library `fork` instead of using
//! `posix_spawn`, and the supervisor is a forked copy of the agent that shares its pages
//! copy-on-write and never writes to them.
//!
//! Everything that runs in a hook, after `fork` in a multi-threaded process, is a plain system
//! call (no allocation, no locks).

use std::process::Command;

/// Makes the child spawned by `cmd` receive `SIGKILL` when the agent dies, and exit at once if
/// the agent already died before the hook ran (see the module documentation).
///
/// The spawning thread must outlive the child (the kernel's death signal is bound to it). On
/// non-Linux platforms this does nothing. Errors: a failing `prctl` makes `spawn` fail with the
/// OS error.
pub fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = agent_pid();
        // SAFETY: the hook only makes async-signal-safe system calls (prctl, getppid, _exit).
        unsafe {
            cmd.pre_exec(move || linux::set_death_signal(parent));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// Runs the program of `cmd` under a per-command supervisor that `SIGKILL`s the child's whole
/// process group when the agent process exits (see the module documentation).
///
/// `cmd` must put the child in its own process group (`process_group(0)`); otherwise the
/// supervisor only kills the shell, never the group it shares with the agent. The child's pid
/// (the supervisor's) is the process group id; its exit status mirrors the program's, and it
/// exits only once the rest of the group is gone (at once when nothing is left; else after
/// `SIGTERM`, at most [`crate::procs::KILL_GRACE`] plus 100 ms later, by `SIGKILL`). On
/// non-Linux platforms this does nothing. Errors: a failing `fork` in the hook makes `spawn`
/// fail with the OS error.
pub fn supervise_group(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let agent = agent_pid();
        let grace_ms = i64::try_from(crate::procs::KILL_GRACE.as_millis()).unwrap_or(i64::MAX);
        // SAFETY: the hook only makes async-signal-safe system calls (fork, prctl, getppid,
        // close_range, pidfd_open, poll, waitpid, sigaction, kill, setpgid, pause,
        // clock_gettime, nanosleep, _exit); see linux::supervise.
        unsafe {
            cmd.pre_exec(move || linux::fork_supervisor(agent, grace_ms));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

#[cfg(target_os = "linux")]
fn agent_pid() -> libc::pid_t {
    libc::pid_t::try_from(std::process::id()).unwrap_or(libc::pid_t::MAX)
}

#[cfg(target_os = "linux")]
mod linux {
    use libc::{c_int, pid_t};
    use std::io;

    /// Exit code of a child whose parent died before it could arm the death signal.
    const ORPHANED: c_int = 137;

    /// How often (ms) the supervisor checks whether the rest of a finished command's group is
    /// gone.
    const GROUP_POLL_MS: c_int = 2;

    /// How long (ms) the supervisor reaps `SIGKILL`ed members before it exits anyway.
    const KILLED_REAP_MS: i64 = 100;

    /// How often (ms) the supervisor of a running command reaps orphaned descendants.
    const REAP_MS: c_int = 1000;

    fn errno() -> c_int {
        io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    /// `PR_SET_PDEATHSIG` = `SIGKILL`, then the race check against `parent`.
    pub(super) fn set_death_signal(parent: pid_t) -> io::Result<()> {
        // SAFETY: plain system calls on the calling process.
        unsafe {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(ORPHANED);
            }
        }
        Ok(())
    }

    /// In the child of the agent: forks the shell-to-be (which returns `Ok` and goes on to
    /// `exec`) and turns the caller into its supervisor (never returns).
    pub(super) fn fork_supervisor(agent: pid_t, grace_ms: i64) -> io::Result<()> {
        // SAFETY: fork in a freshly forked, single-threaded child; both sides only make plain
        // system calls until the shell side execs.
        unsafe {
            let supervisor = libc::getpid();
            match libc::fork() {
                -1 => Err(io::Error::last_os_error()),
                0 => set_death_signal(supervisor),
                shell => supervise(agent, shell, grace_ms),
            }
        }
    }

    /// Closes every descriptor of the calling process.
    unsafe fn close_all_fds() {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) == 0 {
                return;
            }
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
                lim.rlim_cur.min(1 << 20) as c_int
            } else {
                1024
            };
            for fd in 0..max {
                libc::close(fd);
            }
        }
    }

    /// Default dispositions for every catchable signal (the agent's handlers were inherited).
    unsafe fn reset_signals() {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut sa.sa_mask);
            // 1..=64: every Linux signal number (glibc refuses its two internal ones, harmlessly).
            for sig in 1..65 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::sigaction(sig, &sa, std::ptr::null_mut());
                }
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        }
    }

    fn pidfd_open(pid: pid_t) -> c_int {
        // SAFETY: pidfd_open(2) takes no pointers.
        unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) as c_int }
    }

    /// The agent is gone: kill the group (this process included), or just the shell if this
    /// process does not lead its own group (never the agent's group).
    unsafe fn kill_all(shell: pid_t) -> ! {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            let me = libc::getpid();
            if libc::getpgrp() == me {
                libc::kill(-me, libc::SIGKILL);
            }
            libc::kill(shell, libc::SIGKILL);
            libc::_exit(ORPHANED)
        }
    }

    /// Ends this process the way the shell ended (`status` from waitpid).
    unsafe fn exit_like(status: c_int) -> ! {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            if libc::WIFEXITED(status) {
                libc::_exit(libc::WEXITSTATUS(status));
            }
            if libc::WIFSIGNALED(status) {
                let sig = libc::WTERMSIG(status);
                // No core file of the supervisor for a shell that dumped core.
                let zero = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &zero);
                // The supervisor ignores some signals (see `ignore_group_signals`).
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = libc::SIG_DFL;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
                libc::kill(libc::getpid(), sig);
                libc::_exit(128 + sig);
            }
            libc::_exit(1)
        }
    }

    /// Signals that end a whole process group politely (`SIGTERM` from the engine ending the
    /// command, `SIGINT`/`SIGHUP`/`SIGQUIT` from a terminal) do not end the supervisor: it
    /// ends only with the shell, then with the rest of the group, or with the agent.
    unsafe fn ignore_group_signals() {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_IGN;
            libc::sigemptyset(&mut sa.sa_mask);
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    }

    /// Reaps every child that has exited (the shell, and, as this process is a child
    /// subreaper, every orphaned descendant); the shell's status goes to `shell_status`.
    unsafe fn reap(shell: pid_t, shell_status: &mut Option<c_int>) {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            loop {
                let mut st: c_int = 0;
                let r = libc::waitpid(-1, &mut st, libc::WNOHANG);
                if r > 0 {
                    if r == shell {
                        *shell_status = Some(st);
                    }
                    continue;
                }
                if !(r < 0 && errno() == libc::EINTR) {
                    return;
                }
            }
        }
    }

    /// Reaps what has exited; `true` when this process has no child left at all (`ECHILD`).
    unsafe fn no_children() -> bool {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            loop {
                let mut st: c_int = 0;
                let r = libc::waitpid(-1, &mut st, libc::WNOHANG);
                if r > 0 || (r < 0 && errno() == libc::EINTR) {
                    continue;
                }
                return r < 0 && errno() == libc::ECHILD;
            }
        }
    }

    /// Milliseconds on the monotonic clock.
    // `time_t` and `c_long` are `i64` only on 64-bit targets.
    #[allow(clippy::useless_conversion)]
    unsafe fn now_ms() -> i64 {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
            i64::from(ts.tv_sec) * 1000 + i64::from(ts.tv_nsec) / 1_000_000
        }
    }

    /// Waits up to `ms` milliseconds for the agent to exit; `true` when it has.
    unsafe fn agent_exits_within(agent: pid_t, agent_fd: c_int, ms: c_int) -> bool {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            if agent_fd >= 0 {
                let mut fd = libc::pollfd {
                    fd: agent_fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                if libc::poll(&mut fd, 1, ms) >= 0 || errno() == libc::EINTR {
                    return fd.revents != 0;
                }
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::c_long::from(ms) * 1_000_000,
            };
            libc::nanosleep(&pause, std::ptr::null_mut());
            libc::getppid() != agent
        }
    }

    /// `true` when the process group `pgid` has no member left (zombies are members).
    unsafe fn group_empty(pgid: pid_t) -> bool {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe { libc::kill(-pgid, 0) != 0 && errno() == libc::ESRCH }
    }

    /// Moves this process (the leader of the command's group) out of that group and into a
    /// fresh group of its own: a short-lived child creates the group, this process joins it,
    /// and the child is ended. Neither the agent's group nor the command's group then holds
    /// the supervisor, so `kill(-pgid, 0)` on the command's group tells whether anything is
    /// left in it, and a signal to the agent's group does not reach the supervisor. `false`
    /// when that failed (this process is then still in the command's group).
    unsafe fn leave_group() -> bool {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            let me = libc::getpid();
            match libc::fork() {
                -1 => false,
                0 => {
                    // Lives only until the supervisor joined its group (or the supervisor died).
                    libc::prctl(
                        libc::PR_SET_PDEATHSIG,
                        libc::SIGKILL as libc::c_ulong,
                        0,
                        0,
                        0,
                    );
                    if libc::getppid() == me {
                        loop {
                            libc::pause();
                        }
                    }
                    libc::_exit(0)
                }
                anchor => {
                    let left = libc::setpgid(anchor, anchor) == 0 && libc::setpgid(0, anchor) == 0;
                    libc::kill(anchor, libc::SIGKILL);
                    let mut st: c_int = 0;
                    while libc::waitpid(anchor, &mut st, 0) < 0 && errno() == libc::EINTR {}
                    left
                }
            }
        }
    }

    /// The shell exited with `status`: ends the rest of its group (`SIGTERM`, then `SIGKILL`
    /// after `grace_ms`; at once if the agent exits meanwhile), then exits like the shell.
    /// An empty group costs no wait.
    unsafe fn finish(agent: pid_t, agent_fd: c_int, status: c_int, grace_ms: i64) -> ! {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            let pgid = libc::getpid();
            if no_children() {
                // Every descendant has ended: a living one would be this process's child, or the
                // descendant of one (orphans are reparented to this subreaper). Nothing of the
                // group is left to guard, and leaving the group would only cost a fork.
                exit_like(status);
            }
            if libc::getpgrp() != pgid || !leave_group() {
                // Not the leader of the command's group, or unable to leave it: end with the
                // shell and leave the group to the engine (tools/shell.rs).
                exit_like(status);
            }
            let mut ignored = None;
            if group_empty(pgid) {
                exit_like(status);
            }
            libc::kill(-pgid, libc::SIGTERM);
            let start = now_ms();
            loop {
                reap(0, &mut ignored);
                if group_empty(pgid) {
                    exit_like(status);
                }
                if now_ms() - start >= grace_ms {
                    break;
                }
                if agent_exits_within(agent, agent_fd, GROUP_POLL_MS) {
                    libc::kill(-pgid, libc::SIGKILL);
                    libc::_exit(ORPHANED);
                }
            }
            libc::kill(-pgid, libc::SIGKILL);
            // Killed members are reaped here (orphans are this process's children), so that the
            // group is gone when the caller looks; bounded, as a member may be stuck in the kernel.
            let start = now_ms();
            while !group_empty(pgid) && now_ms() - start < KILLED_REAP_MS {
                reap(0, &mut ignored);
                let pause = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: libc::c_long::from(GROUP_POLL_MS) * 1_000_000,
                };
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
            exit_like(status)
        }
    }

    /// Waits for the shell to exit (then ends the rest of its group and mirrors the shell's
    /// status) or the agent to exit (killing the group). Never returns.
    pub(super) unsafe fn supervise(agent: pid_t, shell: pid_t, grace_ms: i64) -> ! {
        // SAFETY: runs only in the forked, single-threaded supervisor (see `fork_supervisor`);
        // plain system calls on local values and pointers to locals.
        unsafe {
            close_all_fds();
            reset_signals();
            ignore_group_signals();
            // Orphaned descendants (a background job of the shell) become this process's children,
            // so that it can reap them: a zombie stays a member of its group.
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
            let agent_fd = pidfd_open(agent);
            let agent_gone = agent_fd < 0 && errno() == libc::ESRCH;
            // Race check: the agent may have died before the pidfd was opened.
            if agent_gone || libc::getppid() != agent {
                kill_all(shell);
            }
            let shell_fd = pidfd_open(shell);
            let mut status: Option<c_int> = None;
            if agent_fd >= 0 && shell_fd >= 0 {
                let mut fds = [
                    libc::pollfd {
                        fd: agent_fd,
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: shell_fd,
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                // Until the shell has exited (woken by its pidfd, and every REAP_MS to reap
                // orphans); a failing poll falls back to polling below.
                while libc::poll(fds.as_mut_ptr(), 2, REAP_MS) >= 0 || errno() == libc::EINTR {
                    if fds[0].revents != 0 {
                        kill_all(shell);
                    }
                    reap(shell, &mut status);
                    if let Some(st) = status {
                        finish(agent, agent_fd, st, grace_ms);
                    }
                }
            }
            // No pidfds: poll every 100 ms.
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 100_000_000,
            };
            loop {
                reap(shell, &mut status);
                if let Some(st) = status {
                    finish(agent, -1, st, grace_ms);
                }
                if libc::getppid() != agent {
                    kill_all(shell);
                }
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
        }
    }
}
