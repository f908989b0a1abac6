//! Cheap reading of the lines of a large session file (issue 8: memory and time in proportion
//! to the context, not the file).
//!
//! A `message` line of a large file is not parsed: [`message_head`] reads only its leading
//! `type`, `id`, `parentId` and `message.role` (upstream and we write them first, in that
//! order: spec `sessions.md` §2.2) and stops there, and [`is_complete_object`] checks that the
//! line is one whole JSON object (a torn line is never taken for an entry) by looking at its
//! quotes and braces only. Everything else takes the full parser.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// The leading fields of a `message` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MessageHead<'a> {
    /// Wire `id`.
    pub id: Cow<'a, str>,
    /// Wire `parentId`; `None` for JSON `null` or absent.
    pub parent_id: Option<Cow<'a, str>>,
    /// Wire `message.role`.
    pub role: Cow<'a, str>,
}

/// `type`, `id`, `parentId` and `message.role` of a `message` line, if the line starts with
/// them (in any order, as long as `message` comes last of the four and `role` first in it);
/// `None` for any other line or layout (the caller then parses the line whole). Reads no
/// further than `role`: the rest of the line is not looked at (see [`is_complete_object`]).
pub(crate) fn message_head(line: &[u8]) -> Option<MessageHead<'_>> {
    let mut state = State::default();
    let mut de = serde_json::Deserializer::from_slice(line);
    // Stopping early is an error by design; what was read is in `state`.
    let _ = (&mut de).deserialize_map(Top { state: &mut state });
    match state {
        State {
            ty_is_message: true,
            id: Some(id),
            parent_id: Some(parent_id),
            role: Some(role),
        } => Some(MessageHead {
            id,
            parent_id,
            role,
        }),
        _ => None,
    }
}

#[derive(Default)]
struct State<'a> {
    ty_is_message: bool,
    id: Option<Cow<'a, str>>,
    /// `Some(None)`: `parentId` seen and `null`.
    parent_id: Option<Option<Cow<'a, str>>>,
    role: Option<Cow<'a, str>>,
}

const STOP: &str = "stop";

/// A string, borrowed from the line where it has no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

struct Top<'s, 'a> {
    state: &'s mut State<'a>,
}

impl<'de, 's> Visitor<'de> for Top<'s, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a session entry")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(Str(key)) = map.next_key::<Str<'de>>()? {
            match key.as_ref() {
                "type" => {
                    let Str(ty) = map.next_value::<Str<'de>>()?;
                    if ty != "message" {
                        return Err(de::Error::custom(STOP));
                    }
                    self.state.ty_is_message = true;
                }
                "id" => self.state.id = Some(map.next_value::<Str<'de>>()?.0),
                "parentId" => {
                    self.state.parent_id = Some(map.next_value::<Option<Str<'de>>>()?.map(|s| s.0));
                }
                "message" => {
                    // Whatever happens inside, nothing after `message` is needed.
                    map.next_value_seed(Role { state: self.state })?;
                    return Err(de::Error::custom(STOP));
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct Role<'s, 'a> {
    state: &'s mut State<'a>,
}

impl<'de, 's> DeserializeSeed<'de> for Role<'s, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, 's> Visitor<'de> for Role<'s, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a message")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        match map.next_key::<Str<'de>>()? {
            Some(Str(key)) if key == "role" => {
                self.state.role = Some(map.next_value::<Str<'de>>()?.0);
            }
            _ => {}
        }
        Err(de::Error::custom(STOP))
    }
}

/// Whether `line` is exactly one JSON object (surrounding whitespace allowed), judged by its
/// braces and string quotes only: the test that tells a whole line from a torn one (a line cut
/// anywhere ends inside a string or with a `{` left open). Content inside strings is skipped
/// with `memchr`, so this costs a fraction of a parse.
pub(crate) fn is_complete_object(line: &[u8]) -> bool {
    let start = match line.iter().position(|b| !b.is_ascii_whitespace()) {
        Some(i) if line[i] == b'{' => i,
        _ => return false,
    };
    let mut depth: usize = 0;
    let mut i = start;
    while let Some(k) = memchr::memchr3(b'"', b'{', b'}', &line[i..]) {
        let at = i + k;
        match line[at] {
            b'"' => {
                // Skip the string: to the next quote not escaped by a backslash.
                let mut p = at + 1;
                loop {
                    let Some(q) = memchr::memchr2(b'"', b'\\', line.get(p..).unwrap_or_default())
                    else {
                        return false;
                    };
                    if line[p + q] == b'\\' {
                        p += q + 2;
                    } else {
                        p += q + 1;
                        break;
                    }
                }
                i = p;
            }
            b'{' => {
                depth += 1;
                i = at + 1;
            }
            _ => {
                let Some(d) = depth.checked_sub(1) else {
                    return false;
                };
                depth = d;
                i = at + 1;
                if depth == 0 {
                    return line[i..].iter().all(u8::is_ascii_whitespace);
                }
            }
        }
    }
    false
}
