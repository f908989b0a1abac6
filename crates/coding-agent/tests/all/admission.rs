//! Prompt admission, the same in every mode (issue 22; rpc-protocol.md §4.1 `prompt`
//! "Processing order" and "Response timing", `steer`/`follow_up`; agent-loop.md §2.1): an
//! extension command, an `input` transform and consume, a prompt template and
//! `before_agent_start`, over RPC, in print mode (`-p`) and in JSON mode, with the real binary,
//! a real extension host and a fake model server. Also the order of a command's `handled`
//! response and the events the command causes, as upstream 1.6 writes them.
//!
//! Measured against upstream 1.6.0 by running these very tests with `PI_TEST_BIN` set to a
//! two-line script that execs upstream's `cli.js` under its Node 22 (same extension, same
//! fake model server, same agent dir). Upstream passes the RPC tests on command response
//! order, `input`/template/skill/`before_agent_start` admission and queued-input order, and,
//! in print and JSON mode, every step up to `/say user`: its print and JSON modes run
//! extension commands and `input` handlers (source `interactive`), expand templates and
//! skills, and apply `before_agent_start`'s message and system prompt, exactly as RPC does.
//! Upstream differs in two places, both where it loses work, and ours does better:
//! - a command that calls `sendUserMessage` just before returning: upstream's `-p` and
//!   `--mode json` exit once the command has returned, while the run it started is still
//!   streaming, so its answer is never printed (print: empty stdout; JSON: only the
//!   command's three events). Ours waits for that run and prints it.
//! - `await ctx.waitForIdle()` right after `sendUserMessage` in a command: upstream resolves
//!   it at once (the run has not started yet), so the response comes before the run; ours
//!   waits for the run, as upstream's docs describe `waitForIdle`.
//!
//! On main's binary before this change, five of the six tests fail: `-p` and `--mode json`
//! skip the extension command and `input` handlers (`/say x` went to the model as text), a
//! command's `sendUserMessage` and `steer`/`follow_up` skipped `input` handlers, and `input`
//! events carried `images: []` where upstream leaves the field out. (The RPC order of a
//! command's response and its events was already upstream's there.)

use crate::common::*;
use pi_coding_agent::rpc::protocol::{RpcEvent, RpcOutput};
use pi_fakellm::{RecordedRequest, Script, Turn};
use serde_json::{json, Value};
use std::process::{Command, Output, Stdio};

/// The extension under test: a `/say` command that emits a notify, a custom message and an
/// entry (and, by its arguments, starts a run with `sendUserMessage`, waits for it, or
/// throws), an `input` handler that consumes `eat this` and upper-cases `shout …`, and a
/// `before_agent_start` handler that adds a message and appends to the system prompt. Each handler logs what it saw to a file.
const EXT: &str = r#"import { appendFileSync } from "node:fs";
export default function (pi) {
  pi.registerCommand("say", { description: "say it", handler: async (args, ctx) => {
    appendFileSync("command.log", `${args}|${ctx.mode}\n`);
    ctx.ui.notify(`say ${args}`, "info");
    pi.sendMessage({ customType: "said", content: "said " + args, display: true });
    pi.appendEntry("said-entry", { args });
    if (args.includes("user")) pi.sendUserMessage("from command " + args);
    if (args.includes("idle")) await ctx.waitForIdle();
    if (args.includes("throw")) throw new Error("command failed");
    ctx.ui.notify("said", "info");
  }});
  pi.on("input", async (event) => {
    appendFileSync("input.log", JSON.stringify(event) + "\n");
    if (event.text === "eat this") return { action: "handled" };
    if (event.text.startsWith("shout ")) return { action: "transform", text: event.text.slice(6).toUpperCase() };
  });
  pi.on("before_agent_start", async (event) => {
    appendFileSync("bas.log", event.prompt + "\n");
    return {
      message: { customType: "bas", content: "noted " + event.prompt, display: false },
      systemPrompt: event.systemPrompt + "\nBAS-SYSTEM for " + event.prompt,
    };
  });
}
"#;

/// A run root with [`EXT`] in `cwd/ext.js`, a global prompt template `/tpl` and a global
/// skill `greet` (`/skill:greet`).
fn root_with(turns: Vec<Turn>) -> (pi_fakellm::FakeLlm, RunRoot) {
    let (fake, root) = setup(Script::new(turns), DEFAULT_MODEL);
    root.write_cwd_file("ext.js", EXT);
    let tpl = root.agent_dir.join("prompts/tpl.md");
    std::fs::create_dir_all(tpl.parent().unwrap()).unwrap();
    std::fs::write(tpl, "---\ndescription: a template\n---\nTEMPLATE says $1\n").unwrap();
    let skill = root.agent_dir.join("skills/greet/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        skill,
        "---\nname: greet\ndescription: greets\n---\nSKILL BODY greet warmly\n",
    )
    .unwrap();
    (fake, root)
}

/// The lines of `cwd/<name>` (empty when the file does not exist).
fn log_lines(root: &RunRoot, name: &str) -> Vec<String> {
    std::fs::read_to_string(root.cwd.join(name))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The `input` events the extension saw.
fn inputs(root: &RunRoot) -> Vec<Value> {
    log_lines(root, "input.log")
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The text of the prompt in a model request: its last user message that is not the
/// `before_agent_start` message (custom messages reach the model as user messages).
fn last_user_text(req: &RecordedRequest) -> String {
    let msgs = req.body["messages"].as_array().unwrap();
    let text = |m: &Value| match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    };
    msgs.iter()
        .rev()
        .filter(|m| m["role"] == "user")
        .map(text)
        .find(|t| !t.starts_with("noted "))
        .unwrap_or_default()
}

/// Whether any message of a model request carries `text`.
fn request_mentions(req: &RecordedRequest, text: &str) -> bool {
    req.body_text().contains(text)
}

/// A short name for a record, to compare orders: `response:<id>`, the event type, with the
/// notify message or the message role.
fn label(v: &Value) -> String {
    match kind(v) {
        "response" => format!("response:{}", v["id"].as_str().unwrap_or("?")),
        "extension_ui_request" => format!(
            "ui:{}:{}",
            v["method"].as_str().unwrap(),
            v["message"].as_str().unwrap_or("")
        ),
        "message_start" | "message_end" => {
            format!("{}:{}", kind(v), v["message"]["role"].as_str().unwrap())
        }
        "entry_appended" => format!("entry:{}", v["entry"]["customType"].as_str().unwrap_or("")),
        other => other.to_string(),
    }
}

/// Labels of every record from `from` on, leaving out streaming deltas.
fn labels_from(agent: &RpcAgent, from: usize) -> Vec<String> {
    agent.records()[from..]
        .iter()
        .map(|r| r.value.as_ref().expect("every stdout line is JSON"))
        .filter(|v| kind(v) != "message_update")
        .map(label)
        .collect()
}

/// The three model requests of a transformed prompt (`shouted`), `/tpl one` and
/// `/skill:greet bob`: each expanded, each after `before_agent_start`, whose message and
/// system prompt reach the model.
fn assert_expanded(reqs: &[RecordedRequest], root: &RunRoot, shouted: &str) {
    assert_eq!(last_user_text(&reqs[0]), shouted);
    assert_eq!(last_user_text(&reqs[1]), "TEMPLATE says one");
    let skill = last_user_text(&reqs[2]);
    assert!(
        skill.contains("<skill name=\"greet\"") && skill.contains("SKILL BODY greet warmly"),
        "{skill}"
    );
    assert!(skill.trim_end().ends_with("bob"), "{skill}");
    let bas = log_lines(root, "bas.log");
    assert_eq!(bas[..2], [shouted, "TEMPLATE says one"], "{bas:?}");
    assert!(bas[2].starts_with("<skill name=\"greet\""), "{bas:?}");
    for (req, prompt) in reqs.iter().zip([shouted, "TEMPLATE says one", "<skill"]) {
        assert!(
            request_mentions(req, &format!("noted {prompt}")),
            "{}",
            req.body_text()
        );
        assert!(
            request_mentions(req, &format!("BAS-SYSTEM for {prompt}")),
            "{}",
            req.body_text()
        );
    }
}

fn spawn(root: &RunRoot) -> RpcAgent {
    root.spawn_with(false, &["-e", "ext.js"])
}

/// Upstream 1.6 writes a command's `handled` response when the handler has returned: what
/// the handler emitted before (a notify, `sendMessage`, `appendEntry`, also after awaiting)
/// comes first, and a run it started with `sendUserMessage` just before returning comes
/// after the response.
#[test]
fn rpc_command_response_follows_what_the_handler_emitted_and_precedes_its_run() {
    let (fake, root) = root_with(vec![Turn::text("answer one")]);
    let mut agent = spawn(&root);
    agent.request(json!({"id": "ready", "type": "get_state"}));

    let from = agent.len();
    agent.send(json!({"id": "a", "type": "prompt", "message": "/say x"}));
    agent.wait_response("a");
    agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(
        labels_from(&agent, from),
        [
            "ui:notify:say x",
            "message_start:custom",
            "message_end:custom",
            "entry:said-entry",
            "ui:notify:said",
            "response:a",
            "response:s",
        ],
        "{}",
        agent.dump()
    );
    let handled = agent.wait_response("a");
    assert_eq!(handled["data"], json!({"disposition": "handled"}));

    // sendUserMessage just before returning: the response first, then the run.
    let from = agent.len();
    agent.send(json!({"id": "b", "type": "prompt", "message": "/say user"}));
    agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
    let got = labels_from(&agent, from);
    assert_eq!(
        got[..6],
        [
            "ui:notify:say user",
            "message_start:custom",
            "message_end:custom",
            "entry:said-entry",
            "ui:notify:said",
            "response:b",
        ],
        "{}",
        agent.dump()
    );
    assert_eq!(got[6], "agent_start", "{got:?}");
    assert_eq!(got.last().unwrap(), "agent_settled");
    assert!(
        !got[6..].iter().any(|l| l.starts_with("response")),
        "{got:?}"
    );
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(last_user_text(&reqs[0]), "from command user");
    // The run's prompt went through `input` (source `extension`) and `before_agent_start`.
    assert_eq!(inputs(&root).last().unwrap()["source"], "extension");
    assert_eq!(log_lines(&root, "bas.log"), ["from command user"]);
    assert!(request_mentions(&reqs[0], "noted from command user"));
}

/// A handler that awaits `ctx.waitForIdle()` after `sendUserMessage` waits for that run, so
/// the whole run comes before the response. (Upstream 1.6 resolves `waitForIdle` at once
/// there, before the run it was just asked for has started; ours waits, as the docs say.)
/// A handler that throws is an `extension_error`, still answered `handled`.
#[test]
fn rpc_command_that_waits_for_its_run_is_answered_after_it_and_a_throw_is_an_event() {
    let (fake, root) = root_with(vec![Turn::text("answer one")]);
    let mut agent = spawn(&root);
    agent.request(json!({"id": "ready", "type": "get_state"}));
    let from = agent.len();
    agent.send(json!({"id": "a", "type": "prompt", "message": "/say user idle"}));
    let resp = agent.wait_response("a");
    assert_eq!(resp["data"], json!({"disposition": "handled"}));
    let got = labels_from(&agent, from);
    let settled = got.iter().position(|l| l == "agent_settled");
    let answered = got.iter().position(|l| l == "response:a");
    assert!(
        settled.is_some() && settled < answered,
        "the run settles before the response: {got:?}"
    );
    assert_eq!(got[answered.unwrap() - 1], "ui:notify:said", "{got:?}");
    assert_eq!(fake.llm_requests().len(), 1);

    let from = agent.len();
    let resp = agent.request(json!({"id": "t", "type": "prompt", "message": "/say throw"}));
    assert_eq!(resp["success"], true, "{resp}");
    assert_eq!(resp["data"], json!({"disposition": "handled"}));
    let got = labels_from(&agent, from);
    let err = agent.records()[from..]
        .iter()
        .filter_map(|r| r.value.clone())
        .find(|v| kind(v) == "extension_error")
        .unwrap_or_else(|| panic!("no extension_error: {got:?}"));
    assert_eq!(err["extensionPath"], "command:say");
    assert_eq!(err["event"], "command");
    assert_eq!(err["error"], "command failed");
    assert_eq!(got.last().unwrap(), "response:t", "{got:?}");
    assert_eq!(
        fake.llm_requests().len(),
        1,
        "a command starts no run of its own"
    );
}

/// `input` consume and transform, templates and `before_agent_start` over RPC; `steer` and
/// `follow_up` refuse commands and run `input` handlers (upstream `_queueUserInput`).
#[test]
fn rpc_prompt_runs_input_handlers_templates_and_before_agent_start() {
    let (fake, root) = root_with(vec![
        Turn::text("answer one"),
        Turn::text("answer two"),
        Turn::text("answer three"),
    ]);
    let mut agent = spawn(&root);

    let eaten = agent.request(json!({"id": "e", "type": "prompt", "message": "eat this"}));
    assert_eq!(eaten["data"], json!({"disposition": "handled"}), "{eaten}");

    let from = agent.len();
    let started = agent.request(json!({"id": "t", "type": "prompt", "message": "shout hi there"}));
    assert_eq!(
        started["data"],
        json!({"disposition": "started"}),
        "{started}"
    );
    agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
    // The response comes after `before_agent_start` and before the run's first event.
    let got = labels_from(&agent, from);
    assert_eq!(got[..2], ["response:t", "agent_start"], "{got:?}");

    agent.prompt_settled("p", "/tpl one");
    agent.prompt_settled("k", "/skill:greet bob");

    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 3, "the consumed prompt reached no model");
    assert_expanded(&reqs, &root, "HI THERE");
    let seen = inputs(&root);
    assert_eq!(
        seen.iter()
            .map(|e| e["text"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["eat this", "shout hi there", "/tpl one", "/skill:greet bob"],
        "input handlers see the text before expansion"
    );
    for e in &seen {
        assert_eq!(e["source"], "rpc");
        assert!(
            e.get("images").is_none() && e.get("streamingBehavior").is_none(),
            "{e}"
        );
    }

    let refused = agent.request(json!({"id": "s1", "type": "steer", "message": "/say x"}));
    assert_eq!(refused["success"], false);
    assert_eq!(
        refused["error"],
        "Extension command \"/say\" cannot be queued. Use prompt() or execute the command when not streaming."
    );
    let eaten = agent.request(json!({"id": "f1", "type": "follow_up", "message": "eat this"}));
    assert_eq!(eaten["data"], json!({"disposition": "handled"}), "{eaten}");
    let queued = agent.request(json!({"id": "f2", "type": "follow_up", "message": "shout later"}));
    assert_eq!(queued["data"], json!({"disposition": "queued"}), "{queued}");
    let state = agent.request(json!({"id": "st", "type": "get_state"}));
    assert_eq!(state["data"]["pendingMessageCount"], 1, "{state}");
    let update = agent
        .events()
        .into_iter()
        .rfind(|v| kind(v) == "queue_update")
        .expect("queue_update");
    assert_eq!(update["followUp"], json!(["LATER"]), "{update}");
    assert!(log_lines(&root, "command.log").is_empty(), "no command ran");
}

/// Two `steer`s whose `input` rounds overlap are queued in the order they were sent.
#[test]
fn rpc_queued_inputs_keep_their_order_through_input_handlers() {
    let (_fake, root) = root_with(vec![]);
    let mut agent = spawn(&root);
    for i in 0..6 {
        agent.send(
            json!({"id": format!("q{i}"), "type": "steer", "message": format!("shout m{i}")}),
        );
    }
    for i in 0..6 {
        agent.wait_response(&format!("q{i}"));
    }
    let update = agent
        .events()
        .into_iter()
        .rfind(|v| kind(v) == "queue_update")
        .expect("queue_update");
    assert_eq!(
        update["steering"],
        json!(["M0", "M1", "M2", "M3", "M4", "M5"]),
        "{}",
        agent.dump()
    );
}

/// `pi <mode args> -e ext.js <messages>` in `cwd`, stdin closed.
fn one_shot(root: &RunRoot, mode: &[&str], messages: &[&str]) -> Output {
    let bin = std::env::var_os("PI_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_pi").into());
    Command::new(bin)
        .args(mode)
        .args(["--no-session", "-e", "ext.js"])
        .args(messages)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Print mode admits each message as RPC does (source `interactive`, as upstream's print
/// mode): an extension command runs and prints nothing (exit 0, as upstream), a consumed
/// message prints nothing and asks no model (exit 0, as upstream), a transform and a template
/// reach the model after `before_agent_start`. A run the command starts is awaited and its
/// answer printed (upstream 1.6 exits while it is still streaming and prints nothing).
#[test]
fn print_mode_runs_commands_input_handlers_templates_and_before_agent_start() {
    let (fake, root) = root_with(vec![
        Turn::text("answer one"),
        Turn::text("answer two"),
        Turn::text("answer three"),
        Turn::text("answer four"),
    ]);
    let out = one_shot(&root, &["-p"], &["/say x"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(log_lines(&root, "command.log"), ["x|print"]);

    let out = one_shot(&root, &["-p"], &["eat this"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    assert!(fake.llm_requests().is_empty());

    let out = one_shot(&root, &["-p"], &["shout hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "answer one\n");
    let out = one_shot(&root, &["-p"], &["/tpl one"]);
    assert_eq!(text(&out.stdout), "answer two\n", "{}", text(&out.stderr));
    let out = one_shot(&root, &["-p"], &["/skill:greet bob"]);
    assert_eq!(text(&out.stdout), "answer three\n", "{}", text(&out.stderr));
    let out = one_shot(&root, &["-p"], &["/say user"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "answer four\n");

    assert_one_shot_requests(&fake, &root);
}

/// The JSON-mode lines after the session header, each decoded into the protocol types.
fn json_events(out: &Output) -> Vec<RpcEvent> {
    let stdout = text(&out.stdout);
    let mut lines = stdout.lines();
    let header: Value = serde_json::from_str(lines.next().expect("a header line")).unwrap();
    assert_eq!(header["type"], "session", "{stdout}");
    lines
        .map(|l| match serde_json::from_str::<RpcOutput>(l) {
            Ok(RpcOutput::Event(e)) => *e,
            other => panic!("not an event ({other:?}): {l}"),
        })
        .collect()
}

fn event_kinds(events: &[RpcEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| kind(&serde_json::to_value(e).unwrap()).to_string())
        .filter(|k| k != "message_update")
        .collect()
}

/// JSON mode: the same admission; the command's custom message and entry are events (its
/// notify is not: JSON mode has no UI, as upstream), a consumed message prints only the
/// header, and the run a command starts is printed to its end.
#[test]
fn json_mode_runs_commands_input_handlers_templates_and_before_agent_start() {
    let (fake, root) = root_with(vec![
        Turn::text("answer one"),
        Turn::text("answer two"),
        Turn::text("answer three"),
        Turn::text("answer four"),
    ]);
    let out = one_shot(&root, &["--mode", "json"], &["/say x"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        event_kinds(&json_events(&out)),
        ["message_start", "message_end", "entry_appended"],
        "{}",
        text(&out.stdout)
    );
    assert_eq!(log_lines(&root, "command.log"), ["x|json"]);

    let out = one_shot(&root, &["--mode", "json"], &["eat this"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(json_events(&out).is_empty(), "{}", text(&out.stdout));

    let out = one_shot(
        &root,
        &["--mode", "json"],
        &["shout hi", "/tpl one", "/skill:greet bob"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let kinds = event_kinds(&json_events(&out));
    assert_eq!(
        kinds.iter().filter(|k| *k == "agent_settled").count(),
        3,
        "{kinds:?}"
    );

    let out = one_shot(&root, &["--mode", "json"], &["/say user"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let kinds = event_kinds(&json_events(&out));
    assert_eq!(
        kinds[..3],
        ["message_start", "message_end", "entry_appended"],
        "{kinds:?}"
    );
    assert_eq!(kinds[3], "agent_start", "{kinds:?}");
    assert_eq!(kinds.last().unwrap(), "agent_settled", "{kinds:?}");

    assert_one_shot_requests(&fake, &root);
}

/// What the four one-shot runs of the print and JSON tests sent and logged: three expanded
/// prompts, then the command's `sendUserMessage`, with `input` sources `interactive` ×4 and
/// `extension`.
fn assert_one_shot_requests(fake: &pi_fakellm::FakeLlm, root: &RunRoot) {
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 4);
    assert_expanded(&reqs[..3], root, "HI");
    assert_eq!(last_user_text(&reqs[3]), "from command user");
    assert_eq!(
        log_lines(root, "bas.log").last().unwrap(),
        "from command user"
    );
    let sources: Vec<Value> = inputs(root).iter().map(|e| e["source"].clone()).collect();
    assert_eq!(
        sources,
        [
            "interactive",
            "interactive",
            "interactive",
            "interactive",
            "extension"
        ],
        "{:?}",
        inputs(root)
    );
}
