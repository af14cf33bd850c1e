//! Kubernetes `Node`, `Pod` and `PriorityClass`: the fields Trainyard reads.
//! Other fields are ignored, so real `kubectl get -o yaml` output parses.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use trainyard_crd::de::null_default;
use trainyard_crd::gpu::{GpuShare, GpuSharingRequest, gpu_sharing_request};
use trainyard_crd::{ObjectMeta, QuantityError, RawQuantity, keys, parse_rfc3339};
use trainyard_model::resources::GPU_RESOURCE;
use trainyard_model::{
    GpuDevice, LabelSelectorOperator, Node, NodeSelectorRequirement, NodeSelectorTerm,
    PlacementConstraints, ResourceName, Resources, Taint, TaintEffect, Timestamp, Toleration,
    TolerationOperator,
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
// Node

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct K8sNode {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    spec: NodeSpec,
    #[serde(default, deserialize_with = "null_default")]
    status: NodeStatus,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeSpec {
    #[serde(default, deserialize_with = "null_default")]
    taints: Vec<K8sTaint>,
    #[serde(default, deserialize_with = "null_default")]
    unschedulable: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sTaint {
    #[serde(default, deserialize_with = "null_default")]
    key: String,
    #[serde(default, deserialize_with = "null_default")]
    value: String,
    effect: Effect,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeStatus {
    #[serde(default, deserialize_with = "null_default")]
    allocatable: BTreeMap<String, RawQuantity>,
}

impl K8sNode {
    /// Converts to the model. Errors are (field, message); warnings are
    /// plain messages about this node.
    pub(crate) fn convert(self, warnings: &mut Vec<String>) -> Result<Node, Vec<FieldError>> {
        let mut errors = Vec::new();
        let name = self.metadata.name.clone();
        if name.is_empty() {
            errors.push((
                "metadata.name".to_string(),
                "missing; every Node needs a name".to_string(),
            ));
        }
        let mut allocatable = Resources::zero();
        let mut max_pods = None;
        let mut gpu_count = 0u32;
        for (res, raw) in &self.status.allocatable {
            let field = format!("status.allocatable.{res}");
            let q = match raw.parse() {
                Ok(q) => q,
                Err(e) => {
                    errors.push((field, e.to_string()));
                    continue;
                }
            };
            match res.as_str() {
                "pods" => match q.to_whole_units().map(u32::try_from) {
                    Ok(Ok(n)) => max_pods = Some(n),
                    Ok(Err(_)) => errors.push((
                        field,
                        format!("{q} pods is too many; expected at most {}", u32::MAX),
                    )),
                    Err(e) => errors.push((field, e.to_string())),
                },
                GPU_RESOURCE => match q.to_whole_units() {
                    Ok(n) if n <= MAX_NODE_GPUS => {
                        // At most MAX_NODE_GPUS, so both conversions are exact.
                        gpu_count = n as u32;
                        allocatable.gpu = n * 1000;
                    }
                    Ok(n) => errors.push((field, too_many_gpus(&n.to_string()))),
                    Err(QuantityError::Overflow(text)) => {
                        errors.push((field, too_many_gpus(&text)));
                    }
                    Err(e) => errors.push((field, format!("{e} of GPU devices"))),
                },
                other => {
                    let rn = ResourceName::parse(other);
                    match q.to_resource_units(&rn) {
                        Ok(v) => allocatable.set(&rn, v),
                        Err(e) => errors.push((field, e.to_string())),
                    }
                }
            }
        }
        let model = self
            .metadata
            .labels
            .get(keys::NODE_GPU_PRODUCT)
            .cloned()
            .unwrap_or_default();
        let memory_bytes = match self.metadata.labels.get(keys::NODE_GPU_MEMORY_MIB) {
            None => 0,
            Some(v) => match v
                .trim()
                .parse::<u64>()
                .ok()
                .and_then(|mib| mib.checked_mul(1 << 20))
            {
                Some(b) => b,
                None => {
                    warnings.push(format!(
                        "Node {name}: label {}={v:?} is not a whole number of MiB; GPU memory taken as unknown",
                        keys::NODE_GPU_MEMORY_MIB
                    ));
                    0
                }
            },
        };
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Node {
            name,
            allocatable,
            max_pods,
            labels: self.metadata.labels,
            taints: self
                .spec
                .taints
                .into_iter()
                .map(|t| Taint {
                    key: t.key,
                    value: t.value,
                    effect: t.effect.0,
                })
                .collect(),
            unschedulable: self.spec.unschedulable,
            gpus: (0..gpu_count)
                .map(|index| GpuDevice {
                    index,
                    model: model.clone(),
                    memory_bytes,
                })
                .collect(),
        })
    }
}

fn too_many_gpus(got: &str) -> String {
    format!("expected at most {MAX_NODE_GPUS} GPUs per node, got {got}")
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
    #[serde(default, deserialize_with = "null_default")]
    node_selector: BTreeMap<String, String>,
    #[serde(default)]
    affinity: Option<Affinity>,
    #[serde(default, deserialize_with = "null_default")]
    tolerations: Vec<K8sToleration>,
    #[serde(default, deserialize_with = "null_default")]
    topology_spread_constraints: Vec<SpreadConstraint>,
    #[serde(default, deserialize_with = "null_default")]
    resource_claims: Vec<serde_json::Value>,
    #[serde(default, deserialize_with = "null_default")]
    scheduling_gates: Vec<SchedulingGate>,
    #[serde(default)]
    runtime_class_name: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    volumes: Vec<Volume>,
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
}

/// One entry of `status.conditions`: only `type` and `lastTransitionTime`
/// are read, and only for the types in [`START_CONDITIONS`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodCondition {
    #[serde(rename = "type", default, deserialize_with = "null_default")]
    kind: String,
    #[serde(default)]
    last_transition_time: Option<String>,
}

/// Conditions whose `lastTransitionTime` stands in for a bound pod's start
/// time when `status.startTime` is absent (the earliest one is used).
const START_CONDITIONS: &[&str] = &["Ready", "PodScheduled"];

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Container {
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
    required_during_scheduling_ignored_during_execution: Vec<serde_json::Value>,
    #[serde(default, deserialize_with = "null_default")]
    preferred_during_scheduling_ignored_during_execution: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpreadConstraint {
    #[serde(default)]
    when_unsatisfiable: Option<WhenUnsatisfiable>,
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
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// A pending pod's `status.nominatedNodeName` and since when: the
    /// `trainyard.io/nominated-at` annotation, else `creationTimestamp`,
    /// else 1970-01-01T00:00:00Z; and the devices held for it, from its
    /// `trainyard.io/gpu-indices`. The node is checked at assembly.
    pub nomination: Option<(String, Timestamp, Option<Vec<u32>>)>,
}

impl PodInfo {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
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
    let mut entries: BTreeMap<&str, (&RawQuantity, &str)> = BTreeMap::new();
    for (k, v) in &c.resources.limits {
        entries.insert(k, (v, "limits"));
    }
    for (k, v) in &c.resources.requests {
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

impl K8sPod {
    /// Converts to the model. Errors are (field, message); warnings are
    /// plain messages about this pod.
    pub(crate) fn convert(self, warnings: &mut Vec<String>) -> Result<PodInfo, Vec<FieldError>> {
        let mut errors: Vec<FieldError> = Vec::new();
        let meta = self.metadata;
        let spec = self.spec;
        if meta.name.is_empty() {
            errors.push((
                "metadata.name".into(),
                "missing; every Pod needs a name".into(),
            ));
        }
        let created = meta.creation_time().unwrap_or_else(|e| {
            errors.push(("metadata.creationTimestamp".into(), e.to_string()));
            None
        });
        // Being deleted: the timestamp is checked, its presence is what counts.
        if let Err(e) = meta.deletion_time() {
            errors.push(("metadata.deletionTimestamp".into(), e.to_string()));
        }
        let terminating = meta.deletion_timestamp.is_some();

        // Effective requests: max(sum of app containers and sidecars,
        // each init container plus the sidecars started before it) + overhead.
        let mut sum = Resources::zero();
        for (i, c) in spec.containers.iter().enumerate() {
            sum.add(&container_requests(
                c,
                &format!("spec.containers[{i}]"),
                &mut errors,
            ));
        }
        let mut sidecars = Resources::zero();
        let mut init_max = Resources::zero();
        for (i, c) in spec.init_containers.iter().enumerate() {
            let r = container_requests(c, &format!("spec.initContainers[{i}]"), &mut errors);
            if c.restart_policy.as_deref() == Some("Always") {
                sidecars.add(&r);
                max_into(&mut init_max, &sidecars);
            } else {
                let mut with_sidecars = sidecars.clone();
                with_sidecars.add(&r);
                max_into(&mut init_max, &with_sidecars);
            }
        }
        sum.add(&sidecars);
        let mut requests = sum;
        max_into(&mut requests, &init_max);
        for (name, raw) in &spec.overhead {
            let rn = ResourceName::parse(name);
            match raw.parse().and_then(|q| q.to_resource_units(&rn)) {
                Ok(v) => {
                    let mut o = Resources::zero();
                    o.set(&rn, v);
                    requests.add(&o);
                }
                Err(e) => errors.push((format!("spec.overhead.{name}"), e.to_string())),
            }
        }

        // Placement.
        let mut unsupported = Vec::new();
        let mut ignored = Vec::new();
        let mut required_affinity = Vec::new();
        if let Some(aff) = &spec.affinity {
            if let Some(na) = &aff.node_affinity {
                if let Some(sel) = &na.required_during_scheduling_ignored_during_execution {
                    if sel.node_selector_terms.is_empty() {
                        errors.push((
                            REQUIRED_TERMS.to_string(),
                            "must not be empty: the Kubernetes API rejects a required node affinity without terms; expected at least one term (or leave out requiredDuringSchedulingIgnoredDuringExecution)".to_string(),
                        ));
                    }
                    for (i, t) in sel.node_selector_terms.iter().enumerate() {
                        let term = format!("{REQUIRED_TERMS}[{i}]");
                        for (j, r) in t.match_expressions.iter().enumerate() {
                            check_requirement(
                                r,
                                &format!("{term}.matchExpressions[{j}]"),
                                false,
                                &mut errors,
                            );
                        }
                        for (j, r) in t.match_fields.iter().enumerate() {
                            check_requirement(
                                r,
                                &format!("{term}.matchFields[{j}]"),
                                true,
                                &mut errors,
                            );
                        }
                    }
                    required_affinity = sel
                        .node_selector_terms
                        .iter()
                        .map(|t| NodeSelectorTerm {
                            match_expressions: t
                                .match_expressions
                                .iter()
                                .map(requirement)
                                .collect(),
                            match_fields: t.match_fields.iter().map(requirement).collect(),
                        })
                        .collect();
                }
                if !na
                    .preferred_during_scheduling_ignored_during_execution
                    .is_empty()
                {
                    ignored.push("preferred node affinity".to_string());
                }
            }
            for (what, pa) in [
                ("podAffinity", &aff.pod_affinity),
                ("podAntiAffinity", &aff.pod_anti_affinity),
            ] {
                if let Some(pa) = pa {
                    if !pa
                        .required_during_scheduling_ignored_during_execution
                        .is_empty()
                    {
                        unsupported.push(format!("{what} (required)"));
                    }
                    if !pa
                        .preferred_during_scheduling_ignored_during_execution
                        .is_empty()
                    {
                        ignored.push(format!("{what} (preferred)"));
                    }
                }
            }
        }
        let spread = |w| {
            spec.topology_spread_constraints
                .iter()
                .any(|t| t.when_unsatisfiable() == w)
        };
        if spread(WhenUnsatisfiable::DoNotSchedule) {
            unsupported.push("topologySpreadConstraints (DoNotSchedule)".to_string());
        }
        if spread(WhenUnsatisfiable::ScheduleAnyway) {
            ignored.push("topologySpreadConstraints (ScheduleAnyway)".to_string());
        }
        if spec
            .containers
            .iter()
            .chain(&spec.init_containers)
            .flat_map(|c| &c.ports)
            .any(|p| p.host_port.is_some_and(|h| h > 0))
        {
            unsupported.push("hostPort".to_string());
        }
        if !spec.resource_claims.is_empty() {
            unsupported.push("resourceClaims (dynamic resource allocation)".to_string());
        }
        // A gated pod is not ready for scheduling until every gate is removed.
        for (i, g) in spec.scheduling_gates.iter().enumerate() {
            if g.name.is_empty() {
                errors.push((
                    format!("spec.schedulingGates[{i}].name"),
                    "missing; expected the gate's name, such as example.com/quota-check"
                        .to_string(),
                ));
            }
        }
        if !spec.scheduling_gates.is_empty() {
            let names: Vec<&str> = spec
                .scheduling_gates
                .iter()
                .map(|g| g.name.as_str())
                .collect();
            unsupported.push(format!(
                "schedulingGates [{}] (pod is not ready for scheduling)",
                names.join(", ")
            ));
        }
        let mut unchecked = Vec::new();
        if let Some(rc) = spec.runtime_class_name.as_deref().filter(|n| !n.is_empty()) {
            unchecked.push(format!(
                "runtimeClassName {rc} ignored: its RuntimeClass node scheduling is not read"
            ));
        }
        for (i, v) in spec.volumes.iter().enumerate() {
            let Some(pvc) = &v.persistent_volume_claim else {
                continue;
            };
            if pvc.claim_name.is_empty() {
                errors.push((
                    format!("spec.volumes[{i}].persistentVolumeClaim.claimName"),
                    "missing; expected the name of a PersistentVolumeClaim in the pod's namespace"
                        .to_string(),
                ));
                continue;
            }
            unchecked.push(format!(
                "volume {} uses persistentVolumeClaim {}: PVC volume topology/node affinity is not checked",
                v.name, pvc.claim_name
            ));
        }
        // GPU-sharing annotations (docs/gpu-sharing-requests.md), checked
        // against the pod's nvidia.com/gpu requests and limits.
        let mut gpu_resources = Vec::new();
        for (list, containers) in [
            ("containers", &spec.containers),
            ("initContainers", &spec.init_containers),
        ] {
            for (i, c) in containers.iter().enumerate() {
                for (which, map) in [
                    ("requests", &c.resources.requests),
                    ("limits", &c.resources.limits),
                ] {
                    if let Some(v) = map.get(GPU_RESOURCE) {
                        gpu_resources.push((
                            format!("spec.{list}[{i}].resources.{which}.{GPU_RESOURCE}"),
                            v.0.clone(),
                        ));
                    }
                }
            }
        }
        let sharing =
            gpu_sharing_request(&meta.annotations, &gpu_resources).unwrap_or_else(|errs| {
                for e in errs {
                    errors.push((
                        format!("metadata.annotations.{}", e.key),
                        e.problem.to_string(),
                    ));
                }
                GpuSharingRequest::default()
            });
        let mut gpu_memory = None;
        match sharing.share {
            Some(GpuShare::Fraction { milli, .. }) => requests.gpu = milli,
            Some(GpuShare::Memory { bytes, .. }) => gpu_memory = Some(bytes),
            None => {}
        }
        // How a share was asked for, for messages: `gpu-fraction="0.5"`.
        let share_note = sharing.share.map(|s| {
            let value = meta.annotations.get(s.key()).map_or("", String::as_str);
            format!("{}={value:?}", s.key())
        });
        if let Some(n) = &sharing.unsupported_num_devices {
            unsupported.push(format!(
                "{}={n:?} (a GPU share spread over several devices)",
                keys::KAI_GPU_FRACTION_NUM_DEVICES
            ));
        }

        let tolerations = spec
            .tolerations
            .into_iter()
            .map(|t| Toleration {
                key: t.key,
                operator: t.operator.map_or(TolerationOperator::Equal, |o| o.0),
                value: t.value,
                effect: t.effect.and_then(|e| e.0),
            })
            .collect();

        // Device indices: an empty value counts as absent. Only a bound pod
        // holds devices; a list that cannot be right for its request is
        // dropped with a warning (the core then assigns devices itself).
        let phase = self.status.phase.clone().unwrap_or_default();
        let terminal = phase == "Succeeded" || phase == "Failed";
        let node_name = spec.node_name.filter(|n| !n.is_empty());
        let gpus = match meta
            .annotations
            .get(keys::GPU_INDICES)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
        {
            None => None,
            Some(v) => match parse_gpu_indices(v) {
                Err(e) => {
                    errors.push((format!("metadata.annotations.{}", keys::GPU_INDICES), e));
                    None
                }
                Ok(_) if node_name.is_none() || terminal => None,
                Ok(mut idx) => match gpu_indices_problem(&idx, requests.gpu, share_note.as_deref())
                {
                    Some(problem) => {
                        warnings.push(format!(
                            "Pod {}/{}: annotation {}={v:?} {problem}; the pod's devices are taken as unknown and Trainyard assigns them",
                            meta.namespace_or_default(),
                            meta.name,
                            keys::GPU_INDICES
                        ));
                        None
                    }
                    None => {
                        idx.sort_unstable();
                        Some(idx)
                    }
                },
            },
        };
        // Start time and nomination (docs/preemption-api.md), checked on
        // every pod, used for Trainyard's bound and pending pods.
        let status = self.status;
        let mut time = |text: Option<&str>, field: String| {
            text.and_then(|t| match parse_rfc3339(t) {
                Ok(ts) => Some(ts),
                Err(e) => {
                    errors.push((field, e.to_string()));
                    None
                }
            })
        };
        let start_time = time(status.start_time.as_deref(), "status.startTime".into());
        let mut condition_time: Option<Timestamp> = None;
        for (i, c) in status.conditions.iter().enumerate() {
            if !START_CONDITIONS.contains(&c.kind.as_str()) {
                continue;
            }
            let field = format!("status.conditions[{i}].lastTransitionTime");
            if let Some(t) = time(c.last_transition_time.as_deref(), field) {
                condition_time = Some(condition_time.map_or(t, |c| c.min(t)));
            }
        }
        let started = start_time.or(condition_time);
        let nominated_at = time(
            meta.annotations
                .get(keys::NOMINATED_AT)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty()),
            format!("metadata.annotations.{}", keys::NOMINATED_AT),
        );
        // A nominated pod's `trainyard.io/gpu-indices` names the devices
        // held for it (written with the nomination).
        let nominated_gpus = meta
            .annotations
            .get(keys::GPU_INDICES)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .and_then(|v| parse_gpu_indices(v).ok());
        let nomination = status
            .nominated_node_name
            .filter(|n| !n.is_empty() && node_name.is_none() && !terminal)
            .map(|n| {
                (
                    n,
                    nominated_at.or(created).unwrap_or(Timestamp(0)),
                    nominated_gpus,
                )
            });
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(PodInfo {
            namespace: meta.namespace_or_default().to_string(),
            name: meta.name.clone(),
            created,
            scheduler: spec
                .scheduler_name
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "default-scheduler".to_string()),
            node_name,
            priority: spec.priority,
            priority_class: spec.priority_class_name.filter(|n| !n.is_empty()),
            never_preempts: spec.preemption_policy.0,
            requests,
            constraints: PlacementConstraints {
                node_selector: spec.node_selector,
                required_affinity,
                tolerations,
                gpu_models: sharing.models,
                gpu_memory,
                unsupported,
            },
            ignored,
            unchecked,
            terminal,
            gpus,
            gpu_share: sharing.share,
            started,
            terminating,
            nomination,
            meta,
        })
    }
}

/// Checks one node selector requirement at `path` as the Kubernetes API
/// does: `matchFields` (`field_selector`) only accept the key
/// `metadata.name`; `In`/`NotIn` need values, `Exists`/`DoesNotExist` take
/// none, and `Gt`/`Lt` take exactly one integer.
fn check_requirement(
    r: &K8sRequirement,
    path: &str,
    field_selector: bool,
    errors: &mut Vec<FieldError>,
) {
    if field_selector && r.key != "metadata.name" {
        errors.push((
            format!("{path}.key"),
            format!(
                "unsupported field selector key {:?}; expected \"metadata.name\", the only node field matchFields may use",
                r.key
            ),
        ));
    }
    let op = r.operator.0;
    let values = format!("{path}.values");
    match op {
        LabelSelectorOperator::In | LabelSelectorOperator::NotIn => {
            if r.values.is_empty() {
                errors.push((
                    values,
                    format!("must not be empty for operator {op:?}; expected at least one value"),
                ));
            }
        }
        LabelSelectorOperator::Exists | LabelSelectorOperator::DoesNotExist => {
            if !r.values.is_empty() {
                errors.push((
                    values,
                    format!(
                        "must be empty for operator {op:?}, found {:?}; expected no values",
                        r.values
                    ),
                ));
            }
        }
        LabelSelectorOperator::Gt | LabelSelectorOperator::Lt => match r.values.as_slice() {
            [v] => {
                if v.parse::<i64>().is_err() {
                    errors.push((
                        format!("{values}[0]"),
                        format!(
                            "{v:?} is not an integer; expected one whole number for operator {op:?}, such as \"8\""
                        ),
                    ));
                }
            }
            other => errors.push((
                values,
                format!(
                    "expected exactly one integer value for operator {op:?}, found {} value(s) {other:?}",
                    other.len()
                ),
            )),
        },
    }
}

fn requirement(r: &K8sRequirement) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: r.key.clone(),
        operator: r.operator.0,
        values: r.values.clone(),
    }
}

#[cfg(test)]
mod tests;
