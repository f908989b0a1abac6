//! The single stdout writer (spec rpc-protocol.md §2.1).
//!
//! Every record is one complete line (`JSON + "\n"`). Whoever queues a record serialises it
//! straight from the typed protocol structs into one shared buffer (under one lock, so lines
//! never interleave); one writer thread takes everything queued so far in one swap and writes
//! it with one `write` and a flush. The queuing side wakes the writer only when it is idle, so
//! a busy stream costs no thread hand-off per event and a burst goes out in one write, while a
//! slow stream still sees each event at once. If stdout is closed (EPIPE), the process ends
//! quietly with exit code 0 after killing the process groups of running tools.
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

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The writer thread: takes everything queued, writes it in one go and flushes, until stdout
/// fails (then the process ends with 0 after killing running tools).
fn write_loop(shared: &Shared, mut w: Box<dyn Write + Send>) {
    let mut st = lock(shared);
    loop {
        while st.buf.is_empty() && st.jobs.is_empty() {
            st.idle = true;
            st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.idle = false;
        let spare = std::mem::take(&mut st.spare);
        let mut batch = std::mem::replace(&mut st.buf, spare);
        let jobs = std::mem::take(&mut st.jobs);
        let job_count = jobs.len() as u64;
        drop(st);
        // Lines queued before a streamed record go out before it, the rest after it.
        let mut pos = 0;
        let mut written = Ok(());
        for (at, job) in jobs {
            written = written.and_then(|_| w.write_all(&batch[pos..at]));
            pos = at;
            let mut buffered = std::io::BufWriter::with_capacity(1 << 16, &mut w);
            written = written
                .and_then(|_| job(&mut buffered))
                .and_then(|_| buffered.flush());
        }
        if written
            .and_then(|_| w.write_all(&batch[pos..]))
            .and_then(|_| w.flush())
            .is_err()
        {
            crate::procs::kill_all();
            std::process::exit(0);
        }
        st = lock(shared);
        // A streamed record counts as one byte of the backlog (its size is not known ahead).
        st.written += batch.len() as u64 + job_count;
        if batch.capacity() <= SPARE_MAX && st.spare.capacity() == 0 {
            batch.clear();
            st.spare = batch;
        }
        if st.waiters > 0 {
            shared.progress.notify_all();
        }
    }
}

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
    /// Complete lines not yet taken by the writer.
    buf: Vec<u8>,
    /// An emptied buffer kept for the next swap.
    spare: Vec<u8>,
    /// Whether the writer thread is waiting for lines (queuing then wakes it).
    idle: bool,
    /// Bytes ever queued / ever written (so `queued - written` is the backlog).
    queued: u64,
    written: u64,
    /// Threads waiting on `progress` (a notify is only sent when there are some).
    waiters: usize,
    /// Records written straight to stdout by a closure ([`Output::write_with`]), each at the
    /// offset of `buf` where it was queued.
    jobs: Vec<(usize, RecordWriter)>,
}

/// Writes one complete record (with its `\n`) straight to the writer (a huge `get_messages`
/// response is serialised into stdout without being built in memory first).
pub type RecordWriter = Box<dyn FnOnce(&mut dyn Write) -> std::io::Result<()> + Send>;

struct Shared {
    state: Mutex<State>,
    /// Signalled after each write.
    progress: Condvar,
    /// Signalled when lines are queued while the writer is idle.
    wake: Condvar,
}

/// Cheap to clone handle to the stdout writer.
#[derive(Clone)]
pub struct Output {
    shared: Arc<Shared>,
}

impl Output {
    /// Starts the writer thread on the process's stdout.
    pub fn stdout() -> Self {
        Self::with_writer(Box::new(std::io::stdout()))
    }

    /// Starts a writer thread on any sink (used by tests).
    pub fn with_writer(w: Box<dyn Write + Send>) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            progress: Condvar::new(),
            wake: Condvar::new(),
        });
        let writer = shared.clone();
        std::thread::spawn(move || write_loop(&writer, w));
        Output { shared }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.shared)
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

    /// Queues one line and wakes the writer if it is idle; with `flushed`, returns only once
    /// the line has been written and flushed; with `back_pressure`, waits first while the
    /// backlog is over [`HIGH_WATER`] until it is at most [`LOW_WATER`].
    fn put(
        &self,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), String>,
        flushed: bool,
        back_pressure: bool,
    ) {
        let mut st = self.lock();
        if back_pressure && st.queued - st.written > HIGH_WATER as u64 {
            st = blocking(move || {
                while st.queued - st.written > LOW_WATER as u64 {
                    st = self.wait(st);
                }
                st
            });
        }
        let end = Self::append(&mut st, fill);
        if st.idle {
            st.idle = false;
            self.shared.wake.notify_one();
        }
        if flushed {
            self.wait_written(st, end);
        }
    }

    /// Waits until `end` bytes have been written and flushed.
    fn wait_written<'a>(&'a self, st: MutexGuard<'a, State>, end: u64) {
        if st.written >= end {
            return;
        }
        blocking(move || {
            let mut st = st;
            while st.written < end {
                st = self.wait(st);
            }
        });
    }

    /// Queues one record (a response or an event) as one line.
    pub fn send(&self, record: &RpcOutput) {
        self.put(
            |buf| serde_json::to_writer(buf, record).map_err(|e| e.to_string()),
            false,
            false,
        );
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

    /// Queues a record that `f` writes straight to stdout, whole and with its `\n`, after every
    /// line queued before it (used for `get_messages`, whose response can be as large as the
    /// session).
    pub fn write_with(&self, f: RecordWriter) {
        let mut st = self.lock();
        let at = st.buf.len();
        st.jobs.push((at, f));
        st.queued += 1;
        if st.idle {
            st.idle = false;
            self.shared.wake.notify_one();
        }
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
