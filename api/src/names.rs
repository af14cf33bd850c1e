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

#[cfg(test)]
mod tests {
    use super::*;

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
