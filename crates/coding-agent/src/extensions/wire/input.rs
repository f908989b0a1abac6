//! The `input` event (upstream docs/extensions.md "input": a prompt's text and images before
//! pi acts on them, host.mjs `emitInput`) and its reply, sent as [`super::ToHost::Event`].

use super::lenient;
use pi_ai::ImageContent;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `{type: "input", text, source, images?, streamingBehavior?}` (upstream `InputEvent`):
/// `source` is `rpc`, `interactive` or `extension`; `images` is left out when there are none,
/// `streamingBehavior` when no run is active.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename = "input", rename_all = "camelCase")]
pub struct InputEvent<'a> {
    /// The prompt text.
    pub text: &'a str,
    /// Where the prompt came from.
    pub source: &'a str,
    /// The prompt's images (absent when empty).
    #[serde(skip_serializing_if = "<[ImageContent]>::is_empty")]
    pub images: &'a [ImageContent],
    /// The prompt's `streamingBehavior` (`steer` / `followUp`) while a run is active.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming_behavior: Option<&'a str>,
}

/// The reply to the `input` event: `{action: "handled"}`, `{action: "transform", text,
/// images}` or `{action: "continue"}` (host.mjs `emitInput`). Every field reads leniently: a
/// non-string `action` or `text` reads as absent; `images` that is not an array of image
/// blocks reads as absent (the prompt's images are kept).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct InputReply {
    /// `handled`, `transform` or anything else (= continue unchanged).
    #[serde(default, deserialize_with = "lenient")]
    pub action: Option<String>,
    /// The transformed text.
    #[serde(default, deserialize_with = "lenient")]
    pub text: Option<String>,
    /// The transformed images.
    #[serde(default, deserialize_with = "lenient")]
    pub images: Option<Vec<ReplyImage>>,
}

impl InputReply {
    /// The reply `v`; anything but an object reads as `{}` (continue).
    pub fn from_value(v: &Value) -> Self {
        if !v.is_object() {
            return Self::default();
        }
        Self::deserialize(v).unwrap_or_default()
    }

    /// What the prompt goes on with: `None` = handled (nothing is sent); a transform replaces
    /// the text and images it gives (keeps those it does not); anything else keeps both.
    pub fn apply(
        self,
        text: String,
        images: Vec<ImageContent>,
    ) -> Option<(String, Vec<ImageContent>)> {
        match self.action.as_deref() {
            Some("handled") => None,
            Some("transform") => {
                let text = self.text.unwrap_or(text);
                let images = match self.images {
                    Some(list) => list.into_iter().map(|i| i.0).collect(),
                    None => images,
                };
                Some((text, images))
            }
            _ => Some((text, images)),
        }
    }
}

/// An image block an `input` handler returned: `{type?: "image", data, mimeType, …}`. A `type`
/// other than `"image"` (or not a string) does not read; a present `"image"` is dropped
/// (left in, it would be kept as an unknown key of [`ImageContent`] and written twice).
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyImage(pub ImageContent);

impl<'de> Deserialize<'de> for ReplyImage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut v = Value::deserialize(d)?;
        if let Value::Object(m) = &mut v {
            if m.remove("type").is_some_and(|t| t != "image") {
                return Err(D::Error::custom("not an image block"));
            }
        }
        serde_json::from_value(v)
            .map(ReplyImage)
            .map_err(D::Error::custom)
    }
}
