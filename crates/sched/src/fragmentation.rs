//! Fragmentation as the FGD paper measures it (Weng et al., ATC'23):
//! the expected amount of a node's free GPU that a pod drawn from the
//! cluster's *typical pod* mix could not use.
//!
//! Everything is exact integer arithmetic. A node's fragmentation is kept as
//! a numerator `Σ_t count_t × frag_t(n)` (milli-GPU × pods) over the common
//! denominator `Σ_t count_t`, so comparing two states never rounds. The
//! sigmoid the FGD score applies is evaluated by comparing against a table
//! of its inverse (see [`sigmoid_percent`]).

use std::cmp::Ordering;

use trainyard_model::Node;

/// One class of pod in the typical mix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypicalPod {
    /// CPU request, millicores.
    pub cpu: u64,
    /// Milli-GPU per device: 1..=999 for a shared pod, 1000 for whole GPUs,
    /// 0 for a CPU-only pod.
    pub gpu_milli: u16,
    /// Devices: 1 for shared pods, k for whole-GPU pods, 0 for CPU-only.
    pub devices: u32,
    /// The model constraint as written (`|`-separated, order and duplicates
    /// kept: part of the key only). Empty: any model.
    pub spec: String,
    /// Allowed models (parsed from `spec`, sorted, deduplicated).
    pub models: Vec<String>,
    /// How many pods of this class were seen.
    pub count: u64,
}

impl TypicalPod {
    /// A class from its key; `models` is derived from `spec`.
    pub fn new(cpu: u64, gpu_milli: u16, devices: u32, spec: &str, count: u64) -> TypicalPod {
        let mut models: Vec<String> = spec
            .split('|')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let spec = models.join("|");
        models.sort();
        models.dedup();
        let (gpu_milli, devices) = if gpu_milli == 0 || devices == 0 {
            (0, 0)
        } else {
            (gpu_milli, devices)
        };
        TypicalPod {
            cpu,
            gpu_milli,
            devices,
            spec,
            models,
            count,
        }
    }

    fn key_cmp(&self, other: &TypicalPod) -> Ordering {
        (self.cpu, self.gpu_milli, self.devices, &self.spec).cmp(&(
            other.cpu,
            other.gpu_milli,
            other.devices,
            &other.spec,
        ))
    }
}

/// The typical pod mix: the most frequent pod classes covering a share of
/// all pods, each weighted by its count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypicalPods {
    pods: Vec<TypicalPod>,
    total: u64,
}

/// Share of pods (percent) the typical classes must cover, as in the paper.
pub const DEFAULT_COVERAGE_PERCENT: u32 = 95;

impl TypicalPods {
    /// Builds the mix from per-class counts (classes with equal keys are
    /// merged). Classes are ordered by count, larger first, then by the
    /// larger key (CPU, milli-GPU, devices, spec); they are taken from the
    /// top until their cumulative count first reaches `coverage_percent` of
    /// all pods (the class that crosses the line is kept).
    pub fn from_classes(
        classes: impl IntoIterator<Item = TypicalPod>,
        coverage_percent: u32,
    ) -> Self {
        let mut all: Vec<TypicalPod> = classes.into_iter().filter(|c| c.count > 0).collect();
        all.sort_by(|a, b| a.key_cmp(b));
        let mut merged: Vec<TypicalPod> = Vec::with_capacity(all.len());
        for c in all {
            match merged.last_mut() {
                Some(last) if last.key_cmp(&c) == Ordering::Equal => last.count += c.count,
                _ => merged.push(c),
            }
        }
        merged.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| b.key_cmp(a)));
        let total: u64 = merged.iter().map(|c| c.count).sum();
        let need = total as u128 * coverage_percent.min(100) as u128;
        let mut cum = 0u64;
        let mut keep = 0;
        for c in &merged {
            cum += c.count;
            keep += 1;
            if cum as u128 * 100 >= need {
                break;
            }
        }
        merged.truncate(keep);
        TypicalPods {
            pods: merged,
            total: cum,
        }
    }

    pub fn pods(&self) -> &[TypicalPod] {
        &self.pods
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// The common denominator of every fragmentation numerator.
    pub fn denominator(&self) -> u64 {
        self.total.max(1)
    }

    /// Fragmentation numerator of a node in a given state: `Σ_t count_t ×
    /// frag_t`, with `frag_t` in milli-GPU. `cpu_free` is the node's free
    /// CPU and `free[j]` the free milli-GPU of device slot `j`.
    ///
    /// For each class t: a CPU-only class, a class the node's models cannot
    /// serve, or a class that does not fit (too few devices with enough free
    /// milli-GPU, or too little CPU) counts all free GPU as fragment; a class
    /// that fits counts only the devices too small for it.
    pub fn frag_numerator(&self, node: &Node, cpu_free: u64, free: &[u16]) -> u64 {
        let total_free: u64 = free.iter().map(|f| *f as u64).sum();
        if total_free == 0 {
            return 0;
        }
        let single_model = node
            .gpus
            .first()
            .map(|d| node.gpus.iter().all(|o| o.model == d.model))
            .unwrap_or(true);
        let mut sum = 0u64;
        for t in &self.pods {
            let frag = if t.gpu_milli == 0 {
                total_free
            } else if t.models.is_empty() || single_model {
                if !t.models.is_empty()
                    && !node
                        .gpus
                        .first()
                        .is_some_and(|d| t.models.contains(&d.model))
                {
                    total_free
                } else {
                    let mut fit = 0u32;
                    let mut small = 0u64;
                    for &f in free {
                        if f >= t.gpu_milli {
                            fit += 1;
                        } else {
                            small += f as u64;
                        }
                    }
                    if fit >= t.devices && cpu_free >= t.cpu {
                        small
                    } else {
                        total_free
                    }
                }
            } else {
                // Mixed models on one node: devices of other models are
                // fragment for this class.
                let mut fit = 0u32;
                let mut small = 0u64;
                for (j, &f) in free.iter().enumerate() {
                    let ok = node
                        .gpus
                        .get(j)
                        .is_some_and(|d| t.models.contains(&d.model));
                    if ok && f >= t.gpu_milli {
                        fit += 1;
                    } else {
                        small += f as u64;
                    }
                }
                if fit >= t.devices && cpu_free >= t.cpu {
                    small
                } else {
                    total_free
                }
            };
            sum += t.count * frag;
        }
        sum
    }
}

/// `logit(k / 100) × 10⁹` for k = 1..=99, rounded: σ(x) ≥ k/100 exactly
/// when x ≥ logit(k/100). Checked against `f64::ln` in the tests.
const LOGIT_NANO: [i64; 99] = [
    -4595119850,
    -3891820298,
    -3476098690,
    -3178053830,
    -2944438979,
    -2751535313,
    -2586689344,
    -2442347035,
    -2313634929,
    -2197224577,
    -2090741097,
    -1992430165,
    -1900958761,
    -1815289967,
    -1734601055,
    -1658228077,
    -1585627264,
    -1516347489,
    -1450010176,
    -1386294361,
    -1324925415,
    -1265666373,
    -1208311206,
    -1152679510,
    -1098612289,
    -1045968555,
    -994622575,
    -944461609,
    -895384047,
    -847297860,
    -800119300,
    -753771802,
    -708185058,
    -663294217,
    -619039208,
    -575364145,
    -532216814,
    -489548225,
    -447312218,
    -405465108,
    -363965377,
    -322773392,
    -281851152,
    -241162057,
    -200670695,
    -160342650,
    -120144312,
    -80042708,
    -40005335,
    0,
    40005335,
    80042708,
    120144312,
    160342650,
    200670695,
    241162057,
    281851152,
    322773392,
    363965377,
    405465108,
    447312218,
    489548225,
    532216814,
    575364145,
    619039208,
    663294217,
    708185058,
    753771802,
    800119300,
    847297860,
    895384047,
    944461609,
    994622575,
    1045968555,
    1098612289,
    1152679510,
    1208311206,
    1265666373,
    1324925415,
    1386294361,
    1450010176,
    1516347489,
    1585627264,
    1658228077,
    1734601055,
    1815289967,
    1900958761,
    1992430165,
    2090741097,
    2197224577,
    2313634929,
    2442347035,
    2586689344,
    2751535313,
    2944438979,
    3178053830,
    3476098690,
    3891820298,
    4595119850,
];

/// `⌊100 · σ(x)⌋` for `x = num / den` (den > 0), σ the logistic function,
/// computed exactly against [`LOGIT_NANO`] (so x = 0 gives exactly 50).
pub fn sigmoid_percent(num: i128, den: u64) -> u64 {
    let den = den.max(1) as i128;
    // Largest k with num/den ≥ logit(k/100), i.e. num·10⁹ ≥ den·L_k.
    let lhs = num.saturating_mul(1_000_000_000);
    let k = LOGIT_NANO.partition_point(|&l| lhs >= den.saturating_mul(l as i128));
    k as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logit_table_matches_floating_point() {
        for (i, l) in LOGIT_NANO.iter().enumerate() {
            let k = (i + 1) as f64 / 100.0;
            let want = (k / (1.0 - k)).ln() * 1e9;
            assert!((want - *l as f64).abs() < 1.0, "k={k}");
        }
        assert_eq!(sigmoid_percent(0, 1000), 50);
        assert_eq!(sigmoid_percent(-1, 1000), 49);
        for (x, den) in [
            (-131_579i128, 1_000_000u64),
            (157_895, 1_000_000),
            (421_053, 1_000_000),
            (-7_000, 1000),
            (5, 1),
        ] {
            let f = 1.0 / (1.0 + (-(x as f64) / den as f64).exp());
            assert_eq!(
                sigmoid_percent(x, den),
                (100.0 * f).floor() as u64,
                "x={x}/{den}"
            );
        }
    }
}
