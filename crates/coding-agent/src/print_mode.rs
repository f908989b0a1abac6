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
//! `pi -p` has to be able to tell that nothing was answered). In text mode a final reply cut
//! at the output token limit (`length`) prints its text, then [`TRUNCATED`] on stderr, and
//! exits 1: what upstream's print mode is written to do, though in 1.6 it never does (the cut
//! reply is hidden from the context before it looks, so it prints nothing and exits 0).

use crate::agent_session::runtime::AgentSessionRuntime;
use crate::agent_session::{Admission, Admitting, InputSource, PromptInput, Responder};
use pi_ai::{Content, Message, StopReason};

/// What is printed on stderr when there is no message to send.
pub const NO_MESSAGE: &str =
    "Error: no message to send: give one as an argument (pi -p \"question\") or on stdin";

/// What text mode prints on stderr after the text of a final reply that stopped at the
/// output token limit (`stopReason: "length"`), before exiting 1 (upstream 1.6
/// `dist/modes/print-mode.js`, verbatim).
pub const TRUNCATED: &str = "Response was truncated: the model reached its output token limit.";

/// Runs `messages` through the session of `runtime`; returns the process exit code (0, or 1
/// after a message on stderr: no message, a refused prompt, a session file that could not be
/// written, a final assistant message with stop reason `error`/`aborted`, or, in text mode, a
/// final reply cut at the output limit: its text on stdout, [`TRUNCATED`] on stderr). A message an
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
    // A reply cut at the output limit is hidden from the context when its run ends, so the
    // context's last assistant message is an older one (or none). Upstream 1.6 looks at the
    // context only, prints nothing and exits 0; its `stopReason === "length"` branch is meant
    // for the cut reply: text mode answers that one (json mode is left as it was).
    let last = match session.last_branch_assistant() {
        Some(cut) if !json_mode && cut.stop_reason == StopReason::Length => Some(cut),
        _ => last,
    };
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
    if last.stop_reason == StopReason::Length {
        eprintln!("{TRUNCATED}");
        return 1;
    }
    0
}
