//! Print (`-p`, text) and `--mode json` one-shot modes (spec config.md §7.1).
//!
//! Both send the given messages in order, each after the previous run has settled. Text mode
//! prints the text blocks of the final assistant message, one per line. JSON mode prints the
//! session header line and then every event as one JSON line. In both, a final assistant
//! message that ended in `error`/`aborted` puts its error on stderr and exits 1, and so does
//! having no message at all (upstream 1.6 exits 0 silently in both cases; a script calling
//! `pi -p` has to be able to tell that nothing was answered).

use crate::agent_session::{AgentSession, PromptOutcome};
use pi_ai::{Content, Message, StopReason};

/// What is printed on stderr when there is no message to send.
pub const NO_MESSAGE: &str =
    "Error: no message to send: give one as an argument (pi -p \"question\") or on stdin";

/// Runs `messages` through `session`; returns the process exit code (0, or 1 after a message
/// on stderr: no message, a refused prompt, or a final assistant message with stop reason
/// `error`/`aborted`).
pub async fn run(session: &AgentSession, messages: Vec<String>, json_mode: bool) -> i32 {
    run_with_images(session, messages, vec![], json_mode).await
}

/// [`run`] with `images` (from `@file` arguments) attached to the first message.
pub async fn run_with_images(
    session: &AgentSession,
    messages: Vec<String>,
    images: Vec<pi_ai::ImageContent>,
    json_mode: bool,
) -> i32 {
    if messages.is_empty() {
        eprintln!("{NO_MESSAGE}");
        return 1;
    }
    let mut images = Some(images);
    for text in messages {
        match session.prompt(text, images.take().unwrap_or_default(), None) {
            Ok(PromptOutcome::Started(run)) => run.await,
            Ok(PromptOutcome::Queued) => {}
            Err(e) => {
                eprintln!("{e}");
                return 1;
            }
        }
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
    if json_mode {
        return 0;
    }
    for block in &last.content {
        if let Content::Text(t) = block {
            println!("{}", t.text);
        }
    }
    0
}
