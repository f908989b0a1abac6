//! Images sent to a model: type detection, conversion, resizing and the notes that go with them
//! (upstream 1.6 `utils/mime.ts`, `utils/image-process.ts`, `utils/image-resize-core.ts`;
//! `docs/settings.md` `images.autoResize` / `images.blockImages`).
//!
//! Every image that enters the context — read by the `read` tool, attached to an RPC
//! `prompt`/`steer`/`follow_up`, or an `@file` argument of print mode — goes through
//! [`prepare_image`]:
//!
//! * PNG, JPEG, GIF and WebP keep their type; any other decodable type (BMP) becomes PNG, with
//!   the hint `[Image converted from image/bmp to image/png.]`.
//! * The image is always decoded. Data that does not decode is an [`ImageError`] and is never
//!   sent (upstream passes such bytes through when `images.autoResize` is off, and hides the
//!   failure as a resize failure otherwise).
//! * With `images.autoResize` (default on) an image larger than the limits — `maxWidth` ×
//!   `maxHeight` pixels (default 2000 × 2000) or `maxBytes` of base64 (default 4.5 MiB), from
//!   the model's `inputLimits.images.resize` — is scaled down (Lanczos3, EXIF orientation
//!   applied) and re-encoded as the smaller of PNG and JPEG (quality `jpegQuality`, default 80,
//!   then 85, 70, 55, 40), shrinking by 3/4 until it fits. The hint
//!   `[Image: original WxH, displayed at wxh. Multiply coordinates by S to map to original
//!   image.]` then tells the model how coordinates map back (S = original width / width, two
//!   decimals).
//! * An image within the limits is sent byte for byte as given.
//!
//! Text-only models get a placeholder instead (pi-ai `transform_messages`), and
//! `images.blockImages` replaces every image with [`BLOCKED_IMAGE_TEXT`] (see
//! [`replace_images`]).

use base64::Engine;
use image::{DynamicImage, ImageDecoder, ImageReader};
use pi_ai::{Content, ImageContent, Model};
use std::io::Cursor;
use std::sync::Arc;

/// Default largest width and height in pixels (upstream `DEFAULT_OPTIONS`).
pub const DEFAULT_MAX_DIMENSION: u32 = 2000;

/// Default largest base64 payload in bytes: 4.5 MiB, below Anthropic's 5 MB limit.
pub const DEFAULT_MAX_BYTES: u64 = 4_718_592;

/// Default JPEG quality (1–100) of a re-encoded image.
pub const DEFAULT_JPEG_QUALITY: u8 = 80;

/// The text `images.blockImages` puts in place of an image (upstream 1.6 sdk, consecutive
/// images become one such block).
pub const BLOCKED_IMAGE_TEXT: &str = "Image reading is disabled.";

/// The text an image the provider rejected is replaced with in later requests (this port; see
/// [`is_image_rejection`]).
pub const REJECTED_IMAGE_TEXT: &str = "(image omitted: the provider rejected it)";

/// Resize limits (upstream `ModelImageResizeOptions`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResizeLimits {
    /// Largest width in pixels.
    pub max_width: u32,
    /// Largest height in pixels.
    pub max_height: u32,
    /// Largest base64 payload in bytes (the encoded size must stay below it).
    pub max_bytes: u64,
    /// JPEG quality (1–100) tried first.
    pub jpeg_quality: u8,
}

impl Default for ResizeLimits {
    fn default() -> Self {
        ResizeLimits {
            max_width: DEFAULT_MAX_DIMENSION,
            max_height: DEFAULT_MAX_DIMENSION,
            max_bytes: DEFAULT_MAX_BYTES,
            jpeg_quality: DEFAULT_JPEG_QUALITY,
        }
    }
}

impl ResizeLimits {
    /// The model's `inputLimits.images.resize` over the defaults (each key separately).
    pub fn for_model(model: Option<&Model>) -> Self {
        let d = ResizeLimits::default();
        let Some(m) = model else {
            return d;
        };
        let px = |k: &str, dflt: u32| {
            m.image_resize_limit(k)
                .map_or(dflt, |v| v.min(u32::MAX as f64).max(1.0) as u32)
        };
        ResizeLimits {
            max_width: px("maxWidth", d.max_width),
            max_height: px("maxHeight", d.max_height),
            max_bytes: m
                .image_resize_limit("maxBytes")
                .map_or(d.max_bytes, |v| v as u64),
            jpeg_quality: m
                .image_resize_limit("jpegQuality")
                .map_or(d.jpeg_quality, |v| v.clamp(1.0, 100.0) as u8),
        }
    }
}

/// How images are prepared for the current model.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePolicy {
    /// `images.autoResize` (default true).
    pub auto_resize: bool,
    /// The current model's limits.
    pub limits: ResizeLimits,
    /// The current model, when it cannot take images: its id (the read tool's
    /// `details.imageUnsupportedByModel`).
    pub text_only_model: Option<String>,
}

impl Default for ImagePolicy {
    fn default() -> Self {
        ImagePolicy {
            auto_resize: true,
            limits: ResizeLimits::default(),
            text_only_model: None,
        }
    }
}

impl ImagePolicy {
    /// The policy for `model` with the `images.autoResize` setting.
    pub fn new(model: Option<&Model>, auto_resize: bool) -> Self {
        ImagePolicy {
            auto_resize,
            limits: ResizeLimits::for_model(model),
            text_only_model: model.filter(|m| !m.supports_images()).map(|m| m.id.clone()),
        }
    }
}

/// Computes the policy now (the current model can change between calls).
pub type ImagePolicyFn = Arc<dyn Fn() -> ImagePolicy + Send + Sync>;

/// Where a session puts its [`ImagePolicyFn`] once it exists (tools are built before the
/// session that owns them); unbound, the default policy applies.
#[derive(Clone, Default)]
pub struct ImagePolicySlot(pub Arc<std::sync::OnceLock<ImagePolicyFn>>);

impl std::fmt::Debug for ImagePolicySlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "ImagePolicySlot(bound)"
        } else {
            "ImagePolicySlot(empty)"
        })
    }
}

impl ImagePolicySlot {
    /// Binds the slot to `f` (a second bind is ignored).
    pub fn bind(&self, f: ImagePolicyFn) {
        let _ = self.0.set(f);
    }

    /// The policy now; the default while unbound.
    pub fn policy(&self) -> ImagePolicy {
        self.0.get().map(|f| f()).unwrap_or_default()
    }
}

/// Why an image cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// The `data` of an attached image is not base64.
    #[error("image data is not valid base64")]
    Base64,
    /// The bytes do not decode as an image (corrupt, truncated or an unsupported type).
    #[error("could not decode the {mime} image: {reason}")]
    Decode {
        /// The declared or detected type.
        mime: String,
        /// The decoder's message.
        reason: String,
    },
    /// Even a 1 × 1 rendering is above `maxBytes` (upstream's text, without brackets).
    #[error("Image omitted: could not be resized below the inline image size limit.")]
    TooLarge,
}

/// A prepared image and the notes for the model (conversion, resize), in that order.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedImage {
    /// The image block to send.
    pub image: ImageContent,
    /// Notes such as the dimension note; empty when the image is sent as given.
    pub hints: Vec<String>,
}

/// The image type of `bytes` by content, as upstream 1.6 detects it: JPEG (not JPEG-LS),
/// PNG (not animated), GIF, WebP, BMP; `None` for anything else.
pub fn detect_image_mime(bytes: &[u8]) -> Option<&'static str> {
    const PNG: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return (bytes.get(3) != Some(&0xF7)).then_some("image/jpeg");
    }
    if bytes.starts_with(&PNG) {
        let ihdr = bytes.len() >= 16 && be32(bytes, 8) == 13 && &bytes[12..16] == b"IHDR";
        return (ihdr && !is_animated_png(bytes)).then_some("image/png");
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return Some("image/gif");
    }
    if bytes.len() >= 12 && &bytes[0..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return Some("image/webp");
    }
    if bytes.starts_with(b"BM") && is_bmp(bytes) {
        return Some("image/bmp");
    }
    None
}

fn be32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |s| u16::from_le_bytes([s[0], s[1]]))
}

fn is_animated_png(b: &[u8]) -> bool {
    let mut at = 8usize;
    while at + 8 <= b.len() {
        let len = be32(b, at) as usize;
        match &b[at + 4..at + 8] {
            b"acTL" => return true,
            b"IDAT" => return false,
            _ => {}
        }
        let next = at.saturating_add(12).saturating_add(len);
        if next <= at || next > b.len() {
            return false;
        }
        at = next;
    }
    false
}

fn is_bmp(b: &[u8]) -> bool {
    if b.len() < 26 {
        return false;
    }
    let file_size = le32(b, 2);
    let data_offset = le32(b, 10);
    let dib = le32(b, 14);
    if (file_size != 0 && file_size < 26)
        || data_offset < 14u32.saturating_add(dib)
        || (file_size != 0 && data_offset >= file_size)
    {
        return false;
    }
    let (planes, bpp) = match dib {
        12 => (le16(b, 22), le16(b, 24)),
        40..=124 if b.len() >= 30 => (le16(b, 26), le16(b, 28)),
        _ => return false,
    };
    planes == 1 && [1, 4, 8, 16, 24, 32].contains(&bpp)
}

/// The base type of a MIME string, lower case (`image/JPG; x=y` → `image/jpg`).
fn base_mime(mime: &str) -> String {
    mime.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The inline type a provider accepts for `mime`, `None` when it must be converted.
fn inline_mime(mime: &str) -> Option<&'static str> {
    match base_mime(mime).as_str() {
        "image/png" => Some("image/png"),
        "image/jpeg" | "image/jpg" => Some("image/jpeg"),
        "image/gif" => Some("image/gif"),
        "image/webp" => Some("image/webp"),
        _ => None,
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes the base64 `data` of an attached image (whitespace is tolerated).
pub fn decode_base64(data: &str) -> Result<Vec<u8>, ImageError> {
    let compact: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|_| ImageError::Base64)
}

/// Decodes `bytes` with EXIF orientation applied.
fn decode(bytes: &[u8], mime: &str) -> Result<DynamicImage, ImageError> {
    let fail = |e: image::ImageError| ImageError::Decode {
        mime: mime.to_string(),
        reason: e.to_string(),
    };
    let reader = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| ImageError::Decode {
            mime: mime.to_string(),
            reason: e.to_string(),
        })?;
    let mut decoder = reader.into_decoder().map_err(fail)?;
    let orientation = decoder.orientation().ok();
    let mut img = DynamicImage::from_decoder(decoder).map_err(fail)?;
    if let Some(o) = orientation {
        img.apply_orientation(o);
    }
    Ok(img)
}

fn encode_png(img: &DynamicImage) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    img.write_with_encoder(image::codecs::png::PngEncoder::new(&mut out))
        .ok()?;
    Some(out)
}

fn encode_jpeg(img: &DynamicImage, quality: u8) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let rgb = DynamicImage::ImageRgb8(img.to_rgb8());
    rgb.write_with_encoder(image::codecs::jpeg::JpegEncoder::new_with_quality(
        &mut out, quality,
    ))
    .ok()?;
    Some(out)
}

fn base64_len(n: usize) -> u64 {
    (n as u64).div_ceil(3) * 4
}

/// `x.toFixed(2)` as JavaScript writes it (exact ties round away from zero; every other value
/// rounds its exact binary value, as Rust's formatting does).
pub fn js_to_fixed_2(x: f64) -> String {
    let exact = format!("{x:.40}");
    if let Some((int, frac)) = exact.split_once('.') {
        let tail = &frac[2..];
        if tail.starts_with('5') && tail[1..].bytes().all(|b| b == b'0') {
            // An exact tie: round the magnitude up.
            let cents: i128 = format!("{int}{}", &frac[..2]).parse().unwrap_or(0);
            let up = if x < 0.0 { cents - 1 } else { cents + 1 };
            let sign = if up < 0 { "-" } else { "" };
            let a = up.unsigned_abs();
            return format!("{sign}{}.{:02}", a / 100, a % 100);
        }
    }
    format!("{x:.2}")
}

/// Upstream's dimension note for an image shown at `w`×`h` instead of `ow`×`oh`.
pub fn dimension_note(ow: u32, oh: u32, w: u32, h: u32) -> String {
    let scale = js_to_fixed_2(ow as f64 / w.max(1) as f64);
    format!(
        "[Image: original {ow}x{oh}, displayed at {w}x{h}. Multiply coordinates by {scale} to map to original image.]"
    )
}

/// Prepares image `bytes` of type `mime` (declared; the detected type wins when the bytes are
/// a known image) as described in the module docs. `original_b64` is `bytes` already in base64
/// (an attached image's `data`), reused when the image is sent unchanged.
pub fn prepare_image(
    bytes: &[u8],
    mime: &str,
    original_b64: Option<&str>,
    policy: &ImagePolicy,
) -> Result<PreparedImage, ImageError> {
    let declared = base_mime(mime);
    let detected = detect_image_mime(bytes);
    let source_mime = detected.map(str::to_string).unwrap_or(declared);
    let img = decode(bytes, &source_mime)?;
    let mut hints = Vec::new();
    // A type providers do not take inline (BMP) becomes PNG.
    let (bytes, mime, original_b64): (std::borrow::Cow<[u8]>, &str, Option<&str>) =
        match inline_mime(&source_mime) {
            Some(m) => (bytes.into(), m, original_b64),
            None => {
                let png = encode_png(&img).ok_or_else(|| ImageError::Decode {
                    mime: source_mime.clone(),
                    reason: "could not convert it to PNG".into(),
                })?;
                hints.push(format!(
                    "[Image converted from {source_mime} to image/png.]"
                ));
                (png.into(), "image/png", None)
            }
        };
    let unchanged = |hints: Vec<String>| PreparedImage {
        image: ImageContent {
            data: original_b64.map_or_else(|| b64(&bytes), str::to_string),
            mime_type: mime.to_string(),
            extra: Default::default(),
        },
        hints,
    };
    if !policy.auto_resize {
        return Ok(unchanged(hints));
    }
    let lim = policy.limits;
    let (ow, oh) = (img.width(), img.height());
    if ow <= lim.max_width && oh <= lim.max_height && base64_len(bytes.len()) < lim.max_bytes {
        return Ok(unchanged(hints));
    }
    let (mut w, mut h) = (ow.max(1), oh.max(1));
    if w > lim.max_width {
        h = ((h as f64 * lim.max_width as f64) / w as f64)
            .round()
            .max(1.0) as u32;
        w = lim.max_width.max(1);
    }
    if h > lim.max_height {
        w = ((w as f64 * lim.max_height as f64) / h as f64)
            .round()
            .max(1.0) as u32;
        h = lim.max_height.max(1);
    }
    let mut qualities = vec![lim.jpeg_quality];
    for q in [85u8, 70, 55, 40] {
        if !qualities.contains(&q) {
            qualities.push(q);
        }
    }
    loop {
        let resized = img.resize_exact(w, h, image::imageops::FilterType::Lanczos3);
        let fits = |data: &[u8]| base64_len(data.len()) < lim.max_bytes;
        let png = encode_png(&resized);
        let jpeg = encode_jpeg(&resized, qualities[0]);
        let mut ordered: Vec<(Vec<u8>, &str)> = Vec::new();
        match (png, jpeg) {
            (Some(p), Some(j)) if j.len() < p.len() => {
                ordered.push((j, "image/jpeg"));
                ordered.push((p, "image/png"));
            }
            (p, j) => {
                ordered.extend(p.map(|p| (p, "image/png")));
                ordered.extend(j.map(|j| (j, "image/jpeg")));
            }
        }
        let mut chosen = ordered.into_iter().find(|(d, _)| fits(d));
        if chosen.is_none() {
            chosen = qualities[1..]
                .iter()
                .filter_map(|q| encode_jpeg(&resized, *q))
                .find(|d| fits(d))
                .map(|d| (d, "image/jpeg"));
        }
        if let Some((data, out_mime)) = chosen {
            hints.push(dimension_note(ow, oh, w, h));
            return Ok(PreparedImage {
                image: ImageContent {
                    data: b64(&data),
                    mime_type: out_mime.to_string(),
                    extra: Default::default(),
                },
                hints,
            });
        }
        if w == 1 && h == 1 {
            return Err(ImageError::TooLarge);
        }
        let next = |v: u32| {
            if v == 1 {
                1
            } else {
                ((v as f64 * 0.75).floor() as u32).max(1)
            }
        };
        let (nw, nh) = (next(w), next(h));
        if (nw, nh) == (w, h) {
            return Err(ImageError::TooLarge);
        }
        (w, h) = (nw, nh);
    }
}

/// Prepares the images attached to a prompt: returns the prompt text with the hints appended
/// (`text\n\n<hints, one per line>`, upstream `_normalizePromptImages`) and the prepared
/// images. Errors name the image by its position (1-based).
pub fn prepare_prompt_images(
    text: String,
    images: Vec<ImageContent>,
    policy: &ImagePolicy,
) -> Result<(String, Vec<ImageContent>), String> {
    if images.is_empty() {
        return Ok((text, images));
    }
    let mut hints = Vec::new();
    let mut out = Vec::with_capacity(images.len());
    for (i, img) in images.into_iter().enumerate() {
        let fail = |e: ImageError| format!("Invalid image {}: {e}", i + 1);
        let bytes = decode_base64(&img.data).map_err(fail)?;
        let prepared =
            prepare_image(&bytes, &img.mime_type, Some(&img.data), policy).map_err(fail)?;
        hints.extend(prepared.hints);
        let mut image = prepared.image;
        image.extra = img.extra;
        out.push(image);
    }
    let text = if hints.is_empty() {
        text
    } else {
        format!("{text}\n\n{}", hints.join("\n"))
    };
    Ok((text, out))
}

/// `content` with every image replaced by a text block `placeholder`; consecutive
/// placeholders collapse into one (upstream `replaceImagesWithPlaceholder`). `None` when there
/// was no image to replace.
pub fn replace_images(
    content: &[Content],
    placeholder: &str,
    replace: impl Fn(&ImageContent) -> bool,
) -> Option<Vec<Content>> {
    if !content
        .iter()
        .any(|c| matches!(c, Content::Image(i) if replace(i)))
    {
        return None;
    }
    let mut out: Vec<Content> = Vec::with_capacity(content.len());
    for block in content {
        match block {
            Content::Image(i) if replace(i) => {
                if out.last().and_then(Content::as_text) != Some(placeholder) {
                    out.push(Content::text(placeholder));
                }
            }
            other => out.push(other.clone()),
        }
    }
    Some(out)
}

/// Whether a failed request's error says the provider refused an image of the request: an
/// HTTP 400 or 413 whose message names an image (Anthropic `…image…: image exceeds 5 MB
/// maximum` / `Could not process image`, OpenAI `Invalid image` / `image_parse_error`).
/// Upstream 1.6 keeps such an image and sends it again with every later request, so every
/// later turn fails the same way.
pub fn is_image_rejection(error: &pi_ai::ProviderError) -> bool {
    let names_image = |t: &str| t.to_ascii_lowercase().contains("image");
    matches!(error.status(), Some(400 | 413))
        && (names_image(error.message()) || error.body().is_some_and(names_image))
}

/// A short, stable fingerprint of an image block (its type and data), to recognise the same
/// image in later requests.
pub fn fingerprint(image: &ImageContent) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    image.mime_type.hash(&mut h);
    image.data.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_fixed_matches_javascript() {
        assert_eq!(js_to_fixed_2(1.125), "1.13");
        assert_eq!(js_to_fixed_2(1.005), "1.00");
        assert_eq!(js_to_fixed_2(2.0), "2.00");
        assert_eq!(js_to_fixed_2(4000.0 / 2000.0), "2.00");
        assert_eq!(js_to_fixed_2(2100.0 / 2000.0), "1.05");
        assert_eq!(js_to_fixed_2(1.0 / 3.0), "0.33");
    }

    #[test]
    fn detection_follows_upstream() {
        assert_eq!(
            detect_image_mime(&[0xFF, 0xD8, 0xFF, 0xE0]),
            Some("image/jpeg")
        );
        assert_eq!(detect_image_mime(&[0xFF, 0xD8, 0xFF, 0xF7]), None);
        assert_eq!(detect_image_mime(b"GIF89a...."), Some("image/gif"));
        assert_eq!(
            detect_image_mime(b"RIFF\0\0\0\0WEBPVP8 "),
            Some("image/webp")
        );
        assert_eq!(detect_image_mime(b"hello"), None);
        // A PNG signature without an IHDR chunk is not a PNG.
        assert_eq!(
            detect_image_mime(&[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0]),
            None
        );
    }

    #[test]
    fn image_rejections_are_recognised() {
        let http = |status: u16, body: &str| pi_ai::ProviderError::Http {
            status,
            retry_after_ms: None,
            body: body.into(),
            message: format!("{status} {body}"),
        };
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.0.content.1.image.source.base64: image exceeds 5 MB maximum: 5316852 bytes > 5242880 bytes"}}"#;
        assert!(is_image_rejection(&http(400, anthropic)));
        let openai = r#"{"error":{"message":"Invalid image.","type":"invalid_request_error","code":"invalid_image_format"}}"#;
        assert!(is_image_rejection(&http(400, openai)));
        assert!(is_image_rejection(&http(413, "image too large")));
        assert!(!is_image_rejection(&http(
            400,
            r#"{"error":{"message":"max_tokens too large"}}"#
        )));
        assert!(!is_image_rejection(&http(500, "image service down")));
        assert!(!is_image_rejection(&pi_ai::ProviderError::Transport {
            message: "image".into()
        }));
    }

    #[test]
    fn resize_picks_limits_and_notes_the_scale() {
        let img = image::RgbImage::from_fn(50, 20, |x, _| image::Rgb([x as u8, 0, 0]));
        let mut png = Vec::new();
        image::DynamicImage::ImageRgb8(img)
            .write_to(&mut Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let policy = ImagePolicy {
            limits: ResizeLimits {
                max_width: 25,
                ..ResizeLimits::default()
            },
            ..ImagePolicy::default()
        };
        let out = prepare_image(&png, "image/png", None, &policy).unwrap();
        assert_eq!(
            out.hints,
            vec!["[Image: original 50x20, displayed at 25x10. Multiply coordinates by 2.00 to map to original image.]"]
        );
        // Within the limits: byte for byte, no note.
        let out = prepare_image(&png, "image/png", None, &ImagePolicy::default()).unwrap();
        assert!(out.hints.is_empty());
        assert_eq!(decode_base64(&out.image.data).unwrap(), png);
        // Corrupt: an error, whatever the policy.
        let off = ImagePolicy {
            auto_resize: false,
            ..ImagePolicy::default()
        };
        assert!(matches!(
            prepare_image(&png[..png.len() / 2], "image/png", None, &off),
            Err(ImageError::Decode { .. })
        ));
    }

    #[test]
    fn placeholders_collapse() {
        let img = Content::Image(ImageContent {
            data: "x".into(),
            mime_type: "image/png".into(),
            extra: Default::default(),
        });
        let out = replace_images(
            &[Content::text("a"), img.clone(), img],
            BLOCKED_IMAGE_TEXT,
            |_| true,
        )
        .unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].as_text(), Some(BLOCKED_IMAGE_TEXT));
        assert!(replace_images(&[Content::text("a")], BLOCKED_IMAGE_TEXT, |_| true).is_none());
    }
}
