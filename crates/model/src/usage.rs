//! What a queue used over time: resource·seconds per resource.
//!
//! The unit of each entry is the resource's unit in [`Resources`]
//! (millicores, bytes, milli-GPU, counts) times seconds, as a `u128`: a
//! petabyte of memory held for a year is 3·10²² byte·seconds, past `u64`.
//! Decayed usage (older seconds count less) has the same unit.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::resources::{ResourceName, Resources};

/// Resource·seconds by Kubernetes resource name; zero entries are never
/// stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Usage(BTreeMap<String, u128>);

impl Usage {
    pub fn new() -> Self {
        Usage::default()
    }

    /// `r` held for `seconds`.
    pub fn of(r: &Resources, seconds: u64) -> Self {
        let mut u = Usage::new();
        u.add_held(r, seconds);
        u
    }

    /// Adds `r` held for `seconds`.
    pub fn add_held(&mut self, r: &Resources, seconds: u64) {
        if seconds == 0 {
            return;
        }
        for (name, v) in r.iter() {
            self.add_to(name.as_str(), u128::from(v) * u128::from(seconds));
        }
    }

    /// Adds `r` held for `ms` milliseconds (each resource rounded down to
    /// whole resource·seconds).
    pub fn add_held_ms(&mut self, r: &Resources, ms: u128) {
        for (name, v) in r.iter() {
            self.add_to(name.as_str(), u128::from(v) * ms / 1000);
        }
    }

    /// Adds `v` resource·seconds of resource `name`.
    pub fn add_to(&mut self, name: &str, v: u128) {
        if v == 0 {
            return;
        }
        // The name is copied only the first time (most calls add to a
        // resource the entry has).
        match self.0.get_mut(name) {
            Some(e) => *e = e.saturating_add(v),
            None => {
                self.0.insert(name.to_string(), v);
            }
        }
    }

    pub fn add(&mut self, other: &Usage) {
        for (k, v) in &other.0 {
            self.add_to(k, *v);
        }
    }

    pub fn get(&self, name: &ResourceName) -> u128 {
        self.0.get(name.as_str()).copied().unwrap_or(0)
    }

    /// (resource name, resource·seconds), by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u128)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    pub fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    /// Every entry times `factor / 2³²`, rounded down (the decay step;
    /// factors above one, 2³², are taken as one).
    pub fn scale_q32(&mut self, factor: u64) {
        let factor = factor.min(1 << 32);
        for v in self.0.values_mut() {
            // Split to stay inside u128: v < 2¹²⁸, factor < 2⁶⁴.
            let (hi, lo) = (*v >> 64, *v & u128::from(u64::MAX));
            *v = ((hi * u128::from(factor)) << 32) + ((lo * u128::from(factor)) >> 32);
        }
        self.0.retain(|_, v| *v > 0);
    }
}

/// `2^(-1/2^(j+1))` in Q32 (2³² is one), for j = 0..16: the factors of
/// the fraction bits of an exponent. Computed by integer square roots, so
/// every build and machine has the same table.
const HALVINGS: [u64; 16] = {
    let mut t = [0u64; 16];
    // 2^(-1/2) · 2³² = 2^31.5 = √(2⁶³).
    t[0] = (1u128 << 63).isqrt() as u64;
    let mut j = 1;
    while j < 16 {
        t[j] = ((t[j - 1] as u128) << 32).isqrt() as u64;
        j += 1;
    }
    t
};

/// `2^(-num/den)` in Q32 (2³² is one), rounded down, in integers only:
/// the decay of usage (`num` seconds of age, `den` seconds of half-life)
/// and the fair-share factor. The exponent's fraction is resolved to
/// 1/65536; `den == 0` is an infinite exponent (0).
pub fn exp2_neg_q32(num: u128, den: u128) -> u64 {
    if den == 0 {
        return 0;
    }
    let whole = num / den;
    if whole >= 33 {
        return 0;
    }
    let frac = ((num % den) << 16) / den;
    let mut r: u128 = 1u128 << (32 - whole as u32);
    for (j, c) in HALVINGS.iter().enumerate() {
        if frac & (1 << (15 - j)) != 0 {
            r = (r * u128::from(*c)) >> 32;
        }
    }
    r as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_two_are_exact_and_fractions_close() {
        assert_eq!(exp2_neg_q32(0, 5), 1 << 32);
        assert_eq!(exp2_neg_q32(5, 5), 1 << 31);
        assert_eq!(exp2_neg_q32(15, 5), 1 << 29);
        assert_eq!(exp2_neg_q32(40 * 7, 7), 0);
        assert_eq!(exp2_neg_q32(1, 0), 0);
        // 2^-0.5 and 2^-1.25, against their real values to 1e-7.
        for (num, den, want) in [
            (1u128, 2u128, std::f64::consts::FRAC_1_SQRT_2),
            (5, 4, 0.420_448_208),
        ] {
            let got = exp2_neg_q32(num, den) as f64 / 4_294_967_296.0;
            assert!(
                (got - want).abs() < 1e-7,
                "2^-({num}/{den}) = {got}, want {want}"
            );
        }
        // Never rises with the exponent.
        let mut last = u64::MAX;
        for num in 0..5000u128 {
            let v = exp2_neg_q32(num, 700);
            assert!(v <= last);
            last = v;
        }
    }

    #[test]
    fn held_resources_become_resource_seconds() {
        let r = Resources::new(2000, 1 << 30, 0).with_gpus(4);
        let u = Usage::of(&r, 3600);
        assert_eq!(u.get(&ResourceName::Gpu), 4_000 * 3600);
        assert_eq!(u.get(&ResourceName::Cpu), 2_000 * 3600);
        assert_eq!(u.get(&ResourceName::Memory), (1u128 << 30) * 3600);
        assert!(Usage::of(&r, 0).is_zero());
    }

    #[test]
    fn scaling_by_one_half_halves_and_drops_zeros() {
        let mut u = Usage::new();
        u.add_to("nvidia.com/gpu", 1000);
        u.add_to("cpu", 1);
        u.add_to("memory", u128::MAX / 3);
        u.scale_q32(1 << 31);
        assert_eq!(u.get(&ResourceName::Gpu), 500);
        assert_eq!(u.get(&ResourceName::Cpu), 0);
        assert_eq!(u.iter().count(), 2);
        assert_eq!(u.get(&ResourceName::Memory), u128::MAX / 6);
    }
}
