//! RPC mode with tool calls: the bash tool really runs in the cwd, its result reaches the
//! model, and commands are answered while a tool is running.

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};

fn position(recs: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    recs.iter()
        .position(pred)
        .unwrap_or_else(|| panic!("record not found in {} records", recs.len()))
}

#[test]
fn bash_tool_call_openai() {
    let cmd = "echo hi; pwd; touch made-by-tool.txt";
    let (fake, root) = setup(
        Script::new([
            Turn::text("I'll run it.").with_tool_call("bash", json!({"command": cmd})),
            Turn::text("The command printed: hi"),
        ]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "Run echo hi"}));
    let (end, _) = agent.wait_from(0, LIVENESS, |v| kind(v) == "agent_settled");
    let recs: Vec<Value> = agent.events()[..=end].to_vec();

    let first_end = position(&recs, |v| {
        kind(v) == "message_end" && v["message"]["role"] == "assistant"
    });
    let am = &recs[first_end]["message"];
    assert_eq!(am["stopReason"], "toolUse", "{}", agent.dump());
    assert_eq!(
        am["content"],
        json!([{"type": "text", "text": "I'll run it."},
               {"type": "toolCall", "id": "call_fake_1_0", "name": "bash", "arguments": {"command": cmd}}])
    );
    let tc_start = position(&recs, |v| {
        v["assistantMessageEvent"]["type"] == "toolcall_start"
    });
    assert_eq!(
        recs[tc_start]["assistantMessageEvent"]["id"],
        "call_fake_1_0"
    );
    assert_eq!(recs[tc_start]["assistantMessageEvent"]["toolName"], "bash");

    let ts = position(&recs, |v| kind(v) == "tool_execution_start");
    assert_eq!(recs[ts]["toolCallId"], "call_fake_1_0");
    assert_eq!(recs[ts]["toolName"], "bash");
    assert_eq!(recs[ts]["args"], json!({"command": cmd}));
    let te = position(&recs, |v| kind(v) == "tool_execution_end");
    assert_eq!(recs[te]["isError"], false, "{}", recs[te]);
    let out = recs[te]["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let cwd = root.cwd.to_string_lossy().into_owned();
    assert_eq!(out, format!("hi\n{cwd}\n"));
    assert!(
        root.cwd.join("made-by-tool.txt").is_file(),
        "the tool ran in the agent's cwd"
    );

    let tr_start = position(&recs, |v| {
        kind(v) == "message_start" && v["message"]["role"] == "toolResult"
    });
    let tr_end = position(&recs, |v| {
        kind(v) == "message_end" && v["message"]["role"] == "toolResult"
    });
    assert_eq!(recs[tr_end]["message"]["toolCallId"], "call_fake_1_0");
    assert_eq!(recs[tr_end]["message"]["isError"], false);
    let turn_end = position(&recs, |v| kind(v) == "turn_end");
    assert_eq!(recs[turn_end]["toolResults"].as_array().unwrap().len(), 1);
    assert_eq!(
        recs[turn_end]["toolResults"][0]["toolCallId"],
        "call_fake_1_0"
    );
    let second_turn = recs
        .iter()
        .enumerate()
        .filter(|(_, v)| kind(v) == "turn_start")
        .nth(1)
        .expect("second turn")
        .0;
    assert!(
        first_end < ts
            && ts < te
            && te < tr_start
            && tr_start < tr_end
            && tr_end < turn_end
            && turn_end < second_turn
    );
    let last_end = recs
        .iter()
        .rposition(|v| kind(v) == "message_end" && v["message"]["role"] == "assistant")
        .unwrap();
    assert!(last_end > second_turn);
    assert_eq!(
        recs[last_end]["message"]["content"][0]["text"],
        "The command printed: hi"
    );
    assert_eq!(recs[last_end]["message"]["stopReason"], "stop");
    let roles: Vec<&str> = recs[end - 1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "toolResult", "assistant"]
    );

    // The second request carries the assistant tool call and the tool result.
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let asst = msgs
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("assistant message in 2nd request");
    assert_eq!(asst["tool_calls"][0]["id"], "call_fake_1_0");
    assert_eq!(asst["tool_calls"][0]["function"]["name"], "bash");
    let args: Value = serde_json::from_str(
        asst["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args, json!({"command": cmd}));
    let tool = msgs.last().unwrap();
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_fake_1_0");
    assert!(
        tool["content"].to_string().contains(&format!("hi\\n{cwd}")),
        "{tool}"
    );
}

#[test]
fn bash_tool_call_anthropic() {
    let (fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "echo hi"})),
            Turn::text("done"),
        ]),
        "fake-anthropic/fake-claude-haiku",
    );
    let mut agent = root.spawn();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "Run echo hi"}));
    agent.wait_event("agent_settled");
    let recs = agent.events();
    let te = &recs[position(&recs, |v| kind(v) == "tool_execution_end")];
    assert_eq!(te["toolCallId"], "toolu_fake_1_0");
    assert_eq!(te["result"]["content"][0]["text"], "hi\n");
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 2, "{}", agent.dump());
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let asst = msgs
        .iter()
        .find(|m| m["role"] == "assistant")
        .expect("assistant turn");
    let tool_use = asst["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .expect("tool_use block");
    assert_eq!(tool_use["id"], "toolu_fake_1_0");
    assert_eq!(tool_use["input"], json!({"command": "echo hi"}));
    let last = msgs.last().unwrap();
    assert_eq!(last["role"], "user");
    let result = last["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_result")
        .expect("tool_result");
    assert_eq!(result["tool_use_id"], "toolu_fake_1_0");
    assert!(result["content"].to_string().contains("hi\\n"), "{result}");
}

#[test]
fn get_state_is_answered_while_a_tool_runs() {
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call("bash", json!({"command": "sleep 3; echo done"})),
            Turn::text("finished"),
        ]),
        DEFAULT_MODEL,
    );
    let mut agent = root.spawn();
    agent.send(json!({"id": "p1", "type": "prompt", "message": "sleep please"}));
    agent.wait_event("tool_execution_start");
    agent.send(json!({"id": "g1", "type": "get_state"}));
    let (gi, g) = agent.wait_from(0, LIVENESS, |v| v["id"] == "g1");
    assert_eq!(g["success"], true);
    assert_eq!(g["data"]["isStreaming"], true, "{g}");
    let (te, end) = agent.wait_from(0, LIVENESS, |v| kind(v) == "tool_execution_end");
    assert!(
        gi < te,
        "get_state must be answered before the running tool finishes\n{}",
        agent.dump()
    );
    assert_eq!(end["result"]["content"][0]["text"], "done\n");
    agent.wait_from(te, LIVENESS, |v| kind(v) == "agent_settled");
}
