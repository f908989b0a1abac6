//! Provider-neutral normalisation of the context before it is converted to a wire format
//! (upstream `packages/ai/src/providers/transform-messages.ts`; spec agent-loop.md §2.3 point 3).

use crate::types::{
    AssistantMessage, Content, Message, Model, TextContent, ToolCall, ToolResultMessage,
};
use std::collections::{HashMap, HashSet};

/// Text of the synthetic result inserted for a tool call that never got one.
pub const NO_RESULT_TEXT: &str = "No result provided";

/// Text that replaces the images of a user message for a model without image input
/// (upstream 1.6 `transform-messages.ts`).
pub const USER_IMAGE_PLACEHOLDER: &str = "(image omitted: model does not support images)";

/// Text that replaces the images of a tool result for a model without image input
/// (upstream 1.6 `transform-messages.ts`).
pub const TOOL_IMAGE_PLACEHOLDER: &str = "(tool image omitted: model does not support images)";

/// `content` with each run of consecutive images replaced by one text block `placeholder`
/// (a placeholder already in front of an image absorbs it); `None` when there is no image.
fn replace_images(content: &[Content], placeholder: &str) -> Option<Vec<Content>> {
    if !content.iter().any(|c| matches!(c, Content::Image(_))) {
        return None;
    }
    let mut out: Vec<Content> = Vec::with_capacity(content.len());
    for block in content {
        match block {
            Content::Image(_) => {
                if out.last().and_then(Content::as_text) != Some(placeholder) {
                    out.push(Content::text(placeholder));
                }
            }
            other => out.push(other.clone()),
        }
    }
    Some(out)
}

/// For a model whose `input` lacks `"image"`, user and tool-result images become
/// placeholders ([`USER_IMAGE_PLACEHOLDER`], [`TOOL_IMAGE_PLACEHOLDER`]); `None` when nothing
/// changes.
fn downgrade_image(msg: &Message, model: &Model) -> Option<Message> {
    if model.supports_images() {
        return None;
    }
    match msg {
        Message::User(u) => match &u.content {
            crate::types::UserContent::Blocks(b) => {
                let content = replace_images(b, USER_IMAGE_PLACEHOLDER)?;
                let mut u = u.clone();
                u.content = crate::types::UserContent::Blocks(content);
                Some(Message::User(u))
            }
            crate::types::UserContent::Text(_) => None,
        },
        Message::ToolResult(tr) => {
            let content = replace_images(&tr.content, TOOL_IMAGE_PLACEHOLDER)?;
            let mut tr = tr.clone();
            tr.content = content;
            Some(Message::ToolResult(tr))
        }
        _ => None,
    }
}

/// Whether `msg` was produced by exactly `model` (same provider, api and id).
pub fn is_same_model(msg: &AssistantMessage, model: &Model) -> bool {
    msg.provider == model.provider && msg.api == model.api && msg.model == model.id
}

/// Normalise `messages` for a request to `model`:
///
/// 0. For a model without image input, images become placeholders (see
///    [`USER_IMAGE_PLACEHOLDER`], [`TOOL_IMAGE_PLACEHOLDER`]).
/// 1. Assistant messages from another provider/api/model: thinking is dropped (upstream 1.6),
///    text signatures and tool-call
///    `thoughtSignature`s are stripped and tool-call ids go through `normalize_id` (the same
///    mapping is applied to the matching tool results). Same-model messages are untouched.
/// 2. Assistant messages with `stopReason` `error` or `aborted` are dropped.
/// 3. Tool calls without a result before the next assistant or user message get a synthetic
///    error result with the text [`NO_RESULT_TEXT`] (trailing unanswered calls are left alone).
///
/// Roles other than user/assistant/toolResult pass through unchanged.
pub fn transform_messages(
    messages: &[Message],
    model: &Model,
    normalize_id: Option<&dyn Fn(&str) -> String>,
) -> Vec<Message> {
    let mut id_map: HashMap<String, String> = HashMap::new();
    let mut transformed = Vec::with_capacity(messages.len());
    for msg in messages {
        let downgraded = downgrade_image(msg, model);
        let msg = downgraded.as_ref().unwrap_or(msg);
        match msg {
            Message::ToolResult(tr) => match id_map.get(&tr.tool_call_id) {
                Some(new_id) if *new_id != tr.tool_call_id => {
                    let mut tr = tr.clone();
                    tr.tool_call_id = new_id.clone();
                    transformed.push(Message::ToolResult(tr));
                }
                _ => transformed.push(msg.clone()),
            },
            Message::Assistant(am) if !is_same_model(am, model) => {
                let mut am = am.clone();
                am.content = am
                    .content
                    .into_iter()
                    .filter_map(|block| convert_foreign_block(block, normalize_id, &mut id_map))
                    .collect();
                transformed.push(Message::Assistant(am));
            }
            _ => transformed.push(msg.clone()),
        }
    }

    let mut result = Vec::with_capacity(transformed.len());
    let mut pending: Vec<ToolCall> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    for msg in transformed {
        match &msg {
            Message::Assistant(am) => {
                flush_orphans(&mut result, &mut pending, &mut answered);
                if matches!(
                    am.stop_reason,
                    crate::types::StopReason::Error | crate::types::StopReason::Aborted
                ) {
                    continue;
                }
                let calls: Vec<ToolCall> = am.tool_calls().cloned().collect();
                if !calls.is_empty() {
                    pending = calls;
                    answered.clear();
                }
                result.push(msg);
            }
            Message::ToolResult(tr) => {
                answered.insert(tr.tool_call_id.clone());
                result.push(msg);
            }
            Message::User(_) => {
                flush_orphans(&mut result, &mut pending, &mut answered);
                result.push(msg);
            }
            _ => result.push(msg),
        }
    }
    result
}

fn convert_foreign_block(
    block: Content,
    normalize_id: Option<&dyn Fn(&str) -> String>,
    id_map: &mut HashMap<String, String>,
) -> Option<Content> {
    match block {
        // Upstream 1.6 drops another model's thinking: its signatures are useless here, and
        // readable thinking sent as text would read as part of the visible reply (recording
        // `crates/coding-agent/tests/fixtures/providers/upstream/google.json`, request 6).
        Content::Thinking(_) => None,
        Content::Text(t) => Some(Content::Text(TextContent {
            text: t.text,
            text_signature: None,
            extra: Default::default(),
        })),
        Content::ToolCall(mut tc) => {
            tc.thought_signature = None;
            if let Some(normalize) = normalize_id {
                let new_id = normalize(&tc.id);
                if new_id != tc.id {
                    id_map.insert(tc.id.clone(), new_id.clone());
                    tc.id = new_id;
                }
            }
            Some(Content::ToolCall(tc))
        }
        other => Some(other),
    }
}

fn flush_orphans(
    result: &mut Vec<Message>,
    pending: &mut Vec<ToolCall>,
    answered: &mut HashSet<String>,
) {
    for tc in pending.drain(..) {
        if !answered.contains(&tc.id) {
            result.push(Message::ToolResult(ToolResultMessage {
                tool_call_id: tc.id.clone(),
                tool_name: tc.name.clone(),
                content: vec![Content::text(NO_RESULT_TEXT)],
                details: None,
                is_error: true,
                duration_ms: None,
                nested_calls: None,
                timestamp: crate::types::now_ms(),
                extra: Default::default(),
            }));
        }
    }
    answered.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{StopReason, ThinkingContent, UserContent, UserMessage};
    use serde_json::json;

    fn model(provider: &str, id: &str) -> Model {
        let mut m = Model::unknown();
        m.provider = provider.into();
        m.id = id.into();
        m.api = "anthropic-messages".into();
        m
    }

    fn assistant(m: &Model, content: Vec<Content>, stop: StopReason) -> Message {
        let mut a = AssistantMessage::empty(m);
        a.content = content;
        a.stop_reason = stop;
        Message::Assistant(a)
    }

    fn user(text: &str) -> Message {
        Message::User(UserMessage {
            content: UserContent::Text(text.into()),
            timestamp: 0,
            extra: Default::default(),
        })
    }

    fn call(id: &str) -> Content {
        Content::ToolCall(ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: json!({}),
            thought_signature: Some("sig".into()),
            extra: Default::default(),
        })
    }

    #[test]
    fn drops_failed_and_fills_orphans() {
        let m = model("anthropic", "claude");
        let msgs = vec![
            user("hi"),
            assistant(&m, vec![call("a")], StopReason::ToolUse),
            user("again"),
            assistant(&m, vec![Content::text("partial")], StopReason::Aborted),
            assistant(&m, vec![Content::text("x")], StopReason::Error),
        ];
        let out = transform_messages(&msgs, &m, None);
        assert_eq!(out.len(), 4);
        match &out[2] {
            Message::ToolResult(tr) => {
                assert_eq!(tr.tool_call_id, "a");
                assert!(tr.is_error);
                assert_eq!(tr.content[0].as_text(), Some(NO_RESULT_TEXT));
            }
            other => panic!("expected synthetic tool result, got {other:?}"),
        }
        assert!(matches!(out[3], Message::User(_)));
    }

    #[test]
    fn foreign_thinking_is_dropped_and_ids_are_mapped() {
        let other = model("openai", "gpt");
        let target = model("anthropic", "claude");
        let thinking = |s: &str, redacted| {
            Content::Thinking(ThinkingContent {
                thinking: s.into(),
                thinking_signature: Some("sig".into()),
                redacted,
                extra: Default::default(),
            })
        };
        let msgs = vec![
            assistant(
                &other,
                vec![
                    thinking("deep", None),
                    thinking("  ", None),
                    thinking("secret", Some(true)),
                    call("x|y"),
                ],
                StopReason::ToolUse,
            ),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "x|y".into(),
                tool_name: "bash".into(),
                content: vec![Content::text("ok")],
                details: None,
                is_error: false,
                duration_ms: None,
                nested_calls: None,
                timestamp: 0,
                extra: Default::default(),
            }),
        ];
        let norm = |id: &str| id.replace('|', "_");
        let out = transform_messages(&msgs, &target, Some(&norm));
        let Message::Assistant(a) = &out[0] else {
            panic!("assistant expected")
        };
        assert_eq!(a.content.len(), 1);
        let Content::ToolCall(tc) = &a.content[0] else {
            panic!("tool call expected")
        };
        assert_eq!(tc.id, "x_y");
        assert_eq!(tc.thought_signature, None);
        let Message::ToolResult(tr) = &out[1] else {
            panic!("tool result expected")
        };
        assert_eq!(tr.tool_call_id, "x_y");
    }
}
