//! Kubernetes resource quantities (`resource.Quantity`), parsed exactly.
//!
//! `<sign><digits>[.<digits>]<suffix>` with the suffixes of `ParseQuantity`:
//! binary `Ki Mi Gi Ti Pi Ei`, decimal `n u m "" k M G T P E`, or a decimal
//! exponent `e<int>` / `E<int>`. The value is returned in thousandths
//! (millis) as an `i128`; a value finer than a milli is rounded away from
//! zero, as `Quantity.MilliValue` rounds.

/// The quantity `s` in millis (`"1"` → 1000, `"250m"` → 250, `"1Gi"` →
/// 1073741824000), or `None` when `s` is not a quantity or does not fit.
pub fn parse_millis(s: &str) -> Option<i128> {
    let (negative, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(end);
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    let (pow10, pow2) = suffix_powers(suffix)?;
    // Leading zeros carry no value and must not count against i128's width.
    let digits = format!("{whole}{frac}");
    let digits = digits.trim_start_matches('0');
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let scaled = mantissa.checked_mul(1i128.checked_shl(pow2)?)?;
    // value × 1000 = mantissa × 2^pow2 × 10^(pow10 + 3 − fraction digits)
    let exp = i64::from(pow10) + 3 - i64::try_from(frac.len()).ok()?;
    let millis = if exp >= 0 {
        scaled.checked_mul(10i128.checked_pow(u32::try_from(exp).ok()?)?)?
    } else {
        match u32::try_from(-exp).ok().and_then(|e| 10i128.checked_pow(e)) {
            Some(den) => scaled / den + i128::from(scaled % den != 0),
            // Smaller than any milli this width can hold: rounds up to one.
            None => i128::from(scaled != 0),
        }
    };
    Some(if negative { -millis } else { millis })
}

/// The powers of ten and of two a suffix multiplies by.
fn suffix_powers(suffix: &str) -> Option<(i32, u32)> {
    Some(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            let exp = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))?;
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (exp.parse().ok()?, 0)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::parse_millis;

    #[test]
    fn quantities_parse_exactly_in_millis() {
        for (s, want) in [
            ("8", 8_000),
            ("0", 0),
            ("250m", 250),
            ("1.5", 1_500),
            (".5", 500),
            ("2.", 2_000),
            ("+3", 3_000),
            ("-1", -1_000),
            ("1k", 1_000_000),
            ("1M", 1_000_000_000),
            ("1Ki", 1_024_000),
            ("1Mi", 1_048_576_000),
            ("512Gi", 512 * (1i128 << 30) * 1_000),
            ("1Ti", (1i128 << 40) * 1_000),
            ("1.5Gi", 1_610_612_736_000),
            ("1E", 1_000_000_000_000_000_000_000),
            ("1e3", 1_000_000),
            ("1E3", 1_000_000),
            ("5e-3", 5),
            ("100u", 1),
            ("1n", 1),
            ("-1n", -1),
            ("0.0001", 1),
            ("007", 7_000),
        ] {
            assert_eq!(parse_millis(s), Some(want), "{s}");
        }
        for s in [
            "", "x", "1x", "1.2.3", ".", "1e", "1e+", "Gi", "1 Gi", "1gi", "1KiB",
        ] {
            assert_eq!(parse_millis(s), None, "{s}");
        }
        assert_eq!(parse_millis("1e100"), None, "overflow is no quantity");
    }
}
