//! Print (`-p`, text) and `--mode json` one-shot modes (spec config.md §7.1).
//!
//! Both send the given messages in order, each after the previous run has settled. Text mode
//! prints the text blocks of the final assistant message, one per line; if that message ended
//! in `error`/`aborted` it prints the error on stderr and exits 1. JSON mode prints the session
//! header line and then every event as one JSON line.

use crate::agent_session::{AgentSession, PromptOutcome};
use pi_ai::{Content, Message, StopReason};

/// Runs `messages` through `session`; returns the process exit code.
pub async fn run(session: &AgentSession, messages: Vec<String>, json_mode: bool) -> i32 {
    for text in messages {
        match session.prompt(text, vec![], None) {
            Ok(PromptOutcome::Started(run)) => run.await,
            Ok(PromptOutcome::Queued) => {}
            Err(e) => {
                eprintln!("{e}");
                return 1;
            }
        }
    }
    if session.write_failed() {
        eprintln!("Error: the session file could not be written; entries were lost");
        return 1;
    }
    if json_mode {
        return 0;
    }
    let last = session.messages().into_iter().rev().find_map(|m| match m {
        Message::Assistant(a) => Some(a),
        _ => None,
    });
    let Some(last) = last else { return 0 };
    if matches!(last.stop_reason, StopReason::Error | StopReason::Aborted) {
        eprintln!(
            "{}",
            last.error_message
                .unwrap_or_else(|| format!("Request {:?}", last.stop_reason))
        );
        return 1;
    }
    for block in &last.content {
        if let Content::Text(t) = block {
            println!("{}", t.text);
        }
    }
    0
}
