//! Storage kinds served without their controllers: `v1` PersistentVolumes
//! (cluster-scoped) and PersistentVolumeClaims, and `storage.k8s.io/v1`
//! StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities and
//! VolumeAttachments.
//!
//! They are stored, listed and watched with kube-apiserver's defaults, the
//! checks tests trip over (422 naming the field), status subresources (PVs,
//! PVCs, VolumeAttachments) and the columns `kubectl get` prints. Nothing acts
//! on them: no PV controller binds a claim or makes a volume `Available`, no
//! provisioner creates volumes, no attach/detach controller attaches; a PV
//! stays `Pending` and a PVC `Pending` until a test writes their status
//! (and `spec.volumeName`/`spec.claimRef`) itself.

use serde_json::{Value, json};

use crate::error::{ApiResult, Cause};
use crate::kinds::{cause, invalid, required, set_default, unsupported};
use crate::registry::Builtin;
use crate::table::{Cells, age, age_col, col, name_col, s};
use crate::time::format_rfc3339;

/// The volume sources a PersistentVolume may name (exactly one).
const PV_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

/// What kube-apiserver defaults on every write of these kinds.
pub fn defaults(b: Builtin, obj: &mut Value) {
    match b {
        Builtin::PersistentVolume => {
            let spec = &mut obj["spec"];
            set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
            set_default(spec, "volumeMode", json!("Filesystem"));
        }
        Builtin::PersistentVolumeClaim => {
            set_default(&mut obj["spec"], "volumeMode", json!("Filesystem"));
        }
        Builtin::StorageClass => {
            set_default(obj, "reclaimPolicy", json!("Delete"));
            set_default(obj, "volumeBindingMode", json!("Immediate"));
        }
        Builtin::CsiDriver => {
            let spec = &mut obj["spec"];
            for (k, v) in [
                ("attachRequired", json!(true)),
                ("podInfoOnMount", json!(false)),
                ("storageCapacity", json!(false)),
                ("fsGroupPolicy", json!("ReadWriteOnceWithFSType")),
                ("requiresRepublish", json!(false)),
                ("volumeLifecycleModes", json!(["Persistent"])),
            ] {
                set_default(spec, k, v);
            }
        }
        _ => {}
    }
}

/// Defaults and the status a new object starts with (`now` for a PV's
/// `lastPhaseTransitionTime`).
pub fn prepare_create(b: Builtin, obj: &mut Value, now: i64) -> ApiResult<()> {
    defaults(b, obj);
    match b {
        Builtin::PersistentVolume => {
            obj["status"] =
                json!({"phase": "Pending", "lastPhaseTransitionTime": format_rfc3339(now)});
        }
        Builtin::PersistentVolumeClaim => obj["status"] = json!({"phase": "Pending"}),
        Builtin::VolumeAttachment => obj["status"] = json!({"attached": false}),
        _ => {}
    }
    Ok(())
}

fn non_empty_map(v: &Value) -> bool {
    v.as_object().is_some_and(|m| !m.is_empty())
}

fn non_empty_list(v: &Value) -> bool {
    v.as_array().is_some_and(|a| !a.is_empty())
}

fn forbidden_update(field: &str) -> Cause {
    cause(
        "FieldValueForbidden",
        field,
        format!("Forbidden: updates to {field} are forbidden."),
    )
}

/// Validation of these kinds (`old` on updates).
pub fn causes(b: Builtin, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let spec = &obj["spec"];
    let mut c = Vec::new();
    match b {
        Builtin::PersistentVolume => {
            if !non_empty_map(&spec["capacity"]) {
                c.push(required("spec.capacity", ""));
            }
            if !non_empty_list(&spec["accessModes"]) {
                c.push(required("spec.accessModes", ""));
            }
            let sources = PV_SOURCES.iter().filter(|k| spec[**k].is_object()).count();
            if sources == 0 {
                c.push(required("spec", "must specify a volume type"));
            } else if sources > 1 {
                c.push(cause(
                    "FieldValueForbidden",
                    "spec",
                    "Forbidden: may not specify more than 1 volume type",
                ));
            }
            let rp = &spec["persistentVolumeReclaimPolicy"];
            let policies = ["Delete", "Recycle", "Retain"];
            if !policies.contains(&rp.as_str().unwrap_or("")) {
                c.push(unsupported(
                    "spec.persistentVolumeReclaimPolicy",
                    rp,
                    &policies,
                ));
            }
        }
        Builtin::PersistentVolumeClaim => {
            if !non_empty_list(&spec["accessModes"]) {
                c.push(required(
                    "spec.accessModes",
                    "at least 1 access mode is required",
                ));
            }
            if spec["resources"]["requests"]["storage"].is_null() {
                c.push(required("spec.resources[storage]", ""));
            }
            if let Some(old) = old {
                c.extend(claim_update_causes(spec, &old["spec"]));
            }
        }
        Builtin::StorageClass => {
            if obj["provisioner"].as_str().is_none_or(str::is_empty) {
                c.push(required("provisioner", ""));
            }
            let rp = &obj["reclaimPolicy"];
            if !["Delete", "Retain"].contains(&rp.as_str().unwrap_or("")) {
                c.push(unsupported("reclaimPolicy", rp, &["Delete", "Retain"]));
            }
            let vbm = &obj["volumeBindingMode"];
            let modes = ["Immediate", "WaitForFirstConsumer"];
            if !modes.contains(&vbm.as_str().unwrap_or("")) {
                c.push(unsupported("volumeBindingMode", vbm, &modes));
            }
            if let Some(old) = old {
                for f in ["parameters", "provisioner", "reclaimPolicy"] {
                    if obj[f] != old[f] {
                        c.push(forbidden_update(f));
                    }
                }
                if obj["volumeBindingMode"] != old["volumeBindingMode"] {
                    c.push(invalid("volumeBindingMode", vbm, "field is immutable"));
                }
            }
        }
        Builtin::CsiStorageCapacity
            if obj["storageClassName"].as_str().is_none_or(str::is_empty) =>
        {
            c.push(required("storageClassName", ""));
        }
        Builtin::VolumeAttachment => {
            for f in ["attacher", "nodeName"] {
                if spec[f].as_str().is_none_or(str::is_empty) {
                    c.push(required(format!("spec.{f}"), ""));
                }
            }
            let pv = spec["source"]["persistentVolumeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty());
            let inline = spec["source"]["inlineVolumeSpec"].is_object();
            if pv == inline {
                c.push(required(
                    "spec.source",
                    "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
                ));
            }
            if let Some(old) = old
                && old["spec"] != *spec
            {
                c.push(invalid("spec", spec, "field is immutable"));
            }
        }
        _ => {}
    }
    c
}

/// A claim's spec is immutable but for its requests, its
/// `volumeAttributesClassName`, and `volumeName` while unset (binding).
fn claim_update_causes(spec: &Value, old: &Value) -> Vec<Cause> {
    let strip = |s: &Value, volume_name: bool| {
        let mut s = s.clone();
        if let Some(m) = s.as_object_mut() {
            m.remove("volumeAttributesClassName");
            if volume_name {
                m.remove("volumeName");
            }
        }
        if let Some(r) = s["resources"].as_object_mut() {
            r.remove("requests");
        }
        s
    };
    let binding = old["volumeName"].as_str().is_none_or(str::is_empty);
    if strip(spec, binding) == strip(old, binding) {
        return Vec::new();
    }
    vec![cause(
        "FieldValueForbidden",
        "spec",
        "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
    )]
}

/// `RWO,ROX,RWX,RWOP`, in that order, as kubectl shows access modes.
fn access_modes(v: &Value) -> String {
    let modes: Vec<&str> = v
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| modes.contains(m))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

fn str_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn class_of(o: &Value) -> String {
    o["spec"]["storageClassName"]
        .as_str()
        .or(o["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"].as_str())
        .unwrap_or("")
        .to_string()
}

fn unset(v: &Value) -> Value {
    match v.as_str() {
        Some(x) if !x.is_empty() => json!(x),
        _ => json!("<unset>"),
    }
}

fn phase(o: &Value) -> String {
    if o["metadata"]["deletionTimestamp"].is_string() {
        "Terminating".into()
    } else {
        str_of(&o["status"]["phase"])
    }
}

/// The NAME cell: a StorageClass marked as the default says so.
pub fn display_name(b: Builtin, o: &Value) -> Value {
    let name = o["metadata"]["name"].clone();
    let ann = &o["metadata"]["annotations"];
    let default = ann["storageclass.kubernetes.io/is-default-class"] == "true"
        || ann["storageclass.beta.kubernetes.io/is-default-class"] == "true";
    if b == Builtin::StorageClass && default {
        json!(format!("{} (default)", name.as_str().unwrap_or("")))
    } else {
        name
    }
}

fn cols(specs: &[(&str, &str, i64)]) -> Vec<Value> {
    let mut v = vec![name_col()];
    for (name, ty, priority) in specs {
        if *name == "Age" {
            v.push(age_col());
        } else {
            v.push(col(name, ty, "", *priority, ""));
        }
    }
    v
}

/// Column definitions and cells of these kinds (kube-apiserver's printers).
pub fn columns(b: Builtin) -> (Vec<Value>, Cells) {
    let st = "string";
    match b {
        Builtin::PersistentVolume => (
            cols(&[
                ("Capacity", st, 0),
                ("Access Modes", st, 0),
                ("Reclaim Policy", st, 0),
                ("Status", st, 0),
                ("Claim", st, 0),
                ("StorageClass", st, 0),
                ("VolumeAttributesClass", st, 0),
                ("Reason", st, 0),
                ("Age", st, 0),
                ("VolumeMode", st, 1),
            ]),
            Box::new(|o, now| {
                let spec = &o["spec"];
                let claim = if spec["claimRef"].is_object() {
                    format!(
                        "{}/{}",
                        str_of(&spec["claimRef"]["namespace"]),
                        str_of(&spec["claimRef"]["name"])
                    )
                } else {
                    String::new()
                };
                vec![
                    json!(str_of(&spec["capacity"]["storage"])),
                    json!(access_modes(&spec["accessModes"])),
                    json!(str_of(&spec["persistentVolumeReclaimPolicy"])),
                    json!(phase(o)),
                    json!(claim),
                    json!(class_of(o)),
                    unset(&spec["volumeAttributesClassName"]),
                    json!(str_of(&o["status"]["reason"])),
                    age(o, now),
                    unset(&spec["volumeMode"]),
                ]
            }),
        ),
        Builtin::PersistentVolumeClaim => (
            cols(&[
                ("Status", st, 0),
                ("Volume", st, 0),
                ("Capacity", st, 0),
                ("Access Modes", st, 0),
                ("StorageClass", st, 0),
                ("VolumeAttributesClass", st, 0),
                ("Age", st, 0),
                ("VolumeMode", st, 1),
            ]),
            Box::new(|o, now| {
                let spec = &o["spec"];
                let bound = spec["volumeName"].as_str().is_some_and(|v| !v.is_empty());
                let (capacity, modes) = if bound {
                    (
                        str_of(&o["status"]["capacity"]["storage"]),
                        access_modes(&o["status"]["accessModes"]),
                    )
                } else {
                    (String::new(), String::new())
                };
                vec![
                    json!(phase(o)),
                    json!(str_of(&spec["volumeName"])),
                    json!(capacity),
                    json!(modes),
                    json!(class_of(o)),
                    unset(&spec["volumeAttributesClassName"]),
                    age(o, now),
                    unset(&spec["volumeMode"]),
                ]
            }),
        ),
        Builtin::StorageClass => (
            cols(&[
                ("Provisioner", st, 0),
                ("ReclaimPolicy", st, 0),
                ("VolumeBindingMode", st, 0),
                ("AllowVolumeExpansion", st, 0),
                ("Age", st, 0),
            ]),
            Box::new(|o, now| {
                vec![
                    s(&o["provisioner"]),
                    json!(o["reclaimPolicy"].as_str().unwrap_or("Delete")),
                    json!(o["volumeBindingMode"].as_str().unwrap_or("Immediate")),
                    json!(o["allowVolumeExpansion"].as_bool().unwrap_or(false)),
                    age(o, now),
                ]
            }),
        ),
        Builtin::CsiNode => (
            cols(&[("Drivers", "integer", 0), ("Age", st, 0)]),
            Box::new(|o, now| {
                vec![
                    json!(o["spec"]["drivers"].as_array().map_or(0, Vec::len)),
                    age(o, now),
                ]
            }),
        ),
        Builtin::CsiDriver => (
            cols(&[
                ("AttachRequired", "boolean", 0),
                ("PodInfoOnMount", "boolean", 0),
                ("StorageCapacity", "boolean", 0),
                ("TokenRequests", st, 0),
                ("RequiresRepublish", "boolean", 0),
                ("Modes", st, 0),
                ("Age", st, 0),
            ]),
            Box::new(|o, now| {
                let spec = &o["spec"];
                let b = |k: &str, d: bool| json!(spec[k].as_bool().unwrap_or(d));
                let audiences: Vec<String> = spec["tokenRequests"]
                    .as_array()
                    .map(|a| a.iter().map(|t| str_of(&t["audience"])).collect())
                    .unwrap_or_default();
                let modes: Vec<String> = spec["volumeLifecycleModes"]
                    .as_array()
                    .map(|a| a.iter().map(str_of).collect())
                    .unwrap_or_default();
                let or = |v: Vec<String>, d: &str| {
                    if v.is_empty() {
                        d.to_string()
                    } else {
                        v.join(",")
                    }
                };
                vec![
                    b("attachRequired", true),
                    b("podInfoOnMount", false),
                    b("storageCapacity", false),
                    json!(or(audiences, "<unset>")),
                    b("requiresRepublish", false),
                    json!(or(modes, "<none>")),
                    age(o, now),
                ]
            }),
        ),
        Builtin::CsiStorageCapacity => (
            cols(&[
                ("StorageClassName", st, 0),
                ("Capacity", st, 0),
                ("Age", st, 0),
            ]),
            Box::new(|o, now| {
                vec![
                    json!(str_of(&o["storageClassName"])),
                    unset(&o["capacity"]),
                    age(o, now),
                ]
            }),
        ),
        _ => (
            cols(&[
                ("Attacher", st, 0),
                ("PV", st, 0),
                ("Node", st, 0),
                ("Attached", "boolean", 0),
                ("Age", st, 0),
            ]),
            Box::new(|o, now| {
                let spec = &o["spec"];
                vec![
                    json!(str_of(&spec["attacher"])),
                    json!(str_of(&spec["source"]["persistentVolumeName"])),
                    json!(str_of(&spec["nodeName"])),
                    json!(o["status"]["attached"].as_bool().unwrap_or(false)),
                    age(o, now),
                ]
            }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_and_volumes_default_validate_and_print_as_kubectl_shows_them() {
        let mut pv = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"], "hostPath": {"path": "/data"}}});
        prepare_create(Builtin::PersistentVolume, &mut pv, 0).expect("prepared");
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["status"]["phase"], "Pending");
        assert!(causes(Builtin::PersistentVolume, &pv, None).is_empty());
        assert_eq!(access_modes(&pv["spec"]["accessModes"]), "RWO,RWX");
        let fields = |v: Vec<Cause>| v.into_iter().map(|c| c.field).collect::<Vec<_>>();
        assert_eq!(
            fields(causes(
                Builtin::PersistentVolume,
                &json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}}),
                None
            )),
            ["spec.capacity", "spec.accessModes", "spec"]
        );
        let pvc = json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        assert!(causes(Builtin::PersistentVolumeClaim, &pvc, None).is_empty());
        let mut bound = pvc.clone();
        bound["spec"]["volumeName"] = json!("pv1");
        bound["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert!(causes(Builtin::PersistentVolumeClaim, &bound, Some(&pvc)).is_empty());
        let mut changed = bound.clone();
        changed["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        assert_eq!(
            fields(causes(
                Builtin::PersistentVolumeClaim,
                &changed,
                Some(&bound)
            )),
            ["spec"]
        );
        let sc = json!({"metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}});
        assert_eq!(display_name(Builtin::StorageClass, &sc), "fast (default)");
    }
}
