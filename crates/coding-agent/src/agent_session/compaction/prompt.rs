//! The conversation as text for a summarization request, and our summarization prompts
//! (spec agent-loop.md §8.6; upstream 1.6 docs/compaction.md "Message Serialization",
//! "Summary Format"). The wording is ours; the structure (section names, the
//! `<conversation>` / `<previous-summary>` / `# Conversation` … `# Instructions` wrappers) is
//! what upstream sends, so summaries stay interchangeable and the conformance masks apply.

use pi_ai::{Content, Message, UserContent};

/// Tool results longer than this (UTF-16 code units) are cut in the serialized conversation.
pub const TOOL_RESULT_MAX_CHARS: usize = 2000;

/// System prompt of every summarization request.
pub const SYSTEM_PROMPT: &str = "You write context checkpoints. You are given the transcript \
of a working session between a user and an AI assistant and you turn it into a structured \
summary in the format you are asked for.\n\nThe transcript is material to summarize, not a \
conversation you take part in: do not answer its questions, do not carry on its work. Reply \
with the summary and nothing else.";

const FORMAT: &str = "## Goal
[What the user wants to achieve; list several goals if the session moved between tasks.]

## Constraints & Preferences
- [Requirements, limits and preferences the user stated]
- [Write \"(none)\" when there were none]

## Progress
### Done
- [x] [Finished tasks and changes]

### In Progress
- [ ] [Work under way]

### Blocked
- [What stops progress, if anything]

## Key Decisions
- **[Decision]**: [Short reason]

## Next Steps
1. [What to do next, in order]

## Critical Context
- [Data, examples or references needed to go on]
- [Write \"(none)\" when nothing is needed]

Stay brief in every section. Copy file paths, function names and error messages exactly.";

/// Instructions for a first summary (no previous summary).
pub fn initial_instructions() -> String {
    format!(
        "Summarize the conversation above as a checkpoint another model will use to pick up \
the work where it stopped.\n\nFollow this format exactly:\n\n{FORMAT}"
    )
}

/// Instructions when a previous summary exists: merge the new messages into it.
pub fn update_instructions() -> String {
    format!(
        "The conversation above holds messages that came after the summary in \
<previous-summary>. Produce the updated summary:\n\
- keep everything the previous summary says unless it no longer matters\n\
- add the new progress, decisions and context\n\
- move finished items from \"In Progress\" to \"Done\"\n\
- rewrite \"Next Steps\" for the current state\n\
- copy file paths, function names and error messages exactly\n\n\
Follow this format exactly:\n\n{FORMAT}"
    )
}

/// Instructions for the early part of a turn that is split by the cut point.
pub const TURN_PREFIX_INSTRUCTIONS: &str = "The conversation above is the first part of a \
turn that is still going on; its later messages are kept verbatim elsewhere and must not be \
reconstructed here.\n\nWrite a short checkpoint of what the user asked for and what happened \
in this part, so the kept messages still make sense after it:\n\n## Original Request\n[The \
user's request]\n\n## Early Progress\n- [Decisions made and work done in these messages]\n\n\
## Context for Suffix\n- [What the later messages rely on from this part]\n\nUse only what \
the messages above say; do not guess at what came later.";

/// Separator between the history summary and the split turn's prefix summary.
pub const SPLIT_TURN_SEPARATOR: &str = "\n\n---\n\n**Earlier part of the current turn:**\n\n";

/// History summary used when a split turn has nothing before it.
pub const NO_HISTORY: &str = "Nothing happened before this turn.";

fn text_of(blocks: &[Content], sep: &str) -> String {
    blocks
        .iter()
        .filter_map(Content::as_text)
        .collect::<Vec<_>>()
        .join(sep)
}

fn user_text(content: &UserContent) -> String {
    match content {
        UserContent::Text(s) => s.clone(),
        UserContent::Blocks(b) => text_of(b, ""),
    }
}

/// The first `max` UTF-16 code units of `s`, never splitting a surrogate pair, plus a marker
/// with the number of code units left out.
fn truncate(s: &str, max: usize) -> String {
    let total = s.encode_utf16().count();
    if total <= max {
        return s.to_string();
    }
    let mut units = 0;
    let mut end = 0;
    for (i, c) in s.char_indices() {
        if units + c.len_utf16() > max {
            break;
        }
        units += c.len_utf16();
        end = i + c.len_utf8();
    }
    format!(
        "{}\n\n[... {} more characters truncated]",
        &s[..end],
        total - max
    )
}

/// The model-visible messages (after `convert_to_llm`) as text: `[User]: …`,
/// `[Assistant]: …`, `[Assistant tool calls]: name(k=<JSON>, …); …`, `[Tool result]: …`
/// (cut at [`TOOL_RESULT_MAX_CHARS`]), blank lines between. Thinking and images are left out.
pub fn serialize_conversation(messages: &[Message]) -> String {
    let mut parts = Vec::new();
    for m in messages {
        match m {
            Message::User(u) => {
                let text = user_text(&u.content);
                if !text.is_empty() {
                    parts.push(format!("[User]: {text}"));
                }
            }
            Message::Assistant(a) => {
                if a.content.iter().any(|c| matches!(c, Content::Text(_))) {
                    parts.push(format!("[Assistant]: {}", text_of(&a.content, "\n")));
                }
                let calls: Vec<String> = a
                    .tool_calls()
                    .map(|c| {
                        let args = match &c.arguments {
                            serde_json::Value::Object(map) => map
                                .iter()
                                .map(|(k, v)| format!("{k}={v}"))
                                .collect::<Vec<_>>()
                                .join(", "),
                            _ => String::new(),
                        };
                        format!("{}({args})", c.name)
                    })
                    .collect();
                if !calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            Message::ToolResult(t) => {
                let text = text_of(&t.content, "");
                if !text.is_empty() {
                    parts.push(format!(
                        "[Tool result]: {}",
                        truncate(&text, TOOL_RESULT_MAX_CHARS)
                    ));
                }
            }
            _ => {}
        }
    }
    parts.join("\n\n")
}

/// The user text of a history summarization request:
/// `<conversation>\n…\n</conversation>\n\n[<previous-summary>\n…\n</previous-summary>\n\n]`
/// + instructions [+ `\n\nAlso focus on: <custom>`].
pub fn history_request(conversation: &str, previous: Option<&str>, custom: Option<&str>) -> String {
    let mut text = format!("<conversation>\n{conversation}\n</conversation>\n\n");
    let instructions = match previous {
        Some(prev) => {
            text.push_str(&format!(
                "<previous-summary>\n{prev}\n</previous-summary>\n\n"
            ));
            update_instructions()
        }
        None => initial_instructions(),
    };
    text.push_str(&instructions);
    if let Some(c) = custom {
        text.push_str(&format!("\n\nAlso focus on: {c}"));
    }
    text
}

/// The user text of a turn-prefix request: `# Conversation\n…\n\n# Instructions\n…`.
pub fn turn_prefix_request(conversation: &str, custom: Option<&str>) -> String {
    let mut text =
        format!("# Conversation\n{conversation}\n\n# Instructions\n{TURN_PREFIX_INSTRUCTIONS}");
    if let Some(c) = custom {
        text.push_str(&format!("\n\nAlso focus on: {c}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_by_utf16_units() {
        let s = "a".repeat(2005);
        let t = truncate(&s, 2000);
        assert!(t.ends_with("[... 5 more characters truncated]"));
        assert_eq!(
            truncate("😀😀", 3),
            "😀\n\n[... 1 more characters truncated]"
        );
    }
}
