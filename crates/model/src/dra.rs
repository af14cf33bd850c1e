//! Dynamic Resource Allocation (`resource.k8s.io/v1`) as the core sees it:
//! devices published per node (ResourceSlices), what pods claim
//! (ResourceClaims, from templates or shared), and which devices each
//! claim's selectors accept.
//!
//! Selectors are CEL expressions. The core never evaluates them: the edge
//! that builds a snapshot (`trainyard-dra`) evaluates every selector set
//! against every device once and hands the core the answer as
//! [`DeviceMask`]s, so the core stays a pure function of integers and
//! sets. Quantities (capacity, counters) are integers in milli-units.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A device attribute's value (`resource.k8s.io/v1` `DeviceAttribute`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AttrValue {
    Int(i64),
    Bool(bool),
    String(String),
    /// A semantic version, as written (`1.2.3`).
    Version(String),
}

impl fmt::Display for AttrValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::Int(v) => write!(f, "{v}"),
            AttrValue::Bool(v) => write!(f, "{v}"),
            AttrValue::String(v) | AttrValue::Version(v) => write!(f, "{v:?}"),
        }
    }
}

/// Effect of a device taint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum DeviceTaintEffect {
    /// No new allocation unless tolerated.
    NoSchedule,
    /// No new allocation, and pods using it are evicted, unless tolerated.
    NoExecute,
    /// Informational only (KEP-5055 `None`): never blocks.
    None,
}

/// A taint on one device (from its ResourceSlice or a DeviceTaintRule).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceTaint {
    pub key: String,
    #[serde(default)]
    pub value: String,
    pub effect: DeviceTaintEffect,
}

/// A request's toleration of device taints (Kubernetes toleration rules).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceToleration {
    /// Empty with `exists`: tolerates every taint.
    #[serde(default)]
    pub key: String,
    /// `Exists` (true) or `Equal` (false).
    #[serde(default)]
    pub exists: bool,
    #[serde(default)]
    pub value: String,
    /// `None`: every effect.
    #[serde(default)]
    pub effect: Option<DeviceTaintEffect>,
}

impl DeviceToleration {
    pub fn tolerates(&self, taint: &DeviceTaint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.exists {
            self.key.is_empty() || self.key == taint.key
        } else {
            self.key == taint.key && self.value == taint.value
        }
    }
}

/// Whether `taint` keeps a new allocation off its device for a request
/// with `tolerations`.
pub fn taint_blocks(taint: &DeviceTaint, tolerations: &[DeviceToleration]) -> bool {
    taint.effect != DeviceTaintEffect::None && !tolerations.iter().any(|t| t.tolerates(taint))
}

/// How much of a consumable capacity one allocation takes
/// (`DeviceCapacity.requestPolicy`), in milli-units.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CapacityPolicy {
    /// Taken when the request names no amount.
    pub default: Option<u64>,
    /// Allowed amounts (`validValues`), sorted; empty: see `range`.
    #[serde(default)]
    pub valid_values: Vec<u64>,
    /// `validRange`: min, optional max, optional step.
    #[serde(default)]
    pub range: Option<(u64, Option<u64>, Option<u64>)>,
}

impl CapacityPolicy {
    /// What an allocation asking `asked` (none: the default) is charged,
    /// rounded up to a valid amount; `None` when no valid amount covers it.
    pub fn charge(&self, asked: Option<u64>) -> Option<u64> {
        let want = asked.or(self.default).unwrap_or(0);
        if !self.valid_values.is_empty() {
            return self.valid_values.iter().copied().find(|v| *v >= want);
        }
        if let Some((min, max, step)) = self.range {
            let mut v = want.max(min);
            if let Some(step) = step.filter(|s| *s > 0) {
                let over = (v - min) % step;
                if over != 0 {
                    v = v.checked_add(step - over)?;
                }
            }
            return max.is_none_or(|m| v <= m).then_some(v);
        }
        Some(want)
    }
}

/// One capacity of a device, milli-units.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceCapacity {
    pub value: u64,
    /// Set when the device may be shared (`allowMultipleAllocations`) and
    /// this capacity is consumed per allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<CapacityPolicy>,
}

/// Counters a device draws from a counter set of its pool
/// (`consumesCounters`): partitionable devices such as MIG slices.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CounterUse {
    /// The counter set's name within the device's pool.
    pub set: String,
    /// Counter name → amount (milli-units).
    pub counters: BTreeMap<String, u64>,
}

/// A pool's shared counters (`sharedCounters`), milli-units.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CounterSet {
    pub driver: String,
    pub pool: String,
    pub name: String,
    pub counters: BTreeMap<String, u64>,
}

/// One device published in a ResourceSlice.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Device {
    /// Shared by the devices of a slice (and copied into every allocation
    /// result that names the device).
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub name: Arc<str>,
    /// Fully qualified names (`gpu.nvidia.com/productName`): a name
    /// published without a domain is qualified with the driver's.
    #[serde(default)]
    pub attributes: BTreeMap<String, AttrValue>,
    /// Fully qualified names, as attributes.
    #[serde(default)]
    pub capacity: BTreeMap<String, DeviceCapacity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumes: Vec<CounterUse>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<DeviceTaint>,
    /// `allowMultipleAllocations`: several claims may hold it, each
    /// consuming its capacities.
    #[serde(default)]
    pub multi: bool,
}

impl Device {
    /// `driver/pool/name`, as allocation results name a device.
    pub fn id(&self) -> String {
        format!("{}/{}/{}", self.driver, self.pool, self.name)
    }

    /// The attribute by fully qualified name.
    pub fn attribute(&self, qualified: &str) -> Option<&AttrValue> {
        self.attributes.get(qualified)
    }
}

/// The devices one node can use: those of the slices published for it
/// (`nodeName`), in a fixed order (driver, pool, name), and the counter
/// sets of their pools.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDevices {
    pub devices: Vec<Device>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counter_sets: Vec<CounterSet>,
}

impl NodeDevices {
    /// Position of the counter set `(driver, pool, name)`.
    pub fn counter_set(&self, driver: &str, pool: &str, name: &str) -> Option<usize> {
        self.counter_sets
            .iter()
            .position(|c| c.driver == driver && c.pool == pool && c.name == name)
    }

    /// Position of the device `driver/pool/name`.
    pub fn position(&self, driver: &str, pool: &str, name: &str) -> Option<usize> {
        self.devices
            .iter()
            .position(|d| &*d.driver == driver && &*d.pool == pool && &*d.name == name)
    }
}

/// A request's allocation mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AllocationMode {
    ExactCount(u32),
    /// Every matching device of the node; at least one.
    All,
}

/// One way to satisfy a request: `exactly`, or one entry of
/// `firstAvailable`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SubRequest {
    /// `req` for `exactly`, `req/sub` for a `firstAvailable` entry: the
    /// name allocation results carry.
    pub name: String,
    pub class: String,
    /// Index into [`Dra::selectors`]: the class's selectors and the
    /// request's, all of which must accept a device.
    pub selector: u32,
    pub mode: AllocationMode,
    #[serde(default)]
    pub admin_access: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<DeviceToleration>,
    /// Consumable capacity asked per device (`capacity.requests`), milli.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, u64>,
}

/// One request of a claim: its alternatives, tried in order (one for
/// `exactly`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceRequest {
    pub name: String,
    pub alternatives: Vec<SubRequest>,
}

/// A claim's constraint across its requests' devices.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DeviceConstraint {
    /// Request names it covers (a `firstAvailable` request by its own
    /// name); empty: every request.
    #[serde(default)]
    pub requests: Vec<String>,
    /// Fully qualified attribute name.
    pub attribute: String,
    /// `matchAttribute` (all equal, and every device has it) when false;
    /// `distinctAttribute` (all different) when true.
    pub distinct: bool,
}

impl DeviceConstraint {
    pub fn covers(&self, request: &str) -> bool {
        self.requests.is_empty() || self.requests.iter().any(|r| r == request)
    }
}

/// What a claim asks (`spec.devices`).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClaimSpec {
    pub requests: Vec<DeviceRequest>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<DeviceConstraint>,
}

impl ClaimSpec {
    /// The devices of class `class` the claim asks by count: the sum of
    /// its requests that are `exactly` that class with `ExactCount`.
    /// Requests with alternatives (`firstAvailable`) or in `All` mode ask
    /// no fixed number and are not counted.
    pub fn whole_devices(&self, class: &str) -> u32 {
        self.requests
            .iter()
            .filter_map(|r| match r.alternatives.as_slice() {
                [a] if a.class == class && !a.admin_access => match a.mode {
                    AllocationMode::ExactCount(k) => Some(k),
                    AllocationMode::All => None,
                },
                _ => None,
            })
            .fold(0u32, u32::saturating_add)
    }
}

/// One device of an allocation result.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AllocatedDevice {
    /// The request (or `req/sub`) it serves.
    pub request: Arc<str>,
    pub driver: Arc<str>,
    pub pool: Arc<str>,
    pub device: Arc<str>,
    #[serde(default)]
    pub admin_access: bool,
    /// Capacity consumed on a shared device, milli.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub consumed: BTreeMap<String, u64>,
}

/// A claim's allocation (`status.allocation`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClaimAllocation {
    /// The node whose devices it holds (`nodeSelector` on
    /// `metadata.name`); `None`: usable from any node.
    pub node: Option<String>,
    pub devices: Vec<AllocatedDevice>,
}

/// A ResourceClaim (or one a template will make for a pod).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// `namespace/name`.
    pub key: String,
    #[serde(default)]
    pub uid: String,
    pub spec: Arc<ClaimSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<ClaimAllocation>,
    /// Pods it is reserved for (`status.reservedFor`), `namespace/name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_for: Vec<String>,
    /// Made from this template for one pod, and not yet created by the
    /// claim controller (`namespace/template`): the allocation is planned,
    /// and written once the claim exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_from: Option<String>,
}

/// A pod's use of a claim: the name in `spec.resourceClaims` and the
/// claim's key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodClaim {
    pub name: String,
    pub claim: String,
}

/// Devices accepted by one selector set on each node: bit `i` of a node's
/// mask is its device `i` (`NodeDevices::devices`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMask(pub Vec<u64>);

impl DeviceMask {
    pub fn with_len(n: usize) -> Self {
        DeviceMask(vec![0; n.div_ceil(64)])
    }
    pub fn contains(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    pub fn insert(&mut self, i: usize) {
        if let Some(w) = self.0.get_mut(i / 64) {
            *w |= 1 << (i % 64);
        }
    }
    pub fn count(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(k, w)| {
            (0..64)
                .filter(move |b| w & (1 << b) != 0)
                .map(move |b| k * 64 + b)
        })
    }
}

/// A selector set: a device class's selectors and a request's, by value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SelectorSet {
    pub class: String,
    /// CEL expressions, the class's first.
    pub expressions: Vec<String>,
}

/// Where one selector set matches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectorMatches {
    /// Node name → devices accepted there; nodes without any are absent.
    pub by_node: BTreeMap<String, DeviceMask>,
    /// The first evaluation error (device and message): Kubernetes aborts
    /// the allocation of a claim whose selector fails on a device, so a
    /// request with one is never satisfied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The device class does not exist.
    #[serde(default)]
    pub unknown_class: bool,
}

/// The DRA part of a snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dra {
    /// Devices per node name.
    pub nodes: BTreeMap<String, Arc<NodeDevices>>,
    /// Claims by `namespace/name`.
    pub claims: BTreeMap<String, Arc<Claim>>,
    /// Selector sets, indexed by [`SubRequest::selector`].
    pub selectors: Vec<SelectorSet>,
    /// Their matches, same index.
    pub matches: Vec<Arc<SelectorMatches>>,
    /// Extended resources served by DRA devices (KEP-5004): per node whose
    /// allocatable lacks the resource, the device classes that publish it
    /// (`extendedResourceName`) and how many of their devices it has. The
    /// node's allocatable counts them (`Dra::with_extended`), and a pod
    /// asking the resource there is allocated that many devices.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub backed: BTreeMap<String, Vec<Backed>>,
}

/// A resource a node's DRA devices serve (KEP-5004).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backed {
    /// The resource's name (`nvidia.com/gpu`).
    pub resource: String,
    pub class: String,
    /// The class's own selector set (index into `Dra::selectors`).
    pub selector: u32,
    /// Devices of the class on the node.
    pub devices: u64,
}

impl Dra {
    /// The devices of `b`'s class on `node`, in device order, as GPU slots:
    /// index `k`, the product name and memory their driver publishes
    /// (`productName`, `memory`), when it does.
    pub fn gpu_devices(&self, node: &str, b: &Backed) -> Vec<crate::GpuDevice> {
        let (Some(nd), Some(m)) = (self.nodes.get(node), self.matches.get(b.selector as usize))
        else {
            return Vec::new();
        };
        let Some(mask) = m.by_node.get(node) else {
            return Vec::new();
        };
        mask.iter()
            .filter_map(|i| nd.devices.get(i))
            .enumerate()
            .map(|(k, d)| {
                let model = match d.attributes.get(&format!("{}/productName", d.driver)) {
                    Some(AttrValue::String(s)) => s.clone(),
                    _ => String::new(),
                };
                let memory_bytes = d
                    .capacity
                    .get(&format!("{}/memory", d.driver))
                    .map_or(0, |c| c.value / 1000);
                crate::GpuDevice {
                    index: k as u32,
                    model,
                    memory_bytes,
                }
            })
            .collect()
    }

    /// `nodes` with the resources their DRA devices serve as their
    /// allocatable (a node that has the resource already is left as it
    /// is, so applying this twice changes nothing).
    pub fn with_extended(&self, nodes: &[Arc<crate::Node>]) -> Vec<Arc<crate::Node>> {
        if self.backed.is_empty() {
            return nodes.to_vec();
        }
        nodes
            .iter()
            .map(|n| match self.backed.get(&n.name) {
                None => Arc::clone(n),
                Some(list) => {
                    let mut node = (**n).clone();
                    for b in list {
                        let name = crate::ResourceName::parse(&b.resource);
                        // Idempotent: a node that has the resource (from
                        // a device plugin, or added here before) keeps it.
                        if node.allocatable.get(&name) != 0 {
                            continue;
                        }
                        if name == crate::ResourceName::Gpu {
                            // GPUs one by one, as a device plugin's: slot
                            // `k` is the class's `k`-th device here, so the
                            // core's device choice (rails, NVLink,
                            // fragmentation) is the claim's.
                            node.gpus = self.gpu_devices(&n.name, b);
                            node.allocatable.set(
                                &name,
                                (node.gpus.len() as u64)
                                    .saturating_mul(crate::resources::MILLI_PER_GPU),
                            );
                        } else {
                            node.allocatable.set(&name, b.devices);
                        }
                    }
                    Arc::new(node)
                }
            })
            .collect()
    }
}

impl Dra {
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.claims.is_empty()
    }
}

/// What a pod's claims mean for its placement, by value, so that pods
/// asking the same (each its own claim from one template) share one
/// shape in the core's caches: per claim, its spec when the pod alone
/// will hold a fresh allocation, or its key when the claim is shared or
/// already allocated.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ClaimNeed {
    Own(Arc<ClaimSpec>),
    Shared(String),
    /// The claim made for the pod's DRA-backed extended resources
    /// (KEP-5004), by key: held like a shared claim, and the extended
    /// resources it serves are not allocated again.
    Extended(String),
}
