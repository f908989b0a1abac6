//! AWS event-stream binary framing: [`EventStreamDecoder`] cuts the response body into
//! [`Frame`]s and checks their CRCs.

use super::MAX_FRAME_BYTES;

/// One decoded event-stream message: its string headers and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Headers with string values (type 7), in wire order; other value types are skipped.
    pub headers: Vec<(String, String)>,
    /// The payload bytes (JSON for Bedrock).
    pub payload: Vec<u8>,
}

impl Frame {
    /// A string header by exact name (e.g. `:event-type`).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why the event stream could not be decoded.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// The prelude CRC did not match.
    #[error("Event stream prelude checksum mismatch")]
    PreludeCrc,
    /// The message CRC did not match.
    #[error("Event stream message checksum mismatch")]
    MessageCrc,
    /// Lengths that cannot describe a message (too short, too long, headers past the end).
    #[error("Invalid event stream message length")]
    Length,
    /// A header that runs past its section or has an unknown value type.
    #[error("Invalid event stream header")]
    Header,
}

/// Incremental decoder of AWS event-stream messages: a 12-byte prelude (total length and
/// headers length, u32 big-endian, then the CRC32 of those 8 bytes), headers, payload and the
/// CRC32 of the whole message before it. Feed bytes with [`EventStreamDecoder::push`] and take
/// messages with [`EventStreamDecoder::next_frame`].
#[derive(Debug, Default)]
pub struct EventStreamDecoder {
    buf: Vec<u8>,
}

pub(super) fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl EventStreamDecoder {
    /// Append received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Whether bytes of an incomplete message are buffered.
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty()
    }

    /// The next complete message, `Ok(None)` when more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        if self.buf.len() < 12 {
            return Ok(None);
        }
        let total = be_u32(&self.buf[0..4]) as usize;
        let headers_len = be_u32(&self.buf[4..8]) as usize;
        if crc32fast::hash(&self.buf[0..8]) != be_u32(&self.buf[8..12]) {
            return Err(FrameError::PreludeCrc);
        }
        if !(16..=MAX_FRAME_BYTES).contains(&total) || headers_len > total - 16 {
            return Err(FrameError::Length);
        }
        if self.buf.len() < total {
            return Ok(None);
        }
        let msg: Vec<u8> = self.buf.drain(..total).collect();
        if crc32fast::hash(&msg[..total - 4]) != be_u32(&msg[total - 4..]) {
            return Err(FrameError::MessageCrc);
        }
        let headers = parse_headers(&msg[12..12 + headers_len])?;
        Ok(Some(Frame {
            headers,
            payload: msg[12 + headers_len..total - 4].to_vec(),
        }))
    }
}

pub(super) fn parse_headers(mut b: &[u8]) -> Result<Vec<(String, String)>, FrameError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let name_len = usize::from(b[0]);
        let name = b.get(1..1 + name_len).ok_or(FrameError::Header)?;
        let name = String::from_utf8_lossy(name).into_owned();
        b = &b[1 + name_len..];
        let kind = *b.first().ok_or(FrameError::Header)?;
        b = &b[1..];
        let fixed = match kind {
            0 | 1 => Some(0),
            2 => Some(1),
            3 => Some(2),
            4 => Some(4),
            5 | 8 => Some(8),
            9 => Some(16),
            6 | 7 => None,
            _ => return Err(FrameError::Header),
        };
        match fixed {
            Some(n) => {
                if b.len() < n {
                    return Err(FrameError::Header);
                }
                b = &b[n..];
            }
            None => {
                let len = b.get(0..2).ok_or(FrameError::Header)?;
                let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
                let value = b.get(2..2 + len).ok_or(FrameError::Header)?;
                if kind == 7 {
                    out.push((name, String::from_utf8_lossy(value).into_owned()));
                }
                b = &b[2 + len..];
            }
        }
    }
    Ok(out)
}
