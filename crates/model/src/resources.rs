//! Integer resource vectors.
//!
//! Units are fixed and explicit: CPU in millicores, memory in bytes, GPUs in
//! milli-GPU (one whole device = 1000), every other (extended) resource as an
//! integer count under its Kubernetes name. A resource that is not mentioned
//! is zero. There are no floats anywhere in accounting.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The Kubernetes name of the GPU resource.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// Milli-GPU in one whole device.
pub const MILLI_PER_GPU: u64 = 1000;

/// The name of one resource dimension.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceName {
    /// `cpu`, in millicores.
    Cpu,
    /// `memory`, in bytes.
    Memory,
    /// `nvidia.com/gpu`, in milli-GPU.
    Gpu,
    /// Any other resource, by its Kubernetes name, as an integer count.
    Extended(String),
}

impl ResourceName {
    /// Parses a Kubernetes resource name.
    pub fn parse(name: &str) -> ResourceName {
        match name {
            "cpu" => ResourceName::Cpu,
            "memory" => ResourceName::Memory,
            GPU_RESOURCE => ResourceName::Gpu,
            other => ResourceName::Extended(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            ResourceName::Cpu => "cpu",
            ResourceName::Memory => "memory",
            ResourceName::Gpu => GPU_RESOURCE,
            ResourceName::Extended(s) => s,
        }
    }

    /// Formats an amount of this resource for people: cores, GiB, GPUs.
    pub fn format_amount(&self, amount: u64) -> String {
        match self {
            ResourceName::Cpu => format_fixed(amount, 1000),
            ResourceName::Gpu => format_fixed(amount, MILLI_PER_GPU),
            ResourceName::Memory => format_bytes(amount),
            ResourceName::Extended(_) => amount.to_string(),
        }
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ResourceName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ResourceName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(ResourceName::parse(&s))
    }
}

/// `amount / unit` with up to three decimals, trailing zeros trimmed.
fn format_fixed(amount: u64, unit: u64) -> String {
    let whole = amount / unit;
    let frac = amount % unit;
    if frac == 0 {
        return whole.to_string();
    }
    let mut s = format!("{whole}.{:03}", frac * 1000 / unit);
    while s.ends_with('0') {
        s.pop();
    }
    s
}

fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    for (suffix, unit) in UNITS {
        if bytes >= unit {
            return format!("{}{suffix}", format_fixed(bytes * 1000 / unit, 1000));
        }
    }
    bytes.to_string()
}

/// A vector of resource amounts. Missing entries are zero.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// Millicores.
    pub cpu: u64,
    /// Bytes.
    pub memory: u64,
    /// Milli-GPU.
    pub gpu: u64,
    /// Other resources by name; zero entries are never stored.
    extended: BTreeMap<String, u64>,
}

impl Resources {
    pub const fn new(cpu_milli: u64, memory_bytes: u64, gpu_milli: u64) -> Self {
        Resources {
            cpu: cpu_milli,
            memory: memory_bytes,
            gpu: gpu_milli,
            extended: BTreeMap::new(),
        }
    }

    pub fn zero() -> Self {
        Resources::default()
    }

    /// Builder: whole GPUs.
    pub fn with_gpus(mut self, gpus: u64) -> Self {
        self.gpu = gpus * MILLI_PER_GPU;
        self
    }

    pub fn get(&self, name: &ResourceName) -> u64 {
        match name {
            ResourceName::Cpu => self.cpu,
            ResourceName::Memory => self.memory,
            ResourceName::Gpu => self.gpu,
            ResourceName::Extended(n) => self.extended.get(n).copied().unwrap_or(0),
        }
    }

    pub fn set(&mut self, name: &ResourceName, value: u64) {
        match name {
            ResourceName::Cpu => self.cpu = value,
            ResourceName::Memory => self.memory = value,
            ResourceName::Gpu => self.gpu = value,
            ResourceName::Extended(n) => {
                if value == 0 {
                    self.extended.remove(n);
                } else {
                    self.extended.insert(n.clone(), value);
                }
            }
        }
    }

    /// Every dimension with a non-zero amount, in a fixed order
    /// (cpu, memory, gpu, then extended names sorted).
    pub fn iter(&self) -> impl Iterator<Item = (ResourceName, u64)> + '_ {
        [
            (ResourceName::Cpu, self.cpu),
            (ResourceName::Memory, self.memory),
            (ResourceName::Gpu, self.gpu),
        ]
        .into_iter()
        .chain(
            self.extended
                .iter()
                .map(|(k, v)| (ResourceName::Extended(k.clone()), *v)),
        )
        .filter(|(_, v)| *v > 0)
    }

    /// Names of the non-zero dimensions.
    pub fn names(&self) -> impl Iterator<Item = ResourceName> + '_ {
        self.iter().map(|(n, _)| n)
    }

    pub fn is_zero(&self) -> bool {
        self.cpu == 0 && self.memory == 0 && self.gpu == 0 && self.extended.is_empty()
    }

    /// Saturating element-wise addition.
    pub fn add(&mut self, other: &Resources) {
        self.cpu = self.cpu.saturating_add(other.cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.gpu = self.gpu.saturating_add(other.gpu);
        if other.extended.is_empty() {
            return;
        }
        for (k, v) in &other.extended {
            let e = self.extended.entry(k.clone()).or_insert(0);
            *e = e.saturating_add(*v);
        }
    }

    /// Element-wise subtraction clamped at zero.
    pub fn saturating_sub(&mut self, other: &Resources) {
        self.cpu = self.cpu.saturating_sub(other.cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.gpu = self.gpu.saturating_sub(other.gpu);
        for (k, v) in &other.extended {
            if let Some(e) = self.extended.get_mut(k) {
                *e = e.saturating_sub(*v);
                if *e == 0 {
                    self.extended.remove(k);
                }
            }
        }
    }

    /// [`saturating_sub`](Self::saturating_sub) of `other` with its GPU
    /// amount taken as `gpu` (what a pod is charged on its devices),
    /// without copying `other`.
    pub fn saturating_sub_charged(&mut self, other: &Resources, gpu: u64) {
        self.cpu = self.cpu.saturating_sub(other.cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.gpu = self.gpu.saturating_sub(gpu);
        for (k, v) in &other.extended {
            if let Some(e) = self.extended.get_mut(k) {
                *e = e.saturating_sub(*v);
                if *e == 0 {
                    self.extended.remove(k);
                }
            }
        }
    }

    /// [`add`](Self::add) of `other` with its GPU amount taken as `gpu`,
    /// then the element-wise [`min`](Self::min) with `cap`, without
    /// copying either.
    pub fn add_charged_capped(&mut self, other: &Resources, gpu: u64, cap: &Resources) {
        self.cpu = self.cpu.saturating_add(other.cpu).min(cap.cpu);
        self.memory = self.memory.saturating_add(other.memory).min(cap.memory);
        self.gpu = self.gpu.saturating_add(gpu).min(cap.gpu);
        if self.extended.is_empty() && other.extended.is_empty() {
            return;
        }
        for (k, v) in &other.extended {
            let e = self.extended.entry(k.clone()).or_insert(0);
            *e = e.saturating_add(*v);
        }
        self.extended.retain(|k, v| {
            *v = (*v).min(cap.extended.get(k).copied().unwrap_or(0));
            *v > 0
        });
    }

    /// Element-wise multiplication by an integer.
    pub fn scaled(&self, factor: u64) -> Resources {
        let mut out = Resources::new(
            self.cpu.saturating_mul(factor),
            self.memory.saturating_mul(factor),
            self.gpu.saturating_mul(factor),
        );
        for (k, v) in &self.extended {
            if *v > 0 && factor > 0 {
                out.extended.insert(k.clone(), v.saturating_mul(factor));
            }
        }
        out
    }

    /// True when every dimension of `self` is at most the same dimension of `other`.
    pub fn fits_in(&self, other: &Resources) -> bool {
        self.cpu <= other.cpu
            && self.memory <= other.memory
            && self.gpu <= other.gpu
            && self
                .extended
                .iter()
                .all(|(k, v)| *v <= other.extended.get(k).copied().unwrap_or(0))
    }

    /// [`fits_in`](Self::fits_in) ignoring the GPU dimension (for shares
    /// whose GPU fit is decided device by device).
    pub fn fits_in_except_gpu(&self, other: &Resources) -> bool {
        self.cpu <= other.cpu
            && self.memory <= other.memory
            && self
                .extended
                .iter()
                .all(|(k, v)| *v <= other.extended.get(k).copied().unwrap_or(0))
    }

    /// The first dimension (in `iter` order) where `self` exceeds `other`.
    pub fn first_excess(&self, other: &Resources) -> Option<ResourceName> {
        self.iter().find(|(n, v)| *v > other.get(n)).map(|(n, _)| n)
    }

    /// Element-wise minimum.
    pub fn min(&self, other: &Resources) -> Resources {
        let mut out = Resources::new(
            self.cpu.min(other.cpu),
            self.memory.min(other.memory),
            self.gpu.min(other.gpu),
        );
        for (k, v) in &self.extended {
            let m = (*v).min(other.extended.get(k).copied().unwrap_or(0));
            if m > 0 {
                out.extended.insert(k.clone(), m);
            }
        }
        out
    }

    /// Whole GPUs requested, if the GPU request is a whole number of devices.
    pub fn whole_gpus(&self) -> Option<u64> {
        self.gpu
            .is_multiple_of(MILLI_PER_GPU)
            .then_some(self.gpu / MILLI_PER_GPU)
    }
}

impl fmt::Display for Resources {
    /// `cpu=4, memory=16Gi, nvidia.com/gpu=8`; `0` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (name, v) in self.iter() {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{name}={}", name.format_amount(v))?;
        }
        if first {
            f.write_str("0")?;
        }
        Ok(())
    }
}

impl Serialize for Resources {
    /// Serialized as a map from resource name to integer amount in the
    /// documented unit (millicores, bytes, milli-GPU).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let entries: Vec<_> = self.iter().collect();
        let mut m = s.serialize_map(Some(entries.len()))?;
        for (k, v) in entries {
            m.serialize_entry(k.as_str(), &v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Resources {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = BTreeMap::<String, u64>::deserialize(d)?;
        let mut r = Resources::zero();
        for (k, v) in m {
            r.set(&ResourceName::parse(&k), v);
        }
        Ok(r)
    }
}

/// Hard caps per resource. A resource with no entry is **unlimited**;
/// `Limits::unlimited()` caps nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Limits(BTreeMap<ResourceName, u64>);

impl Limits {
    pub fn unlimited() -> Self {
        Limits(BTreeMap::new())
    }
    pub fn cap(mut self, name: ResourceName, value: u64) -> Self {
        self.0.insert(name, value);
        self
    }
    pub fn set(&mut self, name: ResourceName, value: u64) {
        self.0.insert(name, value);
    }
    /// The cap on `name`, or `None` when unlimited.
    pub fn get(&self, name: &ResourceName) -> Option<u64> {
        self.0.get(name).copied()
    }
    pub fn is_unlimited(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = (&ResourceName, u64)> {
        self.0.iter().map(|(k, v)| (k, *v))
    }
    /// `value` clamped to the caps.
    pub fn clamp(&self, value: &Resources) -> Resources {
        let mut out = value.clone();
        for (k, cap) in self.iter() {
            if out.get(k) > cap {
                out.set(k, cap);
            }
        }
        out
    }
    /// The first capped resource where `value` exceeds the cap:
    /// `(name, cap)`.
    pub fn first_exceeded(&self, value: &Resources) -> Option<(ResourceName, u64)> {
        self.iter()
            .find(|(k, cap)| value.get(k) > *cap)
            .map(|(k, cap)| (k.clone(), cap))
    }
}

/// Compares `a/b` with `c/d` exactly, for non-negative integers, where a zero
/// denominator with a non-zero numerator is +infinity and `0/0` is zero.
pub fn cmp_ratio(a: u64, b: u64, c: u64, d: u64) -> Ordering {
    let inf_l = b == 0 && a > 0;
    let inf_r = d == 0 && c > 0;
    match (inf_l, inf_r) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    let l = if b == 0 { 0 } else { a as u128 * d as u128 };
    let r = if d == 0 { 0 } else { c as u128 * b as u128 };
    // With b == 0 (and a == 0) the left ratio is 0; same on the right.
    match (b == 0, d == 0) {
        (true, true) => Ordering::Equal,
        (true, false) => 0u128.cmp(&(c as u128)),
        (false, true) => (a as u128).cmp(&0),
        (false, false) => l.cmp(&r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arb_resources() -> impl proptest::strategy::Strategy<Value = Resources> {
        use proptest::prelude::*;
        (0u64..5000, 0u64..5000, 0u64..9000, 0u64..4, 0u64..4).prop_map(|(c, m, g, a, b)| {
            let mut r = Resources::new(c, m, g);
            r.set(&ResourceName::parse("rdma/ib"), a);
            r.set(&ResourceName::parse("example.com/fpga"), b);
            r
        })
    }

    proptest::proptest! {
        #[test]
        fn charged_forms_match_copy_then_operate(
            a in arb_resources(), b in arb_resources(), cap in arb_resources(), gpu in 0u64..9000,
        ) {
            let mut charged = b.clone();
            charged.gpu = gpu;
            let mut want = a.clone();
            want.saturating_sub(&charged);
            let mut got = a.clone();
            got.saturating_sub_charged(&b, gpu);
            proptest::prop_assert_eq!(&got, &want);
            let mut want = a.clone();
            want.add(&charged);
            let want = want.min(&cap);
            let mut got = a.clone();
            got.add_charged_capped(&b, gpu, &cap);
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn missing_is_zero_and_zero_is_not_stored() {
        let mut r = Resources::zero();
        let rdma = ResourceName::parse("rdma/ib");
        assert_eq!(r.get(&rdma), 0);
        r.set(&rdma, 4);
        assert_eq!(r.get(&rdma), 4);
        r.set(&rdma, 0);
        assert!(r.is_zero());
    }

    #[test]
    fn add_sub_fit() {
        let mut a = Resources::new(1000, 1 << 30, 0).with_gpus(2);
        let b = Resources::new(500, 1 << 29, 1000);
        assert!(b.fits_in(&a));
        a.saturating_sub(&b);
        assert_eq!(a, Resources::new(500, 1 << 29, 1000));
        a.add(&b);
        assert_eq!(a.gpu, 2000);
        assert_eq!(
            b.first_excess(&Resources::new(400, 1 << 30, 1000)),
            Some(ResourceName::Cpu)
        );
    }

    #[test]
    fn display_is_human() {
        let mut r = Resources::new(2500, 3 << 30, 8000);
        r.set(&ResourceName::parse("rdma/ib"), 2);
        assert_eq!(
            r.to_string(),
            "cpu=2.5, memory=3Gi, nvidia.com/gpu=8, rdma/ib=2"
        );
        assert_eq!(Resources::zero().to_string(), "0");
        assert_eq!(ResourceName::Gpu.format_amount(500), "0.5");
    }

    #[test]
    fn limits_absent_is_unlimited() {
        let l = Limits::unlimited().cap(ResourceName::Gpu, 8000);
        assert_eq!(l.get(&ResourceName::Cpu), None);
        let v = Resources::new(u64::MAX / 2, 0, 9000);
        assert_eq!(l.first_exceeded(&v), Some((ResourceName::Gpu, 8000)));
        assert_eq!(l.clamp(&v).gpu, 8000);
        assert_eq!(l.clamp(&v).cpu, u64::MAX / 2);
    }

    #[test]
    fn ratio_comparison() {
        assert_eq!(cmp_ratio(1, 2, 2, 4), Ordering::Equal);
        assert_eq!(cmp_ratio(1, 3, 1, 2), Ordering::Less);
        assert_eq!(cmp_ratio(1, 0, 1000, 1), Ordering::Greater);
        assert_eq!(cmp_ratio(0, 0, 0, 5), Ordering::Equal);
        assert_eq!(cmp_ratio(0, 0, 1, 5), Ordering::Less);
    }
}
