//! The `input` event (a prompt's text and images before pi acts on them) and the client's
//! answers to extension dialogs.

use super::wire::{self, InputEvent, InputReply, ToHost};
use super::Extensions;
use pi_ai::ImageContent;

impl Extensions {
    /// Runs the `input` handlers on a prompt's text and images (upstream `emitInput`):
    /// `source` is `rpc` (a client's prompt in RPC mode), `interactive` (print and JSON mode)
    /// or `extension` (`pi.sendUserMessage`); `streaming_behavior` is the prompt's
    /// `streamingBehavior` while a run is active, else `None` (left out of the event, as are
    /// no images). `None` = handled (nothing is sent); else the text and images to go on with,
    /// transformed or not (a transform without `images` keeps the images). A host that cannot
    /// answer leaves both unchanged (after an `extension_error`).
    pub async fn input(
        &self,
        text: String,
        images: Vec<ImageContent>,
        source: &str,
        streaming_behavior: Option<&str>,
    ) -> Option<(String, Vec<ImageContent>)> {
        let id = self.host.next_id();
        let event = wire::Notification::Input(InputEvent {
            text: &text,
            source,
            images: &images,
            streaming_behavior,
        });
        let msg = ToHost::Event {
            id: Some(id),
            event,
        };
        match self.host.request(id, &msg, Some(self.hook_timeout)).await {
            Ok(v) => InputReply::from_value(&v).apply(text, images),
            Err(e) => {
                for p in self.handlers_of("input") {
                    self.error(&p, "input", &e.to_string());
                }
                Some((text, images))
            }
        }
    }

    /// Forwards a client's `extension_ui_response`.
    pub fn ui_response(
        &self,
        id: String,
        value: Option<String>,
        confirmed: Option<bool>,
        cancelled: Option<bool>,
    ) {
        self.host.send(&ToHost::UiResponse {
            id,
            value,
            confirmed,
            cancelled,
        });
    }
}
