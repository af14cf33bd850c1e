//! Dynamic Resource Allocation (`resource.k8s.io/v1`) objects as read
//! (ResourceSlice, DeviceClass, ResourceClaim, ResourceClaimTemplate,
//! DeviceTaintRule), kept by name ([`DraObjects`]), and the one function
//! that turns them and the pods into the snapshot's [`Dra`] ([`build`]):
//! used by the whole-file loader and by the live world state alike.

use std::collections::BTreeMap;
use std::sync::Arc;

use trainyard_model::dra::{
    AllocationMode, ClaimAllocation, ClaimNeed, CounterSet, Device, DeviceConstraint, DeviceTaint,
    DeviceToleration, PodClaim, SelectorSet,
};

use crate::read::Loc;

mod build;

pub use build::{DraBuilt, PodClaims, build, build_with};

/// A ResourceSlice: one part of a driver's pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    pub name: String,
    pub driver: String,
    pub pool: String,
    pub generation: i64,
    /// `resourceSliceCount`: slices of the pool at this generation.
    pub slice_count: i64,
    /// `nodeName`; `None` for a slice whose devices are not node-local
    /// (`nodeSelector`, `allNodes`, per-device node selection): not
    /// supported yet, warned about when read, its devices left out (it
    /// still counts towards its pool's slices).
    pub node: Option<String>,
    /// Attribute and capacity names qualified with the driver's domain.
    pub devices: Vec<Device>,
    pub counter_sets: Vec<CounterSet>,
}

/// A DeviceClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceClass {
    pub name: String,
    /// `spec.selectors[].cel.expression`, in order.
    pub selectors: Vec<String>,
    /// `spec.extendedResourceName`.
    pub extended_resource_name: Option<String>,
}

/// One way to satisfy a request, as written: the class's selectors are
/// not known yet (see [`build`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubRequestDraft {
    /// `req`, or `req/sub` for a `firstAvailable` entry.
    pub name: String,
    pub class: String,
    /// The request's own CEL expressions.
    pub selectors: Vec<String>,
    pub mode: AllocationMode,
    pub admin_access: bool,
    pub tolerations: Vec<DeviceToleration>,
    /// `capacity.requests`, milli-units, names as written.
    pub capacity: BTreeMap<String, u64>,
}

/// One request of a claim, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestDraft {
    pub name: String,
    pub alternatives: Vec<SubRequestDraft>,
}

/// A claim's `spec.devices` as written (a ResourceClaim's, or a
/// ResourceClaimTemplate's `spec.spec`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimSpecDraft {
    pub requests: Vec<RequestDraft>,
    pub constraints: Vec<DeviceConstraint>,
}

/// A ResourceClaim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceClaim {
    /// `namespace/name`.
    pub key: String,
    pub uid: String,
    pub spec: ClaimSpecDraft,
    pub allocation: Option<ClaimAllocation>,
    /// Pods it is reserved for, `namespace/name`.
    pub reserved_for: Vec<String>,
}

/// A ResourceClaimTemplate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimTemplate {
    /// `namespace/name`.
    pub key: String,
    pub spec: ClaimSpecDraft,
}

/// A DeviceTaintRule (`resource.k8s.io/v1alpha3`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaintRule {
    pub name: String,
    /// `spec.deviceSelector`; `None` (no selector) selects no device.
    pub selector: Option<TaintSelector>,
    pub taint: DeviceTaint,
}

/// Which devices a DeviceTaintRule taints: every criterion set must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaintSelector {
    pub driver: Option<String>,
    pub pool: Option<String>,
    pub device: Option<String>,
}

impl TaintSelector {
    pub fn matches(&self, d: &Device) -> bool {
        let ok = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        ok(&self.driver, &d.driver) && ok(&self.pool, &d.pool) && ok(&self.device, &d.name)
    }
}

/// The DRA kinds the reader accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DraKind {
    ResourceSlice,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    DeviceTaintRule,
}

impl DraKind {
    /// The kind named `kind`, if it is one of the five.
    pub fn parse(kind: &str) -> Option<DraKind> {
        Some(match kind {
            "ResourceSlice" => DraKind::ResourceSlice,
            "DeviceClass" => DraKind::DeviceClass,
            "ResourceClaim" => DraKind::ResourceClaim,
            "ResourceClaimTemplate" => DraKind::ResourceClaimTemplate,
            "DeviceTaintRule" => DraKind::DeviceTaintRule,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DraKind::ResourceSlice => "ResourceSlice",
            DraKind::DeviceClass => "DeviceClass",
            DraKind::ResourceClaim => "ResourceClaim",
            DraKind::ResourceClaimTemplate => "ResourceClaimTemplate",
            DraKind::DeviceTaintRule => "DeviceTaintRule",
        }
    }

    pub fn namespaced(self) -> bool {
        matches!(
            self,
            DraKind::ResourceClaim | DraKind::ResourceClaimTemplate
        )
    }
}

/// One DRA object, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DraObject {
    Slice(Slice),
    Class(DeviceClass),
    Claim(ResourceClaim),
    Template(ClaimTemplate),
    TaintRule(TaintRule),
}

impl DraObject {
    pub fn kind(&self) -> DraKind {
        match self {
            DraObject::Slice(_) => DraKind::ResourceSlice,
            DraObject::Class(_) => DraKind::DeviceClass,
            DraObject::Claim(_) => DraKind::ResourceClaim,
            DraObject::Template(_) => DraKind::ResourceClaimTemplate,
            DraObject::TaintRule(_) => DraKind::DeviceTaintRule,
        }
    }

    /// The object's key within its kind: `name`, or `namespace/name` for
    /// claims and templates.
    pub fn key(&self) -> &str {
        match self {
            DraObject::Slice(s) => &s.name,
            DraObject::Class(c) => &c.name,
            DraObject::Claim(c) => &c.key,
            DraObject::Template(t) => &t.key,
            DraObject::TaintRule(r) => &r.name,
        }
    }

    /// `Kind key`, as messages name objects.
    pub fn object(&self) -> String {
        format!("{} {}", self.kind().as_str(), self.key())
    }
}

/// Every DRA object, by kind and key.
#[derive(Clone, Debug, Default)]
pub struct DraObjects {
    pub slices: BTreeMap<String, (Loc, Slice)>,
    pub classes: BTreeMap<String, (Loc, DeviceClass)>,
    pub claims: BTreeMap<String, (Loc, ResourceClaim)>,
    pub templates: BTreeMap<String, (Loc, ClaimTemplate)>,
    pub taint_rules: BTreeMap<String, (Loc, TaintRule)>,
}

impl DraObjects {
    /// Adds or replaces `object`.
    pub fn upsert(&mut self, loc: Loc, object: DraObject) {
        match object {
            DraObject::Slice(s) => {
                self.slices.insert(s.name.clone(), (loc, s));
            }
            DraObject::Class(c) => {
                self.classes.insert(c.name.clone(), (loc, c));
            }
            DraObject::Claim(c) => {
                self.claims.insert(c.key.clone(), (loc, c));
            }
            DraObject::Template(t) => {
                self.templates.insert(t.key.clone(), (loc, t));
            }
            DraObject::TaintRule(r) => {
                self.taint_rules.insert(r.name.clone(), (loc, r));
            }
        }
    }

    /// Removes the object of `kind` with `key`; whether there was one.
    pub fn remove(&mut self, kind: DraKind, key: &str) -> bool {
        match kind {
            DraKind::ResourceSlice => self.slices.remove(key).is_some(),
            DraKind::DeviceClass => self.classes.remove(key).is_some(),
            DraKind::ResourceClaim => self.claims.remove(key).is_some(),
            DraKind::ResourceClaimTemplate => self.templates.remove(key).is_some(),
            DraKind::DeviceTaintRule => self.taint_rules.remove(key).is_some(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.slices.is_empty()
            && self.classes.is_empty()
            && self.claims.is_empty()
            && self.templates.is_empty()
            && self.taint_rules.is_empty()
    }
}

/// Where a pod's claim comes from (`spec.resourceClaims[]`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClaimSource {
    /// `resourceClaimName`: a claim of the pod's namespace.
    Claim(String),
    /// `resourceClaimTemplateName`: a template of the pod's namespace.
    Template(String),
}

/// One entry of a pod's `spec.resourceClaims`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodResourceClaim {
    pub name: String,
    pub source: ClaimSource,
}

/// The pod's claims and statuses as read, for [`build`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodDraRefs {
    pub claims: Vec<PodResourceClaim>,
    /// `status.resourceClaimStatuses`: claim name in the pod → the claim
    /// made for it (`None`: none was needed, the entry is ignored).
    pub statuses: BTreeMap<String, Option<String>>,
    /// `status.extendedResourceClaimStatus.resourceClaimName`: the claim of
    /// the pod's DRA-backed extended resources (KEP-5004).
    pub extended: Option<String>,
}

impl PodDraRefs {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.extended.is_none()
    }
}

/// A name as Kubernetes qualifies an attribute or capacity of a device of
/// `driver`: one without a domain (no `/`) takes the driver's.
pub fn qualify(driver: &str, name: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        format!("{driver}/{name}")
    }
}

/// Selector sets by value, with stable indices: sorted, deduplicated.
pub(crate) fn index_sets(sets: impl IntoIterator<Item = SelectorSet>) -> Vec<SelectorSet> {
    let mut v: Vec<SelectorSet> = sets.into_iter().collect();
    v.sort();
    v.dedup();
    v
}

/// What a claim means for a pod: its spec when the pod alone will hold a
/// fresh allocation, else its key.
pub(crate) fn need(spec: &Arc<trainyard_model::dra::ClaimSpec>, own: bool, key: &str) -> ClaimNeed {
    if own {
        ClaimNeed::Own(Arc::clone(spec))
    } else {
        ClaimNeed::Shared(key.to_string())
    }
}

/// A pod's claim, by the name it uses and the claim's key.
pub(crate) fn pod_claim(name: &str, key: &str) -> PodClaim {
    PodClaim {
        name: name.to_string(),
        claim: key.to_string(),
    }
}
