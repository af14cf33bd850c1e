//! The peers' `Queue` kinds, read as Trainyard queues so that teams moving
//! from KAI-Scheduler or Volcano keep their objects.
//!
//! **KAI** (`scheduling.run.ai/v2`): per resource (`gpu`, `cpu`, `memory`)
//! a `quota`, a `limit` and an `overQuotaWeight`, in KAI's units (GPUs as
//! fractions of a device, CPU in millicores, memory in megabytes of 10⁶
//! bytes).
//!
//! | KAI | Trainyard |
//! |---|---|
//! | `spec.parentQueue` | `spec.parent` |
//! | `spec.priority` (absent: 100, KAI's default) | `spec.priority` |
//! | `resources.gpu.quota` | `quota.nvidia.com/gpu` (fractions become milli-GPUs) |
//! | `resources.cpu.quota` | `quota.cpu` (millicores) |
//! | `resources.memory.quota` | `quota.memory` (megabytes) |
//! | `limit: -1` | unlimited |
//! | `limit` ≥ 0 | the limit, raised to the quota if below it (KAI's 0 is a hard cap of nothing beyond the quota); absent counts as 0, as in KAI |
//! | `quota: -1` (unlimited quota) | no guarantee (0), with a warning: Trainyard has no unlimited quota |
//! | `overQuotaWeight` | `overQuotaWeight`, from `gpu` (Trainyard has one weight per queue; a different cpu or memory weight is warned about), rounded to a whole number |
//! | `preemptMinRuntime`, `reclaimMinRuntime` | `minRuntime`: the longer of the two (Trainyard has one), warned about when they differ |
//! | `displayName` | not mapped (warned) |
//!
//! **Volcano** (`scheduling.volcano.sh/v1beta1`):
//!
//! | Volcano | Trainyard |
//! |---|---|
//! | `spec.parent` (`root` or absent: top level) | `spec.parent` |
//! | `spec.weight` (absent: 1) | `spec.overQuotaWeight` |
//! | `spec.deserved` | `spec.quota` |
//! | `spec.guarantee.resource` | `spec.quota` when `deserved` is absent; otherwise not mapped (warned) |
//! | `spec.capability` | `spec.limit` (absent resources unlimited, as in Volcano) |
//! | `spec.priority` | `spec.priority` |
//! | `spec.reclaimable: false` | not mapped (warned): Trainyard decides per job (`preemptible`), not per queue |
//! | `spec.type`, `spec.affinity`, `spec.extendClusters` | not mapped (warned) |
//!
//! Volcano's own `root` queue is the top of its tree; Trainyard's tree has
//! no such object, so a Volcano `Queue` named `root` is read as nothing
//! (with a warning) and its children become top-level queues.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::duration::RawDuration;
use crate::quantity::RawQuantity;
use crate::queue::{LimitValue, Queue, QueueSpecDoc};
use crate::{ApiError, ObjectMeta, from_value};

/// `apiVersion` of KAI-Scheduler Queues.
pub const KAI_QUEUE_API_VERSION: &str = "scheduling.run.ai/v2";
/// `apiVersion` of Volcano Queues.
pub const VOLCANO_QUEUE_API_VERSION: &str = "scheduling.volcano.sh/v1beta1";

/// KAI's default queue priority.
const KAI_DEFAULT_PRIORITY: i32 = 100;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KaiQueue {
    #[serde(default, deserialize_with = "crate::de::null_default")]
    metadata: ObjectMeta,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    spec: KaiSpec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KaiSpec {
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    parent_queue: Option<String>,
    #[serde(default)]
    priority: Option<i32>,
    #[serde(default)]
    preempt_min_runtime: Option<RawDuration>,
    #[serde(default)]
    reclaim_min_runtime: Option<RawDuration>,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    resources: KaiResources,
}

#[derive(Default, Deserialize)]
struct KaiResources {
    #[serde(default)]
    gpu: Option<KaiResource>,
    #[serde(default)]
    cpu: Option<KaiResource>,
    #[serde(default)]
    memory: Option<KaiResource>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KaiResource {
    #[serde(default)]
    quota: Option<RawQuantity>,
    #[serde(default)]
    limit: Option<RawQuantity>,
    #[serde(default)]
    over_quota_weight: Option<RawQuantity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolcanoQueue {
    #[serde(default, deserialize_with = "crate::de::null_default")]
    metadata: ObjectMeta,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    spec: VolcanoSpec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolcanoSpec {
    #[serde(default)]
    weight: Option<u32>,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    capability: BTreeMap<String, RawQuantity>,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    deserved: BTreeMap<String, RawQuantity>,
    #[serde(default)]
    guarantee: Option<VolcanoGuarantee>,
    #[serde(default)]
    reclaimable: Option<bool>,
    #[serde(default)]
    parent: Option<String>,
    #[serde(default)]
    priority: Option<i32>,
    #[serde(default, rename = "type")]
    queue_type: Option<Value>,
    #[serde(default)]
    affinity: Option<Value>,
    #[serde(default)]
    extend_clusters: Option<Value>,
}

#[derive(Default, Deserialize)]
struct VolcanoGuarantee {
    #[serde(default, deserialize_with = "crate::de::null_default")]
    resource: BTreeMap<String, RawQuantity>,
}

/// A peer's Queue as ours, with a warning for every field that does not
/// map (each naming the field). `None` for Volcano's `root` queue.
pub(crate) fn read(
    value: &Value,
    object: &str,
    version: &str,
) -> Result<Option<(Queue, Vec<String>)>, ApiError> {
    if version == KAI_QUEUE_API_VERSION {
        let q: KaiQueue = from_value(value, object)?;
        Ok(Some(kai(q, version)))
    } else {
        let q: VolcanoQueue = from_value(value, object)?;
        Ok(volcano(q, version))
    }
}

fn queue(metadata: ObjectMeta, version: &str, spec: QueueSpecDoc) -> Queue {
    Queue {
        api_version: version.to_string(),
        kind: "Queue".to_string(),
        metadata,
        spec,
        status: None,
        warnings: Vec::new(),
    }
}

/// `-1` (or `-1.0`) as KAI writes "unlimited".
fn is_minus_one(q: &RawQuantity) -> bool {
    q.0.trim().parse::<f64>().is_ok_and(|v| v == -1.0)
}

/// A KAI amount in KAI's unit as a Kubernetes quantity: `suffix` is `m`
/// for millicores, `M` for megabytes, empty for GPUs.
fn kai_amount(q: &RawQuantity, suffix: &str) -> RawQuantity {
    RawQuantity(format!("{}{suffix}", q.0.trim()))
}

fn kai(q: KaiQueue, version: &str) -> (Queue, Vec<String>) {
    let mut warnings = Vec::new();
    let spec = q.spec;
    if let Some(d) = spec.display_name.filter(|d| !d.is_empty()) {
        warnings.push(format!(
            "spec.displayName ({d:?}) is not mapped: Trainyard names a queue by metadata.name"
        ));
    }
    let mut out = QueueSpecDoc {
        parent: spec.parent_queue.filter(|p| !p.is_empty()),
        priority: spec.priority.unwrap_or(KAI_DEFAULT_PRIORITY),
        ..QueueSpecDoc::default()
    };
    let resources = [
        ("gpu", "nvidia.com/gpu", "", spec.resources.gpu),
        ("cpu", "cpu", "m", spec.resources.cpu),
        ("memory", "memory", "M", spec.resources.memory),
    ];
    let mut gpu_weight: Option<RawQuantity> = None;
    for (kai_name, name, suffix, r) in resources {
        let r = r.unwrap_or_default();
        let field = |f: &str| format!("spec.resources.{kai_name}.{f}");
        let quota = match &r.quota {
            Some(q) if is_minus_one(q) => {
                warnings.push(format!(
                    "{}: -1 (unlimited quota) is not mapped: Trainyard has no unlimited quota; read as no guarantee (0)",
                    field("quota")
                ));
                None
            }
            Some(q) => Some(kai_amount(q, suffix)),
            None => None,
        };
        if let Some(q) = &quota {
            out.quota.insert(name.to_string(), q.clone());
        }
        let limit = match &r.limit {
            Some(l) if is_minus_one(l) => LimitValue::Unlimited,
            Some(l) => LimitValue::Amount(kai_amount(l, suffix)),
            None => {
                warnings.push(format!(
                    "{} is absent: KAI reads it as 0 (nothing beyond the quota); set -1 for no limit",
                    field("limit")
                ));
                LimitValue::Amount(RawQuantity("0".into()))
            }
        };
        let limit = match (limit, &quota) {
            // KAI's cap below the quota: the quota still holds.
            (LimitValue::Amount(l), Some(q)) if below(&l, q) => LimitValue::Amount(q.clone()),
            (LimitValue::Amount(l), None) if below(&l, &RawQuantity("0".into())) => {
                LimitValue::Amount(RawQuantity("0".into()))
            }
            (l, _) => l,
        };
        out.limit.insert(name.to_string(), limit);
        match (kai_name, r.over_quota_weight) {
            ("gpu", w) => gpu_weight = w,
            (_, Some(w)) => {
                let gpu = gpu_weight.as_ref().map_or("1", |g| g.0.as_str());
                if w.0.trim().parse::<f64>().ok() != gpu.trim().parse::<f64>().ok() {
                    warnings.push(format!(
                        "{} ({}) is not mapped: Trainyard has one over-quota weight per queue, taken from spec.resources.gpu.overQuotaWeight ({gpu})",
                        field("overQuotaWeight"),
                        w.0
                    ));
                }
            }
            (_, None) => {}
        }
    }
    if let Some(w) = gpu_weight {
        match w.0.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => {
                let rounded = v.round();
                if rounded != v {
                    warnings.push(format!(
                        "spec.resources.gpu.overQuotaWeight ({}) is rounded to {rounded}: Trainyard weights are whole numbers",
                        w.0
                    ));
                }
                // In range: finite, non-negative, and clamped to u32 below.
                out.over_quota_weight = rounded.min(f64::from(u32::MAX)) as u32;
            }
            _ => warnings.push(format!(
                "spec.resources.gpu.overQuotaWeight ({}) is not a non-negative number; read as 1",
                w.0
            )),
        }
    }
    out.min_runtime = match (spec.preempt_min_runtime, spec.reclaim_min_runtime) {
        (None, None) => None,
        (Some(d), None) | (None, Some(d)) => Some(d),
        (Some(p), Some(r)) => {
            let (ps, rs) = (p.seconds().ok(), r.seconds().ok());
            if ps != rs {
                warnings.push(format!(
                    "spec.preemptMinRuntime ({p}) and spec.reclaimMinRuntime ({r}) differ: Trainyard has one minRuntime; the longer is used"
                ));
            }
            Some(if rs > ps { r } else { p })
        }
    };
    (queue(q.metadata, version, out), warnings)
}

/// Whether `a` is a smaller amount than `b` (both KAI-converted texts);
/// unparsable texts are left for validation to report.
fn below(a: &RawQuantity, b: &RawQuantity) -> bool {
    match (a.parse(), b.parse()) {
        (Ok(a), Ok(b)) => {
            matches!(a.to_milli_ceil(), Ok(x) if b.to_milli_ceil().is_ok_and(|y| x < y))
        }
        _ => false,
    }
}

fn volcano(q: VolcanoQueue, version: &str) -> Option<(Queue, Vec<String>)> {
    if q.metadata.name == "root" {
        return None;
    }
    let mut warnings = Vec::new();
    let spec = q.spec;
    let quota = if !spec.deserved.is_empty() {
        if let Some(g) = spec.guarantee.as_ref().filter(|g| !g.resource.is_empty())
            && g.resource != spec.deserved
        {
            warnings.push(
                "spec.guarantee.resource is not mapped: spec.deserved is the quota; Trainyard reserves nothing beyond it".to_string(),
            );
        }
        spec.deserved
    } else {
        spec.guarantee.map(|g| g.resource).unwrap_or_default()
    };
    if spec.reclaimable == Some(false) {
        warnings.push(
            "spec.reclaimable: false is not mapped: Trainyard decides per job whether it may be evicted (PodGroup spec.preemptible)".to_string(),
        );
    }
    for (field, present) in [
        ("spec.type", spec.queue_type.is_some_and(|v| !v.is_null())),
        ("spec.affinity", spec.affinity.is_some_and(|v| !v.is_null())),
        (
            "spec.extendClusters",
            spec.extend_clusters.is_some_and(|v| !v.is_null()),
        ),
    ] {
        if present {
            warnings.push(format!("{field} is not mapped"));
        }
    }
    let out = QueueSpecDoc {
        parent: spec.parent.filter(|p| !p.is_empty() && p != "root"),
        priority: spec.priority.unwrap_or(0),
        over_quota_weight: spec.weight.unwrap_or(1),
        quota,
        limit: spec
            .capability
            .into_iter()
            .map(|(k, v)| (k, LimitValue::Amount(v)))
            .collect(),
        min_runtime: None,
        preemption_delay: None,
        default_walltime: None,
        max_walltime: None,
    };
    Some((queue(q.metadata, version, out), warnings))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::Queue;

    /// The queue as the core sees it, and the warnings, as text.
    fn read(v: serde_json::Value) -> String {
        let q = Queue::from_any(&v).expect("reads").expect("a queue");
        let spec = q.to_spec().expect("valid");
        let mut out = format!(
            "parent={:?} priority={} weight={} min_runtime={:?}\nquota={:?}\nlimit={:?}\n",
            spec.parent,
            spec.priority,
            spec.over_quota_weight,
            spec.min_runtime_seconds,
            spec.quota,
            spec.limit
        );
        for w in &q.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
        out
    }

    #[test]
    fn kai_queue_in_kai_units() {
        let got = read(json!({
            "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
            "metadata": {"name": "ml-team"},
            "spec": {
                "displayName": "ML Team",
                "parentQueue": "research",
                "preemptMinRuntime": "10m",
                "reclaimMinRuntime": "1h",
                "resources": {
                    "gpu": {"quota": 1.5, "limit": 4, "overQuotaWeight": 2},
                    "cpu": {"quota": 2000, "limit": -1, "overQuotaWeight": 3},
                    "memory": {"quota": -1, "overQuotaWeight": 2}
                }
            }
        }));
        expect_test::expect![[r#"
            parent=Some("research") priority=100 weight=2 min_runtime=Some(3600)
            quota=Resources { cpu: 2000, memory: 0, gpu: 1500, extended: {} }
            limit=Limits({Memory: 0, Gpu: 4000})
            warning: spec.displayName ("ML Team") is not mapped: Trainyard names a queue by metadata.name
            warning: spec.resources.cpu.overQuotaWeight (3) is not mapped: Trainyard has one over-quota weight per queue, taken from spec.resources.gpu.overQuotaWeight (2)
            warning: spec.resources.memory.quota: -1 (unlimited quota) is not mapped: Trainyard has no unlimited quota; read as no guarantee (0)
            warning: spec.resources.memory.limit is absent: KAI reads it as 0 (nothing beyond the quota); set -1 for no limit
            warning: spec.preemptMinRuntime (10m) and spec.reclaimMinRuntime (1h) differ: Trainyard has one minRuntime; the longer is used
        "#]]
        .assert_eq(&got);
    }

    #[test]
    fn kai_limit_below_quota_is_raised_to_it() {
        let got = read(json!({
            "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
            "metadata": {"name": "a"},
            "spec": {"resources": {
                "gpu": {"quota": 8, "limit": 0},
                "cpu": {"limit": -1}, "memory": {"limit": -1}
            }}
        }));
        assert!(got.contains("limit=Limits({Gpu: 8000})"), "{got}");
    }

    #[test]
    fn volcano_queue() {
        let got = read(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "vc"},
            "spec": {
                "parent": "root", "weight": 3, "reclaimable": false, "priority": 5,
                "guarantee": {"resource": {"nvidia.com/gpu": 2}},
                "deserved": {"nvidia.com/gpu": 4, "cpu": "32"},
                "capability": {"nvidia.com/gpu": 8, "memory": "512Gi"},
                "type": "default"
            }
        }));
        expect_test::expect![[r#"
            parent=None priority=5 weight=3 min_runtime=None
            quota=Resources { cpu: 32000, memory: 0, gpu: 4000, extended: {} }
            limit=Limits({Memory: 549755813888, Gpu: 8000})
            warning: spec.guarantee.resource is not mapped: spec.deserved is the quota; Trainyard reserves nothing beyond it
            warning: spec.reclaimable: false is not mapped: Trainyard decides per job whether it may be evicted (PodGroup spec.preemptible)
            warning: spec.type is not mapped
        "#]]
        .assert_eq(&got);
    }

    #[test]
    fn volcano_root_is_no_queue_and_guarantee_is_the_quota_without_deserved() {
        let root = json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "root"}, "spec": {"weight": 1}
        });
        assert_eq!(Queue::from_any(&root), Ok(None));
        let got = read(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": "g"},
            "spec": {"guarantee": {"resource": {"nvidia.com/gpu": 2}}}
        }));
        assert!(got.contains("gpu: 2000"), "{got}");
    }

    #[test]
    fn bad_foreign_fields_name_the_field() {
        let e = Queue::from_any(&json!({
            "apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
            "metadata": {"name": "a"},
            "spec": {"resources": {"gpu": {"quota": [1]}}}
        }))
        .expect_err("a sequence is no quota");
        assert_eq!(e.0[0].field, "spec.resources.gpu.quota", "{e}");
    }
}
