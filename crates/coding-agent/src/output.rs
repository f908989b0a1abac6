//! The single stdout writer (spec rpc-protocol.md §2.1).
//!
//! Records are queued through a channel to one thread that writes each as one complete line
//! (`JSON + "\n"`) and flushes it. If stdout is closed (EPIPE), the process ends quietly with
//! exit code 0 after killing the process groups of running tools.
//!
//! Two promises to readers of stdout:
//! * `tool_execution_start` is written and flushed before [`Output::event`] returns, so the
//!   tool it announces has not begun when a client reads the line (an ACP adapter reads the
//!   file an `edit` is about to change at that moment).
//! * Memory stays bounded when the reader is slower than the agent: once more than
//!   [`HIGH_WATER`] bytes are queued, queuing an event waits until the writer is back under
//!   [`LOW_WATER`] (a fast RPC `bash` then slows down to the reader's pace instead of piling its
//!   output up in memory).

use crate::rpc::protocol::{RpcEvent, RpcOutput, RpcResponse};
use std::io::Write;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};

/// Queued bytes above which queuing an event waits for the writer (4 MiB).
pub const HIGH_WATER: usize = 4 << 20;
/// Queued bytes below which waiting senders go on (1 MiB).
pub const LOW_WATER: usize = 1 << 20;

/// Bytes queued and not yet written, shared by the senders and the writer thread.
#[derive(Default)]
struct Backlog {
    bytes: Mutex<usize>,
    drained: Condvar,
}

impl Backlog {
    fn add(&self, n: usize) {
        let mut b = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        *b += n;
    }

    fn remove(&self, n: usize) {
        let mut b = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        *b = b.saturating_sub(n);
        if *b <= LOW_WATER {
            self.drained.notify_all();
        }
    }

    /// Waits while more than [`HIGH_WATER`] bytes are queued, until at most [`LOW_WATER`] are.
    fn wait_below_high_water(&self) {
        let over = |b: &usize| *b > HIGH_WATER;
        if !over(&self.bytes.lock().unwrap_or_else(|e| e.into_inner())) {
            return;
        }
        blocking(|| {
            let mut b = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
            while *b > LOW_WATER {
                b = self.drained.wait(b).unwrap_or_else(|e| e.into_inner());
            }
        });
    }
}

/// Runs a wait for the writer thread without starving the async runtime: through
/// `block_in_place` on a multi-threaded runtime, else directly (the writer is a plain thread
/// that needs no runtime, so the wait always ends once stdout takes the bytes).
fn blocking(wait: impl FnOnce()) {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(wait),
        _ => wait(),
    }
}

enum Msg {
    Line(String),
    Flush(mpsc::Sender<()>),
}

/// Cheap to clone handle to the stdout writer.
#[derive(Clone)]
pub struct Output {
    tx: mpsc::Sender<Msg>,
    backlog: Arc<Backlog>,
}

impl Output {
    /// Starts the writer thread on the process's stdout.
    pub fn stdout() -> Self {
        Self::with_writer(Box::new(std::io::stdout()))
    }

    /// Starts a writer thread on any sink (used by tests).
    pub fn with_writer(mut w: Box<dyn Write + Send>) -> Self {
        let (tx, rx) = mpsc::channel::<Msg>();
        let backlog = Arc::new(Backlog::default());
        let writer_backlog = backlog.clone();
        std::thread::spawn(move || {
            for msg in rx {
                match msg {
                    Msg::Line(mut line) => {
                        let queued = line.len();
                        line.push('\n');
                        if w.write_all(line.as_bytes())
                            .and_then(|_| w.flush())
                            .is_err()
                        {
                            crate::procs::kill_all();
                            std::process::exit(0);
                        }
                        writer_backlog.remove(queued);
                    }
                    Msg::Flush(done) => {
                        let _ = w.flush();
                        let _ = done.send(());
                    }
                }
            }
        });
        Output { tx, backlog }
    }

    /// Queues one record (a response or an event) as one line.
    pub fn send(&self, record: &RpcOutput) {
        self.queue(record.to_line());
    }

    fn queue(&self, line: String) {
        self.backlog.add(line.len());
        let _ = self.tx.send(Msg::Line(line));
    }

    /// Queues a response.
    pub fn response(&self, response: RpcResponse) {
        self.send(&RpcOutput::Response(response));
    }

    /// Queues an event; waits while the backlog is over [`HIGH_WATER`]. A
    /// `tool_execution_start` is written and flushed before this returns.
    pub fn event(&self, event: RpcEvent) {
        self.backlog.wait_below_high_water();
        let announces_tool = matches!(event, RpcEvent::ToolExecutionStart { .. });
        self.send(&RpcOutput::Event(Box::new(event)));
        if announces_tool {
            blocking(|| self.flush());
        }
    }

    /// Queues a raw JSON line that is not a protocol record (the `--mode json` session header).
    pub fn raw_line(&self, line: String) {
        self.queue(line);
    }

    /// Blocks until every queued record has been written and stdout flushed.
    pub fn flush(&self) {
        let (done_tx, done_rx) = mpsc::channel();
        if self.tx.send(Msg::Flush(done_tx)).is_ok() {
            let _ = done_rx.recv();
        }
    }

    /// An event sink for [`crate::agent_session::AgentSession`].
    pub fn sink(&self) -> crate::agent_session::EventSink {
        let o = self.clone();
        Arc::new(move |e| o.event(e))
    }
}
