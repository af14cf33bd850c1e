//! Deserializing from [`Tokens`] exactly as from the `serde_json::Value`
//! holding the same data: the same visitor calls, the same errors
//! (`serde_json::Error`, so messages read the same). This mirrors
//! `impl Deserializer for &serde_json::Value` method by method (serde_json
//! without `arbitrary_precision`); `tests::replay_matches_value` checks it
//! on every kind of value and target type the reader uses.

use serde::de::{
    self, DeserializeSeed, EnumAccess, Error as _, IntoDeserializer, MapAccess, SeqAccess,
    Unexpected, VariantAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::Error;

use super::tokens::{Tok, Tokens};

/// The value at one index of the tokens, as a deserializer.
#[derive(Clone, Copy)]
pub(crate) struct Replay<'a> {
    t: &'a Tokens,
    i: usize,
}

impl<'a> Replay<'a> {
    pub fn new(t: &'a Tokens, i: usize) -> Self {
        Replay { t, i }
    }

    fn unexpected(&self) -> Unexpected<'a> {
        match self.t.tok(self.i) {
            Tok::Null => Unexpected::Unit,
            Tok::Bool(b) => Unexpected::Bool(b),
            Tok::U64(n) => Unexpected::Unsigned(n),
            Tok::I64(n) => Unexpected::Signed(n),
            Tok::F64(f) => Unexpected::Float(f),
            Tok::Str { .. } => Unexpected::Str(self.t.str_at(self.i).unwrap_or_default()),
            Tok::Seq { .. } => Unexpected::Seq,
            Tok::Map { .. } => Unexpected::Map,
        }
    }

    fn invalid_type(&self, exp: &dyn de::Expected) -> Error {
        Error::invalid_type(self.unexpected(), exp)
    }

    fn visit_seq<V: Visitor<'a>>(self, count: usize, visitor: V) -> Result<V::Value, Error> {
        let mut seq = Elements {
            t: self.t,
            at: self.i + 1,
            left: count,
        };
        let v = visitor.visit_seq(&mut seq)?;
        if seq.left == 0 {
            Ok(v)
        } else {
            Err(Error::invalid_length(count, &"fewer elements in array"))
        }
    }

    fn visit_map<V: Visitor<'a>>(self, count: usize, visitor: V) -> Result<V::Value, Error> {
        let mut map = Entries {
            t: self.t,
            at: self.i + 1,
            left: count,
            value: None,
        };
        let v = visitor.visit_map(&mut map)?;
        if map.left == 0 {
            Ok(v)
        } else {
            Err(Error::invalid_length(count, &"fewer elements in map"))
        }
    }

    fn number<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.t.tok(self.i) {
            Tok::U64(n) => visitor.visit_u64(n),
            Tok::I64(n) => visitor.visit_i64(n),
            Tok::F64(f) => visitor.visit_f64(f),
            _ => Err(self.invalid_type(&visitor)),
        }
    }
}

macro_rules! numbers {
    ($($method:ident)*) => {
        $(fn $method<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
            self.number(visitor)
        })*
    };
}

impl<'a> de::Deserializer<'a> for Replay<'a> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.t.tok(self.i) {
            Tok::Null => visitor.visit_unit(),
            Tok::Bool(b) => visitor.visit_bool(b),
            Tok::U64(n) => visitor.visit_u64(n),
            Tok::I64(n) => visitor.visit_i64(n),
            Tok::F64(f) => visitor.visit_f64(f),
            Tok::Str { .. } => {
                visitor.visit_borrowed_str(self.t.str_at(self.i).unwrap_or_default())
            }
            Tok::Seq { count, .. } => self.visit_seq(count, visitor),
            Tok::Map { count, .. } => self.visit_map(count, visitor),
        }
    }

    numbers!(
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    );

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.t.tok(self.i) {
            Tok::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.t.tok(self.i) {
            Tok::Map { count, .. } => {
                if count != 1 {
                    return Err(Error::invalid_value(
                        Unexpected::Map,
                        &"map with a single key",
                    ));
                }
                visitor.visit_enum(Variant {
                    name: self.t.str_at(self.i + 1).unwrap_or_default(),
                    value: Some(Replay::new(self.t, self.i + 2)),
                })
            }
            Tok::Str { .. } => visitor.visit_enum(Variant {
                name: self.t.str_at(self.i).unwrap_or_default(),
                value: None,
            }),
            _ => Err(Error::invalid_type(self.unexpected(), &"string or map")),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_bool<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.t.tok(self.i) {
            Tok::Bool(b) => visitor.visit_bool(b),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_char<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.t.str_at(self.i) {
            Some(s) => visitor.visit_borrowed_str(s),
            None => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.t.tok(self.i) {
            Tok::Str { .. } => {
                visitor.visit_borrowed_str(self.t.str_at(self.i).unwrap_or_default())
            }
            Tok::Seq { count, .. } => self.visit_seq(count, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_unit<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.t.tok(self.i) {
            Tok::Null => visitor.visit_unit(),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_seq<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.t.tok(self.i) {
            Tok::Seq { count, .. } => self.visit_seq(count, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.t.tok(self.i) {
            Tok::Map { count, .. } => self.visit_map(count, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.t.tok(self.i) {
            Tok::Seq { count, .. } => self.visit_seq(count, visitor),
            Tok::Map { count, .. } => self.visit_map(count, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_identifier<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

struct Elements<'a> {
    t: &'a Tokens,
    at: usize,
    left: usize,
}

impl<'a> SeqAccess<'a> for Elements<'a> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'a>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let here = self.at;
        self.at = self.t.next(here);
        seed.deserialize(Replay::new(self.t, here)).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

struct Entries<'a> {
    t: &'a Tokens,
    at: usize,
    left: usize,
    value: Option<usize>,
}

impl<'a> MapAccess<'a> for Entries<'a> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'a>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let key = self.t.str_at(self.at).unwrap_or_default();
        self.value = Some(self.at + 1);
        self.at = self.t.next(self.at + 1);
        seed.deserialize(Key(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.value.take() {
            Some(i) => seed.deserialize(Replay::new(self.t, i)),
            None => Err(Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

/// A mapping key, as serde_json's `MapKeyDeserializer` gives it. Numeric
/// keys (a map keyed by numbers) are parsed as serde_json parses them.
struct Key<'a>(&'a str);

/// The error serde_json gives for a key that is not a number where one is
/// expected, made by serde_json itself so that it reads the same.
fn not_a_numeric_key() -> Error {
    let key_not_a_number = serde_json::json!({ "x": null });
    serde_json::from_value::<std::collections::BTreeMap<u8, ()>>(key_not_a_number)
        .err()
        .unwrap_or_else(|| Error::custom("expected a numeric key"))
}

macro_rules! numeric_keys {
    ($($method:ident)*) => {
        $(fn $method<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
            if !self.0.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
                return Err(not_a_numeric_key());
            }
            let mut de = serde_json::Deserializer::from_str(self.0);
            let v = de::Deserializer::$method(&mut de, visitor)?;
            // Nothing may follow the number, not even white space.
            if self.0.ends_with(char::is_whitespace) || de.end().is_err() {
                return Err(not_a_numeric_key());
            }
            Ok(v)
        })*
    };
}

impl<'a> de::Deserializer<'a> for Key<'a> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.0)
    }

    numeric_keys!(
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64
    );

    fn deserialize_bool<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            "true" => visitor.visit_bool(true),
            "false" => visitor.visit_bool(false),
            _ => Err(Error::invalid_type(Unexpected::Str(self.0), &visitor)),
        }
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        de::value::BorrowedStrDeserializer::<Error>::new(self.0)
            .deserialize_enum(name, variants, visitor)
    }

    forward_to_deserialize_any! {
        <W: Visitor<'a>>
        char str string bytes byte_buf unit unit_struct seq tuple tuple_struct
        map struct identifier ignored_any
    }
}

/// An enum: a string (unit variant) or a mapping with one key.
struct Variant<'a> {
    name: &'a str,
    value: Option<Replay<'a>>,
}

impl<'a> EnumAccess<'a> for Variant<'a> {
    type Error = Error;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'a>>(self, seed: V) -> Result<(V::Value, Self), Error> {
        let name: de::value::StrDeserializer<'_, Error> = self.name.into_deserializer();
        seed.deserialize(name).map(|v| (v, self))
    }
}

impl<'a> VariantAccess<'a> for Variant<'a> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.value {
            Some(value) => de::Deserialize::deserialize(value),
            None => Ok(()),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'a>>(self, seed: T) -> Result<T::Value, Error> {
        match self.value {
            Some(value) => seed.deserialize(value),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        match self.value.map(|v| (v, v.t.tok(v.i))) {
            Some((_, Tok::Seq { count: 0, .. })) => visitor.visit_unit(),
            Some((v, Tok::Seq { count, .. })) => v.visit_seq(count, visitor),
            Some((v, _)) => Err(Error::invalid_type(v.unexpected(), &"tuple variant")),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'a>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value.map(|v| (v, v.t.tok(v.i))) {
            Some((v, Tok::Map { count, .. })) => v.visit_map(count, visitor),
            Some((v, _)) => Err(Error::invalid_type(v.unexpected(), &"struct variant")),
            None => Err(Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        }
    }
}
