//! [`Extra`]: the unknown keys of a message or content block, one pointer wide when empty.
//!
//! Every message and content block keeps the fields it does not know verbatim (spec
//! messages-and-models.md §1: upstream keeps every field of a persisted entry). Almost always
//! there are none, and an empty `serde_json::Map` (an `IndexMap` with `preserve_order`) still
//! takes 72 bytes inline. A long session holds one per message and one per block: for a 1 GB
//! session file that was ~64 MB of empty maps (issue 8, peak RSS of `get_messages`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::ops::{Deref, DerefMut};
use std::sync::LazyLock;

static EMPTY: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);

/// Unknown keys of a message or content block, in file order; `None` inside when there are
/// none (8 bytes). Reads as a `serde_json::Map` ([`Deref`]); a mutable borrow allocates the
/// map. Serialises as the keys themselves, for `#[serde(flatten)]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extra(Option<Box<Map<String, Value>>>);

impl Extra {
    /// The keys as an owned map (empty when there are none).
    pub fn into_map(self) -> Map<String, Value> {
        self.0.map(|m| *m).unwrap_or_default()
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(m: Map<String, Value>) -> Self {
        Extra((!m.is_empty()).then(|| Box::new(m)))
    }
}

impl Deref for Extra {
    type Target = Map<String, Value>;
    fn deref(&self) -> &Self::Target {
        self.0.as_deref().unwrap_or(&EMPTY)
    }
}

impl DerefMut for Extra {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.get_or_insert_with(Box::default)
    }
}

impl<'a> IntoIterator for &'a Extra {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.deref().iter()
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.deref().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Extra {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Map::deserialize(d).map(Extra::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_is_one_pointer_and_reads_as_an_empty_map() {
        assert_eq!(std::mem::size_of::<Extra>(), 8);
        let e = Extra::default();
        assert!(e.is_empty());
        assert_eq!(e.get("k"), None);
        assert_eq!(serde_json::to_value(&e).unwrap(), json!({}));
    }

    #[test]
    fn keys_survive_a_round_trip_in_order_and_mutation_allocates() {
        let e: Extra = serde_json::from_value(json!({"b": 1, "a": [2]})).unwrap();
        assert_eq!(e.keys().collect::<Vec<_>>(), ["b", "a"]);
        assert_eq!(serde_json::to_string(&e).unwrap(), r#"{"b":1,"a":[2]}"#);
        let empty: Extra = serde_json::from_value(json!({})).unwrap();
        assert_eq!(empty, Extra::default());
        let mut m = Extra::default();
        m.insert("x".into(), json!(true));
        assert_eq!(
            m.into_map(),
            serde_json::from_value::<Map<String, Value>>(json!({"x": true})).unwrap()
        );
    }
}
