//! Messages and content blocks keep unknown keys (spec messages-and-models.md §2–§4):
//! they parse into `extra`, serialize after the known keys in wire order, and the `role` /
//! `type` tags are never captured or written twice.

use pi_ai::{Content, Message};
use serde_json::{json, Value};

fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) -> String {
    let parsed: T = serde_json::from_value(v.clone()).expect("parses");
    serde_json::to_string(&parsed).expect("serializes")
}

#[test]
fn content_blocks_keep_unknown_keys_after_known_ones() {
    for block in [
        json!({"type": "text", "text": "hi", "textSignature": "s", "future": {"x": 1}}),
        json!({"type": "thinking", "thinking": "t", "redacted": true, "a": 1, "b": [null]}),
        json!({"type": "image", "data": "AAAA", "mimeType": "image/png", "alt": "a picture"}),
        json!({"type": "toolCall", "id": "c", "name": "ls", "arguments": {"p": 1},
               "thoughtSignature": "g", "future": false}),
    ] {
        assert_eq!(round_trip::<Content>(&block), block.to_string());
    }
    let parsed: Content =
        serde_json::from_value(json!({"type": "text", "text": "hi", "k": 2})).unwrap();
    let Content::Text(t) = &parsed else {
        panic!("text block expected");
    };
    assert_eq!(t.extra.get("k"), Some(&json!(2)));
    assert!(!t.extra.contains_key("type"));
}

#[test]
fn messages_keep_unknown_keys_after_known_ones() {
    for message in [
        json!({"role": "user", "content": [{"type": "text", "text": "q", "blockExtra": 1}],
               "timestamp": 5, "msgExtra": {"deep": [1, 2]}}),
        json!({"role": "user", "content": "plain", "timestamp": 5, "x": null}),
        json!({"role": "assistant", "content": [], "api": "a", "provider": "p", "model": "m",
               "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0,
                         "totalTokens": 3, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                                    "cacheWrite": 0, "total": 0}},
               "stopReason": "stop", "timestamp": 1, "durationMs": 3, "later": "yes"}),
        json!({"role": "toolResult", "toolCallId": "c", "toolName": "ls",
               "content": [{"type": "image", "data": "AA", "mimeType": "image/png", "z": 0}],
               "isError": false, "timestamp": 2, "y": 1}),
        json!({"role": "bashExecution", "command": "ls", "output": "", "exitCode": 0,
               "cancelled": false, "truncated": false, "timestamp": 3, "w": 1}),
        json!({"role": "system", "content": "", "timestamp": 4, "v": 1}),
    ] {
        assert_eq!(round_trip::<Message>(&message), message.to_string());
    }
    let m: Message =
        serde_json::from_value(json!({"role": "user", "content": "x", "timestamp": 1, "k": 1}))
            .unwrap();
    let Message::User(u) = &m else {
        panic!("user message expected");
    };
    assert_eq!(u.extra.len(), 1, "only the unknown key, not the role tag");
}
