//! `resource.k8s.io/v1` (and `v1beta2`, same shape) ResourceSlice,
//! DeviceClass, ResourceClaim and ResourceClaimTemplate, and
//! `resource.k8s.io/v1alpha3` DeviceTaintRule: the fields Trainyard reads,
//! converted to [`crate::dra`]'s values. Field meanings follow the API's
//! documentation; other fields are ignored.

use trainyard_model::dra::{
    AttrValue, CapacityPolicy, CounterSet, CounterUse, Device, DeviceCapacity, DeviceTaint,
    DeviceTaintEffect, DeviceToleration,
};

use super::*;
use crate::dra::{DeviceClass, DraObject, Slice, TaintRule, TaintSelector, qualify};

mod claim;

pub(crate) use claim::{K8sResourceClaim, K8sResourceClaimTemplate};

/// A quantity as milli-units, exactly as `to_milli_ceil` gives it; a
/// problem at `path` otherwise.
fn milli(raw: &RawQuantity, path: &str, errors: &mut Vec<FieldError>) -> Option<u64> {
    match raw.parse().and_then(|q| q.to_milli_ceil()) {
        Ok(v) => Some(v),
        Err(e) => {
            errors.push((path.to_string(), e.to_string()));
            None
        }
    }
}

/// A required quantity at `path`.
fn required_milli(
    raw: &Option<RawQuantity>,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Option<u64> {
    match raw {
        Some(r) => milli(r, path, errors),
        None => {
            errors.push((
                path.to_string(),
                "missing; expected a quantity such as \"1\" or \"40Gi\"".to_string(),
            ));
            None
        }
    }
}

fn missing(errors: &mut Vec<FieldError>, path: String, what: &str) {
    errors.push((path, format!("missing; expected {what}")));
}

// ---------------------------------------------------------------------------
// ResourceSlice

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct K8sResourceSlice {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    spec: SliceSpec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SliceSpec {
    #[serde(default, deserialize_with = "null_default")]
    driver: String,
    #[serde(default)]
    pool: Option<K8sPool>,
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    node_selector: Option<serde_json::Value>,
    #[serde(default)]
    all_nodes: Option<bool>,
    #[serde(default)]
    per_device_node_selection: Option<bool>,
    #[serde(default, deserialize_with = "null_default")]
    devices: Vec<K8sDevice>,
    #[serde(default, deserialize_with = "null_default")]
    shared_counters: Vec<K8sCounterSet>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sPool {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    resource_slice_count: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sDevice {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default, deserialize_with = "null_default")]
    attributes: BTreeMap<String, K8sAttribute>,
    #[serde(default, deserialize_with = "null_default")]
    capacity: BTreeMap<String, K8sCapacity>,
    #[serde(default, deserialize_with = "null_default")]
    consumes_counters: Vec<K8sCounterUse>,
    #[serde(default, deserialize_with = "null_default")]
    taints: Vec<K8sDeviceTaint>,
    #[serde(default)]
    allow_multiple_allocations: Option<bool>,
}

#[derive(Deserialize)]
struct K8sAttribute {
    #[serde(default)]
    int: Option<i64>,
    #[serde(default)]
    bool: Option<bool>,
    #[serde(default)]
    string: Option<String>,
    #[serde(default)]
    version: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sCapacity {
    #[serde(default)]
    value: Option<RawQuantity>,
    #[serde(default)]
    request_policy: Option<K8sRequestPolicy>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sRequestPolicy {
    #[serde(default)]
    default: Option<RawQuantity>,
    #[serde(default, deserialize_with = "null_default")]
    valid_values: Vec<RawQuantity>,
    #[serde(default)]
    valid_range: Option<K8sRange>,
}

#[derive(Deserialize)]
struct K8sRange {
    #[serde(default)]
    min: Option<RawQuantity>,
    #[serde(default)]
    max: Option<RawQuantity>,
    #[serde(default)]
    step: Option<RawQuantity>,
}

#[derive(Deserialize)]
struct K8sCounter {
    #[serde(default)]
    value: Option<RawQuantity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct K8sCounterUse {
    #[serde(default, deserialize_with = "null_default")]
    counter_set: String,
    #[serde(default, deserialize_with = "null_default")]
    counters: BTreeMap<String, K8sCounter>,
}

#[derive(Deserialize)]
struct K8sCounterSet {
    #[serde(default, deserialize_with = "null_default")]
    name: String,
    #[serde(default, deserialize_with = "null_default")]
    counters: BTreeMap<String, K8sCounter>,
}

#[derive(Deserialize)]
pub(super) struct K8sDeviceTaint {
    #[serde(default, deserialize_with = "null_default")]
    key: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    effect: Option<String>,
}

impl K8sDeviceTaint {
    /// The taint at `path`; unknown effects count as `None`, as the API
    /// asks of consumers.
    pub(super) fn convert(self, path: &str, errors: &mut Vec<FieldError>) -> DeviceTaint {
        if self.key.is_empty() {
            missing(errors, format!("{path}.key"), "the taint's key");
        }
        let effect = match self.effect.as_deref().unwrap_or("") {
            "NoSchedule" => DeviceTaintEffect::NoSchedule,
            "NoExecute" => DeviceTaintEffect::NoExecute,
            _ => DeviceTaintEffect::None,
        };
        DeviceTaint {
            key: self.key,
            value: self.value.unwrap_or_default(),
            effect,
        }
    }
}

/// Counters by name, milli-units.
fn counters(
    map: BTreeMap<String, K8sCounter>,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> BTreeMap<String, u64> {
    map.into_iter()
        .filter_map(|(name, c)| {
            let v = required_milli(&c.value, &format!("{path}.{name}.value"), errors)?;
            Some((name, v))
        })
        .collect()
}

impl K8sResourceSlice {
    /// Converts to a [`Slice`]. Errors are (field, message); warnings
    /// are plain messages about this slice.
    pub(crate) fn convert(self, warnings: &mut Vec<String>) -> Result<DraObject, Vec<FieldError>> {
        let mut errors = Vec::new();
        let name = self.metadata.name;
        if name.is_empty() {
            missing(
                &mut errors,
                "metadata.name".into(),
                "the ResourceSlice's name",
            );
        }
        let spec = self.spec;
        let driver = spec.driver;
        if driver.is_empty() {
            missing(
                &mut errors,
                "spec.driver".into(),
                "the DRA driver's name, such as gpu.nvidia.com",
            );
        }
        let (pool, generation, slice_count) = match spec.pool {
            None => {
                missing(
                    &mut errors,
                    "spec.pool".into(),
                    "the pool {name, generation, resourceSliceCount}",
                );
                (String::new(), 0, 0)
            }
            Some(p) => {
                if p.name.is_empty() {
                    missing(&mut errors, "spec.pool.name".into(), "the pool's name");
                }
                let count = p.resource_slice_count.unwrap_or(0);
                if count <= 0 {
                    errors.push((
                        "spec.pool.resourceSliceCount".into(),
                        format!(
                            "{}; expected the number of slices of the pool at this generation, greater than zero",
                            p.resource_slice_count
                                .map_or("missing".to_string(), |c| c.to_string())
                        ),
                    ));
                }
                (p.name, p.generation.unwrap_or(0), count)
            }
        };
        let node_name = spec.node_name.filter(|n| !n.is_empty());
        let mut selection = Vec::new();
        if node_name.is_some() {
            selection.push("nodeName");
        }
        if spec.node_selector.as_ref().is_some_and(|v| !v.is_null()) {
            selection.push("nodeSelector");
        }
        if spec.all_nodes == Some(true) {
            selection.push("allNodes");
        }
        if spec.per_device_node_selection == Some(true) {
            selection.push("perDeviceNodeSelection");
        }
        let node = match selection.as_slice() {
            ["nodeName"] => node_name,
            [other] => {
                warnings.push(format!(
                    "ResourceSlice {name}: spec.{other} is not supported yet (only node-local slices, spec.nodeName, are); its devices are left out"
                ));
                None
            }
            [] => {
                errors.push((
                    "spec".into(),
                    "expected exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection; found none".into(),
                ));
                None
            }
            many => {
                errors.push((
                    "spec".into(),
                    format!(
                        "expected exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection; found {}",
                        many.join(", ")
                    ),
                ));
                None
            }
        };
        let mut devices = Vec::with_capacity(spec.devices.len());
        for (i, d) in spec.devices.into_iter().enumerate() {
            let path = format!("spec.devices[{i}]");
            if let Some(d) = device(d, &driver, &pool, &path, &mut errors) {
                devices.push(d);
            }
        }
        let mut counter_sets = Vec::new();
        for (i, c) in spec.shared_counters.into_iter().enumerate() {
            let path = format!("spec.sharedCounters[{i}]");
            if c.name.is_empty() {
                missing(
                    &mut errors,
                    format!("{path}.name"),
                    "the counter set's name",
                );
            }
            counter_sets.push(CounterSet {
                driver: driver.clone(),
                pool: pool.clone(),
                name: c.name,
                counters: counters(c.counters, &format!("{path}.counters"), &mut errors),
            });
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(DraObject::Slice(Slice {
            name,
            driver,
            pool,
            generation,
            slice_count,
            node,
            devices,
            counter_sets,
        }))
    }
}

/// One device of a slice of `driver`'s `pool`, at `path`.
fn device(
    d: K8sDevice,
    driver: &str,
    pool: &str,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Option<Device> {
    let before = errors.len();
    if d.name.is_empty() {
        missing(errors, format!("{path}.name"), "the device's name");
    }
    let multi = d.allow_multiple_allocations.unwrap_or(false);
    let mut attributes = BTreeMap::new();
    for (name, a) in d.attributes {
        let at = format!("{path}.attributes.{name}");
        let mut values = Vec::new();
        if let Some(v) = a.int {
            values.push(("int", AttrValue::Int(v)));
        }
        if let Some(v) = a.bool {
            values.push(("bool", AttrValue::Bool(v)));
        }
        if let Some(v) = a.string {
            values.push(("string", AttrValue::String(v)));
        }
        if let Some(v) = a.version {
            values.push(("version", AttrValue::Version(v)));
        }
        match values.len() {
            1 => {
                let (_, v) = values.remove(0);
                attributes.insert(qualify(driver, &name), v);
            }
            0 => errors.push((
                at,
                "has no value; expected exactly one of int, bool, string or version".into(),
            )),
            _ => {
                let types: Vec<&str> = values.iter().map(|(t, _)| *t).collect();
                errors.push((
                    at,
                    format!(
                        "has {} value types ({}); expected exactly one of int, bool, string or version",
                        types.len(),
                        types.join(", ")
                    ),
                ));
            }
        }
    }
    let mut capacity = BTreeMap::new();
    for (name, c) in d.capacity {
        let at = format!("{path}.capacity.{name}");
        let Some(value) = required_milli(&c.value, &format!("{at}.value"), errors) else {
            continue;
        };
        let policy = match (c.request_policy, multi) {
            (Some(_), false) => {
                errors.push((
                    format!("{at}.requestPolicy"),
                    "is only allowed on a device with allowMultipleAllocations: true".into(),
                ));
                None
            }
            (Some(p), true) => Some(request_policy(
                p,
                value,
                &format!("{at}.requestPolicy"),
                errors,
            )),
            // Shared without a policy: any amount, the whole capacity by
            // default.
            (None, true) => Some(CapacityPolicy {
                default: Some(value),
                valid_values: Vec::new(),
                range: None,
            }),
            (None, false) => None,
        };
        capacity.insert(qualify(driver, &name), DeviceCapacity { value, policy });
    }
    let mut consumes = Vec::new();
    for (j, c) in d.consumes_counters.into_iter().enumerate() {
        let at = format!("{path}.consumesCounters[{j}]");
        if c.counter_set.is_empty() {
            missing(
                errors,
                format!("{at}.counterSet"),
                "the name of a counter set of the pool",
            );
        }
        consumes.push(CounterUse {
            set: c.counter_set,
            counters: counters(c.counters, &format!("{at}.counters"), errors),
        });
    }
    let taints = d
        .taints
        .into_iter()
        .enumerate()
        .map(|(j, t)| t.convert(&format!("{path}.taints[{j}]"), errors))
        .collect();
    (errors.len() == before).then(|| Device {
        driver: driver.into(),
        pool: pool.into(),
        name: d.name.into(),
        attributes,
        capacity,
        consumes,
        taints,
        multi,
    })
}

fn request_policy(
    p: K8sRequestPolicy,
    value: u64,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> CapacityPolicy {
    let default = p
        .default
        .as_ref()
        .and_then(|q| milli(q, &format!("{path}.default"), errors));
    let mut valid_values: Vec<u64> = p
        .valid_values
        .iter()
        .enumerate()
        .filter_map(|(i, q)| milli(q, &format!("{path}.validValues[{i}]"), errors))
        .collect();
    valid_values.sort_unstable();
    let range = p.valid_range.and_then(|r| {
        let min = required_milli(&r.min, &format!("{path}.validRange.min"), errors)?;
        let max = r
            .max
            .as_ref()
            .and_then(|q| milli(q, &format!("{path}.validRange.max"), errors));
        let step = r
            .step
            .as_ref()
            .and_then(|q| milli(q, &format!("{path}.validRange.step"), errors));
        Some((min, max, step))
    });
    // Without a default, a request that names no amount takes the whole
    // capacity (the API requires one with validValues or validRange).
    CapacityPolicy {
        default: default.or(Some(value)),
        valid_values,
        range,
    }
}

// ---------------------------------------------------------------------------
// DeviceClass

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct K8sDeviceClass {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_default")]
    spec: ClassSpec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClassSpec {
    #[serde(default, deserialize_with = "null_default")]
    selectors: Vec<K8sSelector>,
    #[serde(default)]
    extended_resource_name: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct K8sSelector {
    #[serde(default)]
    cel: Option<K8sCel>,
}

#[derive(Deserialize)]
struct K8sCel {
    #[serde(default, deserialize_with = "null_default")]
    expression: String,
}

/// CEL expressions of `selectors` at `path`.
pub(super) fn cel_expressions(
    selectors: Vec<K8sSelector>,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Vec<String> {
    let mut out = Vec::with_capacity(selectors.len());
    for (i, s) in selectors.into_iter().enumerate() {
        match s.cel {
            Some(c) if !c.expression.trim().is_empty() => out.push(c.expression),
            Some(_) => missing(
                errors,
                format!("{path}[{i}].cel.expression"),
                "a CEL expression such as device.driver == \"gpu.nvidia.com\"",
            ),
            None => missing(
                errors,
                format!("{path}[{i}].cel"),
                "a CEL selector {cel: {expression: ...}} (the only selector kind)",
            ),
        }
    }
    out
}

impl K8sDeviceClass {
    pub(crate) fn convert(self) -> Result<DraObject, Vec<FieldError>> {
        let mut errors = Vec::new();
        if self.metadata.name.is_empty() {
            missing(
                &mut errors,
                "metadata.name".into(),
                "the DeviceClass's name",
            );
        }
        let selectors = cel_expressions(self.spec.selectors, "spec.selectors", &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(DraObject::Class(DeviceClass {
            name: self.metadata.name,
            selectors,
            extended_resource_name: self.spec.extended_resource_name.filter(|n| !n.is_empty()),
        }))
    }
}

// ---------------------------------------------------------------------------
// DeviceTaintRule

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct K8sDeviceTaintRule {
    #[serde(default, deserialize_with = "null_default")]
    pub metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<TaintRuleSpec>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaintRuleSpec {
    #[serde(default)]
    device_selector: Option<K8sTaintSelector>,
    #[serde(default)]
    taint: Option<K8sDeviceTaint>,
}

#[derive(Deserialize)]
struct K8sTaintSelector {
    #[serde(default)]
    driver: Option<String>,
    #[serde(default)]
    pool: Option<String>,
    #[serde(default)]
    device: Option<String>,
}

impl K8sDeviceTaintRule {
    pub(crate) fn convert(self) -> Result<DraObject, Vec<FieldError>> {
        let mut errors = Vec::new();
        if self.metadata.name.is_empty() {
            missing(
                &mut errors,
                "metadata.name".into(),
                "the DeviceTaintRule's name",
            );
        }
        let Some(spec) = self.spec else {
            missing(
                &mut errors,
                "spec".into(),
                "spec.taint and spec.deviceSelector",
            );
            return Err(errors);
        };
        let taint = match spec.taint {
            Some(t) => t.convert("spec.taint", &mut errors),
            None => {
                missing(
                    &mut errors,
                    "spec.taint".into(),
                    "the taint {key, value, effect}",
                );
                return Err(errors);
            }
        };
        let nonempty = |s: Option<String>| s.filter(|s| !s.is_empty());
        let selector = spec.device_selector.map(|s| TaintSelector {
            driver: nonempty(s.driver),
            pool: nonempty(s.pool),
            device: nonempty(s.device),
        });
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(DraObject::TaintRule(TaintRule {
            name: self.metadata.name,
            selector,
            taint,
        }))
    }
}

/// A device toleration at `path`.
pub(super) fn toleration(
    t: K8sDeviceToleration,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> DeviceToleration {
    let exists = match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => false,
        "Exists" => true,
        other => {
            errors.push((
                format!("{path}.operator"),
                format!("unknown toleration operator {other:?}; expected Equal or Exists"),
            ));
            false
        }
    };
    let effect = match t.effect.as_deref().unwrap_or("") {
        "" => None,
        "NoSchedule" => Some(DeviceTaintEffect::NoSchedule),
        "NoExecute" => Some(DeviceTaintEffect::NoExecute),
        other => {
            errors.push((
                format!("{path}.effect"),
                format!(
                    "unknown toleration effect {other:?}; expected NoSchedule, NoExecute or empty (all effects)"
                ),
            ));
            None
        }
    };
    let key = t.key.unwrap_or_default();
    if key.is_empty() && !exists {
        errors.push((
            format!("{path}.operator"),
            "must be Exists when the key is empty (a toleration of every taint)".into(),
        ));
    }
    DeviceToleration {
        key,
        exists,
        value: t.value.unwrap_or_default(),
        effect,
    }
}

#[derive(Deserialize)]
pub(super) struct K8sDeviceToleration {
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    operator: Option<String>,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    effect: Option<String>,
}
