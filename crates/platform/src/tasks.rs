//! Work on the async runtime: the panics of tasks.
//!
//! Nothing waits for async work by blocking a worker any more: the extension notifications
//! the agent loop waits for are awaited (`pi_agent::EmitFn`), and stdout is written from a
//! writer task (`pi_coding_agent::output`). clippy's `disallowed-methods` forbids
//! `tokio::task::block_in_place`.

/// The message of a panic payload (a `&str` or `String` panic; anything else is
/// `unknown panic`).
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(std::string::ToString::to_string)
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
