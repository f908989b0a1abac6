//! Print (`-p`, text) and `--mode json` one-shot modes (spec config.md §7.1).
//!
//! Both send the given messages in order, each admitted by the session as an RPC `prompt` is
//! (agent_session/admit.rs; `input` source `interactive`, as upstream's print mode): an
//! extension command runs its handler, `input` handlers may transform or handle the text,
//! skills and templates expand, `before_agent_start` applies. Each message goes in once the
//! previous one has fully settled, including runs an extension started meanwhile (a command's
//! `sendUserMessage`); upstream 1.6 exits while such a run is still streaming and loses its
//! output. Text mode
//! prints the text blocks of the final assistant message, one per line. JSON mode prints the
//! session header line and then every event as one JSON line. In both, a final assistant
//! message that ended in `error`/`aborted` puts its error on stderr and exits 1, and so does
//! having no message at all (upstream 1.6 exits 0 silently in both cases; a script calling
//! `pi -p` has to be able to tell that nothing was answered).

use crate::agent_session::runtime::AgentSessionRuntime;
use crate::agent_session::{Admission, Admitting, InputSource, PromptInput, Responder};
use pi_ai::{Content, Message, StopReason};

/// What is printed on stderr when there is no message to send.
pub const NO_MESSAGE: &str =
    "Error: no message to send: give one as an argument (pi -p \"question\") or on stdin";

/// Runs `messages` through the session of `runtime`; returns the process exit code (0, or 1
/// after a message on stderr: no message, a refused prompt, a session file that could not be
/// written, or a final assistant message with stop reason `error`/`aborted`). A message an
/// extension command or `input` handler handled prints nothing and is no failure (upstream).
pub async fn run(runtime: &AgentSessionRuntime, messages: Vec<String>, json_mode: bool) -> i32 {
    run_with_images(runtime, messages, vec![], json_mode).await
}

/// [`run`] with `images` (from `@file` arguments) attached to the first message.
pub async fn run_with_images(
    runtime: &AgentSessionRuntime,
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
        // A command may replace the session (`ctx.newSession()`): each message goes to the
        // current one.
        let session = runtime.session();
        let input = PromptInput {
            text,
            images: images.take().unwrap_or_default(),
            streaming_behavior: None,
            source: InputSource::Interactive,
            commands: true,
            agent_dir: Some(runtime.factory().agent_dir.clone()),
        };
        let admission = match session.admit(input, Responder::ignore()) {
            Admitting::Done(a) => a,
            Admitting::Pending(work) => work.await,
        };
        match admission {
            Admission::Started(run) => run.await,
            Admission::Handled | Admission::Queued => {}
            Admission::Failed(e) => {
                eprintln!("{e}");
                return 1;
            }
        }
        session.wait_quiet().await;
    }
    let session = runtime.session();
    if session.write_failed() {
        eprintln!("Error: the session file could not be written; entries were lost");
        return 1;
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
