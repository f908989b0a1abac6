//! Reading a streamed (SSE) response body event by event, racing cancellation and the idle
//! timeout ([`next_sse_event`]).

use super::{BODY_TIMEOUT_MESSAGE, IDLE_EVENT_GRACE_MS, STREAM_IDLE_MESSAGE};
use crate::error::ProviderError;
use eventsource_stream::{Event, EventStreamError};
use futures::{Stream, StreamExt};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How reading a streamed (SSE) response body ended.
#[derive(Debug)]
pub(crate) enum StreamEnd {
    /// The body (or the adapter's end marker) was reached.
    Finished,
    /// The cancel token fired.
    Aborted,
    /// The stream broke or carried an error.
    Failed(ProviderError),
}

/// The next SSE event of `events`, racing `cancel` (checked first) and the idle timeout
/// `idle_timeout_ms` (`0` = none), or how the stream ended: [`StreamEnd::Aborted`] on cancel,
/// [`StreamEnd::Finished`] at the end of the body, and [`StreamEnd::Failed`] with
/// [`ProviderError::Timeout`] — [`BODY_TIMEOUT_MESSAGE`] when no byte arrived within the
/// client's idle timeout, `Stream idle timeout: no event in <n> ms` when bytes (keep-alive
/// comments, which the SSE parser drops) but no event arrived within `idle_timeout_ms` —,
/// [`ProviderError::Disconnected`] ([`super::BODY_TERMINATED_MESSAGE`], or
/// [`super::BODY_RESET_MESSAGE`] for a reset) when the connection broke,
/// or [`ProviderError::Protocol`] with the parser's error text for malformed UTF-8/SSE.
pub(crate) async fn next_sse_event<S>(
    events: &mut S,
    cancel: &CancellationToken,
    idle_timeout_ms: u64,
) -> Result<Event, StreamEnd>
where
    S: Stream<Item = Result<Event, EventStreamError<reqwest::Error>>> + Unpin,
{
    let idle = async {
        if idle_timeout_ms > 0 {
            // The grace lets the client's byte-level idle timeout (started at the last read,
            // before this event was parsed) report a silent connection first.
            let grace = IDLE_EVENT_GRACE_MS.min(idle_timeout_ms);
            tokio::time::sleep(Duration::from_millis(idle_timeout_ms + grace)).await
        } else {
            std::future::pending::<()>().await
        }
    };
    let next = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(StreamEnd::Aborted),
        n = events.next() => n,
        _ = idle => {
            return Err(StreamEnd::Failed(ProviderError::Timeout {
                message: format!("{STREAM_IDLE_MESSAGE}{idle_timeout_ms} ms"),
            }))
        }
    };
    match next {
        None => Err(StreamEnd::Finished),
        Some(Err(EventStreamError::Transport(e))) if e.is_timeout() => {
            Err(StreamEnd::Failed(ProviderError::Timeout {
                message: BODY_TIMEOUT_MESSAGE.to_owned(),
            }))
        }
        Some(Err(EventStreamError::Transport(e))) => {
            Err(StreamEnd::Failed(ProviderError::Disconnected {
                message: super::body_broken_message(&e).to_owned(),
            }))
        }
        Some(Err(e)) => Err(StreamEnd::Failed(ProviderError::Protocol {
            message: e.to_string(),
        })),
        Some(Ok(event)) => Ok(event),
    }
}
