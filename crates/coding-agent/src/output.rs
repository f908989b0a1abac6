//! The single stdout writer (spec rpc-protocol.md §2.1).
//!
//! Records are queued through a channel to one thread that writes each as one complete line
//! (`JSON + "\n"`) and flushes it. If stdout is closed (EPIPE), the process ends quietly with
//! exit code 0 after killing the process groups of running tools.

use serde_json::Value;
use std::io::Write;
use std::sync::mpsc;
use std::sync::Arc;

enum Msg {
    Line(String),
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
                    Msg::Flush(done) => {
                        let _ = w.flush();
                        let _ = done.send(());
                    }
                }
            }
        });
        Output { tx }
    }

    /// Queues one record. Serialization cannot fail for `Value`.
    pub fn send(&self, record: Value) {
        let line = serde_json::to_string(&record).unwrap_or_default();
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
        Arc::new(move |v| o.send(v))
    }
}
