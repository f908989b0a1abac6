//! Converting the conversation into Responses input items: tool-call ids, images, text item
//! ids, tool results, and assistant messages.

use super::request::Compat;
use crate::providers::common;
use crate::providers::common::compact;
use crate::transform::transform_messages;
use crate::types::{AssistantMessage, Content, Context, Message, Model, TextContent, UserContent};
use serde_json::{json, Map, Value};

/// `part` with every character outside `[A-Za-z0-9_-]` replaced by `_`, cut to 64 characters
/// and without trailing `_` (upstream `normalizeIdPart`).
pub(super) fn normalize_id_part(part: &str) -> String {
    let s: String = part
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    s.trim_end_matches('_').to_owned()
}

/// Tool-call id rewrite for calls made by another model: providers outside `allowed` or ids
/// without `|` get [`normalize_id_part`]; `call|item` ids keep both parts normalized, the
/// item part starting with `fc_`.
pub(super) fn normalize_tool_call_id(model: &Model, allowed: &[&str], id: &str) -> String {
    if !allowed.contains(&model.provider.as_str()) {
        return normalize_id_part(id);
    }
    let Some((call, item)) = id.split_once('|') else {
        return normalize_id_part(id);
    };
    let item = item.split('|').next().unwrap_or(item);
    let mut item_id = normalize_id_part(item);
    if !item_id.starts_with("fc_") {
        item_id = normalize_id_part(&format!("fc_{item_id}"));
    }
    format!("{}|{item_id}", normalize_id_part(call))
}

pub(super) fn input_image(mime: &str, data: &str) -> Value {
    json!({"type": "input_image", "detail": "auto", "image_url": format!("data:{mime};base64,{data}")})
}

/// The message id of a replayed text block: the id in its signature (`{"v":1,"id":…,
/// "phase"?}` or a legacy plain id), else `fallback`; with the phase when one was stored.
pub(super) fn text_item_id(t: &TextContent, fallback: String) -> (String, Option<String>) {
    let Some(sig) = t.text_signature.as_deref().filter(|s| !s.is_empty()) else {
        return (fallback, None);
    };
    let mut id = sig.to_owned();
    let mut phase = None;
    if sig.starts_with('{') {
        if let Ok(v) = serde_json::from_str::<Value>(sig) {
            if v.get("v").and_then(Value::as_i64) == Some(1) {
                if let Some(i) = v.get("id").and_then(Value::as_str) {
                    id = i.to_owned();
                    phase = v
                        .get("phase")
                        .and_then(Value::as_str)
                        .filter(|p| *p == "commentary" || *p == "final_answer")
                        .map(str::to_owned);
                }
            }
        }
    }
    if id.is_empty() {
        return (fallback, None);
    }
    if id.chars().count() > 64 {
        // Upstream hashes over-long ids; a stable cut keeps them within the limit.
        id = format!("msg_{}", &id.chars().rev().take(59).collect::<String>());
    }
    (id, phase)
}

/// Tool-result output: the joined text (or a placeholder), or `input_text`/`input_image`
/// parts when the result has images and the model takes them.
pub(super) fn tool_result_output(model: &Model, content: &[Content]) -> Value {
    let text = common::joined_text(content, "\n");
    let images: Vec<_> = content
        .iter()
        .filter_map(|c| match c {
            Content::Image(i) => Some(i),
            _ => None,
        })
        .collect();
    let has_text = !text.trim().is_empty();
    if images.is_empty() || !model.supports_images() {
        let s = if has_text {
            text
        } else if !images.is_empty() {
            "(see attached image)".to_owned()
        } else {
            "(no tool output)".to_owned()
        };
        return json!(s);
    }
    let mut parts = Vec::new();
    if has_text {
        parts.push(json!({"type": "input_text", "text": text}));
    }
    for img in images {
        parts.push(input_image(&img.mime_type, &img.data));
    }
    Value::Array(parts)
}

/// The `input` items for `context` (see the module docs). `allowed` lists the providers whose
/// `call|item` ids keep their item part when replayed from another model.
pub(crate) fn convert_input(
    model: &Model,
    context: &Context,
    compat: &Compat,
    allowed: &[&str],
) -> Vec<Value> {
    let normalize = |id: &str| normalize_tool_call_id(model, allowed, id);
    let messages = transform_messages(&context.messages, model, Some(&normalize));
    let mut out = Vec::new();
    let role = if model.reasoning && compat.supports_developer_role {
        "developer"
    } else {
        "system"
    };
    if !context.system_prompt.is_empty() {
        out.push(json!({"role": role, "content": context.system_prompt}));
    }
    let mut msg_index = 0usize;
    for msg in &messages {
        match msg {
            Message::System(_) => {}
            Message::User(u) => {
                let content: Vec<Value> = match &u.content {
                    UserContent::Text(s) => vec![json!({"type": "input_text", "text": s})],
                    UserContent::Blocks(blocks) => blocks
                        .iter()
                        .filter_map(|b| match b {
                            Content::Text(t) => Some(json!({"type": "input_text", "text": t.text})),
                            Content::Image(i) => Some(input_image(&i.mime_type, &i.data)),
                            _ => None,
                        })
                        .collect(),
                };
                if content.is_empty() {
                    continue;
                }
                out.push(json!({"role": "user", "content": content}));
            }
            Message::Assistant(a) => {
                let items = convert_assistant(model, a, msg_index);
                if items.is_empty() {
                    continue;
                }
                out.extend(items);
            }
            Message::ToolResult(tr) => {
                let call_id = tr.tool_call_id.split('|').next().unwrap_or("");
                out.push(json!({"type": "function_call_output", "call_id": call_id,
                                "output": tool_result_output(model, &tr.content)}));
            }
            _ => {}
        }
        msg_index += 1;
    }
    out
}

pub(super) fn convert_assistant(
    model: &Model,
    a: &AssistantMessage,
    msg_index: usize,
) -> Vec<Value> {
    let same_api = a.provider == model.provider && a.api == model.api;
    let different_model = same_api && a.model != model.id;
    let mut out = Vec::new();
    let mut text_index = 0usize;
    for block in &a.content {
        match block {
            Content::Thinking(t) => {
                if let Some(item) = t
                    .thinking_signature
                    .as_deref()
                    .and_then(|s| serde_json::from_str::<Value>(s).ok())
                    .filter(Value::is_object)
                {
                    out.push(item);
                }
            }
            Content::Text(t) => {
                let fallback = if text_index == 0 {
                    format!("msg_pi_{msg_index}")
                } else {
                    format!("msg_pi_{msg_index}_{text_index}")
                };
                text_index += 1;
                let (id, phase) = text_item_id(t, fallback);
                let mut item = Map::new();
                item.insert("type".into(), json!("message"));
                item.insert("role".into(), json!("assistant"));
                item.insert(
                    "content".into(),
                    json!([{"type": "output_text", "text": t.text, "annotations": []}]),
                );
                item.insert("status".into(), json!("completed"));
                item.insert("id".into(), json!(id));
                if let Some(p) = phase {
                    item.insert("phase".into(), json!(p));
                }
                out.push(Value::Object(item));
            }
            Content::ToolCall(tc) => {
                let mut parts = tc.id.split('|');
                let call_id = parts.next().unwrap_or("");
                let item_id = parts
                    .next()
                    .filter(|i| !different_model && i.starts_with("fc_"));
                let mut item = Map::new();
                item.insert("type".into(), json!("function_call"));
                if let Some(i) = item_id {
                    item.insert("id".into(), json!(i));
                }
                item.insert("call_id".into(), json!(call_id));
                item.insert("name".into(), json!(tc.name));
                item.insert("arguments".into(), json!(compact(&tc.arguments)));
                out.push(Value::Object(item));
            }
            Content::Image(_) => {}
        }
    }
    out
}
