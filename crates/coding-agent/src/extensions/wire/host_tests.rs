//! The typed host events and replies against the hand-built JSON and lookups they replaced
//! (issue 22): each outgoing message serializes byte for byte as the old `json!` did (copied
//! here as the reference), and each reply reads as the old lookups read it.

use super::*;
use pi_agent::ToolOutput;
use pi_ai::{Content, ImageContent};
use serde_json::json;

fn same(new: &Value, old: &Value) {
    assert_eq!(
        serde_json::to_string(new).unwrap(),
        serde_json::to_string(old).unwrap()
    );
}

fn image(data: &str) -> ImageContent {
    serde_json::from_value(json!({"data": data, "mimeType": "image/png"})).unwrap()
}

/// The `input` event as `Extensions::input` built it before.
fn old_input_event(
    text: &str,
    images: &[ImageContent],
    source: &str,
    streaming_behavior: Option<&str>,
) -> Value {
    let mut event = json!({"type": "input", "text": text, "source": source});
    if let Value::Object(m) = &mut event {
        if !images.is_empty() {
            m.insert("images".into(), json!(images));
        }
        if let Some(b) = streaming_behavior {
            m.insert("streamingBehavior".into(), json!(b));
        }
    }
    event
}

#[test]
fn input_event_is_byte_equal() {
    let imgs = [image("AAA"), image("BBB")];
    for (images, sb) in [
        (&[][..], None),
        (&imgs[..], None),
        (&[][..], Some("steer")),
        (&imgs[..], Some("followUp")),
    ] {
        let new = value_of(&InputEvent {
            text: "hi \"there\"",
            source: "rpc",
            images,
            streaming_behavior: sb,
        });
        same(&new, &old_input_event("hi \"there\"", images, "rpc", sb));
    }
}

/// Image blocks as the old `images_of` read them.
fn old_images_of(list: &[Value]) -> Option<Vec<ImageContent>> {
    list.iter()
        .map(|i| {
            let mut i = i.clone();
            if let Value::Object(m) = &mut i {
                if m.remove("type").is_some_and(|t| t != "image") {
                    return None;
                }
            }
            serde_json::from_value::<ImageContent>(i).ok()
        })
        .collect()
}

/// The old reading of an `input` reply.
fn old_input_reply(
    v: &Value,
    text: String,
    images: Vec<ImageContent>,
) -> Option<(String, Vec<ImageContent>)> {
    match v.get("action").and_then(Value::as_str) {
        Some("handled") => None,
        Some("transform") => {
            let text = v
                .get("text")
                .and_then(Value::as_str)
                .map_or(text, str::to_string);
            let images = match v.get("images") {
                Some(Value::Array(list)) => old_images_of(list).unwrap_or(images),
                _ => images,
            };
            Some((text, images))
        }
        _ => Some((text, images)),
    }
}

#[test]
fn input_reply_reads_as_before() {
    let replies = [
        json!({"action": "handled"}),
        json!({"action": "continue"}),
        json!({"action": "transform", "text": "new"}),
        json!({"action": "transform", "text": "new", "images": []}),
        json!({"action": "transform", "text": 3, "images": [{"type": "image", "data": "X", "mimeType": "image/jpeg"}]}),
        json!({"action": "transform", "images": [{"data": "Y", "mimeType": "image/png", "extra": 1}]}),
        json!({"action": "transform", "images": [{"type": "text", "text": "no"}]}),
        json!({"action": "transform", "images": [{"type": null, "data": "X", "mimeType": "a"}]}),
        json!({"action": "transform", "images": [{"data": "X", "mimeType": "a"}, 5]}),
        json!({"action": "transform", "images": {"data": "X"}}),
        json!({"action": "transform", "images": null}),
        json!({"action": "transform", "text": null}),
        json!({"action": ["handled"]}),
        json!({"action": 1}),
        json!({}),
        json!(null),
        json!("handled"),
        json!(["transform", "x"]),
    ];
    for r in &replies {
        let text = "old".to_string();
        let images = vec![image("OLD")];
        let new = InputReply::from_value(r).apply(text.clone(), images.clone());
        assert_eq!(new, old_input_reply(r, text, images), "reply {r}");
    }
}

/// The `tool_call` event as `before_tool_call` built it before.
fn old_tool_call(name: &str, id: &str, parent: Option<&str>, args: &Value) -> Value {
    let mut event = json!({
        "type": "tool_call",
        "toolName": name,
        "toolCallId": id,
    });
    if let Some(p) = parent {
        event["parentToolCallId"] = json!(p);
    }
    event["input"] = args.clone();
    event
}

#[test]
fn tool_call_event_is_byte_equal() {
    for args in [json!({"path": "a", "n": 1}), json!({}), json!(null)] {
        for parent in [None, Some("call_0")] {
            let new = value_of(&ToolCallEvent {
                tool_name: "read",
                tool_call_id: "call_1",
                parent_tool_call_id: parent,
                input: &args,
            });
            same(&new, &old_tool_call("read", "call_1", parent, &args));
        }
    }
}

/// The `tool_result` event as `after_tool_call` built it before.
fn old_tool_result(
    name: &str,
    id: &str,
    parent: Option<&str>,
    args: &Value,
    output: &ToolOutput,
    is_error: bool,
) -> Value {
    let mut event = json!({
        "type": "tool_result",
        "toolName": name,
        "toolCallId": id,
    });
    if let Some(p) = parent {
        event["parentToolCallId"] = json!(p);
    }
    event["input"] = args.clone();
    event["content"] = json!(output.content);
    event["details"] = json!(output.details);
    if let Some(sc) = &output.structured_content {
        event["structuredContent"] = sc.clone();
    }
    event["isError"] = json!(is_error);
    event
}

fn outputs() -> Vec<ToolOutput> {
    vec![
        ToolOutput::text("done"),
        ToolOutput::error("failed"),
        ToolOutput {
            content: vec![Content::text("a"), Content::Image(image("IMG"))],
            details: Some(json!({"k": [1, 2]})),
            structured_content: Some(json!({"exit_code": 0})),
            is_error: Some(true),
        },
        ToolOutput {
            content: vec![],
            details: Some(Value::Null),
            structured_content: Some(Value::Null),
            is_error: None,
        },
    ]
}

#[test]
fn tool_result_event_is_byte_equal() {
    let args = json!({"command": "ls"});
    for output in outputs() {
        for parent in [None, Some("call_0")] {
            for is_error in [false, true] {
                let new = value_of(&ToolResultEvent {
                    tool_name: "bash",
                    tool_call_id: "call_1",
                    parent_tool_call_id: parent,
                    input: &args,
                    content: &output.content,
                    details: &output.details,
                    structured_content: output.structured_content.as_ref(),
                    is_error,
                });
                let old = old_tool_result("bash", "call_1", parent, &args, &output, is_error);
                same(&new, &old);
            }
        }
    }
}

/// The old reading of a non-null `tool_result` reply.
fn old_tool_result_reply(v: &Value, output: ToolOutput, is_error: bool) -> (ToolOutput, bool) {
    let mut out = output;
    if let Some(c) = v
        .get("content")
        .and_then(|c| serde_json::from_value(c.clone()).ok())
    {
        out.content = c;
        out.structured_content = None;
    }
    if let Some(s) = v.get("structuredContent") {
        out.structured_content = (!s.is_null()).then(|| s.clone());
    }
    if let Some(d) = v.get("details") {
        out.details = (!d.is_null()).then(|| d.clone());
    }
    let is_error = v
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(is_error);
    (out, is_error)
}

#[test]
fn tool_result_reply_reads_as_before() {
    let replies = [
        json!({"content": [{"type": "text", "text": "redacted"}], "details": {"a": 1}, "isError": true}),
        json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"s": 1}}),
        json!({"structuredContent": null, "details": null, "isError": false}),
        json!({"structuredContent": 5, "details": "d"}),
        json!({"content": "not blocks", "isError": "yes"}),
        json!({"content": [{"type": "nope"}], "isError": 1}),
        json!({"content": null}),
        json!({"content": []}),
        json!({}),
        json!(true),
        json!([{"type": "text", "text": "x"}]),
        json!("content"),
    ];
    for r in &replies {
        for output in outputs() {
            for is_error in [false, true] {
                let new = ToolResultReply::from_value(r).apply(output.clone(), is_error);
                assert_eq!(
                    new,
                    old_tool_result_reply(r, output.clone(), is_error),
                    "reply {r}"
                );
            }
        }
    }
}

#[test]
fn resources_discover_event_is_byte_equal() {
    let cwd = std::path::Path::new("/work/a b/ü");
    for reason in ["startup", "reload"] {
        let new = value_of(&ResourcesDiscoverEvent {
            cwd: &cwd.to_string_lossy(),
            reason,
        });
        same(
            &new,
            &json!({"type": "resources_discover", "cwd": cwd, "reason": reason}),
        );
    }
}

#[test]
fn loop_events_are_byte_equal() {
    same(
        &value_of(&LoopEvent::AgentStart),
        &json!({"type": "agent_start"}),
    );
    let now = pi_ai::now_ms();
    same(
        &value_of(&LoopEvent::TurnStart {
            turn_index: 3,
            timestamp: now,
        }),
        &json!({"type": "turn_start", "turnIndex": 3u64, "timestamp": now}),
    );
    same(
        &value_of(&LoopEvent::TurnEnd { turn_index: 0 }),
        &json!({"type": "turn_end", "turnIndex": 0u64}),
    );
}

#[test]
fn command_source_info_is_byte_equal() {
    for (source, scope) in [("local", "user"), ("cli", "temporary")] {
        let new = value_of(&crate::resources::SourceInfo {
            path: "/x/ext.ts".into(),
            source: source.into(),
            scope: scope.into(),
            origin: "top-level".into(),
            base_dir: None,
            changelog_path: None,
        });
        let old = json!({
            "path": "/x/ext.ts",
            "source": source,
            "scope": scope,
            "origin": "top-level",
        });
        same(&new, &old);
    }
}

#[test]
fn call_answers_and_default_schema_are_byte_equal() {
    same(
        &value_of(&TranspileReply::from(Ok("export {};".to_string()))),
        &json!({ "code": "export {};" }),
    );
    same(
        &value_of(&TranspileReply::from(Err("cannot read x".to_string()))),
        &json!({ "error": "cannot read x" }),
    );
    let method = "appendEntry";
    same(
        &value_of(&CallError {
            error: format!("{method}: the session has not started yet"),
        }),
        &json!({"error": format!("{method}: the session has not started yet")}),
    );
    same(
        &EmptyObjectSchema::value(),
        &json!({"type": "object", "properties": {}}),
    );
}

#[test]
fn transpile_params_read_as_before() {
    for p in [
        json!({"path": "/a.ts"}),
        json!({"path": 3}),
        json!({}),
        json!(null),
        json!(["/a.ts"]),
    ] {
        let old = p.get("path").and_then(Value::as_str).unwrap_or("");
        assert_eq!(TranspileParams::from_value(&p).path, old, "params {p}");
    }
}

#[test]
fn event_type_reads_as_before() {
    for v in [
        json!({"type": "session_start", "reason": "startup"}),
        json!({"type": 1}),
        json!({"type": null}),
        json!({"type": ""}),
        json!({}),
        json!(["session_start"]),
        json!("session_start"),
        json!(null),
    ] {
        let old = v.get("type").and_then(Value::as_str).map(str::to_string);
        assert_eq!(EventType::of(&v), old, "event {v}");
    }
}

#[test]
fn last_entry_id_reads_as_before() {
    for state in [
        json!({"cwd": "/w", "entries": [{"id": "a"}, {"type": "x", "id": "b", "more": [1, {"id": "c"}]}]}),
        json!({"entries": [{"id": "a"}, {"id": 5}]}),
        json!({"entries": [{"id": "a"}, {"noid": true}]}),
        json!({"entries": [{"id": "a"}, "b"]}),
        json!({"entries": [{"id": "a"}, ["id", "b"]]}),
        json!({"entries": [{"id": "a"}, null]}),
        json!({"entries": []}),
        json!({"entries": {"id": "a"}}),
        json!({"entries": null}),
        json!({"entries": "a"}),
        json!({"sessionId": "s"}),
        json!([{"entries": [{"id": "a"}]}]),
        json!(null),
    ] {
        let old = state
            .get("entries")
            .and_then(Value::as_array)
            .and_then(|e| e.last())
            .and_then(|e| e.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string);
        assert_eq!(last_entry_id(&state), old, "state {state}");
    }
}
