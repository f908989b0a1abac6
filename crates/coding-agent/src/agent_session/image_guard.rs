//! What happens to images on their way to the model after they entered the context:
//!
//! * `images.blockImages` (upstream 1.6 sdk `convertToLlmWithBlockImages`): every image of a
//!   user message or tool result becomes the text [`BLOCKED_IMAGE_TEXT`], consecutive ones one
//!   block; read at every request, so a changed setting applies to the next request.
//! * An image the provider rejected (an HTTP 400/413 naming an image,
//!   [`crate::images::is_image_rejection`]) is replaced with [`REJECTED_IMAGE_TEXT`] in every
//!   later request of this session. The images it applies to are those added since the last
//!   successful response (they are the only ones the provider has not accepted before).
//!   Upstream 1.6 sends such an image again on every turn, so the session stays broken. The
//!   transcript and the session file keep the image; only the requests change.

use super::convert::convert_to_llm;
use super::AgentSession;
use crate::images::{fingerprint, replace_images, BLOCKED_IMAGE_TEXT, REJECTED_IMAGE_TEXT};
use pi_ai::{AssistantMessage, Content, Message, StopReason, UserContent};

impl AgentSession {
    /// The context as the model gets it: [`convert_to_llm`], then blocked and rejected
    /// images replaced (module docs).
    pub(super) fn llm_messages(&self, messages: &[Message]) -> Vec<Message> {
        let mut out = convert_to_llm(messages);
        let blocked = self.inner.services.settings.lock().images_block_images();
        let rejected = self.inner.rejected_images.lock().clone();
        if !blocked && rejected.is_empty() {
            return out;
        }
        for m in &mut out {
            let content = match m {
                Message::User(u) => match &mut u.content {
                    UserContent::Blocks(b) => b,
                    UserContent::Text(_) => continue,
                },
                Message::ToolResult(tr) => &mut tr.content,
                _ => continue,
            };
            if blocked {
                if let Some(c) = replace_images(content, BLOCKED_IMAGE_TEXT, |_| true) {
                    *content = c;
                }
            } else if let Some(c) = replace_images(content, REJECTED_IMAGE_TEXT, |i| {
                rejected.contains(&fingerprint(i))
            }) {
                *content = c;
            }
        }
        out
    }

    /// After a failed response: when the provider refused an image, remembers the images
    /// added since the last successful response so that later requests leave them out.
    pub(super) fn note_image_rejection(&self, failed: &AssistantMessage) {
        if failed.stop_reason != StopReason::Error {
            return;
        }
        let Some(error) = failed.error.as_deref() else {
            return;
        };
        if !crate::images::is_image_rejection(error) {
            return;
        }
        let prints: Vec<u64> = {
            let transcript = self.transcript();
            let mut prints = Vec::new();
            for m in transcript.iter().rev() {
                let content: &[Content] = match m {
                    Message::Assistant(a)
                        if !matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) =>
                    {
                        break
                    }
                    Message::User(u) => match &u.content {
                        UserContent::Blocks(b) => b,
                        UserContent::Text(_) => continue,
                    },
                    Message::ToolResult(tr) => &tr.content,
                    _ => continue,
                };
                prints.extend(content.iter().filter_map(|c| match c {
                    Content::Image(i) => Some(fingerprint(i)),
                    _ => None,
                }));
            }
            prints
        };
        if !prints.is_empty() {
            tracing::warn!(
                "the provider rejected {} image(s); later requests leave them out",
                prints.len()
            );
            self.inner.rejected_images.lock().extend(prints);
        }
    }
}
