//! Work on the async runtime: the last blocking sections and the panics of tasks (platform
//! floor: imports nothing of this crate).
//!
//! [`block_in_place`] is left for the two synchronous callers that still wait for async work
//! of the runtime's one worker (the extension host's replies): the awaited extension
//! notifications of the synchronous event sink and the blocking credential calls
//! (`crate::auth::http::blocking`, used by extension providers' OAuth and routers). Nothing of
//! stdout depends on it any more (`crate::output` writes from a writer task, not at a
//! worker's park). New code awaits instead; clippy's `disallowed-methods` forbids the direct
//! call.

/// Runs the blocking `f` without starving the async runtime: on a multi-threaded runtime
/// through `tokio::task::block_in_place` (the worker's other tasks move to another thread
/// meanwhile); elsewhere `f` just runs.
pub fn block_in_place<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) =>
        {
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
