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

/// The session lifecycle events as `AgentSessionRuntime` and `main` built them before, with
/// the typed event each became.
#[test]
fn session_lifecycle_events_are_byte_equal() {
    // `main::extensions_started` / `extensions_stopping`, `reload_extensions`.
    for reason in ["startup", "reload"] {
        same(
            &value_of(&SessionEvent::SessionStart {
                reason,
                previous_session_file: None,
            }),
            &json!({"type": "session_start", "reason": reason}),
        );
    }
    for reason in ["quit", "reload"] {
        same(
            &value_of(&SessionEvent::SessionShutdown {
                reason,
                target_session_file: None,
            }),
            &json!({"type": "session_shutdown", "reason": reason}),
        );
    }
    // `replace`: the file is `null` when the session has none.
    for reason in ["new", "resume", "fork"] {
        for file in [None, Some("/tmp/s \"1\".jsonl".to_string())] {
            let target = file.clone();
            same(
                &value_of(&SessionEvent::SessionShutdown {
                    reason,
                    target_session_file: Some(file.as_deref()),
                }),
                &json!({
                    "type": "session_shutdown", "reason": reason, "targetSessionFile": target,
                }),
            );
            let previous = file.clone();
            same(
                &value_of(&SessionEvent::SessionStart {
                    reason,
                    previous_session_file: Some(file.as_deref()),
                }),
                &json!({
                    "type": "session_start", "reason": reason, "previousSessionFile": previous,
                }),
            );
        }
    }
    // `clone_through`, `fork`, `new_session`, `switch_session`.
    let entry_id = "a1b2c3d4";
    for position in ["at", "before"] {
        same(
            &value_of(&SessionEvent::SessionBeforeFork { entry_id, position }),
            &json!({"type": "session_before_fork", "entryId": entry_id, "position": position}),
        );
    }
    same(
        &value_of(&SessionEvent::SessionBeforeSwitch {
            reason: "new",
            target_session_file: None,
        }),
        &json!({"type": "session_before_switch", "reason": "new"}),
    );
    let path = "/work/sessions/x.jsonl";
    same(
        &value_of(&SessionEvent::SessionBeforeSwitch {
            reason: "resume",
            target_session_file: Some(path),
        }),
        &json!({"type": "session_before_switch", "reason": "resume", "targetSessionFile": path}),
    );
}

/// `session_before_compact` as `compaction_from_extensions` built it before.
#[allow(clippy::too_many_arguments)]
fn old_before_compact(
    first_kept_entry_id: &str,
    messages_to_summarize: &[pi_ai::Message],
    turn_prefix_messages: &[pi_ai::Message],
    is_split_turn: bool,
    tokens_before: u64,
    previous_summary: &Option<String>,
    files: [&std::collections::BTreeSet<String>; 3],
    settings: Option<crate::config::CompactionSettings>,
    custom: Option<&str>,
    reason: crate::protocol::rpc::CompactionReason,
    will_retry: bool,
) -> Value {
    let settings = settings
        .map(|s| {
            serde_json::json!({
                "enabled": s.enabled,
                "reserveTokens": s.reserve_tokens,
                "keepRecentTokens": s.keep_recent_tokens,
            })
        })
        .unwrap_or(Value::Null);
    serde_json::json!({
        "type": "session_before_compact",
        "preparation": {
            "firstKeptEntryId": first_kept_entry_id,
            "messagesToSummarize": messages_to_summarize,
            "turnPrefixMessages": turn_prefix_messages,
            "isSplitTurn": is_split_turn,
            "tokensBefore": tokens_before,
            "previousSummary": previous_summary,
            "fileOps": {
                "read": files[0],
                "written": files[1],
                "edited": files[2],
            },
            "settings": settings,
        },
        "customInstructions": custom,
        "reason": reason,
        "willRetry": will_retry,
    })
}

fn messages() -> Vec<pi_ai::Message> {
    serde_json::from_value(json!([
        {"role": "user", "content": [{"type": "text", "text": "read a.rs"}], "timestamp": 1},
        {"role": "user", "content": "plain \u{e9}", "timestamp": 2},
    ]))
    .unwrap()
}

#[test]
fn session_before_compact_event_is_byte_equal() {
    use crate::config::CompactionSettings;
    use crate::protocol::rpc::CompactionReason;
    use std::collections::BTreeSet;
    let msgs = messages();
    let read: BTreeSet<String> = ["b.rs", "a.rs"].map(String::from).into();
    let written: BTreeSet<String> = ["c.rs".to_string()].into();
    let edited = BTreeSet::new();
    let settings = CompactionSettings {
        enabled: false,
        reserve_tokens: 16384,
        keep_recent_tokens: 20000,
    };
    for (split, prev, settings, custom, reason, retry) in [
        (false, None, None, None, CompactionReason::Manual, false),
        (
            true,
            Some("earlier".to_string()),
            Some(settings),
            Some("focus on \"tests\""),
            CompactionReason::Overflow,
            true,
        ),
        (
            false,
            None,
            Some(settings),
            None,
            CompactionReason::Threshold,
            false,
        ),
    ] {
        let prefix = if split { &msgs[1..] } else { &[][..] };
        let new = value_of(&SessionEvent::SessionBeforeCompact {
            preparation: CompactionPreparation {
                first_kept_entry_id: "e5",
                messages_to_summarize: &msgs,
                turn_prefix_messages: prefix,
                is_split_turn: split,
                tokens_before: 123_456,
                previous_summary: prev.as_deref(),
                file_ops: CompactionFileOps {
                    read: &read,
                    written: &written,
                    edited: &edited,
                },
                settings: settings.map(|s| CompactionSettingsView {
                    enabled: s.enabled,
                    reserve_tokens: s.reserve_tokens,
                    keep_recent_tokens: s.keep_recent_tokens,
                }),
            },
            custom_instructions: custom,
            reason,
            will_retry: retry,
        });
        let old = old_before_compact(
            "e5",
            &msgs,
            prefix,
            split,
            123_456,
            &prev,
            [&read, &written, &edited],
            settings,
            custom,
            reason,
            retry,
        );
        same(&new, &old);
    }
}

#[test]
fn session_compact_events_are_byte_equal() {
    use crate::protocol::rpc::CompactionReason;
    let mut store = crate::session::SessionManager::in_memory(std::path::Path::new("/tmp"));
    let usage: pi_ai::Usage = serde_json::from_value(json!({
        "input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
        "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3},
    }))
    .unwrap();
    let entry = store
        .append_compaction(
            "the summary",
            Some("e1"),
            4242,
            Some(json!({"readFiles": ["a.rs"], "modifiedFiles": []})),
            Some(true),
            Some(usage),
        )
        .unwrap()
        .clone();
    for (from_extension, reason, will_retry) in [
        (true, CompactionReason::Manual, false),
        (false, CompactionReason::Overflow, true),
    ] {
        // `compact_with` before: the entry went through `to_value` under the store lock.
        let old_entry = serde_json::to_value(&entry).unwrap_or(Value::Null);
        let old = serde_json::json!({
            "type": "session_compact",
            "compactionEntry": old_entry,
            "fromExtension": from_extension,
            "reason": reason,
            "willRetry": will_retry,
        });
        let new = value_of(&SessionEvent::SessionCompact {
            compaction_entry: &entry,
            from_extension,
            reason,
            will_retry,
        });
        same(&new, &old);
    }
    // `compaction_failed` before.
    for (error_message, aborted, will_retry, from_extension) in [
        (None, true, false, false),
        (None, true, false, true),
        (
            Some("Summarization failed: 500 \"x\"".to_string()),
            false,
            true,
            false,
        ),
    ] {
        let reason = CompactionReason::Threshold;
        let mut old = serde_json::json!({
            "type": "session_compact_failed",
            "reason": reason,
            "aborted": aborted,
            "willRetry": will_retry,
            "fromExtension": from_extension,
        });
        if let Some(m) = error_message.clone() {
            old["errorMessage"] = Value::String(m);
        }
        let new = value_of(&SessionEvent::SessionCompactFailed {
            reason,
            aborted,
            will_retry,
            from_extension,
            error_message: error_message.as_deref(),
        });
        same(&new, &old);
    }
}

/// What `compaction_from_extensions` read from a reply before: `Err(())` = cancelled; `Ok(
/// None)` = pi summarizes; else `(summary, firstKeptEntryId, tokensBefore, usage, details)`
/// with the preparation's `e0` / `100` as defaults.
type OldCompaction = Option<(String, String, u64, Option<pi_ai::Usage>, Option<Value>)>;

fn old_compaction_reply(r: &Value) -> Result<OldCompaction, ()> {
    if r.get("cancel") == Some(&Value::Bool(true)) {
        return Err(());
    }
    let Some(c) = r.get("compaction").filter(|c| c.is_object()) else {
        return Ok(None);
    };
    let Some(summary) = c.get("summary").and_then(Value::as_str) else {
        return Ok(None);
    };
    let first_kept = c
        .get("firstKeptEntryId")
        .and_then(Value::as_str)
        .unwrap_or("e0")
        .to_string();
    let tokens_before = c.get("tokensBefore").and_then(Value::as_u64).unwrap_or(100);
    let usage = c
        .get("usage")
        .cloned()
        .and_then(|u| serde_json::from_value::<pi_ai::Usage>(u).ok());
    let details = c.get("details").cloned().filter(|d| !d.is_null());
    Ok(Some((
        summary.to_string(),
        first_kept,
        tokens_before,
        usage,
        details,
    )))
}

fn new_compaction_reply(r: &Value) -> Result<OldCompaction, ()> {
    let r = SessionEventReply::from_value(r);
    if r.cancel {
        return Err(());
    }
    let Some(c) = r.compaction else {
        return Ok(None);
    };
    let Some(summary) = c.summary else {
        return Ok(None);
    };
    Ok(Some((
        summary,
        c.first_kept_entry_id.unwrap_or_else(|| "e0".into()),
        c.tokens_before.unwrap_or(100),
        c.usage,
        c.details,
    )))
}

#[test]
fn session_event_replies_read_as_before() {
    let usage = json!({
        "input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4, "totalTokens": 10,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    });
    let replies = [
        json!(null),
        json!({}),
        json!(true),
        json!("cancel"),
        json!([true]),
        json!({"cancel": true}),
        json!({"cancel": false}),
        json!({"cancel": "true"}),
        json!({"cancel": 1}),
        json!({"cancel": null}),
        json!({"cancel": true, "compaction": {"summary": "s"}}),
        json!({"compaction": {"summary": "s"}}),
        json!({"compaction": {"summary": "s", "firstKeptEntryId": "e9", "tokensBefore": 7,
            "usage": usage, "details": {"k": [1]}}}),
        json!({"compaction": {"summary": "s", "firstKeptEntryId": 9, "tokensBefore": -7,
            "usage": {"input": 1}, "details": null}}),
        json!({"compaction": {"summary": "s", "tokensBefore": 7.5, "details": 0}}),
        json!({"compaction": {"summary": "s", "tokensBefore": "7", "usage": null, "details": []}}),
        json!({"compaction": {"summary": 3}}),
        json!({"compaction": {"summary": null}}),
        json!({"compaction": {}}),
        json!({"compaction": ["s", "e9", 7]}),
        json!({"compaction": "s"}),
        json!({"compaction": null}),
        json!({"compaction": {"summary": "", "extra": true}}),
    ];
    for r in &replies {
        assert_eq!(
            new_compaction_reply(r),
            old_compaction_reply(r),
            "reply {r}"
        );
    }
    // The whole reply reads whole (not everything as absent).
    let full = new_compaction_reply(&replies[12]).unwrap().unwrap();
    assert_eq!(
        (full.1.as_str(), full.2, full.3.map(|u| u.total_tokens)),
        ("e9", 7, Some(10))
    );
    // `cancelled_by_extensions` before: `reply.get("cancel") == Some(&Value::Bool(true))`.
    for r in &replies {
        assert_eq!(
            SessionEventReply::from_value(r).cancel,
            r.get("cancel") == Some(&Value::Bool(true)),
            "reply {r}"
        );
    }
}

/// The virtual model state entry data as `route_virtual_model` wrote and read it before.
#[test]
fn virtual_model_state_is_byte_equal_and_reads_as_before() {
    let (provider, id) = ("router", "auto");
    for state in [
        json!({"turns": 3, "last": "a/b"}),
        json!(null),
        json!([1, "x"]),
    ] {
        let old = serde_json::json!({
            "provider": provider,
            "modelId": id,
            "state": state,
        });
        let new = VirtualModelState {
            provider: provider.into(),
            model_id: id.into(),
            state: state.clone(),
        }
        .to_value();
        same(&new, &old);
    }
    let old_read = |d: &Value| -> Option<Value> {
        (d.get("provider").and_then(Value::as_str) == Some(provider)
            && d.get("modelId").and_then(Value::as_str) == Some(id))
        .then(|| d.get("state").cloned().unwrap_or(Value::Null))
    };
    let new_read = |d: &Value| -> Option<Value> {
        VirtualModelState::from_value(d)
            .filter(|s| s.provider == provider && s.model_id == id)
            .map(|s| s.state)
    };
    for d in [
        json!({"provider": "router", "modelId": "auto", "state": {"n": 1}}),
        json!({"provider": "router", "modelId": "auto", "state": null}),
        json!({"provider": "router", "modelId": "auto"}),
        json!({"provider": "router", "modelId": "auto", "state": 5, "extra": true}),
        json!({"provider": "router", "modelId": "other", "state": 1}),
        json!({"provider": "other", "modelId": "auto", "state": 1}),
        json!({"provider": "router", "modelId": 7, "state": 1}),
        json!({"provider": null, "modelId": "auto", "state": 1}),
        json!({"modelId": "auto", "state": 1}),
        json!({}),
        json!(["router", "auto", 1]),
        json!("router"),
        json!(null),
    ] {
        assert_eq!(new_read(&d), old_read(&d), "data {d}");
    }
}
