//! Context → model messages and token estimates (spec sessions.md §9.4, agent-loop.md §10).

use pi_ai::{now_ms, Content, ImageContent, Message, StopReason, UserContent, UserMessage};
use serde_json::Value;

/// A user message in the array form RPC prompts use: one text block, then the images.
pub fn user_message(text: String, images: Vec<ImageContent>) -> Message {
    let mut content = vec![Content::text(text)];
    content.extend(images.into_iter().map(Content::Image));
    Message::User(UserMessage {
        content: UserContent::Blocks(content),
        timestamp: now_ms(),
        extra: Default::default(),
    })
}

/// Context → model messages (spec sessions.md §9.4): system messages dropped, bash executions
/// and custom/summary messages become user messages.
pub fn convert_to_llm(messages: &[Message]) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        match m {
            Message::System(_) => {}
            Message::User(_) | Message::Assistant(_) | Message::ToolResult(_) => {
                out.push(m.clone())
            }
            Message::BashExecution(b) => {
                if b.exclude_from_context == Some(true) {
                    continue;
                }
                let mut text = format!("Ran `{}`\n", b.command);
                if b.output.is_empty() {
                    text.push_str("(no output)");
                } else {
                    text.push_str(&format!("```\n{}\n```", b.output));
                }
                if b.cancelled {
                    text.push_str("\n\n(command cancelled)");
                } else if let Some(code) = b.exit_code.filter(|c| *c != 0) {
                    text.push_str(&format!("\n\nCommand exited with code {code}"));
                }
                if b.truncated {
                    if let Some(p) = &b.full_output_path {
                        text.push_str(&format!("\n\n[Output truncated. Full output: {p}]"));
                    }
                }
                out.push(Message::User(UserMessage {
                    content: UserContent::Blocks(vec![Content::text(text)]),
                    timestamp: b.timestamp,
                    extra: Default::default(),
                }));
            }
            Message::Other(map) => {
                let role = map.get("role").and_then(Value::as_str).unwrap_or("");
                let ts = map.get("timestamp").and_then(Value::as_i64).unwrap_or(0);
                let content = match role {
                    "custom" => map
                        .get("content")
                        .and_then(|c| serde_json::from_value::<UserContent>(c.clone()).ok())
                        .map(|c| c.to_blocks()),
                    "compactionSummary" => map.get("summary").and_then(Value::as_str).map(|s| {
                        vec![Content::text(format!(
                            "Earlier turns of this conversation were condensed into the summary below; it stands in for them.\n\n<summary>\n{s}\n</summary>"
                        ))]
                    }),
                    "branchSummary" => map.get("summary").and_then(Value::as_str).map(|s| {
                        vec![Content::text(format!(
                            "This conversation came back from another branch; what was done there is condensed below.\n\n<summary>\n{s}</summary>"
                        ))]
                    }),
                    _ => None,
                };
                if let Some(content) = content {
                    out.push(Message::User(UserMessage {
                        content: UserContent::Blocks(content),
                        timestamp: ts,
                        extra: Default::default(),
                    }));
                }
            }
        }
    }
    out
}

fn utf16_len(s: &str) -> u64 {
    s.encode_utf16().count() as u64
}

fn blocks_chars(blocks: &[Content]) -> u64 {
    blocks
        .iter()
        .map(|b| match b {
            Content::Text(t) => utf16_len(&t.text),
            Content::Image(_) => 4800,
            Content::Thinking(t) => utf16_len(&t.thinking),
            Content::ToolCall(c) => utf16_len(&c.name) + utf16_len(&c.arguments.to_string()),
        })
        .sum()
}

/// `estimateTokens(message)` = ⌈characters / 4⌉ (spec agent-loop.md §10.1); characters are
/// UTF-16 code units as in JavaScript.
pub fn estimate_tokens(message: &Message) -> u64 {
    let chars = match message {
        Message::User(u) => match &u.content {
            UserContent::Text(t) => utf16_len(t),
            UserContent::Blocks(b) => blocks_chars(b),
        },
        Message::Assistant(a) => blocks_chars(&a.content),
        Message::ToolResult(t) => blocks_chars(&t.content),
        Message::BashExecution(b) => utf16_len(&b.command) + utf16_len(&b.output),
        Message::System(sys) => {
            let content = match &sys.content {
                UserContent::Text(t) => utf16_len(t),
                UserContent::Blocks(b) => blocks_chars(b),
            };
            let sections: u64 = sys
                .sections
                .iter()
                .flat_map(|m| m.values())
                .filter_map(Value::as_str)
                .map(utf16_len)
                .sum();
            let tools = sys
                .tools_added
                .as_ref()
                .map(|t| utf16_len(&Value::Array(t.clone()).to_string()))
                .unwrap_or(0);
            content + sections + tools
        }
        Message::Other(m) => {
            if let Some(s) = m.get("summary").and_then(Value::as_str) {
                utf16_len(s)
            } else {
                match m.get("content") {
                    Some(Value::String(s)) => utf16_len(s),
                    Some(c) => serde_json::from_value::<Vec<Content>>(c.clone())
                        .map(|b| blocks_chars(&b))
                        .unwrap_or(0),
                    None => 0,
                }
            }
        }
    };
    chars.div_ceil(4)
}

/// `estimateContextTokens(messages)` (spec agent-loop.md §10.2): the last successful
/// assistant usage plus estimates of everything after it, else estimates of everything.
pub fn context_tokens(messages: &[Message]) -> u64 {
    let last = messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| match m {
            Message::Assistant(a)
                if !matches!(a.stop_reason, StopReason::Aborted | StopReason::Error)
                    && a.usage.total_tokens > 0 =>
            {
                Some((i, a.usage.total_tokens))
            }
            _ => None,
        });
    match last {
        Some((i, total)) => total + messages[i + 1..].iter().map(estimate_tokens).sum::<u64>(),
        None => messages.iter().map(estimate_tokens).sum(),
    }
}
