//! The `Queue` document (cluster-scoped).
//!
//! ```yaml
//! apiVersion: trainyard.io/v1alpha1
//! kind: Queue
//! metadata:
//!   name: nlp
//! spec:
//!   parent: research
//!   priority: 0
//!   overQuotaWeight: 2
//!   quota: { nvidia.com/gpu: 16, cpu: 256, memory: 2Ti }
//!   limit: { nvidia.com/gpu: 32, cpu: unlimited }
//!   minRuntime: 30m     # seconds or a duration; inherited by the queues below
//! ```

use std::collections::BTreeMap;

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::de::Deserializer;
use serde::{Deserialize, Serialize, Serializer};
use trainyard_model::{Limits, QueueSpec, ResourceName, Resources};

use crate::duration::RawDuration;
use crate::names::dns1123_subdomain_problem;
use crate::quantity::RawQuantity;
use crate::status::QueueStatus;
use crate::{
    API_VERSION, ApiError, ApiErrors, ObjectMeta, check_type, describe_object, from_value,
};

/// Every `apiVersion` a `Queue` may have: ours, KAI's, Volcano's.
pub const QUEUE_API_VERSIONS: &[&str] = &[
    API_VERSION,
    crate::foreign_queue::KAI_QUEUE_API_VERSION,
    crate::foreign_queue::VOLCANO_QUEUE_API_VERSION,
];

/// A `Queue` document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Queue {
    pub api_version: String,
    pub kind: String,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    pub metadata: ObjectMeta,
    /// `spec:` with no value (null) means the defaults.
    #[serde(default, deserialize_with = "crate::de::null_default")]
    pub spec: QueueSpecDoc,
    /// Ignored (present in `kubectl get -o yaml` output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
    /// For a KAI or Volcano Queue read as ours: each field that did not
    /// map, and how it was read ([`crate::foreign_queue`]).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// `spec` of a [`Queue`]; also the spec of [`QueueResource`], the object
/// as the API serves it, from which the CRD is generated.
// The derive takes one `printcolumn(...)` per column, whose keys repeat.
#[allow(clippy::duplicated_attributes)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, CustomResource, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "trainyard.io",
    version = "v1alpha1",
    kind = "Queue",
    root = "QueueResource",
    status = "QueueStatus",
    shortname = "tyq",
    category = "trainyard",
    doc = "A team's queue: quota, limit, over-quota weight and priority, in a tree of any depth.",
    printcolumn(name = "Parent", type_ = "string", json_path = ".spec.parent"),
    printcolumn(
        name = "Weight",
        type_ = "integer",
        json_path = ".spec.overQuotaWeight"
    ),
    printcolumn(
        name = "Quota GPUs",
        type_ = "string",
        json_path = ".spec.quota.nvidia\\.com/gpu"
    ),
    printcolumn(
        name = "Limit GPUs",
        type_ = "string",
        description = "spec.limit of nvidia.com/gpu; empty when the queue has no GPU limit (unlimited)",
        json_path = ".spec.limit.nvidia\\.com/gpu"
    ),
    printcolumn(
        name = "Allocated GPUs",
        type_ = "string",
        json_path = ".status.allocated.nvidia\\.com/gpu"
    ),
    printcolumn(
        name = "Requested GPUs",
        type_ = "string",
        description = "GPUs asked for by the queue's pending jobs",
        json_path = ".status.requested.nvidia\\.com/gpu"
    ),
    printcolumn(
        name = "Fair share GPUs",
        type_ = "string",
        json_path = ".status.fairShare.nvidia\\.com/gpu"
    ),
    printcolumn(name = "Pending", type_ = "integer", json_path = ".status.pendingJobs"),
    printcolumn(
        name = "Running",
        type_ = "integer",
        json_path = ".status.runningJobs",
        priority = 1
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        description = "The Ready condition: False when the queue cannot be used (see Reason)",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        description = "Why the queue is (not) Ready",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(description = "What the queue is owed and may use, and where it sits in the tree.")]
#[schemars(transform = crate::cel::queue_spec_rules)]
pub struct QueueSpecDoc {
    /// Parent queue; absent for a top-level queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub parent: Option<String>,
    /// Higher-priority queues are served first among siblings, and may
    /// reclaim from lower ones.
    #[serde(default)]
    pub priority: i32,
    /// Share of the capacity left over after quotas, relative to siblings.
    #[serde(default = "one")]
    pub over_quota_weight: u32,
    /// Guaranteed resources: resource name -> quantity.
    #[serde(default, deserialize_with = "crate::de::null_default")]
    #[schemars(schema_with = "crate::cel::quota_map")]
    pub quota: BTreeMap<String, RawQuantity>,
    /// Most the queue may use: resource name -> quantity or `unlimited`.
    /// Absent resources are unlimited.
    #[serde(default, deserialize_with = "crate::de::null_default")]
    #[schemars(schema_with = "crate::cel::limit_map")]
    pub limit: BTreeMap<String, LimitValue>,
    /// How long a job must have run before reclaim or preemption may evict
    /// it: seconds (`90`) or a duration (`"30m"`, `"2h"`). Absent: inherited
    /// from the nearest ancestor that sets it (the core does this), else no
    /// minimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_runtime: Option<RawDuration>,
    /// How long a pending job of this queue waits before it may evict
    /// anyone (reclaim or preemption), so a cluster autoscaler can add
    /// nodes first: seconds (`120`) or a duration (`"2m"`). Absent:
    /// inherited from the nearest ancestor, else the scheduler's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption_delay: Option<RawDuration>,
    /// The walltime of a job that declares none (as Slurm's partition
    /// `DefaultTime`): seconds or a duration (`"4h"`). Absent: inherited
    /// from the nearest ancestor, else the maximum walltime (as Slurm
    /// uses `MaxTime`), else none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_walltime: Option<RawDuration>,
    /// The longest walltime a job may declare (as Slurm's partition
    /// `MaxTime`); a job that declares more stays pending and says why.
    /// Absent: inherited from the nearest ancestor, else no maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_walltime: Option<RawDuration>,
}

fn one() -> u32 {
    1
}

impl Default for QueueSpecDoc {
    fn default() -> Self {
        QueueSpecDoc {
            parent: None,
            priority: 0,
            over_quota_weight: 1,
            quota: BTreeMap::new(),
            limit: BTreeMap::new(),
            min_runtime: None,
            preemption_delay: None,
            default_walltime: None,
            max_walltime: None,
        }
    }
}

/// One entry of `spec.limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LimitValue {
    Unlimited,
    Amount(RawQuantity),
}

impl Serialize for LimitValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            LimitValue::Unlimited => s.serialize_str("unlimited"),
            LimitValue::Amount(q) => q.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for LimitValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = crate::de::scalar_text(
            d,
            "a quantity such as \"8\" or \"64Gi\", or \"unlimited\"",
            "quantity",
        )?;
        Ok(if text == "unlimited" {
            LimitValue::Unlimited
        } else {
            LimitValue::Amount(RawQuantity(text))
        })
    }
}

impl Queue {
    /// Reads a `Queue` document of Trainyard's `apiVersion`. Checks
    /// `kind`/`apiVersion` and field names and types; values are checked by
    /// [`Queue::to_spec`].
    pub fn from_value(value: &serde_json::Value) -> Result<Queue, ApiErrors> {
        let object = describe_object("Queue", value);
        check_type(value, &object, "Queue", &[API_VERSION])?;
        Ok(from_value(value, &object)?)
    }

    /// Reads a `Queue` of any accepted `apiVersion`: ours strictly, KAI's
    /// and Volcano's leniently and mapped ([`crate::foreign_queue`], with
    /// [`Queue::warnings`]). `None` for Volcano's `root` queue, which is
    /// the top of its tree and no queue of Trainyard's.
    pub fn from_any(value: &serde_json::Value) -> Result<Option<Queue>, ApiErrors> {
        let object = describe_object("Queue", value);
        let version = check_type(value, &object, "Queue", QUEUE_API_VERSIONS)?;
        if version == API_VERSION {
            return Ok(Some(from_value(value, &object)?));
        }
        Ok(
            crate::foreign_queue::read(value, &object, &version)?.map(|(mut q, warnings)| {
                q.warnings = warnings;
                q
            }),
        )
    }

    /// Whether this is a KAI or Volcano Queue read as ours.
    pub fn is_foreign(&self) -> bool {
        self.api_version != API_VERSION
    }

    /// How errors name this queue: `Queue <name>`.
    pub fn object(&self) -> String {
        format!("Queue {}", self.metadata.name)
    }

    /// Validates the queue and converts it to the model, with quantities in
    /// integer units (cpu millicores, memory bytes, milli-GPU, counts).
    /// Reports every problem found.
    pub fn to_spec(&self) -> Result<QueueSpec, ApiErrors> {
        let object = self.object();
        let mut errors = Vec::new();
        if let Some(p) = dns1123_subdomain_problem(&self.metadata.name) {
            errors.push(ApiError::new(&object, "metadata.name", p));
        }
        if let Some(parent) = &self.spec.parent
            && let Some(p) = dns1123_subdomain_problem(parent)
        {
            errors.push(ApiError::new(&object, "spec.parent", p));
        }
        let mut quota = Resources::zero();
        for (name, raw) in &self.spec.quota {
            let res = ResourceName::parse(name);
            match raw.parse().and_then(|q| q.to_resource_units(&res)) {
                Ok(v) => quota.set(&res, v),
                Err(e) => errors.push(ApiError::new(
                    &object,
                    format!("spec.quota.{name}"),
                    e.to_string(),
                )),
            }
        }
        let mut limit = Limits::unlimited();
        for (name, value) in &self.spec.limit {
            let res = ResourceName::parse(name);
            match value {
                LimitValue::Unlimited => {}
                LimitValue::Amount(raw) => {
                    match raw.parse().and_then(|q| q.to_resource_units(&res)) {
                        Ok(v) => limit.set(res, v),
                        Err(e) => errors.push(ApiError::new(
                            &object,
                            format!("spec.limit.{name}"),
                            format!("{e}, or \"unlimited\""),
                        )),
                    }
                }
            }
        }
        let min_runtime_seconds = match &self.spec.min_runtime {
            None => None,
            Some(raw) => match raw.seconds() {
                Ok(s) => Some(s),
                Err(e) => {
                    errors.push(ApiError::new(&object, "spec.minRuntime", e.to_string()));
                    None
                }
            },
        };
        let mut walltime = |field: &str, raw: &Option<RawDuration>| match raw {
            None => None,
            Some(raw) => match raw.positive_seconds() {
                Ok(s) => Some(s),
                Err(e) => {
                    errors.push(ApiError::new(&object, field, e));
                    None
                }
            },
        };
        let default_walltime_seconds =
            walltime("spec.defaultWalltime", &self.spec.default_walltime);
        let max_walltime_seconds = walltime("spec.maxWalltime", &self.spec.max_walltime);
        let preemption_delay_seconds = match &self.spec.preemption_delay {
            None => None,
            Some(raw) => match raw.seconds() {
                Ok(s) => Some(s),
                Err(e) => {
                    errors.push(ApiError::new(
                        &object,
                        "spec.preemptionDelay",
                        e.to_string(),
                    ));
                    None
                }
            },
        };
        if !errors.is_empty() {
            return Err(ApiErrors(errors));
        }
        Ok(QueueSpec {
            name: self.metadata.name.clone(),
            parent: self.spec.parent.clone(),
            quota,
            limit,
            over_quota_weight: self.spec.over_quota_weight,
            priority: self.spec.priority,
            min_runtime_seconds,
            preemption_delay_seconds,
            default_walltime_seconds,
            max_walltime_seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn queue(v: serde_json::Value) -> Result<QueueSpec, ApiErrors> {
        Queue::from_value(&v)?.to_spec()
    }

    #[test]
    fn converts_quantities_and_defaults() {
        let spec = queue(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "nlp"},
            "spec": {
                "parent": "research",
                "quota": {"nvidia.com/gpu": 8, "cpu": "500m", "memory": "64Gi", "rdma/ib": 2},
                "limit": {"nvidia.com/gpu": "0.5", "cpu": "unlimited"}
            }
        }))
        .unwrap();
        assert_eq!(spec.name, "nlp");
        assert_eq!(spec.parent.as_deref(), Some("research"));
        assert_eq!(spec.quota.gpu, 8000);
        assert_eq!(spec.quota.cpu, 500);
        assert_eq!(spec.quota.memory, 64 << 30);
        assert_eq!(spec.quota.get(&ResourceName::parse("rdma/ib")), 2);
        assert_eq!(spec.limit.get(&ResourceName::Gpu), Some(500));
        assert_eq!(spec.limit.get(&ResourceName::Cpu), None);
        assert_eq!(spec.limit.get(&ResourceName::Memory), None);
        assert_eq!(spec.over_quota_weight, 1);
        assert_eq!(spec.priority, 0);

        let minimal = queue(json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue", "metadata": {"name": "a"}})).unwrap();
        assert_eq!(minimal, QueueSpec::new("a"));
        // `spec:` with no value is null: the defaults, like an absent spec.
        let null_spec = queue(json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue", "metadata": {"name": "a"}, "spec": null})).unwrap();
        assert_eq!(null_spec, QueueSpec::new("a"));
    }

    #[test]
    fn collects_every_problem() {
        let errs = queue(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "Team_A"},
            "spec": {"parent": "", "quota": {"nvidia.com/gpu": "12x", "rdma/ib": "1.5"}, "limit": {"cpu": "-1"}}
        }))
        .unwrap_err();
        let text = errs.to_string();
        assert_eq!(errs.0.len(), 5, "{text}");
        assert!(
            text.contains(
                "Queue Team_A: metadata.name: \"Team_A\" is not a valid DNS-1123 subdomain"
            ),
            "{text}"
        );
        assert!(
            text.contains("Queue Team_A: spec.parent: must not be empty"),
            "{text}"
        );
        assert!(
            text.contains("Queue Team_A: spec.quota.nvidia.com/gpu: invalid quantity \"12x\""),
            "{text}"
        );
        assert!(
            text.contains("spec.quota.rdma/ib: quantity \"1.5\" is not a whole number"),
            "{text}"
        );
        assert!(text.contains("spec.limit.cpu: quantity \"-1\" is negative; expected an amount of zero or more, or \"unlimited\""), "{text}");
    }

    #[test]
    fn typos_and_types_name_the_field() {
        let errs = queue(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "a"}, "spec": {"quotas": {}}
        }))
        .unwrap_err();
        let text = errs.to_string();
        assert!(
            text.starts_with("Queue a: spec.quotas: unknown field `quotas`, expected one of"),
            "{text}"
        );

        let errs = queue(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "a"}, "spec": {"overQuotaWeight": 5_000_000_000u64}
        }))
        .unwrap_err();
        let text = errs.to_string();
        assert!(
            text.starts_with(
                "Queue a: spec.overQuotaWeight: expected a whole number from 0 to 4294967295, found 5000000000"
            ),
            "{text}"
        );

        let errs = queue(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "a"}, "spec": 7
        }))
        .unwrap_err();
        assert_eq!(
            errs.to_string(),
            "Queue a: spec: expected a mapping, found 7"
        );
        let errs = queue(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "a"}, "spec": {"priority": "high"}
        }))
        .unwrap_err();
        assert_eq!(
            errs.to_string(),
            "Queue a: spec.priority: expected a whole number from -2147483648 to 2147483647, found \"high\""
        );

        let errs = queue(json!({"apiVersion": "v1", "kind": "Queue", "metadata": {"name": "a"}}))
            .unwrap_err();
        assert_eq!(
            errs.to_string(),
            "Queue a: apiVersion: expected \"trainyard.io/v1alpha1\", found \"v1\""
        );
        let errs = queue(json!({"kind": "Queue", "metadata": {"name": "a"}})).unwrap_err();
        assert_eq!(
            errs.to_string(),
            "Queue a: apiVersion: missing; expected \"trainyard.io/v1alpha1\""
        );
    }

    fn with_min_runtime(v: serde_json::Value) -> Result<QueueSpec, ApiErrors> {
        queue(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "a"}, "spec": {"minRuntime": v}
        }))
    }

    #[test]
    fn min_runtime_in_seconds_or_as_a_duration() {
        for (v, seconds) in [
            (json!(90), Some(90)),
            (json!("90"), Some(90)),
            (json!("90s"), Some(90)),
            (json!("30m"), Some(1800)),
            (json!("2h"), Some(7200)),
            (json!("1.5h"), Some(5400)),
            (json!("1d"), Some(86_400)),
            (json!("1500ms"), Some(2)),
            (json!(0), Some(0)),
            (json!(null), None),
        ] {
            assert_eq!(
                with_min_runtime(v.clone()).unwrap().min_runtime_seconds,
                seconds,
                "{v}"
            );
        }
        assert_eq!(QueueSpec::new("a").min_runtime_seconds, None);
    }

    #[test]
    fn bad_min_runtime_names_the_queue_and_field() {
        for (v, message) in [
            (
                json!(-5),
                "Queue a: spec.minRuntime: duration \"-5\" is negative; expected zero or more",
            ),
            (
                json!("-30m"),
                "Queue a: spec.minRuntime: duration \"-30m\" is negative; expected zero or more",
            ),
            (
                json!("soon"),
                "Queue a: spec.minRuntime: invalid duration \"soon\"; expected a number of seconds, or a number with a unit (ms, s, m, h or d), such as 90, \"30m\" or \"2h\"",
            ),
            (
                json!("2w"),
                "Queue a: spec.minRuntime: invalid duration \"2w\": unknown unit \"w\"; expected ms, s, m, h or d",
            ),
            (
                json!(true),
                "Queue a: spec.minRuntime: expected a duration such as 90 (seconds), \"30m\" or \"2h\", found true",
            ),
            (
                json!({"hours": 1}),
                "Queue a: spec.minRuntime: expected a duration such as 90 (seconds), \"30m\" or \"2h\", found a mapping",
            ),
        ] {
            assert_eq!(
                with_min_runtime(v.clone()).unwrap_err().to_string(),
                message,
                "{v}"
            );
        }
        // Reported together with the queue's other problems.
        let errs = queue(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "a"}, "spec": {"quota": {"cpu": "x"}, "minRuntime": "1y"}
        }))
        .unwrap_err();
        assert_eq!(errs.0.len(), 2, "{errs}");
        assert_eq!(errs.0[1].field, "spec.minRuntime");
        // A misspelt field lists it (docs/snapshot.md shows this message).
        let errs = queue(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "nlp"}, "spec": {"limits": {}}
        }))
        .unwrap_err();
        assert_eq!(
            errs.to_string(),
            "Queue nlp: spec.limits: unknown field `limits`, expected one of `parent`, `priority`, `overQuotaWeight`, `quota`, `limit`, `minRuntime`, `preemptionDelay`, `defaultWalltime`, `maxWalltime`"
        );
    }
}
