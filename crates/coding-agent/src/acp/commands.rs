//! The `pi-acp` adapter's built-in slash commands that make sense without a terminal
//! (`/compact`, `/autocompact`, `/export`, `/session`, `/name`, `/steering`, `/follow-up`,
//! `/queue`):
//! listed in `available_commands_update` after the session's own commands, and run by
//! `session/prompt` when the prompt is `/name args` and no extension command, prompt template
//! or skill of the session has that name (the session's own commands win). Each answers with
//! one `agent_message_chunk` (its result or its error) and the turn ends `end_turn`; none
//! reaches the model. `/queue all|one-at-a-time` sets both queue modes at once (RPC
//! `set_steering_mode` and `set_follow_up_mode`; the `pi-acp` README lists it, its 0.0.34 dist
//! has no handler for it, so the answers are ours). `/changelog` has no headless meaning here
//! and is not offered.

use crate::agent_session::{AgentSession, QueueKind};
use serde_json::Value;

/// The commands, with their descriptions (shown by the editor's command menu).
pub(super) const COMMANDS: &[(&str, &str)] = &[
    (
        "compact",
        "Compact the session's context now (optional: custom instructions for the summary)",
    ),
    (
        "autocompact",
        "Automatic compaction: on, off or toggle (no argument: show the setting)",
    ),
    (
        "export",
        "Export the session as an HTML file (optional: the output path)",
    ),
    (
        "session",
        "Show the session: id, file, name, messages, tokens and cost",
    ),
    ("name", "Name the session"),
    (
        "steering",
        "Steering queue mode: all or one-at-a-time (no argument: show it)",
    ),
    (
        "follow-up",
        "Follow-up queue mode: all or one-at-a-time (no argument: show it)",
    ),
    (
        "queue",
        "Both queue modes (steering and follow-up): all or one-at-a-time (no argument: show them)",
    ),
];

/// Runs `text` when it invokes one of [`COMMANDS`] that the session's own commands do not
/// shadow: `Some(reply)` (the text to show; failures are replies too; empty when the
/// session's own events said it all, as a failed `/compact`'s `compaction_end`), `None` when
/// `text` is not such a command (the prompt goes on as usual).
pub(super) async fn run(session: &AgentSession, text: &str) -> Option<String> {
    let rest = text.strip_prefix('/')?;
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a.trim()),
        None => (rest.trim_end(), ""),
    };
    if !COMMANDS.iter().any(|(n, _)| *n == name)
        || session.commands().iter().any(|c| c.name == name)
    {
        return None;
    }
    Some(match name {
        "compact" => {
            let instructions = (!args.is_empty()).then(|| args.to_string());
            match session.compact(instructions).await {
                Ok(r) => format!(
                    "Compacted: {} tokens before, about {} after.",
                    r.tokens_before, r.estimated_tokens_after
                ),
                // The session's `compaction_end` already told the client why.
                Err(_) => String::new(),
            }
        }
        "autocompact" => {
            let now = session.auto_compaction();
            let want = match args {
                "" => None,
                "on" => Some(true),
                "off" => Some(false),
                "toggle" => Some(!now),
                other => return Some(format!("Usage: /autocompact on|off|toggle (not {other:?})")),
            };
            if let Some(on) = want {
                session.set_auto_compaction(on);
            }
            let on = want.unwrap_or(now);
            format!("Auto-compaction is {}.", if on { "on" } else { "off" })
        }
        "export" => {
            let output = (!args.is_empty()).then_some(args);
            match session.export_html(output) {
                Ok(path) => format!("Session exported to {path}"),
                Err(e) => format!("Export failed: {e}"),
            }
        }
        "session" => session_text(session),
        "name" => match session.set_session_name(args) {
            Ok(()) => format!("Session named {:?}.", args.trim()),
            Err(e) => e,
        },
        "steering" | "follow-up" => {
            let kind = if name == "steering" {
                QueueKind::Steering
            } else {
                QueueKind::FollowUp
            };
            match args {
                "" => {
                    let state = session.state();
                    let mode = match kind {
                        QueueKind::Steering => state.steering_mode,
                        QueueKind::FollowUp => state.follow_up_mode,
                    };
                    let mode = mode.as_str().unwrap_or("one-at-a-time").to_string();
                    format!("The {name} mode is {mode}.")
                }
                "all" | "one-at-a-time" => {
                    session.set_queue_mode(kind, Value::String(args.into()));
                    format!("The {name} mode is now {args}.")
                }
                other => format!("Usage: /{name} all|one-at-a-time (not {other:?})"),
            }
        }
        "queue" => match args {
            "" => {
                let state = session.state();
                let mode = |m: &Value| m.as_str().unwrap_or("one-at-a-time").to_string();
                format!(
                    "The steering mode is {}; the follow-up mode is {}.",
                    mode(&state.steering_mode),
                    mode(&state.follow_up_mode)
                )
            }
            "all" | "one-at-a-time" => {
                for kind in [QueueKind::Steering, QueueKind::FollowUp] {
                    session.set_queue_mode(kind, Value::String(args.into()));
                }
                format!("The steering and follow-up modes are now {args}.")
            }
            other => format!("Usage: /queue all|one-at-a-time (not {other:?})"),
        },
        _ => return None,
    })
}

/// `/session`: RPC `get_session_stats` and the session's name, as lines.
fn session_text(session: &AgentSession) -> String {
    let stats = session.session_stats();
    let state = session.state();
    let mut lines = vec![format!("Session {}", stats.session_id)];
    if let Some(name) = state.session_name {
        lines.push(format!("Name: {name}"));
    }
    lines.push(format!(
        "File: {}",
        stats.session_file.as_deref().unwrap_or("(not saved)")
    ));
    lines.push(format!(
        "Messages: {} user, {} assistant, {} tool results ({} in all)",
        stats.user_messages, stats.assistant_messages, stats.tool_results, stats.total_messages
    ));
    let t = &stats.tokens;
    lines.push(format!(
        "Tokens: {} in, {} out, {} cache read, {} cache write ({} in all)",
        t.input, t.output, t.cache_read, t.cache_write, t.total
    ));
    if let Some(cost) = stats.cost.as_f64() {
        lines.push(format!("Cost: ${cost:.4}"));
    }
    if let Some(usage) = stats.context_usage {
        if let Some(tokens) = usage.tokens {
            lines.push(format!(
                "Context: {tokens} of {} tokens",
                usage.context_window
            ));
        }
    }
    lines.join("\n")
}
