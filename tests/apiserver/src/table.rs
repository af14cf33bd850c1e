//! `meta.k8s.io/v1` Table responses (what `kubectl get` asks for).

use serde_json::{Value, json};

pub use crate::jsonpath::{jsonpath_all, jsonpath_first};
use crate::registry::{Builtin, ResourceDef};
use crate::time::{human_duration, parse_rfc3339};

pub(crate) fn col(name: &str, ty: &str, format: &str, priority: i64, description: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

pub(crate) fn age(obj: &Value, now: i64) -> Value {
    match obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(parse_rfc3339)
    {
        Some(t) => json!(human_duration(now - t)),
        None => json!("<unknown>"),
    }
}

pub(crate) fn s(v: &Value) -> Value {
    match v {
        Value::Null => json!("<none>"),
        Value::String(x) if x.is_empty() => json!("<none>"),
        other => other.clone(),
    }
}

fn pod_status(p: &Value) -> String {
    if p["metadata"]["deletionTimestamp"].is_string() {
        return "Terminating".into();
    }
    if let Some(r) = p["status"]["reason"].as_str() {
        return r.into();
    }
    let mut reason = p["status"]["phase"]
        .as_str()
        .unwrap_or("Pending")
        .to_string();
    if let Some(cs) = p["status"]["containerStatuses"].as_array() {
        for c in cs {
            if let Some(r) = c["state"]["waiting"]["reason"].as_str() {
                reason = r.into();
            } else if let Some(r) = c["state"]["terminated"]["reason"].as_str() {
                reason = r.into();
            }
        }
    }
    reason
}

fn pod_row(p: &Value) -> Vec<Value> {
    let total = p["spec"]["containers"].as_array().map_or(0, Vec::len);
    let statuses = p["status"]["containerStatuses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ready = statuses
        .iter()
        .filter(|c| c["ready"] == json!(true))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|c| c["restartCount"].as_i64())
        .sum();
    let gates = p["spec"]["readinessGates"].as_array().map_or(0, Vec::len);
    vec![
        json!(format!("{ready}/{total}")),
        json!(pod_status(p)),
        json!(restarts),
        Value::Null,
        s(&p["status"]["podIP"]),
        s(&p["spec"]["nodeName"]),
        s(&p["status"]["nominatedNodeName"]),
        if gates == 0 {
            json!("<none>")
        } else {
            json!(format!("0/{gates}"))
        },
    ]
}

fn node_status(n: &Value) -> String {
    let ready = n["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"] == "True");
    let mut st = match ready {
        Some(true) => "Ready".to_string(),
        Some(false) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if n["spec"]["unschedulable"] == json!(true) {
        st.push_str(",SchedulingDisabled");
    }
    st
}

fn node_roles(n: &Value) -> String {
    let mut roles: Vec<&str> = n["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    if roles.is_empty() {
        "<none>".into()
    } else {
        roles.join(",")
    }
}

/// `k=v,k2=v2` of a string map, `<none>` when empty.
fn map_pairs(m: &Value) -> String {
    match m.as_object() {
        Some(m) if !m.is_empty() => m
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect::<Vec<_>>()
            .join(","),
        _ => "<none>".into(),
    }
}

/// Column definitions and a cell builder for a resource at a version.
pub(crate) type Cells = Box<dyn Fn(&Value, i64) -> Vec<Value>>;

/// The NAME column.
pub(crate) fn name_col() -> Value {
    col(
        "Name",
        "string",
        "name",
        0,
        "Name must be unique within a namespace.",
    )
}

/// The AGE column.
pub(crate) fn age_col() -> Value {
    col(
        "Age",
        "string",
        "",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    )
}

fn columns(def: &ResourceDef, version: &str) -> (Vec<Value>, Cells) {
    let name_col = name_col();
    let age_col = age_col();
    match def.builtin {
        Builtin::Job
        | Builtin::ReplicaSet
        | Builtin::StatefulSet
        | Builtin::ReplicationController => crate::workloads::columns(def.builtin),
        Builtin::PersistentVolume
        | Builtin::PersistentVolumeClaim
        | Builtin::StorageClass
        | Builtin::CsiNode
        | Builtin::CsiDriver
        | Builtin::CsiStorageCapacity
        | Builtin::VolumeAttachment => crate::storage::columns(def.builtin),
        Builtin::ResourceSlice
        | Builtin::DeviceClass
        | Builtin::ResourceClaim
        | Builtin::ResourceClaimTemplate
        | Builtin::DeviceTaintRule => crate::dra::columns(def.builtin),
        Builtin::Workload
        | Builtin::PodGroup
        | Builtin::WorkloadV1alpha2
        | Builtin::PodGroupV1alpha2 => crate::scheduling::columns(),
        Builtin::EventsV1 => {
            // One printer for both APIs, over the stored (core) shape.
            let core = ResourceDef {
                builtin: Builtin::Event,
                ..def.clone()
            };
            let (defs, cells) = columns(&core, version);
            (
                defs,
                Box::new(move |o, now| cells(&crate::events::to_core(o.clone()), now)),
            )
        }
        Builtin::Pod => (
            vec![
                name_col,
                col(
                    "Ready",
                    "string",
                    "",
                    0,
                    "The aggregate readiness state of this pod for accepting traffic.",
                ),
                col(
                    "Status",
                    "string",
                    "",
                    0,
                    "The aggregate status of the containers in this pod.",
                ),
                col(
                    "Restarts",
                    "string",
                    "",
                    0,
                    "The number of times the containers in this pod have been restarted.",
                ),
                age_col,
                col("IP", "string", "", 1, "IP address allocated to the pod."),
                col(
                    "Node",
                    "string",
                    "",
                    1,
                    "Name of the node assigned to the pod.",
                ),
                col(
                    "Nominated Node",
                    "string",
                    "",
                    1,
                    "Name of the node nominated by the scheduler.",
                ),
                col("Readiness Gates", "string", "", 1, "Pod readiness gates."),
            ],
            Box::new(|o, now| {
                let mut r = pod_row(o);
                r[3] = age(o, now);
                r
            }),
        ),
        Builtin::Node => (
            vec![
                name_col,
                col("Status", "string", "", 0, "The status of the node"),
                col("Roles", "string", "", 0, "The roles of the node"),
                age_col,
                col(
                    "Version",
                    "string",
                    "",
                    0,
                    "Kubelet Version reported by the node.",
                ),
            ],
            Box::new(|o, now| {
                vec![
                    json!(node_status(o)),
                    json!(node_roles(o)),
                    age(o, now),
                    json!(
                        o["status"]["nodeInfo"]["kubeletVersion"]
                            .as_str()
                            .unwrap_or("")
                    ),
                ]
            }),
        ),
        Builtin::Namespace => (
            vec![
                name_col,
                col("Status", "string", "", 0, "The status of the namespace"),
                age_col,
            ],
            Box::new(|o, now| vec![s(&o["status"]["phase"]), age(o, now)]),
        ),
        Builtin::Event => (
            vec![
                col(
                    "Last Seen",
                    "string",
                    "",
                    0,
                    "Time when last this event was seen.",
                ),
                col("Type", "string", "", 0, "Type of this event."),
                col(
                    "Reason",
                    "string",
                    "",
                    0,
                    "Reason is why the action was taken.",
                ),
                col(
                    "Object",
                    "string",
                    "",
                    0,
                    "The object that this event is about.",
                ),
                col(
                    "Message",
                    "string",
                    "",
                    0,
                    "A human-readable description of the status of this operation.",
                ),
                col("Name", "string", "name", 1, "Name of the event."),
            ],
            Box::new(|o, now| {
                let seen = o["lastTimestamp"]
                    .as_str()
                    .or(o["eventTime"].as_str())
                    .or(o["metadata"]["creationTimestamp"].as_str())
                    .and_then(parse_rfc3339)
                    .map_or("<unknown>".to_string(), |t| human_duration(now - t));
                let kind = o["involvedObject"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_lowercase();
                let name = o["involvedObject"]["name"].as_str().unwrap_or_default();
                vec![
                    json!(seen),
                    s(&o["type"]),
                    s(&o["reason"]),
                    json!(format!("{kind}/{name}")),
                    s(&o["message"]),
                ]
            }),
        ),
        Builtin::ConfigMap => (
            vec![
                name_col,
                col("Data", "integer", "", 0, "Number of data entries."),
                age_col,
            ],
            Box::new(|o, now| {
                let n = o["data"].as_object().map_or(0, |m| m.len())
                    + o["binaryData"].as_object().map_or(0, |m| m.len());
                vec![json!(n), age(o, now)]
            }),
        ),
        Builtin::PriorityClass => (
            vec![
                name_col,
                col(
                    "Value",
                    "integer",
                    "",
                    0,
                    "The value of this priority class.",
                ),
                col(
                    "Global-Default",
                    "boolean",
                    "",
                    0,
                    "Whether this is the default priority class.",
                ),
                age_col,
                col(
                    "PreemptionPolicy",
                    "string",
                    "",
                    0,
                    "The preemption policy.",
                ),
            ],
            Box::new(|o, now| {
                vec![
                    o["value"].clone(),
                    json!(o["globalDefault"].as_bool().unwrap_or(false)),
                    age(o, now),
                    json!(
                        o["preemptionPolicy"]
                            .as_str()
                            .unwrap_or("PreemptLowerPriority")
                    ),
                ]
            }),
        ),
        Builtin::Pdb => (
            vec![
                name_col,
                col(
                    "Min Available",
                    "string",
                    "",
                    0,
                    "The minimum number of pods that must be available.",
                ),
                col(
                    "Max Unavailable",
                    "string",
                    "",
                    0,
                    "The maximum number of pods that may be unavailable.",
                ),
                col(
                    "Allowed Disruptions",
                    "integer",
                    "",
                    0,
                    "Calculated number of pods that may be disrupted at this time.",
                ),
                age_col,
            ],
            Box::new(|o, now| {
                let na = |v: &Value| {
                    if v.is_null() {
                        json!("N/A")
                    } else {
                        json!(v.to_string().trim_matches('"'))
                    }
                };
                vec![
                    na(&o["spec"]["minAvailable"]),
                    na(&o["spec"]["maxUnavailable"]),
                    json!(o["status"]["disruptionsAllowed"].as_i64().unwrap_or(0)),
                    age(o, now),
                ]
            }),
        ),
        Builtin::Lease => (
            vec![
                name_col,
                col("Holder", "string", "", 0, "Holder identity."),
                age_col,
            ],
            Box::new(|o, now| {
                vec![
                    json!(o["spec"]["holderIdentity"].as_str().unwrap_or("")),
                    age(o, now),
                ]
            }),
        ),
        Builtin::Crd | Builtin::ClusterRole | Builtin::Role => (
            vec![
                name_col,
                col(
                    "Created At",
                    "date",
                    "",
                    0,
                    "The time the object was created.",
                ),
            ],
            Box::new(|o, _| vec![o["metadata"]["creationTimestamp"].clone()]),
        ),
        Builtin::ServiceAccount => (
            vec![
                name_col,
                col(
                    "Secrets",
                    "string",
                    "",
                    0,
                    "Secrets is the list of secrets allowed to be used by pods running using this ServiceAccount.",
                ),
                age_col,
            ],
            Box::new(|o, now| {
                vec![
                    json!(o["secrets"].as_array().map_or(0, Vec::len)),
                    age(o, now),
                ]
            }),
        ),
        Builtin::Secret => (
            vec![
                name_col,
                col("Type", "string", "", 0, "The type of the secret"),
                col(
                    "Data",
                    "string",
                    "",
                    0,
                    "The number of entries in the secret data",
                ),
                age_col,
            ],
            Box::new(|o, now| {
                let n = o["data"].as_object().map_or(0, |m| m.len());
                vec![s(&o["type"]), json!(n), age(o, now)]
            }),
        ),
        Builtin::Service => (
            vec![
                name_col,
                col("Type", "string", "", 0, "The type of the service."),
                col(
                    "Cluster-IP",
                    "string",
                    "",
                    0,
                    "The IP address of the service.",
                ),
                col(
                    "External-IP",
                    "string",
                    "",
                    0,
                    "The external IP addresses of the service.",
                ),
                col("Port(s)", "string", "", 0, "The ports of the service."),
                age_col,
                col(
                    "Selector",
                    "string",
                    "",
                    1,
                    "The label selector of the service.",
                ),
            ],
            Box::new(|o, now| {
                let spec = &o["spec"];
                let ports: Vec<String> = spec["ports"]
                    .as_array()
                    .map(|ps| {
                        ps.iter()
                            .map(|p| {
                                let proto = p["protocol"].as_str().unwrap_or("TCP");
                                match p["nodePort"].as_i64() {
                                    Some(np) => format!("{}:{np}/{proto}", p["port"]),
                                    None => format!("{}/{proto}", p["port"]),
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let external = match spec["externalIPs"].as_array() {
                    Some(a) if !a.is_empty() => json!(
                        a.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    _ if spec["type"] == "LoadBalancer" => json!("<pending>"),
                    _ if spec["type"] == "ExternalName" => s(&spec["externalName"]),
                    _ => json!("<none>"),
                };
                vec![
                    s(&spec["type"]),
                    s(&spec["clusterIP"]),
                    external,
                    json!(if ports.is_empty() {
                        "<none>".to_string()
                    } else {
                        ports.join(",")
                    }),
                    age(o, now),
                    json!(map_pairs(&spec["selector"])),
                ]
            }),
        ),
        Builtin::Deployment => (
            vec![
                name_col,
                col(
                    "Ready",
                    "string",
                    "",
                    0,
                    "Number of the pod with ready state",
                ),
                col(
                    "Up-to-date",
                    "string",
                    "",
                    0,
                    "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                ),
                col(
                    "Available",
                    "string",
                    "",
                    0,
                    "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                ),
                age_col,
                col(
                    "Containers",
                    "string",
                    "",
                    1,
                    "Names of each container in the template.",
                ),
                col(
                    "Images",
                    "string",
                    "",
                    1,
                    "Images referenced by each container in the template.",
                ),
                col(
                    "Selector",
                    "string",
                    "",
                    1,
                    "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
                ),
            ],
            Box::new(|o, now| {
                let st = &o["status"];
                let n = |v: &Value| v.as_i64().unwrap_or(0);
                let cs = o["spec"]["template"]["spec"]["containers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let join = |k: &str| {
                    cs.iter()
                        .filter_map(|c| c[k].as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                vec![
                    json!(format!(
                        "{}/{}",
                        n(&st["readyReplicas"]),
                        n(&o["spec"]["replicas"])
                    )),
                    json!(n(&st["updatedReplicas"])),
                    json!(n(&st["availableReplicas"])),
                    age(o, now),
                    json!(join("name")),
                    json!(join("image")),
                    json!(map_pairs(&o["spec"]["selector"]["matchLabels"])),
                ]
            }),
        ),
        Builtin::ClusterRoleBinding | Builtin::RoleBinding => (
            vec![
                name_col,
                col("Role", "string", "", 0, "Role referenced by this binding."),
                age_col,
                col("Users", "string", "", 1, "Users in the binding."),
                col("Groups", "string", "", 1, "Groups in the binding."),
                col(
                    "ServiceAccounts",
                    "string",
                    "",
                    1,
                    "ServiceAccounts in the binding.",
                ),
            ],
            Box::new(|o, now| {
                let subjects = o["subjects"].as_array().cloned().unwrap_or_default();
                let of = |kind: &str| {
                    subjects
                        .iter()
                        .filter(|x| x["kind"] == kind)
                        .map(|x| match (kind, x["namespace"].as_str()) {
                            ("ServiceAccount", Some(ns)) => {
                                format!("{ns}/{}", x["name"].as_str().unwrap_or(""))
                            }
                            _ => x["name"].as_str().unwrap_or("").to_string(),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                vec![
                    json!(format!(
                        "{}/{}",
                        o["roleRef"]["kind"].as_str().unwrap_or(""),
                        o["roleRef"]["name"].as_str().unwrap_or("")
                    )),
                    age(o, now),
                    json!(of("User")),
                    json!(of("Group")),
                    json!(of("ServiceAccount")),
                ]
            }),
        ),
        Builtin::SelfSubjectAccessReview | Builtin::SubjectAccessReview | Builtin::TokenReview => (
            vec![name_col, age_col],
            Box::new(|o, now| vec![age(o, now)]),
        ),
        Builtin::Custom => {
            let cols = def
                .version(version)
                .map(|v| v.columns.clone())
                .unwrap_or_default();
            if cols.is_empty() {
                (
                    vec![name_col, age_col],
                    Box::new(|o, now| vec![age(o, now)]),
                )
            } else {
                let mut defs = vec![name_col];
                defs.extend(
                    cols.iter()
                        .map(|c| col(&c.name, &c.ty, &c.format, c.priority, &c.description)),
                );
                (
                    defs,
                    Box::new(move |o, now| {
                        cols.iter()
                            .map(|c| {
                                let v = jsonpath_first(o, &c.json_path).unwrap_or(Value::Null);
                                match (c.ty.as_str(), &v) {
                                    ("date", Value::String(t)) => parse_rfc3339(t)
                                        .map_or(v.clone(), |t| json!(human_duration(now - t))),
                                    _ => v,
                                }
                            })
                            .collect()
                    }),
                )
            }
        }
    }
}

/// What each row's `object` holds (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

/// Renders objects as a Table.
pub fn to_table(
    def: &ResourceDef,
    version: &str,
    objs: &[Value],
    rv: &str,
    cont: Option<&str>,
    include: IncludeObject,
    now: i64,
) -> Value {
    let (defs, cells) = columns(def, version);
    let name_first = !matches!(def.builtin, Builtin::Event | Builtin::EventsV1);
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let mut c = Vec::new();
            if name_first {
                c.push(crate::storage::display_name(def.builtin, o));
            }
            c.extend(cells(o, now));
            if !name_first {
                c.push(o["metadata"]["name"].clone());
            }
            let mut row = json!({"cells": c});
            match include {
                IncludeObject::None => {}
                IncludeObject::Object => row["object"] = o.clone(),
                IncludeObject::Metadata => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})
                }
            }
            row
        })
        .collect();
    let mut md = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        md["continue"] = json!(c);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": defs, "rows": rows})
}
