//! Registry of live child process groups, so that no tool process outlives the agent
//! (exit on EOF, closed stdout, SIGTERM/SIGHUP).

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

/// How long the processes of a finished, aborted or timed-out command get between `SIGTERM`
/// and `SIGKILL` (README "Background processes").
pub const KILL_GRACE: Duration = Duration::from_millis(500);

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

static GROUPS: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

/// Records a process group id (the leader's pid) of a running child.
pub fn register(pgid: i32) {
    let mut g = GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    g.get_or_insert_with(HashSet::new).insert(pgid);
}

/// Forgets a process group once its leader has been reaped.
pub fn unregister(pgid: i32) {
    let mut g = GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(set) = g.as_mut() {
        set.remove(&pgid);
    }
}

/// Sends SIGKILL to every registered process group.
pub fn kill_all() {
    let g = GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(set) = g.as_ref() {
        for pgid in set {
            kill_process_group(*pgid as u32);
        }
    }
}
