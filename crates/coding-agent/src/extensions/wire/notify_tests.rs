//! The typed messages that replaced `Value` payloads in [`ToHost`] (issue 22): each serializes
//! byte for byte as the message did when its payload was first turned into a `Value`
//! (`value_of` / `serde_json::to_value`, or the old shaper's key picking, copied here as the
//! reference).

use super::*;
use crate::protocol::rpc::RpcEvent;
use crate::session::SessionEntry;
use serde_json::json;

/// `serde_json::to_string` of the typed message and of the old one, asserted equal.
fn same(new: &ToHost<'_>, old: Value) {
    assert_eq!(
        serde_json::to_string(new).unwrap(),
        serde_json::to_string(&old).unwrap()
    );
}

fn entry(id: &str, parent: Option<&str>) -> SessionEntry {
    serde_json::from_value(json!({
        "type": "custom", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
        "customType": "c", "data": {"k": 1}
    }))
    .unwrap()
}

fn mirror(entries: Vec<SessionEntry>) -> SessionMirror {
    SessionMirror {
        cwd: "/w".into(),
        session_file: Some("/s/a.jsonl".into()),
        session_id: "sid".into(),
        session_name: None,
        session_dir: Some("/s".into()),
        header: json!({"type": "session", "version": 3, "id": "sid", "cwd": "/w"}),
        leaf_id: entries.last().map(|e| e.id.clone()),
        entries,
        entries_from: None,
        model: Some(pi_ai::Model::unknown()),
        available_models: vec![],
        thinking_level: "off".into(),
        active_tools: vec!["read".into()],
        all_tools: vec![],
        is_idle: true,
        has_pending_messages: false,
        context_usage: None,
        system_prompt: "sys \"q\"".into(),
        commands: vec![],
    }
}

#[test]
fn state_is_byte_equal() {
    for entries in [vec![], vec![entry("e1", None), entry("e2", Some("e1"))]] {
        let m = mirror(entries);
        let old = json!({"t": "state", "state": serde_json::to_value(&m).unwrap()});
        same(
            &ToHost::State {
                state: Box::new(m.clone()),
            },
            old.clone(),
        );
        // The last entry id, as the old lookups read it from the value.
        let old_last = old["state"]
            .get("entries")
            .and_then(Value::as_array)
            .and_then(|e| e.last())
            .and_then(|e| e.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string);
        assert_eq!(last_entry_id(&m), old_last);
    }
}

#[test]
fn tool_rounds_are_byte_equal() {
    let input = json!({"path": "a.txt", "n": 1.5, "nested": {"z": 1, "a": [true, null]}});
    for parent in [None, Some("outer")] {
        let event = ToolCallEvent {
            tool_name: "read",
            tool_call_id: "c1",
            parent_tool_call_id: parent,
            input: &input,
        };
        let old = json!({"t": "tool_call", "id": 7, "event": value_of(&event)});
        same(&ToHost::ToolCall { id: 7, event }, old);
    }
    let content: Vec<pi_ai::Content> =
        serde_json::from_value(json!([{"type": "text", "text": "out"}])).unwrap();
    let structured = json!({"rows": 2});
    for (details, sc, is_error) in [
        (None, None, false),
        (Some(json!({"d": 1})), Some(&structured), true),
    ] {
        let event = ToolResultEvent {
            tool_name: "read",
            tool_call_id: "c1",
            parent_tool_call_id: Some("p"),
            input: &input,
            content: &content,
            details: &details,
            structured_content: sc,
            is_error,
        };
        let old = json!({"t": "tool_result", "id": 8, "event": value_of(&event)});
        same(&ToHost::ToolResult { id: 8, event }, old);
    }
}

/// The extension shape as the old `EventShaper::shape` built it from the serialized event
/// (`turn_index` / `timestamp` as it would have read them).
fn old_shape(ev: &RpcEvent, turn_index: u64, timestamp: i64) -> Value {
    let v = serde_json::to_value(ev).unwrap();
    let keep = |keys: &[&str]| -> Value {
        let mut out = serde_json::Map::new();
        for k in keys {
            if let Some(x) = v.get(*k) {
                out.insert((*k).to_string(), x.clone());
            }
        }
        Value::Object(out)
    };
    match ev {
        RpcEvent::AgentStart => json!({"type": "agent_start"}),
        RpcEvent::AgentEnd { .. } => keep(&["type", "messages"]),
        RpcEvent::TurnStart => {
            json!({"type": "turn_start", "turnIndex": turn_index, "timestamp": timestamp})
        }
        RpcEvent::TurnEnd { .. } => json!({"type": "turn_end", "turnIndex": turn_index}),
        RpcEvent::MessageStart { .. } | RpcEvent::MessageEnd { .. } => keep(&["type", "message"]),
        RpcEvent::MessageUpdate { .. } => keep(&["type", "message", "assistantMessageEvent"]),
        RpcEvent::ToolExecutionStart { .. } => keep(&["type", "toolCallId", "toolName", "args"]),
        RpcEvent::ToolExecutionUpdate { .. } => {
            keep(&["type", "toolCallId", "toolName", "args", "partialResult"])
        }
        RpcEvent::ToolExecutionEnd { .. } => keep(&[
            "type",
            "toolCallId",
            "toolName",
            "result",
            "isError",
            "durationMs",
        ]),
        _ => v,
    }
}

fn rpc_events() -> Vec<RpcEvent> {
    let user = json!({"role": "user", "content": "hi", "timestamp": 1});
    let out = json!({"content": [{"type": "text", "text": "o"}], "details": {"k": 2}});
    [
        json!({"type": "agent_start"}),
        json!({"type": "agent_end", "messages": [user], "willRetry": false}),
        json!({"type": "agent_settled", "aborted": false}),
        json!({"type": "turn_start"}),
        json!({"type": "turn_end", "message": user, "toolResults": []}),
        json!({"type": "message_start", "message": user}),
        json!({"type": "message_end", "message": user}),
        json!({"type": "message_update", "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3, "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}, "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "x"}}),
        json!({"type": "tool_execution_start", "toolCallId": "c", "toolName": "t", "args": {"a": 1}}),
        json!({"type": "tool_execution_start", "toolCallId": "c", "toolName": "t", "args": {}, "parentToolCallId": "p"}),
        json!({"type": "tool_execution_update", "toolCallId": "c", "toolName": "t", "args": {"a": 1}, "partialResult": out}),
        json!({"type": "tool_execution_end", "toolCallId": "c", "toolName": "t", "result": out, "isError": false}),
        json!({"type": "tool_execution_end", "toolCallId": "c", "toolName": "t", "result": out, "isError": true, "durationMs": 12, "parentToolCallId": "p"}),
        json!({"type": "queue_update", "steering": ["s"], "followUp": []}),
        json!({"type": "thinking_level_changed", "level": "high"}),
        json!({"type": "session_info_changed", "name": "n"}),
        json!({"type": "extension_error", "extensionPath": "/e.ts", "event": "x", "error": "e"}),
        json!({"type": "summarization_retry_finished"}),
    ]
    .into_iter()
    .map(|v| serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}")))
    .collect()
}

#[test]
fn agent_events_are_byte_equal() {
    let events = rpc_events();
    for ev in &events {
        let v = serde_json::to_value(ev).unwrap();
        assert_eq!(
            rpc_event_kind(ev),
            v["type"].as_str().unwrap(),
            "kind of {v}"
        );
        let old = json!({"t": "event", "event": old_shape(ev, 3, 1234)});
        let event = match ExtensionEvent::of(ev, 3, 1234) {
            Some(shaped) => {
                assert_eq!(shaped.kind(), rpc_event_kind(ev));
                Notification::Agent(Box::new(shaped))
            }
            None => Notification::AsIs(ev),
        };
        assert_eq!(event.kind(), rpc_event_kind(ev));
        same(&ToHost::Event { id: None, event }, old);
    }
}

#[test]
fn other_events_are_byte_equal() {
    let images: Vec<pi_ai::ImageContent> =
        serde_json::from_value(json!([{"data": "AA", "mimeType": "image/png"}])).unwrap();
    let input = InputEvent {
        text: "t",
        source: "rpc",
        images: &images,
        streaming_behavior: Some("steer"),
    };
    let old = json!({"t": "event", "id": 1, "event": value_of(&input)});
    same(
        &ToHost::Event {
            id: Some(1),
            event: Notification::Input(input),
        },
        old,
    );
    let rd = ResourcesDiscoverEvent {
        cwd: "/w",
        reason: "startup",
    };
    let old = json!({"t": "event", "id": 2, "event": value_of(&rd)});
    same(
        &ToHost::Event {
            id: Some(2),
            event: Notification::ResourcesDiscover(rd),
        },
        old,
    );
    for session in [
        SessionEvent::SessionStart {
            reason: "new",
            previous_session_file: Some(None),
        },
        SessionEvent::SessionBeforeSwitch {
            reason: "resume",
            target_session_file: Some("/s/b.jsonl"),
        },
    ] {
        let old = json!({"t": "event", "id": 3, "event": value_of(&session)});
        let event = Notification::Session(&session);
        assert_eq!(event.kind(), session.kind());
        same(&ToHost::Event { id: Some(3), event }, old);
    }
}

#[test]
fn call_results_are_byte_equal() {
    let cases: Vec<(CallResult, Value)> = vec![
        (CallResult::Null, Value::Null),
        (CallAnswer::done().into(), json!({"value": null})),
        (
            CallResult::Answer(CallAnswer::Value {
                value: json!({"cancelled": false}),
            }),
            json!({"value": {"cancelled": false}}),
        ),
        (
            CallAnswer::unsupported("x").into(),
            json!({"error": "x is not supported by this pi build"}),
        ),
        (
            CallResult::Error(CallError {
                error: "early".into(),
            }),
            json!({"error": "early"}),
        ),
        (
            CallResult::Provider(ProviderCallResult { error: None }),
            json!({}),
        ),
        (
            CallResult::Provider(ProviderCallResult {
                error: Some("refused".into()),
            }),
            json!({"error": "refused"}),
        ),
        (
            CallResult::AuthPrompt(AuthPromptAnswer::Cancelled { cancelled: true }),
            json!({"cancelled": true}),
        ),
        (
            CallResult::AuthPrompt(AuthPromptAnswer::Value {
                value: "line".into(),
            }),
            json!({"value": "line"}),
        ),
        (
            CallResult::Transpile(TranspileReply::Code {
                code: "export {}".into(),
            }),
            json!({"code": "export {}"}),
        ),
        (
            CallResult::Transpile(TranspileReply::Error {
                error: "bad".into(),
            }),
            json!({"error": "bad"}),
        ),
    ];
    for (result, old) in cases {
        same(
            &ToHost::CallResult { id: 9, result },
            json!({"t": "call_result", "id": 9, "result": old}),
        );
    }
}
