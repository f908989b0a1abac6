//! The event side of one response: turns decoded text, tool calls and the final token counts
//! into the [`AssistantMessageEvent`] sequence every provider emits (`Start`, then text blocks
//! `TextStart`, `TextDelta`…, `TextEnd` and tool-call blocks `ToolCallStart`,
//! `ToolCallDelta`…, `ToolCallEnd` in output order, then exactly one `Done` or `Error`).

use futures::channel::mpsc::{unbounded, UnboundedSender};
use pi_ai::{
    AssistantMessage, AssistantMessageEvent, AssistantStream, Content, Cost, Model, StopReason,
    ThinkingContent, ToolCall, Usage,
};
use serde_json::{Map, Value};
use std::time::Instant;

/// `errorMessage` of a cancelled request (same text as the hosted providers).
pub(crate) const ABORTED_MESSAGE: &str = "Request was aborted";

/// Token counts of one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TokenCounts {
    /// Prompt tokens evaluated for this response.
    pub evaluated: u64,
    /// Prompt tokens re-used from the KV cache of an earlier response.
    pub reused: u64,
    /// Tokens generated (end-of-generation token excluded).
    pub generated: u64,
}

impl TokenCounts {
    fn usage(self) -> Usage {
        Usage {
            input: self.evaluated,
            output: self.generated,
            cache_read: self.reused,
            cache_write: 0,
            total_tokens: self.evaluated + self.reused + self.generated,
            cost: Cost {
                total_from_provider: Some(false),
                ..Cost::default()
            },
            ..Usage::default()
        }
    }
}

/// The sending half of one response's event stream. Dropping it before [`Reply::finish`] or
/// [`Reply::fail`] (worker gone, panic) still ends the stream with an `Error` event.
pub(crate) struct Reply {
    tx: UnboundedSender<AssistantMessageEvent>,
    message: AssistantMessage,
    started: Instant,
    sent_start: bool,
    /// Index of the open text block in `message.content`.
    text_block: Option<usize>,
    /// Text of the open text block.
    text: String,
    /// Index of the open tool-call block in `message.content`.
    tool_block: Option<usize>,
    /// Argument JSON text streamed for the open tool-call block.
    tool_args: String,
    /// Tool calls completed (`ToolCallEnd` sent).
    tool_calls: usize,
    /// Index of the open thinking block in `message.content`.
    thinking_block: Option<usize>,
    /// Text of the open thinking block.
    thinking: String,
    /// Whether decoded text is currently inside `<think>…</think>`.
    in_think: bool,
    /// Decoded text held back because it may be the start of a reasoning tag.
    held: String,
    ended: bool,
}

/// Reasoning tags that models such as Qwen3, DeepSeek-R1 and SmolLM3 wrap their thinking in.
const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

/// Length of the longest suffix of `s` that is a proper prefix of `tag` (text that may still
/// become the tag once more is decoded).
fn partial_tag_len(s: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| {
            s.len() >= n && s.is_char_boundary(s.len() - n) && tag.starts_with(&s[s.len() - n..])
        })
        .unwrap_or(0)
}

impl Reply {
    /// A reply for `model` and the stream its events go to.
    pub(crate) fn channel(model: &Model) -> (Reply, AssistantStream) {
        let (tx, rx) = unbounded();
        let reply = Reply {
            tx,
            message: AssistantMessage::empty(model),
            started: Instant::now(),
            sent_start: false,
            text_block: None,
            text: String::new(),
            tool_block: None,
            tool_args: String::new(),
            tool_calls: 0,
            thinking_block: None,
            thinking: String::new(),
            in_think: false,
            held: String::new(),
            ended: false,
        };
        (reply, Box::pin(rx))
    }

    /// Whether the consumer has dropped the stream (nothing more is worth computing).
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    fn emit(&self, event: AssistantMessageEvent) -> bool {
        self.tx.unbounded_send(event).is_ok()
    }

    /// Emit `Start` (once): the request was accepted.
    pub(crate) fn start(&mut self) {
        if !self.sent_start {
            self.sent_start = true;
            self.emit(AssistantMessageEvent::Start {
                partial: Box::new(self.message.clone()),
            });
        }
    }

    /// Append decoded text. Text inside `<think>…</think>` becomes a thinking block
    /// (`ThinkingStart`/`ThinkingDelta`/`ThinkingEnd`), the rest text blocks; a piece that may
    /// be the start of a tag is held back until the next piece decides it. Returns `false`
    /// when the consumer is gone.
    pub(crate) fn text(&mut self, delta: &str) -> bool {
        let mut buf = std::mem::take(&mut self.held);
        buf.push_str(delta);
        let mut ok = !self.is_closed();
        loop {
            let tag = if self.in_think {
                THINK_CLOSE
            } else {
                THINK_OPEN
            };
            if let Some(pos) = buf.find(tag) {
                let before = buf[..pos].to_owned();
                ok &= self.route(&before);
                if self.in_think {
                    self.end_thinking_block();
                }
                self.in_think = !self.in_think;
                buf.drain(..pos + tag.len());
                continue;
            }
            let keep = partial_tag_len(&buf, tag);
            let emit = buf[..buf.len() - keep].to_owned();
            self.held = buf[buf.len() - keep..].to_owned();
            ok &= self.route(&emit);
            return ok;
        }
    }

    /// Emit held-back text that turned out not to be a tag (at the end of the response).
    fn flush_held(&mut self) {
        let held = std::mem::take(&mut self.held);
        self.route(&held);
    }

    fn route(&mut self, delta: &str) -> bool {
        if self.in_think {
            self.thinking_text(delta)
        } else {
            self.plain_text(delta)
        }
    }

    /// Append reasoning text, opening a thinking block when none is open.
    fn thinking_text(&mut self, delta: &str) -> bool {
        if delta.is_empty() {
            return !self.is_closed();
        }
        self.start();
        self.end_tool_block();
        self.end_text_block();
        let index = match self.thinking_block {
            Some(i) => i,
            None => {
                let i = self.message.content.len();
                self.message
                    .content
                    .push(Content::Thinking(ThinkingContent {
                        thinking: String::new(),
                        thinking_signature: None,
                        redacted: None,
                        extra: Default::default(),
                    }));
                self.thinking_block = Some(i);
                self.emit(AssistantMessageEvent::ThinkingStart { content_index: i });
                i
            }
        };
        self.thinking.push_str(delta);
        self.emit(AssistantMessageEvent::ThinkingDelta {
            content_index: index,
            delta: delta.to_owned(),
        })
    }

    /// Close the open thinking block (`ThinkingEnd`), if any.
    fn end_thinking_block(&mut self) {
        if let Some(i) = self.thinking_block.take() {
            let content = std::mem::take(&mut self.thinking);
            if let Some(block) = self.message.content.get_mut(i) {
                *block = Content::Thinking(ThinkingContent {
                    thinking: content.clone(),
                    thinking_signature: None,
                    redacted: None,
                    extra: Default::default(),
                });
            }
            self.emit(AssistantMessageEvent::ThinkingEnd {
                content_index: i,
                content,
            });
        }
    }

    /// Append answer text, opening a text block when none is open.
    fn plain_text(&mut self, delta: &str) -> bool {
        if delta.is_empty() {
            return !self.is_closed();
        }
        self.start();
        self.end_thinking_block();
        self.end_tool_block();
        let index = match self.text_block {
            Some(i) => i,
            None => {
                let i = self.message.content.len();
                self.message.content.push(Content::text(""));
                self.text_block = Some(i);
                self.emit(AssistantMessageEvent::TextStart { content_index: i });
                i
            }
        };
        self.text.push_str(delta);
        self.emit(AssistantMessageEvent::TextDelta {
            content_index: index,
            delta: delta.to_owned(),
        })
    }

    /// Open a tool-call block (`ToolCallStart`), closing an open text block first. Returns
    /// `false` when the consumer is gone.
    pub(crate) fn tool_call_start(&mut self, id: String, name: &str) -> bool {
        self.start();
        self.flush_held();
        self.end_thinking_block();
        self.end_text_block();
        self.end_tool_block();
        let index = self.message.content.len();
        self.message.content.push(Content::ToolCall(ToolCall {
            id: id.clone(),
            name: name.to_owned(),
            arguments: Value::Object(Map::new()),
            thought_signature: None,
            extra: Default::default(),
        }));
        self.tool_block = Some(index);
        self.tool_args.clear();
        self.emit(AssistantMessageEvent::ToolCallStart {
            content_index: index,
            id,
            tool_name: name.to_owned(),
        })
    }

    /// More argument JSON text for the open tool-call block (`ToolCallDelta`). Returns `false`
    /// when the consumer is gone.
    pub(crate) fn tool_call_delta(&mut self, delta: &str) -> bool {
        let Some(index) = self.tool_block else {
            return !self.is_closed();
        };
        if delta.is_empty() {
            return !self.is_closed();
        }
        self.tool_args.push_str(delta);
        self.emit(AssistantMessageEvent::ToolCallDelta {
            content_index: index,
            delta: delta.to_owned(),
        })
    }

    /// Complete the open tool-call block with its final name and parsed arguments
    /// (`ToolCallEnd`). Returns `false` when the consumer is gone or no block is open.
    pub(crate) fn tool_call_end(&mut self, name: &str, arguments: Value) -> bool {
        let Some(index) = self.tool_block.take() else {
            return false;
        };
        let Some(Content::ToolCall(call)) = self.message.content.get_mut(index) else {
            return false;
        };
        call.name = name.to_owned();
        call.arguments = arguments;
        let tool_call = call.clone();
        self.tool_calls += 1;
        self.tool_args.clear();
        self.emit(AssistantMessageEvent::ToolCallEnd {
            content_index: index,
            tool_call,
        })
    }

    /// Close the open text block (`TextEnd`), if any.
    fn end_text_block(&mut self) {
        self.sync_text();
        if let Some(i) = self.text_block.take() {
            let content = std::mem::take(&mut self.text);
            self.emit(AssistantMessageEvent::TextEnd {
                content_index: i,
                content,
            });
        }
    }

    /// Close an open tool-call block that never got its `ToolCallEnd`: its arguments are the
    /// streamed text when that parses as an object, else `{}`.
    fn end_tool_block(&mut self) {
        if let Some(Content::ToolCall(call)) =
            self.tool_block.and_then(|i| self.message.content.get(i))
        {
            let name = call.name.clone();
            let arguments = serde_json::from_str::<Value>(&self.tool_args)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| Value::Object(Map::new()));
            self.tool_call_end(&name, arguments);
        }
        self.tool_block = None;
    }

    /// Copy the streamed reasoning into the message's open thinking block.
    fn sync_thinking(&mut self) {
        if let Some(i) = self.thinking_block {
            if let Some(Content::Thinking(t)) = self.message.content.get_mut(i) {
                t.thinking = self.thinking.clone();
            }
        }
    }

    /// Copy the streamed text into the message's text block.
    fn sync_text(&mut self) {
        if let Some(i) = self.text_block {
            if let Some(block) = self.message.content.get_mut(i) {
                *block = Content::text(self.text.clone());
            }
        }
    }

    fn stamp(&mut self) {
        self.message.duration_ms =
            Some(u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX));
    }

    /// End normally: closes the open block (`TextEnd` / `ToolCallEnd`) and emits `Done` with
    /// `reason` and the usage of `counts` (cost zero). `Stop` becomes `ToolUse` when the
    /// message has tool calls.
    pub(crate) fn finish(mut self, reason: StopReason, counts: TokenCounts) {
        self.start();
        self.flush_held();
        self.end_thinking_block();
        self.end_text_block();
        self.end_tool_block();
        let reason = if reason == StopReason::Stop && self.tool_calls > 0 {
            StopReason::ToolUse
        } else {
            reason
        };
        self.message.stop_reason = reason;
        self.message.usage = counts.usage();
        self.stamp();
        self.ended = true;
        let message = Box::new(self.message.clone());
        self.emit(AssistantMessageEvent::Done { reason, message });
    }

    /// End with `Error` (`stopReason: "error"`, or `"aborted"` with `aborted`) and
    /// `errorMessage: text`; text streamed so far stays in the message.
    pub(crate) fn fail(self, aborted: bool, text: impl Into<String>) {
        self.fail_with(aborted, text.into(), None);
    }

    /// Like [`Reply::fail`] but also reports the tokens processed before the failure.
    pub(crate) fn fail_counted(self, aborted: bool, text: impl Into<String>, counts: TokenCounts) {
        self.fail_with(aborted, text.into(), Some(counts));
    }

    /// The request was cancelled: `Error { reason: Aborted }`, "Request was aborted".
    pub(crate) fn aborted(self, counts: Option<TokenCounts>) {
        self.fail_with(true, ABORTED_MESSAGE.to_owned(), counts);
    }

    fn fail_with(mut self, aborted: bool, text: String, counts: Option<TokenCounts>) {
        self.flush_held();
        self.sync_text();
        self.sync_thinking();
        let reason = if aborted {
            StopReason::Aborted
        } else {
            StopReason::Error
        };
        self.message.stop_reason = reason;
        self.message.error_message = Some(text);
        if let Some(c) = counts {
            self.message.usage = c.usage();
        }
        self.stamp();
        self.ended = true;
        let message = Box::new(self.message.clone());
        self.emit(AssistantMessageEvent::Error { reason, message });
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if !self.ended {
            self.ended = true;
            self.sync_text();
            self.message.stop_reason = StopReason::Error;
            self.message.error_message =
                Some("The local model worker stopped before finishing the response".into());
            self.stamp();
            let message = Box::new(self.message.clone());
            self.emit(AssistantMessageEvent::Error {
                reason: StopReason::Error,
                message,
            });
        }
    }
}

/// Incremental UTF-8 decoding of token pieces: a multi-byte character split across tokens is
/// held back until complete; invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub(crate) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Add bytes; returns the text that is complete so far.
    pub(crate) fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // `valid` bytes are UTF-8 by the error's contract.
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match e.error_len() {
                        // Incomplete sequence at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push('\u{FFFD}');
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Whatever is left (an incomplete sequence at the end of generation), lossily.
    pub(crate) fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn model() -> Model {
        let mut m = Model::unknown();
        m.api = crate::API.into();
        m.provider = crate::PROVIDER.into();
        m.id = "m".into();
        m
    }

    fn kinds(events: &[AssistantMessageEvent]) -> Vec<&'static str> {
        events
            .iter()
            .map(|e| match e {
                AssistantMessageEvent::Start { .. } => "start",
                AssistantMessageEvent::TextStart { .. } => "text_start",
                AssistantMessageEvent::TextDelta { .. } => "text_delta",
                AssistantMessageEvent::TextEnd { .. } => "text_end",
                AssistantMessageEvent::ToolCallStart { .. } => "toolcall_start",
                AssistantMessageEvent::ToolCallDelta { .. } => "toolcall_delta",
                AssistantMessageEvent::ToolCallEnd { .. } => "toolcall_end",
                AssistantMessageEvent::ThinkingStart { .. } => "thinking_start",
                AssistantMessageEvent::ThinkingDelta { .. } => "thinking_delta",
                AssistantMessageEvent::ThinkingEnd { .. } => "thinking_end",
                AssistantMessageEvent::Usage { .. } => "usage",
                AssistantMessageEvent::Done { .. } => "done",
                AssistantMessageEvent::Error { .. } => "error",
            })
            .collect()
    }

    #[test]
    fn full_sequence() {
        let (mut r, s) = Reply::channel(&model());
        r.start();
        assert!(r.text("Hel"));
        assert!(r.text("lo"));
        r.finish(
            StopReason::Stop,
            TokenCounts {
                evaluated: 10,
                reused: 2,
                generated: 3,
            },
        );
        let events: Vec<_> = futures::executor::block_on(s.collect());
        assert_eq!(
            kinds(&events),
            [
                "start",
                "text_start",
                "text_delta",
                "text_delta",
                "text_end",
                "done"
            ]
        );
        match events.last() {
            Some(AssistantMessageEvent::Done { message, .. }) => {
                assert_eq!(message.text(), "Hello");
                assert_eq!(message.usage.input, 10);
                assert_eq!(message.usage.cache_read, 2);
                assert_eq!(message.usage.output, 3);
                assert_eq!(message.usage.total_tokens, 15);
                assert_eq!(message.usage.cost.total, 0.0);
                assert_eq!(message.stop_reason, StopReason::Stop);
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn text_then_tool_call() {
        let (mut r, s) = Reply::channel(&model());
        assert!(r.text("Looking."));
        assert!(r.tool_call_start("call_local_1".into(), "ls"));
        assert!(r.tool_call_delta("{\"path\":"));
        assert!(r.tool_call_delta(" \".\"}"));
        assert!(r.tool_call_end("ls", serde_json::json!({"path": "."})));
        r.finish(StopReason::Stop, TokenCounts::default());
        let events: Vec<_> = futures::executor::block_on(s.collect());
        assert_eq!(
            kinds(&events),
            [
                "start",
                "text_start",
                "text_delta",
                "text_end",
                "toolcall_start",
                "toolcall_delta",
                "toolcall_delta",
                "toolcall_end",
                "done"
            ]
        );
        match &events[4] {
            AssistantMessageEvent::ToolCallStart {
                content_index,
                id,
                tool_name,
            } => {
                assert_eq!(
                    (*content_index, id.as_str(), tool_name.as_str()),
                    (1, "call_local_1", "ls")
                );
            }
            e => panic!("{e:?}"),
        }
        match events.last() {
            Some(AssistantMessageEvent::Done { reason, message }) => {
                assert_eq!(*reason, StopReason::ToolUse);
                assert_eq!(message.stop_reason, StopReason::ToolUse);
                assert_eq!(message.text(), "Looking.");
                let calls: Vec<_> = message.tool_calls().collect();
                assert_eq!(calls.len(), 1);
                assert_eq!(calls[0].id, "call_local_1");
                assert_eq!(calls[0].arguments["path"], ".");
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn length_keeps_length_with_tool_calls() {
        let (mut r, s) = Reply::channel(&model());
        r.tool_call_start("call_local_1".into(), "ls");
        r.tool_call_delta("{\"pa");
        r.finish(StopReason::Length, TokenCounts::default());
        let events: Vec<_> = futures::executor::block_on(s.collect());
        assert_eq!(
            kinds(&events),
            [
                "start",
                "toolcall_start",
                "toolcall_delta",
                "toolcall_end",
                "done"
            ]
        );
        match events.last() {
            Some(AssistantMessageEvent::Done { reason, message }) => {
                assert_eq!(*reason, StopReason::Length);
                assert_eq!(
                    message.tool_calls().next().unwrap().arguments,
                    serde_json::json!({})
                );
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn abort_keeps_text() {
        let (mut r, s) = Reply::channel(&model());
        r.text("a");
        r.aborted(None);
        let events: Vec<_> = futures::executor::block_on(s.collect());
        assert_eq!(
            kinds(&events),
            ["start", "text_start", "text_delta", "error"]
        );
        match events.last() {
            Some(AssistantMessageEvent::Error { reason, message }) => {
                assert_eq!(*reason, StopReason::Aborted);
                assert_eq!(message.error_message.as_deref(), Some(ABORTED_MESSAGE));
                assert_eq!(message.text(), "a");
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn drop_ends_with_error() {
        let (r, s) = Reply::channel(&model());
        drop(r);
        let events: Vec<_> = futures::executor::block_on(s.collect());
        assert_eq!(kinds(&events), ["error"]);
    }

    #[test]
    fn think_tags_become_a_thinking_block_even_when_split_across_pieces() {
        let (mut reply, stream) = Reply::channel(&model());
        for piece in [
            "<thi",
            "nk>Let me ",
            "see.</th",
            "ink>\n",
            "Hello <b",
            "> there",
        ] {
            assert!(reply.text(piece));
        }
        reply.finish(StopReason::Stop, TokenCounts::default());
        let events: Vec<_> = futures::executor::block_on(stream.collect());
        let thinking: String = events
            .iter()
            .filter_map(|e| match e {
                AssistantMessageEvent::ThinkingDelta { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(thinking, "Let me see.");
        let Some(AssistantMessageEvent::Done { message, .. }) = events.last() else {
            panic!("no Done: {events:?}");
        };
        match &message.content[..] {
            [Content::Thinking(t), Content::Text(x)] => {
                assert_eq!(t.thinking, "Let me see.");
                assert_eq!(x.text, "\nHello <b> there");
            }
            other => panic!("unexpected content {other:?}"),
        }
        let order: Vec<&str> = kinds(&events)
            .into_iter()
            .filter(|k| k.ends_with("_start") || k.ends_with("_end"))
            .collect();
        assert_eq!(
            order,
            ["thinking_start", "thinking_end", "text_start", "text_end"]
        );
    }

    #[test]
    fn utf8_split() {
        let mut u = Utf8Stream::default();
        let e = "é".as_bytes();
        assert_eq!(u.push(b"a"), "a");
        assert_eq!(u.push(&e[..1]), "");
        assert_eq!(u.push(&e[1..]), "é");
        assert_eq!(u.push(&[0xff, b'b']), "\u{FFFD}b");
        assert_eq!(u.push(&e[..1]), "");
        assert_eq!(u.finish(), "\u{FFFD}");
    }

    #[test]
    fn closed_detected() {
        let (mut r, s) = Reply::channel(&model());
        drop(s);
        assert!(r.is_closed());
        assert!(!r.text("x"));
        r.aborted(None);
    }
}
