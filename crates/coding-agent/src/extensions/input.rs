//! The `input` event (a prompt's text and images before pi acts on them) and the client's
//! answers to extension dialogs.

use super::wire::ToHost;
use super::Extensions;
use pi_ai::ImageContent;
use serde_json::{json, Value};

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
        let mut event = json!({"type": "input", "text": text, "source": source});
        if let Value::Object(m) = &mut event {
            if !images.is_empty() {
                m.insert("images".into(), json!(images));
            }
            if let Some(b) = streaming_behavior {
                m.insert("streamingBehavior".into(), json!(b));
            }
        }
        let msg = ToHost::Event {
            id: Some(id),
            event,
        };
        match self.host.request(id, &msg, Some(self.hook_timeout)).await {
            Ok(v) => match v.get("action").and_then(Value::as_str) {
                Some("handled") => None,
                Some("transform") => {
                    let text = v
                        .get("text")
                        .and_then(Value::as_str)
                        .map_or(text, str::to_string);
                    let images = match v.get("images") {
                        Some(Value::Array(list)) => images_of(list).unwrap_or(images),
                        _ => images,
                    };
                    Some((text, images))
                }
                _ => Some((text, images)),
            },
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

/// Image blocks an `input` handler returned; `None` if one is not an image block. The block's
/// `type` is implied (left in, it would be kept as an unknown key and written twice).
fn images_of(list: &[Value]) -> Option<Vec<ImageContent>> {
    list.iter()
        .map(|i| {
            let mut i = i.clone();
            if let Value::Object(m) = &mut i {
                if m.remove("type").is_some_and(|t| t != "image") {
                    return None;
                }
            }
            serde_json::from_value::<ImageContent>(i).ok()
        })
        .collect()
}
