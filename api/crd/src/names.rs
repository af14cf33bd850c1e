//! Kubernetes name rules.

/// Why `name` is not a valid DNS-1123 subdomain (lowercase letters, digits,
/// `-` and `.`, starting and ending with a letter or digit, at most 253
/// characters), or `None` when it is.
pub fn dns1123_subdomain_problem(name: &str) -> Option<String> {
    const HINT: &str =
        "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit";
    if name.is_empty() {
        return Some(format!(
            "must not be empty; expected a DNS-1123 subdomain ({HINT})"
        ));
    }
    if name.len() > 253 {
        return Some(format!(
            "{name:?} is {} characters long; expected at most 253",
            name.len()
        ));
    }
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    let labels_ok = name.split('.').all(|label| {
        let b = label.as_bytes();
        match (b.first(), b.last()) {
            (Some(f), Some(l)) => f.is_ascii_alphanumeric() && l.is_ascii_alphanumeric(),
            _ => false,
        }
    });
    if ok_chars && labels_ok {
        None
    } else {
        Some(format!(
            "{name:?} is not a valid DNS-1123 subdomain; expected {HINT}"
        ))
    }
}

/// Why `name` is not a valid DNS-1123 label (a subdomain without dots, at
/// most 63 characters), or `None` when it is.
pub fn dns1123_label_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty; expected a DNS-1123 label".to_string());
    }
    if name.contains('.') || name.len() > 63 || dns1123_subdomain_problem(name).is_some() {
        return Some(format!(
            "{name:?} is not a valid DNS-1123 label; expected at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
        ));
    }
    None
}

/// Why `value` is not a valid non-empty Kubernetes label value (at most 63
/// characters: letters, digits, `-`, `_` and `.`, starting and ending with a
/// letter or digit), or `None` when it is.
pub fn label_value_problem(value: &str) -> Option<String> {
    const HINT: &str =
        "letters, digits, '-', '_' and '.', starting and ending with a letter or digit";
    if value.is_empty() {
        return Some(format!(
            "must not be empty; expected a label value ({HINT})"
        ));
    }
    if value.len() > 63 {
        return Some(format!(
            "{value:?} is {} characters long; expected at most 63",
            value.len()
        ));
    }
    let b = value.as_bytes();
    let ends_ok = b[0].is_ascii_alphanumeric() && b[b.len() - 1].is_ascii_alphanumeric();
    let chars_ok = b
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if ends_ok && chars_ok {
        None
    } else {
        Some(format!(
            "{value:?} is not a valid label value; expected {HINT}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values() {
        for ok in [
            "a",
            "NVIDIA-H100-80GB-HBM3",
            "Tesla_V100.x",
            "0",
            &"a".repeat(63),
        ] {
            assert_eq!(label_value_problem(ok), None, "{ok}");
        }
        for bad in ["", "NVIDIA A100", "-a", "a.", "a/b", "ä"] {
            assert!(label_value_problem(bad).is_some(), "{bad}");
        }
        assert!(
            label_value_problem(&"a".repeat(64))
                .unwrap()
                .contains("at most 63")
        );
        assert_eq!(
            label_value_problem("NVIDIA A100").unwrap(),
            "\"NVIDIA A100\" is not a valid label value; expected letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
        );
    }

    #[test]
    fn subdomains() {
        for ok in ["a", "team-a", "a.b-c.d", "0abc", "x1"] {
            assert_eq!(dns1123_subdomain_problem(ok), None, "{ok}");
        }
        for bad in ["", "Team", "-a", "a-", "a..b", "a_b", ".a", "a b", "ä"] {
            assert!(dns1123_subdomain_problem(bad).is_some(), "{bad}");
        }
        assert!(
            dns1123_subdomain_problem(&"a".repeat(254))
                .unwrap()
                .contains("at most 253")
        );
        assert_eq!(
            dns1123_subdomain_problem("Team_A").unwrap(),
            "\"Team_A\" is not a valid DNS-1123 subdomain; expected lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
        );
    }
}
