//! File operations seen in the summarized messages (spec agent-loop.md §8.7; upstream 1.6
//! docs/compaction.md "Cumulative File Tracking").

use pi_ai::Message;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// Paths read, written and edited, as the model wrote them (never resolved).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOps {
    /// Paths passed to `read`.
    pub read: BTreeSet<String>,
    /// Paths passed to `write`.
    pub written: BTreeSet<String>,
    /// Paths passed to `edit` (and a previous summary's `modifiedFiles`).
    pub edited: BTreeSet<String>,
}

impl FileOps {
    /// Adds the `read`/`write`/`edit` tool calls whose `arguments.path` is a non-empty
    /// string: those of an assistant message, and those a tool result's `nestedCalls` records
    /// (a codemode script's calls; upstream 1.6 `extractFileOpsFromMessage`); other messages
    /// add nothing.
    pub fn add_message(&mut self, message: &Message) {
        match message {
            Message::Assistant(a) => {
                for call in a.tool_calls() {
                    self.add_call(&call.name, &call.arguments);
                }
            }
            Message::ToolResult(r) => {
                for call in r.nested_calls.iter().flat_map(|n| &n.calls) {
                    if let Some(args) = &call.arguments {
                        self.add_call(&call.name, args);
                    }
                }
            }
            _ => {}
        }
    }

    fn add_call(&mut self, name: &str, arguments: &Value) {
        let Some(path) = arguments.get("path").and_then(Value::as_str) else {
            return;
        };
        if path.is_empty() {
            return;
        }
        let set = match name {
            "read" => &mut self.read,
            "write" => &mut self.written,
            "edit" => &mut self.edited,
            _ => return,
        };
        set.insert(path.to_string());
    }

    /// Carries the lists of a previous pi-written summary's `details`
    /// (`readFiles` → read, `modifiedFiles` → edited).
    pub fn add_details(&mut self, details: &Value) {
        let strings = |key: &str| -> Vec<String> {
            details
                .get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        self.read.extend(strings("readFiles"));
        self.edited.extend(strings("modifiedFiles"));
    }

    /// `(readFiles, modifiedFiles)`: modified = edited ∪ written; read = read minus modified;
    /// both sorted by UTF-16 code units as JavaScript's default sort does.
    pub fn lists(&self) -> (Vec<String>, Vec<String>) {
        let modified: BTreeSet<&String> = self.edited.iter().chain(&self.written).collect();
        let mut read: Vec<String> = self
            .read
            .iter()
            .filter(|p| !modified.contains(p))
            .cloned()
            .collect();
        let mut modified: Vec<String> = modified.into_iter().cloned().collect();
        let key = |s: &String| s.encode_utf16().collect::<Vec<u16>>();
        read.sort_by_key(key);
        modified.sort_by_key(key);
        (read, modified)
    }

    /// The entry's `details`: `{readFiles, modifiedFiles}`.
    pub fn details(&self) -> Value {
        let (read, modified) = self.lists();
        json!({"readFiles": read, "modifiedFiles": modified})
    }

    /// The text appended to a summary: `\n\n<read-files>\n…\n</read-files>` and/or
    /// `<modified-files>…</modified-files>` (blank line between), or `""` when both are empty.
    pub fn summary_suffix(&self) -> String {
        let (read, modified) = self.lists();
        let mut sections = Vec::new();
        if !read.is_empty() {
            sections.push(format!("<read-files>\n{}\n</read-files>", read.join("\n")));
        }
        if !modified.is_empty() {
            sections.push(format!(
                "<modified-files>\n{}\n</modified-files>",
                modified.join("\n")
            ));
        }
        if sections.is_empty() {
            String::new()
        } else {
            format!("\n\n{}", sections.join("\n\n"))
        }
    }
}
