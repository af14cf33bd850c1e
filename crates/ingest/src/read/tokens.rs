//! One parsed value, kept as a flat list of tokens: the reader's buffer
//! for one object at a time.
//!
//! A `serde_json::Value` tree costs an allocation per string and per map
//! entry; a token is 24 bytes in one `Vec`, strings share one arena, and
//! both are reused from object to object. The tokens replay (see
//! [`super::replay`]) exactly as a `Value` holding the same data
//! deserializes: numbers normalized as `Value` normalizes them, map keys
//! in sorted order (a `Value` map is a `BTreeMap`).

use serde_json::Value;

/// One token. Containers are followed by their contents: a sequence by its
/// elements, a mapping by a key (`Str`) and a value per entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Tok {
    Null,
    Bool(bool),
    /// A non-negative integer (`Value` keeps every integer ≥ 0 unsigned).
    U64(u64),
    /// A negative integer.
    I64(i64),
    /// A finite float.
    F64(f64),
    /// `len` bytes of the arena from `start`.
    Str {
        start: usize,
        len: usize,
    },
    /// `span` tokens follow that belong to the sequence; `count` elements.
    Seq {
        span: usize,
        count: usize,
    },
    /// `span` tokens follow that belong to the mapping; `count` entries.
    Map {
        span: usize,
        count: usize,
    },
}

/// A scalar as a parser hands it over.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Scalar<'a> {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    Str(&'a str),
}

/// Two entries of one mapping have the same key.
#[derive(Debug)]
pub(crate) struct DuplicateKey(pub String);

/// A container being built.
#[derive(Clone, Copy, Debug)]
struct Open {
    /// Index of its header token; `None` for a sequence whose elements are
    /// taken out one by one as they complete (a streamed `items`).
    header: Option<usize>,
    map: bool,
    count: usize,
    /// In a mapping: a key was pushed, its value has not been.
    awaiting_value: bool,
}

/// Where the buffer stood, to go back to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    toks: usize,
    text: usize,
}

impl Mark {
    /// The index of the first token pushed after the mark.
    pub fn index(self) -> usize {
        self.toks
    }
}

#[derive(Debug, Default)]
pub(crate) struct Tokens {
    toks: Vec<Tok>,
    text: String,
    open: Vec<Open>,
}

impl Tokens {
    // -- building ------------------------------------------------------------

    pub fn clear(&mut self) {
        self.toks.clear();
        self.text.clear();
        self.open.clear();
    }

    pub fn mark(&self) -> Mark {
        Mark {
            toks: self.toks.len(),
            text: self.text.len(),
        }
    }

    /// Drops everything pushed since `mark` (which must lie inside the
    /// innermost open container or at top level).
    pub fn truncate(&mut self, mark: Mark) {
        self.toks.truncate(mark.toks);
        self.text.truncate(mark.text);
    }

    /// Tokens held.
    pub fn len(&self) -> usize {
        self.toks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.toks.is_empty()
    }

    /// Open containers (a streamed sequence counts).
    pub fn depth(&self) -> usize {
        self.open.len()
    }

    /// The next scalar is a mapping key.
    pub fn expects_key(&self) -> bool {
        self.open.last().is_some_and(|o| o.map && !o.awaiting_value)
    }

    /// Whether the innermost container is a mapping whose last key is `key`
    /// and whose value comes next.
    pub fn value_of(&self, key: &str) -> bool {
        match (self.open.last(), self.toks.last()) {
            (Some(o), Some(Tok::Str { start, len })) if o.map && o.awaiting_value => {
                &self.text[*start..*start + *len] == key
            }
            _ => false,
        }
    }

    fn str_tok(&mut self, s: &str) -> Tok {
        let start = self.text.len();
        self.text.push_str(s);
        Tok::Str {
            start,
            len: s.len(),
        }
    }

    /// A value (scalar or container start) takes its place in the parent.
    fn placed(&mut self) {
        if let Some(o) = self.open.last_mut() {
            if o.map {
                o.awaiting_value = false;
            } else {
                o.count += 1;
            }
        }
    }

    pub fn key(&mut self, key: &str) {
        let tok = self.str_tok(key);
        self.toks.push(tok);
        if let Some(o) = self.open.last_mut() {
            o.count += 1;
            o.awaiting_value = true;
        }
    }

    pub fn scalar(&mut self, s: Scalar<'_>) {
        let tok = match s {
            Scalar::Null => Tok::Null,
            Scalar::Bool(b) => Tok::Bool(b),
            Scalar::U64(n) => Tok::U64(n),
            Scalar::I64(n) if n >= 0 => Tok::U64(n.unsigned_abs()),
            Scalar::I64(n) => Tok::I64(n),
            // As `Value` stores it: a float that is not finite is null.
            Scalar::F64(f) if f.is_finite() => Tok::F64(f),
            Scalar::F64(_) => Tok::Null,
            Scalar::Str(s) => self.str_tok(s),
        };
        self.placed();
        self.toks.push(tok);
    }

    pub fn begin(&mut self, map: bool) {
        self.placed();
        let header = self.toks.len();
        self.toks.push(if map {
            Tok::Map { span: 0, count: 0 }
        } else {
            Tok::Seq { span: 0, count: 0 }
        });
        self.open.push(Open {
            header: Some(header),
            map,
            count: 0,
            awaiting_value: false,
        });
    }

    /// Opens a sequence that has no header: its elements are taken out
    /// (truncated) as they complete, and [`Self::end`] leaves nothing.
    pub fn begin_streamed(&mut self) {
        self.open.push(Open {
            header: None,
            map: false,
            count: 0,
            awaiting_value: false,
        });
    }

    /// Whether the innermost container is a streamed sequence.
    pub fn in_streamed(&self) -> bool {
        self.open.last().is_some_and(|o| o.header.is_none())
    }

    /// Closes the innermost container: a mapping's entries are put in key
    /// order (as a `Value` map holds them); two equal keys are an error.
    /// Closing a streamed sequence pushes `null` in its place.
    pub fn end(&mut self) -> Result<(), DuplicateKey> {
        let Some(o) = self.open.pop() else {
            return Ok(());
        };
        let Some(header) = o.header else {
            self.scalar(Scalar::Null);
            return Ok(());
        };
        let span = self.toks.len() - header - 1;
        self.toks[header] = if o.map {
            Tok::Map {
                span,
                count: o.count,
            }
        } else {
            Tok::Seq {
                span,
                count: o.count,
            }
        };
        if o.map {
            self.sort_entries(header)
        } else {
            Ok(())
        }
    }

    fn sort_entries(&mut self, header: usize) -> Result<(), DuplicateKey> {
        // Mostly already in order (kubectl sorts keys): check without
        // allocating.
        let mut previous: Option<&str> = None;
        let mut sorted = true;
        for (key, _) in self.entries(header) {
            match previous.map(|p| p.cmp(key)) {
                Some(std::cmp::Ordering::Equal) => return Err(DuplicateKey(key.to_string())),
                Some(std::cmp::Ordering::Greater) => sorted = false,
                _ => {}
            }
            previous = Some(key);
        }
        if sorted {
            return Ok(());
        }
        let end = self.next(header);
        // (key index, end) of each entry, by key.
        let mut entries: Vec<(usize, usize)> = self
            .entries(header)
            .map(|(_, value)| (value - 1, self.next(value)))
            .collect();
        entries.sort_by(|a, b| self.str_at(a.0).cmp(&self.str_at(b.0)));
        if let Some(w) = entries
            .windows(2)
            .find(|w| self.str_at(w[0].0) == self.str_at(w[1].0))
        {
            return Err(DuplicateKey(
                self.str_at(w[0].0).unwrap_or_default().to_string(),
            ));
        }
        let mut reordered = Vec::with_capacity(end - header - 1);
        for &(from, to) in &entries {
            reordered.extend_from_slice(&self.toks[from..to]);
        }
        self.toks[header + 1..end].copy_from_slice(&reordered);
        Ok(())
    }

    // -- reading -------------------------------------------------------------

    pub fn tok(&self, i: usize) -> Tok {
        self.toks[i]
    }

    /// The index after the value at `i`.
    pub fn next(&self, i: usize) -> usize {
        match self.toks[i] {
            Tok::Seq { span, .. } | Tok::Map { span, .. } => i + 1 + span,
            _ => i + 1,
        }
    }

    pub fn str_at(&self, i: usize) -> Option<&str> {
        match self.toks.get(i)? {
            Tok::Str { start, len } => Some(&self.text[*start..*start + *len]),
            _ => None,
        }
    }

    pub fn is_null(&self, i: usize) -> bool {
        self.toks[i] == Tok::Null
    }

    /// (key, value index) of each entry of the mapping at `i`.
    pub fn entries(&self, i: usize) -> Entries<'_> {
        Entries {
            tokens: self,
            at: i + 1,
            end: self.next(i),
        }
    }

    /// The entries so far of the mapping at `i` while it is still open,
    /// with nothing open inside it (its header says nothing yet); a last
    /// key without its value is left out.
    pub fn open_entries(&self, i: usize) -> Entries<'_> {
        Entries {
            tokens: self,
            at: i + 1,
            end: self.toks.len(),
        }
    }

    /// The value of `key` in the mapping at `i`.
    pub fn get(&self, i: usize, key: &str) -> Option<usize> {
        self.entries(i).find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The indices of the elements of the sequence at `i`.
    pub fn elements(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let count = match self.toks[i] {
            Tok::Seq { count, .. } => count,
            _ => 0,
        };
        let mut at = i + 1;
        (0..count).map(move |_| {
            let here = at;
            at = self.next(at);
            here
        })
    }

    /// The value at `i` as a `serde_json::Value`.
    pub fn to_value(&self, i: usize) -> Value {
        // Replaying into `Value` cannot fail: its visitor accepts every
        // token the replay produces.
        serde::Deserialize::deserialize(super::replay::Replay::new(self, i)).unwrap_or(Value::Null)
    }

    /// How the value at `i` is named in messages.
    pub fn type_name(&self, i: usize) -> &'static str {
        match self.toks[i] {
            Tok::Null => "null",
            Tok::Bool(_) => "a boolean",
            Tok::U64(_) | Tok::I64(_) | Tok::F64(_) => "a number",
            Tok::Str { .. } => "a string",
            Tok::Seq { .. } => "a sequence",
            Tok::Map { .. } => "a mapping",
        }
    }
}

pub(crate) struct Entries<'a> {
    tokens: &'a Tokens,
    at: usize,
    end: usize,
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a str, usize);

    fn next(&mut self) -> Option<Self::Item> {
        // A key without its value yet (an open mapping) ends the entries.
        if self.at + 1 >= self.end {
            return None;
        }
        let key = self.tokens.str_at(self.at).unwrap_or_default();
        let value = self.at + 1;
        self.at = self.tokens.next(value);
        Some((key, value))
    }
}
