//! RPC mode: JSON commands on stdin, responses and events on stdout, one per line
//! (spec rpc-protocol.md §2–§4).
//!
//! Framing: records are split on LF only, one trailing CR is stripped, U+2028/U+2029 are never
//! separators. Every malformed record gets exactly one response and the process keeps serving.
//! Fast commands are answered inline in arrival order; slow ones (`abort`, a prompt's run) run
//! as tasks so they never block the reader. stdout has exactly one writer, which writes each
//! record as one whole line and flushes it.

use crate::agent_session::{AgentSession, PromptOutcome, QueueMode};
use crate::output::Output;
use pi_ai::{ImageContent, ThinkingLevel};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinSet;

/// Builds a response record (`{id?, type:"response", command?, success, data?/error?}`).
pub fn response(
    id: Option<&Value>,
    command: Option<&str>,
    result: Result<Option<Value>, String>,
) -> Value {
    let mut m = Map::new();
    if let Some(id) = id {
        m.insert("id".into(), id.clone());
    }
    m.insert("type".into(), json!("response"));
    if let Some(c) = command {
        m.insert("command".into(), json!(c));
    }
    match result {
        Ok(data) => {
            m.insert("success".into(), json!(true));
            if let Some(d) = data {
                m.insert("data".into(), d);
            }
        }
        Err(e) => {
            m.insert("success".into(), json!(false));
            m.insert("error".into(), json!(e));
        }
    }
    Value::Object(m)
}

/// The response to a line that is not valid JSON (rpc-protocol.md §2.3).
pub fn parse_error(message: &str) -> Value {
    json!({
        "type": "response",
        "command": "parse",
        "success": false,
        "error": format!("Failed to parse command: {message}"),
    })
}

/// Splits one raw input record: strips exactly one trailing CR.
pub fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Runs RPC mode until stdin closes and the run in flight has settled.
pub async fn run(session: AgentSession, out: Output) -> anyhow::Result<()> {
    let mut reader = BufReader::new(tokio::io::stdin());
    let mut tasks = JoinSet::new();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).await?;
        if n == 0 {
            break;
        }
        let at_eof = !buf.ends_with(b"\n");
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = strip_cr(line);
        handle_line(&session, &out, line, &mut tasks);
        if at_eof {
            break;
        }
    }
    while tasks.join_next().await.is_some() {}
    session.wait_settled().await;
    out.flush();
    Ok(())
}

fn handle_line(session: &AgentSession, out: &Output, line: &[u8], tasks: &mut JoinSet<()>) {
    // Invalid UTF-8 sequences decode to U+FFFD, as Node's stdin decoder does.
    let decoded = String::from_utf8_lossy(line);
    let text: &str = &decoded;
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            // Clients see the same text Node's JSON.parse gives (golden malformed_json); input
            // V8 would accept but serde rejects (nesting > 128, ...) keeps serde's message.
            let msg = crate::json_error::v8_json_error(text).unwrap_or_else(|| e.to_string());
            out.send(parse_error(&msg));
            return;
        }
    };
    if value.is_null() {
        // Upstream 1.6 crashes here (null_command_crash); we answer and keep serving.
        out.send(parse_error("a command must be a JSON object, got null"));
        return;
    }
    let id = value.get("id").cloned();
    let Some(kind) = value
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        out.send(response(
            id.as_ref(),
            None,
            Err("Unknown command: undefined".into()),
        ));
        return;
    };
    if kind == "extension_ui_response" {
        return;
    }
    dispatch(session, out, &kind, id, value, tasks);
}

fn ok(data: Value) -> Result<Option<Value>, String> {
    Ok(Some(data))
}

fn images_of(cmd: &Value) -> Result<Vec<ImageContent>, String> {
    match cmd.get("images") {
        None | Some(Value::Null) => Ok(vec![]),
        Some(v) => {
            let raw: Vec<Value> =
                serde_json::from_value(v.clone()).map_err(|e| format!("Invalid images: {e}"))?;
            raw.into_iter()
                .map(|mut i| {
                    // The block's `type` is implied; left in, it would be kept as an unknown
                    // key and written twice.
                    if let Value::Object(m) = &mut i {
                        m.remove("type");
                    }
                    serde_json::from_value::<ImageContent>(i)
                        .map_err(|e| format!("Invalid image: {e}"))
                })
                .collect()
        }
    }
}

fn str_field<'a>(cmd: &'a Value, key: &str) -> Option<&'a str> {
    cmd.get(key).and_then(Value::as_str)
}

fn dispatch(
    session: &AgentSession,
    out: &Output,
    kind: &str,
    id: Option<Value>,
    cmd: Value,
    tasks: &mut JoinSet<()>,
) {
    let reply = |r: Result<Option<Value>, String>| out.send(response(id.as_ref(), Some(kind), r));
    match kind {
        "prompt" => {
            let message = str_field(&cmd, "message").unwrap_or_default().to_string();
            let images = match images_of(&cmd) {
                Ok(i) => i,
                Err(e) => return reply(Err(e)),
            };
            match session.prompt(message, images, str_field(&cmd, "streamingBehavior")) {
                Ok(PromptOutcome::Started(run)) => {
                    reply(ok(json!({"disposition": "started"})));
                    tasks.spawn(run);
                }
                Ok(PromptOutcome::Queued) => reply(ok(json!({"disposition": "queued"}))),
                Err(e) => reply(Err(e)),
            }
        }
        "steer" | "follow_up" => {
            let message = str_field(&cmd, "message").unwrap_or_default().to_string();
            let images = match images_of(&cmd) {
                Ok(i) => i,
                Err(e) => return reply(Err(e)),
            };
            let msg = crate::agent_session::user_message(message, images);
            session.enqueue(msg, kind == "steer");
            reply(ok(json!({"disposition": "queued"})));
        }
        "abort" => {
            let s = session.clone();
            let o = out.clone();
            let id = id.clone();
            tasks.spawn(async move {
                s.abort().await;
                o.send(response(id.as_ref(), Some("abort"), Ok(None)));
            });
        }
        "bash" => {
            let Some(command) = str_field(&cmd, "command").map(str::to_string) else {
                return reply(Err("bash requires a string \"command\"".into()));
            };
            let exclude = cmd
                .get("excludeFromContext")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let s = session.clone();
            let o = out.clone();
            tasks.spawn(async move {
                let r = s.run_user_bash(&command, exclude, id.clone()).await;
                let r = r.map(|b| Some(serde_json::to_value(b).unwrap_or(Value::Null)));
                o.send(response(id.as_ref(), Some("bash"), r));
            });
        }
        "abort_bash" => {
            // Upstream answers before the cancelled commands report back.
            reply(Ok(None));
            session.abort_bash();
        }
        "get_state" => reply(ok(session.state_json())),
        "get_messages" => reply(ok(json!({"messages": session.messages()}))),
        "get_last_assistant_text" => reply(ok(match session.last_assistant_text() {
            Some(text) => json!({ "text": text }),
            None => json!({}),
        })),
        "get_available_models" => reply(ok(json!({"models": session.available_models()}))),
        "set_model" => {
            let provider = str_field(&cmd, "provider").unwrap_or_default();
            let model_id = str_field(&cmd, "modelId").unwrap_or_default();
            reply(
                session
                    .set_model(provider, model_id)
                    .map(|m| Some(json!(m))),
            )
        }
        "cycle_model" => reply(session.cycle_model().map(|next| {
            Some(match next {
                Some((model, is_scoped)) => json!({
                    "model": model,
                    "thinkingLevel": session.thinking_level().as_str(),
                    "isScoped": is_scoped,
                }),
                None => Value::Null,
            })
        })),
        "get_available_thinking_levels" => {
            let levels: Vec<&str> = session
                .available_thinking_levels()
                .into_iter()
                .map(ThinkingLevel::as_str)
                .collect();
            reply(ok(json!({"levels": levels})))
        }
        "set_thinking_level" => {
            let level = str_field(&cmd, "level")
                .and_then(ThinkingLevel::parse)
                .unwrap_or(ThinkingLevel::Off);
            session.set_thinking_level(level);
            reply(Ok(None))
        }
        "cycle_thinking_level" => {
            let model = session.model();
            match crate::config::cycle_thinking_level(model.as_ref(), session.thinking_level()) {
                Some(next) => {
                    let level = session.set_thinking_level(next);
                    reply(ok(json!({"level": level.as_str()})))
                }
                None => reply(ok(Value::Null)),
            }
        }
        "set_steering_mode" | "set_follow_up_mode" => {
            match str_field(&cmd, "mode").and_then(QueueMode::parse) {
                Some(mode) => {
                    session.set_queue_mode(kind == "set_steering_mode", mode);
                    reply(Ok(None))
                }
                None => reply(Err(format!(
                    "Invalid mode: {}",
                    cmd.get("mode").map(|m| m.to_string()).unwrap_or_default()
                ))),
            }
        }
        "set_auto_compaction" | "set_auto_retry" => {
            let enabled = cmd.get("enabled").and_then(Value::as_bool).unwrap_or(false);
            if kind == "set_auto_compaction" {
                session.set_auto_compaction(enabled);
            } else {
                session.set_auto_retry(enabled);
            }
            reply(Ok(None))
        }
        "get_commands" => reply(ok(json!({"commands": []}))),
        "get_session_stats" => reply(ok(session.session_stats_json())),
        other => reply(Err(format!("Unknown command: {other}"))),
    }
}
