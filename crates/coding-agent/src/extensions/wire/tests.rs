use super::*;
use serde_json::json;

#[test]
fn host_events_serialize_as_host_mjs_reads_them() {
    let msg = ToHost::HostEvent {
        id: Some(3),
        event: HostEvent::BeforeProviderHeaders {
            headers: Headers(vec![("b".into(), "1".into()), ("a".into(), "2".into())]),
        },
    };
    let line = serde_json::to_string(&msg).unwrap();
    assert_eq!(
        line,
        r#"{"t":"event","id":3,"event":{"type":"before_provider_headers","headers":{"b":"1","a":"2"}}}"#
    );
    let bash = ToHost::UserBash {
        id: 1,
        event: UserBashEvent {
            command: "ls".into(),
            exclude_from_context: true,
            cwd: "/w".into(),
        },
        command: "ls".into(),
    };
    assert_eq!(
        serde_json::to_value(&bash).unwrap()["event"],
        json!({"type": "user_bash", "command": "ls", "excludeFromContext": true, "cwd": "/w"})
    );
}

/// `abort` of a request id, as host.mjs reads it (`msg.t === "abort"`, `aborters.get(msg.id)`):
/// also what fires a `session_before_compact` handler's `event.signal`.
#[test]
fn abort_serializes_as_host_mjs_reads_it() {
    let line = serde_json::to_string(&ToHost::Abort { id: 42 }).unwrap();
    assert_eq!(line, r#"{"t":"abort","id":42}"#);
}

#[test]
fn replies_tolerate_odd_fields_and_keep_presence() {
    let r = PayloadReply::deserialize(&json!({"payload": null})).unwrap();
    assert_eq!(r.payload, Some(Value::Null));
    assert_eq!(PayloadReply::deserialize(&json!({})).unwrap().payload, None);
    let b = BoundaryReply::deserialize(&json!({"entries": 3, "continue": "yes", "x": 1})).unwrap();
    assert!(b.entries.is_empty() && !b.continue_run);
    let t = ToolReply::deserialize(&json!({"content": "bad", "isError": 1})).unwrap();
    assert!(t.content.is_empty() && t.is_error.is_none());
    let m = RefreshModelsReply::deserialize(&json!({"models": null})).unwrap();
    assert!(m.models.is_none());
    let m = RefreshModelsReply::deserialize(&json!({"models": [1]})).unwrap();
    assert!(matches!(m.models, Some(Err(_))));
    assert!(CustomMessageDraft::from_value(&json!([1, 2])).is_none());
}
