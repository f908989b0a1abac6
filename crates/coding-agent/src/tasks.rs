//! Work on the async runtime: blocking sections and the panics of tasks (platform floor:
//! imports nothing of this crate).
//!
//! [`block_in_place`] is `tokio::task::block_in_place` for the whole crate (clippy's
//! `disallowed-methods` forbids the direct call). A thread may leave the worker role inside it
//! and never park as a worker again, so whatever that thread deferred to its next park must be
//! handed on first: the stdout writer (`crate::output`, a higher floor) registers that step
//! with [`set_leaving_worker_hook`] when it starts, instead of this floor importing it.

use std::sync::OnceLock;

static LEAVING_WORKER: OnceLock<fn()> = OnceLock::new();

/// Registers `hook`, run on the calling thread just before it may leave the worker role
/// (once per process; a second registration is ignored).
pub fn set_leaving_worker_hook(hook: fn()) {
    let _ = LEAVING_WORKER.set(hook);
}

/// Runs the blocking `f` without starving the async runtime: on a multi-threaded runtime
/// through `tokio::task::block_in_place`, after the registered leaving-worker hook (without
/// it, an event queued just before, e.g. an `agent_settled`, waited for a park that never
/// came: seen with the OAuth refresh's blocking HTTP); elsewhere `f` just runs.
pub fn block_in_place<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
            if let Some(hook) = LEAVING_WORKER.get() {
                hook();
            }
            #[allow(clippy::disallowed_methods)]
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// The message of a panic payload (a `&str` or `String` panic; anything else is
/// `unknown panic`).
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
