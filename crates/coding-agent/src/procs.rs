//! Registry of live child process groups, so that no tool process outlives the agent
//! (exit on EOF, closed stdout, SIGTERM/SIGHUP).

use std::collections::HashSet;
use std::sync::Mutex;

static GROUPS: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

/// Records a process group id (the leader's pid) of a running child.
pub fn register(pgid: i32) {
    let mut g = GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    g.get_or_insert_with(HashSet::new).insert(pgid);
}

/// Forgets a process group once its leader has been reaped.
pub fn unregister(pgid: i32) {
    let mut g = GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(set) = g.as_mut() {
        set.remove(&pgid);
    }
}

/// Sends SIGKILL to every registered process group.
pub fn kill_all() {
    let g = GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(set) = g.as_ref() {
        for pgid in set {
            crate::tools::shell::kill_process_group(*pgid as u32);
        }
    }
}
