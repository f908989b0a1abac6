//! The stdout side of the ACP connection: a client that closed its end of the pipe is gone,
//! not a failure of ours.
//!
//! An editor that quits (or a client that drops its connection with a prompt unanswered)
//! closes pi's stdout pipe while a reply may still be streaming: the next write fails with
//! `EPIPE`. Handed to the SDK as an error, that ends the connection with a transport error
//! and pi would exit 1 before stdin reached EOF. What matters then is what the module doc of
//! [`super`] promises at EOF: the runs in flight are aborted and settled, so their messages
//! reach the session file, and pi exits 0. So once a write fails with `BrokenPipe`, this
//! writer discards everything (nobody can read it) and reports it written; the SDK keeps
//! reading stdin until EOF as on any other close.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use tokio::io::AsyncWrite;

/// An [`AsyncWrite`] that turns `BrokenPipe` into "the client is gone": from then on every
/// write is dropped and reported as written (`Ok(len)`), flush and shutdown succeed. Other
/// errors pass through unchanged.
pub(crate) struct ClientOut<W> {
    inner: W,
    gone: AtomicBool,
}

impl<W> ClientOut<W> {
    /// Wraps the writer (stdout).
    pub(crate) fn new(inner: W) -> Self {
        Self {
            inner,
            gone: AtomicBool::new(false),
        }
    }

    /// Whether a write found the client's end closed.
    #[cfg(test)]
    fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }
}

impl<W: AsyncWrite + Unpin> ClientOut<W> {
    /// `Ready(Ok(v))` once the client is gone; otherwise what `f` returns, a `BrokenPipe`
    /// marking the client gone and becoming `Ok(v)`.
    fn guard<T>(
        &mut self,
        v: T,
        f: impl FnOnce(Pin<&mut W>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if self.gone.load(Ordering::Relaxed) {
            return Poll::Ready(Ok(v));
        }
        match f(Pin::new(&mut self.inner)) {
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.gone.store(true, Ordering::Relaxed);
                Poll::Ready(Ok(v))
            }
            other => other,
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for ClientOut<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        self.get_mut().guard(len, |w| w.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().guard((), |w| w.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().guard((), |w| w.poll_shutdown(cx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A real pipe whose read end is closed: the first write is `EPIPE` underneath, and the
    /// writer reports it and every later write as done.
    #[tokio::test]
    async fn a_closed_pipe_swallows_writes_and_other_writes_pass() {
        let (write, read) = tokio::net::unix::pipe::pipe().unwrap();
        drop(read);
        let mut out = ClientOut::new(write);
        assert_eq!(out.write(b"hello\n").await.unwrap(), 6);
        assert!(out.is_gone());
        out.write_all(b"more\n").await.unwrap();
        out.flush().await.unwrap();

        let (write, read) = tokio::net::unix::pipe::pipe().unwrap();
        let mut out = ClientOut::new(write);
        out.write_all(b"kept\n").await.unwrap();
        assert!(!out.is_gone());
        drop(out);
        let mut got = String::new();
        let mut read = read;
        tokio::io::AsyncReadExt::read_to_string(&mut read, &mut got)
            .await
            .unwrap();
        assert_eq!(got, "kept\n");
    }
}
