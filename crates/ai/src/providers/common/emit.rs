//! The event channel behind an [`AssistantStream`] ([`event_stream`], [`Emitter`]) and the
//! content-block start/end events and usage totals the adapters emit.

use super::ABORTED_MESSAGE;
use crate::error::ProviderError;
use crate::stream::{AssistantMessageEvent, AssistantStream};
use crate::types::{AssistantMessage, Content, Model, StopReason, Usage};
use futures::channel::mpsc::{unbounded, UnboundedSender};
use futures::StreamExt;
use std::future::Future;
use std::time::Instant;

/// Sends events into the stream returned by [`event_stream`]. Send failures (consumer gone)
/// are ignored.
pub(crate) struct Emitter {
    tx: UnboundedSender<AssistantMessageEvent>,
}

impl Emitter {
    /// Push one event.
    pub(crate) fn emit(&self, event: AssistantMessageEvent) {
        let _ = self.tx.unbounded_send(event);
    }

    /// Push `Usage` with the usage known so far.
    pub(crate) fn usage(&self, usage: &Usage) {
        self.emit(AssistantMessageEvent::Usage {
            usage: usage.clone(),
        });
    }

    /// Push `Start` with a snapshot of the (empty) partial message.
    pub(crate) fn start(&self, partial: &AssistantMessage) {
        self.emit(AssistantMessageEvent::Start {
            partial: Box::new(partial.clone()),
        });
    }

    /// Finish successfully: stamp `durationMs` and push `Done`.
    pub(crate) fn done(&self, mut message: AssistantMessage, started: Instant) {
        message.duration_ms = Some(elapsed_ms(started));
        self.emit(AssistantMessageEvent::Done {
            reason: message.stop_reason,
            message: Box::new(message),
        });
    }

    /// Finish with a failure: `stopReason` becomes `aborted` for [`ProviderError::Aborted`]
    /// else `error`, `errorMessage` is the error's text and [`AssistantMessage::error`] the
    /// error itself; content streamed so far is kept.
    pub(crate) fn fail(
        &self,
        mut message: AssistantMessage,
        error: ProviderError,
        started: Instant,
    ) {
        message.stop_reason = if error.is_aborted() {
            StopReason::Aborted
        } else {
            StopReason::Error
        };
        message.error_message = Some(error.to_string());
        message.error = Some(Box::new(error));
        message.duration_ms = Some(elapsed_ms(started));
        self.emit(AssistantMessageEvent::Error {
            reason: message.stop_reason,
            message: Box::new(message),
        });
    }
}

/// [`ProviderError::Aborted`] with [`ABORTED_MESSAGE`].
pub(crate) fn aborted() -> ProviderError {
    ProviderError::Aborted {
        message: ABORTED_MESSAGE.to_owned(),
    }
}

pub(super) fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Build an [`AssistantStream`] driven by `producer`. The producer runs only while the stream
/// is polled (no task is spawned, so calling this never needs a runtime) and is dropped, which
/// cancels its HTTP request, when the consumer drops the stream.
pub(crate) fn event_stream<F, Fut>(producer: F) -> AssistantStream
where
    F: FnOnce(Emitter) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = unbounded();
    let driver = futures::stream::once(producer(Emitter { tx }))
        .filter_map(|()| futures::future::ready(None::<AssistantMessageEvent>));
    Box::pin(futures::stream::select(rx, driver))
}

/// The `*_start` event announcing `block` at `content_index` (`text_start`, `thinking_start`,
/// or `toolcall_start` with the call's id and name); `None` for images, which are never
/// streamed.
pub(crate) fn start_event(content_index: usize, block: &Content) -> Option<AssistantMessageEvent> {
    Some(match block {
        Content::Text(_) => AssistantMessageEvent::TextStart { content_index },
        Content::Thinking(_) => AssistantMessageEvent::ThinkingStart { content_index },
        Content::ToolCall(tc) => AssistantMessageEvent::ToolCallStart {
            content_index,
            id: tc.id.clone(),
            tool_name: tc.name.clone(),
        },
        Content::Image(_) => return None,
    })
}

/// The `*_end` event closing `block` at `content_index`, carrying the block's final text,
/// thinking, or tool call; `None` for images.
pub(crate) fn end_event(content_index: usize, block: &Content) -> Option<AssistantMessageEvent> {
    Some(match block {
        Content::Text(t) => AssistantMessageEvent::TextEnd {
            content_index,
            content: t.text.clone(),
        },
        Content::Thinking(t) => AssistantMessageEvent::ThinkingEnd {
            content_index,
            content: t.thinking.clone(),
        },
        Content::ToolCall(tc) => AssistantMessageEvent::ToolCallEnd {
            content_index,
            tool_call: tc.clone(),
        },
        Content::Image(_) => return None,
    })
}

/// Append `block` to `out.content`, emit its `*_start` event (see [`start_event`]) and return
/// its content index.
pub(crate) fn push_block(out: &mut AssistantMessage, em: &Emitter, block: Content) -> usize {
    let content_index = out.content.len();
    let start = start_event(content_index, &block);
    out.content.push(block);
    if let Some(event) = start {
        em.emit(event);
    }
    content_index
}

/// Finish usage counters read from the wire: `totalTokens` = input + output + cacheRead +
/// cacheWrite (tokens), `cost.totalFromProvider` = `false` unless already set, and the cost
/// (USD) recomputed from `model.cost` (per million tokens).
pub(crate) fn finish_usage(usage: &mut Usage, model: &Model) {
    usage.total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write;
    if usage.cost.total_from_provider.is_none() {
        usage.cost.total_from_provider = Some(false);
    }
    usage.compute_cost(&model.cost);
}
