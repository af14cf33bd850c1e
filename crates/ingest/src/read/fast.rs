//! The fast reader: serde-saphyr's own YAML parser (granit-parser, which
//! serde-saphyr re-exports) read event by event straight into a
//! [`Splitter`], without serde-saphyr's deserializer on top.
//!
//! Profiling a 20,000-node `kubectl get -o yaml` dump showed the parser
//! itself at about a quarter of the load time and serde-saphyr's
//! deserializer (key capture and replay, duplicate-key hashing, event
//! bookkeeping) at more than half, even deserializing into `IgnoredAny`.
//! This reader handles the plain YAML and JSON that kubectl and people
//! write, with the same parser options, the same budget limits and the
//! same YAML 1.2 scalar resolution as serde-saphyr's `deserialize_any`
//! with `strict_booleans` (ported below and compared with serde-saphyr in
//! `tests::fast_reader_matches_serde_saphyr`). Anything else (anchors,
//! aliases, tags, merge keys, complex or null keys, duplicate keys, floats
//! that are not finite, a syntax error, a budget limit) and it declines:
//! the source is then read by serde-saphyr's deserializer, which gives the
//! values, the errors and the messages. It never decides what serde-saphyr
//! would have rejected.

use serde_saphyr::granit_parser::{Event, Options, Parser, ScalarStyle};

use super::split::{Findings, Splitter};
use super::tokens::Scalar;

/// What the documents of `text` gave (empty documents skipped, as
/// serde-saphyr skips them), read through `splitter`; `None` when the text
/// needs serde-saphyr's deserializer.
pub(crate) fn read(
    text: &str,
    budget: &serde_saphyr::Budget,
    splitter: &mut Splitter,
) -> Option<Vec<Findings>> {
    // The parser options serde-saphyr derives from its budget.
    let mut options = Options::default();
    options.simple_key_max_lookahead = budget.simple_key_max_lookahead;
    options.flow_nesting_limit = budget.flow_nesting_limit;
    options.block_nesting_limit = options
        .block_nesting_limit
        .max(budget.max_depth.saturating_add(1));
    options.emit_comments = false;
    options.strict_indentation = false;

    let mut documents = Vec::new();
    // Budget counts, as serde-saphyr keeps them; reaching a limit declines
    // (one short of it, so that a count kept slightly differently can
    // never accept what serde-saphyr would refuse).
    let (mut events, mut nodes, mut scalar_bytes, mut starts) = (0usize, 0usize, 0usize, 0usize);
    for item in Parser::new_from_str_with_options(text, options) {
        let (event, _span) = item.ok()?;
        events += 1;
        if events >= budget.max_events {
            return None;
        }
        let map = matches!(event, Event::MappingStart(..));
        match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
            Event::DocumentStart(..) => {
                starts += 1;
                if starts >= budget.max_documents {
                    return None;
                }
            }
            Event::Scalar(value, style, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return None;
                }
                nodes += 1;
                scalar_bytes += value.len();
                if nodes >= budget.max_nodes || scalar_bytes >= budget.max_total_scalar_bytes {
                    return None;
                }
                let plain = style == ScalarStyle::Plain;
                if splitter.depth() == 0 {
                    // A document that is one scalar; an empty one is no
                    // document at all.
                    if plain && nullish(&value) {
                        continue;
                    }
                    splitter.scalar(resolve(&value, plain)?);
                    documents.push(splitter.finish());
                } else if splitter.expects_key() {
                    // Merge keys, and null keys (an error), are serde-saphyr's.
                    if &*value == "<<" || (plain && nullish(&value)) {
                        return None;
                    }
                    splitter.key(&value);
                } else {
                    splitter.scalar(resolve(&value, plain)?);
                }
            }
            Event::SequenceStart(_, anchor, tag) | Event::MappingStart(_, anchor, tag) => {
                // A collection as a key is serde-saphyr's too.
                if anchor != 0 || tag.is_some() || splitter.expects_key() {
                    return None;
                }
                nodes += 1;
                if nodes >= budget.max_nodes || splitter.depth() + 1 >= budget.max_depth {
                    return None;
                }
                splitter.begin(map);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                splitter.end().ok()?;
                if splitter.depth() == 0 {
                    documents.push(splitter.finish());
                }
            }
            _ => return None,
        }
    }
    Some(documents)
}

/// An untagged scalar as serde-saphyr's `deserialize_any` resolves it;
/// `None` for a float that is not finite (serde-saphyr's to refuse).
fn resolve(value: &str, plain: bool) -> Option<Scalar<'_>> {
    if !plain {
        return Some(Scalar::Str(value));
    }
    if nullish(value) {
        return Some(Scalar::Null);
    }
    let t = yaml_trim(value);
    match t {
        "true" | "True" | "TRUE" => return Some(Scalar::Bool(true)),
        "false" | "False" | "FALSE" => return Some(Scalar::Bool(false)),
        _ => {}
    }
    if t.starts_with('-') {
        if !leading_zero_decimal(t)
            && let Some(n) = int_signed(t)
        {
            return Some(Scalar::I64(n));
        }
    } else if let Some(n) = int_unsigned(t) {
        return Some(Scalar::U64(n));
    }
    match float(t) {
        Float::Finite(f) => Some(Scalar::F64(f)),
        Float::NotFinite => None,
        Float::No => Some(Scalar::Str(value)),
    }
}

fn nullish(value: &str) -> bool {
    matches!(value, "" | "~" | "null" | "Null" | "NULL")
}

fn yaml_trim(s: &str) -> &str {
    s.trim_matches([' ', '\t', '\r', '\n'])
}

fn leading_zero_decimal(t: &str) -> bool {
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    digits.len() > 1 && digits.starts_with('0') && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Digits of `radix` with single underscores between them.
fn digits(digits: &str, radix: u32) -> Option<u128> {
    let bytes = digits.as_bytes();
    let mut value: u128 = 0;
    let mut saw = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            let prev_ok = i > 0 && bytes[i - 1] != b'_';
            let next_ok = bytes.get(i + 1).is_some_and(|&n| n != b'_');
            if !(prev_ok && next_ok) {
                return None;
            }
            continue;
        }
        let d = (b as char).to_digit(16).filter(|&d| d < radix)?;
        value = value
            .checked_mul(u128::from(radix))?
            .checked_add(u128::from(d))?;
        saw = true;
    }
    saw.then_some(value)
}

fn radix_and_digits(rest: &str) -> (u32, &str) {
    for (prefixes, radix) in [(["0x", "0X"], 16), (["0o", "0O"], 8), (["0b", "0B"], 2)] {
        if let Some(r) = rest
            .strip_prefix(prefixes[0])
            .or_else(|| rest.strip_prefix(prefixes[1]))
        {
            return (radix, r);
        }
    }
    (10, rest)
}

fn int_unsigned(t: &str) -> Option<u64> {
    if t.starts_with('-') {
        return None;
    }
    let rest = t.strip_prefix('+').unwrap_or(t);
    let (radix, ds) = radix_and_digits(rest);
    if radix == 10 && ds.starts_with('0') && ds != "0" {
        return None;
    }
    u64::try_from(digits(ds, radix)?).ok()
}

fn int_signed(t: &str) -> Option<i64> {
    let (negative, rest) = match t.strip_prefix('+') {
        Some(r) => (false, r),
        None => t.strip_prefix('-').map_or((false, t), |r| (true, r)),
    };
    let (radix, ds) = radix_and_digits(rest);
    if radix == 10 && ds.starts_with('0') && ds != "0" {
        return None;
    }
    let magnitude = i128::try_from(digits(ds, radix)?).ok();
    let value = match (negative, magnitude) {
        (false, Some(m)) => m,
        (true, Some(m)) => -m,
        // -2^127 alone does not fit i128 as a magnitude; it does not fit
        // i64 either.
        (_, None) => return None,
    };
    i64::try_from(value).ok()
}

enum Float {
    Finite(f64),
    NotFinite,
    No,
}

/// YAML 1.2 floats as serde-saphyr reads them: `.inf`, `.nan` and their
/// spellings, or what Rust's float parser takes (a literal too large for
/// `f64` is infinite).
fn float(t: &str) -> Float {
    let unsigned = t.strip_prefix(['+', '-']).unwrap_or(t);
    if matches!(
        unsigned,
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF"
    ) {
        return Float::NotFinite;
    }
    match t.parse::<f64>() {
        Ok(f) if f.is_finite() => Float::Finite(f),
        // `inf`, `nan`, `infinity` parse in Rust but are strings in YAML;
        // `1e999` is infinite. Either way, serde-saphyr decides.
        Ok(_) => Float::NotFinite,
        Err(_) => Float::No,
    }
}
