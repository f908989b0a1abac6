//! The single stdout writer (spec rpc-protocol.md §2.1).
//!
//! Records are queued through a channel to one thread that writes each as one complete line
//! (`JSON + "\n"`) and flushes it. If stdout is closed (EPIPE), the process ends quietly with
//! exit code 0 after killing the process groups of running tools.

use crate::rpc::protocol::{RpcEvent, RpcOutput, RpcResponse};
use std::io::Write;
use std::sync::mpsc;
use std::sync::Arc;

/// Writes one complete record (with its `\n`) straight to the writer.
pub type RecordWriter = Box<dyn FnOnce(&mut dyn Write) -> std::io::Result<()> + Send>;

enum Msg {
    Line(String),
    Write(RecordWriter),
    Flush(mpsc::Sender<()>),
}

/// Cheap to clone handle to the stdout writer.
#[derive(Clone)]
pub struct Output {
    tx: mpsc::Sender<Msg>,
}

impl Output {
    /// Starts the writer thread on the process's stdout.
    pub fn stdout() -> Self {
        Self::with_writer(Box::new(std::io::stdout()))
    }

    /// Starts a writer thread on any sink (used by tests).
    pub fn with_writer(mut w: Box<dyn Write + Send>) -> Self {
        let (tx, rx) = mpsc::channel::<Msg>();
        std::thread::spawn(move || {
            for msg in rx {
                match msg {
                    Msg::Line(mut line) => {
                        line.push('\n');
                        if w.write_all(line.as_bytes())
                            .and_then(|_| w.flush())
                            .is_err()
                        {
                            crate::procs::kill_all();
                            std::process::exit(0);
                        }
                    }
                    Msg::Write(f) => {
                        let mut buffered = std::io::BufWriter::with_capacity(1 << 16, &mut w);
                        let written = f(&mut buffered).and_then(|_| buffered.flush());
                        drop(buffered);
                        if written.and_then(|_| w.flush()).is_err() {
                            crate::procs::kill_all();
                            std::process::exit(0);
                        }
                    }
                    Msg::Flush(done) => {
                        let _ = w.flush();
                        let _ = done.send(());
                    }
                }
            }
        });
        Output { tx }
    }

    /// Queues one record (a response or an event) as one line.
    pub fn send(&self, record: &RpcOutput) {
        let _ = self.tx.send(Msg::Line(record.to_line()));
    }

    /// Queues a response.
    pub fn response(&self, response: RpcResponse) {
        self.send(&RpcOutput::Response(response));
    }

    /// Queues an event.
    pub fn event(&self, event: RpcEvent) {
        self.send(&RpcOutput::Event(Box::new(event)));
    }

    /// Queues a record that the writer thread serialises straight to stdout (for responses too
    /// large to build as a string first, e.g. `get_messages`). `f` must write exactly one
    /// complete line; an error from it is treated like a closed stdout.
    pub fn write_with(&self, f: RecordWriter) {
        let _ = self.tx.send(Msg::Write(f));
    }

    /// Queues a raw JSON line that is not a protocol record (the `--mode json` session header).
    pub fn raw_line(&self, line: String) {
        let _ = self.tx.send(Msg::Line(line));
    }

    /// Blocks until every queued record has been written.
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
