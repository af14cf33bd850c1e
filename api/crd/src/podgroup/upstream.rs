//! Kubernetes' own gang API, `scheduling.k8s.io` PodGroup and Workload:
//! `v1alpha2` (Kubernetes 1.36) and `v1beta1` (1.37), read into
//! Trainyard's [`PodGroup`] document.
//!
//! | upstream field | Trainyard |
//! |---|---|
//! | `spec.schedulingPolicy.gang.minCount` | `minMember` |
//! | `spec.schedulingPolicy.basic` | `minMember: 1`: each pod placed on its own |
//! | `spec.schedulingConstraints.topology[0].key` | `topology.required` (a node label key) |
//! | `spec.priorityClassName`, `spec.priority` | the same |
//! | `spec.disruptionMode` `all` (v1alpha2 `PodGroup`) | evicted whole ([`Upstream::evict_whole`]) |
//! | `spec.preemptionPolicy: Never` (v1beta1) | never evicts anyone ([`Upstream::never_preempts`]) |
//! | `spec.workloadRef`, `spec.podGroupTemplateRef` | kept, for messages |
//!
//! Other fields (`resourceClaims`, `parentCompositePodGroupName`) are read
//! leniently and ignored. Pods join the group by
//! `spec.schedulingGroup.podGroupName`.

use serde::Deserialize;

use super::{PodGroup, PodGroupSpec, TopologyConstraintSpec};
use crate::{ApiError, ApiErrors, ObjectMeta, from_value};

/// `scheduling.k8s.io/v1alpha2` (Kubernetes 1.36).
pub const V1ALPHA2: &str = "scheduling.k8s.io/v1alpha2";
/// `scheduling.k8s.io/v1beta1` (Kubernetes 1.37).
pub const V1BETA1: &str = "scheduling.k8s.io/v1beta1";

/// Whether `api_version` is one of Kubernetes' gang API versions.
pub fn is_upstream(api_version: &str) -> bool {
    api_version == V1ALPHA2 || api_version == V1BETA1
}

/// What an upstream PodGroup says beyond Trainyard's document.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Upstream {
    /// `schedulingPolicy.basic`: no gang, each pod placed on its own.
    pub basic: bool,
    /// `disruptionMode` `all` (`PodGroup` in v1alpha2): evicted whole.
    pub evict_whole: bool,
    /// `preemptionPolicy: Never`.
    pub never_preempts: bool,
    /// `workloadRef` (v1beta1) or `podGroupTemplateRef.workload`
    /// (v1alpha2): the Workload and the template the group was made from.
    pub workload: Option<(String, String)>,
    /// Problems of values (reported by [`PodGroup::validate`]): field
    /// and message.
    pub problems: Vec<(String, String)>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Doc {
    #[serde(default, deserialize_with = "crate::de::null_default")]
    metadata: ObjectMeta,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    spec: Spec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    scheduling_policy: Option<Policy>,
    #[serde(default)]
    scheduling_constraints: Option<Constraints>,
    #[serde(default)]
    priority_class_name: Option<String>,
    #[serde(default)]
    priority: Option<i32>,
    /// A string in v1alpha2, an object in v1beta1.
    #[serde(default)]
    disruption_mode: Option<serde_json::Value>,
    #[serde(default)]
    preemption_policy: Option<String>,
    #[serde(default)]
    workload_ref: Option<WorkloadRef>,
    #[serde(default)]
    pod_group_template_ref: Option<TemplateRef>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Policy {
    #[serde(default)]
    basic: Option<serde_json::Value>,
    #[serde(default)]
    gang: Option<Gang>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Gang {
    #[serde(default)]
    min_count: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Constraints {
    #[serde(default)]
    topology: Option<Vec<TopologyKey>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct TopologyKey {
    #[serde(default)]
    key: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WorkloadRef {
    #[serde(default)]
    workload_name: String,
    #[serde(default)]
    template_name: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct TemplateRef {
    #[serde(default)]
    workload: Option<V1alpha2WorkloadRef>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct V1alpha2WorkloadRef {
    #[serde(default)]
    workload_name: String,
    #[serde(default)]
    pod_group_template_name: String,
}

/// Largest `minCount` (Kubernetes' int32).
const MAX_COUNT: i64 = 2_147_483_647;

/// `minCount` and `basic` of a scheduling policy, with its problems.
fn policy(p: Option<&Policy>, at: &str, problems: &mut Vec<(String, String)>) -> (u32, bool) {
    let field = format!("{at}schedulingPolicy");
    match p {
        None => {
            problems.push((
                field,
                "missing; expected exactly one of basic or gang".into(),
            ));
            (1, false)
        }
        Some(Policy {
            basic: Some(_),
            gang: Some(_),
        }) => {
            problems.push((
                field,
                "sets both basic and gang; expected exactly one".into(),
            ));
            (1, false)
        }
        Some(Policy {
            basic: None,
            gang: None,
        }) => {
            problems.push((
                field,
                "sets neither basic nor gang; expected exactly one".into(),
            ));
            (1, false)
        }
        Some(Policy { basic: Some(_), .. }) => (1, true),
        Some(Policy {
            gang: Some(Gang { min_count }),
            ..
        }) => match min_count {
            Some(n) if (1..=MAX_COUNT).contains(n) => {
                (u32::try_from(*n).unwrap_or(u32::MAX), false)
            }
            Some(n) => {
                problems.push((
                    format!("{field}.gang.minCount"),
                    format!("expected a whole number from 1 to {MAX_COUNT}, found {n}"),
                ));
                (1, false)
            }
            None => {
                problems.push((
                    format!("{field}.gang.minCount"),
                    "missing; expected the number of pods that must be placed together".into(),
                ));
                (1, false)
            }
        },
    }
}

/// The required topology key of `schedulingConstraints`.
fn topology_key(
    c: Option<&Constraints>,
    at: &str,
    problems: &mut Vec<(String, String)>,
) -> Option<String> {
    let list = c.and_then(|c| c.topology.as_ref())?;
    if list.len() > 1 {
        problems.push((
            format!("{at}schedulingConstraints.topology"),
            format!("has {} entries; Kubernetes allows at most one", list.len()),
        ));
    }
    let key = &list.first()?.key;
    if key.is_empty() {
        problems.push((
            format!("{at}schedulingConstraints.topology[0].key"),
            "must not be empty; expected a node label key".into(),
        ));
        return None;
    }
    Some(key.clone())
}

/// Whether `disruptionMode` asks for the group to go whole.
fn evict_whole(
    mode: Option<&serde_json::Value>,
    version: &str,
    at: &str,
    problems: &mut Vec<(String, String)>,
) -> bool {
    let field = format!("{at}disruptionMode");
    match (mode, version) {
        (None | Some(serde_json::Value::Null), _) => false,
        (Some(serde_json::Value::String(s)), V1ALPHA2) => match s.as_str() {
            "PodGroup" => true,
            "Pod" => false,
            other => {
                problems.push((
                    field,
                    format!("expected \"Pod\" or \"PodGroup\", found {other:?}"),
                ));
                false
            }
        },
        (Some(serde_json::Value::Object(m)), V1BETA1) => {
            let all = m.get("all").is_some_and(|v| !v.is_null());
            let single = m.get("single").is_some_and(|v| !v.is_null());
            if all == single {
                problems.push((field, "expected exactly one of single or all".into()));
            }
            all && !single
        }
        (Some(_), V1ALPHA2) => {
            problems.push((field, "expected \"Pod\" or \"PodGroup\"".into()));
            false
        }
        (Some(_), _) => {
            problems.push((
                field,
                "expected an object with one of single or all, such as {all: {}}".into(),
            ));
            false
        }
    }
}

/// Whether `preemptionPolicy` is `Never`.
fn never_preempts(policy: Option<&str>, at: &str, problems: &mut Vec<(String, String)>) -> bool {
    match policy {
        None | Some("PreemptLowerPriority") => false,
        Some("Never") => true,
        Some(other) => {
            problems.push((
                format!("{at}preemptionPolicy"),
                format!("expected \"Never\" or \"PreemptLowerPriority\", found {other:?}"),
            ));
            false
        }
    }
}

/// Reads an upstream PodGroup of `version` (already checked).
pub(crate) fn read(
    value: &serde_json::Value,
    object: &str,
    version: &str,
) -> Result<PodGroup, ApiErrors> {
    let doc: Doc = from_value(value, object)?;
    let spec = doc.spec;
    let mut problems = Vec::new();
    let (min_member, basic) = policy(spec.scheduling_policy.as_ref(), "spec.", &mut problems);
    let required = topology_key(spec.scheduling_constraints.as_ref(), "spec.", &mut problems);
    let evict_whole = evict_whole(
        spec.disruption_mode.as_ref(),
        version,
        "spec.",
        &mut problems,
    );
    let never_preempts = version == V1BETA1
        && never_preempts(spec.preemption_policy.as_deref(), "spec.", &mut problems);
    let workload = match (spec.workload_ref, spec.pod_group_template_ref) {
        (Some(r), _) if version == V1BETA1 => Some((r.workload_name, r.template_name)),
        (_, Some(TemplateRef { workload: Some(r) })) if version == V1ALPHA2 => {
            Some((r.workload_name, r.pod_group_template_name))
        }
        _ => None,
    };
    Ok(PodGroup {
        api_version: version.to_string(),
        kind: "PodGroup".to_string(),
        metadata: doc.metadata,
        spec: PodGroupSpec {
            min_member,
            priority_class_name: spec.priority_class_name.filter(|s| !s.is_empty()),
            priority: spec.priority,
            topology: TopologyConstraintSpec {
                required,
                preferred: None,
                max_leaves: None,
            },
            ..PodGroupSpec::default()
        },
        status: None,
        topology_name: None,
        min_member_problem: None,
        upstream: Some(Upstream {
            basic,
            evict_whole,
            never_preempts,
            workload,
            problems,
        }),
    })
}

/// A `scheduling.k8s.io` Workload: the templates its PodGroups are made
/// from. Trainyard reads the PodGroups, which carry what the controller
/// copied from their template; a Workload is read to check it and to
/// name its templates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub api_version: String,
    pub metadata: ObjectMeta,
    /// Template names, in order.
    pub templates: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WorkloadDoc {
    #[serde(default, deserialize_with = "crate::de::null_default")]
    metadata: ObjectMeta,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    spec: WorkloadSpec,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WorkloadSpec {
    #[serde(default)]
    pod_group_templates: Option<Vec<Template>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Template {
    #[serde(default)]
    name: String,
    #[serde(default)]
    scheduling_policy: Option<Policy>,
    #[serde(default)]
    scheduling_constraints: Option<Constraints>,
    #[serde(default)]
    disruption_mode: Option<serde_json::Value>,
    #[serde(default)]
    preemption_policy: Option<String>,
}

impl Workload {
    /// Reads a Workload of either version and checks its templates as
    /// kube-apiserver does what Trainyard reads of them; every problem at
    /// once.
    pub fn from_value(value: &serde_json::Value) -> Result<Workload, ApiErrors> {
        let object = crate::describe_object("Workload", value);
        let version = crate::check_type(value, &object, "Workload", &[V1BETA1, V1ALPHA2])?;
        let doc: WorkloadDoc = from_value(value, &object)?;
        let mut problems = Vec::new();
        let templates = doc.spec.pod_group_templates.unwrap_or_default();
        if templates.is_empty() || templates.len() > 8 {
            problems.push((
                "spec.podGroupTemplates".to_string(),
                format!("has {} templates; expected 1 to 8", templates.len()),
            ));
        }
        let mut names = Vec::new();
        for (i, t) in templates.iter().enumerate() {
            let at = format!("spec.podGroupTemplates[{i}].");
            if let Some(p) = crate::names::dns1123_label_problem(&t.name) {
                problems.push((format!("{at}name"), p));
            } else if names.contains(&t.name) {
                problems.push((
                    format!("{at}name"),
                    format!(
                        "template {:?} is defined more than once; expected unique names",
                        t.name
                    ),
                ));
            }
            names.push(t.name.clone());
            policy(t.scheduling_policy.as_ref(), &at, &mut problems);
            topology_key(t.scheduling_constraints.as_ref(), &at, &mut problems);
            evict_whole(t.disruption_mode.as_ref(), &version, &at, &mut problems);
            if version == V1BETA1 {
                never_preempts(t.preemption_policy.as_deref(), &at, &mut problems);
            }
        }
        let ns = doc.metadata.namespace_or_default().to_string();
        let object = format!("Workload {ns}/{}", doc.metadata.name);
        if problems.is_empty() {
            Ok(Workload {
                api_version: version,
                metadata: doc.metadata,
                templates: names,
            })
        } else {
            Err(ApiErrors(
                problems
                    .into_iter()
                    .map(|(f, m)| ApiError::new(&object, f, m))
                    .collect(),
            ))
        }
    }

    /// How errors name it: `Workload <namespace>/<name>`.
    pub fn object(&self) -> String {
        format!(
            "Workload {}/{}",
            self.metadata.namespace_or_default(),
            self.metadata.name
        )
    }
}
