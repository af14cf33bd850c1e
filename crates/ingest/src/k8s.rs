//! Kubernetes `Node`, `Pod` and `PriorityClass`: the fields Trainyard reads.
//! Other fields are ignored, so real `kubectl get -o yaml` output parses.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use trainyard_crd::de::null_default;
use trainyard_crd::gpu::{GpuShare, GpuSharingRequest, gpu_sharing_request};
use trainyard_crd::{ObjectMeta, QuantityError, RawQuantity, keys, parse_rfc3339};
use trainyard_model::resources::GPU_RESOURCE;

use crate::dra::{ClaimSource, PodDraRefs, PodResourceClaim};
use trainyard_model::{
    ExternalPod, GpuDevice, InclusionPolicy, LabelSelectorOperator, Node, NodeSelectorRequirement,
    NodeSelectorTerm, PlacementConstraints, PodRules, ResourceName, Resources, Taint, TaintEffect,
    Timestamp, Toleration, TolerationOperator,
};

/// A problem found while converting a typed object: field path (relative to
/// the object) and message.
pub(crate) type FieldError = (String, String);

/// Most `nvidia.com/gpu` devices one node may have. Each device is an object
/// in the snapshot, so a larger (mistyped) count is an error rather than
/// millions of devices.
pub(crate) const MAX_NODE_GPUS: u64 = 1024;

/// Path of a pod's required node affinity terms.
const REQUIRED_TERMS: &str =
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";

// ---------------------------------------------------------------------------
// Enum-valued fields, checked during deserialization so errors carry paths.

struct Effect(TaintEffect);

impl<'de> Deserialize<'de> for Effect {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TaintEffect::parse(&s).map(Effect).ok_or_else(|| {
            D::Error::custom(format!(
                "unknown taint effect {s:?}; expected NoSchedule, PreferNoSchedule or NoExecute"
            ))
        })
    }
}

/// A toleration effect: empty or absent means every effect.
struct OptEffect(Option<TaintEffect>);

impl<'de> Deserialize<'de> for OptEffect {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Option::<String>::deserialize(d)?.unwrap_or_default();
        if s.is_empty() {
            return Ok(OptEffect(None));
        }
        TaintEffect::parse(&s).map(|e| OptEffect(Some(e))).ok_or_else(|| {
            D::Error::custom(format!(
                "unknown toleration effect {s:?}; expected NoSchedule, PreferNoSchedule, NoExecute or empty (all effects)"
            ))
        })
    }
}

struct TolOp(TolerationOperator);

impl<'de> Deserialize<'de> for TolOp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Option::<String>::deserialize(d)?.unwrap_or_default();
        match s.as_str() {
            "" | "Equal" => Ok(TolOp(TolerationOperator::Equal)),
            "Exists" => Ok(TolOp(TolerationOperator::Exists)),
            _ => Err(D::Error::custom(format!(
                "unknown toleration operator {s:?}; expected Equal or Exists"
            ))),
        }
    }
}

/// `preemptionPolicy` of a PriorityClass or a pod: `true` for `Never`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NeverPreempts(pub bool);

impl<'de> Deserialize<'de> for NeverPreempts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Option::<String>::deserialize(d)?.unwrap_or_default();
        match s.as_str() {
            "" | "PreemptLowerPriority" => Ok(NeverPreempts(false)),
            "Never" => Ok(NeverPreempts(true)),
            _ => Err(D::Error::custom(format!(
                "unknown preemption policy {s:?}; expected PreemptLowerPriority or Never"
            ))),
        }
    }
}

struct SelOp(LabelSelectorOperator);

impl<'de> Deserialize<'de> for SelOp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        LabelSelectorOperator::parse(&s).map(SelOp).ok_or_else(|| {
            D::Error::custom(format!(
                "unknown operator {s:?}; expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt"
            ))
        })
    }
}

/// `topologySpreadConstraints[].whenUnsatisfiable`; absent or null means
/// `DoNotSchedule` (the Kubernetes default).
#[derive(Clone, Copy, PartialEq, Eq)]
enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

impl<'de> Deserialize<'de> for WhenUnsatisfiable {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "DoNotSchedule" => Ok(WhenUnsatisfiable::DoNotSchedule),
            "ScheduleAnyway" => Ok(WhenUnsatisfiable::ScheduleAnyway),
            _ => Err(D::Error::custom(format!(
                "unknown whenUnsatisfiable {s:?}; expected DoNotSchedule or ScheduleAnyway"
            ))),
        }
    }
}

// ---------------------------------------------------------------------------
// PriorityClass

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct K8sPriorityClass {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
    pub value: i32,
    #[serde(default)]
    pub preemption_policy: NeverPreempts,
}

// ---------------------------------------------------------------------------
// Pod

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct K8sPod {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    spec: PodSpec,
    #[serde(default, deserialize_with = "null_default")]
    status: PodStatus,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    #[serde(default)]
    scheduler_name: Option<String>,
    /// Kubernetes 1.36+: the `scheduling.k8s.io` PodGroup the pod joins.
    #[serde(default)]
    scheduling_group: Option<SchedulingGroup>,
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    priority: Option<i32>,
    #[serde(default)]
    priority_class_name: Option<String>,
    #[serde(default)]
    preemption_policy: NeverPreempts,
    #[serde(default, deserialize_with = "null_default")]
    containers: Vec<Container>,
    #[serde(default, deserialize_with = "null_default")]
    init_containers: Vec<Container>,
    #[serde(default, deserialize_with = "null_default")]
    overhead: BTreeMap<String, RawQuantity>,
    /// Pod-level resources (`PodLevelResources`): override the containers'
    /// sum per resource.
    #[serde(default)]
    resources: Option<ResourceRequirements>,
    #[serde(default, deserialize_with = "null_default")]
    node_selector: BTreeMap<String, String>,
    #[serde(default)]
    affinity: Option<Affinity>,
    #[serde(default, deserialize_with = "null_default")]
    tolerations: Vec<K8sToleration>,
    #[serde(default, deserialize_with = "null_default")]
    topology_spread_constraints: Vec<SpreadConstraint>,
    #[serde(default, deserialize_with = "null_default")]
    resource_claims: Vec<K8sPodResourceClaim>,
    #[serde(default, deserialize_with = "null_default")]
    scheduling_gates: Vec<SchedulingGate>,
    #[serde(default)]
    runtime_class_name: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    volumes: Vec<Volume>,
    /// Seconds the pod may run from its start before the kubelet ends it.
    #[serde(default)]
    active_deadline_seconds: Option<i64>,
    /// Seconds an evicted pod may take to stop.
    #[serde(default)]
    termination_grace_period_seconds: Option<i64>,
}

/// `spec.schedulingGroup`.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchedulingGroup {
    #[serde(default)]
    pod_group_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchedulingGate {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
}

/// A pod volume: only its name and a `persistentVolumeClaim` source are
/// read.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Volume {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default)]
    persistent_volume_claim: Option<PvcSource>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PvcSource {
    #[serde(default, deserialize_with = "null_default")]
    claim_name: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodStatus {
    #[serde(default)]
    phase: Option<String>,
    /// RFC 3339: when the kubelet started the pod.
    #[serde(default)]
    start_time: Option<String>,
    /// The node a preemptor waits for (set by the scheduler after evicting).
    #[serde(default)]
    nominated_node_name: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    conditions: Vec<PodCondition>,
    /// In-place resize: `Proposed`, `InProgress`, `Deferred`, `Infeasible`.
    #[serde(default)]
    resize: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    container_statuses: Vec<ContainerStatus>,
    #[serde(default, deserialize_with = "null_default")]
    init_container_statuses: Vec<ContainerStatus>,
    #[serde(default, deserialize_with = "null_default")]
    resource_claim_statuses: Vec<K8sPodClaimStatus>,
    /// The claim the scheduler made for the pod's DRA-backed extended
    /// resources (KEP-5004).
    #[serde(default)]
    extended_resource_claim_status: Option<K8sExtendedClaimStatus>,
}

/// `status.extendedResourceClaimStatus`: the claim's name (its request
/// mappings are the scheduler's own and not read back).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sExtendedClaimStatus {
    #[serde(default, deserialize_with = "null_default")]
    resource_claim_name: String,
}

/// One entry of `spec.resourceClaims`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sPodResourceClaim {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default)]
    resource_claim_name: Option<String>,
    #[serde(default)]
    resource_claim_template_name: Option<String>,
}

/// One entry of `status.resourceClaimStatuses`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sPodClaimStatus {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default)]
    resource_claim_name: Option<String>,
}

/// One entry of `status.containerStatuses`: what the node allocated to the
/// container (in-place resize).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerStatus {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default, deserialize_with = "null_default")]
    allocated_resources: BTreeMap<String, RawQuantity>,
    #[serde(default)]
    resources: Option<ResourceRequirements>,
}

/// One entry of `status.conditions`: only `type` and `lastTransitionTime`
/// are read, and only for the types in [`START_CONDITIONS`]; and the
/// `reason` of `PodResizePending`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodCondition {
    #[serde(rename = "type", default, deserialize_with = "null_default")]
    kind: String,
    #[serde(default)]
    last_transition_time: Option<String>,
    /// Read for `PodResizePending` (`Infeasible` or `Deferred`).
    #[serde(default)]
    reason: Option<String>,
}

/// Conditions whose `lastTransitionTime` stands in for a bound pod's start
/// time when `status.startTime` is absent (the earliest one is used).
const START_CONDITIONS: &[&str] = &["Ready", "PodScheduled"];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Container {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default, deserialize_with = "null_default")]
    resources: ResourceRequirements,
    #[serde(default, deserialize_with = "null_default")]
    ports: Vec<ContainerPort>,
    /// `Always` on an init container makes it a sidecar.
    #[serde(default)]
    restart_policy: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourceRequirements {
    #[serde(default, deserialize_with = "null_default")]
    requests: BTreeMap<String, RawQuantity>,
    #[serde(default, deserialize_with = "null_default")]
    limits: BTreeMap<String, RawQuantity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerPort {
    #[serde(default)]
    host_port: Option<i64>,
    #[serde(default)]
    protocol: Option<String>,
    #[serde(default, rename = "hostIP")]
    host_ip: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Affinity {
    #[serde(default)]
    node_affinity: Option<NodeAffinity>,
    #[serde(default)]
    pod_affinity: Option<PodAffinity>,
    #[serde(default)]
    pod_anti_affinity: Option<PodAffinity>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeAffinity {
    #[serde(default)]
    required_during_scheduling_ignored_during_execution: Option<NodeSelector>,
    #[serde(default, deserialize_with = "null_default")]
    preferred_during_scheduling_ignored_during_execution: Vec<serde_json::Value>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeSelector {
    #[serde(default, deserialize_with = "null_default")]
    node_selector_terms: Vec<K8sNodeSelectorTerm>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sNodeSelectorTerm {
    #[serde(default, deserialize_with = "null_default")]
    match_expressions: Vec<K8sRequirement>,
    #[serde(default, deserialize_with = "null_default")]
    match_fields: Vec<K8sRequirement>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sRequirement {
    key: String,
    operator: SelOp,
    #[serde(default, deserialize_with = "null_default")]
    values: Vec<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodAffinity {
    #[serde(default, deserialize_with = "null_default")]
    required_during_scheduling_ignored_during_execution: Vec<K8sPodAffinityTerm>,
    #[serde(default, deserialize_with = "null_default")]
    preferred_during_scheduling_ignored_during_execution: Vec<K8sWeightedTerm>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sPodAffinityTerm {
    #[serde(default)]
    label_selector: Option<K8sLabelSelector>,
    #[serde(default)]
    namespace_selector: Option<K8sLabelSelector>,
    #[serde(default, deserialize_with = "null_default")]
    namespaces: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    topology_key: String,
    #[serde(default, deserialize_with = "null_default")]
    match_label_keys: Vec<String>,
    #[serde(default, deserialize_with = "null_default")]
    mismatch_label_keys: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sWeightedTerm {
    #[serde(default)]
    weight: Option<i64>,
    #[serde(default)]
    pod_affinity_term: Option<K8sPodAffinityTerm>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sLabelSelector {
    #[serde(default, deserialize_with = "null_default")]
    match_labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "null_default")]
    match_expressions: Vec<K8sRequirement>,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy`.
struct Policy(InclusionPolicy);

impl<'de> Deserialize<'de> for Policy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "Honor" => Ok(Policy(InclusionPolicy::Honor)),
            "Ignore" => Ok(Policy(InclusionPolicy::Ignore)),
            _ => Err(D::Error::custom(format!(
                "unknown policy {s:?}; expected Honor or Ignore"
            ))),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpreadConstraint {
    #[serde(default)]
    when_unsatisfiable: Option<WhenUnsatisfiable>,
    #[serde(default)]
    max_skew: Option<i64>,
    #[serde(default, deserialize_with = "null_default")]
    topology_key: String,
    #[serde(default)]
    label_selector: Option<K8sLabelSelector>,
    #[serde(default)]
    min_domains: Option<i64>,
    #[serde(default)]
    node_affinity_policy: Option<Policy>,
    #[serde(default)]
    node_taints_policy: Option<Policy>,
    #[serde(default, deserialize_with = "null_default")]
    match_label_keys: Vec<String>,
}

impl SpreadConstraint {
    fn when_unsatisfiable(&self) -> WhenUnsatisfiable {
        self.when_unsatisfiable
            .unwrap_or(WhenUnsatisfiable::DoNotSchedule)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sToleration {
    #[serde(default, deserialize_with = "null_default")]
    key: String,
    #[serde(default)]
    operator: Option<TolOp>,
    #[serde(default, deserialize_with = "null_default")]
    value: String,
    #[serde(default)]
    effect: Option<OptEffect>,
}

/// A pod, converted: what assembly needs.
#[derive(Clone, Debug)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub meta: ObjectMeta,
    pub created: Option<Timestamp>,
    pub scheduler: String,
    /// `spec.schedulingGroup.podGroupName` (Kubernetes 1.36+): the
    /// `scheduling.k8s.io` PodGroup it joins, in its namespace.
    pub scheduling_group: Option<String>,
    pub node_name: Option<String>,
    pub priority: Option<i32>,
    pub priority_class: Option<String>,
    /// `spec.preemptionPolicy: Never` (admission copies it from the
    /// PriorityClass in a real cluster).
    pub never_preempts: bool,
    pub requests: Resources,
    pub constraints: PlacementConstraints,
    /// Soft constraints Trainyard ignores (for warnings).
    pub ignored: Vec<String>,
    /// Fields that can restrict placement but that Trainyard does not
    /// check, one warning message each (given for pending Trainyard pods).
    pub unchecked: Vec<String>,
    pub terminal: bool,
    /// From the `trainyard.io/gpu-indices` annotation.
    pub gpus: Option<Vec<u32>>,
    /// A GPU share asked for by annotation (`gpu-fraction`, `gpu-memory`,
    /// ...). A fraction is already in `requests.gpu`; for a memory share,
    /// `requests.gpu` is 0 until assembly sets the nominal share, which
    /// depends on the nodes.
    pub gpu_share: Option<GpuShare>,
    /// `status.startTime`, else the earliest `lastTransitionTime` of its
    /// `Ready`/`PodScheduled` conditions (used for bound pods only).
    pub started: Option<Timestamp>,
    /// `spec.activeDeadlineSeconds`: how long the pod may run from its
    /// start (part of its job's walltime).
    pub active_deadline_seconds: Option<u64>,
    /// `spec.terminationGracePeriodSeconds`: how long the pod may take to
    /// stop once evicted (a preemptor waits that long for its room).
    pub grace_seconds: Option<u64>,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// A pending pod's `status.nominatedNodeName` and since when: the
    /// `trainyard.io/nominated-at` annotation, else `creationTimestamp`,
    /// else 1970-01-01T00:00:00Z; and the devices held for it, from its
    /// `trainyard.io/gpu-indices`. The node is checked at assembly.
    pub nomination: Option<(String, Timestamp, Option<Vec<u32>>)>,
    /// `spec.resourceClaims` and `status.resourceClaimStatuses` (DRA),
    /// resolved against the claims by [`crate::dra::build`].
    pub dra: PodDraRefs,
}

impl PodInfo {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The pod as another scheduler's pod bound to `node`: the capacity it
    /// holds, its labels, and its rules that bind other pods (required
    /// anti-affinity, host ports).
    pub fn external(&self, node: &str) -> ExternalPod {
        let rules = &self.constraints.pod_rules;
        ExternalPod {
            name: self.key(),
            node: node.to_string(),
            requests: self.requests.clone(),
            gpus: self.gpus.clone(),
            namespace: self.namespace.clone(),
            labels: self.meta.labels.clone(),
            pod_rules: std::sync::Arc::new(PodRules {
                anti_affinity: rules.anti_affinity.clone(),
                host_ports: rules.host_ports.clone(),
                ..PodRules::default()
            }),
        }
    }
}

/// Parses `0,1,2,3` (spaces allowed) into indices in the order given,
/// duplicates kept (see [`gpu_indices_problem`]).
pub(crate) fn parse_gpu_indices(s: &str) -> Result<Vec<u32>, String> {
    s.split(',')
        .map(|part| {
            part.trim().parse::<u32>().map_err(|_| {
                format!("{s:?} is not a list of GPU indices; expected comma-separated device indices such as \"0,1,2,3\"")
            })
        })
        .collect()
}

/// Why `indices` cannot be the devices held by a pod requesting `gpu`
/// milli-GPU, or `None` when they can: they must be distinct, and there must
/// be one per GPU for a whole number of GPUs, exactly one for a request
/// that is not a whole number (a share of a device), none without a GPU
/// request. `share` describes a GPU-sharing annotation (`gpu-memory="4096"`)
/// when the pod has one; it always asks for exactly one device.
pub(crate) fn gpu_indices_problem(
    indices: &[u32],
    gpu: u64,
    share: Option<&str>,
) -> Option<String> {
    let mut seen = Vec::with_capacity(indices.len());
    for &i in indices {
        if seen.contains(&i) {
            return Some(format!("lists GPU {i} twice; expected distinct indices"));
        }
        seen.push(i);
    }
    let amount = ResourceName::Gpu.format_amount(gpu);
    let (expected, why) = if let Some(share) = share {
        (
            1,
            format!("the pod asks for one device with annotation {share}"),
        )
    } else if gpu == 0 {
        (0, format!("the pod requests no {GPU_RESOURCE}"))
    } else if gpu.is_multiple_of(1000) {
        (
            gpu / 1000,
            format!("the pod requests {GPU_RESOURCE} {amount}"),
        )
    } else if gpu < 1000 {
        (
            1,
            format!("the pod requests {GPU_RESOURCE} {amount}, a share of one device"),
        )
    } else {
        (
            1,
            format!("the pod requests {GPU_RESOURCE} {amount}, not a whole number of GPUs"),
        )
    };
    let found = indices.len() as u64;
    (found != expected).then(|| {
        let expected = if expected == 0 {
            "none".to_string()
        } else {
            expected.to_string()
        };
        format!("names {found} GPU(s); expected {expected} ({why})")
    })
}

/// Requests of one container, Kubernetes-style: a resource with a limit
/// but no request is requested at its limit.
fn container_requests(c: &Container, path: &str, errors: &mut Vec<FieldError>) -> Resources {
    container_requests_of(&c.resources, path, errors)
}

/// Requests of `resources` at `path` (a container, or the pod for
/// pod-level resources): a limit without a request is the request.
fn container_requests_of(
    resources: &ResourceRequirements,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Resources {
    let mut entries: BTreeMap<&str, (&RawQuantity, &str)> = BTreeMap::new();
    for (k, v) in &resources.limits {
        entries.insert(k, (v, "limits"));
    }
    for (k, v) in &resources.requests {
        entries.insert(k, (v, "requests"));
    }
    let mut r = Resources::zero();
    for (name, (raw, which)) in entries {
        let rn = ResourceName::parse(name);
        match raw.parse().and_then(|q| q.to_resource_units(&rn)) {
            Ok(v) => r.set(&rn, v),
            Err(e) => errors.push((format!("{path}.resources.{which}.{name}"), e.to_string())),
        }
    }
    r
}

fn max_into(acc: &mut Resources, other: &Resources) {
    for (n, v) in other.iter() {
        if v > acc.get(&n) {
            acc.set(&n, v);
        }
    }
}

mod dra;
mod node;
mod pod;
mod rules;

pub(crate) use dra::{
    K8sDeviceClass, K8sDeviceTaintRule, K8sResourceClaim, K8sResourceClaimTemplate,
    K8sResourceSlice,
};
pub(crate) use node::K8sNode;

#[cfg(test)]
mod tests;
