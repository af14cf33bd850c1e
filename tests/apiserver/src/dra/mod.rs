//! Dynamic Resource Allocation: `resource.k8s.io/v1` ResourceSlices,
//! DeviceClasses, ResourceClaims (with `status`) and ResourceClaimTemplates,
//! and `resource.k8s.io/v1alpha3` DeviceTaintRules, with the parts of
//! kube-apiserver's validation (`pkg/apis/resource/validation`) a scheduler
//! leans on:
//!
//! * a claim's and a template's `spec` is immutable (422 `field is immutable`);
//! * on create a claim's `status` is dropped; `status` is written only through
//!   `/status` (a status in a main-resource write is ignored);
//! * `status.allocation` may be set once and not changed while set (422
//!   `field is immutable`); it may be cleared only with an empty `reservedFor`
//!   (`reservedFor` needs an allocation: 422 Forbidden);
//! * `status.reservedFor` entries need `resource`, `name`, `uid`, are unique by
//!   `uid` (422 Duplicate), at most 256 (422 TooMany), and none may be added
//!   while the claim is being deleted;
//! * a new allocation's results name a request of the claim and a driver,
//!   pool and device;
//! * with RBAC on, a `/status` write that changes `allocation` or
//!   `reservedFor` also needs `update`/`patch` on the synthetic
//!   `resourceclaims/binding` subresource at cluster scope (Kubernetes 1.36,
//!   `DRAResourceClaimGranularStatusAuthorization`, beta and on by default):
//!   422 with a Forbidden cause at `status` otherwise ([`authorize_binding`]).
//!   `resourceclaims/binding` is not an endpoint: upstream it is only an
//!   authorization check inside the status strategy;
//! * a ResourceSlice needs `driver`, `pool.name`, `pool.resourceSliceCount > 0`
//!   and exactly one of `nodeName`, `nodeSelector`, `allNodes`,
//!   `perDeviceNodeSelection`; `driver`, `pool.name` and `nodeName` are
//!   immutable; field selectors `spec.nodeName` and `spec.driver`.
//!
//! Not checked: CEL selectors, device attribute/capacity limits, counters,
//! admin access (no `resource.kubernetes.io/admin-access` namespace label
//! check), the `resourceclaims/driver` check for `status.devices`.
//!
//! The resource claim controller of kube-controller-manager is in
//! [`controller`]; what the kubelet checks before it starts a pod with claims
//! is in [`kubelet`].

pub mod controller;
pub mod kubelet;

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::auth::{Attributes, UserInfo};
use crate::error::{ApiError, ApiResult, Cause};
use crate::kinds::{cause, invalid, required, unsupported};
use crate::registry::{Builtin, ResourceDef, builtin};
use crate::state::State;
use crate::table::Cells;

/// The API group.
pub const GROUP: &str = "resource.k8s.io";
/// Storage key of ResourceClaims.
pub const CLAIMS: &str = "resource.k8s.io/resourceclaims";
/// Storage key of ResourceClaimTemplates.
pub const TEMPLATES: &str = "resource.k8s.io/resourceclaimtemplates";
/// The annotation the claim controller puts on a claim it generated for a pod:
/// the name of the pod's `spec.resourceClaims[]` entry.
pub const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";
/// The finalizer kube-scheduler adds to a claim it allocates; the claim
/// controller removes it after clearing the allocation.
pub const FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// `ResourceClaimReservedForMaxSize`.
pub const RESERVED_FOR_MAX: usize = 256;

/// The served DRA kinds (no short names or categories, as in kube-apiserver).
pub fn defs() -> Vec<ResourceDef> {
    use Builtin as B;
    vec![
        builtin(
            "resource.k8s.io/v1",
            "resourceslices",
            "ResourceSlice",
            false,
            &[],
            false,
            B::ResourceSlice,
        ),
        builtin(
            "resource.k8s.io/v1",
            "deviceclasses",
            "DeviceClass",
            false,
            &[],
            false,
            B::DeviceClass,
        ),
        builtin(
            "resource.k8s.io/v1",
            "resourceclaims",
            "ResourceClaim",
            true,
            &[],
            true,
            B::ResourceClaim,
        ),
        builtin(
            "resource.k8s.io/v1",
            "resourceclaimtemplates",
            "ResourceClaimTemplate",
            true,
            &[],
            false,
            B::ResourceClaimTemplate,
        ),
        builtin(
            "resource.k8s.io/v1alpha3",
            "devicetaintrules",
            "DeviceTaintRule",
            false,
            &[],
            true,
            B::DeviceTaintRule,
        ),
    ]
}

/// What kube-apiserver does to these kinds on create: a claim's and a taint
/// rule's status is reset.
pub fn prepare_create(b: Builtin, obj: &mut Value) {
    if matches!(b, Builtin::ResourceClaim | Builtin::DeviceTaintRule) {
        obj["status"] = json!({});
    }
}

/// Validation of these kinds (`old` on updates; on a status update `obj`
/// carries the stored spec and the new status).
pub fn causes(b: Builtin, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    match b {
        Builtin::ResourceClaim => {
            let mut c = Vec::new();
            match old {
                Some(old) => {
                    c.extend(immutable(&obj["spec"], &old["spec"], "spec"));
                    c.extend(status_causes(obj, old));
                }
                None => c.extend(claim_spec_causes(&obj["spec"], "spec")),
            }
            c
        }
        Builtin::ResourceClaimTemplate => match old {
            Some(old) => immutable(&obj["spec"], &old["spec"], "spec"),
            None => claim_spec_causes(&obj["spec"]["spec"], "spec.spec"),
        },
        Builtin::ResourceSlice => slice_causes(&obj["spec"], old.map(|o| &o["spec"])),
        Builtin::DeviceTaintRule => {
            let taint = &obj["spec"]["taint"];
            let mut c = Vec::new();
            if taint["key"].as_str().is_none_or(str::is_empty) {
                c.push(required("spec.taint.key", ""));
            }
            let effects = ["NoSchedule", "NoExecute", "None"];
            match taint["effect"].as_str() {
                None | Some("") => c.push(required("spec.taint.effect", "")),
                Some(e) if !effects.contains(&e) => {
                    c.push(unsupported("spec.taint.effect", &json!(e), &effects))
                }
                Some(_) => {}
            }
            c
        }
        _ => Vec::new(),
    }
}

fn immutable(new: &Value, old: &Value, field: &str) -> Vec<Cause> {
    if new == old {
        Vec::new()
    } else {
        vec![invalid(field, new, "field is immutable")]
    }
}

/// The request names a claim's results and configs may name: each request,
/// and `request/subrequest` for the subrequests of `firstAvailable`.
fn request_names(spec: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in spec["devices"]["requests"].as_array().into_iter().flatten() {
        let Some(name) = r["name"].as_str() else {
            continue;
        };
        out.insert(name.to_string());
        for s in r["firstAvailable"].as_array().into_iter().flatten() {
            if let Some(sub) = s["name"].as_str() {
                out.insert(format!("{name}/{sub}"));
            }
        }
    }
    out
}

/// A claim spec's requests: named, unique, each with exactly one of
/// `exactly` (naming a `deviceClassName`) and `firstAvailable`.
fn claim_spec_causes(spec: &Value, at: &str) -> Vec<Cause> {
    let mut c = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, r) in spec["devices"]["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = format!("{at}.devices.requests[{i}]");
        match r["name"].as_str() {
            None | Some("") => c.push(required(format!("{p}.name"), "")),
            Some(n) if !seen.insert(n.to_string()) => c.push(cause(
                "FieldValueDuplicate",
                format!("{p}.name"),
                format!("Duplicate value: {}", json!(n)),
            )),
            Some(_) => {}
        }
        let exactly = r["exactly"].is_object();
        let first = r["firstAvailable"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
        match (exactly, first) {
            (false, false) => c.push(required(
                &p,
                "exactly one of `exactly` or `firstAvailable` is required",
            )),
            (true, true) => c.push(invalid(
                &p,
                &json!(null),
                "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
            )),
            (true, false) => {
                if r["exactly"]["deviceClassName"]
                    .as_str()
                    .is_none_or(str::is_empty)
                {
                    c.push(required(format!("{p}.exactly.deviceClassName"), ""));
                }
            }
            (false, true) => {}
        }
    }
    c
}

/// kube-apiserver's `validateResourceClaimStatusUpdate`, the rules that matter.
fn status_causes(obj: &Value, old: &Value) -> Vec<Cause> {
    let mut c = Vec::new();
    let status = &obj["status"];
    let old_status = &old["status"];
    let reserved: Vec<&Value> = status["reservedFor"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    if reserved.len() > RESERVED_FOR_MAX {
        c.push(cause(
            "FieldValueTooMany",
            "status.reservedFor",
            format!(
                "Too many: {}: must have at most {RESERVED_FOR_MAX} items",
                reserved.len()
            ),
        ));
    }
    let mut uids = BTreeSet::new();
    for (i, r) in reserved.iter().enumerate() {
        let p = format!("status.reservedFor[{i}]");
        for k in ["resource", "name", "uid"] {
            if r[k].as_str().is_none_or(str::is_empty) {
                c.push(required(format!("{p}.{k}"), ""));
            }
        }
        if let Some(uid) = r["uid"].as_str().filter(|u| !u.is_empty())
            && !uids.insert(uid)
        {
            c.push(cause(
                "FieldValueDuplicate",
                p,
                format!("Duplicate value: {r}"),
            ));
        }
    }
    let allocation = status.get("allocation").filter(|a| !a.is_null());
    let old_allocation = old_status.get("allocation").filter(|a| !a.is_null());
    if !reserved.is_empty() {
        if allocation.is_none() {
            c.push(cause(
                "FieldValueForbidden",
                "status.reservedFor",
                "Forbidden: may not be specified when `allocated` is not set",
            ));
        } else if obj["metadata"]["deletionTimestamp"].is_string() {
            let before: Vec<&Value> = old_status["reservedFor"]
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            if reserved.iter().any(|r| !before.contains(r)) {
                c.push(cause(
                    "FieldValueForbidden",
                    "status.reservedFor",
                    "Forbidden: new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set",
                ));
            }
        }
    }
    match (allocation, old_allocation) {
        (Some(new), Some(was)) => c.extend(immutable(new, was, "status.allocation")),
        (Some(new), None) => c.extend(allocation_causes(new, &request_names(&obj["spec"]))),
        _ => {}
    }
    c
}

/// A new allocation's results: a request of the claim, driver, pool, device.
fn allocation_causes(allocation: &Value, requests: &BTreeSet<String>) -> Vec<Cause> {
    let mut c = Vec::new();
    for (i, r) in allocation["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = format!("status.allocation.devices.results[{i}]");
        for k in ["request", "driver", "pool", "device"] {
            if r[k].as_str().is_none_or(str::is_empty) {
                c.push(required(format!("{p}.{k}"), ""));
            }
        }
        if let Some(req) = r["request"].as_str().filter(|s| !s.is_empty())
            && !requests.contains(req)
        {
            c.push(invalid(
                format!("{p}.request"),
                &json!(req),
                "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
            ));
        }
    }
    c
}

fn slice_causes(spec: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut c = Vec::new();
    if spec["driver"].as_str().is_none_or(str::is_empty) {
        c.push(required("spec.driver", ""));
    }
    let pool = &spec["pool"];
    if pool["name"].as_str().is_none_or(str::is_empty) {
        c.push(required("spec.pool.name", ""));
    }
    match pool["resourceSliceCount"].as_i64() {
        Some(n) if n > 0 => {}
        _ => c.push(invalid(
            "spec.pool.resourceSliceCount",
            &pool["resourceSliceCount"],
            "must be greater than zero",
        )),
    }
    if let Some(old) = old {
        c.extend(immutable(
            &pool["name"],
            &old["pool"]["name"],
            "spec.pool.name",
        ));
        c.extend(immutable(&spec["driver"], &old["driver"], "spec.driver"));
        c.extend(immutable(
            &spec["nodeName"],
            &old["nodeName"],
            "spec.nodeName",
        ));
    }
    let mut set = Vec::new();
    match &spec["nodeName"] {
        Value::String(s) if s.is_empty() => c.push(invalid(
            "spec.nodeName",
            &json!(""),
            "must be either unset or set to a non-empty string",
        )),
        Value::String(_) => set.push("`nodeName`"),
        _ => {}
    }
    if spec["nodeSelector"].is_object() {
        set.push("`nodeSelector`");
        if spec["nodeSelector"]["nodeSelectorTerms"]
            .as_array()
            .is_none_or(|t| t.len() != 1)
        {
            c.push(invalid(
                "spec.nodeSelector.nodeSelectorTerms",
                &spec["nodeSelector"]["nodeSelectorTerms"],
                "must have exactly one node selector term",
            ));
        }
    }
    for (k, shown) in [
        ("allNodes", "`allNodes`"),
        ("perDeviceNodeSelection", "`perDeviceNodeSelection`"),
    ] {
        match spec[k].as_bool() {
            Some(true) => set.push(shown),
            Some(false) => c.push(invalid(
                format!("spec.{k}"),
                &json!(false),
                "must be either unset or set to true",
            )),
            None => {}
        }
    }
    const ONE_OF: &str = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    match set.len() {
        0 => c.push(required("spec", ONE_OF)),
        1 => {}
        _ => c.push(invalid(
            "spec",
            &json!(format!("{{{}}}", set.join(", "))),
            &format!("{ONE_OF}, but multiple fields are set"),
        )),
    }
    c
}

/// With RBAC on (a `user`), a `/status` write of a ResourceClaim that changes
/// `status.allocation` or `status.reservedFor` needs `verb` (`update` or
/// `patch`) on `resourceclaims/binding` in `resource.k8s.io` at cluster scope,
/// as kube-apiserver ≥ 1.36 checks (`AuthorizedForBinding`); otherwise 422
/// with a Forbidden cause at `status`. Without a user (RBAC off) or without
/// such a change, nothing is checked.
pub fn authorize_binding(
    st: &State,
    user: Option<&UserInfo>,
    verb: &str,
    (ns, name): (&str, &str),
    new_status: &Value,
) -> ApiResult<()> {
    let Some(user) = user else {
        return Ok(());
    };
    let Some(old) = st.store.get(CLAIMS, ns, name) else {
        return Ok(());
    };
    // Semantic equality: null, absent and an empty list are the same.
    let field = |s: &Value, k: &str| {
        s.get(k)
            .filter(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
            .cloned()
    };
    if field(new_status, "allocation") == field(&old["status"], "allocation")
        && field(new_status, "reservedFor") == field(&old["status"], "reservedFor")
    {
        return Ok(());
    }
    let attrs = Attributes {
        verb: verb.into(),
        resource_request: true,
        api_group: GROUP.into(),
        api_version: "v1".into(),
        resource: "resourceclaims".into(),
        subresource: "binding".into(),
        ..Default::default()
    };
    let d = crate::rbac::authorize(st, user, &attrs);
    if d.allowed {
        return Ok(());
    }
    let denied = crate::rbac::forbidden(user, &attrs, &d.reason);
    Err(ApiError::invalid(
        "ResourceClaim.resource.k8s.io",
        GROUP,
        name,
        vec![cause(
            "FieldValueForbidden",
            "status",
            format!(
                "Forbidden: changing status.allocation or status.reservedFor requires resource=\"resourceclaims/binding\", verb=\"{verb}\" permission: {}",
                denied.message
            ),
        )],
    ))
}

/// kube-apiserver's `resourceClaimState`: `pending`, `allocated`,
/// `allocated,reserved`, with `deleted` first while being deleted.
pub fn claim_state(o: &Value) -> String {
    let mut s = Vec::new();
    let deleting = o["metadata"]["deletionTimestamp"].is_string();
    if deleting {
        s.push("deleted");
    }
    if o["status"]["allocation"].is_object() {
        s.push("allocated");
        if o["status"]["reservedFor"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
        {
            s.push("reserved");
        }
    } else if !deleting {
        s.push("pending");
    }
    s.join(",")
}

/// Table columns (kube-apiserver's printers): claims NAME STATE AGE, slices
/// NAME NODE DRIVER POOL AGE, the others NAME AGE.
pub fn columns(b: Builtin) -> (Vec<Value>, Cells) {
    use crate::table::{age, age_col, col, name_col};
    let s = |v: &Value| json!(v.as_str().unwrap_or(""));
    match b {
        Builtin::ResourceClaim => (
            vec![
                name_col(),
                col(
                    "State",
                    "string",
                    "",
                    0,
                    "A summary of the current state (allocated, pending, reserved, deleted).",
                ),
                age_col(),
            ],
            Box::new(|o, now| vec![json!(claim_state(o)), age(o, now)]),
        ),
        Builtin::ResourceSlice => (
            vec![
                name_col(),
                col("Node", "string", "", 0, "nodeName"),
                col("Driver", "string", "", 0, "driver"),
                col("Pool", "string", "", 0, "pool"),
                age_col(),
            ],
            Box::new(move |o, now| {
                let spec = &o["spec"];
                vec![
                    match spec["nodeName"].as_str() {
                        Some(n) if !n.is_empty() => json!(n),
                        _ => json!("<none>"),
                    },
                    s(&spec["driver"]),
                    s(&spec["pool"]["name"]),
                    age(o, now),
                ]
            }),
        ),
        _ => (
            vec![name_col(), age_col()],
            Box::new(|o, now| vec![age(o, now)]),
        ),
    }
}

#[cfg(test)]
mod tests;
