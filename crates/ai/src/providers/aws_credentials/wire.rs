//! Small wire helpers of the STS, SSO and metadata calls: role session names, percent and
//! form encoding, XML text, and ISO 8601 times.

use std::time::{SystemTime, UNIX_EPOCH};

pub(super) fn default_session_name() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    format!("pi-{ms}")
}

/// RFC 3986 percent-encoding of everything but the unreserved characters (the same rule as a
/// Bedrock path label).
pub(super) use crate::providers::bedrock_converse_stream::encode_label as percent;

/// `application/x-www-form-urlencoded` body of an STS query.
pub(super) fn form_encode(params: &[(&str, String)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params.iter().map(|(k, v)| (*k, v.as_str())))
        .finish()
}

/// The text inside the first `<tag>…</tag>` of `xml`, entities decoded.
pub(super) fn xml_text(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&close)?;
    Some(
        xml[start..end]
            .trim()
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// An RFC 3339 time (`YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`) of an STS/SSO/container answer
/// or the SSO token cache; `None` when malformed.
pub(super) fn parse_iso8601(s: &str) -> Option<SystemTime> {
    use aws_smithy_types::date_time::{DateTime, Format};
    let t = DateTime::from_str(s.trim(), Format::DateTimeWithOffset).ok()?;
    SystemTime::try_from(t).ok()
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, the form the SDK writes `expiresAt` in (JavaScript's
/// `toISOString`).
pub(super) fn iso8601_millis(t: SystemTime) -> String {
    use aws_smithy_types::date_time::{DateTime, Format};
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let whole = DateTime::from_secs(i64::try_from(since.as_secs()).unwrap_or(0))
        .fmt(Format::DateTime)
        .unwrap_or_default();
    format!(
        "{}.{:03}Z",
        whole.trim_end_matches('Z'),
        since.subsec_millis()
    )
}
