//! The stdout writer (issue 15): records queued on a runtime worker go out when it parks, so a
//! slow stream still shows each event at once; lines stay whole on SIGTERM; a fast stream keeps
//! every event in order.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::time::Duration;

fn deltas(agent: &RpcAgent) -> Vec<String> {
    agent
        .events()
        .iter()
        .filter(|v| v["assistantMessageEvent"]["type"] == "text_delta")
        .map(|v| {
            v["assistantMessageEvent"]["delta"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// A delta followed by a 400 ms pause must be on stdout before the next delta is sent: the
/// worker that queued it parks while waiting for the socket, and writes it then (a writer that
/// only flushed when the next record came would show both at once).
#[test]
fn a_slow_stream_shows_each_delta_before_the_next_arrives() {
    let (_fake, root) = setup(
        Script::new([Turn::text("abcdefgh").chunk_size(4).delay_ms(400)]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "go"}));
    agent.wait_for(
        |v| v["assistantMessageEvent"]["type"] == "text_delta",
        LIVENESS,
    );
    assert_eq!(deltas(&agent), vec!["abcd"], "{}", agent.dump());
    agent.wait_event("agent_settled");
    assert_eq!(deltas(&agent), vec!["abcd", "efgh"], "{}", agent.dump());
}

/// 20 000 deltas as fast as the fake server sends them: every one arrives, in order, each line
/// whole (the harness decodes every line), and `agent_settled` is last.
#[test]
fn a_fast_stream_keeps_every_delta_in_order() {
    let text: String = (0..20_000).map(|i| format!("{:04}", i % 10_000)).collect();
    let (_fake, root) = setup(
        Script::new([Turn::text(&text).chunk_size(4)]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    let got = deltas(&agent);
    assert_eq!(got.len(), 20_000);
    assert_eq!(got.concat(), text);
    let events = agent.events();
    assert_eq!(kind(events.last().unwrap()), "agent_settled");
}

/// SIGTERM in the middle of a fast stream: exit 143, and stdout holds only whole lines.
#[test]
fn sigterm_mid_stream_leaves_only_whole_lines() {
    let text = "abcd".repeat(50_000);
    let (_fake, root) = setup(
        Script::new([Turn::text(&text).chunk_size(4)]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "go"}));
    agent.wait_for(
        |v: &Value| v["assistantMessageEvent"]["type"] == "text_delta",
        LIVENESS,
    );
    agent.signal_group(libc::SIGTERM);
    let status = agent.wait_exit(LIVENESS).expect("pi exits on SIGTERM");
    assert_eq!(status.code(), Some(143), "{}", agent.dump());
    std::thread::sleep(Duration::from_millis(100));
    assert!(agent.trailing_fragment().is_none(), "{}", agent.dump());
}
