//! Splitting a document into objects while it is parsed.
//!
//! A parser (the fast event reader in [`super::fast`], or serde-saphyr's
//! deserializer and a watched `serde_json::Value` through [`Record`])
//! pushes scalars, keys and container starts and ends into a [`Splitter`].
//! It records them as [`Tokens`], and when the document is a `List` whose
//! `kind` and `apiVersion` came before `items` (as kubectl prints them,
//! keys sorted) it hands over each item as soon as it is complete, and
//! forgets it: only one item is held at a time. Otherwise (a single
//! object, or a List whose `kind` comes after `items`) the document is
//! held until it ends. Either way each object is interpreted by
//! [`super::object::interpret`], the one interpretation.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};

use super::Outcome;
use super::object::interpret;
use super::tokens::{DuplicateKey, Mark, Scalar, Tokens};

/// What one document gave: each finding with the path prefix of its object
/// inside the document (`items[3].`).
pub(crate) type Findings = Vec<(String, Outcome)>;

/// The streamed `items` of a root List.
struct Items {
    /// Where each item starts in the buffer.
    mark: Mark,
    index: usize,
    /// Kind and apiVersion of a typed list (`PodList`), for items without.
    inherited: Option<(String, String)>,
}

#[derive(Default)]
pub(crate) struct Splitter {
    tokens: Tokens,
    items: Option<Items>,
    found: Findings,
    /// Most tokens held at once (tests check that a List is not held whole).
    pub peak_tokens: usize,
    /// Every object handed over, as a `Value` (tests compare readers).
    #[cfg(test)]
    pub seen: Vec<serde_json::Value>,
}

impl Splitter {
    /// What is held (a document that is not a streamed List, until it is
    /// finished).
    #[cfg(test)]
    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    pub fn expects_key(&self) -> bool {
        self.tokens.expects_key()
    }

    pub fn depth(&self) -> usize {
        self.tokens.depth()
    }

    pub fn key(&mut self, key: &str) {
        self.tokens.key(key);
    }

    pub fn scalar(&mut self, s: Scalar<'_>) {
        self.tokens.scalar(s);
        self.completed();
    }

    pub fn begin(&mut self, map: bool) {
        if !map
            && self.items.is_none()
            && self.tokens.depth() == 1
            && self.tokens.value_of("items")
            && let Some(inherited) = self.list_kind()
        {
            self.tokens.begin_streamed();
            self.items = Some(Items {
                mark: self.tokens.mark(),
                index: 0,
                inherited,
            });
            return;
        }
        self.tokens.begin(map);
    }

    pub fn end(&mut self) -> Result<(), DuplicateKey> {
        if self.tokens.in_streamed() {
            // `items` ends; it stands in the List as null, already read.
            self.items = None;
            return self.tokens.end();
        }
        self.tokens.end()?;
        self.completed();
        Ok(())
    }

    /// Whether the root mapping so far says it is a List whose items may be
    /// streamed: `kind` a non-empty string ending in `List`, `apiVersion` a
    /// non-empty string. Then `Some` of what a typed list's items inherit.
    #[allow(clippy::option_option)]
    fn list_kind(&self) -> Option<Option<(String, String)>> {
        let (mut kind, mut api) = (None, None);
        for (key, value) in self.tokens.open_entries(0) {
            match key {
                "kind" => kind = self.tokens.str_at(value),
                "apiVersion" => api = self.tokens.str_at(value),
                _ => {}
            }
        }
        let (kind, api) = (
            kind.filter(|k| !k.is_empty())?,
            api.filter(|a| !a.is_empty())?,
        );
        let item_kind = kind.strip_suffix("List")?;
        Some((!item_kind.is_empty()).then(|| (item_kind.to_string(), api.to_string())))
    }

    /// A value was completed: if it is an item of the streamed `items`,
    /// interpret it and drop it.
    fn completed(&mut self) {
        self.peak_tokens = self.peak_tokens.max(self.tokens.len());
        let Some(items) = &mut self.items else {
            return;
        };
        if !self.tokens.in_streamed() {
            return;
        }
        #[cfg(test)]
        self.seen.push(self.tokens.to_value(items.mark.index()));
        let prefix = format!("items[{}].", items.index);
        let inherited = items
            .inherited
            .as_ref()
            .map(|(k, a)| (k.as_str(), a.as_str()));
        interpret(
            &self.tokens,
            items.mark.index(),
            &prefix,
            inherited,
            &mut self.found,
        );
        items.index += 1;
        self.tokens.truncate(items.mark);
    }

    /// The document is complete: interpret what is held, and hand over
    /// everything found.
    pub fn finish(&mut self) -> Findings {
        self.peak_tokens = self.peak_tokens.max(self.tokens.len());
        if !self.tokens.is_empty() {
            #[cfg(test)]
            self.seen.push(self.tokens.to_value(0));
            interpret(&self.tokens, 0, "", None, &mut self.found);
        }
        self.tokens.clear();
        self.items = None;
        std::mem::take(&mut self.found)
    }
}

/// Records any serde value into a [`Splitter`], as `serde_json::Value`'s
/// own visitor reads it (same keys, same numbers, same errors).
pub(crate) struct Record<'s>(pub &'s mut Splitter);

impl<'de> DeserializeSeed<'de> for Record<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Record<'_> {
    fn number<E: de::Error>(self, n: serde_json::Number) -> Result<(), E> {
        let s = match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Scalar::U64(u),
            (None, Some(i)) => Scalar::I64(i),
            (None, None) => Scalar::F64(n.as_f64().unwrap_or(f64::NAN)),
        };
        self.0.scalar(s);
        Ok(())
    }
}

impl<'de> Visitor<'de> for Record<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.scalar(Scalar::Bool(v));
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.0.scalar(Scalar::I64(v));
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.0.scalar(Scalar::U64(v));
        Ok(())
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<(), E> {
        let n = serde_json::Number::deserialize(de::value::I128Deserializer::<E>::new(v))?;
        self.number(n)
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<(), E> {
        let n = serde_json::Number::deserialize(de::value::U128Deserializer::<E>::new(v))?;
        self.number(n)
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.0.scalar(Scalar::F64(v));
        Ok(())
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.scalar(Scalar::Str(v));
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        self.0.scalar(Scalar::Null);
        Ok(())
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        Record(self.0).deserialize(d)
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.scalar(Scalar::Null);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.begin(false);
        while seq.next_element_seed(Record(&mut *self.0))?.is_some() {}
        self.0
            .end()
            .map_err(|DuplicateKey(k)| A::Error::custom(format!("duplicate key {k:?}")))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.begin(true);
        let mut first = true;
        while map
            .next_key_seed(KeySeed {
                splitter: &mut *self.0,
                first,
            })?
            .is_some()
        {
            first = false;
            map.next_value_seed(Record(&mut *self.0))?;
        }
        self.0
            .end()
            .map_err(|DuplicateKey(k)| A::Error::custom(format!("duplicate key {k:?}")))
    }
}

/// A mapping key, read as `Value` reads it: the first as a `str`, the
/// others as a `String` (which also takes UTF-8 bytes).
struct KeySeed<'s> {
    splitter: &'s mut Splitter,
    first: bool,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.first {
            d.deserialize_str(self)
        } else {
            d.deserialize_string(self)
        }
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(if self.first {
            "a string key"
        } else {
            "a string"
        })
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.splitter.key(v);
        Ok(())
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<(), E> {
        match (self.first, std::str::from_utf8(v)) {
            (false, Ok(s)) => self.visit_str(s),
            (false, Err(_)) => Err(E::invalid_value(de::Unexpected::Bytes(v), &self)),
            (true, _) => Err(E::invalid_type(de::Unexpected::Bytes(v), &self)),
        }
    }
}

/// One document of a source read by serde-saphyr.
pub(crate) struct Document {
    pub found: Findings,
    pub peak_tokens: usize,
    #[cfg(test)]
    pub seen: Vec<serde_json::Value>,
}

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut splitter = Splitter::default();
        Record(&mut splitter).deserialize(d)?;
        Ok(Document {
            found: splitter.finish(),
            peak_tokens: splitter.peak_tokens,
            #[cfg(test)]
            seen: splitter.seen,
        })
    }
}
