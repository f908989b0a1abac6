//! ACP mode end to end: the real `pi --mode acp` binary against the fake model server, driven
//! by the official Rust SDK's client side (`agent-client-protocol`, `Client.v1()`), and raw
//! lines for the malformed-input cases.

use crate::common::*;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, CloseSessionRequest, ContentBlock, InitializeRequest, InitializeResponse,
    ListSessionsRequest, LoadSessionRequest, McpServer, McpServerStdio, NewSessionRequest,
    PermissionOptionKind, PromptRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, ResumeSessionRequest, SelectedPermissionOutcome, SessionConfigKind,
    SessionConfigOption, SessionNotification, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, StopReason, TextContent, ToolCallContent, ToolCallStatus,
    ToolKind,
};
use agent_client_protocol::v1::schema::{
    ClientCapabilities, CreateElicitationRequest, CreateElicitationResponse,
    ElicitationAcceptAction, ElicitationAction, ElicitationCapabilities, ElicitationContentValue,
    ElicitationFormCapabilities, ElicitationMode, ElicitationPropertySchema,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Agent, ByteStreams, Client, Error};
use pi_fakellm::{Block, Script, Turn, Usage};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

const HELLO: &str = "Hello! I am a fake model. How can I help?";

/// How the test client answers `session/request_permission`.
#[derive(Clone, Copy)]
enum Answer {
    Allow,
    Reject,
}

/// The client side of one connection: the SDK connection and what the agent sent it.
struct Peer {
    cx: ConnectionTo<Agent>,
    updates: Arc<Mutex<Vec<SessionNotification>>>,
    asks: Arc<Mutex<Vec<RequestPermissionRequest>>>,
    /// The `elicitation/create` requests the agent sent.
    elicits: Arc<Mutex<Vec<CreateElicitationRequest>>>,
    /// The `initialize` answer.
    init: InitializeResponse,
}

impl Peer {
    fn updates(&self) -> Vec<SessionUpdate> {
        self.updates
            .lock()
            .unwrap()
            .iter()
            .map(|n| n.update.clone())
            .collect()
    }

    /// Waits until an update satisfies `pred`.
    async fn wait_update(&self, pred: impl Fn(&SessionUpdate) -> bool) -> SessionUpdate {
        let deadline = tokio::time::Instant::now() + LIVENESS;
        loop {
            if let Some(u) = self.updates().into_iter().find(|u| pred(u)) {
                return u;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no such update: {:?}",
                self.updates()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn new_session(&self, cwd: &std::path::Path) -> Result<String, Error> {
        let r = self
            .cx
            .send_request(NewSessionRequest::new(cwd.to_path_buf()))
            .block_task()
            .await?;
        Ok(r.session_id.0.to_string())
    }

    async fn prompt(&self, session: &str, text: &str) -> Result<StopReason, Error> {
        let r = self
            .cx
            .send_request(PromptRequest::new(
                session.to_string(),
                vec![text_block(text)],
            ))
            .block_task()
            .await?;
        Ok(r.stop_reason)
    }

    /// `session/set_config_option` of `id` to `value` in `session`.
    async fn set_option(
        &self,
        session: &str,
        id: &str,
        value: &str,
    ) -> Result<SetSessionConfigOptionResponse, Error> {
        self.cx
            .send_request(SetSessionConfigOptionRequest::new(
                session.to_string(),
                id.to_string(),
                value,
            ))
            .block_task()
            .await
    }
}

fn text_block(text: &str) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text))
}

/// The text of every `agent_message_chunk`, joined.
fn agent_text(updates: &[SessionUpdate]) -> String {
    chunks(updates, |u| match u {
        SessionUpdate::AgentMessageChunk(c) => Some(&c.content),
        _ => None,
    })
}

fn chunks(
    updates: &[SessionUpdate],
    pick: impl Fn(&SessionUpdate) -> Option<&ContentBlock>,
) -> String {
    updates
        .iter()
        .filter_map(pick)
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect()
}

/// `pi --mode acp <args>` in `root`; settings get `quietStartup: true` unless the test set it
/// (the startup info chunk is tested on its own, `new_session_shows_startup_info_unless_quiet`).
fn acp_command(root: &RunRoot, args: &[&str]) -> std::process::Command {
    let settings = std::fs::read_to_string(root.agent_dir.join("settings.json")).unwrap();
    let settings: Value = serde_json::from_str(&settings).unwrap();
    if settings.get("quietStartup").is_none() {
        root.merge_settings(json!({"quietStartup": true}));
    }
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_pi"));
    cmd.args(["--mode", "acp"])
        .args(args)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Spawns `pi --mode acp <args>`, connects the SDK client (permission requests answered by
/// `answer`), sends `initialize`, runs `body`, then closes stdin and waits for the exit.
fn drive<R>(
    root: &RunRoot,
    args: &[&str],
    answer: Answer,
    body: impl AsyncFnOnce(Peer) -> Result<R, Error>,
) -> R {
    drive_as(root, args, answer, false, body)
}

/// [`drive`]; with `forms` the client announces elicitation forms and accepts every
/// `elicitation/create` with `typed <message>` in each string field of the form.
fn drive_as<R>(
    root: &RunRoot,
    args: &[&str],
    answer: Answer,
    forms: bool,
    body: impl AsyncFnOnce(Peer) -> Result<R, Error>,
) -> R {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut cmd = tokio::process::Command::from(acp_command(root, args));
    cmd.kill_on_drop(true);
    rt.block_on(async move {
        let mut child = cmd.spawn().expect("spawn pi --mode acp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
        let updates: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
        let asks: Arc<Mutex<Vec<RequestPermissionRequest>>> = Arc::default();
        let elicits: Arc<Mutex<Vec<CreateElicitationRequest>>> = Arc::default();
        let (u, a, e) = (updates.clone(), asks.clone(), elicits.clone());
        let run = Client
            .v1()
            .name("pi-tests")
            .on_receive_notification(
                async move |n: SessionNotification, _cx: ConnectionTo<Agent>| {
                    u.lock().unwrap().push(n);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |req: RequestPermissionRequest, responder, _cx: ConnectionTo<Agent>| {
                    let want = match answer {
                        Answer::Allow => PermissionOptionKind::AllowOnce,
                        Answer::Reject => PermissionOptionKind::RejectOnce,
                    };
                    let pick = req.options.iter().find(|o| o.kind == want);
                    let outcome = match pick {
                        Some(o) => RequestPermissionOutcome::Selected(
                            SelectedPermissionOutcome::new(o.option_id.clone()),
                        ),
                        None => RequestPermissionOutcome::Cancelled,
                    };
                    a.lock().unwrap().push(req);
                    responder.respond(RequestPermissionResponse::new(outcome))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: CreateElicitationRequest, responder, _cx: ConnectionTo<Agent>| {
                    let ElicitationMode::Form(form) = &req.mode else {
                        return responder
                            .respond(CreateElicitationResponse::new(ElicitationAction::Decline));
                    };
                    let content: std::collections::BTreeMap<String, ElicitationContentValue> = form
                        .requested_schema
                        .properties
                        .iter()
                        .filter(|(_, s)| matches!(s, ElicitationPropertySchema::String(_)))
                        .map(|(k, _)| {
                            let value = format!("typed {}", req.message);
                            (k.clone(), ElicitationContentValue::String(value))
                        })
                        .collect();
                    e.lock().unwrap().push(req);
                    responder.respond(CreateElicitationResponse::new(ElicitationAction::Accept(
                        ElicitationAcceptAction::new().content(content),
                    )))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                let mut init = InitializeRequest::new(ProtocolVersion::V1);
                if forms {
                    init = init.client_capabilities(ClientCapabilities::new().elicitation(
                        ElicitationCapabilities::new().form(ElicitationFormCapabilities::new()),
                    ));
                }
                let init = cx.send_request(init).block_task().await?;
                assert!(init.agent_capabilities.load_session);
                assert!(init.agent_capabilities.prompt_capabilities.image);
                body(Peer {
                    cx,
                    updates,
                    asks,
                    elicits,
                    init,
                })
                .await
            });
        let out = tokio::time::timeout(Duration::from_secs(120), run)
            .await
            .expect("the ACP session timed out")
            .expect("ACP client");
        let status = tokio::time::timeout(LIVENESS, child.wait()).await;
        assert!(
            matches!(status, Ok(Ok(s)) if s.success()),
            "pi exits 0 at EOF: {status:?}"
        );
        out
    })
}

#[test]
fn prompt_with_an_edit_streams_the_diff() {
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call(
                "edit",
                json!({"path": "notes.txt", "edits": [{"oldText": "old line", "newText": "new line"}]}),
            ),
            Turn::text("Edited."),
        ]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("notes.txt", "first\nsecond\nold line\n");
    let cwd = root.cwd.clone();
    let (stop, updates) = drive(&root, &[], Answer::Allow, async move |peer| {
        let id = peer.new_session(&cwd).await?;
        let stop = peer.prompt(&id, "fix the note").await?;
        Ok((stop, peer.updates()))
    });
    assert_eq!(stop, StopReason::EndTurn);
    let file = root.cwd.join("notes.txt");
    let call = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .expect("a tool_call");
    assert_eq!(call.kind, ToolKind::Edit);
    assert_eq!(call.status, ToolCallStatus::InProgress);
    assert_eq!(call.title, "edit notes.txt");
    assert_eq!(call.locations.len(), 1);
    assert_eq!(call.locations[0].path, file);
    // The 1-based line of the edit's unique `oldText` in the file before the edit.
    assert_eq!(call.locations[0].line, Some(3));
    let done = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCallUpdate(t)
                if t.tool_call_id == call.tool_call_id
                    && t.fields.status == Some(ToolCallStatus::Completed) =>
            {
                Some(t.clone())
            }
            _ => None,
        })
        .expect("a completed tool_call_update");
    let Some([ToolCallContent::Diff(diff)]) = done.fields.content.as_deref() else {
        panic!("diff content: {done:?}");
    };
    assert_eq!(diff.path, file);
    assert_eq!(diff.old_text.as_deref(), Some("first\nsecond\nold line\n"));
    assert_eq!(diff.new_text, "first\nsecond\nnew line\n");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "first\nsecond\nnew line\n"
    );
    assert_eq!(agent_text(&updates), "Edited.");
    // The context in use after the turn (get_session_stats.contextUsage).
    assert!(
        updates
            .iter()
            .any(|u| matches!(u, SessionUpdate::UsageUpdate(x) if x.size > 0 && x.used > 0)),
        "{updates:?}"
    );
}

#[test]
fn cancel_mid_stream_ends_the_turn_cancelled() {
    let long = "word ".repeat(200);
    let (_fake, root) = setup(
        Script::new([
            Turn::text(long).chunk_size(5).delay_ms(30),
            Turn::text(HELLO),
        ]),
        DEFAULT_MODEL,
    );
    let cwd = root.cwd.clone();
    let (stop, next) = drive(&root, &[], Answer::Allow, async move |peer| {
        let id = peer.new_session(&cwd).await?;
        let sent = peer.cx.send_request(PromptRequest::new(
            id.clone(),
            vec![text_block("talk a lot")],
        ));
        peer.wait_update(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .await;
        peer.cx
            .send_notification(CancelNotification::new(id.clone()))?;
        let stop = sent.block_task().await?.stop_reason;
        // The session serves the next prompt.
        let next = peer.prompt(&id, "again").await?;
        Ok((stop, next))
    });
    assert_eq!(stop, StopReason::Cancelled);
    assert_eq!(next, StopReason::EndTurn);
}

#[test]
fn load_replays_a_session_written_by_rpc_mode() {
    let (_fake, root) = setup(
        Script::new([Turn::text(HELLO), Turn::text("Second answer.")]),
        DEFAULT_MODEL,
    );
    let mut rpc = root.spawn_with_session();
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "Say hello"}));
    rpc.wait_event("agent_settled");
    rpc.close_stdin();
    assert!(rpc.wait_exit(LIVENESS).is_some());
    let files = root.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&files[0])
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let id = header["id"].as_str().unwrap().to_string();
    let cwd = root.cwd.clone();
    let want = id.clone();
    let (listed, replayed, stop) = drive(&root, &[], Answer::Allow, async move |peer| {
        let listed = peer
            .cx
            .send_request(ListSessionsRequest::new().cwd(cwd.clone()))
            .block_task()
            .await?;
        peer.cx
            .send_request(LoadSessionRequest::new(want.clone(), cwd.clone()))
            .block_task()
            .await?;
        let replayed = peer.updates();
        let stop = peer.prompt(&want, "And again").await?;
        Ok((listed, replayed, stop))
    });
    let ids: Vec<String> = listed
        .sessions
        .iter()
        .map(|s| s.session_id.0.to_string())
        .collect();
    assert_eq!(ids, [id]);
    assert_eq!(listed.sessions[0].cwd, root.cwd);
    let user = chunks(&replayed, |u| match u {
        SessionUpdate::UserMessageChunk(c) => Some(&c.content),
        _ => None,
    });
    assert_eq!(user, "Say hello");
    assert_eq!(agent_text(&replayed), HELLO);
    assert_eq!(stop, StopReason::EndTurn);
    // The same file goes on: both turns are in it.
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        text.contains("And again") && text.contains("Second answer."),
        "{text}"
    );
    assert_eq!(root.session_files().len(), 1);
}

#[test]
fn permission_requests_answered_both_ways() {
    for (answer, runs) in [(Answer::Allow, true), (Answer::Reject, false)] {
        let (_fake, root) = setup(
            Script::new([
                Turn::tool_call("bash", json!({"command": "touch made.txt"})),
                Turn::text("ok"),
            ]),
            DEFAULT_MODEL,
        );
        root.merge_settings(json!({"permissions": {"mode": "ask"}}));
        let cwd = root.cwd.clone();
        let (asks, updates) = drive(&root, &[], answer, async move |peer| {
            let id = peer.new_session(&cwd).await?;
            peer.prompt(&id, "go").await?;
            let asks = peer.asks.lock().unwrap().clone();
            Ok((asks, peer.updates()))
        });
        assert_eq!(asks.len(), 1);
        let kinds: Vec<PermissionOptionKind> = asks[0].options.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                PermissionOptionKind::AllowOnce,
                PermissionOptionKind::AllowAlways,
                PermissionOptionKind::RejectOnce
            ]
        );
        let title = asks[0].tool_call.fields.title.clone().unwrap_or_default();
        assert_eq!(title, "Allow tool call bash(touch made.txt)?");
        assert_eq!(root.cwd.join("made.txt").exists(), runs);
        let want = if runs {
            ToolCallStatus::Completed
        } else {
            ToolCallStatus::Failed
        };
        assert!(
            updates.iter().any(|u| matches!(u,
                SessionUpdate::ToolCallUpdate(t) if t.fields.status == Some(want))),
            "{updates:?}"
        );
    }
}

#[test]
fn commands_list_templates_and_skills_and_run_them() {
    let (fake, root) = setup(Script::new([Turn::text(HELLO)]), DEFAULT_MODEL);
    std::fs::create_dir_all(root.agent_dir.join("prompts")).unwrap();
    std::fs::write(
        root.agent_dir.join("prompts/review.md"),
        "Review this: $@\n",
    )
    .unwrap();
    let skill = root.agent_dir.join("skills/lint/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: lint\ndescription: Lints the code.\n---\n\n# lint\n",
    )
    .unwrap();
    let cwd = root.cwd.clone();
    let (names, stop) = drive(&root, &[], Answer::Allow, async move |peer| {
        let id = peer.new_session(&cwd).await?;
        let update = peer
            .wait_update(|u| matches!(u, SessionUpdate::AvailableCommandsUpdate(_)))
            .await;
        let SessionUpdate::AvailableCommandsUpdate(list) = update else {
            unreachable!()
        };
        let names: Vec<String> = list
            .available_commands
            .iter()
            .map(|c| c.name.clone())
            .collect();
        let stop = peer.prompt(&id, "/review main.rs").await?;
        Ok((names, stop))
    });
    assert!(names.iter().any(|n| n == "review"), "{names:?}");
    assert!(names.iter().any(|n| n == "skill:lint"), "{names:?}");
    assert_eq!(stop, StopReason::EndTurn);
    let requests = fake.llm_requests();
    assert!(
        requests
            .last()
            .is_some_and(|r| r.body.to_string().contains("Review this: main.rs")),
        "the template was expanded"
    );
}

/// Raw lines: a malformed line gets `-32700`, an unknown method `-32601`, and the agent goes on
/// serving (the SDK's framing, seen from the wire).
#[test]
fn malformed_line_and_unknown_method_keep_serving() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let mut child = acp_command(&root, &[]).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut exchange = |line: &str| -> Value {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    let init = exchange(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
    );
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    let bad = exchange("{not json");
    assert_eq!(bad["error"]["code"], -32700, "{bad}");
    let unknown = exchange(r#"{"jsonrpc":"2.0","id":2,"method":"session/teleport","params":{}}"#);
    assert_eq!(unknown["id"], 2);
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let cwd = PathBuf::from(&root.cwd);
    let listed = exchange(&format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"session/list","params":{{"cwd":{}}}}}"#,
        json!(cwd)
    ));
    assert_eq!(listed["id"], 3);
    assert_eq!(listed["result"]["sessions"], json!([]), "{listed}");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// The TypeScript SDK cache (`PI_ACP_SDK`, set by `.ci/run` from `scripts/fetch-acp-sdk.sh`).
/// Missing: a failure with `PI_REQUIRE_TEST_RESOURCES=1`, else a notice and the test passes
/// without running.
fn ts_sdk() -> Option<PathBuf> {
    let dir = std::env::var_os("PI_ACP_SDK")
        .map(PathBuf::from)
        .filter(|d| d.join(".complete").is_file());
    if dir.is_none() {
        let what = "the TypeScript ACP SDK (PI_ACP_SDK)";
        let how = "run PI_ACP_SDK=$(scripts/fetch-acp-sdk.sh) cargo test";
        if std::env::var_os("PI_REQUIRE_TEST_RESOURCES").is_some_and(|v| v == "1") {
            panic!("missing test resource: {what}; {how} (PI_REQUIRE_TEST_RESOURCES=1 is set)");
        }
        eprintln!("SKIP: {what}; {how}");
    }
    dir
}

/// The official TypeScript SDK's client (`client()` of `@agentclientprotocol/sdk` 2.4.0, over
/// `ndJsonStream` on the child's pipes) spawns `pi --mode acp`, opens a session and sends a
/// prompt whose edit needs a permission (mode `ask`): the permission request is answered
/// allow-once, the edit's diff arrives as ACP diff content, the turn ends `end_turn`.
const TS_CLIENT: &str = r#"
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
const sdk = await import(pathToFileURL(join(process.env.ACP_SDK_DIR,
  "node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js")).href);
const child = spawn(process.env.PI_BIN, ["--mode", "acp"], { stdio: ["pipe", "pipe", "inherit"] });
const stream = sdk.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const updates = [];
const asks = [];
const app = sdk.client()
  .onNotification("session/update", ({ params }) => { updates.push(params.update); })
  .onRequest("session/request_permission", ({ params }) => {
    asks.push(params);
    const allow = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: allow.optionId } };
  });
const timer = setTimeout(() => { console.error("timed out"); process.exit(3); }, 60000);
const out = await app.connectWith(stream, async (agent) => {
  const init = await agent.request("initialize",
    { protocolVersion: sdk.PROTOCOL_VERSION, clientCapabilities: {} });
  const session = await agent.request("session/new", { cwd: process.cwd(), mcpServers: [] });
  const done = await agent.request("session/prompt", { sessionId: session.sessionId,
    prompt: [{ type: "text", text: "fix the note" }] });
  return { init, sessionId: session.sessionId, stopReason: done.stopReason };
});
child.stdin.end();
const code = await new Promise((resolve) => child.on("exit", resolve));
clearTimeout(timer);
console.log(JSON.stringify({ ...out, updates, asks, code }));
"#;

#[test]
fn typescript_sdk_client_drives_a_prompt_with_a_diff() {
    let Some(sdk) = ts_sdk() else { return };
    let (_fake, root) = setup(
        Script::new([
            Turn::tool_call(
                "edit",
                json!({"path": "notes.txt", "edits": [{"oldText": "old line", "newText": "new line"}]}),
            ),
            Turn::text("Edited."),
        ]),
        DEFAULT_MODEL,
    );
    root.merge_settings(json!({"permissions": {"mode": "ask"}, "quietStartup": true}));
    root.write_cwd_file("notes.txt", "old line\n");
    let script = root.tmp.join("client.mjs");
    std::fs::write(&script, TS_CLIENT).unwrap();
    let out = std::process::Command::new("node")
        .arg(&script)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .env("PI_BIN", env!("CARGO_BIN_EXE_pi"))
        .env("ACP_SDK_DIR", &sdk)
        .output()
        .expect("node");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "node client failed: {stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("the client's JSON line");
    assert_eq!(v["init"]["protocolVersion"], 1, "{v}");
    assert_eq!(v["init"]["agentCapabilities"]["loadSession"], true);
    assert_eq!(v["stopReason"], "end_turn", "{v}");
    assert_eq!(v["code"], 0, "pi exits 0 at EOF");
    assert_eq!(v["asks"].as_array().map(Vec::len), Some(1), "{v}");
    let file = root.cwd.join("notes.txt");
    let updates = v["updates"].as_array().unwrap();
    let call = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .expect("a tool_call");
    assert_eq!(call["kind"], "edit");
    assert_eq!(call["locations"][0]["path"], json!(file));
    let diff = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .map(|u| u["content"][0].clone())
        .expect("a completed tool_call_update");
    assert_eq!(
        diff,
        json!({"type": "diff", "path": file, "oldText": "old line\n", "newText": "new line\n"})
    );
    let text: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Edited.");
}

/// An extension command that asks through every dialog, then reports what it got.
const UI_EXT: &str = r#"
export default function (pi) {
  pi.registerCommand("probe", {
    description: "walk the UI",
    handler: async (args, ctx) => {
      const ok = await ctx.ui.confirm("Sure?", "Really.");
      const pick = await ctx.ui.select("Pick", ["a", "b"]);
      const name = await ctx.ui.input("Name", "here");
      const text = await ctx.ui.editor("Edit", "pre");
      ctx.ui.notify(`ok=${ok} pick=${pick} name=${name ?? null} text=${text ?? null}`, "info");
    },
  });
}
"#;

/// Extension dialogs: `confirm`/`select` become `session/request_permission` (answered both
/// ways), `input`/`editor` resolve to their default, `notify` arrives as an agent message; the
/// command shows in `available_commands_update`.
#[test]
fn extension_dialogs_become_permission_requests() {
    for (answer, want) in [
        (Answer::Allow, "ok=true pick=a name=null text=null"),
        (
            Answer::Reject,
            "ok=false pick=undefined name=null text=null",
        ),
    ] {
        let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
        root.write_cwd_file("ext/ui.js", UI_EXT);
        let cwd = root.cwd.clone();
        let (names, asks, stop, text) =
            drive(&root, &["-e", "ext/ui.js"], answer, async move |peer| {
                let id = peer.new_session(&cwd).await?;
                let update = peer
                    .wait_update(|u| matches!(u, SessionUpdate::AvailableCommandsUpdate(_)))
                    .await;
                let SessionUpdate::AvailableCommandsUpdate(list) = update else {
                    unreachable!()
                };
                let names: Vec<String> = list
                    .available_commands
                    .iter()
                    .map(|c| c.name.clone())
                    .collect();
                let stop = peer.prompt(&id, "/probe").await?;
                peer.wait_update(|u| agent_text(std::slice::from_ref(u)).contains("ok="))
                    .await;
                let asks = peer.asks.lock().unwrap().clone();
                Ok((names, asks, stop, agent_text(&peer.updates())))
            });
        assert_eq!(
            names.first().map(String::as_str),
            Some("probe"),
            "{names:?}"
        );
        assert_eq!(stop, StopReason::EndTurn);
        assert_eq!(asks.len(), 2, "{asks:?}");
        let titles: Vec<String> = asks
            .iter()
            .map(|a| a.tool_call.fields.title.clone().unwrap_or_default())
            .collect();
        assert_eq!(titles, ["Sure?\nReally.", "Pick"]);
        let options: Vec<String> = asks[1].options.iter().map(|o| o.name.clone()).collect();
        assert_eq!(options, ["a", "b"]);
        assert_eq!(text.trim(), want);
    }
}

/// With a client that announced elicitation forms, extension `input`/`editor` dialogs become
/// `elicitation/create` forms of the session (one string field; an editor's prefill as its
/// default) and the accepted value is the dialog's answer; confirm/select stay permission
/// requests.
#[test]
fn extension_input_and_editor_become_elicitation_forms() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    root.write_cwd_file("ext/ui.js", UI_EXT);
    let cwd = root.cwd.clone();
    let (id, elicits, asks, text) = drive_as(
        &root,
        &["-e", "ext/ui.js"],
        Answer::Allow,
        true,
        async move |peer| {
            let id = peer.new_session(&cwd).await?;
            assert_eq!(peer.prompt(&id, "/probe").await?, StopReason::EndTurn);
            peer.wait_update(|u| agent_text(std::slice::from_ref(u)).contains("ok="))
                .await;
            let elicits = peer.elicits.lock().unwrap().clone();
            let asks = peer.asks.lock().unwrap().len();
            Ok((id, elicits, asks, agent_text(&peer.updates())))
        },
    );
    assert_eq!(asks, 2, "confirm and select are permission requests");
    assert_eq!(
        text.trim(),
        "ok=true pick=a name=typed Name text=typed Edit"
    );
    let messages: Vec<&str> = elicits.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(messages, ["Name", "Edit"]);
    for e in &elicits {
        let ElicitationMode::Form(form) = &e.mode else {
            panic!("a form: {e:?}")
        };
        let scope = serde_json::to_value(&form.scope).unwrap();
        assert_eq!(scope["sessionId"], json!(id), "{scope}");
        assert_eq!(
            form.requested_schema.required,
            Some(vec!["value".to_string()])
        );
    }
    let ElicitationMode::Form(editor) = &elicits[1].mode else {
        unreachable!()
    };
    let field = serde_json::to_value(&editor.requested_schema.properties["value"]).unwrap();
    assert_eq!(field["default"], "pre", "{field}");
}

/// The current value of config option `id`.
fn option_value(options: &[SessionConfigOption], id: &str) -> Option<String> {
    options
        .iter()
        .find(|o| &*o.id.0 == id)
        .map(|o| match &o.kind {
            SessionConfigKind::Select(s) => s.current_value.0.to_string(),
            other => format!("{other:?}"),
        })
}

/// Two sessions of one process (two cwds) each get their own updates; thinking arrives as
/// `agent_thought_chunk`; a reply cut at the output limit ends `max_tokens`, a provider refusal
/// `refusal`; the model and thinking level are set through config options.
#[test]
fn sessions_thinking_stop_reasons_and_options() {
    let (_fake, root) = setup(
        Script::new([
            Turn::blocks([
                Block::thinking("Let me think.", "sig"),
                Block::text("Thought."),
            ])
            .matching("first question"),
            Turn::text("Cut her")
                .stop_reason("length")
                .matching("second question"),
            Turn::text("No.")
                .stop_reason("refusal")
                .matching("third question"),
        ]),
        "fake-anthropic/fake-claude",
    );
    let sub = root.cwd.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let cwd = root.cwd.clone();
    let out = drive(&root, &[], Answer::Allow, async move |peer| {
        let a = peer.new_session(&cwd).await?;
        let b = peer.new_session(&sub).await?;
        let first = peer.prompt(&a, "first question").await?;
        let second = peer.prompt(&b, "second question").await?;
        let third = peer.prompt(&b, "third question").await?;
        let level = peer.set_option(&b, "thought_level", "high").await?;
        let model = peer
            .set_option(&b, "model", "fake-openai/fake-gpt-mini")
            .await?;
        let bad = peer.set_option(&b, "colour", "red").await;
        let notes = peer.updates.lock().unwrap().clone();
        Ok((
            a,
            b,
            [first, second, third],
            level,
            model,
            bad.is_err(),
            notes,
        ))
    });
    let (a, b, stops, level, model, bad, notes) = out;
    assert_ne!(a, b);
    assert_eq!(
        stops,
        [
            StopReason::EndTurn,
            StopReason::MaxTokens,
            StopReason::Refusal
        ]
    );
    let of = |id: &str| -> Vec<SessionUpdate> {
        notes
            .iter()
            .filter(|n| &*n.session_id.0 == id)
            .map(|n| n.update.clone())
            .collect()
    };
    let thought = chunks(&of(&a), |u| match u {
        SessionUpdate::AgentThoughtChunk(c) => Some(&c.content),
        _ => None,
    });
    assert_eq!(thought, "Let me think.");
    assert_eq!(agent_text(&of(&a)), "Thought.");
    assert_eq!(agent_text(&of(&b)), "Cut herNo.");
    assert_eq!(
        option_value(&level.config_options, "thought_level").as_deref(),
        Some("high")
    );
    assert_eq!(
        option_value(&model.config_options, "model").as_deref(),
        Some("fake-openai/fake-gpt-mini")
    );
    // The mini model has no reasoning: its only level is off.
    assert_eq!(
        option_value(&model.config_options, "thought_level").as_deref(),
        Some("off")
    );
    assert!(bad, "an unknown option is an error");
}

/// EOF while a reply streams: the run is aborted and settled before pi exits 0, and what
/// streamed is in the session file.
#[test]
fn eof_mid_stream_keeps_the_session_file() {
    let long = "word ".repeat(200);
    let (_fake, root) = setup(
        Script::new([Turn::text(long).chunk_size(5).delay_ms(30)]),
        DEFAULT_MODEL,
    );
    let cwd = root.cwd.clone();
    let id = drive(&root, &[], Answer::Allow, async move |peer| {
        let id = peer.new_session(&cwd).await?;
        let sent = peer
            .cx
            .send_request(PromptRequest::new(id.clone(), vec![text_block("talk")]));
        peer.wait_update(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .await;
        // Closing the connection with the prompt unanswered.
        sent.detach();
        Ok(id)
    });
    let files = root.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let lines = check_session_file(&files[0]).expect("a whole session file");
    assert_eq!(lines[0]["id"], id);
    let last = lines.last().unwrap();
    assert_eq!(last["message"]["role"], "assistant", "{last}");
    assert_eq!(last["message"]["stopReason"], "aborted", "{last}");
    assert!(last["message"]["content"][0]["text"]
        .as_str()
        .is_some_and(|t| t.starts_with("word")));
}

/// A client that closes pi's stdout while a reply streams (an editor quitting), and only then
/// its stdin: the next writes fail with `EPIPE`, which is the client gone, not a transport
/// failure. The run is aborted and settled at EOF as on any close, what streamed is in the
/// session file, and pi exits 0 (it exited 1 with the SDK's write error before).
#[test]
fn a_client_that_closes_stdout_first_still_gets_a_settled_session_and_exit_0() {
    let long = "word ".repeat(400);
    let (_fake, root) = setup(
        Script::new([Turn::text(long).chunk_size(5).delay_ms(20)]),
        DEFAULT_MODEL,
    );
    let mut child = acp_command(&root, &[]).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |line: Value| {
        stdin.write_all(format!("{line}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}}}));
    let mut session = None;
    let mut chunk_seen = false;
    while !chunk_seen {
        let line = lines.next().expect("pi's stdout").unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 1 {
            let _: InitializeResponse = serde_json::from_value(v["result"].clone()).unwrap();
            send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                "params": {"cwd": root.cwd, "mcpServers": []}}));
        } else if v["id"] == 2 {
            let id = v["result"]["sessionId"]
                .as_str()
                .unwrap_or_else(|| panic!("{v}"))
                .to_string();
            send(
                json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                "params": {"sessionId": id, "prompt": [{"type": "text", "text": "talk"}]}}),
            );
            session = Some(id);
        } else if v["method"] == "session/update" {
            let n: SessionNotification = serde_json::from_value(v["params"].clone()).unwrap();
            chunk_seen = matches!(n.update, SessionUpdate::AgentMessageChunk(_));
        }
    }
    // The client stops reading: pi's next chunks meet a closed pipe.
    drop(lines);
    std::thread::sleep(Duration::from_millis(400));
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(
        status.success(),
        "pi exits 0 when the client is gone: {status:?}"
    );
    let files = root.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let entries = check_session_file(&files[0]).expect("a whole session file");
    assert_eq!(entries[0]["id"], session.unwrap().as_str());
    let last = entries.last().unwrap();
    assert_eq!(last["message"]["role"], "assistant", "{last}");
    assert_eq!(last["message"]["stopReason"], "aborted", "{last}");
}

/// A prompt sent while a turn streams is queued as pi's steer: the model gets it in the same
/// run, and both prompts answer once the session is quiet.
#[test]
fn prompt_while_streaming_steers() {
    let long = "word ".repeat(40);
    let (fake, root) = setup(
        Script::new([
            Turn::text(long).chunk_size(5).delay_ms(20),
            Turn::text("Steered."),
        ]),
        DEFAULT_MODEL,
    );
    let cwd = root.cwd.clone();
    let (first, second, text) = drive(&root, &[], Answer::Allow, async move |peer| {
        let id = peer.new_session(&cwd).await?;
        let first = peer
            .cx
            .send_request(PromptRequest::new(id.clone(), vec![text_block("talk")]));
        peer.wait_update(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .await;
        let second = peer.prompt(&id, "change course").await?;
        let first = first.block_task().await?.stop_reason;
        Ok((first, second, agent_text(&peer.updates())))
    });
    assert_eq!((first, second), (StopReason::EndTurn, StopReason::EndTurn));
    assert!(text.ends_with("Steered."), "{text}");
    let requests = fake.llm_requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].body.to_string().contains("change course"));
}

/// `session/load` of a session file recorded by upstream pi 1.6 (tests/fixtures): its branch is
/// replayed, its model and thinking level are the session's options, and a prompt goes on in
/// the same file.
#[test]
fn load_replays_an_upstream_session() {
    let (_fake, root) = setup(Script::new([Turn::text("Third answer.")]), DEFAULT_MODEL);
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/upstream_claude_high.jsonl"),
    )
    .unwrap()
    .replace("/RUN_ROOT/cwd", &root.cwd.to_string_lossy());
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let id = header["id"].as_str().unwrap().to_string();
    let encoded = format!(
        "--{}--",
        root.cwd
            .to_string_lossy()
            .trim_start_matches('/')
            .replace('/', "-")
    );
    let dir = root.agent_dir.join("sessions").join(encoded);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("2026-12-01T12-00-40-595Z_{id}.jsonl"));
    std::fs::write(&file, &text).unwrap();
    let cwd = root.cwd.clone();
    let want = id;
    let (options, replayed, stop) = drive(&root, &[], Answer::Allow, async move |peer| {
        let loaded = peer
            .cx
            .send_request(LoadSessionRequest::new(want.clone(), cwd.clone()))
            .block_task()
            .await?;
        let replayed = peer.updates();
        let stop = peer.prompt(&want, "Third question").await?;
        Ok((loaded.config_options.unwrap_or_default(), replayed, stop))
    });
    let user = chunks(&replayed, |u| match u {
        SessionUpdate::UserMessageChunk(c) => Some(&c.content),
        _ => None,
    });
    assert_eq!(user, "First questionSecond question");
    assert_eq!(agent_text(&replayed), "First answer.Second answer.");
    assert!(
        !replayed
            .iter()
            .any(|u| matches!(u, SessionUpdate::AgentThoughtChunk(_))),
        "a signature-only thinking block is not replayed"
    );
    assert_eq!(
        option_value(&options, "model").as_deref(),
        Some("fake-anthropic/fake-claude")
    );
    assert_eq!(
        option_value(&options, "thought_level").as_deref(),
        Some("high")
    );
    assert_eq!(stop, StopReason::EndTurn);
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.starts_with(&text),
        "the upstream lines are kept as they were"
    );
    assert!(after.contains("Third answer."));
}

/// `session/close` forgets a session (a prompt to it is then `session not found`) and keeps its
/// file; `session/resume` opens it again without a replay, and it goes on.
#[test]
fn close_then_resume_goes_on_in_the_same_file() {
    let (_fake, root) = setup(
        Script::new([Turn::text(HELLO), Turn::text("Again.")]),
        DEFAULT_MODEL,
    );
    let cwd = root.cwd.clone();
    let (refused, before, replayed, stop) = drive(&root, &[], Answer::Allow, async move |peer| {
        let id = peer.new_session(&cwd).await?;
        peer.prompt(&id, "Say hello").await?;
        peer.cx
            .send_request(CloseSessionRequest::new(id.clone()))
            .block_task()
            .await?;
        let refused = peer.prompt(&id, "lost").await.is_err();
        let before = peer.updates().len();
        peer.cx
            .send_request(ResumeSessionRequest::new(id.clone(), cwd.clone()))
            .block_task()
            .await?;
        let replayed = peer.updates()[before..]
            .iter()
            .filter(|u| {
                matches!(
                    u,
                    SessionUpdate::UserMessageChunk(_) | SessionUpdate::AgentMessageChunk(_)
                )
            })
            .count();
        let stop = peer.prompt(&id, "Once more").await?;
        Ok((refused, before, replayed, stop))
    });
    assert!(refused, "a closed session is not found");
    assert!(before > 0);
    assert_eq!(replayed, 0, "resume replays nothing");
    assert_eq!(stop, StopReason::EndTurn);
    let files = root.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.contains(HELLO) && text.contains("Again."), "{text}");
}

/// The client's `mcpServers` of `session/new` (the fake MCP server over stdio): started for
/// that session, its tools offered to the model as `direct` tools of that session only (a
/// second session without them is not offered them), a call reaches it, and it stops when the
/// session closes; `initialize` announces HTTP, not SSE.
#[test]
fn client_mcp_servers_serve_their_session_only() {
    let (fake, root) = setup(
        Script::new([
            Turn::text("").with_tool_call("mcp__editor_tools__echo", json!({"text": "hi"})),
            Turn::text("done"),
            Turn::text("plain"),
        ]),
        DEFAULT_MODEL,
    );
    let pidfile = root.tmp.join("server.pid");
    let server = McpServer::Stdio(
        McpServerStdio::new("editor tools", crate::mcp::fake_mcp())
            .args(vec!["--pidfile".into(), pidfile.to_string_lossy().into()]),
    );
    let cwd = root.cwd.clone();
    let pf = pidfile;
    let (caps, updates, pid, gone) = drive(&root, &[], Answer::Allow, async move |peer| {
        let caps = peer.init.agent_capabilities.mcp_capabilities.clone();
        let a = peer
            .cx
            .send_request(NewSessionRequest::new(cwd.clone()).mcp_servers(vec![server]))
            .block_task()
            .await?
            .session_id
            .0
            .to_string();
        let stop = peer.prompt(&a, "call it").await?;
        assert_eq!(stop, StopReason::EndTurn);
        let updates = peer.updates();
        let b = peer.new_session(&cwd).await?;
        assert_eq!(peer.prompt(&b, "anything").await?, StopReason::EndTurn);
        let pid = crate::mcp::read_pid(&pf);
        assert!(
            crate::mcp::alive(pid),
            "the server runs while its session is open"
        );
        peer.cx
            .send_request(CloseSessionRequest::new(a.clone()))
            .block_task()
            .await?;
        let gone = crate::mcp::wait_gone(pid);
        Ok((caps, updates, pid, gone))
    });
    assert!(caps.http && !caps.sse, "{caps:?}");
    assert!(gone, "MCP server {pid} outlived session/close");
    let done = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCallUpdate(t)
                if t.fields.status == Some(ToolCallStatus::Completed) =>
            {
                Some(t.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("a completed tool call: {updates:?}"));
    let text: String = done
        .fields
        .content
        .iter()
        .flatten()
        .filter_map(|c| match c {
            ToolCallContent::Content(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(text, "echo: hi");
    let first = crate::mcp::offered_tools(&fake, 0);
    assert!(
        first.contains(&"mcp__editor_tools__echo".to_string()),
        "{first:?}"
    );
    assert!(first.contains(&"read".to_string()), "{first:?}");
    let other = crate::mcp::offered_tools(&fake, 2);
    assert!(
        other.iter().all(|t| !t.starts_with("mcp__")),
        "the other session is not offered the client's servers: {other:?}"
    );
    assert_eq!(agent_text(&updates), "done");
}

/// `usage_update` carries the session's cost so far (USD, RPC `get_session_stats.cost`): after
/// each turn, the sum of the replies' `usage.cost.total` in the session file.
#[test]
fn usage_update_carries_the_session_cost() {
    let (_fake, root) = setup(
        Script::new([
            Turn::text(HELLO).usage(Usage::new(1200, 300)),
            Turn::text("Again.").usage(Usage::new(2500, 400)),
        ]),
        DEFAULT_MODEL,
    );
    let cwd = root.cwd.clone();
    let costs = drive(&root, &[], Answer::Allow, async move |peer| {
        let id = peer.new_session(&cwd).await?;
        let mut costs = Vec::new();
        for text in ["one", "two"] {
            peer.prompt(&id, text).await?;
            let last = peer
                .updates()
                .into_iter()
                .filter_map(|u| match u {
                    SessionUpdate::UsageUpdate(x) => Some(x),
                    _ => None,
                })
                .last()
                .expect("a usage_update after the turn");
            let cost = last.cost.expect("a cost");
            assert_eq!(cost.currency, "USD");
            costs.push(cost.amount);
        }
        Ok(costs)
    });
    let files = root.session_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let per_reply: Vec<f64> = std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"]["role"] == "assistant")
        .map(|v| v["message"]["usage"]["cost"]["total"].as_f64().unwrap())
        .collect();
    assert_eq!(per_reply.len(), 2);
    assert!(per_reply.iter().all(|c| *c > 0.0), "{per_reply:?}");
    assert!(
        (costs[0] - per_reply[0]).abs() < 1e-12,
        "{costs:?} {per_reply:?}"
    );
    assert!(
        (costs[1] - (per_reply[0] + per_reply[1])).abs() < 1e-12,
        "{costs:?} {per_reply:?}"
    );
}

/// `session/new` sends one startup `agent_message_chunk` after its answer (pi's version and the
/// context files, skills, prompt templates the session loaded); `session/load` does not, and
/// neither does `session/new` with `quietStartup: true`.
#[test]
fn new_session_shows_startup_info_unless_quiet() {
    for quiet in [false, true] {
        let (_fake, root) = setup(Script::new([Turn::text(HELLO)]), DEFAULT_MODEL);
        root.merge_settings(json!({"quietStartup": quiet}));
        root.write_cwd_file("AGENTS.md", "Be brief.\n");
        for (rel, text) in [
            (
                "skills/tidy/SKILL.md",
                "---\nname: tidy\ndescription: Tidy up\n---\nTidy.\n",
            ),
            ("prompts/review.md", "Review the change.\n"),
        ] {
            let p = root.agent_dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let cwd = root.cwd.clone();
        let (first, loaded) = drive(&root, &[], Answer::Allow, async move |peer| {
            let id = peer.new_session(&cwd).await?;
            peer.wait_update(|u| matches!(u, SessionUpdate::AvailableCommandsUpdate(_)))
                .await;
            let first = agent_text(&peer.updates());
            peer.prompt(&id, "hello").await?;
            let before = peer.updates().len();
            peer.cx
                .send_request(LoadSessionRequest::new(id, cwd.clone()))
                .block_task()
                .await?;
            // The startup info would come before the session's commands.
            let commands =
                |u: &SessionUpdate| matches!(u, SessionUpdate::AvailableCommandsUpdate(_));
            for _ in 0..250 {
                if peer.updates()[before..].iter().any(commands) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok((first, agent_text(&peer.updates()[before..])))
        });
        // The load replays the transcript only.
        assert_eq!(loaded, HELLO, "quiet={quiet}");
        if quiet {
            assert_eq!(first, "");
            continue;
        }
        assert!(
            first.starts_with(&format!("pi v{}\n", env!("CARGO_PKG_VERSION"))),
            "{first}"
        );
        let agents = root.cwd.join("AGENTS.md");
        assert!(
            first.contains(&format!("## Context\n- {}", agents.display())),
            "{first}"
        );
        assert!(first.contains("## Skills\n- tidy ("), "{first}");
        assert!(first.contains("## Prompts\n- /review"), "{first}");
    }
}

/// pi-acp's headless slash commands: listed in `available_commands_update`, run by the
/// session (`/name`, `/session`, `/autocompact`, `/export`, `/compact`, `/steering`, `/queue`),
/// each answered with one agent message and `end_turn`, none sent to the model as a prompt.
#[test]
fn headless_slash_commands_are_listed_and_run() {
    let (fake, root) = setup(
        Script::new([
            Turn::text(HELLO).usage(Usage::new(1200, 300)),
            Turn::text("Second answer.").usage(Usage::new(1600, 300)),
            Turn::text("## Goal\nSummary of the talk."),
        ]),
        DEFAULT_MODEL,
    );
    root.merge_settings(json!({"compaction": {"keepRecentTokens": 10}}));
    let cwd = root.cwd.clone();
    let export = root.tmp.join("out.html");
    let exp = export.clone();
    let (names, replies, session_id) = drive(&root, &[], Answer::Allow, async move |peer| {
        let id = peer.new_session(&cwd).await?;
        let update = peer
            .wait_update(|u| matches!(u, SessionUpdate::AvailableCommandsUpdate(_)))
            .await;
        let SessionUpdate::AvailableCommandsUpdate(list) = update else {
            unreachable!()
        };
        let names: Vec<String> = list
            .available_commands
            .iter()
            .map(|c| c.name.clone())
            .collect();
        peer.prompt(&id, "hello").await?;
        peer.prompt(&id, "and again").await?;
        let mut replies = Vec::new();
        for cmd in [
            "/name Work",
            "/session".to_string().as_str(),
            "/autocompact off",
            &format!("/export {}", exp.display()),
            "/steering all",
            "/queue all",
            "/queue",
            "/compact",
        ] {
            let before = peer.updates().len();
            assert_eq!(peer.prompt(&id, cmd).await?, StopReason::EndTurn);
            replies.push(agent_text(&peer.updates()[before..]));
        }
        Ok((names, replies, id))
    });
    for n in [
        "compact",
        "autocompact",
        "export",
        "session",
        "name",
        "steering",
        "follow-up",
        "queue",
    ] {
        assert!(names.iter().any(|c| c == n), "{n} in {names:?}");
    }
    assert_eq!(replies[0], "Session named \"Work\".");
    assert!(
        replies[1].contains(&format!("Session {session_id}")),
        "{}",
        replies[1]
    );
    assert!(replies[1].contains("Name: Work"), "{}", replies[1]);
    assert!(
        replies[1].contains("Messages: 2 user, 2 assistant"),
        "{}",
        replies[1]
    );
    assert!(replies[1].contains("Cost: $"), "{}", replies[1]);
    assert_eq!(replies[2], "Auto-compaction is off.");
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(root.agent_dir.join("settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(settings["compaction"]["enabled"], false, "{settings}");
    assert_eq!(settings["steeringMode"], "all", "{settings}");
    // `/queue all` set the follow-up mode too (its default is one-at-a-time).
    assert_eq!(settings["followUpMode"], "all", "{settings}");
    assert_eq!(
        replies[3],
        format!("Session exported to {}", export.display())
    );
    assert!(std::fs::read_to_string(&export).unwrap().contains("<html"));
    assert_eq!(replies[4], "The steering mode is now all.");
    assert_eq!(replies[5], "The steering and follow-up modes are now all.");
    assert_eq!(
        replies[6],
        "The steering mode is all; the follow-up mode is all."
    );
    assert!(
        replies[7].contains("[context compacted]") && replies[7].contains("Compacted: "),
        "{}",
        replies[7]
    );
    // Two prompts and the summary reached the model; the commands did not.
    assert_eq!(fake.llm_requests().len(), 3);
    let file = std::fs::read_to_string(&root.session_files()[0]).unwrap();
    assert!(file.contains("\"type\":\"compaction\""), "{file}");
    assert!(!file.contains("/session"), "{file}");
}

/// An extension that acts on the session whose event or command ran it: `agent_end` appends an
/// entry, `/mark` appends one, names the session and sends a message; each carries the pid of
/// the Node process that acted.
const SESSION_EXT: &str = r#"
export default function (pi) {
  pi.on("agent_end", async () => {
    pi.appendEntry("ended", { pid: process.pid });
  });
  pi.registerCommand("mark", {
    description: "mark this session",
    handler: async (args, ctx) => {
      const ok = await ctx.ui.confirm("Mark?", args);
      pi.appendEntry("mark", { label: args, ok, pid: process.pid });
      pi.setSessionName(`named ${args}`);
      pi.sendMessage({ customType: "note", content: `note ${args}`, display: true });
    },
  });
}
"#;

/// The entries of the session file whose header id is `id` (empty while there is none).
fn session_entries(root: &RunRoot, id: &str) -> Vec<Value> {
    for file in root.session_files() {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if lines.first().is_some_and(|h| h["id"] == id) {
            return lines;
        }
    }
    Vec::new()
}

/// What the extension left in one session's file: the `ended` and `mark` entries' data, the
/// session names, the custom messages' text.
#[derive(Debug, Default)]
struct Marks {
    ended: Vec<Value>,
    marks: Vec<Value>,
    names: Vec<String>,
    notes: Vec<String>,
}

fn marks_of(entries: &[Value]) -> Marks {
    let mut m = Marks::default();
    for e in entries {
        match (e["type"].as_str(), e["customType"].as_str()) {
            (Some("custom"), Some("ended")) => m.ended.push(e["data"].clone()),
            (Some("custom"), Some("mark")) => m.marks.push(e["data"].clone()),
            (Some("custom_message"), Some("note")) => m
                .notes
                .push(e["content"].as_str().unwrap_or_default().into()),
            (Some("session_info"), _) => {
                m.names.push(e["name"].as_str().unwrap_or_default().into())
            }
            _ => {}
        }
    }
    m
}

/// Extension API calls act on the session whose event or command caused them (upstream with
/// pi-acp: every ACP session is its own `pi --mode rpc`, with its own extension runtime): two
/// sessions of one process, an `agent_end` handler's `appendEntry` and a command's
/// `appendEntry`/`setSessionName`/`sendMessage` land in that session's file only, and its
/// dialog's answer reaches the host that asked. Each session
/// has its own extension host; `session/close` stops that session's host, EOF every host.
#[test]
fn extension_calls_act_on_their_own_session() {
    let (_fake, root) = setup(
        Script::new([Turn::text("One."), Turn::text("Two.")]),
        DEFAULT_MODEL,
    );
    root.write_cwd_file("ext/session.js", SESSION_EXT);
    let cwd = root.cwd.clone();
    let probe = &root;
    let (a, b, b_gone) = drive(
        &root,
        &["-e", "ext/session.js"],
        Answer::Allow,
        async move |peer| {
            let a = peer.new_session(&cwd).await?;
            let b = peer.new_session(&cwd).await?;
            assert_eq!(peer.prompt(&a, "first").await?, StopReason::EndTurn);
            assert_eq!(peer.prompt(&b, "second").await?, StopReason::EndTurn);
            assert_eq!(peer.prompt(&b, "/mark bee").await?, StopReason::EndTurn);
            assert_eq!(peer.prompt(&a, "/mark ay").await?, StopReason::EndTurn);
            // The calls are not awaited by the handlers: wait until both marks are written.
            let deadline = std::time::Instant::now() + LIVENESS;
            let (mut in_a, mut in_b);
            loop {
                in_a = marks_of(&session_entries(probe, &a));
                in_b = marks_of(&session_entries(probe, &b));
                let done = |m: &Marks| {
                    !m.marks.is_empty()
                        && !m.names.is_empty()
                        && !m.notes.is_empty()
                        && !m.ended.is_empty()
                };
                if (done(&in_a) && done(&in_b)) || std::time::Instant::now() > deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let b_pid = in_b
                .marks
                .first()
                .and_then(|d| d["pid"].as_i64())
                .unwrap_or(0) as i32;
            peer.cx
                .send_request(CloseSessionRequest::new(b.clone()))
                .block_task()
                .await?;
            let b_gone = b_pid != 0 && crate::mcp::wait_gone(b_pid);
            Ok((a, b, b_gone))
        },
    );
    let in_a = marks_of(&session_entries(&root, &a));
    let in_b = marks_of(&session_entries(&root, &b));
    let labels = |m: &Marks| -> Vec<String> {
        m.marks
            .iter()
            .map(|d| d["label"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(labels(&in_a), ["ay"], "session a: {in_a:?}");
    assert_eq!(labels(&in_b), ["bee"], "session b: {in_b:?}");
    assert_eq!(in_a.marks[0]["ok"], true, "{in_a:?}");
    assert_eq!(in_b.marks[0]["ok"], true, "{in_b:?}");
    assert_eq!(in_a.names, ["named ay"], "{in_a:?}");
    assert_eq!(in_b.names, ["named bee"], "{in_b:?}");
    assert_eq!(in_a.notes, ["note ay"], "{in_a:?}");
    assert_eq!(in_b.notes, ["note bee"], "{in_b:?}");
    assert_eq!(in_a.ended.len(), 1, "one agent_end in a: {in_a:?}");
    assert_eq!(in_b.ended.len(), 1, "one agent_end in b: {in_b:?}");
    let pid = |m: &Marks| m.marks.first().and_then(|d| d["pid"].as_i64()).unwrap_or(0) as i32;
    let (a_pid, b_pid) = (pid(&in_a), pid(&in_b));
    assert_ne!(a_pid, b_pid, "each session has its own extension host");
    assert_eq!(in_a.ended[0]["pid"].as_i64(), Some(i64::from(a_pid)));
    assert_eq!(in_b.ended[0]["pid"].as_i64(), Some(i64::from(b_pid)));
    assert!(
        b_gone,
        "session b's extension host {b_pid} outlived session/close"
    );
    assert!(
        crate::mcp::wait_gone(a_pid),
        "extension host {a_pid} outlived pi's exit"
    );
}
