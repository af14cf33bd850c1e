//! Workload-aware scheduling: `scheduling.k8s.io` Workloads and PodGroups
//! (`GenericWorkload`), served at `v1alpha2` (Kubernetes 1.36, alpha) and
//! `v1beta1` (1.37), each version with its own storage (see below), which of
//! them chosen by [`WorkloadApis`] ([`crate::Config::workload_apis`],
//! `--workload-apis`). `scheduling.k8s.io/v1` PriorityClasses are served in
//! every case.
//!
//! What kube-apiserver checks that clients lean on (422 naming the field):
//!
//! * `schedulingPolicy` (of a PodGroup and of each Workload template): exactly
//!   one of `basic` and `gang`; `gang.minCount` required and at least 1;
//! * `disruptionMode`: `Pod` or `PodGroup` (v1alpha2, a string), exactly one
//!   of `single` and `all` (v1beta1, an object);
//! * a PodGroup's `workloadRef` (v1beta1: `workloadName` a DNS subdomain,
//!   `templateName` a DNS label) or `podGroupTemplateRef.workload`
//!   (v1alpha2: `workloadName`, `podGroupTemplateName`);
//! * a Workload's `podGroupTemplates`: 1 to 8, names unique DNS labels, one
//!   priority configuration across templates;
//! * immutability. v1alpha2: a PodGroup's and a Workload's whole `spec`
//!   (each field documents itself immutable). v1beta1: everything but
//!   `schedulingPolicy.gang.minCount`, which may change to scale a gang
//!   (the policy may not switch between `basic` and `gang`); a Workload's
//!   templates may not be added, removed or renamed, and their disruption
//!   mode, priority, constraints and claims are immutable;
//! * a PodGroup's `status` is dropped on create and written only through
//!   `/status` (a status in a main-resource write is ignored; a spec in a
//!   status write too); `status.conditions` are `metav1.Condition`s
//!   (`ValidateConditions`: a qualified-name `type` unique in the list,
//!   `status` True/False/Unknown, `lastTransitionTime` and a `reason`
//!   matching kube's pattern, `message` at most 32768 characters), merged by
//!   `type` by a strategic merge patch.
//!
//! Storage: a real server serves one of these versions (v1alpha2 exists only
//! in 1.36; 1.37 serves v1beta1 and, with alpha APIs on, `v1alpha3`, which is
//! not served here), so there is no conversion between them: with both on,
//! an object created at v1alpha2 is not seen at v1beta1.
//!
//! Not served: `v1alpha3`, CompositePodGroups, a Workload or Job controller
//! creating PodGroups, admission (no priority resolution from
//! `priorityClassName`), feature-gated field dropping.

use std::collections::BTreeSet;
use std::str::FromStr;

use serde_json::{Value, json};

use crate::error::Cause;
use crate::kinds::{cause, invalid, required, unsupported};
use crate::registry::{Builtin, ResourceDef, builtin};
use crate::table::Cells;

/// The API group.
pub const GROUP: &str = "scheduling.k8s.io";
/// The most templates a Workload holds.
pub const MAX_TEMPLATES: usize = 8;
const MAX_REASON: usize = 1024;
const MAX_MESSAGE: usize = 32 * 1024;

/// Which Workload/PodGroup versions of `scheduling.k8s.io` the server
/// serves. The default serves both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadApis {
    /// `scheduling.k8s.io/v1alpha2` (Kubernetes 1.36 with alpha APIs on).
    pub v1alpha2: bool,
    /// `scheduling.k8s.io/v1beta1` (Kubernetes 1.37).
    pub v1beta1: bool,
}

impl WorkloadApis {
    /// Neither version (a cluster without `GenericWorkload`).
    pub const NONE: WorkloadApis = WorkloadApis {
        v1alpha2: false,
        v1beta1: false,
    };
    /// Only v1alpha2.
    pub const V1ALPHA2: WorkloadApis = WorkloadApis {
        v1alpha2: true,
        v1beta1: false,
    };
    /// Only v1beta1.
    pub const V1BETA1: WorkloadApis = WorkloadApis {
        v1alpha2: false,
        v1beta1: true,
    };
    /// Both.
    pub const BOTH: WorkloadApis = WorkloadApis {
        v1alpha2: true,
        v1beta1: true,
    };
}

impl Default for WorkloadApis {
    fn default() -> Self {
        WorkloadApis::BOTH
    }
}

impl FromStr for WorkloadApis {
    type Err = String;

    /// `none`, or a comma-separated list of `v1alpha2` and `v1beta1`.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut out = WorkloadApis::NONE;
        if s.trim() == "none" {
            return Ok(out);
        }
        for v in s.split(',').map(str::trim) {
            match v {
                "v1alpha2" => out.v1alpha2 = true,
                "v1beta1" => out.v1beta1 = true,
                other => {
                    return Err(format!(
                        "unknown version \"{other}\": expected none, or a comma-separated list of v1alpha2 and v1beta1"
                    ));
                }
            }
        }
        Ok(out)
    }
}

/// The served kinds (no short names or categories).
pub fn defs() -> Vec<ResourceDef> {
    use Builtin as B;
    let v = |av: &str, plural: &str, kind: &str, status: bool, b: Builtin| {
        builtin(av, plural, kind, true, &[], status, b)
    };
    vec![
        v(
            "scheduling.k8s.io/v1beta1",
            "workloads",
            "Workload",
            false,
            B::Workload,
        ),
        v(
            "scheduling.k8s.io/v1beta1",
            "podgroups",
            "PodGroup",
            true,
            B::PodGroup,
        ),
        v(
            "scheduling.k8s.io/v1alpha2",
            "workloads",
            "Workload",
            false,
            B::WorkloadV1alpha2,
        ),
        v(
            "scheduling.k8s.io/v1alpha2",
            "podgroups",
            "PodGroup",
            true,
            B::PodGroupV1alpha2,
        ),
    ]
}

/// Whether `b` is one of these kinds served under `apis`.
pub fn served(b: Builtin, apis: WorkloadApis) -> bool {
    match b {
        Builtin::Workload | Builtin::PodGroup => apis.v1beta1,
        Builtin::WorkloadV1alpha2 | Builtin::PodGroupV1alpha2 => apis.v1alpha2,
        _ => true,
    }
}

/// Whether `b` is a v1alpha2 kind (stored apart from v1beta1's).
pub fn is_v1alpha2(b: Builtin) -> bool {
    matches!(b, Builtin::WorkloadV1alpha2 | Builtin::PodGroupV1alpha2)
}

/// On create a PodGroup's status is reset (`PrepareForCreate`).
pub fn prepare_create(b: Builtin, obj: &mut Value) {
    if matches!(b, Builtin::PodGroup | Builtin::PodGroupV1alpha2) {
        obj["status"] = json!({});
    }
}

/// Validation (`old` on updates; on a status update `obj` carries the stored
/// spec and the new status).
pub fn causes(b: Builtin, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let beta = !is_v1alpha2(b);
    let spec = &obj["spec"];
    let mut c = Vec::new();
    match b {
        Builtin::PodGroup | Builtin::PodGroupV1alpha2 => {
            c.extend(group_spec_causes(spec, "spec", beta));
            c.extend(ref_causes(spec, beta));
            if let Some(old) = old {
                c.extend(group_update_causes(spec, &old["spec"], beta));
            }
            c.extend(condition_causes(
                &obj["status"]["conditions"],
                "status.conditions",
            ));
        }
        Builtin::Workload | Builtin::WorkloadV1alpha2 => {
            c.extend(workload_causes(spec, beta));
            if let Some(old) = old {
                c.extend(workload_update_causes(spec, &old["spec"], beta));
            }
        }
        _ => {}
    }
    c
}

fn field_is_immutable(field: impl Into<String>) -> Cause {
    invalid(field, &Value::Null, "field is immutable")
}

fn absent(v: &Value) -> bool {
    v.is_null()
}

/// `schedulingPolicy`, `disruptionMode`, `schedulingConstraints`,
/// `resourceClaims` and `priorityClassName` of a PodGroup spec or a template.
fn group_spec_causes(spec: &Value, at: &str, beta: bool) -> Vec<Cause> {
    let mut c = policy_causes(&spec["schedulingPolicy"], &format!("{at}.schedulingPolicy"));
    let dm = &spec["disruptionMode"];
    let dm_at = format!("{at}.disruptionMode");
    if beta {
        if !absent(dm) {
            c.extend(one_of(dm, &dm_at, &["single", "all"]));
        }
    } else if let Some(mode) = dm.as_str().filter(|s| !s.is_empty()) {
        if !["Pod", "PodGroup"].contains(&mode) {
            c.push(unsupported(dm_at, dm, &["Pod", "PodGroup"]));
        }
    } else if !absent(dm) && dm.as_str().is_none() {
        c.push(invalid(dm_at, dm, "must be a string"));
    }
    if let Some(topo) = spec["schedulingConstraints"]["topology"].as_array() {
        let t_at = format!("{at}.schedulingConstraints.topology");
        if topo.len() > 1 {
            c.push(cause(
                "FieldValueTooMany",
                &t_at,
                format!("Too many: {}: must have at most 1 item", topo.len()),
            ));
        }
        for (i, t) in topo.iter().enumerate() {
            if t["key"].as_str().is_none_or(str::is_empty) {
                c.push(required(format!("{t_at}[{i}].key"), ""));
            }
        }
    }
    let mut claims = BTreeSet::new();
    for (i, rc) in spec["resourceClaims"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = format!("{at}.resourceClaims[{i}]");
        match rc["name"].as_str() {
            None | Some("") => c.push(required(format!("{p}.name"), "")),
            Some(n) => {
                c.extend(dns_label(&format!("{p}.name"), n));
                if !claims.insert(n.to_string()) {
                    c.push(cause(
                        "FieldValueDuplicate",
                        format!("{p}.name"),
                        format!("Duplicate value: {}", json!(n)),
                    ));
                }
            }
        }
        let named = rc["resourceClaimName"]
            .as_str()
            .is_some_and(|s| !s.is_empty());
        let templated = rc["resourceClaimTemplateName"]
            .as_str()
            .is_some_and(|s| !s.is_empty());
        if named == templated {
            c.push(invalid(
                &p,
                &Value::Null,
                "exactly one of `resourceClaimName` or `resourceClaimTemplateName` must be set",
            ));
        }
    }
    if let Some(pc) = spec["priorityClassName"].as_str().filter(|s| !s.is_empty()) {
        c.extend(dns_subdomain(&format!("{at}.priorityClassName"), pc));
    }
    c
}

/// Exactly one of the `keys` of `v` set (kube's union check).
fn one_of(v: &Value, at: &str, keys: &[&str]) -> Vec<Cause> {
    let set: Vec<String> = keys
        .iter()
        .filter(|k| !absent(&v[**k]))
        .map(|k| format!("`{k}`"))
        .collect();
    let all: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    match set.len() {
        1 => Vec::new(),
        0 => vec![invalid(
            at,
            &json!(""),
            &format!("must specify one of: {}", all.join(", ")),
        )],
        _ => vec![invalid(
            at,
            &json!(format!("{{{}}}", set.join(", "))),
            &format!(
                "exactly one of {} is required, but multiple fields are set",
                all.join(", ")
            ),
        )],
    }
}

fn policy_causes(policy: &Value, at: &str) -> Vec<Cause> {
    let mut c = one_of(policy, at, &["basic", "gang"]);
    if c.is_empty() && !absent(&policy["gang"]) {
        let mc = &policy["gang"]["minCount"];
        let f = format!("{at}.gang.minCount");
        match mc.as_i64() {
            None | Some(0) => c.push(required(f, "")),
            Some(n) if n < 1 => c.push(invalid(f, mc, "must be greater than or equal to 1")),
            _ => {}
        }
    }
    c
}

/// A PodGroup's reference to the Workload template it came from.
fn ref_causes(spec: &Value, beta: bool) -> Vec<Cause> {
    let mut c = Vec::new();
    if beta {
        let r = &spec["workloadRef"];
        if absent(r) {
            return c;
        }
        match r["workloadName"].as_str() {
            None | Some("") => c.push(required("spec.workloadRef.workloadName", "")),
            Some(n) => c.extend(dns_subdomain("spec.workloadRef.workloadName", n)),
        }
        match r["templateName"].as_str() {
            None | Some("") => c.push(required("spec.workloadRef.templateName", "")),
            Some(n) => c.extend(dns_label("spec.workloadRef.templateName", n)),
        }
    } else {
        let r = &spec["podGroupTemplateRef"];
        if absent(r) {
            return c;
        }
        let w = &r["workload"];
        if absent(w) {
            c.push(invalid(
                "spec.podGroupTemplateRef",
                &json!(""),
                "must specify one of: `workload`",
            ));
            return c;
        }
        for k in ["workloadName", "podGroupTemplateName"] {
            let f = format!("spec.podGroupTemplateRef.workload.{k}");
            match w[k].as_str() {
                None | Some("") => c.push(required(f, "")),
                Some(n) if k == "workloadName" => c.extend(dns_subdomain(&f, n)),
                Some(n) => c.extend(dns_label(&f, n)),
            }
        }
    }
    c
}

/// The fields of a PodGroup spec or template that never change (v1alpha2:
/// all of them, `schedulingPolicy` included).
const FROZEN: &[&str] = &[
    "disruptionMode",
    "priorityClassName",
    "priority",
    "preemptionPolicy",
    "schedulingConstraints",
    "resourceClaims",
];

fn frozen_causes(new: &Value, old: &Value, at: &str, beta: bool) -> Vec<Cause> {
    let mut c: Vec<Cause> = FROZEN
        .iter()
        .filter(|k| new[**k] != old[**k])
        .map(|k| field_is_immutable(format!("{at}.{k}")))
        .collect();
    let (np, op) = (&new["schedulingPolicy"], &old["schedulingPolicy"]);
    if !beta {
        if np != op {
            c.push(field_is_immutable(format!("{at}.schedulingPolicy")));
        }
    } else {
        // The policy is chosen at creation; only `gang.minCount` may change.
        for k in ["basic", "gang"] {
            if absent(&np[k]) != absent(&op[k]) {
                c.push(field_is_immutable(format!("{at}.schedulingPolicy.{k}")));
            }
        }
    }
    c
}

fn group_update_causes(new: &Value, old: &Value, beta: bool) -> Vec<Cause> {
    let mut c = frozen_causes(new, old, "spec", beta);
    let refs: &[&str] = if beta {
        &["workloadRef", "parentCompositePodGroupName"]
    } else {
        &["podGroupTemplateRef"]
    };
    for k in refs {
        if new[*k] != old[*k] {
            c.push(field_is_immutable(format!("spec.{k}")));
        }
    }
    c
}

fn workload_causes(spec: &Value, beta: bool) -> Vec<Cause> {
    let mut c = Vec::new();
    let templates = &spec["podGroupTemplates"];
    if beta {
        let composite = spec["compositePodGroupTemplates"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
        let plain = templates.as_array().is_some_and(|a| !a.is_empty());
        if composite == plain {
            let shown = if composite {
                json!("{`compositePodGroupTemplates`, `podGroupTemplates`}")
            } else {
                json!("")
            };
            let detail = if composite {
                "exactly one of `compositePodGroupTemplates`, `podGroupTemplates` is required, but multiple fields are set"
            } else {
                "must specify one of: `compositePodGroupTemplates`, `podGroupTemplates`"
            };
            c.push(invalid("spec", &shown, detail));
        }
        if composite {
            // CompositePodGroups (a separate feature gate) are stored as given.
            return c;
        }
    }
    let list = templates.as_array().map(Vec::as_slice).unwrap_or_default();
    if list.is_empty() {
        if !beta {
            c.push(required(
                "spec.podGroupTemplates",
                "must have at least one item",
            ));
        }
        return c;
    }
    if list.len() > MAX_TEMPLATES {
        c.push(cause(
            "FieldValueTooMany",
            "spec.podGroupTemplates",
            format!(
                "Too many: {}: must have at most {MAX_TEMPLATES} items",
                list.len()
            ),
        ));
    }
    let mut names = BTreeSet::new();
    for (i, t) in list.iter().enumerate() {
        let p = format!("spec.podGroupTemplates[{i}]");
        match t["name"].as_str() {
            None | Some("") => c.push(required(format!("{p}.name"), "")),
            Some(n) => {
                c.extend(dns_label(&format!("{p}.name"), n));
                if !names.insert(n) {
                    c.push(cause(
                        "FieldValueDuplicate",
                        &p,
                        format!("Duplicate value: {}", json!({"name": n})),
                    ));
                }
            }
        }
        c.extend(group_spec_causes(t, &p, beta));
    }
    let priorities: BTreeSet<String> = list
        .iter()
        .map(|t| format!("{}|{}", t["priorityClassName"], t["priority"]))
        .collect();
    if priorities.len() > 1 {
        c.push(invalid(
            "spec",
            &Value::Null,
            "detected multiple priority configurations",
        ));
    }
    if let Some(r) = spec.get("controllerRef").filter(|r| !r.is_null()) {
        for k in ["kind", "name"] {
            if r[k].as_str().is_none_or(str::is_empty) {
                c.push(required(format!("spec.controllerRef.{k}"), ""));
            }
        }
    }
    c
}

fn workload_update_causes(new: &Value, old: &Value, beta: bool) -> Vec<Cause> {
    let mut c = Vec::new();
    if new["controllerRef"] != old["controllerRef"] {
        c.push(field_is_immutable("spec.controllerRef"));
    }
    if !beta {
        if new["podGroupTemplates"] != old["podGroupTemplates"] {
            c.push(field_is_immutable("spec.podGroupTemplates"));
        }
        return c;
    }
    if new["compositePodGroupTemplates"] != old["compositePodGroupTemplates"] {
        c.push(field_is_immutable("spec.compositePodGroupTemplates"));
    }
    let names = |s: &Value| -> Vec<Value> {
        s["podGroupTemplates"]
            .as_array()
            .map(|a| a.iter().map(|t| t["name"].clone()).collect())
            .unwrap_or_default()
    };
    if names(new) != names(old) {
        c.push(cause(
            "FieldValueForbidden",
            "spec.podGroupTemplates",
            "Forbidden: templates may not be added, removed or renamed",
        ));
        return c;
    }
    let pairs = new["podGroupTemplates"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(old["podGroupTemplates"].as_array().into_iter().flatten());
    for (i, (n, o)) in pairs.enumerate() {
        c.extend(frozen_causes(
            n,
            o,
            &format!("spec.podGroupTemplates[{i}]"),
            true,
        ));
    }
    c
}

/// `metav1validation.ValidateConditions`.
pub fn condition_causes(conditions: &Value, at: &str) -> Vec<Cause> {
    let mut c = Vec::new();
    let mut types = BTreeSet::new();
    for (i, cond) in conditions.as_array().into_iter().flatten().enumerate() {
        let p = format!("{at}[{i}]");
        let ty = cond["type"].as_str().unwrap_or_default();
        if !types.insert(ty.to_string()) {
            c.push(cause(
                "FieldValueDuplicate",
                format!("{p}.type"),
                format!("Duplicate value: {}", json!(ty)),
            ));
        }
        c.extend(qualified_name(&format!("{p}.type"), ty));
        let st = &cond["status"];
        if !matches!(st.as_str(), Some("True" | "False" | "Unknown")) {
            c.push(unsupported(
                format!("{p}.status"),
                &json!(st.as_str().unwrap_or_default()),
                &["False", "True", "Unknown"],
            ));
        }
        if cond["observedGeneration"].as_i64().is_some_and(|g| g < 0) {
            c.push(invalid(
                format!("{p}.observedGeneration"),
                &cond["observedGeneration"],
                "must be greater than or equal to zero",
            ));
        }
        match cond["lastTransitionTime"].as_str() {
            None | Some("") => c.push(required(format!("{p}.lastTransitionTime"), "must be set")),
            Some(t) if crate::time::parse_rfc3339(t).is_none() => c.push(invalid(
                format!("{p}.lastTransitionTime"),
                &json!(t),
                "must be an RFC 3339 date-time",
            )),
            Some(_) => {}
        }
        match cond["reason"].as_str() {
            None | Some("") => c.push(required(format!("{p}.reason"), "must be set")),
            Some(r) => {
                if !reason_ok(r) {
                    c.push(invalid(format!("{p}.reason"), &json!(r), REASON_MSG));
                }
                if r.len() > MAX_REASON {
                    c.push(too_long(&format!("{p}.reason"), MAX_REASON));
                }
            }
        }
        if cond["message"]
            .as_str()
            .is_some_and(|m| m.len() > MAX_MESSAGE)
        {
            c.push(too_long(&format!("{p}.message"), MAX_MESSAGE));
        }
    }
    c
}

const REASON_MSG: &str = "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')";

fn too_long(at: &str, max: usize) -> Cause {
    cause(
        "FieldValueTooLong",
        at,
        format!("Too long: may not be more than {max} bytes"),
    )
}

/// `[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?`
fn reason_ok(r: &str) -> bool {
    let b = r.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    first.is_ascii_alphabetic()
        && (last.is_ascii_alphanumeric() || *last == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':'))
}

/// A label-key style qualified name: `[prefix/]name`, the name at most 63
/// characters of `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn qualified_name(at: &str, v: &str) -> Vec<Cause> {
    let (prefix, name) = match v.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, v),
    };
    let mut c = Vec::new();
    if let Some(p) = prefix {
        c.extend(dns_subdomain(at, p).into_iter().map(|mut x| {
            x.message = format!("Invalid value: {}: prefix part {}", json!(v), x.message);
            x
        }));
    }
    let edge = |ch: Option<char>| ch.is_some_and(|c| c.is_ascii_alphanumeric());
    let ok = !name.is_empty()
        && name.len() <= 63
        && edge(name.chars().next())
        && edge(name.chars().last())
        && name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'));
    if name.is_empty() {
        c.push(invalid(at, &json!(v), "name part must be non-empty"));
    } else if !ok {
        c.push(invalid(at, &json!(v), "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"));
    }
    c
}

/// An RFC 1123 label (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63).
pub fn dns_label(at: &str, v: &str) -> Vec<Cause> {
    let ok = !v.is_empty()
        && v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !v.starts_with('-')
        && !v.ends_with('-');
    if ok {
        Vec::new()
    } else {
        vec![invalid(
            at,
            &json!(v),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        )]
    }
}

/// An RFC 1123 subdomain, the cause at `at`.
pub fn dns_subdomain(at: &str, v: &str) -> Vec<Cause> {
    crate::validation::name_causes(v)
        .into_iter()
        .map(|mut c| {
            c.field = at.into();
            c
        })
        .collect()
}

/// `kubectl get` columns: no printer is registered upstream for these kinds,
/// so NAME and AGE.
pub fn columns() -> (Vec<Value>, Cells) {
    use crate::table::{age, age_col, name_col};
    (
        vec![name_col(), age_col()],
        Box::new(|o, now| vec![age(o, now)]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(c: &[Cause]) -> Vec<&str> {
        c.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn group_versions_sort_as_kube_orders_them() {
        use crate::discovery::version_priority as p;
        assert!(p("v1") > p("v1beta1") && p("v1beta1") > p("v1alpha3"));
        assert!(p("v1alpha3") > p("v1alpha2") && p("v2") > p("v1"));
    }

    #[test]
    fn versions_parse() {
        assert_eq!("none".parse(), Ok(WorkloadApis::NONE));
        assert_eq!("v1beta1".parse(), Ok(WorkloadApis::V1BETA1));
        assert_eq!("v1alpha2, v1beta1".parse(), Ok(WorkloadApis::BOTH));
        assert!("v1".parse::<WorkloadApis>().is_err());
    }

    #[test]
    fn policy_is_a_union_with_a_positive_min_count() {
        let pg = |p: Value| json!({"spec": {"schedulingPolicy": p}});
        let c = causes(Builtin::PodGroup, &pg(json!({})), None);
        assert_eq!(fields(&c), ["spec.schedulingPolicy"]);
        let c = causes(
            Builtin::PodGroup,
            &pg(json!({"basic": {}, "gang": {"minCount": 2}})),
            None,
        );
        assert!(
            c[0].message.contains("multiple fields are set"),
            "{}",
            c[0].message
        );
        let c = causes(Builtin::PodGroup, &pg(json!({"gang": {}})), None);
        assert_eq!(fields(&c), ["spec.schedulingPolicy.gang.minCount"]);
        assert_eq!(c[0].reason, "FieldValueRequired");
        let c = causes(
            Builtin::PodGroup,
            &pg(json!({"gang": {"minCount": -1}})),
            None,
        );
        assert_eq!(c[0].reason, "FieldValueInvalid");
        assert!(
            causes(
                Builtin::PodGroup,
                &pg(json!({"gang": {"minCount": 1}})),
                None
            )
            .is_empty()
        );
    }

    #[test]
    fn conditions_follow_metav1() {
        let good = json!({"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "lastTransitionTime": "2026-01-01T00:00:00Z"});
        assert!(condition_causes(&json!([good]), "status.conditions").is_empty());
        let bad = json!([good, {"type": "PodGroupInitiallyScheduled", "status": "Maybe", "reason": "1bad"}]);
        let c = condition_causes(&bad, "status.conditions");
        assert_eq!(
            fields(&c),
            [
                "status.conditions[1].type",
                "status.conditions[1].status",
                "status.conditions[1].lastTransitionTime",
                "status.conditions[1].reason"
            ]
        );
    }

    #[test]
    fn beta_min_count_is_mutable_alpha_is_not() {
        let spec = |n: i64| json!({"spec": {"schedulingPolicy": {"gang": {"minCount": n}}}});
        assert!(causes(Builtin::PodGroup, &spec(3), Some(&spec(2))).is_empty());
        let c = causes(Builtin::PodGroupV1alpha2, &spec(3), Some(&spec(2)));
        assert_eq!(fields(&c), ["spec.schedulingPolicy"]);
        let basic = json!({"spec": {"schedulingPolicy": {"basic": {}}}});
        let c = causes(Builtin::PodGroup, &basic, Some(&spec(2)));
        assert_eq!(
            fields(&c),
            ["spec.schedulingPolicy.basic", "spec.schedulingPolicy.gang"]
        );
    }
}
