//! Converting the conversation into Chat Completions messages (user images, tool results,
//! assistant messages).

use super::request::{normalize_tool_call_id, Compat};
use crate::providers::common::{compact, joined_text};
use crate::transform::transform_messages;
use crate::types::{
    AssistantMessage, Content, Context, Message, Model, ThinkingContent, ToolCall, UserContent,
};
use serde_json::{json, Map, Value};

pub(super) fn image_url(mime: &str, data: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}})
}

pub(super) fn convert_messages(model: &Model, context: &Context, compat: &Compat) -> Vec<Value> {
    let normalize = |id: &str| normalize_tool_call_id(model, id);
    let messages = transform_messages(&context.messages, model, Some(&normalize));
    let mut out = Vec::new();

    if !context.system_prompt.is_empty() {
        let role = if model.reasoning && compat.supports_developer_role {
            "developer"
        } else {
            "system"
        };
        out.push(json!({"role": role, "content": context.system_prompt}));
    }

    let mut last_role: Option<&'static str> = None;
    let mut i = 0;
    while i < messages.len() {
        let msg = &messages[i];
        if compat.requires_assistant_after_tool_result
            && last_role == Some("toolResult")
            && matches!(msg, Message::User(_))
        {
            out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
        }
        match msg {
            Message::User(u) => {
                match &u.content {
                    UserContent::Text(s) => out.push(json!({"role": "user", "content": s})),
                    UserContent::Blocks(blocks) => {
                        let parts: Vec<Value> = blocks
                            .iter()
                            .filter_map(|b| match b {
                                Content::Text(t) => Some(json!({"type": "text", "text": t.text})),
                                Content::Image(img) => Some(image_url(&img.mime_type, &img.data)),
                                _ => None,
                            })
                            .collect();
                        if parts.is_empty() {
                            i += 1;
                            continue;
                        }
                        out.push(json!({"role": "user", "content": parts}));
                    }
                }
                last_role = Some("user");
            }
            Message::Assistant(a) => {
                if let Some(v) = convert_assistant(model, a, compat) {
                    out.push(v);
                }
                last_role = Some("assistant");
            }
            Message::ToolResult(_) => {
                let mut images = Vec::new();
                let mut j = i;
                while let Some(Message::ToolResult(tr)) = messages.get(j) {
                    let text = joined_text(&tr.content, "\n");
                    let has_images = tr.content.iter().any(|c| matches!(c, Content::Image(_)));
                    let content = if text.is_empty() {
                        "(see attached image)".to_owned()
                    } else {
                        text
                    };
                    let mut m = Map::new();
                    m.insert("role".into(), json!("tool"));
                    m.insert("content".into(), json!(content));
                    m.insert("tool_call_id".into(), json!(tr.tool_call_id));
                    if compat.requires_tool_result_name && !tr.tool_name.is_empty() {
                        m.insert("name".into(), json!(tr.tool_name));
                    }
                    out.push(Value::Object(m));
                    if has_images && model.supports_images() {
                        for c in &tr.content {
                            if let Content::Image(img) = c {
                                images.push(image_url(&img.mime_type, &img.data));
                            }
                        }
                    }
                    j += 1;
                }
                i = j;
                if images.is_empty() {
                    last_role = Some("toolResult");
                } else {
                    if compat.requires_assistant_after_tool_result {
                        out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
                    }
                    let mut parts = vec![
                        json!({"type": "text", "text": "Attached image(s) from tool result:"}),
                    ];
                    parts.extend(images);
                    out.push(json!({"role": "user", "content": parts}));
                    last_role = Some("user");
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

pub(super) fn convert_assistant(
    model: &Model,
    a: &AssistantMessage,
    compat: &Compat,
) -> Option<Value> {
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    let empty_content = if compat.requires_assistant_after_tool_result {
        json!("")
    } else {
        Value::Null
    };
    m.insert("content".into(), empty_content);

    let texts: Vec<&str> = a
        .content
        .iter()
        .filter_map(Content::as_text)
        .filter(|t| !t.trim().is_empty())
        .collect();
    let text: String = texts.concat();
    let thinking: Vec<&ThinkingContent> = a
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Thinking(t) if !t.thinking.trim().is_empty() => Some(t),
            _ => None,
        })
        .collect();

    if !thinking.is_empty() && compat.requires_thinking_as_text {
        let joined = thinking
            .iter()
            .map(|t| t.thinking.as_str())
            .collect::<Vec<_>>()
            .join("\n\n");
        let mut parts = vec![json!({"type": "text", "text": joined})];
        parts.extend(texts.iter().map(|t| json!({"type": "text", "text": t})));
        m.insert("content".into(), Value::Array(parts));
    } else {
        if !text.is_empty() {
            m.insert("content".into(), json!(text));
        }
        if let Some(first) = thinking.first() {
            let mut field = first.thinking_signature.clone().unwrap_or_default();
            if model.provider == "opencode-go" && field == "reasoning" {
                field = "reasoning_content".into();
            }
            if !field.is_empty() {
                let joined = thinking
                    .iter()
                    .map(|t| t.thinking.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
                m.insert(field, json!(joined));
            }
        }
    }

    let calls: Vec<&ToolCall> = a.tool_calls().collect();
    if !calls.is_empty() {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|tc| {
                json!({
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": compact(&tc.arguments)},
                })
            })
            .collect();
        m.insert("tool_calls".into(), Value::Array(tool_calls));
        let details: Vec<Value> = calls
            .iter()
            .filter_map(|tc| tc.thought_signature.as_deref())
            .filter_map(|s| serde_json::from_str::<Value>(s).ok())
            .filter(|v| !v.is_null())
            .collect();
        if !details.is_empty() {
            m.insert("reasoning_details".into(), Value::Array(details));
        }
    }
    if compat.requires_reasoning_content_on_assistant && !m.contains_key("reasoning_content") {
        m.insert("reasoning_content".into(), json!(""));
    }

    let has_content = match m.get("content") {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        _ => false,
    };
    if !has_content && !m.contains_key("tool_calls") {
        return None;
    }
    Some(Value::Object(m))
}
