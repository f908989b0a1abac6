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
//!   `exec`, and no output pipe is held), resets its signal handlers, and waits on two pidfds:
//!   the agent's and the shell's. When the agent process exits, for any reason, the supervisor
//!   `SIGKILL`s its whole process group (itself, the shell and every descendant still in it);
//!   when the shell exits, the supervisor exits the same way (same exit code, or the same
//!   signal), so callers see the shell's status under the supervisor's pid, which is also the
//!   group id. The pidfd watches the agent *process*, so unlike `PR_SET_PDEATHSIG` it does not
//!   depend on which agent thread spawned the command. Without pidfds (Linux < 5.3) the
//!   supervisor polls `getppid()` and `waitpid(WNOHANG)` every 100 ms instead.
//!
//!   The supervisor has to end with the shell (its exit is how the agent learns that the command
//!   finished), yet background processes of the shell (`sleep 600 &`) are still in the group
//!   then, until the agent ends the group ([`crate::tools::shell`]: `SIGTERM`, then `SIGKILL`).
//!   So that a `SIGKILL` of the agent in that window does not leave them running, the supervisor
//!   first forks a *watchdog* that moves into a process group of its own (it is never counted as
//!   a member of the command's group, and changes to `/`), keeps the agent's pidfd, and checks
//!   every 10 ms: once the command's group is empty it exits; if the agent exits first it
//!   `SIGKILL`s the group.
//!
//! Limits: processes that leave the group (`setsid`, job control) are not followed. A
//! `pre_exec` hook makes the standard library `fork` instead of using `posix_spawn`, and the
//! supervisor is a forked copy of the agent that shares its pages copy-on-write and never
//! writes to them.
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
/// (the supervisor's) is the process group id; its exit status mirrors the program's. On
/// non-Linux platforms this does nothing. Errors: a failing `fork` in the hook makes `spawn`
/// fail with the OS error.
pub fn supervise_group(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let agent = agent_pid();
        // SAFETY: the hook only makes async-signal-safe system calls (fork, prctl, getppid,
        // close_range, pidfd_open, poll, waitpid, sigaction, kill, setpgid, chdir, nanosleep,
        // _exit); see linux::supervise.
        unsafe {
            cmd.pre_exec(move || linux::fork_supervisor(agent));
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
    pub(super) fn fork_supervisor(agent: pid_t) -> io::Result<()> {
        // SAFETY: fork in a freshly forked, single-threaded child; both sides only make plain
        // system calls until the shell side execs.
        unsafe {
            let supervisor = libc::getpid();
            match libc::fork() {
                -1 => Err(io::Error::last_os_error()),
                0 => set_death_signal(supervisor),
                shell => supervise(agent, shell),
            }
        }
    }

    /// Closes every descriptor of the calling process.
    unsafe fn close_all_fds() {
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

    /// Default dispositions for every catchable signal (the agent's handlers were inherited).
    unsafe fn reset_signals() {
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

    fn pidfd_open(pid: pid_t) -> c_int {
        // SAFETY: pidfd_open(2) takes no pointers.
        unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) as c_int }
    }

    /// The agent is gone: kill the group (this process included), or just the shell if this
    /// process does not lead its own group (never the agent's group).
    unsafe fn kill_all(shell: pid_t) -> ! {
        let me = libc::getpid();
        if libc::getpgrp() == me {
            libc::kill(-me, libc::SIGKILL);
        }
        libc::kill(shell, libc::SIGKILL);
        libc::_exit(ORPHANED)
    }

    /// Ends this process the way the shell ended (`status` from waitpid).
    unsafe fn exit_like(status: c_int) -> ! {
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
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(1)
    }

    /// Whether the agent is gone: its pidfd is readable, or (without a pidfd) its pid is.
    unsafe fn agent_exited(agent: pid_t, agent_fd: c_int, wait_ms: c_int) -> bool {
        if agent_fd >= 0 {
            let mut fd = libc::pollfd {
                fd: agent_fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let r = libc::poll(&mut fd, 1, wait_ms);
            return r > 0 && fd.revents != 0;
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::c_long::from(wait_ms) * 1_000_000,
        };
        libc::nanosleep(&pause, std::ptr::null_mut());
        libc::kill(agent, 0) != 0 && errno() == libc::ESRCH
    }

    /// The shell has exited: before the supervisor ends (and with it the command, for the
    /// agent), a watchdog takes over the group for as long as anything is left in it (see the
    /// module documentation). Returns in the supervisor; the watchdog never returns.
    unsafe fn hand_over_group(agent: pid_t, agent_fd: c_int) {
        let group = libc::getpgrp();
        if group != libc::getpid() {
            // Not the leader of a group of its own: there is no command group to look after.
            return;
        }
        if libc::fork() != 0 {
            // The supervisor (or a failed fork: nothing more can be done).
            return;
        }
        // The watchdog: out of the command's group, out of its working directory.
        libc::setpgid(0, 0);
        libc::chdir(c"/".as_ptr());
        loop {
            // A zombie supervisor still counts as a member until the agent reaps it.
            if libc::kill(-group, 0) != 0 && errno() == libc::ESRCH {
                libc::_exit(0);
            }
            if agent_exited(agent, agent_fd, 10) {
                libc::kill(-group, libc::SIGKILL);
                libc::_exit(0);
            }
        }
    }

    /// Waits for the shell to exit (mirroring its status) or the agent to exit (killing the
    /// group). Never returns.
    unsafe fn supervise(agent: pid_t, shell: pid_t) -> ! {
        close_all_fds();
        reset_signals();
        let agent_fd = pidfd_open(agent);
        let agent_gone = agent_fd < 0 && errno() == libc::ESRCH;
        // Race check: the agent may have died before the pidfd was opened.
        if agent_gone || libc::getppid() != agent {
            kill_all(shell);
        }
        let shell_fd = pidfd_open(shell);
        let mut status: c_int = 0;
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
            // Until the shell's pidfd is readable; a failing poll falls back to polling below.
            while libc::poll(fds.as_mut_ptr(), 2, -1) >= 0 || errno() == libc::EINTR {
                if fds[0].revents != 0 {
                    kill_all(shell);
                }
                if fds[1].revents != 0 {
                    loop {
                        let r = libc::waitpid(shell, &mut status, 0);
                        if r == shell {
                            hand_over_group(agent, agent_fd);
                            exit_like(status);
                        }
                        if r < 0 && errno() != libc::EINTR {
                            libc::_exit(1);
                        }
                    }
                }
            }
        }
        // No pidfds: poll every 100 ms.
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        loop {
            let r = libc::waitpid(shell, &mut status, libc::WNOHANG);
            if r == shell {
                hand_over_group(agent, agent_fd);
                exit_like(status);
            }
            if r < 0 && errno() != libc::EINTR {
                libc::_exit(1);
            }
            if libc::getppid() != agent {
                kill_all(shell);
            }
            libc::nanosleep(&pause, std::ptr::null_mut());
        }
    }
}
