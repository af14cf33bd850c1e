//! ResourceClaim and ResourceClaimTemplate: the claim spec (requests,
//! `firstAvailable` alternatives, constraints), the allocation and the
//! reservations.

use trainyard_model::dra::{AllocatedDevice, AllocationMode, ClaimAllocation, DeviceConstraint};

use super::super::{K8sNodeSelectorTerm, NodeSelector};
use super::*;
use crate::dra::{ClaimSpecDraft, ClaimTemplate, RequestDraft, ResourceClaim, SubRequestDraft};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct K8sResourceClaim {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    spec: ClaimSpecK8s,
    #[serde(default, deserialize_with = "null_default")]
    status: ClaimStatus,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct K8sResourceClaimTemplate {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    spec: TemplateSpec,
}

#[derive(Default, Deserialize)]
struct TemplateSpec {
    #[serde(default, deserialize_with = "null_default")]
    spec: ClaimSpecK8s,
}

#[derive(Default, Deserialize)]
struct ClaimSpecK8s {
    #[serde(default, deserialize_with = "null_default")]
    devices: DeviceClaim,
}

#[derive(Default, Deserialize)]
struct DeviceClaim {
    #[serde(default, deserialize_with = "null_default")]
    requests: Vec<K8sRequest>,
    #[serde(default, deserialize_with = "null_default")]
    constraints: Vec<K8sConstraint>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sRequest {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default)]
    exactly: Option<K8sExact>,
    #[serde(default)]
    first_available: Option<Vec<K8sExact>>,
}

/// `exactly`, or one entry of `firstAvailable` (which also has a name).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sExact {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default, deserialize_with = "null_default")]
    device_class_name: String,
    #[serde(default, deserialize_with = "null_default")]
    selectors: Vec<K8sSelector>,
    #[serde(default)]
    allocation_mode: Option<String>,
    #[serde(default)]
    count: Option<i64>,
    #[serde(default)]
    admin_access: Option<bool>,
    #[serde(default, deserialize_with = "null_default")]
    tolerations: Vec<K8sDeviceToleration>,
    #[serde(default)]
    capacity: Option<K8sCapacityRequirements>,
}

#[derive(Deserialize)]
struct K8sCapacityRequirements {
    #[serde(default, deserialize_with = "null_default")]
    requests: BTreeMap<String, RawQuantity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sConstraint {
    #[serde(default, deserialize_with = "null_default")]
    requests: Vec<String>,
    #[serde(default)]
    match_attribute: Option<String>,
    #[serde(default)]
    distinct_attribute: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimStatus {
    #[serde(default)]
    allocation: Option<K8sAllocation>,
    #[serde(default, deserialize_with = "null_default")]
    reserved_for: Vec<K8sConsumer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sAllocation {
    #[serde(default)]
    devices: Option<K8sAllocatedDevices>,
    #[serde(default)]
    node_selector: Option<NodeSelector>,
}

#[derive(Deserialize)]
struct K8sAllocatedDevices {
    #[serde(default, deserialize_with = "null_default")]
    results: Vec<K8sResult>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sResult {
    #[serde(default, deserialize_with = "null_default")]
    request: String,
    #[serde(default, deserialize_with = "null_default")]
    driver: String,
    #[serde(default, deserialize_with = "null_default")]
    pool: String,
    #[serde(default, deserialize_with = "null_default")]
    device: String,
    #[serde(default)]
    admin_access: Option<bool>,
    #[serde(default, deserialize_with = "null_default")]
    consumed_capacity: BTreeMap<String, RawQuantity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sConsumer {
    #[serde(default)]
    api_group: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    resource: String,
    #[serde(default, deserialize_with = "null_default")]
    name: String,
}

/// The allocation mode of a request at `path`.
fn mode(r: &K8sExact, path: &str, errors: &mut Vec<FieldError>) -> AllocationMode {
    match r.allocation_mode.as_deref().unwrap_or("") {
        "" | "ExactCount" => match r.count {
            None => AllocationMode::ExactCount(1),
            Some(n) if n >= 1 && n <= i64::from(u32::MAX) => AllocationMode::ExactCount(n as u32),
            Some(n) => {
                errors.push((
                    format!("{path}.count"),
                    format!(
                        "{n}; expected a number of devices greater than zero with allocationMode ExactCount"
                    ),
                ));
                AllocationMode::ExactCount(1)
            }
        },
        "All" => {
            if let Some(n) = r.count {
                errors.push((
                    format!("{path}.count"),
                    format!("{n}: count is only used with allocationMode ExactCount; leave it out with All"),
                ));
            }
            AllocationMode::All
        }
        other => {
            errors.push((
                format!("{path}.allocationMode"),
                format!("unknown allocationMode {other:?}; expected ExactCount or All"),
            ));
            AllocationMode::ExactCount(1)
        }
    }
}

/// One way to satisfy a request, named `name`, at `path`.
fn sub_request(
    r: K8sExact,
    name: String,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> SubRequestDraft {
    if r.device_class_name.is_empty() {
        missing(
            errors,
            format!("{path}.deviceClassName"),
            "the name of a DeviceClass",
        );
    }
    let mode = mode(&r, path, errors);
    let selectors = cel_expressions(r.selectors, &format!("{path}.selectors"), errors);
    let tolerations = r
        .tolerations
        .into_iter()
        .enumerate()
        .map(|(i, t)| toleration(t, &format!("{path}.tolerations[{i}]"), errors))
        .collect();
    let capacity = r
        .capacity
        .map(|c| c.requests)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(k, q)| {
            let v = milli(&q, &format!("{path}.capacity.requests.{k}"), errors)?;
            Some((k, v))
        })
        .collect();
    SubRequestDraft {
        name,
        class: r.device_class_name,
        selectors,
        mode,
        admin_access: r.admin_access.unwrap_or(false),
        tolerations,
        capacity,
    }
}

/// A claim spec (`spec` of a claim, `spec.spec` of a template) at `path`.
fn claim_spec(spec: ClaimSpecK8s, path: &str, errors: &mut Vec<FieldError>) -> ClaimSpecDraft {
    let devices = spec.devices;
    let mut requests = Vec::with_capacity(devices.requests.len());
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for (i, r) in devices.requests.into_iter().enumerate() {
        let at = format!("{path}.devices.requests[{i}]");
        if r.name.is_empty() {
            missing(errors, format!("{at}.name"), "the request's name");
        } else if let Some(first) = names.insert(r.name.clone(), i) {
            errors.push((
                format!("{at}.name"),
                format!(
                    "{:?} is also the name of requests[{first}]; request names must be unique",
                    r.name
                ),
            ));
        }
        let alternatives = match (r.exactly, r.first_available) {
            (Some(e), None) => vec![sub_request(
                e,
                r.name.clone(),
                &format!("{at}.exactly"),
                errors,
            )],
            (None, Some(subs)) if !subs.is_empty() => {
                let mut out = Vec::with_capacity(subs.len());
                for (j, s) in subs.into_iter().enumerate() {
                    let sp = format!("{at}.firstAvailable[{j}]");
                    if s.name.is_empty() {
                        missing(errors, format!("{sp}.name"), "the subrequest's name");
                    }
                    let name = format!("{}/{}", r.name, s.name);
                    out.push(sub_request(s, name, &sp, errors));
                }
                out
            }
            (None, Some(_)) => {
                errors.push((
                    format!("{at}.firstAvailable"),
                    "must not be empty; expected at least one subrequest".into(),
                ));
                Vec::new()
            }
            (Some(_), Some(_)) => {
                errors.push((
                    at,
                    "sets both exactly and firstAvailable; expected exactly one of them".into(),
                ));
                Vec::new()
            }
            (None, None) => {
                errors.push((
                    at,
                    "sets neither exactly nor firstAvailable; expected exactly one of them (resource.k8s.io/v1 moved deviceClassName and the other fields under exactly)".into(),
                ));
                Vec::new()
            }
        };
        requests.push(RequestDraft {
            name: r.name,
            alternatives,
        });
    }
    let mut constraints = Vec::with_capacity(devices.constraints.len());
    for (i, c) in devices.constraints.into_iter().enumerate() {
        let at = format!("{path}.devices.constraints[{i}]");
        let (attribute, distinct, field) = match (c.match_attribute, c.distinct_attribute) {
            (Some(a), None) => (a, false, "matchAttribute"),
            (None, Some(a)) => (a, true, "distinctAttribute"),
            _ => {
                errors.push((
                    at,
                    "expected exactly one of matchAttribute or distinctAttribute".into(),
                ));
                continue;
            }
        };
        if !attribute.contains('/') {
            errors.push((
                format!("{at}.{field}"),
                format!(
                    "{attribute:?} must include the domain qualifier, such as gpu.nvidia.com/{attribute}"
                ),
            ));
        }
        for (j, name) in c.requests.iter().enumerate() {
            let main = name.split('/').next().unwrap_or("");
            if !names.contains_key(main) {
                errors.push((
                    format!("{at}.requests[{j}]"),
                    format!("{name:?} is not a request of this claim"),
                ));
            }
        }
        constraints.push(DeviceConstraint {
            requests: c.requests,
            attribute,
            distinct,
        });
    }
    ClaimSpecDraft {
        requests,
        constraints,
    }
}

/// The node an allocation is bound to, from its node selector: one term
/// naming one node by `metadata.name` (matchFields) or by the
/// `kubernetes.io/hostname` label. `Err` for anything else.
fn allocation_node(sel: &NodeSelector) -> Result<String, ()> {
    let [term] = sel.node_selector_terms.as_slice() else {
        return Err(());
    };
    let K8sNodeSelectorTerm {
        match_expressions,
        match_fields,
    } = term;
    let one = |reqs: &[K8sRequirement], key: &str| match reqs {
        [r] if r.key == key && r.operator.0 == LabelSelectorOperator::In => {
            match r.values.as_slice() {
                [v] => Some(v.clone()),
                _ => None,
            }
        }
        _ => None,
    };
    match (match_fields.as_slice(), match_expressions.as_slice()) {
        (f, []) => one(f, "metadata.name").ok_or(()),
        ([], e) => one(e, "kubernetes.io/hostname").ok_or(()),
        _ => Err(()),
    }
}

impl K8sResourceClaim {
    pub(crate) fn convert(self, warnings: &mut Vec<String>) -> Result<DraObject, Vec<FieldError>> {
        let mut errors = Vec::new();
        let meta = self.metadata;
        if meta.name.is_empty() {
            missing(
                &mut errors,
                "metadata.name".into(),
                "the ResourceClaim's name",
            );
        }
        let ns = meta.namespace_or_default().to_string();
        let key = format!("{ns}/{}", meta.name);
        let spec = claim_spec(self.spec, "spec", &mut errors);
        let allocation = self.status.allocation.map(|a| {
            let node = match &a.node_selector {
                None => None,
                Some(sel) => match allocation_node(sel) {
                    Ok(n) => Some(n),
                    Err(()) => {
                        warnings.push(format!(
                            "ResourceClaim {key}: status.allocation.nodeSelector does not name one node (by metadata.name or kubernetes.io/hostname); the allocation is taken as usable from any node"
                        ));
                        None
                    }
                },
            };
            let results = a.devices.map(|d| d.results).unwrap_or_default();
            let mut devices = Vec::with_capacity(results.len());
            for (i, r) in results.into_iter().enumerate() {
                let at = format!("status.allocation.devices.results[{i}]");
                for (field, v) in [
                    ("request", &r.request),
                    ("driver", &r.driver),
                    ("pool", &r.pool),
                    ("device", &r.device),
                ] {
                    if v.is_empty() {
                        missing(&mut errors, format!("{at}.{field}"), "a name");
                    }
                }
                let consumed = r
                    .consumed_capacity
                    .iter()
                    .filter_map(|(k, q)| {
                        let v = milli(q, &format!("{at}.consumedCapacity.{k}"), &mut errors)?;
                        Some((qualify(&r.driver, k), v))
                    })
                    .collect();
                devices.push(AllocatedDevice {
                    request: r.request.into(),
                    driver: r.driver.into(),
                    pool: r.pool.into(),
                    device: r.device.into(),
                    admin_access: r.admin_access.unwrap_or(false),
                    consumed,
                });
            }
            ClaimAllocation { node, devices }
        });
        // Only pods are read; other consumers do not hold devices for
        // Trainyard's pods.
        let reserved_for = self
            .status
            .reserved_for
            .into_iter()
            .filter(|c| c.resource == "pods" && c.api_group.as_deref().unwrap_or("").is_empty())
            .map(|c| format!("{ns}/{}", c.name))
            .collect();
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(DraObject::Claim(ResourceClaim {
            key,
            uid: meta.uid,
            spec,
            allocation,
            reserved_for,
        }))
    }
}

impl K8sResourceClaimTemplate {
    pub(crate) fn convert(self) -> Result<DraObject, Vec<FieldError>> {
        let mut errors = Vec::new();
        let meta = self.metadata;
        if meta.name.is_empty() {
            missing(
                &mut errors,
                "metadata.name".into(),
                "the ResourceClaimTemplate's name",
            );
        }
        let key = format!("{}/{}", meta.namespace_or_default(), meta.name);
        let spec = claim_spec(self.spec.spec, "spec.spec", &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(DraObject::Template(ClaimTemplate { key, spec }))
    }
}
