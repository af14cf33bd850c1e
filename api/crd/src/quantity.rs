//! Kubernetes `resource.Quantity` parsing to exact integers (no floats).
//!
//! A quantity is `<sign><digits>[.<digits>]<suffix>` where the suffix is a
//! decimal SI suffix (`n u m k M G T P E`), a binary suffix
//! (`Ki Mi Gi Ti Pi Ei`) or a decimal exponent (`e3`, `E-2`). The value is
//! kept as an exact rational `digits * 10^exp10 * 2^exp2`.

use std::fmt;
use std::str::FromStr;

use serde::de::Deserializer;
use serde::{Deserialize, Serialize, Serializer};
use trainyard_model::ResourceName;

/// What a quantity looks like, as the messages of the reader and of the
/// CRD's validation rules ([`crate::cel`]) say it.
pub const EXPECTED_QUANTITY: &str = "expected a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent (e.g. 1e3), such as \"500m\", \"8\" or \"64Gi\"";

/// Why a quantity was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "empty quantity; expected a number with an optional suffix, such as \"500m\", \"8\" or \"64Gi\""
    )]
    Empty,
    #[error("quantity {0:?} is negative; expected an amount of zero or more")]
    Negative(String),
    #[error("invalid quantity {0:?}; {EXPECTED_QUANTITY}")]
    Invalid(String),
    #[error("quantity {0:?} is too large")]
    Overflow(String),
    #[error("quantity {0:?} is not a whole number; expected an integer count")]
    NotWhole(String),
}

/// An exact, non-negative Kubernetes quantity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantity {
    /// The text it was parsed from (for messages).
    text: String,
    digits: u128,
    exp10: i64,
    exp2: u32,
}

/// Parses a Kubernetes quantity such as `500m`, `2`, `1.5`, `64Gi`, `1e3`.
pub fn parse_quantity(s: &str) -> Result<Quantity, QuantityError> {
    let text = s.trim();
    if text.is_empty() {
        return Err(QuantityError::Empty);
    }
    let invalid = || QuantityError::Invalid(s.to_string());
    let (negative, rest) = match (text.strip_prefix('-'), text.strip_prefix('+')) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        (None, None) => (false, text),
    };
    let num_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (num, suffix) = rest.split_at(num_end);
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
        return Err(invalid());
    }
    let frac_part = frac_part.trim_end_matches('0');
    let mut digits: u128 = 0;
    for c in int_part.bytes().chain(frac_part.bytes()) {
        digits = digits
            .checked_mul(10)
            .and_then(|d| d.checked_add(u128::from(c - b'0')))
            .ok_or_else(|| QuantityError::Overflow(s.to_string()))?;
    }
    // frac_part.len() is bounded by the input length, which fits i64.
    let mut exp10: i64 = -(frac_part.len() as i64);
    let mut exp2: u32 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => exp2 = 10,
        "Mi" => exp2 = 20,
        "Gi" => exp2 = 30,
        "Ti" => exp2 = 40,
        "Pi" => exp2 = 50,
        "Ei" => exp2 = 60,
        other if other.starts_with(['e', 'E']) => {
            let e = &other[1..];
            let body = e.strip_prefix(['+', '-']).unwrap_or(e);
            if body.is_empty() || !body.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            let e: i32 = e
                .parse()
                .map_err(|_| QuantityError::Overflow(s.to_string()))?;
            exp10 += i64::from(e);
        }
        _ => return Err(invalid()),
    }
    if digits == 0 {
        exp10 = 0;
        exp2 = 0;
    } else if negative {
        return Err(QuantityError::Negative(s.to_string()));
    }
    Ok(Quantity {
        text: text.to_string(),
        digits,
        exp10,
        exp2,
    })
}

impl Quantity {
    /// The text this quantity was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn is_zero(&self) -> bool {
        self.digits == 0
    }

    /// `value * 10^extra`, rounded up; and whether that was exact.
    fn scaled_ceil(&self, extra: i64) -> Result<(u64, bool), QuantityError> {
        let overflow = || QuantityError::Overflow(self.text.clone());
        if self.digits == 0 {
            return Ok((0, true));
        }
        let mut n = self
            .digits
            .checked_mul(1u128 << self.exp2)
            .ok_or_else(overflow)?;
        let e = self.exp10 + extra;
        let exact;
        if e >= 0 {
            // n >= 1, so this overflows within 39 iterations for large e.
            for _ in 0..e {
                n = n.checked_mul(10).ok_or_else(overflow)?;
            }
            exact = true;
        } else {
            let k = -e;
            if k > 38 {
                // n < 2^128 < 10^39, so 0 < value < 1.
                return Ok((1, false));
            }
            let d = 10u128.pow(k as u32);
            exact = n % d == 0;
            n = n.div_ceil(d);
        }
        let v = u64::try_from(n).map_err(|_| overflow())?;
        Ok((v, exact))
    }

    /// The amount in thousandths, rounded up (CPU millicores, milli-GPU).
    pub fn to_milli_ceil(&self) -> Result<u64, QuantityError> {
        self.scaled_ceil(3).map(|(v, _)| v)
    }

    /// The amount in whole units, rounded up (memory bytes).
    pub fn to_units_ceil(&self) -> Result<u64, QuantityError> {
        self.scaled_ceil(0).map(|(v, _)| v)
    }

    /// The amount in whole units; an error when it has a fractional part.
    pub fn to_whole_units(&self) -> Result<u64, QuantityError> {
        match self.scaled_ceil(0)? {
            (v, true) => Ok(v),
            (_, false) => Err(QuantityError::NotWhole(self.text.clone())),
        }
    }

    /// The amount in Trainyard's integer unit for `name`: millicores for
    /// cpu, bytes for memory, milli-GPU for `nvidia.com/gpu`, a whole count
    /// for anything else.
    pub fn to_resource_units(&self, name: &ResourceName) -> Result<u64, QuantityError> {
        match name {
            ResourceName::Cpu | ResourceName::Gpu => self.to_milli_ceil(),
            ResourceName::Memory => self.to_units_ceil(),
            ResourceName::Extended(_) => self.to_whole_units(),
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_quantity(s)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The unparsed text of a quantity as written in a document: a YAML string
/// (`"500m"`) or number (`8`, `0.5`). Parsing is deferred so that every bad
/// quantity of an object can be reported at once.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RawQuantity(pub String);

impl RawQuantity {
    pub fn parse(&self) -> Result<Quantity, QuantityError> {
        parse_quantity(&self.0)
    }
}

impl Serialize for RawQuantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RawQuantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::de::scalar_text(
            d,
            "a quantity such as \"500m\", \"8\" or \"64Gi\"",
            "quantity",
        )
        .map(RawQuantity)
    }
}

impl fmt::Display for RawQuantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn milli(s: &str) -> u64 {
        parse_quantity(s).unwrap().to_milli_ceil().unwrap()
    }
    fn units(s: &str) -> u64 {
        parse_quantity(s).unwrap().to_units_ceil().unwrap()
    }

    #[test]
    fn cpu_millis() {
        assert_eq!(milli("500m"), 500);
        assert_eq!(milli("2"), 2000);
        assert_eq!(milli("1.5"), 1500);
        assert_eq!(milli("0.1m"), 1);
        assert_eq!(milli("0.5"), 500);
        assert_eq!(milli("8"), 8000);
        assert_eq!(milli("+3"), 3000);
        assert_eq!(milli(".5"), 500);
        assert_eq!(milli("5."), 5000);
        assert_eq!(milli("100u"), 1);
        assert_eq!(milli("1000000n"), 1);
        assert_eq!(milli("1000001n"), 2);
        assert_eq!(milli("0"), 0);
        assert_eq!(milli("-0"), 0);
        assert_eq!(milli("0.000"), 0);
        assert_eq!(milli("1e-100"), 1);
        assert_eq!(milli("1e-1000000"), 1);
        assert_eq!(milli("1.250"), 1250);
    }

    #[test]
    fn units_and_suffixes() {
        assert_eq!(units("64Gi"), 64 << 30);
        assert_eq!(units("1Ki"), 1024);
        assert_eq!(units("1.5Ki"), 1536);
        assert_eq!(units("1Ei"), 1 << 60);
        assert_eq!(units("1e3"), 1000);
        assert_eq!(units("1E3"), 1000);
        assert_eq!(units("1.5E2"), 150);
        assert_eq!(units("1e+3"), 1000);
        assert_eq!(units("1k"), 1000);
        assert_eq!(units("1M"), 1_000_000);
        assert_eq!(units("1G"), 1_000_000_000);
        assert_eq!(units("2T"), 2_000_000_000_000);
        assert_eq!(units("1P"), 10u64.pow(15));
        assert_eq!(units("1E"), 10u64.pow(18));
        assert_eq!(units("1.5"), 2, "bytes round up");
        assert_eq!(units("65843948Ki"), 65843948 * 1024);
        assert_eq!(units("000012"), 12);
        assert_eq!(
            units("0.10000000000000000000000000000000000000000000000000e3"),
            100,
            "trailing fraction zeros do not overflow"
        );
    }

    #[test]
    fn whole_units() {
        assert_eq!(parse_quantity("4").unwrap().to_whole_units(), Ok(4));
        assert_eq!(parse_quantity("2k").unwrap().to_whole_units(), Ok(2000));
        assert_eq!(
            parse_quantity("1500m").unwrap().to_whole_units(),
            Err(QuantityError::NotWhole("1500m".into()))
        );
        assert_eq!(parse_quantity("2000m").unwrap().to_whole_units(), Ok(2));
    }

    #[test]
    fn resource_units() {
        let q = parse_quantity("0.5").unwrap();
        assert_eq!(q.to_resource_units(&ResourceName::Gpu), Ok(500));
        assert_eq!(q.to_resource_units(&ResourceName::Cpu), Ok(500));
        assert_eq!(q.to_resource_units(&ResourceName::Memory), Ok(1));
        assert!(
            q.to_resource_units(&ResourceName::parse("rdma/ib"))
                .is_err()
        );
        assert_eq!(
            parse_quantity("8")
                .unwrap()
                .to_resource_units(&ResourceName::Gpu),
            Ok(8000)
        );
    }

    #[test]
    fn bad_input() {
        assert_eq!(parse_quantity(""), Err(QuantityError::Empty));
        assert_eq!(parse_quantity("  "), Err(QuantityError::Empty));
        assert_eq!(
            parse_quantity("-1"),
            Err(QuantityError::Negative("-1".into()))
        );
        for bad in [
            "12x", "1K", "abc", ".", "1.2.3", "1e", "1e+", "e3", "1Gi3", "1 Gi", "--1", "1m5",
            "0x10", "1ee3",
        ] {
            assert_eq!(
                parse_quantity(bad),
                Err(QuantityError::Invalid(bad.into())),
                "{bad}"
            );
        }
        let e = parse_quantity("12x").unwrap_err().to_string();
        assert!(e.contains("invalid quantity \"12x\""), "{e}");
        assert!(e.contains("\"64Gi\""), "{e}");
        assert_eq!(
            parse_quantity("-1").unwrap_err().to_string(),
            "quantity \"-1\" is negative; expected an amount of zero or more"
        );
    }

    #[test]
    fn overflow_is_an_error() {
        let big = "9".repeat(60);
        assert_eq!(
            parse_quantity(&big),
            Err(QuantityError::Overflow(big.clone()))
        );
        assert_eq!(
            parse_quantity("1e99999999999"),
            Err(QuantityError::Overflow("1e99999999999".into()))
        );
        let q = parse_quantity("1e30").unwrap();
        assert_eq!(
            q.to_units_ceil(),
            Err(QuantityError::Overflow("1e30".into()))
        );
        assert_eq!(
            parse_quantity("1e2147483647").unwrap().to_milli_ceil(),
            Err(QuantityError::Overflow("1e2147483647".into()))
        );
        assert_eq!(
            parse_quantity("16Ei").unwrap().to_units_ceil(),
            Err(QuantityError::Overflow("16Ei".into()))
        );
        assert_eq!(
            parse_quantity("15Ei").unwrap().to_units_ceil(),
            Ok(15 << 60)
        );
        assert_eq!(
            parse_quantity("18446744073709551615")
                .unwrap()
                .to_units_ceil(),
            Ok(u64::MAX)
        );
        assert!(
            parse_quantity("18446744073709551616")
                .unwrap()
                .to_units_ceil()
                .is_err()
        );
    }

    #[test]
    fn raw_quantity_accepts_numbers_and_strings() {
        let v: Vec<RawQuantity> = serde_json::from_str(r#"[8, 0.5, "500m", 1e3, 1.0]"#).unwrap();
        let got: Vec<&str> = v.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(got, ["8", "0.5", "500m", "1000", "1"]);
        assert_eq!(v[1].parse().unwrap().to_milli_ceil(), Ok(500));
        assert!(serde_json::from_str::<RawQuantity>("true").is_err());
    }
}
