//! Prompt rendering: pi messages → the chat-template `messages` shape (as Hugging Face
//! `transformers` passes it to a model's Jinja chat template) → prompt text.
//!
//! Templates are rendered with `minijinja` configured like `transformers` does
//! (`trim_blocks`, `lstrip_blocks`, loop controls, Python string methods, `raise_exception`,
//! `strftime_now`, a `tojson` that writes JSON as Python's `json.dumps`).

use minijinja::value::{Kwargs, Value as JValue};
use minijinja::{context, Environment, Error, ErrorKind};
use pi_ai::{Content, Message, ToolDefinition, UserContent};
use serde::Serialize;
use serde_json::{json, Value};

/// Converts a pi conversation into chat-template messages: objects with `role`
/// (`system`, `user`, `assistant`, `tool`) and string `content`; assistant tool calls as
/// `tool_calls: [{id, type: "function", function: {name, arguments: {…}}}]`; tool results
/// with `tool_call_id` and `name`.
///
/// `system_prompt` (when not empty) becomes the first message. Image blocks, thinking blocks
/// and roles other than system/user/assistant/toolResult are left out.
pub fn chat_messages(system_prompt: &str, messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    if !system_prompt.is_empty() {
        out.push(json!({"role": "system", "content": system_prompt}));
    }
    for message in messages {
        match message {
            Message::System(m) => {
                out.push(json!({"role": "system", "content": user_text(&m.content)}));
            }
            Message::User(m) => {
                out.push(json!({"role": "user", "content": user_text(&m.content)}));
            }
            Message::Assistant(m) => {
                let text: String = m.content.iter().filter_map(Content::as_text).collect();
                let calls: Vec<Value> = m
                    .tool_calls()
                    .map(|c| {
                        json!({
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        })
                    })
                    .collect();
                let mut v = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    v["tool_calls"] = Value::Array(calls);
                }
                out.push(v);
            }
            Message::ToolResult(m) => {
                let text: String = m.content.iter().filter_map(Content::as_text).collect();
                out.push(json!({
                    "role": "tool",
                    "content": text,
                    "tool_call_id": m.tool_call_id,
                    "name": m.tool_name,
                }));
            }
            Message::BashExecution(_) | Message::Other(_) => {}
        }
    }
    out
}

fn user_text(content: &UserContent) -> String {
    content.joined_text()
}

/// What a chat template is rendered with.
#[derive(Debug, Clone, Copy)]
pub struct ChatTemplateInput<'a> {
    /// Messages as built by [`chat_messages`].
    pub messages: &'a [Value],
    /// Tools offered to the model; passed as OpenAI-style
    /// `[{type: "function", function: {name, description, parameters}}]`, or `none` when empty.
    pub tools: &'a [ToolDefinition],
    /// Text of the model's BOS token (`bos_token` in the template).
    pub bos_token: &'a str,
    /// Text of the model's EOS token (`eos_token` in the template).
    pub eos_token: &'a str,
    /// Append the opening of an assistant turn (`add_generation_prompt`).
    pub add_generation_prompt: bool,
}

/// Renders a Jinja chat template (the GGUF's `tokenizer.chat_template`).
///
/// # Errors
/// The template's syntax or rendering error (including `raise_exception(...)` calls), as text.
pub fn render_jinja(template: &str, input: &ChatTemplateInput<'_>) -> Result<String, String> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    env.add_filter("tojson", tojson);
    let tmpl = env
        .template_from_str(template)
        .map_err(|e| format!("chat template: {e:#}"))?;
    let tools: Option<Vec<Value>> = (!input.tools.is_empty()).then(|| {
        input
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    }
                })
            })
            .collect()
    });
    tmpl.render(context! {
        messages => JValue::from_serialize(input.messages),
        tools => JValue::from_serialize(&tools),
        bos_token => input.bos_token,
        eos_token => input.eos_token,
        add_generation_prompt => input.add_generation_prompt,
    })
    .map_err(|e| format!("chat template: {e:#}"))
}

/// The ChatML prompt (`<|im_start|>role\ncontent<|im_end|>\n` per message), used when a model
/// has no usable template.
pub fn render_chatml(messages: &[Value], add_generation_prompt: bool) -> String {
    let mut out = String::new();
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let content = m.get("content").and_then(Value::as_str).unwrap_or("");
        out.push_str("<|im_start|>");
        out.push_str(role);
        out.push('\n');
        out.push_str(content);
        out.push_str("<|im_end|>\n");
    }
    if add_generation_prompt {
        out.push_str("<|im_start|>assistant\n");
    }
    out
}

fn raise_exception(message: String) -> Result<JValue, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

/// `strftime_now(format)` (used by Llama 3 templates) for `%d %m %Y %y %b %B %A %a %H %M %S %%`,
/// in UTC.
fn strftime_now(format: String) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    strftime(&format, secs)
}

fn strftime(format: &str, unix_secs: u64) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
    ];
    let days = unix_secs / 86_400;
    let rem = unix_secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let weekday = DAYS[(days % 7) as usize];
    let month_name = MONTHS[(month as usize).saturating_sub(1).min(11)];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&format!("{:02}", year % 100)),
            Some('b') => out.push_str(&month_name[..3]),
            Some('B') => out.push_str(month_name),
            Some('a') => out.push_str(&weekday[..3]),
            Some('A') => out.push_str(weekday),
            Some('H') => out.push_str(&format!("{:02}", rem / 3600)),
            Some('M') => out.push_str(&format!("{:02}", rem % 3600 / 60)),
            Some('S') => out.push_str(&format!("{:02}", rem % 60)),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Days since 1970-01-01 → (year, month 1–12, day 1–31) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// `tojson` as `transformers` defines it: Python `json.dumps(value, ensure_ascii=False)`
/// (`", "` and `": "` separators), or indented with `indent=n`; no HTML escaping.
fn tojson(value: JValue, kwargs: Kwargs) -> Result<JValue, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let mut buf = Vec::new();
    let written = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            let fmt = serde_json::ser::PrettyFormatter::with_indent(&pad);
            value.serialize(&mut serde_json::Serializer::with_formatter(&mut buf, fmt))
        }
        None => value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut buf,
            PythonFormatter,
        )),
    };
    written.map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    let text = String::from_utf8(buf)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    Ok(JValue::from_safe_string(text))
}

/// Compact JSON with Python's default separators `", "` and `": "`.
struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The template stored in SmolLM2-135M-Instruct's GGUF.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    fn input<'a>(messages: &'a [Value], tools: &'a [ToolDefinition]) -> ChatTemplateInput<'a> {
        ChatTemplateInput {
            messages,
            tools,
            bos_token: "<s>",
            eos_token: "</s>",
            add_generation_prompt: true,
        }
    }

    #[test]
    fn smollm2_template_matches_chatml() {
        let msgs = chat_messages("Be brief.", &[Message::user_text("Hi")]);
        let out = render_jinja(SMOLLM2, &input(&msgs, &[])).unwrap();
        assert_eq!(out, render_chatml(&msgs, true));
        assert_eq!(
            out,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn python_methods_tools_and_json() {
        let tmpl = "{% if tools %}{% for t in tools %}{{ t | tojson }}{% endfor %}{% endif %}\
                    {% for m in messages %}[{{ m.role }}:{{ m.content.strip() }}]{% endfor %}";
        let tools = [ToolDefinition {
            name: "ls".into(),
            description: "List <files>".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }];
        let msgs = chat_messages("", &[Message::user_text("  x ")]);
        let out = render_jinja(tmpl, &input(&msgs, &tools)).unwrap();
        assert_eq!(
            out,
            "{\"type\": \"function\", \"function\": {\"name\": \"ls\", \"description\": \"List <files>\", \
             \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}}}}}[user:x]"
        );
        let none =
            render_jinja("{% if tools is none %}none{% endif %}", &input(&msgs, &[])).unwrap();
        assert_eq!(none, "none");
    }

    #[test]
    fn raise_exception_is_an_error() {
        let msgs = chat_messages("", &[]);
        let err = render_jinja("{{ raise_exception('nope') }}", &input(&msgs, &[])).unwrap_err();
        assert!(err.contains("nope"), "{err}");
        assert!(render_jinja("{% if %}", &input(&msgs, &[])).is_err());
    }

    #[test]
    fn dates() {
        // 2024-03-01 12:34:56 UTC, a Friday.
        assert_eq!(
            strftime("%d %b %Y %A %H:%M:%S %%", 1_709_296_496),
            "01 Mar 2024 Friday 12:34:56 %"
        );
        assert_eq!(civil_from_days(0), (1970, 1, 1));
    }

    #[test]
    fn tool_calls_and_results() {
        use pi_ai::{AssistantMessage, Model, ToolCall, ToolResultMessage};
        let mut a = AssistantMessage::empty(&Model::unknown());
        a.content = vec![
            Content::text("ok"),
            Content::ToolCall(ToolCall {
                id: "c1".into(),
                name: "ls".into(),
                arguments: json!({"path": "."}),
                thought_signature: None,
                extra: Default::default(),
            }),
        ];
        let r = ToolResultMessage {
            tool_call_id: "c1".into(),
            tool_name: "ls".into(),
            content: vec![Content::text("a.txt")],
            details: None,
            is_error: false,
            duration_ms: None,
            nested_calls: None,
            timestamp: 0,
            extra: Default::default(),
        };
        let msgs = chat_messages("", &[Message::Assistant(a), Message::ToolResult(r)]);
        assert_eq!(
            msgs[0]["tool_calls"][0]["function"]["arguments"]["path"],
            "."
        );
        assert_eq!(msgs[1]["role"], "tool");
        assert_eq!(msgs[1]["content"], "a.txt");
    }
}
