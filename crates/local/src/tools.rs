//! Tool calls of local models.
//!
//! * The calling convention is Hermes/Qwen's (also SmolLM3's): one JSON object
//!   `{"name": …, "arguments": {…}}` inside a `<tool_call>…</tool_call>` block. The parser also
//!   accepts a JSON array of such objects inside one block (the format SmolLM2 was tuned on) and
//!   `"parameters"` for `"arguments"`.
//! * [`tool_section`] is the system-prompt section used when the model's chat template has no
//!   tool section of its own; [`call_instructions`] is its calling-convention part alone, for
//!   templates that list the tools but do not use `<tool_call>` blocks.
//! * [`grammar`] turns the tools' JSON schemas into a llama.cpp grammar (through llama.cpp's
//!   `json_schema_to_grammar`) for one `<tool_call>` block whose JSON names a real tool and
//!   whose arguments follow that tool's schema. The engine uses it lazily (triggered by
//!   [`OPEN`]) or, with [`ToolChoice::Required`], from the first token.
//! * [`CallParser`] splits the decoded text into text, tool-call starts, argument JSON
//!   fragments and finished calls, as the text streams in.

use pi_ai::{Model, ToolDefinition};
use serde_json::{json, Map, Value};

/// Opens a tool call in the model's output.
pub(crate) const OPEN: &str = "<tool_call>";
/// Closes a tool call in the model's output.
pub(crate) const CLOSE: &str = "</tool_call>";

/// Name of the grammar rule for exactly one `<tool_call>` block.
pub(crate) const ROOT_ONE: &str = "pi-tool-call";
/// Name of the grammar rule for one or more `<tool_call>` blocks (the lazy grammar).
pub(crate) const ROOT_MANY: &str = "pi-tool-calls";

/// Most tool calls the lazy grammar lets a model make in one response.
const MAX_CALLS: usize = 8;

/// Whether a response must call a tool: `compat.toolChoice` of the model in `models.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ToolChoice {
    /// The model answers in text or calls tools, as it likes (default; `"auto"`).
    #[default]
    Auto,
    /// The response is exactly one tool call, grammar-constrained from its first token
    /// (`"required"`; `"any"` is read the same way). Ignored when the request has no tools.
    Required,
}

impl ToolChoice {
    /// Reads `model.compat.toolChoice`; anything but `"required"`/`"any"` is [`ToolChoice::Auto`].
    pub(crate) fn of(model: &Model) -> ToolChoice {
        let value = model
            .compat
            .as_ref()
            .and_then(|c| c.get("toolChoice"))
            .and_then(Value::as_str)
            .map(str::trim);
        match value {
            Some(v) if v.eq_ignore_ascii_case("required") || v.eq_ignore_ascii_case("any") => {
                ToolChoice::Required
            }
            _ => ToolChoice::Auto,
        }
    }
}

/// How to call a tool, in our words: the part of [`tool_section`] after the tool list.
pub(crate) fn call_instructions(choice: ToolChoice) -> String {
    let when = match choice {
        ToolChoice::Auto => {
            "Call a tool only when you need it; otherwise answer in plain text. After a tool \
             call, stop: its result comes back in the next message."
        }
        ToolChoice::Required => "You must answer with exactly one tool call and nothing else.",
    };
    format!(
        "To call a tool, write a {OPEN} block holding one JSON object with the tool's name and \
         its arguments (an object matching the tool's parameters schema):\n\
         {OPEN}\n{{\"name\": \"tool_name\", \"arguments\": {{\"parameter\": \"value\"}}}}\n{CLOSE}\n\
         {when}"
    )
}

/// The system-prompt section listing the tools (one JSON object per line:
/// `{"name", "description", "parameters"}` with the JSON schema of the arguments) and saying
/// how to call one. Used when the chat template has no tool section.
pub(crate) fn tool_section(tools: &[ToolDefinition], choice: ToolChoice) -> String {
    let mut out = String::from(
        "# Tools\n\nYou can call the following tools. Each line between <tools> and </tools> \
         describes one tool: its name, what it does and the JSON schema of its arguments.\n<tools>\n",
    );
    for t in tools {
        let line = json!({
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out.push_str("</tools>\n\n");
    out.push_str(&call_instructions(choice));
    out.push_str(
        "\nTool results come back in the next user message, each inside          <tool_response></tool_response> tags.",
    );
    out
}

/// Chat-template messages for a template without a tool section: an assistant message's
/// `tool_calls` become `<tool_call>` blocks at the end of its text, and tool results become a
/// user message of `<tool_response>` blocks (`{"name", "content"}` JSON; consecutive results
/// share one message), so that the model sees the conversation in the convention it is told.
pub(crate) fn calls_as_text(messages: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(messages.len());
    let mut last_was_result = false;
    for mut m in messages {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        match role.as_str() {
            "assistant" => {
                last_was_result = false;
                let calls = m
                    .as_object_mut()
                    .and_then(|o| o.remove("tool_calls"))
                    .and_then(|c| match c {
                        Value::Array(a) => Some(a),
                        _ => None,
                    })
                    .unwrap_or_default();
                if calls.is_empty() {
                    out.push(m);
                    continue;
                }
                let mut text = m
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .trim_end()
                    .to_owned();
                for c in calls {
                    let f = &c["function"];
                    let call = json!({"name": f["name"], "arguments": f["arguments"]});
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&format!("{OPEN}\n{call}\n{CLOSE}"));
                }
                m["content"] = Value::String(text);
                out.push(m);
            }
            "tool" => {
                let block = format!(
                    "<tool_response>\n{}\n</tool_response>",
                    json!({"name": m["name"], "content": m["content"]})
                );
                match out.last_mut() {
                    Some(prev) if last_was_result => {
                        let text = format!("{}\n{block}", prev["content"].as_str().unwrap_or(""));
                        prev["content"] = Value::String(text);
                    }
                    _ => out.push(json!({"role": "user", "content": block})),
                }
                last_was_result = true;
            }
            _ => {
                last_was_result = false;
                out.push(m);
            }
        }
    }
    out
}

/// `system_prompt` followed by `section` (a blank line between them).
pub(crate) fn append_section(system_prompt: &str, section: &str) -> String {
    if system_prompt.trim().is_empty() {
        section.to_owned()
    } else {
        format!("{}\n\n{section}", system_prompt.trim_end())
    }
}

/// The JSON schema of one call's JSON object: `{"name": <a tool's name>, "arguments": <that
/// tool's parameters>}`, one alternative per tool. `loose` tools get `{"type": "object"}`
/// arguments (their own schema could not be converted).
fn call_schema(tools: &[ToolDefinition], loose: &[bool]) -> Value {
    let alternatives: Vec<Value> = tools
        .iter()
        .zip(loose)
        .map(|(t, &loose)| {
            let arguments = if loose {
                json!({"type": "object"})
            } else {
                arguments_schema(&t.parameters)
            };
            json!({
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": arguments},
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    match <[Value; 1]>::try_from(alternatives) {
        Ok([one]) => one,
        Err(many) => json!({ "oneOf": many }),
    }
}

/// A tool's parameters schema as the grammar uses it: a non-object schema becomes
/// `{"type": "object"}`, and an object schema with `properties` but no
/// `additionalProperties` gets `"additionalProperties": false` (so that a small model cannot
/// wander off into made-up keys).
fn arguments_schema(parameters: &Value) -> Value {
    let Some(obj) = parameters.as_object() else {
        return json!({"type": "object"});
    };
    let mut obj: Map<String, Value> = obj.clone();
    if obj.contains_key("properties") && !obj.contains_key("additionalProperties") {
        obj.insert("additionalProperties".into(), Value::Bool(false));
    }
    if !obj.contains_key("type") && !obj.contains_key("$ref") && !obj.contains_key("anyOf") {
        obj.insert("type".into(), json!("object"));
    }
    Value::Object(obj)
}

/// The llama.cpp grammar (GBNF) of tool calls for `tools`, with two entry rules: [`ROOT_ONE`]
/// (exactly one `<tool_call>` block) and [`ROOT_MANY`] (up to 8 blocks separated by
/// whitespace). A tool whose schema `json_schema_to_grammar` rejects is still callable, with
/// any JSON object as arguments.
///
/// # Errors
/// When there are no tools or the conversion fails even with loose schemas.
pub(crate) fn grammar(tools: &[ToolDefinition]) -> Result<String, String> {
    if tools.is_empty() {
        return Err("no tools".into());
    }
    let convert = |schema: &Value| {
        llama_cpp_2::json_schema_to_grammar(&schema.to_string()).map_err(|e| e.to_string())
    };
    let mut loose = vec![false; tools.len()];
    let body = match convert(&call_schema(tools, &loose)) {
        Ok(g) => g,
        Err(first) => {
            for (i, t) in tools.iter().enumerate() {
                let one = call_schema(std::slice::from_ref(t), &[false]);
                if convert(&one).is_err() {
                    tracing::warn!(tool = %t.name, "tool schema not convertible to a grammar; its arguments are only checked to be an object");
                    loose[i] = true;
                }
            }
            convert(&call_schema(tools, &loose))
                .map_err(|e| format!("tool-call grammar: {first}; {e}"))?
        }
    };
    let body = compact_space(&body);
    Ok(format!(
        "{body}\n\
         {ROOT_ONE} ::= {open} pi-ws root pi-ws {close}\n\
         {ROOT_MANY} ::= {ROOT_ONE} (pi-ws {ROOT_ONE}){{0,{more}}}\n\
         pi-ws ::= [ \\t\\n]{{0,3}}\n",
        open = gbnf_literal(OPEN),
        close = gbnf_literal(CLOSE),
        more = MAX_CALLS - 1,
    ))
}

/// `body` with llama.cpp's `space` rule (up to two newlines and 20 blanks at every place JSON
/// allows whitespace) cut down to at most one blank. A sampled small model otherwise spends
/// its output tokens on indentation inside the call and stops on `length` before the call
/// closes (seen in CI: 256 tokens for `{"name":"ls","arguments":{}}`). The call's text is
/// never shown, so compact JSON loses nothing.
fn compact_space(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    for line in body.lines() {
        if line.starts_with("space ::=") {
            out.push_str("space ::= \" \"?");
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// `s` as a GBNF string literal.
fn gbnf_literal(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The largest `n` such that `call_local_<n>` is an id in `ids`, else the number of ids.
/// New ids continue after it, so that they are unique within the conversation.
pub(crate) fn last_call_number<'a>(ids: impl Iterator<Item = &'a str>) -> u64 {
    let mut count = 0u64;
    let mut max = 0u64;
    for id in ids {
        count += 1;
        if let Some(n) = id
            .strip_prefix("call_local_")
            .and_then(|n| n.parse::<u64>().ok())
        {
            max = max.max(n);
        }
    }
    count.max(max)
}

/// What the parser makes of the decoded text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece {
    /// Plain text (outside tool calls).
    Text(String),
    /// A tool call opened and named.
    Start {
        /// The called tool.
        name: String,
    },
    /// More of the open call's argument JSON text.
    Args(String),
    /// The open call is complete.
    End {
        /// The called tool.
        name: String,
        /// Its arguments (always an object; `{}` when the text did not parse).
        arguments: Value,
    },
}

/// Streaming parser of `<tool_call>` blocks in decoded text.
///
/// Text is passed through, except that a trailing part that may begin the opening marker (and
/// whitespace before it) is held back until it is known not to. Inside a block, the call is
/// announced ([`Piece::Start`]) once its `"name"` is read, the text of its `"arguments"` value
/// streams as [`Piece::Args`], and the closing marker (or the end of generation) gives
/// [`Piece::End`] with the parsed arguments.
#[derive(Debug, Default)]
pub(crate) struct CallParser {
    /// Inside a `<tool_call>` block.
    in_call: bool,
    /// Text mode: the held-back tail. Call mode: the block's text so far.
    buf: String,
    /// The open call's name, once announced.
    name: Option<String>,
    /// Byte offset in `buf` where the arguments value starts, once found.
    args_at: Option<usize>,
    /// Scanner over the arguments value.
    scan: JsonScan,
    /// Argument text emitted so far for the open call.
    args_text: String,
    /// Calls ended so far.
    calls: usize,
}

impl CallParser {
    /// Number of tool calls completed so far.
    pub(crate) fn calls(&self) -> usize {
        self.calls
    }

    /// Whether the parser is inside a `<tool_call>` block.
    #[cfg(test)]
    pub(crate) fn in_call(&self) -> bool {
        self.in_call
    }

    /// Feed decoded text.
    pub(crate) fn push(&mut self, text: &str) -> Vec<Piece> {
        let mut out = Vec::new();
        self.buf.push_str(text);
        loop {
            if self.in_call {
                if let Some(i) = self.buf.find(CLOSE) {
                    let rest = self.buf.split_off(i + CLOSE.len());
                    self.buf.truncate(i);
                    self.progress(&mut out);
                    self.close(&mut out, true);
                    self.buf = rest;
                    continue;
                }
                self.progress(&mut out);
                return out;
            }
            if let Some(i) = self.buf.find(OPEN) {
                let rest = self.buf.split_off(i + OPEN.len());
                self.buf.truncate(i);
                let before = self.buf.trim_end();
                if !before.is_empty() {
                    out.push(Piece::Text(before.to_owned()));
                }
                self.buf = rest;
                self.open();
                continue;
            }
            let keep = held_back(&self.buf);
            let rest = self.buf.split_off(self.buf.len() - keep);
            if !self.buf.is_empty() {
                out.push(Piece::Text(std::mem::take(&mut self.buf)));
            }
            self.buf = rest;
            return out;
        }
    }

    /// End of generation: flush held-back text and end (or give back as text) an unclosed
    /// block.
    pub(crate) fn finish(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        if self.in_call {
            self.progress(&mut out);
            self.close(&mut out, false);
            self.buf.clear();
        } else {
            let rest = std::mem::take(&mut self.buf);
            // Whitespace after tool calls is dropped.
            let dropped = rest.trim().is_empty() && self.calls > 0;
            if !rest.is_empty() && !dropped {
                out.push(Piece::Text(rest));
            }
        }
        out
    }

    /// Held-back text outside a block (what an abort keeps).
    pub(crate) fn pending_text(&mut self) -> Option<String> {
        (!self.in_call && !self.buf.is_empty()).then(|| std::mem::take(&mut self.buf))
    }

    fn open(&mut self) {
        self.in_call = true;
        self.name = None;
        self.args_at = None;
        self.scan = JsonScan::default();
        self.args_text.clear();
    }

    /// Announce the call and stream its arguments as far as `buf` allows.
    fn progress(&mut self, out: &mut Vec<Piece>) {
        if self.name.is_none() {
            let Some(at) = key_value_at(&self.buf, &["name"]) else {
                return;
            };
            let Some(len) = json_string_len(&self.buf[at..]) else {
                return;
            };
            let Ok(name) = serde_json::from_str::<String>(&self.buf[at..at + len]) else {
                return;
            };
            out.push(Piece::Start { name: name.clone() });
            self.name = Some(name);
        }
        if self.args_at.is_none() {
            match key_value_at(&self.buf, &["arguments", "parameters"]) {
                Some(at) => {
                    self.args_at = Some(at);
                    self.scan = JsonScan {
                        pos: at,
                        ..JsonScan::default()
                    };
                }
                None => return,
            }
        }
        let from = self.scan.pos;
        let start_emit = self.scan.run(&self.buf);
        let piece = &self.buf[start_emit.max(from)..self.scan.pos];
        if !piece.is_empty() {
            self.args_text.push_str(piece);
            out.push(Piece::Args(piece.to_owned()));
        }
    }

    /// End the block whose text is `buf` (`closed`: its closing marker was seen).
    fn close(&mut self, out: &mut Vec<Piece>, closed: bool) {
        self.in_call = false;
        let body = std::mem::take(&mut self.buf);
        let calls = parse_calls(&body);
        match (calls, self.name.take()) {
            (Some(calls), streamed) if !calls.is_empty() => {
                for (i, (name, arguments)) in calls.into_iter().enumerate() {
                    if i > 0 || streamed.is_none() {
                        out.push(Piece::Start { name: name.clone() });
                    }
                    if i > 0 || self.args_text.is_empty() {
                        out.push(Piece::Args(arguments.to_string()));
                    }
                    out.push(Piece::End { name, arguments });
                    self.calls += 1;
                }
            }
            (_, Some(name)) => {
                let arguments = serde_json::from_str::<Value>(&self.args_text)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| Value::Object(Map::new()));
                out.push(Piece::End { name, arguments });
                self.calls += 1;
            }
            (_, None) => {
                let mut text = format!("{OPEN}{body}");
                if closed {
                    text.push_str(CLOSE);
                }
                out.push(Piece::Text(text));
            }
        }
        self.args_text.clear();
    }
}

/// Length of the tail of `s` to hold back: a proper prefix of [`OPEN`] at the end, with the
/// whitespace before it.
fn held_back(s: &str) -> usize {
    let mut keep = 0;
    for n in (1..OPEN.len()).rev() {
        if s.len() >= n && s.is_char_boundary(s.len() - n) && OPEN.starts_with(&s[s.len() - n..]) {
            keep = n;
            break;
        }
    }
    let head = &s[..s.len() - keep];
    keep + (head.len() - head.trim_end().len())
}

/// The calls in a block's text: one `{"name", "arguments"}` object or an array of them; `None`
/// when it is not such JSON.
fn parse_calls(body: &str) -> Option<Vec<(String, Value)>> {
    let value: Value = serde_json::from_str(body.trim()).ok()?;
    let items = match value {
        Value::Array(items) => items,
        other => vec![other],
    };
    items
        .into_iter()
        .map(|item| {
            let obj = item.as_object()?;
            let name = obj.get("name")?.as_str()?.to_owned();
            let arguments = match obj.get("arguments").or_else(|| obj.get("parameters")) {
                Some(Value::Object(m)) => Value::Object(m.clone()),
                // Some models write the arguments as a JSON string.
                Some(Value::String(s)) => serde_json::from_str::<Value>(s)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| Value::Object(Map::new())),
                _ => Value::Object(Map::new()),
            };
            Some((name, arguments))
        })
        .collect()
}

/// Byte offset of the value of the first key in `keys` of the call object in `body` (the
/// first object, or the first object of an array), once the value has begun (whitespace
/// after the colon skipped).
fn key_value_at(body: &str, keys: &[&str]) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut depth = 0usize;
    let mut object_depth = None;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let len = json_string_len(&body[i..])?;
                let key_end = i + len;
                if Some(depth) == object_depth {
                    let after = &body[key_end..];
                    let colon = after.len() - after.trim_start().len();
                    if after[colon..].starts_with(':') {
                        let rest = &after[colon + 1..];
                        let ws = rest.len() - rest.trim_start().len();
                        let value_at = key_end + colon + 1 + ws;
                        let key: Option<String> = serde_json::from_str(&body[i..key_end]).ok();
                        if key.is_some_and(|k| keys.contains(&k.as_str())) {
                            return (value_at < body.len()).then_some(value_at);
                        }
                    }
                }
                i = key_end;
                continue;
            }
            b'{' => {
                depth += 1;
                if object_depth.is_none() {
                    object_depth = Some(depth);
                }
            }
            b'[' => depth += 1,
            b'}' | b']' => {
                if Some(depth) == object_depth {
                    return None;
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Length in bytes of the JSON string literal at the start of `s` (quotes included); `None`
/// when it is not complete yet.
fn json_string_len(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    if bytes.first() != Some(&b'"') {
        return None;
    }
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().skip(1) {
        if escaped {
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            return Some(i + 1);
        }
    }
    None
}

/// Finds where one JSON value ends, incrementally.
#[derive(Debug, Default, Clone)]
struct JsonScan {
    /// Next byte to look at.
    pos: usize,
    /// Where the value's first byte is, once seen.
    begun: Option<usize>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    done: bool,
}

impl JsonScan {
    /// Scan `buf` from `pos` up to the end of the value (or of `buf`); returns where the
    /// value began (`pos` itself while only whitespace was seen).
    fn run(&mut self, buf: &str) -> usize {
        let bytes = buf.as_bytes();
        while !self.done && self.pos < bytes.len() {
            let b = bytes[self.pos];
            let Some(_) = self.begun else {
                if !b.is_ascii_whitespace() {
                    self.begun = Some(self.pos);
                    continue;
                }
                self.pos += 1;
                continue;
            };
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    if self.depth == 0 {
                        self.done = true;
                    }
                }
                self.pos += 1;
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' if self.depth == 0 => {
                    // End of a scalar value inside the enclosing object.
                    self.done = true;
                    return self.begun.unwrap_or(self.pos);
                }
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.done = true;
                    }
                }
                b',' if self.depth == 0 => {
                    self.done = true;
                    return self.begun.unwrap_or(self.pos);
                }
                b if b.is_ascii_whitespace() && self.depth == 0 => {
                    self.done = true;
                    return self.begun.unwrap_or(self.pos);
                }
                _ => {}
            }
            self.pos += 1;
        }
        self.begun.unwrap_or(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<ToolDefinition> {
        vec![
            ToolDefinition {
                name: "ls".into(),
                description: "List a directory".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            },
            ToolDefinition {
                name: "read".into(),
                description: "Read a file".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            },
        ]
    }

    /// Feed `chunks` one by one, then finish.
    fn parse(chunks: &[&str]) -> Vec<Piece> {
        let mut p = CallParser::default();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(p.push(c));
        }
        out.extend(p.finish());
        out
    }

    /// Merge adjacent Text and adjacent Args pieces.
    fn merged(pieces: Vec<Piece>) -> Vec<Piece> {
        let mut out: Vec<Piece> = Vec::new();
        for p in pieces {
            match (out.last_mut(), p) {
                (Some(Piece::Text(a)), Piece::Text(b)) => a.push_str(&b),
                (Some(Piece::Args(a)), Piece::Args(b)) => a.push_str(&b),
                (_, p) => out.push(p),
            }
        }
        out
    }

    fn chars(s: &str) -> Vec<String> {
        s.chars().map(String::from).collect()
    }

    #[test]
    fn text_then_call_char_by_char() {
        let text = "Let me look.\n<tool_call>\n{\"name\": \"ls\", \"arguments\": {\"path\": \"a}\\\"b\"}}\n</tool_call>";
        let chunks = chars(text);
        let refs: Vec<&str> = chunks.iter().map(String::as_str).collect();
        let pieces = merged(parse(&refs));
        assert_eq!(
            pieces,
            vec![
                Piece::Text("Let me look.".into()),
                Piece::Start { name: "ls".into() },
                Piece::Args("{\"path\": \"a}\\\"b\"}".into()),
                Piece::End {
                    name: "ls".into(),
                    arguments: json!({"path": "a}\"b"})
                },
            ]
        );
    }

    #[test]
    fn args_stream_before_the_block_closes() {
        let mut p = CallParser::default();
        assert_eq!(p.push("<tool"), vec![]);
        assert_eq!(p.push("_call>{\"name\": \"re"), vec![]);
        assert!(p.in_call());
        assert_eq!(
            p.push("ad\", \"arguments\": {\"pa"),
            vec![
                Piece::Start {
                    name: "read".into()
                },
                Piece::Args("{\"pa".into())
            ]
        );
        assert_eq!(
            p.push("th\": \"x\"}}</tool"),
            vec![Piece::Args("th\": \"x\"}".into())]
        );
        assert_eq!(
            p.push("_call>"),
            vec![Piece::End {
                name: "read".into(),
                arguments: json!({"path": "x"})
            }]
        );
        assert_eq!(p.calls(), 1);
        assert_eq!(p.finish(), vec![]);
    }

    #[test]
    fn plain_text_and_lookalikes_pass_through() {
        let pieces = merged(parse(&["a < b <to", "ol and <tool_", "x> end "]));
        assert_eq!(
            pieces,
            vec![Piece::Text("a < b <tool and <tool_x> end ".into())]
        );
    }

    #[test]
    fn array_form_and_arguments_first() {
        let pieces = merged(parse(&[
            "<tool_call>[{\"arguments\": {\"path\": \".\"}, \"name\": \"ls\"}, {\"name\": \"read\", \"parameters\": \"{\\\"path\\\": \\\"f\\\"}\"}]</tool_call>",
        ]));
        assert_eq!(
            pieces,
            vec![
                Piece::Start { name: "ls".into() },
                Piece::Args("{\"path\": \".\"}".into()),
                Piece::End {
                    name: "ls".into(),
                    arguments: json!({"path": "."})
                },
                Piece::Start {
                    name: "read".into()
                },
                Piece::Args("{\"path\":\"f\"}".into()),
                Piece::End {
                    name: "read".into(),
                    arguments: json!({"path": "f"})
                },
            ]
        );
    }

    #[test]
    fn unclosed_and_broken_blocks() {
        // Complete JSON but the closing marker never came: still a call.
        let pieces = merged(parse(&["<tool_call>{\"name\": \"ls\", \"arguments\": {}}"]));
        assert_eq!(
            pieces.last(),
            Some(&Piece::End {
                name: "ls".into(),
                arguments: json!({})
            })
        );
        // Cut off inside the arguments: the named call ends with `{}`.
        let pieces = merged(parse(&[
            "<tool_call>{\"name\": \"ls\", \"arguments\": {\"pa",
        ]));
        assert_eq!(
            pieces,
            vec![
                Piece::Start { name: "ls".into() },
                Piece::Args("{\"pa".into()),
                Piece::End {
                    name: "ls".into(),
                    arguments: json!({})
                }
            ]
        );
        // Never named: the block is given back as text.
        let pieces = merged(parse(&["hi <tool_call>oops</tool_call> there"]));
        assert_eq!(
            pieces,
            vec![Piece::Text("hi<tool_call>oops</tool_call> there".into())]
        );
    }

    #[test]
    fn whitespace_after_calls_is_dropped() {
        let pieces = merged(parse(&[
            "<tool_call>{\"name\": \"ls\", \"arguments\": {}}</tool_call>\n\n",
        ]));
        assert!(
            matches!(pieces.last(), Some(Piece::End { .. })),
            "{pieces:?}"
        );
        assert_eq!(merged(parse(&["x\n"])), vec![Piece::Text("x\n".into())]);
    }

    #[test]
    fn tool_choice_from_compat() {
        let mut m = Model::unknown();
        assert_eq!(ToolChoice::of(&m), ToolChoice::Auto);
        let mut compat = Map::new();
        compat.insert("toolChoice".into(), json!("required"));
        m.compat = Some(compat.clone());
        assert_eq!(ToolChoice::of(&m), ToolChoice::Required);
        compat.insert("toolChoice".into(), json!("auto"));
        m.compat = Some(compat);
        assert_eq!(ToolChoice::of(&m), ToolChoice::Auto);
    }

    #[test]
    fn prompt_section_lists_tools_and_convention() {
        let s = tool_section(&tools(), ToolChoice::Auto);
        assert!(s.contains("<tools>\n{\"name\":\"ls\",\"description\":\"List a directory\",\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}\n"), "{s}");
        assert!(s.contains("\"required\":[\"path\"]"));
        assert!(s.contains("<tool_call>\n{\"name\": \"tool_name\", \"arguments\": {"));
        assert!(s.contains("</tool_call>"));
        assert!(tool_section(&tools(), ToolChoice::Required).contains("exactly one tool call"));
        assert_eq!(append_section("Be brief. \n", "S"), "Be brief.\n\nS");
        assert_eq!(append_section("", "S"), "S");
    }

    #[test]
    fn grammar_names_real_tools() {
        let g = grammar(&tools()).unwrap();
        assert!(g.contains("root ::="), "{g}");
        assert!(
            g.contains(&format!("{ROOT_ONE} ::= \"<tool_call>\"")),
            "{g}"
        );
        assert!(g.contains(&format!("{ROOT_MANY} ::= {ROOT_ONE} (")), "{g}");
        assert!(g.contains("\\\"ls\\\""), "{g}");
        assert!(g.contains("\\\"read\\\""), "{g}");
        // Whitespace inside the call is at most one blank per place.
        let space: Vec<&str> = g.lines().filter(|l| l.starts_with("space ::=")).collect();
        assert_eq!(space, ["space ::= \" \"?"], "{g}");
        // An unconvertible schema still gives a grammar.
        let mut odd = tools();
        odd[0].parameters = json!({"$ref": "#/nowhere"});
        assert!(grammar(&odd).is_ok());
        assert!(grammar(&[]).is_err());
    }

    #[test]
    fn history_in_our_convention() {
        let messages = vec![
            json!({"role": "user", "content": "list"}),
            json!({"role": "assistant", "content": "Sure.", "tool_calls": [
                {"id": "call_local_1", "type": "function", "function": {"name": "ls", "arguments": {"path": "."}}},
                {"id": "call_local_2", "type": "function", "function": {"name": "read", "arguments": {"path": "a"}}},
            ]}),
            json!({"role": "tool", "content": "a\nb", "tool_call_id": "call_local_1", "name": "ls"}),
            json!({"role": "tool", "content": "x", "tool_call_id": "call_local_2", "name": "read"}),
            json!({"role": "assistant", "content": "Done."}),
        ];
        let out = calls_as_text(messages);
        assert_eq!(out.len(), 4);
        assert_eq!(
            out[1]["content"],
            "Sure.\n<tool_call>\n{\"name\":\"ls\",\"arguments\":{\"path\":\".\"}}\n</tool_call>\n<tool_call>\n{\"name\":\"read\",\"arguments\":{\"path\":\"a\"}}\n</tool_call>"
        );
        assert!(out[1].get("tool_calls").is_none());
        assert_eq!(out[2]["role"], "user");
        assert_eq!(
            out[2]["content"],
            "<tool_response>\n{\"name\":\"ls\",\"content\":\"a\\nb\"}\n</tool_response>\n<tool_response>\n{\"name\":\"read\",\"content\":\"x\"}\n</tool_response>"
        );
        assert_eq!(out[3]["content"], "Done.");
    }

    #[test]
    fn call_numbers() {
        assert_eq!(last_call_number(std::iter::empty()), 0);
        assert_eq!(last_call_number(["a", "b"].into_iter()), 2);
        assert_eq!(last_call_number(["call_local_7", "x"].into_iter()), 7);
    }
}
