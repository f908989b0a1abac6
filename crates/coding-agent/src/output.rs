//! The single stdout writer (spec rpc-protocol.md §2.1).
//!
//! Every record is one complete line (`JSON + "\n"`). There is no writer thread: whoever queues
//! a record serialises it straight from the typed protocol structs into a shared buffer (under
//! one lock, so lines never interleave), and if no other thread is writing at that moment it
//! writes the buffer to stdout itself and flushes. Records queued while a write is in progress
//! are taken by that writer once its write returns, all in one `write`. So a client sees each
//! event as soon as it is queued when the stream is slow, a burst goes out in one write, and an
//! event costs no thread hand-off (no context switch). If stdout is closed (EPIPE), the process
//! ends quietly with exit code 0 after killing the process groups of running tools.
//!
//! Two promises to readers of stdout:
//! * `tool_execution_start` is written and flushed before [`Output::event`] returns, so the
//!   tool it announces has not begun when a client reads the line (an ACP adapter reads the
//!   file an `edit` is about to change at that moment).
//! * Memory stays bounded when the reader is slower than the agent: once more than
//!   [`HIGH_WATER`] bytes are queued behind a blocked write, queuing an event waits until at
//!   most [`LOW_WATER`] are (a fast RPC `bash` then slows down to the reader's pace instead of
//!   piling its output up in memory).

use crate::rpc::protocol::{RpcEvent, RpcOutput, RpcResponse};
use serde_json::Value;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Queued bytes above which queuing an event waits for the writer (4 MiB).
pub const HIGH_WATER: usize = 4 << 20;
/// Queued bytes below which waiting senders go on (1 MiB).
pub const LOW_WATER: usize = 1 << 20;
/// Largest buffer kept for reuse after a write (bigger ones are freed).
const SPARE_MAX: usize = 256 << 10;

/// Runs a wait for the writing thread without starving the async runtime: through
/// `block_in_place` on a multi-threaded runtime, else directly.
fn blocking<T>(wait: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(wait),
        _ => wait(),
    }
}

#[derive(Default)]
struct State {
    /// Complete lines not yet taken by a writer.
    buf: Vec<u8>,
    /// An emptied buffer kept for the next swap.
    spare: Vec<u8>,
    /// Whether a thread is writing (it owns the sink until it finds `buf` empty).
    writing: bool,
    /// Bytes ever queued / ever written (so `queued - written` is the backlog).
    queued: u64,
    written: u64,
    /// Threads waiting on `progress` (a notify is only sent when there are some).
    waiters: usize,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled after each write and when a writer stops.
    progress: Condvar,
    /// The sink; locked only by the thread whose `writing` flag is set.
    sink: Mutex<Box<dyn Write + Send>>,
}

/// Cheap to clone handle to the stdout writer.
#[derive(Clone)]
pub struct Output {
    shared: Arc<Shared>,
}

impl Output {
    /// A writer on the process's stdout.
    pub fn stdout() -> Self {
        Self::with_writer(Box::new(std::io::stdout()))
    }

    /// A writer on any sink (used by tests).
    pub fn with_writer(w: Box<dyn Write + Send>) -> Self {
        Output {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                progress: Condvar::new(),
                sink: Mutex::new(w),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        st.waiters += 1;
        st = self
            .shared
            .progress
            .wait(st)
            .unwrap_or_else(|e| e.into_inner());
        st.waiters -= 1;
        st
    }

    /// Writes `buf` until it is empty, taking what other threads queue meanwhile; then gives
    /// the sink up. Called with `writing == false`.
    fn drain<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        st.writing = true;
        while !st.buf.is_empty() {
            let spare = std::mem::take(&mut st.spare);
            let mut batch = std::mem::replace(&mut st.buf, spare);
            drop(st);
            let res = {
                let mut w = self.shared.sink.lock().unwrap_or_else(|e| e.into_inner());
                w.write_all(&batch).and_then(|_| w.flush())
            };
            if res.is_err() {
                crate::procs::kill_all();
                std::process::exit(0);
            }
            st = self.lock();
            st.written += batch.len() as u64;
            if batch.capacity() <= SPARE_MAX && st.spare.capacity() == 0 {
                batch.clear();
                st.spare = batch;
            }
            if st.waiters > 0 {
                self.shared.progress.notify_all();
            }
        }
        st.writing = false;
        if st.waiters > 0 {
            self.shared.progress.notify_all();
        }
        st
    }

    /// Appends one line (serialised by `fill`, which must write no LF) and returns the byte
    /// count queued so far, the line included. A failed `fill` leaves nothing of its output.
    fn append(st: &mut State, fill: impl FnOnce(&mut Vec<u8>) -> Result<(), String>) -> u64 {
        let start = st.buf.len();
        if let Err(e) = fill(&mut st.buf) {
            st.buf.truncate(start);
            let error = Value::String(format!("internal error: could not serialize a record: {e}"));
            let _ = write!(
                st.buf,
                "{{\"type\":\"response\",\"success\":false,\"error\":{error}}}"
            );
        }
        st.buf.push(b'\n');
        st.queued += (st.buf.len() - start) as u64;
        st.queued
    }

    /// Queues one line and writes it unless another thread is writing; with `flushed`, returns
    /// only once the line has been written and flushed; waits first while the backlog is over
    /// [`HIGH_WATER`] behind a writer.
    fn put(
        &self,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), String>,
        flushed: bool,
        back_pressure: bool,
    ) {
        let mut st = self.lock();
        if back_pressure && st.writing && st.queued - st.written > HIGH_WATER as u64 {
            st = blocking(move || {
                while st.writing && st.queued - st.written > LOW_WATER as u64 {
                    st = self.wait(st);
                }
                st
            });
        }
        let end = Self::append(&mut st, fill);
        if !st.writing {
            drop(self.drain(st));
        } else if flushed {
            self.wait_written(st, end);
        }
    }

    /// Waits until `end` bytes have been written (writing them itself if the writer stopped).
    fn wait_written<'a>(&'a self, st: MutexGuard<'a, State>, end: u64) {
        blocking(move || {
            let mut st = st;
            while st.written < end {
                if !st.writing {
                    st = self.drain(st);
                } else {
                    st = self.wait(st);
                }
            }
        });
    }

    /// Queues one record (a response or an event) as one line.
    pub fn send(&self, record: &RpcOutput) {
        self.put(|buf| serde_json::to_writer(buf, record).map_err(|e| e.to_string()), false, false);
    }

    /// Queues a response.
    pub fn response(&self, response: RpcResponse) {
        self.send(&RpcOutput::Response(response));
    }

    /// Queues an event; waits while the backlog is over [`HIGH_WATER`]. A
    /// `tool_execution_start` is written and flushed before this returns.
    pub fn event(&self, event: RpcEvent) {
        let announces_tool = matches!(event, RpcEvent::ToolExecutionStart { .. });
        let record = RpcOutput::Event(Box::new(event));
        self.put(
            |buf| serde_json::to_writer(buf, &record).map_err(|e| e.to_string()),
            announces_tool,
            true,
        );
    }

    /// Queues a raw JSON line that is not a protocol record (the `--mode json` session header).
    pub fn raw_line(&self, line: String) {
        self.put(
            |buf| {
                buf.extend_from_slice(line.as_bytes());
                Ok(())
            },
            false,
            false,
        );
    }

    /// Blocks until every queued record has been written and stdout flushed.
    pub fn flush(&self) {
        let st = self.lock();
        let end = st.queued;
        self.wait_written(st, end);
    }

    /// An event sink for [`crate::agent_session::AgentSession`].
    pub fn sink(&self) -> crate::agent_session::EventSink {
        let o = self.clone();
        Arc::new(move |e| o.event(e))
    }
}
