//! pi's session events → ACP `session/update` notifications (ACP v1 schema of the
//! `agent-client-protocol` SDK), and a stored branch → the same updates for `session/load`.
//!
//! What maps to what:
//! * `message_update` `text_delta` → `agent_message_chunk`, `thinking_delta` →
//!   `agent_thought_chunk`;
//! * `tool_execution_start` → `tool_call` (status `in_progress`; kind from the tool name,
//!   [`tool_kind`]; title [`tool_title`]; locations for `read`/`edit`/`write`, for an `edit`
//!   with the 1-based line of its first `oldText` that occurs exactly once in the file as it is
//!   when the call starts ([`unique_line`], as the `pi-acp` adapter does); `rawInput` = the
//!   arguments);
//! * `tool_execution_update` → `tool_call_update` with the output so far (text);
//! * `tool_execution_end` → `tool_call_update` (`completed`/`failed`): for a successful `edit`
//!   or `write` an ACP diff `{path, oldText, newText}` (the file as it was when the call started
//!   and as it is now), else the result's text blocks;
//! * `compaction_start`/`compaction_end`, `auto_retry_start`/`auto_retry_end` → a short
//!   `agent_message_chunk` note;
//! * everything else has no ACP form and is not sent.

use crate::protocol::rpc::{MessageUpdateEvent, RpcEvent};
use crate::tools::util::resolve_to_cwd;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, ImageContent, SessionUpdate, TextContent, ToolCall,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind,
};
use pi_ai::{Content, Message};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The ACP kind of a pi tool, by name: `read` → read; `edit`/`write` → edit; `bash` → execute;
/// `grep`/`find`/`ls` and the MCP tool search → search; names with `fetch`/`web` → fetch; anything
/// else (extension and MCP tools, codemode) → other.
pub fn tool_kind(name: &str) -> ToolKind {
    match name {
        "read" => ToolKind::Read,
        "edit" | "write" => ToolKind::Edit,
        "bash" => ToolKind::Execute,
        "grep" | "find" | "ls" | "tool_search" => ToolKind::Search,
        n if n.contains("fetch") || n.contains("web") => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

/// A one-line title for a tool call: the tool and its main argument (`read src/a.rs`,
/// `bash: ls -la`, `grep TODO`); the bare name when there is none.
pub fn tool_title(name: &str, args: &Value) -> String {
    let arg = |k: &str| args.get(k).and_then(Value::as_str);
    let detail = match name {
        "read" | "edit" | "write" | "ls" => arg("path"),
        "bash" => arg("command"),
        "grep" | "find" => arg("pattern"),
        _ => None,
    };
    match detail {
        Some(d) if name == "bash" => format!("bash: {}", first_line(d)),
        Some(d) => format!("{name} {}", first_line(d)),
        None => name.to_string(),
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// The file a `read`/`edit`/`write` call names, resolved against `cwd` as the tools resolve it.
fn file_of(name: &str, args: &Value, cwd: &Path) -> Option<PathBuf> {
    if !matches!(name, "read" | "edit" | "write") {
        return None;
    }
    let path = args.get("path").and_then(Value::as_str)?;
    Some(resolve_to_cwd(path, cwd))
}

/// The 1-based line where `needle` starts in `text`, when it occurs there exactly once (matches
/// counted without overlap, as `pi-acp` 0.0.34 counts them); `None` for an empty needle, none or
/// several matches.
pub fn unique_line(text: &str, needle: &str) -> Option<u32> {
    if needle.is_empty() {
        return None;
    }
    let first = text.find(needle)?;
    if text[first + needle.len()..].contains(needle) {
        return None;
    }
    let newlines = text.as_bytes()[..first]
        .iter()
        .filter(|b| **b == b'\n')
        .count();
    u32::try_from(newlines + 1).ok()
}

/// The `oldText`s of an `edit` call's arguments, in order, after the edit tool's own
/// normalisation of the older shapes ([`crate::tools::edit::prepare_edit_arguments`]: `edits`
/// as a JSON string, a top-level `oldText`/`newText` pair).
fn edit_old_texts(args: &Value) -> Vec<String> {
    let prepared = crate::tools::edit::prepare_edit_arguments(args.clone());
    prepared
        .get("edits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| e.get("oldText").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// The line an `edit` call starts at in `before` (the file when the call starts): that of its
/// first `oldText` with a unique match ([`unique_line`]).
fn edit_line(args: &Value, before: &str) -> Option<u32> {
    edit_old_texts(args)
        .iter()
        .find_map(|needle| unique_line(before, needle))
}

/// The text blocks of a tool result (images as ACP image content), as `tool_call_update`
/// content.
fn result_content(content: &[Content]) -> Vec<ToolCallContent> {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text(t) => Some(ContentBlock::Text(TextContent::new(t.text.clone()))),
            Content::Image(i) => Some(ContentBlock::Image(ImageContent::new(
                i.data.clone(),
                i.mime_type.clone(),
            ))),
            _ => None,
        })
        .map(ToolCallContent::from)
        .collect()
}

fn text_chunk(text: impl Into<String>) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text.into())))
}

/// What a `tool_call` needs: id, title, kind, status, locations (with `line` when known) and the
/// raw arguments.
fn tool_call(
    id: &str,
    name: &str,
    args: &Value,
    cwd: &Path,
    status: ToolCallStatus,
    line: Option<u32>,
) -> ToolCall {
    let mut call = ToolCall::new(id.to_string(), tool_title(name, args))
        .kind(tool_kind(name))
        .status(status)
        .raw_input(args.clone());
    if let Some(path) = file_of(name, args, cwd) {
        call = call.locations(vec![ToolCallLocation::new(path).line(line)]);
    }
    call
}

/// A file-changing call in flight: where it writes and what the file held when it started.
struct Pending {
    path: PathBuf,
    old_text: Option<String>,
}

/// Maps one session's events (module doc). Keeps the file contents of `edit`/`write` calls in
/// flight, so their end can carry the diff.
pub struct Mapper {
    cwd: PathBuf,
    pending: HashMap<String, Pending>,
}

impl Mapper {
    /// A mapper for a session whose tools run in `cwd`.
    pub fn new(cwd: &Path) -> Self {
        Mapper {
            cwd: cwd.to_path_buf(),
            pending: HashMap::new(),
        }
    }

    /// The updates `ev` becomes (none for events with no ACP form). Called in event order,
    /// before the tool runs for a `tool_execution_start` (the file is read then).
    pub fn map(&mut self, ev: &RpcEvent) -> Vec<SessionUpdate> {
        match ev {
            RpcEvent::MessageUpdate {
                assistant_message_event,
                ..
            } => match assistant_message_event {
                MessageUpdateEvent::TextDelta { delta, .. } => {
                    vec![SessionUpdate::AgentMessageChunk(text_chunk(delta.clone()))]
                }
                MessageUpdateEvent::ThinkingDelta { delta, .. } => {
                    vec![SessionUpdate::AgentThoughtChunk(text_chunk(delta.clone()))]
                }
                _ => vec![],
            },
            RpcEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
                ..
            } => {
                let mut line = None;
                if matches!(tool_name.as_str(), "edit" | "write") {
                    if let Some(path) = file_of(tool_name, args, &self.cwd) {
                        let old_text = std::fs::read_to_string(&path).ok();
                        if tool_name == "edit" {
                            line = old_text.as_deref().and_then(|t| edit_line(args, t));
                        }
                        self.pending
                            .insert(tool_call_id.clone(), Pending { path, old_text });
                    }
                }
                let call = tool_call(
                    tool_call_id,
                    tool_name,
                    args,
                    &self.cwd,
                    ToolCallStatus::InProgress,
                    line,
                );
                vec![SessionUpdate::ToolCall(call)]
            }
            RpcEvent::ToolExecutionUpdate {
                tool_call_id,
                partial_result,
                ..
            } => {
                let fields =
                    ToolCallUpdateFields::new().content(result_content(&partial_result.content));
                vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    tool_call_id.clone(),
                    fields,
                ))]
            }
            RpcEvent::ToolExecutionEnd {
                tool_call_id,
                result,
                is_error,
                ..
            } => vec![self.tool_end(tool_call_id, &result.content, *is_error)],
            other => note(other)
                .map(text_chunk)
                .map(SessionUpdate::AgentMessageChunk)
                .into_iter()
                .collect(),
        }
    }

    /// The final `tool_call_update` of a call: a diff for a successful `edit`/`write`, else the
    /// result's content.
    fn tool_end(&mut self, id: &str, content: &[Content], is_error: bool) -> SessionUpdate {
        let status = if is_error {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        let pending = self.pending.remove(id);
        let diff = match pending {
            Some(p) if !is_error => std::fs::read_to_string(&p.path).ok().map(|new_text| {
                ToolCallContent::Diff(Diff::new(p.path.clone(), new_text).old_text(p.old_text))
            }),
            _ => None,
        };
        let content = match diff {
            Some(d) => vec![d],
            None => result_content(content),
        };
        let fields = ToolCallUpdateFields::new().status(status).content(content);
        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id.to_string(), fields))
    }
}

/// The note an automatic compaction or retry becomes (as an agent message, so the user sees why
/// the turn paused); `None` for every other event.
fn note(ev: &RpcEvent) -> Option<String> {
    Some(match ev {
        RpcEvent::CompactionStart { reason } => {
            format!("\n[compacting the context ({reason:?})…]\n").to_lowercase()
        }
        RpcEvent::CompactionEnd {
            error_message: Some(e),
            ..
        } => format!("\n[compaction failed: {e}]\n"),
        RpcEvent::CompactionEnd { aborted: false, .. } => "\n[context compacted]\n".into(),
        RpcEvent::AutoRetryStart {
            attempt,
            max_attempts,
            delay_ms,
            error_message,
        } => format!("\n[retrying ({attempt}/{max_attempts}) in {delay_ms} ms: {error_message}]\n"),
        RpcEvent::AutoRetryEnd {
            success: false,
            final_error: Some(e),
            ..
        } => format!("\n[retry failed: {e}]\n"),
        _ => return None,
    })
}

/// The updates that replay a stored transcript (`session/load`): user text and images →
/// `user_message_chunk`; assistant text → `agent_message_chunk`, thinking →
/// `agent_thought_chunk` (empty blocks left out), tool calls → `tool_call` (pending until their
/// result); tool results →
/// `tool_call_update` (`completed`/`failed`, the result's content). System messages are not
/// replayed.
pub fn replay(messages: &[Message], cwd: &Path) -> Vec<SessionUpdate> {
    let mut out = Vec::new();
    for m in messages {
        match m {
            Message::User(u) => {
                for block in u.content.to_blocks() {
                    let c = match block {
                        Content::Text(t) => ContentBlock::Text(TextContent::new(t.text)),
                        Content::Image(i) => {
                            ContentBlock::Image(ImageContent::new(i.data, i.mime_type))
                        }
                        _ => continue,
                    };
                    out.push(SessionUpdate::UserMessageChunk(ContentChunk::new(c)));
                }
            }
            Message::Assistant(a) => {
                for block in &a.content {
                    match block {
                        Content::Text(t) if !t.text.is_empty() => {
                            out.push(SessionUpdate::AgentMessageChunk(text_chunk(t.text.clone())))
                        }
                        // Redacted or signature-only thinking has no text to show.
                        Content::Thinking(t) if !t.thinking.is_empty() => out.push(
                            SessionUpdate::AgentThoughtChunk(text_chunk(t.thinking.clone())),
                        ),
                        Content::Text(_) | Content::Thinking(_) => {}
                        Content::ToolCall(c) => out.push(SessionUpdate::ToolCall(tool_call(
                            &c.id,
                            &c.name,
                            &c.arguments,
                            cwd,
                            ToolCallStatus::Pending,
                            None,
                        ))),
                        Content::Image(_) => {}
                    }
                }
            }
            Message::ToolResult(r) => {
                let status = if r.is_error {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                };
                let fields = ToolCallUpdateFields::new()
                    .status(status)
                    .content(result_content(&r.content));
                out.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    r.tool_call_id.clone(),
                    fields,
                )));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_titles() {
        assert_eq!(tool_kind("read"), ToolKind::Read);
        assert_eq!(tool_kind("write"), ToolKind::Edit);
        assert_eq!(tool_kind("bash"), ToolKind::Execute);
        assert_eq!(tool_kind("grep"), ToolKind::Search);
        assert_eq!(tool_kind("web_fetch"), ToolKind::Fetch);
        assert_eq!(tool_kind("mcp__x__y"), ToolKind::Other);
        let args = serde_json::json!({"command": "ls -la\necho"});
        assert_eq!(tool_title("bash", &args), "bash: ls -la");
        assert_eq!(
            tool_title("read", &serde_json::json!({"path": "a.rs"})),
            "read a.rs"
        );
        assert_eq!(tool_title("custom", &Value::Null), "custom");
    }

    #[test]
    fn unique_line_of_an_old_text() {
        assert_eq!(unique_line("a\nb\nc\n", "b"), Some(2));
        assert_eq!(unique_line("a\nb\nc\n", "a\nb"), Some(1));
        assert_eq!(unique_line("x\nx\n", "x"), None);
        assert_eq!(unique_line("aaa", "aa"), Some(1));
        assert_eq!(unique_line("abc", "z"), None);
        assert_eq!(unique_line("abc", ""), None);
        let args = serde_json::json!({"edits": [{"oldText": "x"}, {"oldText": "y"}]});
        assert_eq!(edit_line(&args, "x\nx\ny\n"), Some(3));
        let args = serde_json::json!({"edits": "[{\"oldText\": \"y\"}]"});
        assert_eq!(edit_line(&args, "x\ny\n"), Some(2));
        let args = serde_json::json!({"oldText": "y", "newText": "z"});
        assert_eq!(edit_line(&args, "x\ny\n"), Some(2));
    }

    #[test]
    fn edit_end_carries_the_diff() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "old\n").unwrap();
        let mut m = Mapper::new(dir.path());
        let args = serde_json::json!({"path": "f.txt", "edits": []});
        let start = RpcEvent::ToolExecutionStart {
            tool_call_id: "c1".into(),
            tool_name: "edit".into(),
            args,
            parent_tool_call_id: None,
        };
        let ups = m.map(&start);
        assert!(matches!(&ups[..], [SessionUpdate::ToolCall(c)] if c.locations.len() == 1));
        std::fs::write(dir.path().join("f.txt"), "new\n").unwrap();
        let end = RpcEvent::ToolExecutionEnd {
            tool_call_id: "c1".into(),
            tool_name: "edit".into(),
            result: pi_agent::ToolOutput::default(),
            is_error: false,
            duration_ms: None,
            parent_tool_call_id: None,
        };
        let ups = m.map(&end);
        let [SessionUpdate::ToolCallUpdate(u)] = &ups[..] else {
            panic!("{ups:?}")
        };
        let Some([ToolCallContent::Diff(d)]) = u.fields.content.as_deref() else {
            panic!("{u:?}")
        };
        assert_eq!(d.old_text.as_deref(), Some("old\n"));
        assert_eq!(d.new_text, "new\n");
    }
}
