//! The typed call shapes against the untyped code they replaced: each outgoing shape
//! serializes to the same bytes as the old `json!`, and each params type derives the same
//! values as the old `.get(…)` lookups, for full, empty, wrong-typed and non-object params.

use super::*;
use crate::protocol::rpc::{ContextUsage, SlashCommand};
use crate::session::SessionEntry;
use pi_ai::{Message, Model, ToolResultMessage};
use serde_json::{json, Value};

/// Params every reference derivation below is run on: full, empty, wrong-typed, odd.
fn params_cases() -> Vec<Value> {
    vec![
        json!({
            "name": "n", "content": "hello", "message": {"customType": "c", "content": "x"},
            "options": {"deliverAs": "steer", "triggerTurn": true}, "customType": "ct",
            "data": {"k": 1}, "entryId": "e1", "label": "L", "names": ["read", "bash"],
            "level": "high", "provider": "p", "id": "m", "customInstructions": "ci",
            "context": {"messages": []}, "parentSession": "/s.jsonl", "position": "at",
            "sessionPath": "/t.jsonl"
        }),
        json!({}),
        json!({
            "name": 1, "content": 5, "message": "m", "options": {"deliverAs": 3, "triggerTurn": "yes"},
            "customType": false, "data": null, "entryId": [], "label": 2, "names": ["a", 1, null, "b"],
            "level": {}, "provider": null, "id": 7, "customInstructions": true, "context": 1,
            "options2": 1, "parentSession": 0, "position": "before", "sessionPath": {}
        }),
        json!({"options": ["steer", true], "names": "read", "content": [{"text": "a"}, {"x": 1}, "b", {"text": 2}, {"text": "c"}], "position": null}),
        json!({"options": null, "content": ["t"], "data": [1], "label": null}),
        Value::Null,
        json!(["n", "c"]),
        json!("params"),
    ]
}

/// The old `str_param`.
fn old_str(params: &Value, k: &str) -> Option<String> {
    params.get(k).and_then(Value::as_str).map(str::to_string)
}

#[test]
fn set_session_name_reads_as_before() {
    for p in params_cases() {
        let old = p
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        assert_eq!(SetSessionNameParams::read(&p).name, old, "{p}");
    }
    assert_eq!(SetSessionNameParams::read(&json!({"name": "x"})).name, "x");
    assert_eq!(SetSessionNameParams::read(&json!({})).name, "");
    assert_eq!(SetSessionNameParams::read(&json!({"name": 1})).name, "");
}

#[test]
fn send_user_message_reads_as_before() {
    // The old `text_of` and deliverAs lookup.
    fn old_text(content: &Value) -> String {
        match content {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }
    for p in params_cases() {
        let text = old_text(p.get("content").unwrap_or(&Value::Null));
        let deliver = p
            .pointer("/options/deliverAs")
            .and_then(Value::as_str)
            .unwrap_or("followUp")
            .to_string();
        let t = SendUserMessageParams::read(&p);
        assert_eq!(t.text(), text, "{p}");
        assert_eq!(
            t.options.deliver_as.unwrap_or_else(|| "followUp".into()),
            deliver,
            "{p}"
        );
    }
    let full =
        SendUserMessageParams::read(&json!({"content": "hi", "options": {"deliverAs": "steer"}}));
    assert_eq!(
        (full.text().as_str(), full.options.deliver_as.as_deref()),
        ("hi", Some("steer"))
    );
    let blocks = SendUserMessageParams::read(
        &json!({"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"text": "b"}]}),
    );
    assert_eq!(blocks.text(), "a\nb");
    let empty = SendUserMessageParams::read(&json!({}));
    assert_eq!(
        (empty.text().as_str(), empty.options.deliver_as),
        ("", None)
    );
    let odd = SendUserMessageParams::read(&json!({"content": 3, "options": ["steer"]}));
    assert_eq!((odd.text().as_str(), odd.options.deliver_as), ("", None));
}

#[test]
fn send_message_reads_as_before() {
    for p in params_cases() {
        let message = p.get("message").unwrap_or(&Value::Null).clone();
        let deliver = p
            .pointer("/options/deliverAs")
            .and_then(Value::as_str)
            .map(str::to_string);
        let trigger = p
            .pointer("/options/triggerTurn")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let t = SendMessageParams::read(&p);
        assert_eq!(t.message, message, "{p}");
        assert_eq!(t.options.deliver_as, deliver, "{p}");
        assert_eq!(t.options.trigger_turn, trigger, "{p}");
    }
    let full = SendMessageParams::read(
        &json!({"message": {"customType": "c"}, "options": {"deliverAs": "nextTurn", "triggerTurn": true}}),
    );
    assert_eq!(full.message, json!({"customType": "c"}));
    assert_eq!(
        full.options,
        SendOptions {
            deliver_as: Some("nextTurn".into()),
            trigger_turn: true
        }
    );
    let empty = SendMessageParams::read(&json!({}));
    assert_eq!(
        (empty.message, empty.options),
        (Value::Null, SendOptions::default())
    );
    let odd = SendMessageParams::read(&json!({"options": {"deliverAs": 1, "triggerTurn": 1}}));
    assert_eq!(odd.options, SendOptions::default());
}

#[test]
fn append_entry_reads_as_before() {
    for p in params_cases() {
        let custom_type = p
            .get("customType")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let data = p.get("data").cloned().filter(|d| !d.is_null());
        let t = AppendEntryParams::read(&p);
        assert_eq!((t.custom_type, t.data), (custom_type, data), "{p}");
    }
    let full = AppendEntryParams::read(&json!({"customType": "c", "data": [1]}));
    assert_eq!(
        (full.custom_type.as_str(), full.data),
        ("c", Some(json!([1])))
    );
    assert_eq!(
        AppendEntryParams::read(&json!({})),
        AppendEntryParams::default()
    );
    let odd = AppendEntryParams::read(&json!({"customType": 1, "data": null}));
    assert_eq!((odd.custom_type.as_str(), odd.data), ("", None));
}

#[test]
fn set_label_reads_as_before() {
    for p in params_cases() {
        let id = old_str(&p, "entryId").unwrap_or_default();
        let label = old_str(&p, "label");
        let t = SetLabelParams::read(&p);
        assert_eq!((t.entry_id, t.label), (id, label), "{p}");
    }
    let full = SetLabelParams::read(&json!({"entryId": "e", "label": "l"}));
    assert_eq!(
        (full.entry_id.as_str(), full.label.as_deref()),
        ("e", Some("l"))
    );
    assert_eq!(SetLabelParams::read(&json!({})), SetLabelParams::default());
    let odd = SetLabelParams::read(&json!({"entryId": 1, "label": true}));
    assert_eq!(odd, SetLabelParams::default());
}

#[test]
fn set_active_tools_reads_as_before() {
    for p in params_cases() {
        let names: Vec<String> = p
            .get("names")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(SetActiveToolsParams::read(&p).names, names, "{p}");
    }
    assert_eq!(
        SetActiveToolsParams::read(&json!({"names": ["read", 2, "bash"]})).names,
        ["read", "bash"]
    );
    assert!(SetActiveToolsParams::read(&json!({})).names.is_empty());
    assert!(SetActiveToolsParams::read(&json!({"names": {"0": "read"}}))
        .names
        .is_empty());
}

#[test]
fn set_thinking_level_and_model_read_as_before() {
    for p in params_cases() {
        assert_eq!(
            SetThinkingLevelParams::read(&p).level,
            old_str(&p, "level"),
            "{p}"
        );
        let t = SetModelParams::read(&p);
        assert_eq!(
            t.provider,
            old_str(&p, "provider").unwrap_or_default(),
            "{p}"
        );
        assert_eq!(t.id, old_str(&p, "id").unwrap_or_default(), "{p}");
    }
    assert_eq!(
        SetThinkingLevelParams::read(&json!({"level": "low"}))
            .level
            .as_deref(),
        Some("low")
    );
    assert_eq!(
        SetThinkingLevelParams::read(&json!({"level": 1})).level,
        None
    );
    let m = SetModelParams::read(&json!({"provider": "p", "id": "i"}));
    assert_eq!((m.provider.as_str(), m.id.as_str()), ("p", "i"));
    assert_eq!(
        SetModelParams::read(&json!({"provider": 1})),
        SetModelParams::default()
    );
}

#[test]
fn compact_and_complete_read_as_before() {
    for p in params_cases() {
        assert_eq!(
            CompactParams::read(&p).custom_instructions,
            old_str(&p, "customInstructions"),
            "{p}"
        );
        let t = CompleteParams::read(&p);
        assert_eq!(
            t.provider,
            old_str(&p, "provider").unwrap_or_default(),
            "{p}"
        );
        assert_eq!(t.id, old_str(&p, "id").unwrap_or_default(), "{p}");
        assert_eq!(
            t.context,
            p.get("context").cloned().unwrap_or(Value::Null),
            "{p}"
        );
        assert_eq!(
            t.options,
            p.get("options").cloned().unwrap_or(Value::Null),
            "{p}"
        );
    }
    let c = CompleteParams::read(
        &json!({"provider": "p", "id": "i", "context": {"messages": []}, "options": {"maxTokens": 5}}),
    );
    assert_eq!(
        (c.context, c.options),
        (json!({"messages": []}), json!({"maxTokens": 5}))
    );
    let empty = CompleteParams::read(&json!({}));
    assert_eq!((empty.context, empty.options), (Value::Null, Value::Null));
}

#[test]
fn session_replacements_read_as_before() {
    for p in params_cases() {
        assert_eq!(
            NewSessionParams::read(&p).parent_session,
            old_str(&p, "parentSession"),
            "{p}"
        );
        let f = ForkParams::read(&p);
        assert_eq!(
            f.entry_id,
            old_str(&p, "entryId").unwrap_or_default(),
            "{p}"
        );
        assert_eq!(
            f.at(),
            p.get("position").and_then(Value::as_str) == Some("at"),
            "{p}"
        );
        assert_eq!(
            SwitchSessionParams::read(&p).session_path,
            old_str(&p, "sessionPath").unwrap_or_default(),
            "{p}"
        );
    }
    let f = ForkParams::read(&json!({"entryId": "e", "position": "at"}));
    assert!(f.at() && f.entry_id == "e");
    assert!(!ForkParams::read(&json!({"entryId": "e", "position": "before"})).at());
    assert!(!ForkParams::read(&json!({})).at());
    assert_eq!(
        NewSessionParams::read(&json!({"parentSession": 1})).parent_session,
        None
    );
    assert_eq!(
        SwitchSessionParams::read(&json!({"sessionPath": []})).session_path,
        ""
    );
    let e = json!({"type": "custom", "id": "abcd1234", "customType": "c"});
    assert_eq!(
        SessionSetupParams::read(&json!({"entries": [e, 3]})).entries,
        vec![e, json!(3)]
    );
    assert!(SessionSetupParams::read(&json!({"entries": {}}))
        .entries
        .is_empty());
    assert!(SessionSetupParams::read(&json!(null)).entries.is_empty());
}

/// `serde_json::to_string` of both, asserted equal.
fn same_bytes(typed: &impl serde::Serialize, old: Value) {
    let typed = serde_json::to_string(typed).unwrap();
    assert_eq!(typed, serde_json::to_string(&old).unwrap());
}

#[test]
fn answers_serialize_as_the_old_json() {
    let v = json!({"summary": "s", "tokensBefore": 3});
    same_bytes(
        &CallAnswer::Value { value: v.clone() },
        json!({ "value": v }),
    );
    same_bytes(
        &CallAnswer::Value { value: true },
        json!({ "value": Value::Bool(true) }),
    );
    same_bytes(&CallAnswer::done(), json!({ "value": null }));
    same_bytes(
        &CallAnswer::<Value>::Error {
            error: "boom".into(),
        },
        json!({ "error": "boom".to_string() }),
    );
    let other = "navigateTree";
    same_bytes(
        &CallAnswer::unsupported(other),
        json!({"error": format!("{other} is not supported by this pi build")}),
    );
    for cancelled in [true, false] {
        same_bytes(
            &CallAnswer::Value {
                value: Cancelled { cancelled },
            },
            json!({ "value": json!({ "cancelled": cancelled }) }),
        );
    }
    assert_eq!(CallAnswer::done().to_json(), json!({"value": null}));
}

#[test]
fn tool_infos_serialize_as_the_old_json() {
    let params = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let path = "/ext/a.ts";
    let old_ext = json!({"path": path, "source": "local", "scope": "user", "origin": "top-level"});
    same_bytes(&SourceInfo::extension(path), old_ext.clone());
    let name = "read";
    let old_builtin = json!({"path": format!("builtin:{}", name), "source": "builtin", "scope": "temporary", "origin": "top-level"});
    same_bytes(&SourceInfo::builtin(name), old_builtin.clone());
    for (source, old_source) in [
        (SourceInfo::builtin(name), old_builtin),
        (SourceInfo::extension(path), old_ext),
    ] {
        same_bytes(
            &SessionToolInfo::direct(name.into(), "Read a file".into(), params.clone(), source),
            json!({
                "name": name,
                "description": "Read a file",
                "parameters": params,
                "exposure": "direct",
                "sourceInfo": old_source,
            }),
        );
    }
}

fn entry(id: &str, parent: Option<&str>) -> SessionEntry {
    serde_json::from_value(json!({
        "type": "custom", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:00.000Z",
        "customType": "c", "data": {"k": 1}
    }))
    .unwrap()
}

fn user(text: &str) -> Message {
    serde_json::from_value(json!({"role": "user", "content": text, "timestamp": 1})).unwrap()
}

#[test]
fn session_mirror_serializes_as_the_old_json() {
    let command: SlashCommand = serde_json::from_value(json!({
        "name": "hi", "description": "say hi", "source": "extension",
        "sourceInfo": {"path": "/e.ts", "source": "local", "scope": "user", "origin": "top-level"}
    }))
    .unwrap();
    let usage = ContextUsage {
        tokens: Some(10),
        context_window: 100,
        percent: json!(10),
    };
    let tool = SessionToolInfo::direct(
        "read".into(),
        "d".into(),
        json!({}),
        SourceInfo::builtin("read"),
    );
    let old_tool = json!({"name": "read", "description": "d", "parameters": {}, "exposure": "direct", "sourceInfo": {"path": "builtin:read", "source": "builtin", "scope": "temporary", "origin": "top-level"}});
    // With every optional value, then with none.
    let cases = [
        (
            Some("/s/a.jsonl".to_string()),
            Some("name".to_string()),
            Some("/s".to_string()),
            Some("e2".to_string()),
            Some("e1".to_string()),
            Some(Model::unknown()),
            Some(usage),
        ),
        (None, None, None, None, None, None, None),
    ];
    for (file, name, dir, leaf, from, model, usage) in cases {
        let entries = vec![entry("e1", None), entry("e2", Some("e1"))];
        let header = json!({"type": "session", "version": 3, "id": "sid", "cwd": "/w"});
        let from_value = from.clone().map(Value::String).unwrap_or(Value::Null);
        let old = json!({
            "cwd": "/w",
            "sessionFile": file,
            "sessionId": "sid",
            "sessionName": name,
            "sessionDir": dir,
            "header": header,
            "leafId": leaf,
            "entries": entries,
            "entriesFrom": from_value,
            "model": model,
            "availableModels": vec![Model::unknown()],
            "thinkingLevel": "medium",
            "activeTools": vec!["read".to_string()],
            "allTools": Value::Array(vec![old_tool.clone()]),
            "isIdle": true,
            "hasPendingMessages": false,
            "contextUsage": usage,
            "systemPrompt": "sys",
            "commands": vec![command.clone()],
        });
        let typed = SessionMirror {
            cwd: "/w".into(),
            session_file: file,
            session_id: "sid".into(),
            session_name: name,
            session_dir: dir,
            header,
            leaf_id: leaf,
            entries,
            entries_from: from,
            model,
            available_models: vec![Model::unknown()],
            thinking_level: "medium".into(),
            active_tools: vec!["read".into()],
            all_tools: vec![tool.clone()],
            is_idle: true,
            has_pending_messages: false,
            context_usage: usage,
            system_prompt: "sys".into(),
            commands: vec![command.clone()],
        };
        same_bytes(&typed, old);
    }
}

/// The old `boundary_context` `json!`.
fn old_context(
    entries: &[(SessionEntry, Vec<Message>)],
    messages: &[Message],
    pending: &[Message],
    can: bool,
) -> Value {
    let entries: Vec<Value> = entries
        .iter()
        .map(|(e, m)| json!({"sourceEntry": e, "messages": m}))
        .collect();
    json!({
        "contextEntries": entries,
        "contextMessages": messages,
        "llmMessages": messages,
        "pendingMessages": pending,
        "canContinue": can,
    })
}

fn context(
    entries: &[(SessionEntry, Vec<Message>)],
    messages: &[Message],
    pending: &[Message],
    can: bool,
) -> BoundaryContext {
    BoundaryContext {
        context_entries: entries
            .iter()
            .map(|(e, m)| ContextEntry {
                source_entry: e.clone(),
                messages: m.clone(),
            })
            .collect(),
        context_messages: messages.to_vec(),
        llm_messages: messages.to_vec(),
        pending_messages: pending.to_vec(),
        can_continue: can,
    }
}

#[test]
fn boundary_events_serialize_as_the_old_json() {
    let assistant: Message = serde_json::from_value(json!({
        "role": "assistant", "content": [{"type": "text", "text": "ok"}], "api": "a", "provider": "p",
        "model": "m", "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
        "stopReason": "toolUse", "timestamp": 2
    }))
    .unwrap();
    let result: ToolResultMessage = serde_json::from_value(json!({
        "toolCallId": "c1", "toolName": "bash", "content": [{"type": "text", "text": "out"}],
        "isError": false, "timestamp": 3
    }))
    .unwrap();
    let filled = (
        vec![
            (entry("e1", None), vec![user("hi")]),
            (entry("e2", Some("e1")), vec![]),
        ],
        vec![user("hi"), assistant.clone()],
        vec![user("later")],
        true,
    );
    let empty = (vec![], vec![], vec![], false);
    for (entries, messages, pending, can) in [filled, empty] {
        same_bytes(
            &context(&entries, &messages, &pending, can),
            old_context(&entries, &messages, &pending, can),
        );
        for (results, entry_id, result_ids) in [
            (
                vec![result.clone()],
                Some("e3".to_string()),
                vec!["e4".to_string()],
            ),
            (vec![], None, vec![]),
        ] {
            // The old `turn_end` map, in upstream's member order.
            let mut m = serde_json::Map::new();
            m.insert("type".into(), "turn_end".into());
            m.insert("turnIndex".into(), 2u64.into());
            m.insert("message".into(), json!(&assistant));
            m.insert("toolResults".into(), json!(results.as_slice()));
            m.insert("messageEntryId".into(), json!(entry_id));
            m.insert("toolResultEntryIds".into(), json!(result_ids));
            m.insert("outcome".into(), "completed".into());
            m.insert("entries".into(), json!([]));
            m.insert("continue".into(), false.into());
            m.insert(
                "context".into(),
                old_context(&entries, &messages, &pending, can),
            );
            let typed = TurnEndEvent {
                turn_index: 2,
                message: &assistant,
                tool_results: &results,
                message_entry_id: entry_id,
                tool_result_entry_ids: result_ids,
                outcome: "completed",
                entries: vec![],
                continue_run: false,
                context: context(&entries, &messages, &pending, can),
            };
            same_bytes(&typed, Value::Object(m));
        }
        for outcome in ["completed", "aborted"] {
            let mut m = serde_json::Map::new();
            m.insert("type".into(), "agent_before_settle".into());
            m.insert("outcome".into(), outcome.into());
            m.insert("entries".into(), json!([]));
            m.insert("continue".into(), false.into());
            m.insert(
                "context".into(),
                old_context(&entries, &messages, &pending, can),
            );
            let typed = BeforeSettleEvent {
                outcome,
                entries: vec![],
                continue_run: false,
                context: context(&entries, &messages, &pending, can),
            };
            same_bytes(&typed, Value::Object(m));
        }
    }
}

#[test]
fn boundary_drafts_read_as_upstream_allows() {
    let d: BoundaryDraft =
        serde_json::from_value(json!({"type": "custom", "customType": "c"})).unwrap();
    assert!(matches!(d, BoundaryDraft::Custom { custom_type, data: None } if custom_type == "c"));
    let d: BoundaryDraft = serde_json::from_value(
        json!({"type": "context_edit", "targetId": "e1", "replacement": null}),
    )
    .unwrap();
    assert!(
        matches!(d, BoundaryDraft::ContextEdit { target_id, replacement: None } if target_id == "e1")
    );
    let d: BoundaryDraft =
        serde_json::from_value(json!({"type": "compaction", "summary": "s"})).unwrap();
    assert!(matches!(
        d,
        BoundaryDraft::Compaction {
            tokens_before: 0,
            first_kept_entry_id: None,
            ..
        }
    ));
    let d: BoundaryDraft = serde_json::from_value(
        json!({"type": "custom_message", "customType": "c", "content": "x"}),
    )
    .unwrap();
    assert!(matches!(d, BoundaryDraft::CustomMessage(c) if c.custom_type == "c" && !c.display));
    let e = serde_json::from_value::<BoundaryDraft>(json!({"type": "message"})).unwrap_err();
    assert!(
        e.to_string().starts_with("unknown variant `message`"),
        "{e}"
    );
}

#[test]
fn message_role_reads_as_before() {
    for m in [
        json!({"role": "custom"}),
        json!({"role": "user"}),
        json!({"role": 1}),
        json!({}),
        json!({"role": null, "x": 1}),
    ] {
        let map = m.as_object().unwrap();
        let old = map.get("role").and_then(Value::as_str) == Some("custom");
        assert_eq!(MessageRole::is_custom(map), old, "{m}");
    }
}
