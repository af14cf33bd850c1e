//! What a queue used over time: resource·seconds per resource.
//!
//! The unit of each entry is the resource's unit in [`Resources`]
//! (millicores, bytes, milli-GPU, counts) times seconds, as a `u128`: a
//! petabyte of memory held for a year is 3·10²² byte·seconds, past `u64`.
//! Decayed usage (older seconds count less) has the same unit.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::resources::{GPU_RESOURCE, ResourceName, Resources};

/// Resource·seconds by Kubernetes resource name; zero entries are never
/// stored. CPU, memory and GPUs are fields (no allocation to copy or add
/// them: the usage history clones and sums one per queue and user); other
/// resources are kept by name. Iterated, compared and serialized as one
/// map ordered by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Usage {
    cpu: u128,
    memory: u128,
    gpu: u128,
    extended: BTreeMap<String, u128>,
}

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
        self.add_held_scaled(r, u128::from(seconds), 1);
    }

    /// Adds `r` held for `ms` milliseconds (each resource rounded down to
    /// whole resource·seconds).
    pub fn add_held_ms(&mut self, r: &Resources, ms: u128) {
        self.add_held_scaled(r, ms, 1000);
    }

    /// Adds `r · num / den` for each resource of `r`.
    fn add_held_scaled(&mut self, r: &Resources, num: u128, den: u128) {
        let f = |v: u64| u128::from(v) * num / den;
        self.cpu = self.cpu.saturating_add(f(r.cpu));
        self.memory = self.memory.saturating_add(f(r.memory));
        self.gpu = self.gpu.saturating_add(f(r.gpu));
        for (name, v) in r.iter() {
            if let ResourceName::Extended(n) = &name {
                self.add_to(n, f(v));
            }
        }
    }

    fn slot(&mut self, name: &str) -> Option<&mut u128> {
        match name {
            "cpu" => Some(&mut self.cpu),
            "memory" => Some(&mut self.memory),
            GPU_RESOURCE => Some(&mut self.gpu),
            _ => None,
        }
    }

    /// Adds `v` resource·seconds of resource `name`.
    pub fn add_to(&mut self, name: &str, v: u128) {
        if v == 0 {
            return;
        }
        if let Some(e) = self.slot(name) {
            *e = e.saturating_add(v);
            return;
        }
        // The name is copied only the first time (most calls add to a
        // resource the entry has).
        match self.extended.get_mut(name) {
            Some(e) => *e = e.saturating_add(v),
            None => {
                self.extended.insert(name.to_string(), v);
            }
        }
    }

    pub fn add(&mut self, other: &Usage) {
        self.cpu = self.cpu.saturating_add(other.cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.gpu = self.gpu.saturating_add(other.gpu);
        for (k, v) in &other.extended {
            self.add_to(k, *v);
        }
    }

    pub fn get(&self, name: &ResourceName) -> u128 {
        match name {
            ResourceName::Cpu => self.cpu,
            ResourceName::Memory => self.memory,
            ResourceName::Gpu => self.gpu,
            ResourceName::Extended(n) => self.extended.get(n.as_str()).copied().unwrap_or(0),
        }
    }

    /// (resource name, resource·seconds) of the non-zero entries, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u128)> {
        // "cpu" < "memory" < "nvidia.com/gpu": merged with the others by name.
        let fixed = [
            ("cpu", self.cpu),
            ("memory", self.memory),
            (GPU_RESOURCE, self.gpu),
        ];
        let mut fixed = fixed.into_iter().filter(|(_, v)| *v > 0).peekable();
        let mut ext = self
            .extended
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .peekable();
        std::iter::from_fn(move || match (fixed.peek(), ext.peek()) {
            (Some(f), Some(e)) if e.0 < f.0 => ext.next(),
            (Some(_), _) => fixed.next(),
            (None, _) => ext.next(),
        })
    }

    pub fn is_zero(&self) -> bool {
        self.cpu == 0 && self.memory == 0 && self.gpu == 0 && self.extended.is_empty()
    }

    /// Every entry times `factor / 2³²`, rounded down (the decay step;
    /// factors above one, 2³², are taken as one).
    pub fn scale_q32(&mut self, factor: u64) {
        let factor = factor.min(1 << 32);
        let scale = |v: &mut u128| {
            // Split to stay inside u128: v < 2¹²⁸, factor < 2⁶⁴.
            let (hi, lo) = (*v >> 64, *v & u128::from(u64::MAX));
            *v = ((hi * u128::from(factor)) << 32) + ((lo * u128::from(factor)) >> 32);
        };
        scale(&mut self.cpu);
        scale(&mut self.memory);
        scale(&mut self.gpu);
        for v in self.extended.values_mut() {
            scale(v);
        }
        self.extended.retain(|_, v| *v > 0);
    }
}

/// Ordered as the map of its entries by name (as it serializes).
impl Ord for Usage {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.iter().cmp(other.iter())
    }
}

impl PartialOrd for Usage {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Serialize for Usage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Usage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = BTreeMap::<String, u128>::deserialize(d)?;
        let mut u = Usage::new();
        for (k, v) in map {
            u.add_to(&k, v);
        }
        Ok(u)
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
    fn entries_iterate_serialize_and_compare_as_one_map_by_name() {
        let mut u = Usage::new();
        u.add_to("zz.io/x", 7);
        u.add_to(GPU_RESOURCE, 3);
        u.add_to("amd.com/gpu", 5);
        u.add_to("example.com/nic", 11);
        u.add_to("cpu", 2);
        let names: Vec<&str> = u.iter().map(|(k, _)| k).collect();
        assert_eq!(
            names,
            [
                "amd.com/gpu",
                "cpu",
                "example.com/nic",
                GPU_RESOURCE,
                "zz.io/x"
            ]
        );
        let json = serde_json::to_string(&u).expect("serializes");
        assert_eq!(
            json,
            r#"{"amd.com/gpu":5,"cpu":2,"example.com/nic":11,"nvidia.com/gpu":3,"zz.io/x":7}"#
        );
        let back: Usage = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, u);
        // Zero entries read are not kept.
        let z: Usage = serde_json::from_str(r#"{"cpu":0,"a":0}"#).expect("parses");
        assert!(z.is_zero());
        // Ordered as the maps were: by the first differing (name, value).
        let mut a = Usage::new();
        a.add_to("cpu", 1);
        let mut b = Usage::new();
        b.add_to("amd.com/gpu", 1);
        assert!(b < a, "amd.com/gpu sorts before cpu");
        let mut c = a.clone();
        c.add_to("memory", 1);
        assert!(a < c, "a prefix sorts first");
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
