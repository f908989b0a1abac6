//! The last extension items of issue 27, each compared with upstream 1.6 on the fake server:
//! what an `agent_settled` handler sends reaches the client before `agent_settled`, and what
//! it starts runs after it; `systemPromptOptions` edits in `before_agent_start`.

use crate::common::*;
use crate::extension_events::system_of;
use pi_fakellm::{Script, Turn};
use serde_json::Value;

/// The event sequence as upstream's transcripts are compared here: `type` (and the role of a
/// message, the text of a notify), without `message_update` deltas.
fn sequence(agent: &RpcAgent) -> Vec<String> {
    agent
        .events()
        .into_iter()
        .filter(|v| kind(v) != "message_update")
        .map(|v| match kind(&v) {
            "message_start" | "message_end" => {
                let m = &v["message"];
                let role = m["role"].as_str().unwrap_or_default();
                match m["customType"].as_str() {
                    Some(c) => format!("{} {role}:{c}", kind(&v)),
                    None => format!("{} {role}", kind(&v)),
                }
            }
            "extension_ui_request" => {
                format!("notify {}", v["message"].as_str().unwrap_or_default())
            }
            k => k.to_string(),
        })
        .collect()
}

/// An `agent_settled` handler that waits 200 ms, notifies (with `ctx.isIdle()`), and from the
/// first one sends a user message and two custom ones (one plain, one with `triggerTurn`).
/// Recorded from upstream 1.6 (`--mode rpc` on the fake server): the notify and the plain
/// custom message come before `agent_settled`; the runs the handler started (the user message,
/// the custom one with `triggerTurn`) begin after it, since upstream's `_emitAgentSettled`
/// awaits the extension handlers, then emits, then runs what they deferred.
#[test]
fn agent_settled_handler_output_precedes_the_event_and_its_runs_follow() {
    let ext = r#"export default function (pi) {
      let n = 0;
      pi.on("agent_settled", async (e, ctx) => {
        n += 1;
        await new Promise((r) => setTimeout(r, 200));
        if (n === 1) {
          pi.sendMessage({ customType: "plain", content: "plain", display: true });
          pi.sendUserMessage("again");
        }
        ctx.ui.notify("settled " + n + " " + e.aborted + " idle=" + ctx.isIdle());
      });
    }"#;
    let (_fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two")]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("e.js", ext);
    let mut agent = root.spawn_with(false, &["-e", "e.js"]);
    agent.request(serde_json::json!({"id": "p", "type": "prompt", "message": "go"}));
    let settled = |n: usize| {
        move |v: &Value| {
            kind(v) == "extension_ui_request"
                && v["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with(&format!("settled {n}")))
        }
    };
    let (at, _) = agent.wait_from(0, LIVENESS, settled(2));
    agent.wait_from(at, LIVENESS, |v| kind(v) == "agent_settled");
    let seq = sequence(&agent);
    // Upstream 1.6's transcript (recorded), from the first prompt's response on.
    let expected = [
        "response",
        "agent_start",
        "turn_start",
        "message_start system",
        "message_end system",
        "message_start user",
        "message_end user",
        "message_start assistant",
        "message_end assistant",
        "turn_end",
        "agent_end",
        "message_start custom:plain",
        "message_end custom:plain",
        "notify settled 1 false idle=true",
        "agent_settled",
        "agent_start",
        "turn_start",
        "message_start user",
        "message_end user",
        "message_start assistant",
        "message_end assistant",
        "turn_end",
        "agent_end",
        "notify settled 2 false idle=true",
        "agent_settled",
    ];
    assert_eq!(seq, expected, "{}", agent.dump());
}

/// The bullet lines of the `<rules>` section of a prompt.
fn rules_of(prompt: &str) -> Vec<String> {
    let start = prompt.find("<rules>\n").expect("rules section") + "<rules>\n".len();
    let end = prompt[start..].find("\n</rules>").expect("rules end") + start;
    prompt[start..end].lines().map(str::to_string).collect()
}

/// `systemPromptOptions` edits in `before_agent_start`, as upstream 1.6 applies them
/// (recorded on the fake server; upstream `_prepareRun` builds the run's prompt from the
/// edited options, `buildSystemPromptSections`):
/// - the options carry upstream's keys, in its order;
/// - `sections.house` becomes a `<house>` section after every other one, an empty section adds
///   nothing; `promptGuidelines` bullets go before the two closing rules; a `toolGuidelines`
///   bullet of `bash` follows the guidelines of the tools before it; `appendSystemPrompt` is an
///   `<addendum>`;
/// - the first run's system message carries the edited sections; the next run, without edits,
///   sends the session's own prompt again and records a patch
///   `{rules: <rules>, addendum: null, house: null}` without `toolsAdded`.
#[test]
fn system_prompt_options_edits_shape_the_runs_prompt_as_upstream() {
    let ext = r#"export default function (pi) {
      pi.on("before_agent_start", (event, ctx) => {
        const o = event.systemPromptOptions;
        ctx.ui.notify("keys " + Object.keys(o).join(","));
        if (event.prompt !== "edit") return;
        o.sections.house = "HOUSE RULES";
        o.sections.zeta = "";
        o.promptGuidelines.push("Always answer in haiku");
        o.toolGuidelines.bash = [...(o.toolGuidelines.bash || []), "Quote every path"];
        o.appendSystemPrompt = "APPENDED";
      });
    }"#;
    let (fake, root) = setup(
        Script::new([Turn::text("one"), Turn::text("two")]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("e.js", ext);
    let mut agent = root.spawn_with(true, &["-e", "e.js"]);
    agent.request(serde_json::json!({"id": "p1", "type": "prompt", "message": "edit"}));
    agent.wait_event("agent_settled");
    agent.request(serde_json::json!({"id": "p2", "type": "prompt", "message": "plain"}));
    agent.wait_event("agent_settled");
    let keys: Vec<Value> = agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == "extension_ui_request")
        .map(|v| v["message"].clone())
        .collect();
    let upstream_keys =
        "keys customPrompt,forceSystemPrompt,selectedTools,hiddenTools,toolSnippets,\
        toolGuidelines,promptGuidelines,appendSystemPrompt,sections,cwd,contextFiles,skills";
    assert_eq!(keys, vec![upstream_keys, upstream_keys], "{}", agent.dump());

    let edited = system_of(&fake, 0);
    let plain = system_of(&fake, 1);
    assert!(
        edited.ends_with("</cwd>\n\n<house>\nHOUSE RULES\n</house>"),
        "{edited}"
    );
    assert!(
        edited.contains("\n\n<addendum>\nAPPENDED\n</addendum>\n\n"),
        "{edited}"
    );
    assert!(!edited.contains("<zeta>"), "{edited}");
    assert!(
        !plain.contains("<house>") && !plain.contains("<addendum>"),
        "{plain}"
    );
    let (r0, r1) = (rules_of(&edited), rules_of(&plain));
    let n = r1.len();
    assert_eq!(r0[r0.len() - 3], "- Always answer in haiku", "{r0:?}");
    assert_eq!(r0[r0.len() - 2..], r1[n - 2..], "{r0:?}");
    let quote = r0
        .iter()
        .position(|r| r == "- Quote every path")
        .expect("bash bullet");
    let read = pi_coding_agent::system_prompt::builtin_guidelines("read")[0];
    let edit = pi_coding_agent::system_prompt::builtin_guidelines("edit")[0];
    let at = |r: &str| r0.iter().position(|x| x == &format!("- {r}")).unwrap();
    assert!(at(read) < quote && quote < at(edit), "{r0:?}");
    let rest: Vec<&String> = r0
        .iter()
        .filter(|r| *r != "- Quote every path" && *r != "- Always answer in haiku")
        .collect();
    assert_eq!(rest, r1.iter().collect::<Vec<_>>());

    let entries = check_session_file(&root.session_files().pop().unwrap()).unwrap();
    let systems: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "system")
        .map(|e| &e["message"])
        .collect();
    assert_eq!(systems.len(), 2, "{entries:?}");
    assert_eq!(
        systems[0]["sections"]["house"], "<house>\nHOUSE RULES\n</house>",
        "{}",
        systems[0]
    );
    let patch = systems[1]["sections"].as_object().expect("patch sections");
    assert_eq!(
        patch.keys().collect::<Vec<_>>(),
        ["rules", "addendum", "house"],
        "{}",
        systems[1]
    );
    assert!(patch["addendum"].is_null() && patch["house"].is_null());
    assert!(systems[1].get("toolsAdded").is_none(), "{}", systems[1]);
    assert_eq!(rules_of(patch["rules"].as_str().unwrap()), r1);
}

/// `pi.sendMessage` from commands while idle, recorded from upstream 1.6 on the fake server:
/// plain messages (`display` true and false, with `details`) are entered at once, before the
/// command's response, as `message_start`/`message_end` carrying the message as sent (no
/// `display` key when none was given); one with `triggerTurn` is the start of the run it
/// triggers: `agent_start`, `turn_start`, the session's system message, then the custom
/// message (upstream `_startRun({messageType: "custom"})`), and it is recorded as a
/// `custom_message` entry.
#[test]
fn send_message_events_follow_upstream_order_and_shape() {
    let ext = r#"export default function (pi) {
      pi.registerCommand("plain", { handler: async () => {
        pi.sendMessage({ customType: "a", content: "A", display: true });
        pi.sendMessage({ customType: "b", content: [{ type: "text", text: "B" }], display: false, details: { x: 1 } });
      }});
      pi.registerCommand("trig", { handler: async () => {
        pi.sendMessage({ customType: "t", content: "T" }, { triggerTurn: true });
      }});
    }"#;
    let (_fake, root) = setup(Script::new([Turn::text("one")]), DEFAULT_MODEL);
    root.write_cwd_file("e.js", ext);
    let mut agent = root.spawn_with(true, &["-e", "e.js"]);
    agent.request(serde_json::json!({"id": "p0", "type": "prompt", "message": "/plain"}));
    agent.request(serde_json::json!({"id": "p1", "type": "prompt", "message": "/trig"}));
    agent.wait_event("agent_settled");
    // Upstream answers `/trig` before the run's `agent_start`; ours may answer it while the
    // run starts (the command's reply and the run race), so responses are compared apart.
    let (p0, _) = agent.wait_from(0, LIVENESS, |v| kind(v) == "response" && v["id"] == "p0");
    let (b_end, _) = agent.wait_from(0, LIVENESS, |v| {
        kind(v) == "message_end" && v["message"]["customType"] == "b"
    });
    assert!(
        b_end < p0,
        "plain messages before the command's response: {}",
        agent.dump()
    );
    let expected = [
        "message_start custom:a",
        "message_end custom:a",
        "message_start custom:b",
        "message_end custom:b",
        "agent_start",
        "turn_start",
        "message_start system",
        "message_end system",
        "message_start custom:t",
        "message_end custom:t",
        "message_start assistant",
        "message_end assistant",
        "turn_end",
        "agent_end",
        "agent_settled",
    ];
    let seq: Vec<String> = sequence(&agent)
        .into_iter()
        .filter(|k| k != "response")
        .collect();
    assert_eq!(seq, expected, "{}", agent.dump());
    let customs: Vec<Value> = agent
        .events()
        .into_iter()
        .filter(|v| kind(v) == "message_end" && v["message"]["role"] == "custom")
        .map(|v| {
            let mut m = v["message"].clone();
            assert!(m["timestamp"].is_number(), "{m}");
            m.as_object_mut().unwrap().remove("timestamp");
            m
        })
        .collect();
    // Upstream's messages, timestamps left out.
    let upstream: Vec<Value> = [
        r#"{"role":"custom","customType":"a","content":"A","display":true}"#,
        r#"{"role":"custom","customType":"b","content":[{"type":"text","text":"B"}],"display":false,"details":{"x":1}}"#,
        r#"{"role":"custom","customType":"t","content":"T"}"#,
    ]
    .iter()
    .map(|s| serde_json::from_str(s).unwrap())
    .collect();
    assert_eq!(customs, upstream);
    let entries = check_session_file(&root.session_files().pop().unwrap()).unwrap();
    let kinds: Vec<String> = entries
        .iter()
        .filter(|e| e["type"] == "custom_message")
        .map(|e| e["customType"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(kinds, ["a", "b", "t"], "{entries:?}");
}
