//! The single stdout writer (spec rpc-protocol.md §2.1).
//!
//! Every record is one complete line (`JSON + "\n"`). Whoever queues a record serialises it
//! straight from the typed protocol structs into one shared buffer (under one lock, so lines
//! never interleave). What is queued goes out in one `write` per batch, by whoever drains the
//! buffer: only one thread writes at a time (the `writing` flag, set under the lock), and it
//! keeps taking batches until the buffer is empty, so queue order is write order.
//!
//! **When a batch is written** (issue 15: no thread hand-off per event). A record queued from
//! inside a task of the async runtime is only queued: the first record of a burst wakes the
//! *writer task* ([`Output::stdout`] spawns it on the runtime), which yields to the other
//! ready tasks until a round of them queues nothing more, then drains the buffer on its
//! worker — so a burst of events goes out in one write with no thread woken, however often
//! the tasks producing it hand work to each other, and a slow stream still sees each event
//! as soon as the tasks that queued it wait. A record queued on any other thread (the RPC reader, which runs on
//! the main thread's `block_on`, tool reader threads) wakes the writer thread when it is idle,
//! as does a deferred buffer past [`DEFER_MAX`] bytes or one whose oldest line is older than
//! [`DEFER_MAX_AGE`] (a task that stays busy without yielding). Nothing is tied to a thread:
//! a deferred record waits for a task, which any worker runs, not for one thread's park.
//! Only the instance made by [`Output::stdout`] defers; [`Output::with_writer`] wakes its
//! writer thread for every record queued while it is idle.
//!
//! If stdout is closed (EPIPE), the process ends quietly with exit code 0 after killing the
//! process groups of running tools.
//!
//! Three promises to readers of stdout:
//! * `tool_execution_start` is written and flushed before [`Output::event`] returns, so the
//!   tool it announces has not begun when a client reads the line (an ACP adapter reads the
//!   file an `edit` is about to change at that moment).
//! * `tool_execution_end` is handed to the writer thread at once, never left for the writer
//!   task (issue 24): the task would write it only once the agent loop waits again, after it
//!   has built and sent the next request, so a client would see every tool end late by that
//!   much. The caller does not wait for the write.
//! * Memory stays bounded when the reader is slower than the agent: once more than
//!   [`HIGH_WATER`] bytes are queued behind a blocked write, queuing an event waits until at
//!   most [`LOW_WATER`] are (a fast RPC `bash` then slows down to the reader's pace instead of
//!   piling its output up in memory).
//!
//! Both waits block the calling thread, a runtime worker included: the writer thread has been
//! handed everything queued before the wait starts and needs nothing of the runtime, so the
//! wait ends as soon as the reader has taken the bytes (the agent then runs at the reader's
//! pace, which is the point of the bound).

use crate::protocol::rpc::{RpcEvent, RpcOutput, RpcResponse};
use serde_json::Value;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Queued bytes above which queuing an event waits for the writer (4 MiB).
pub const HIGH_WATER: usize = 4 << 20;
/// Queued bytes below which waiting senders go on (1 MiB).
pub const LOW_WATER: usize = 1 << 20;
/// Deferred bytes (queued inside a runtime task, left for the writer task) past which the
/// writer thread is woken at once (64 KiB).
pub const DEFER_MAX: usize = 64 << 10;
/// Age of the oldest deferred line past which the next record queued wakes the writer thread
/// (1 ms), for a task that stays busy without yielding to the writer task.
pub const DEFER_MAX_AGE: Duration = Duration::from_millis(1);
/// Largest buffer kept for reuse after a write (bigger ones are freed).
const SPARE_MAX: usize = 256 << 10;

/// The process's stdout writer, once [`Output::stdout`] made it (for
/// [`flush_stdout_for_exit`]).
static STDOUT: OnceLock<Arc<Shared>> = OnceLock::new();

/// Hands every queued stdout record to the writer and waits at most `limit` for it to be
/// written (the SIGTERM/SIGHUP exit path: a reader that stopped reading cannot hold the exit).
pub fn flush_stdout_for_exit(limit: Duration) {
    let Some(shared) = STDOUT.get() else {
        return;
    };
    let deadline = Instant::now() + limit;
    let mut st = lock(shared);
    st.deferred_since = None;
    let end = st.queued;
    wake_writer(shared, &mut st);
    while st.written < end {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        st.waiters += 1;
        st = match shared.progress.wait_timeout(st, deadline - now) {
            Ok((g, _)) => g,
            Err(e) => e.into_inner().0,
        };
        st.waiters -= 1;
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared
        .state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Wakes the writer thread if it waits and nobody is writing (a writer in progress takes
/// everything queued before it stops).
fn wake_writer(shared: &Shared, st: &mut State) {
    if st.idle && !st.writing {
        st.idle = false;
        shared.wake.notify_one();
    }
}

/// Writes batches until the buffer is empty, as the one writing thread (`st.writing` must be
/// false on entry; it is false again on return). Each batch is one `write` of everything
/// queued, streamed records ([`Output::write_with`]) at their places, then a flush. If stdout
/// fails, running tools are killed and the process ends with 0.
fn drain<'a>(shared: &'a Shared, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    st.writing = true;
    while !st.buf.is_empty() || !st.jobs.is_empty() {
        st.deferred_since = None;
        let spare = std::mem::take(&mut st.spare);
        let mut batch = std::mem::replace(&mut st.buf, spare);
        let jobs = std::mem::take(&mut st.jobs);
        let job_count = jobs.len() as u64;
        drop(st);
        let written = {
            let mut w = shared
                .sink
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            write_batch(&mut **w, &batch, jobs)
        };
        if written.is_err() {
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
    st.writing = false;
    st
}

/// Writes one batch: lines queued before a streamed record go out before it, the rest after.
fn write_batch(
    w: &mut dyn Write,
    batch: &[u8],
    jobs: Vec<(usize, RecordWriter)>,
) -> std::io::Result<()> {
    let mut pos = 0;
    for (at, job) in jobs {
        w.write_all(&batch[pos..at])?;
        pos = at;
        let mut buffered = std::io::BufWriter::with_capacity(1 << 16, &mut *w);
        job(&mut buffered)?;
        buffered.flush()?;
    }
    w.write_all(&batch[pos..])?;
    w.flush()
}

/// The writer thread: drains whatever it is woken for, unless another thread is writing.
fn write_loop(shared: &Shared) {
    let mut st = lock(shared);
    loop {
        while st.writing || (st.buf.is_empty() && st.jobs.is_empty()) {
            st.idle = true;
            st = shared
                .wake
                .wait(st)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        st.idle = false;
        st = drain(shared, st);
    }
}

/// The writer task: each time it is woken (by the first record of a burst queued inside a
/// runtime task), drains the buffer on its worker unless another thread is writing (which
/// then takes the deferred records too). The write may block while the reader is slow, as the
/// writer thread's would. Dropped with the runtime, it hands what is left to the writer thread.
async fn write_task(shared: Arc<Shared>) {
    /// Marks the task gone and wakes the writer thread for any deferred records.
    struct Gone(Arc<Shared>);
    impl Drop for Gone {
        fn drop(&mut self) {
            self.0.task_alive.store(false, Ordering::Release);
            let mut st = lock(&self.0);
            if st.deferred_since.take().is_some() {
                wake_writer(&self.0, &mut st);
            }
        }
    }
    let gone = Gone(shared);
    let shared = &gone.0;
    loop {
        shared.task_wake.notified().await;
        // The tasks that are ready run first (a yield puts this task behind them and behind
        // the I/O driver's next poll): as long as a round of them queues more records, the
        // burst goes on, so it becomes one write however often its producers hand work to
        // each other (a provider's body reader and the agent loop do per event). Bounded by
        // `DEFER_MAX`/`DEFER_MAX_AGE`, past which the next record wakes the writer thread.
        let mut seen = lock(shared).queued;
        loop {
            tokio::task::yield_now().await;
            let st = lock(shared);
            if st.deferred_since.is_none() || st.queued == seen {
                break;
            }
            seen = st.queued;
        }
        let mut st = lock(shared);
        if st.deferred_since.take().is_some() && !st.writing {
            drop(drain(shared, st));
        }
    }
}

#[derive(Default)]
struct State {
    /// Complete lines not yet taken by a writer.
    buf: Vec<u8>,
    /// An emptied buffer kept for the next swap.
    spare: Vec<u8>,
    /// Whether the writer thread is waiting for lines (queuing then wakes it).
    idle: bool,
    /// Whether some thread is writing batches now (it drains until the buffer is empty).
    writing: bool,
    /// When the oldest record left for the writer task was queued (`None`: nothing deferred;
    /// the task has been woken when it is `Some`).
    deferred_since: Option<Instant>,
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
    /// The sink; only the thread with `State::writing` set locks it.
    sink: Mutex<Box<dyn Write + Send>>,
    /// Whether records queued inside a runtime task are left for the writer task (stdout only).
    defers: bool,
    /// How long a deferred record may wait ([`DEFER_MAX_AGE`] but in tests).
    max_age: Duration,
    /// Whether the writer task runs (set once it is spawned, cleared when it is dropped).
    task_alive: AtomicBool,
    /// Wakes the writer task.
    task_wake: tokio::sync::Notify,
    /// Signalled after each write.
    progress: Condvar,
    /// Signalled when lines are queued while the writer is idle.
    wake: Condvar,
}

/// When a queued line goes out ([`Output::put`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// Inside a runtime task on the stdout writer: left for the writer task (a burst becomes
    /// one write); elsewhere as [`Delivery::Now`].
    Deferrable,
    /// The writer thread is woken for it (and takes whatever was deferred before it); the
    /// caller goes on at once.
    Now,
    /// As [`Delivery::Now`], and the caller waits until the line has been written and flushed.
    Flushed,
}

/// Cheap to clone handle to the stdout writer.
#[derive(Clone)]
pub struct Output {
    shared: Arc<Shared>,
}

impl Output {
    /// Starts the writer thread on the process's stdout and, when called inside a tokio
    /// runtime, the writer task on it: records queued inside the runtime's tasks are then
    /// written when the task that queued them yields (see the [module docs](self)). Only the
    /// first call defers; [`flush_stdout_for_exit`] flushes that one.
    pub fn stdout() -> Self {
        let out = Self::deferring(Box::new(std::io::stdout()));
        if STDOUT.set(out.shared.clone()).is_err() {
            return Self::with_writer(Box::new(std::io::stdout()));
        }
        out
    }

    /// A writer on `w` that leaves records queued inside runtime tasks for its writer task
    /// (spawned when called inside a tokio runtime; outside one it never defers).
    fn deferring(w: Box<dyn Write + Send>) -> Self {
        Self::deferring_for(w, DEFER_MAX_AGE)
    }

    /// [`Output::deferring`] with `max_age` in place of [`DEFER_MAX_AGE`] (tests of the
    /// batching use a long one so that a preempted test thread cannot trip the age bound).
    fn deferring_for(w: Box<dyn Write + Send>, max_age: Duration) -> Self {
        let out = Self::start(w, true, max_age);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            out.shared.task_alive.store(true, Ordering::Release);
            handle.spawn(write_task(out.shared.clone()));
        }
        out
    }

    /// Starts a writer thread on any sink (used by tests); it never defers.
    pub fn with_writer(w: Box<dyn Write + Send>) -> Self {
        Self::start(w, false, DEFER_MAX_AGE)
    }

    fn start(w: Box<dyn Write + Send>, defers: bool, max_age: Duration) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            sink: Mutex::new(w),
            defers,
            max_age,
            task_alive: AtomicBool::new(false),
            task_wake: tokio::sync::Notify::new(),
            progress: Condvar::new(),
            wake: Condvar::new(),
        });
        let writer = shared.clone();
        std::thread::spawn(move || write_loop(&writer));
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
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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

    /// Queues one line; a [`Delivery::Deferrable`] one queued inside a runtime task, on the
    /// stdout writer, is left for the writer task (within [`DEFER_MAX`] / [`DEFER_MAX_AGE`]),
    /// otherwise the writer thread is woken if idle. With [`Delivery::Flushed`], returns only
    /// once the line has been written and flushed; with
    /// `back_pressure`, waits first while the backlog is over [`HIGH_WATER`] until it is at
    /// most [`LOW_WATER`]. Both waits block the calling thread (see the [module docs](self)).
    fn put(
        &self,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), String>,
        delivery: Delivery,
        back_pressure: bool,
    ) {
        let flushed = delivery == Delivery::Flushed;
        let mut st = self.lock();
        if back_pressure && st.queued - st.written > HIGH_WATER as u64 {
            st.deferred_since = None;
            wake_writer(&self.shared, &mut st);
            while st.queued - st.written > LOW_WATER as u64 {
                st = self.wait(st);
            }
        }
        let end = Self::append(&mut st, fill);
        let defer = delivery == Delivery::Deferrable
            && self.shared.defers
            && self.shared.task_alive.load(Ordering::Acquire)
            && tokio::task::try_id().is_some();
        let now_due = !defer
            || st.buf.len() >= DEFER_MAX
            || st
                .deferred_since
                .is_some_and(|t| t.elapsed() >= self.shared.max_age);
        if now_due {
            st.deferred_since = None;
            wake_writer(&self.shared, &mut st);
        } else if st.deferred_since.is_none() {
            st.deferred_since = Some(Instant::now());
            self.shared.task_wake.notify_one();
        }
        if flushed {
            self.wait_written(st, end);
        }
    }

    /// Waits until `end` bytes have been written and flushed.
    fn wait_written<'a>(&'a self, mut st: MutexGuard<'a, State>, end: u64) {
        while st.written < end {
            st = self.wait(st);
        }
    }

    /// Queues one record (a response or an event) as one line.
    pub fn send(&self, record: &RpcOutput) {
        self.put(
            |buf| serde_json::to_writer(buf, record).map_err(|e| e.to_string()),
            Delivery::Deferrable,
            false,
        );
    }

    /// Queues a response.
    pub fn response(&self, response: RpcResponse) {
        self.send(&RpcOutput::Response(response));
    }

    /// Queues an event; waits while the backlog is over [`HIGH_WATER`]. A
    /// `tool_execution_start` is written and flushed before this returns; a
    /// `tool_execution_end` is handed to the writer thread at once (see the
    /// [module docs](self)).
    pub fn event(&self, event: RpcEvent) {
        let delivery = match event {
            RpcEvent::ToolExecutionStart { .. } => Delivery::Flushed,
            RpcEvent::ToolExecutionEnd { .. } => Delivery::Now,
            _ => Delivery::Deferrable,
        };
        let record = RpcOutput::Event(Box::new(event));
        self.put(
            |buf| serde_json::to_writer(buf, &record).map_err(|e| e.to_string()),
            delivery,
            true,
        );
    }

    /// Queues a record that `f` writes straight to stdout, whole and with its `\n`, after every
    /// line queued before it (used for `get_messages`, whose response can be as large as the
    /// session). The writer thread is woken for it.
    pub fn write_with(&self, f: RecordWriter) {
        let mut st = self.lock();
        let at = st.buf.len();
        st.jobs.push((at, f));
        st.queued += 1;
        st.deferred_since = None;
        wake_writer(&self.shared, &mut st);
    }

    /// Queues a raw JSON line that is not a protocol record (the `--mode json` session header).
    pub fn raw_line(&self, line: String) {
        self.put(
            |buf| {
                buf.extend_from_slice(line.as_bytes());
                Ok(())
            },
            Delivery::Deferrable,
            false,
        );
    }

    /// Blocks until every queued record has been written and stdout flushed.
    pub fn flush(&self) {
        let mut st = self.lock();
        st.deferred_since = None;
        wake_writer(&self.shared, &mut st);
        let end = st.queued;
        self.wait_written(st, end);
    }

    /// An event sink for [`crate::agent_session::AgentSession`].
    pub fn sink(&self) -> crate::agent_session::EventSink {
        let o = self.clone();
        Arc::new(move |e| o.event(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Bytes written since the last flush, and every flushed batch.
    type Written = (Vec<u8>, Vec<Vec<u8>>);

    /// A sink that records every flushed batch.
    #[derive(Clone, Default)]
    struct Batches(Arc<Mutex<Written>>);

    impl Write for Batches {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().0.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            let mut g = self.0.lock().unwrap();
            let batch = std::mem::take(&mut g.0);
            g.1.push(batch);
            Ok(())
        }
    }

    impl Batches {
        fn lines(&self) -> Vec<String> {
            let g = self.0.lock().unwrap();
            let all: Vec<u8> = g.1.concat();
            String::from_utf8(all)
                .unwrap()
                .lines()
                .map(str::to_string)
                .collect()
        }
        fn count(&self) -> usize {
            self.0.lock().unwrap().1.len()
        }
        /// Waits (up to 5 s) until `n` lines have been written.
        fn wait_lines(&self, n: usize) {
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.lines().len() < n {
                assert!(Instant::now() < deadline, "only {:?}", self.lines());
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    /// A burst queued by one task goes out in one write, in order, once the task yields.
    /// (The age bound is set to a minute: under load the test thread can be preempted for
    /// more than [`DEFER_MAX_AGE`] between two records, which CI once did: 23 writes.)
    #[test]
    fn a_burst_from_a_task_is_one_write() {
        let rt = runtime();
        let sink = Batches::default();
        let s2 = sink.clone();
        rt.block_on(async move {
            let out = Output::deferring_for(Box::new(s2), Duration::from_secs(60));
            let o = out.clone();
            tokio::spawn(async move {
                for i in 0..200 {
                    o.raw_line(format!("{{\"n\":{i}}}"));
                }
            })
            .await
            .unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        });
        sink.wait_lines(200);
        let want: Vec<String> = (0..200).map(|i| format!("{{\"n\":{i}}}")).collect();
        assert_eq!(sink.lines(), want);
        assert_eq!(sink.count(), 1, "one write for the burst");
    }

    /// A record left for the writer task is written even though the task that queued it never
    /// yields to it on the same thread again: it awaits something else, and the writer task
    /// runs meanwhile (the case of a run task that waits for extension handlers).
    #[test]
    fn a_deferred_record_goes_out_while_its_task_waits() {
        let rt = runtime();
        let sink = Batches::default();
        let s2 = sink.clone();
        let seen = sink.clone();
        rt.block_on(async move {
            let out = Output::deferring(Box::new(s2));
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let o = out.clone();
            let waiter = tokio::spawn(async move {
                o.raw_line("{\"type\":\"agent_settled\"}".into());
                // Waits for the client's answer, which only comes once the line is out.
                rx.await.unwrap();
            });
            tokio::task::spawn_blocking(move || {
                seen.wait_lines(1);
                tx.send(()).unwrap();
            })
            .await
            .unwrap();
            waiter.await.unwrap();
        });
        assert_eq!(
            sink.lines(),
            vec!["{\"type\":\"agent_settled\"}".to_string()]
        );
    }

    /// A record queued outside any task (the RPC reader on the main thread's `block_on`) is
    /// written by the writer thread without waiting for a task to yield.
    #[test]
    fn a_record_from_outside_a_task_is_written_at_once() {
        let rt = runtime();
        let sink = Batches::default();
        let s2 = sink.clone();
        let seen = sink.clone();
        rt.block_on(async move {
            let out = Output::deferring(Box::new(s2));
            out.raw_line("{\"id\":\"s\"}".into());
            // No await: the main future keeps the thread.
            seen.wait_lines(1);
        });
        assert_eq!(sink.lines(), vec!["{\"id\":\"s\"}".to_string()]);
    }

    /// `tool_execution_start` is written and flushed before `event` returns, together with
    /// the records deferred before it.
    #[test]
    fn tool_execution_start_is_flushed_before_event_returns() {
        let rt = runtime();
        let sink = Batches::default();
        let s2 = sink.clone();
        let seen = sink;
        rt.block_on(async move {
            let out = Output::deferring(Box::new(s2));
            tokio::spawn(async move {
                out.raw_line("{\"before\":true}".into());
                out.event(RpcEvent::ToolExecutionStart {
                    tool_call_id: "c1".into(),
                    tool_name: "bash".into(),
                    args: serde_json::json!({}),
                    parent_tool_call_id: None,
                });
                let lines = seen.lines();
                assert_eq!(lines.len(), 2, "{lines:?}");
                assert!(lines[1].contains("tool_execution_start"));
            })
            .await
            .unwrap();
        });
    }

    /// `tool_execution_end` goes out while the task that queued it is still busy (it does not
    /// yield to the writer task), together with the records deferred before it, in order.
    #[test]
    fn tool_execution_end_is_written_without_the_task_yielding() {
        let rt = runtime();
        let sink = Batches::default();
        let s2 = sink.clone();
        let seen = sink;
        rt.block_on(async move {
            let out = Output::deferring_for(Box::new(s2), Duration::from_secs(60));
            tokio::spawn(async move {
                out.raw_line("{\"before\":true}".into());
                out.event(RpcEvent::ToolExecutionEnd {
                    tool_call_id: "c1".into(),
                    tool_name: "read".into(),
                    result: pi_agent::ToolOutput::default(),
                    is_error: false,
                    duration_ms: Some(0),
                    parent_tool_call_id: None,
                });
                // Blocks this (the only) worker: only the writer thread can write now.
                seen.wait_lines(2);
                let lines = seen.lines();
                assert_eq!(lines[0], "{\"before\":true}");
                assert!(lines[1].contains("tool_execution_end"), "{lines:?}");
            })
            .await
            .unwrap();
        });
    }
}
