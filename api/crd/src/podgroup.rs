//! The `PodGroup` document (namespaced): a gang of pods.
//!
//! ```yaml
//! apiVersion: trainyard.io/v1alpha1
//! kind: PodGroup
//! metadata: { name: train-1, namespace: ml }
//! spec:
//!   queue: nlp
//!   minMember: 9
//!   priorityClassName: high
//!   preemptible: false          # optional; see crate::preemption
//!   subGroups:
//!     - { name: ps, minMember: 1 }
//!     - { name: workers, minMember: 8, topology: { required: leaf } }
//!   topology: { required: spineBlock, preferred: leaf, maxLeaves: 2 }
//! ```
//!
//! Topology levels are checked against the cluster's topology when the
//! snapshot is assembled (a level may be named by its name or by the node
//! label key of a label level).
//!
//! Volcano (`scheduling.volcano.sh/v1beta1`: `minMember`, `queue`,
//! `priorityClassName`), KAI-Scheduler (`scheduling.run.ai/v2alpha2`:
//! `minMember`, `queue`, `priorityClassName`, `topologyConstraint`) and
//! scheduler-plugins (`scheduling.x-k8s.io/v1alpha1`: `minMember`)
//! PodGroups are accepted too; their other fields are ignored.

use std::collections::BTreeSet;

pub mod upstream;

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::dns1123_subdomain_problem;
use crate::preemption::preemptible_marks;
use crate::status::PodGroupStatus;
use crate::{
    API_VERSION, ApiError, ApiErrors, COSCHEDULING_API_VERSION, KAI_API_VERSION, ObjectMeta,
    VOLCANO_API_VERSION, check_type, describe_object, from_value,
};

/// A `PodGroup` document (ours, or a foreign one converted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodGroup {
    pub api_version: String,
    pub kind: String,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    pub metadata: ObjectMeta,
    /// `spec:` with no value (null) means the defaults.
    #[serde(default, deserialize_with = "crate::de::null_default")]
    pub spec: PodGroupSpec,
    /// Ignored (present in `kubectl get -o yaml` output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
    /// The `Topology` a KAI group's `spec.topologyConstraint.topology`
    /// names (not part of our document).
    #[serde(skip)]
    pub topology_name: Option<String>,
    /// `spec.minMember` as written, when it is not a whole number from 1
    /// to 2147483647 (Kubernetes' int32); reported by `validate` with the
    /// object's other problems (the group is read as if it said 1).
    #[serde(skip)]
    pub min_member_problem: Option<String>,
    /// What a Kubernetes `scheduling.k8s.io` PodGroup says beyond our
    /// document ([`upstream`]); `None` for every other kind.
    #[serde(skip)]
    pub upstream: Option<upstream::Upstream>,
}

/// `spec` of a [`PodGroup`]; also the spec of [`PodGroupResource`], the
/// object as the API serves it, from which the CRD is generated.
// The derive takes one `printcolumn(...)` per column, whose keys repeat.
#[allow(clippy::duplicated_attributes)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, CustomResource, JsonSchema)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "trainyard.io",
    version = "v1alpha1",
    kind = "PodGroup",
    root = "PodGroupResource",
    namespaced,
    status = "PodGroupStatus",
    shortname = "typg",
    category = "trainyard",
    doc = "A gang: pods scheduled all or nothing, at least minMember at once, in a queue.",
    printcolumn(name = "Queue", type_ = "string", json_path = ".spec.queue"),
    printcolumn(name = "Min member", type_ = "integer", json_path = ".spec.minMember"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Scheduled", type_ = "integer", json_path = ".status.scheduled"),
    printcolumn(
        name = "Reason",
        type_ = "string",
        description = "Reason of the Scheduled condition: why the gang waits, or what took its pods",
        json_path = ".status.conditions[?(@.type==\"Scheduled\")].reason"
    ),
    printcolumn(
        name = "Running",
        type_ = "integer",
        json_path = ".status.running",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(
    description = "The gang: its queue, its minimum, its priority, its sub-groups and topology constraints."
)]
pub struct PodGroupSpec {
    /// The queue (a leaf `Queue`); absent: the pods' queue label, else the
    /// default queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub queue: Option<String>,
    /// Pods that must be placed together before any is bound.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub min_member: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Overrides the priority class's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Whether reclaim and preemption may evict the job; absent: the
    /// PodGroup's or its pods' keys decide, else the priority
    /// ([`crate::preemption`]).
    #[schemars(
        description = "Whether reclaim and preemption may evict the job; absent: the trainyard.io/preemptible label or annotation decides, else the priority."
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptible: Option<bool>,
    /// How long the gang waits before it may evict anyone (reclaim or
    /// preemption), so a cluster autoscaler can add nodes first: seconds
    /// (`120`) or a duration (`"2m"`). Absent: its queue's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption_delay: Option<crate::RawDuration>,
    /// The longest the gang may run from its start: seconds (`14400`) or a
    /// duration (`"4h"`), as Slurm's `--time`; a pod's shorter
    /// `activeDeadlineSeconds` wins (the kubelet ends the pod then).
    /// Absent: the shortest `activeDeadlineSeconds` of its pods, else its
    /// queue's default walltime, else its queue's maximum, else none.
    /// Reservations for waiting gangs are planned from running gangs'
    /// walltimes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walltime: Option<crate::RawDuration>,
    /// Parts of the gang with their own minimum and topology (for example
    /// the workers and the parameter servers). Names are unique.
    #[serde(
        default,
        deserialize_with = "crate::de::null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["name"],
        "maxItems" = 64
    ))]
    pub sub_groups: Vec<SubGroupSpec>,
    /// Topology constraints of the whole gang.
    #[serde(
        default,
        deserialize_with = "crate::de::null_default",
        skip_serializing_if = "TopologyConstraintSpec::is_empty"
    )]
    pub topology: TopologyConstraintSpec,
}

impl Default for PodGroupSpec {
    fn default() -> Self {
        PodGroupSpec {
            queue: None,
            min_member: 1,
            priority_class_name: None,
            priority: None,
            preemptible: None,
            preemption_delay: None,
            walltime: None,
            sub_groups: Vec::new(),
            topology: TopologyConstraintSpec::default(),
        }
    }
}

/// One entry of `spec.subGroups`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubGroupSpec {
    /// Pods join a sub-group by the `trainyard.io/sub-group` label.
    #[schemars(length(min = 1, max = 63))]
    pub name: String,
    /// Defaults to 1.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub min_member: u32,
    /// Topology constraints of this sub-group's pods.
    #[serde(
        default,
        deserialize_with = "crate::de::null_default",
        skip_serializing_if = "TopologyConstraintSpec::is_empty"
    )]
    pub topology: TopologyConstraintSpec,
}

/// `topology:` of a PodGroup or of one of its sub-groups. Levels are named
/// as written (a level name or a label level's node label key) and resolved
/// against the cluster's topology when the snapshot is assembled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologyConstraintSpec {
    /// Never cross this level: all pods in one domain of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    pub required: Option<String>,
    /// Try one domain of this level first, then wider ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    pub preferred: Option<String>,
    /// At most this many leaf domains (like Slurm's `--switches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_leaves: Option<u32>,
}

impl TopologyConstraintSpec {
    pub fn is_empty(&self) -> bool {
        self.required.is_none() && self.preferred.is_none() && self.max_leaves.is_none()
    }
}

/// One field of a topology constraint, for naming it in messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConstraintField {
    Required,
    Preferred,
    MaxLeaves,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ForeignPodGroup {
    #[serde(default, deserialize_with = "crate::de::null_default")]
    metadata: ObjectMeta,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    spec: ForeignSpec,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ForeignSpec {
    #[serde(default = "one")]
    min_member: u32,
    #[serde(default)]
    queue: Option<String>,
    #[serde(default)]
    priority_class_name: Option<String>,
    /// KAI only.
    #[serde(default)]
    topology_constraint: Option<KaiTopologyConstraint>,
}

impl Default for ForeignSpec {
    fn default() -> Self {
        ForeignSpec {
            min_member: 1,
            queue: None,
            priority_class_name: None,
            topology_constraint: None,
        }
    }
}

/// KAI's `spec.topologyConstraint`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KaiTopologyConstraint {
    #[serde(default)]
    topology: Option<String>,
    #[serde(default)]
    required_topology_level: Option<String>,
    #[serde(default)]
    preferred_topology_level: Option<String>,
}

/// Largest `minMember` (Kubernetes' int32).
const MAX_MEMBERS: u64 = 2_147_483_647;

impl PodGroup {
    /// Reads a `PodGroup` document of any accepted `apiVersion`. Ours is
    /// read strictly (unknown fields are errors); foreign ones leniently.
    /// Values are checked by [`PodGroup::validate`].
    pub fn from_value(value: &serde_json::Value) -> Result<PodGroup, ApiErrors> {
        let object = describe_object("PodGroup", value);
        let version = check_type(
            value,
            &object,
            "PodGroup",
            &[
                API_VERSION,
                VOLCANO_API_VERSION,
                KAI_API_VERSION,
                COSCHEDULING_API_VERSION,
                upstream::V1BETA1,
                upstream::V1ALPHA2,
            ],
        )?;
        if upstream::is_upstream(&version) {
            return upstream::read(value, &object, &version);
        }
        // minMember is checked here, not by serde, so that one message
        // covers every bad value and the other fields are still read.
        let mut value = std::borrow::Cow::Borrowed(value);
        let mut min_member_problem = None;
        if let Some(v) = value.get("spec").and_then(|s| s.get("minMember"))
            && !v.is_null()
            && !v.as_u64().is_some_and(|n| (1..=MAX_MEMBERS).contains(&n))
        {
            let found = match v {
                serde_json::Value::String(s) => format!("{s:?}"),
                serde_json::Value::Array(_) => "a sequence".to_string(),
                serde_json::Value::Object(_) => "a mapping".to_string(),
                other => other.to_string(),
            };
            min_member_problem = Some(format!(
                "expected a whole number from 1 to {MAX_MEMBERS}, found {found}"
            ));
            if let Some(spec) = value
                .to_mut()
                .get_mut("spec")
                .and_then(|s| s.as_object_mut())
            {
                spec.remove("minMember");
            }
        }
        if version == API_VERSION {
            let mut pg: PodGroup = from_value(&value, &object)?;
            pg.min_member_problem = min_member_problem;
            return Ok(pg);
        }
        let foreign: ForeignPodGroup = from_value(&value, &object)?;
        let kai = version == KAI_API_VERSION;
        let has_queue = kai || version == VOLCANO_API_VERSION;
        let constraint = foreign.spec.topology_constraint.filter(|_| kai);
        let non_empty = |v: Option<String>| v.filter(|s| !s.is_empty());
        let (topology, topology_name) = match constraint {
            None => (TopologyConstraintSpec::default(), None),
            Some(c) => (
                TopologyConstraintSpec {
                    required: non_empty(c.required_topology_level),
                    preferred: non_empty(c.preferred_topology_level),
                    max_leaves: None,
                },
                non_empty(c.topology),
            ),
        };
        Ok(PodGroup {
            api_version: version,
            kind: "PodGroup".to_string(),
            metadata: foreign.metadata,
            spec: PodGroupSpec {
                min_member: foreign.spec.min_member,
                queue: foreign.spec.queue.filter(|_| has_queue),
                priority_class_name: foreign.spec.priority_class_name.filter(|_| has_queue),
                priority: None,
                preemptible: None,
                preemption_delay: None,
                walltime: None,
                sub_groups: Vec::new(),
                topology,
            },
            status: None,
            topology_name,
            min_member_problem,
            upstream: None,
        })
    }

    /// Path of a topology constraint field, as written in this document:
    /// `spec.topology.required`, `spec.subGroups[1].topology.maxLeaves`, or
    /// for a KAI group `spec.topologyConstraint.requiredTopologyLevel`.
    pub fn topology_field(&self, sub_group: Option<usize>, field: ConstraintField) -> String {
        if self.upstream.is_some() {
            return "spec.schedulingConstraints.topology[0].key".to_string();
        }
        if self.api_version == KAI_API_VERSION {
            let name = match field {
                ConstraintField::Required => "requiredTopologyLevel",
                ConstraintField::Preferred => "preferredTopologyLevel",
                ConstraintField::MaxLeaves => "maxLeaves",
            };
            return format!("spec.topologyConstraint.{name}");
        }
        let name = match field {
            ConstraintField::Required => "required",
            ConstraintField::Preferred => "preferred",
            ConstraintField::MaxLeaves => "maxLeaves",
        };
        match sub_group {
            None => format!("spec.topology.{name}"),
            Some(i) => format!("spec.subGroups[{i}].topology.{name}"),
        }
    }

    pub fn namespace(&self) -> &str {
        self.metadata.namespace_or_default()
    }

    /// How errors name this group: `PodGroup <namespace>/<name>`.
    pub fn object(&self) -> String {
        format!("PodGroup {}/{}", self.namespace(), self.metadata.name)
    }

    /// Problems of the values of a Kubernetes PodGroup (its policy,
    /// constraints, modes). They belong to the job, not the object: a
    /// file with one does not load, and in the live service the group's
    /// job pends with them, where an unreadable object would leave its
    /// pods waiting for a group that seems not to exist.
    pub fn upstream_problems(&self) -> Vec<ApiError> {
        let object = self.object();
        self.upstream
            .iter()
            .flat_map(|u| &u.problems)
            .map(|(field, message)| ApiError::new(&object, field.clone(), message.clone()))
            .collect()
    }

    /// Checks names and counts; reports every problem found (for a
    /// Kubernetes PodGroup, see also [`PodGroup::upstream_problems`]).
    pub fn validate(&self) -> Result<(), ApiErrors> {
        let object = self.object();
        let mut errors = Vec::new();
        if let Some(p) = dns1123_subdomain_problem(&self.metadata.name) {
            errors.push(ApiError::new(&object, "metadata.name", p));
        }
        if let Some(problem) = &self.min_member_problem {
            errors.push(ApiError::new(&object, "spec.minMember", problem.clone()));
        } else if self.spec.min_member < 1 || u64::from(self.spec.min_member) > MAX_MEMBERS {
            errors.push(ApiError::new(
                &object,
                "spec.minMember",
                format!(
                    "expected a whole number from 1 to {MAX_MEMBERS}, found {}",
                    self.spec.min_member
                ),
            ));
        }
        if let Some(q) = &self.spec.queue
            && let Some(p) = dns1123_subdomain_problem(q)
        {
            errors.push(ApiError::new(&object, "spec.queue", p));
        }
        if let Some(Err(e)) = self.spec.preemption_delay.as_ref().map(|d| d.seconds()) {
            errors.push(ApiError::new(
                &object,
                "spec.preemptionDelay",
                e.to_string(),
            ));
        }
        if let Some(Err(e)) = self.spec.walltime.as_ref().map(|d| d.positive_seconds()) {
            errors.push(ApiError::new(&object, "spec.walltime", e));
        }
        for mark in preemptible_marks(&self.metadata) {
            if let Err(message) = mark.value {
                errors.push(ApiError::new(&object, mark.field, message));
            }
        }
        self.check_constraint(None, &self.spec.topology, &mut errors);
        let mut seen = BTreeSet::new();
        for (i, sg) in self.spec.sub_groups.iter().enumerate() {
            self.check_constraint(Some(i), &sg.topology, &mut errors);
            if sg.name.is_empty() {
                errors.push(ApiError::new(
                    &object,
                    format!("spec.subGroups[{i}].name"),
                    "must not be empty",
                ));
            } else if !seen.insert(sg.name.as_str()) {
                errors.push(ApiError::new(
                    &object,
                    format!("spec.subGroups[{i}].name"),
                    format!(
                        "sub-group {:?} is defined more than once; expected unique names",
                        sg.name
                    ),
                ));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ApiErrors(errors))
        }
    }

    fn check_constraint(
        &self,
        sub_group: Option<usize>,
        c: &TopologyConstraintSpec,
        errors: &mut Vec<ApiError>,
    ) {
        let object = self.object();
        for (field, value) in [
            (ConstraintField::Required, &c.required),
            (ConstraintField::Preferred, &c.preferred),
        ] {
            if value.as_deref() == Some("") {
                errors.push(ApiError::new(
                    &object,
                    self.topology_field(sub_group, field),
                    "must not be empty; expected a topology level name or a node label key",
                ));
            }
        }
        if c.max_leaves == Some(0) {
            errors.push(ApiError::new(
                &object,
                self.topology_field(sub_group, ConstraintField::MaxLeaves),
                "must be at least 1, found 0",
            ));
        }
    }
}

#[cfg(test)]
mod tests;
