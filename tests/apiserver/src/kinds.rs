//! The built-in kinds an installation brings (ServiceAccounts, Services, Secrets,
//! Deployments and the RBAC kinds): the defaults kube-apiserver fills in on create,
//! the validation that matters to tests (422 naming the field), and the update
//! rules (immutable fields, values the server carries over).
//!
//! No controller runs for these kinds: a Deployment creates no ReplicaSets or pods,
//! a Service gets no endpoints, a namespace gets no `default` ServiceAccount.
//! The workload and storage kinds are in [`crate::workloads`] and
//! [`crate::storage`]; this module dispatches their validation and update
//! defaults to them.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, Cause};
use crate::registry::{Builtin, ResourceDef};
use crate::selector::LabelSelector;
use crate::state::State;

pub(crate) fn cause(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Cause {
    Cause {
        reason: reason.into(),
        message: message.into(),
        field: field.into(),
    }
}

pub(crate) fn required(field: impl Into<String>, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    cause("FieldValueRequired", field, message)
}

pub(crate) fn invalid(field: impl Into<String>, value: &Value, detail: &str) -> Cause {
    cause(
        "FieldValueInvalid",
        field,
        format!("Invalid value: {value}: {detail}"),
    )
}

pub(crate) fn unsupported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Cause {
    let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
    cause(
        "FieldValueNotSupported",
        field,
        format!(
            "Unsupported value: {value}: supported values: {}",
            list.join(", ")
        ),
    )
}

pub(crate) fn set_default(obj: &mut Value, key: &str, v: Value) {
    if obj.get(key).is_none_or(Value::is_null) {
        obj[key] = v;
    }
}

/// Fills in what kube-apiserver defaults when one of these kinds is created.
pub fn prepare_create(st: &State, def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
    match def.builtin {
        Builtin::Service => {
            default_service(obj);
            let spec = &mut obj["spec"];
            let headless = spec["clusterIP"] == "None";
            if spec["type"] != "ExternalName"
                && !headless
                && spec["clusterIP"].as_str().is_none_or(str::is_empty)
            {
                let ip = free_cluster_ip(st);
                spec["clusterIP"] = json!(ip);
                spec["clusterIPs"] = json!([ip]);
            } else if spec["clusterIP"].is_string() && spec.get("clusterIPs").is_none() {
                spec["clusterIPs"] = json!([spec["clusterIP"].clone()]);
            }
            obj["status"] = json!({"loadBalancer": {}});
        }
        Builtin::Secret => {
            set_default(obj, "type", json!("Opaque"));
            fold_string_data(obj)?;
        }
        Builtin::Deployment => {
            let spec = &mut obj["spec"];
            set_default(spec, "replicas", json!(1));
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(spec, "progressDeadlineSeconds", json!(600));
            set_default(
                spec,
                "strategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
            );
            if spec["template"]["spec"].is_object() {
                let pod = &mut spec["template"]["spec"];
                for (k, v) in [
                    ("restartPolicy", json!("Always")),
                    ("terminationGracePeriodSeconds", json!(30)),
                    ("dnsPolicy", json!("ClusterFirst")),
                    ("schedulerName", json!("default-scheduler")),
                ] {
                    set_default(pod, k, v);
                }
            }
            obj["status"] = json!({});
        }
        _ => {}
    }
    Ok(())
}

/// Carries over what the server keeps on updates (a Service's allocated IPs) and
/// folds a Secret's `stringData` into `data`.
pub fn prepare_update(def: &ResourceDef, old: &Value, obj: &mut Value) -> ApiResult<()> {
    match def.builtin {
        Builtin::Service => {
            default_service(obj);
            for k in ["clusterIP", "clusterIPs"] {
                if obj["spec"].get(k).is_none_or(Value::is_null)
                    && let Some(v) = old["spec"].get(k)
                {
                    obj["spec"][k] = v.clone();
                }
            }
        }
        Builtin::Secret => {
            set_default(obj, "type", json!("Opaque"));
            fold_string_data(obj)?;
        }
        Builtin::Job
        | Builtin::ReplicaSet
        | Builtin::StatefulSet
        | Builtin::ReplicationController => crate::workloads::defaults(def.builtin, obj),
        Builtin::PersistentVolume
        | Builtin::PersistentVolumeClaim
        | Builtin::StorageClass
        | Builtin::CsiDriver => crate::storage::defaults(def.builtin, obj),
        _ => {}
    }
    Ok(())
}

fn default_service(obj: &mut Value) {
    let spec = &mut obj["spec"];
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    if spec["type"] != "ExternalName" {
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if let Some(ports) = spec["ports"].as_array_mut() {
        for p in ports {
            set_default(p, "protocol", json!("TCP"));
            if p.get("targetPort").is_none_or(Value::is_null) {
                p["targetPort"] = p["port"].clone();
            }
        }
    }
}

/// The first free address in 10.96.0.10–10.96.255.254 (10.96.0.1 is the
/// `kubernetes` Service's in a real cluster).
fn free_cluster_ip(st: &State) -> String {
    let used: BTreeSet<String> = st
        .store
        .list("/services", None)
        .iter()
        .filter_map(|s| s["spec"]["clusterIP"].as_str().map(String::from))
        .collect();
    (10u32..65_534)
        .map(|n| format!("10.96.{}.{}", n / 256, n % 256))
        .find(|ip| !ip.ends_with(".0") && !ip.ends_with(".255") && !used.contains(ip))
        .unwrap_or_else(|| "10.96.255.254".into())
}

fn fold_string_data(obj: &mut Value) -> ApiResult<()> {
    let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
    if let Some(data) = obj["data"].as_object() {
        for v in data.values() {
            let s = v.as_str().unwrap_or("");
            if let Err(at) = base64_check(s) {
                return Err(ApiError::bad_request(format!(
                    "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte {at}"
                )));
            }
        }
    }
    let Some(string_data) = obj
        .as_object_mut()
        .and_then(|m| m.remove("stringData"))
        .and_then(|v| v.as_object().cloned())
    else {
        return Ok(());
    };
    for (k, v) in string_data {
        let Some(s) = v.as_str() else {
            return Err(ApiError::bad_request(format!(
                "Secret in version \"v1\" cannot be handled as a Secret: stringData.{k} of secret {name:?} is not a string"
            )));
        };
        obj["data"][k] = json!(base64_encode(s.as_bytes()));
    }
    Ok(())
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Checks standard padded base64; `Err(index)` of the first bad byte.
fn base64_check(s: &str) -> Result<(), usize> {
    let b = s.as_bytes();
    let pad = b.iter().rev().take_while(|c| **c == b'=').count();
    for (i, c) in b.iter().enumerate() {
        let ok = B64.contains(c) || (*c == b'=' && i >= b.len() - pad);
        if !ok {
            return Err(i);
        }
    }
    if !b.len().is_multiple_of(4) || pad > 2 {
        return Err(b.len().saturating_sub(pad.max(1)));
    }
    Ok(())
}

/// Whether the kind's names need only be valid path segments (the RBAC kinds,
/// whose names such as `system:discovery` are not DNS subdomains).
pub fn path_segment_named(def: &ResourceDef) -> bool {
    matches!(
        def.builtin,
        Builtin::ClusterRole | Builtin::ClusterRoleBinding | Builtin::Role | Builtin::RoleBinding
    )
}

/// kube-apiserver's `path.IsValidPathSegmentName` check of `metadata.name`.
pub fn path_segment_causes(name: &str) -> Vec<Cause> {
    let detail = if name.is_empty() {
        return vec![required(
            "metadata.name",
            "name or generateName is required",
        )];
    } else if name == "." || name == ".." {
        format!("may not be '{name}'")
    } else if let Some(c) = ['/', '%'].into_iter().find(|c| name.contains(*c)) {
        format!("may not contain '{c}'")
    } else {
        return Vec::new();
    };
    vec![invalid("metadata.name", &json!(name), &detail)]
}

/// Validation of these kinds (`old` on updates).
pub fn causes(def: &ResourceDef, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    match def.builtin {
        Builtin::Deployment => deployment_causes(obj, old),
        Builtin::Service => service_causes(obj, old),
        Builtin::ClusterRole | Builtin::Role => {
            let namespaced = def.builtin == Builtin::Role;
            let mut c = Vec::new();
            if let Some(rules) = obj["rules"].as_array() {
                for (i, r) in rules.iter().enumerate() {
                    c.extend(rule_causes(r, namespaced, &format!("rules[{i}]")));
                }
            }
            c
        }
        Builtin::ClusterRoleBinding | Builtin::RoleBinding => binding_causes(def, obj, old),
        Builtin::Job
        | Builtin::ReplicaSet
        | Builtin::StatefulSet
        | Builtin::ReplicationController => crate::workloads::causes(def.builtin, obj, old),
        Builtin::PersistentVolume
        | Builtin::PersistentVolumeClaim
        | Builtin::StorageClass
        | Builtin::CsiStorageCapacity
        | Builtin::VolumeAttachment => crate::storage::causes(def.builtin, obj, old),
        Builtin::ResourceSlice
        | Builtin::DeviceClass
        | Builtin::ResourceClaim
        | Builtin::ResourceClaimTemplate
        | Builtin::DeviceTaintRule => crate::dra::causes(def.builtin, obj, old),
        Builtin::Workload
        | Builtin::PodGroup
        | Builtin::WorkloadV1alpha2
        | Builtin::PodGroupV1alpha2 => crate::scheduling::causes(def.builtin, obj, old),
        _ => Vec::new(),
    }
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// kube-apiserver's `ValidatePolicyRule`.
pub fn rule_causes(rule: &Value, namespaced: bool, path: &str) -> Vec<Cause> {
    let mut c = Vec::new();
    if strings(&rule["verbs"]).is_empty() {
        c.push(required(
            format!("{path}.verbs"),
            "verbs must contain at least one value",
        ));
    }
    let urls = &rule["nonResourceURLs"];
    if !strings(urls).is_empty() {
        if namespaced {
            c.push(invalid(
                format!("{path}.nonResourceURLs"),
                urls,
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if !strings(&rule["apiGroups"]).is_empty()
            || !strings(&rule["resources"]).is_empty()
            || !strings(&rule["resourceNames"]).is_empty()
        {
            c.push(invalid(
                format!("{path}.nonResourceURLs"),
                urls,
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return c;
    }
    if rule["apiGroups"].as_array().is_none_or(Vec::is_empty) {
        c.push(required(
            format!("{path}.apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if strings(&rule["resources"]).is_empty() {
        c.push(required(
            format!("{path}.resources"),
            "resource rules must supply at least one resource",
        ));
    }
    c
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

fn binding_causes(def: &ResourceDef, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut c = Vec::new();
    let namespaced = def.builtin == Builtin::RoleBinding;
    let rr = &obj["roleRef"];
    if rr["apiGroup"] != RBAC_GROUP {
        c.push(unsupported(
            "roleRef.apiGroup",
            &json!(rr["apiGroup"].as_str().unwrap_or("")),
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = rr["kind"].as_str().unwrap_or("");
    if !kinds.contains(&kind) {
        c.push(unsupported("roleRef.kind", &json!(kind), kinds));
    }
    if rr["name"].as_str().is_none_or(str::is_empty) {
        c.push(required("roleRef.name", ""));
    }
    if let Some(subjects) = obj["subjects"].as_array() {
        for (i, s) in subjects.iter().enumerate() {
            let p = format!("subjects[{i}]");
            if s["name"].as_str().is_none_or(str::is_empty) {
                c.push(required(format!("{p}.name"), ""));
            }
            match s["kind"].as_str().unwrap_or("") {
                "ServiceAccount" => {
                    if s["apiGroup"].as_str().is_some_and(|g| !g.is_empty()) {
                        c.push(unsupported(format!("{p}.apiGroup"), &s["apiGroup"], &[""]));
                    }
                    if !namespaced && s["namespace"].as_str().is_none_or(str::is_empty) {
                        c.push(required(format!("{p}.namespace"), ""));
                    }
                }
                "User" | "Group" => {
                    if s["apiGroup"] != RBAC_GROUP {
                        c.push(unsupported(
                            format!("{p}.apiGroup"),
                            &json!(s["apiGroup"].as_str().unwrap_or("")),
                            &[RBAC_GROUP],
                        ));
                    }
                }
                other => c.push(unsupported(
                    format!("{p}.kind"),
                    &json!(other),
                    &["ServiceAccount", "User", "Group"],
                )),
            }
        }
    }
    if let Some(old) = old
        && old["roleRef"] != obj["roleRef"]
    {
        c.push(invalid("roleRef", rr, "cannot change roleRef"));
    }
    c
}

fn deployment_causes(obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut c = Vec::new();
    let spec = &obj["spec"];
    if let Some(r) = spec["replicas"].as_i64()
        && r < 0
    {
        c.push(invalid(
            "spec.replicas",
            &json!(r),
            "must be greater than or equal to 0",
        ));
    }
    let sel = &spec["selector"];
    if !sel.is_object() {
        c.push(required("spec.selector", ""));
    } else if sel["matchLabels"].as_object().is_none_or(|m| m.is_empty())
        && sel["matchExpressions"].as_array().is_none_or(Vec::is_empty)
    {
        c.push(invalid(
            "spec.selector",
            sel,
            "empty selector is invalid for deployment",
        ));
    }
    let tpl = &spec["template"];
    if !tpl.is_object() {
        c.push(required("spec.template", ""));
    } else {
        if sel.is_object() && !LabelSelector::from_object(sel).matches(tpl) {
            let labels = match &tpl["metadata"]["labels"] {
                Value::Null => json!({}),
                l => l.clone(),
            };
            c.push(invalid(
                "spec.template.metadata.labels",
                &labels,
                "`selector` does not match template `labels`",
            ));
        }
        let pod = json!({"spec": tpl["spec"].clone()});
        c.extend(
            crate::validation::pod_causes(&pod)
                .into_iter()
                .map(|mut x| {
                    x.field = format!("spec.template.{}", x.field);
                    x
                }),
        );
        let rp = &tpl["spec"]["restartPolicy"];
        if rp.is_string() && rp != "Always" {
            c.push(unsupported(
                "spec.template.spec.restartPolicy",
                rp,
                &["Always"],
            ));
        }
    }
    if let Some(old) = old
        && old["spec"]["selector"] != *sel
    {
        c.push(invalid("spec.selector", sel, "field is immutable"));
    }
    c
}

fn service_causes(obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut c = Vec::new();
    let spec = &obj["spec"];
    let ty = spec["type"].as_str().unwrap_or("ClusterIP");
    let types = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !types.contains(&ty) {
        c.push(unsupported("spec.type", &json!(ty), &types));
    }
    let headless = spec["clusterIP"] == "None";
    let ports = spec["ports"].as_array().cloned().unwrap_or_default();
    if ports.is_empty() && ty != "ExternalName" && !headless {
        c.push(required("spec.ports", ""));
    }
    if ty == "ExternalName" && spec["externalName"].as_str().is_none_or(str::is_empty) {
        c.push(required("spec.externalName", ""));
    }
    for (i, p) in ports.iter().enumerate() {
        let port = p["port"].as_i64().unwrap_or(0);
        if !(1..=65535).contains(&port) {
            c.push(invalid(
                format!("spec.ports[{i}].port"),
                &json!(port),
                "must be between 1 and 65535, inclusive",
            ));
        }
        if ports.len() > 1 && p["name"].as_str().is_none_or(str::is_empty) {
            c.push(required(format!("spec.ports[{i}].name"), ""));
        }
    }
    if let Some(old) = old {
        let was = &old["spec"]["clusterIP"];
        if was.as_str().is_some_and(|s| !s.is_empty()) && spec["clusterIP"] != *was {
            c.push(invalid(
                "spec.clusterIPs[0]",
                &spec["clusterIP"],
                "may not change once set",
            ));
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_rejects_bad_input() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(base64_encode(b"queue: gpu\n"), "cXVldWU6IGdwdQo=");
        assert_eq!(base64_check("Zm9v"), Ok(()));
        assert_eq!(base64_check("Zg=="), Ok(()));
        assert_eq!(base64_check("Zm9v!"), Err(4));
        assert!(base64_check("Zm9").is_err());
    }

    #[test]
    fn rbac_names_are_path_segments() {
        assert!(path_segment_causes("system:discovery").is_empty());
        assert!(path_segment_causes("Trainyard_Scheduler").is_empty());
        assert_eq!(
            path_segment_causes("a/b")[0].message,
            "Invalid value: \"a/b\": may not contain '/'"
        );
        assert_eq!(path_segment_causes("..").len(), 1);
    }

    #[test]
    fn policy_rules_need_verbs_and_cannot_mix_urls() {
        let fields = |r: Value, ns: bool| -> Vec<String> {
            rule_causes(&r, ns, "rules[0]")
                .into_iter()
                .map(|c| c.field)
                .collect()
        };
        assert!(
            fields(
                json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}),
                true
            )
            .is_empty()
        );
        assert_eq!(
            fields(
                json!({"apiGroups": [""], "resources": ["pods"], "verbs": []}),
                false
            ),
            ["rules[0].verbs"]
        );
        assert_eq!(
            fields(json!({"verbs": ["get"]}), false),
            ["rules[0].apiGroups", "rules[0].resources"]
        );
        assert_eq!(
            fields(
                json!({"nonResourceURLs": ["/metrics"], "resources": ["pods"], "verbs": ["get"]}),
                true
            ),
            ["rules[0].nonResourceURLs", "rules[0].nonResourceURLs"]
        );
    }
}
