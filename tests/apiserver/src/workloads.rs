//! Workload kinds served without their controllers: `batch/v1` Jobs, `apps/v1`
//! ReplicaSets and StatefulSets, `v1` ReplicationControllers.
//!
//! They are stored, listed and watched with the defaults kube-apiserver fills
//! in (a Job's generated selector and labels, replicas, strategies, the pod
//! template's defaults), the validation that matters to tests (422 naming the
//! field), their status subresources and the columns `kubectl get` prints.
//! Nothing acts on them: a Job's pods are never created and it never
//! completes, a ReplicaSet or StatefulSet never gets replicas; a test writes
//! the status it needs through `/status`. The `scale` subresource is not served.

use serde_json::{Value, json};

use crate::error::{ApiResult, Cause};
use crate::kinds::{cause, invalid, required, set_default, unsupported};
use crate::registry::Builtin;
use crate::selector::LabelSelector;
use crate::table::{Cells, age, age_col, col, name_col};
use crate::time::{human_duration, parse_rfc3339};

/// The pod template's defaults (`SetDefaults_PodSpec` on a template).
fn template_defaults(tpl: &mut Value) {
    if !tpl["spec"].is_object() {
        return;
    }
    let pod = &mut tpl["spec"];
    for (k, v) in [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("schedulerName", json!("default-scheduler")),
        ("securityContext", json!({})),
    ] {
        set_default(pod, k, v);
    }
}

/// What kube-apiserver defaults on every write of these kinds (their
/// `SetDefaults_*` functions; a server decoding the object again on reads
/// applies them there too).
pub fn defaults(b: Builtin, obj: &mut Value) {
    template_defaults(&mut obj["spec"]["template"]);
    let spec = &mut obj["spec"];
    match b {
        Builtin::Job => {
            if spec.get("completions").is_none_or(Value::is_null)
                && spec.get("parallelism").is_none_or(Value::is_null)
            {
                spec["completions"] = json!(1);
            }
            set_default(spec, "parallelism", json!(1));
            set_default(spec, "backoffLimit", json!(6));
            set_default(spec, "completionMode", json!("NonIndexed"));
            set_default(spec, "suspend", json!(false));
            let replacement = if spec["podFailurePolicy"].is_object() {
                "Failed"
            } else {
                "TerminatingOrFailed"
            };
            set_default(spec, "podReplacementPolicy", json!(replacement));
            copy_template_labels(obj);
        }
        Builtin::ReplicaSet => set_default(spec, "replicas", json!(1)),
        Builtin::StatefulSet => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            set_default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            if let Some(vcts) = spec["volumeClaimTemplates"].as_array_mut() {
                for v in vcts {
                    set_default(v, "apiVersion", json!("v1"));
                    set_default(v, "kind", json!("PersistentVolumeClaim"));
                    set_default(&mut v["spec"], "volumeMode", json!("Filesystem"));
                    set_default(v, "status", json!({"phase": "Pending"}));
                }
            }
        }
        Builtin::ReplicationController => {
            set_default(spec, "replicas", json!(1));
            let labels = spec["template"]["metadata"]["labels"].clone();
            if labels.as_object().is_some_and(|m| !m.is_empty())
                && spec["selector"].as_object().is_none_or(|m| m.is_empty())
            {
                spec["selector"] = labels;
            }
            copy_template_labels(obj);
        }
        _ => {}
    }
}

/// A Job's or ReplicationController's labels default to its template's.
fn copy_template_labels(obj: &mut Value) {
    let labels = obj["spec"]["template"]["metadata"]["labels"].clone();
    if labels.as_object().is_some_and(|m| !m.is_empty())
        && obj["metadata"]["labels"]
            .as_object()
            .is_none_or(|m| m.is_empty())
    {
        obj["metadata"]["labels"] = labels;
    }
}

/// Defaults, a Job's generated selector (its pods would carry
/// `batch.kubernetes.io/controller-uid` and `job-name` labels) and the empty
/// status a new object starts with.
pub fn prepare_create(b: Builtin, obj: &mut Value) -> ApiResult<()> {
    defaults(b, obj);
    if b == Builtin::Job && obj["spec"]["manualSelector"] != json!(true) {
        let uid = obj["metadata"]["uid"].clone();
        let name = obj["metadata"]["name"].clone();
        let labels = &mut obj["spec"]["template"]["metadata"]["labels"];
        for (k, v) in [
            ("job-name", &name),
            ("batch.kubernetes.io/job-name", &name),
            ("controller-uid", &uid),
            ("batch.kubernetes.io/controller-uid", &uid),
        ] {
            set_default(labels, k, v.clone());
        }
        set_default(
            &mut obj["spec"]["selector"]["matchLabels"],
            "batch.kubernetes.io/controller-uid",
            uid,
        );
        copy_template_labels(obj);
    }
    obj["status"] = match b {
        Builtin::ReplicaSet | Builtin::ReplicationController => json!({"replicas": 0}),
        Builtin::StatefulSet => json!({"replicas": 0, "availableReplicas": 0}),
        _ => json!({}),
    };
    Ok(())
}

fn selector_causes(spec: &Value, what: &str) -> Vec<Cause> {
    let sel = &spec["selector"];
    if !sel.is_object() {
        return vec![required("spec.selector", "")];
    }
    if sel["matchLabels"].as_object().is_none_or(|m| m.is_empty())
        && sel["matchExpressions"].as_array().is_none_or(Vec::is_empty)
    {
        return vec![invalid(
            "spec.selector",
            sel,
            &format!("empty selector is invalid for {what}"),
        )];
    }
    Vec::new()
}

fn labels_of(tpl: &Value) -> Value {
    match &tpl["metadata"]["labels"] {
        Value::Null => json!({}),
        l => l.clone(),
    }
}

/// The template: its selector match, containers and restart policy.
fn template_causes(spec: &Value, selects: Option<bool>, restart: &[&str]) -> Vec<Cause> {
    let tpl = &spec["template"];
    if !tpl.is_object() {
        return vec![required("spec.template", "")];
    }
    let mut c = Vec::new();
    if selects == Some(false) {
        c.push(invalid(
            "spec.template.metadata.labels",
            &labels_of(tpl),
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
    if !restart.contains(&rp.as_str().unwrap_or("")) {
        c.push(unsupported("spec.template.spec.restartPolicy", rp, restart));
    }
    c
}

fn non_negative(spec: &Value, fields: &[&str]) -> Vec<Cause> {
    fields
        .iter()
        .filter_map(|f| {
            let v = spec[*f].as_i64()?;
            (v < 0).then(|| {
                invalid(
                    format!("spec.{f}"),
                    &json!(v),
                    "must be greater than or equal to 0",
                )
            })
        })
        .collect()
}

fn immutable(field: &str, new: &Value, old: &Value) -> Option<Cause> {
    (new != old).then(|| invalid(field, new, "field is immutable"))
}

/// Validation of these kinds (`old` on updates).
pub fn causes(b: Builtin, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let spec = &obj["spec"];
    let matches = |sel: &Value| {
        sel.is_object()
            .then(|| LabelSelector::from_object(sel).matches(&spec["template"]))
    };
    let mut c = Vec::new();
    match b {
        Builtin::Job => {
            c.extend(non_negative(
                spec,
                &[
                    "parallelism",
                    "completions",
                    "backoffLimit",
                    "activeDeadlineSeconds",
                ],
            ));
            c.extend(selector_causes(spec, "job"));
            c.extend(template_causes(
                spec,
                matches(&spec["selector"]),
                &["OnFailure", "Never"],
            ));
            let mode = &spec["completionMode"];
            if !["NonIndexed", "Indexed"].contains(&mode.as_str().unwrap_or("")) {
                c.push(unsupported(
                    "spec.completionMode",
                    mode,
                    &["NonIndexed", "Indexed"],
                ));
            }
            if let Some(old) = old {
                let was = &old["spec"];
                c.extend(immutable(
                    "spec.selector",
                    &spec["selector"],
                    &was["selector"],
                ));
                c.extend(immutable(
                    "spec.completions",
                    &spec["completions"],
                    &was["completions"],
                ));
                // A suspended Job's template may change (kube-apiserver allows
                // only its scheduling directives; the test server any field).
                if was["suspend"] != json!(true) {
                    c.extend(immutable(
                        "spec.template",
                        &spec["template"],
                        &was["template"],
                    ));
                }
            }
        }
        Builtin::ReplicaSet | Builtin::StatefulSet => {
            c.extend(non_negative(spec, &["replicas"]));
            let what = if b == Builtin::ReplicaSet {
                "deployment"
            } else {
                "statefulset"
            };
            c.extend(selector_causes(spec, what));
            c.extend(template_causes(
                spec,
                matches(&spec["selector"]),
                &["Always"],
            ));
            if b == Builtin::StatefulSet {
                c.extend(statefulset_causes(spec, old));
            } else if let Some(old) = old {
                c.extend(immutable(
                    "spec.selector",
                    &spec["selector"],
                    &old["spec"]["selector"],
                ));
            }
        }
        Builtin::ReplicationController => {
            c.extend(non_negative(spec, &["replicas"]));
            let sel = spec["selector"].as_object().filter(|m| !m.is_empty());
            if sel.is_none() {
                c.push(required("spec.selector", ""));
            }
            let labels = &spec["template"]["metadata"]["labels"];
            let selects = sel.map(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
            c.extend(template_causes(spec, selects, &["Always"]));
        }
        _ => {}
    }
    c
}

fn statefulset_causes(spec: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut c = Vec::new();
    let pmp = &spec["podManagementPolicy"];
    if !["OrderedReady", "Parallel"].contains(&pmp.as_str().unwrap_or("")) {
        c.push(invalid(
            "spec.podManagementPolicy",
            pmp,
            "must be 'OrderedReady' or 'Parallel'",
        ));
    }
    let us = &spec["updateStrategy"]["type"];
    if !["RollingUpdate", "OnDelete"].contains(&us.as_str().unwrap_or("")) {
        c.push(invalid(
            "spec.updateStrategy",
            us,
            "must be 'RollingUpdate' or 'OnDelete'",
        ));
    }
    if let Some(old) = old {
        let strip = |s: &Value| {
            let mut s = s.clone();
            if let Some(m) = s.as_object_mut() {
                for k in [
                    "replicas",
                    "ordinals",
                    "template",
                    "updateStrategy",
                    "persistentVolumeClaimRetentionPolicy",
                    "minReadySeconds",
                ] {
                    m.remove(k);
                }
            }
            s
        };
        if strip(spec) != strip(&old["spec"]) {
            c.push(cause(
                "FieldValueForbidden",
                "spec",
                "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
            ));
        }
    }
    c
}

/// `metav1.FormatLabelSelector`: `k=v,k2 in (a,b)`, `<none>` when empty.
fn format_selector(sel: &Value) -> String {
    let mut parts: Vec<String> = sel["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = e["key"].as_str().unwrap_or("");
        let values: Vec<&str> = e["values"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        parts.push(match e["operator"].as_str().unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            _ => format!("!{key}"),
        });
    }
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    }
}

fn map_selector(sel: &Value) -> String {
    format_selector(&json!({"matchLabels": sel}))
}

/// The template's container names and images, comma-separated.
fn containers(o: &Value) -> (Value, Value) {
    let cs = o["spec"]["template"]["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let join = |k: &str| {
        json!(
            cs.iter()
                .filter_map(|c| c[k].as_str())
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    (join("name"), join("image"))
}

fn has_condition(o: &Value, ty: &str) -> bool {
    o["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == ty && c["status"] == "True"))
}

/// A Job's STATUS column, as kube-apiserver's printer derives it.
fn job_status(o: &Value) -> &'static str {
    if has_condition(o, "Complete") {
        "Complete"
    } else if has_condition(o, "Failed") {
        "Failed"
    } else if o["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else if has_condition(o, "Suspended") {
        "Suspended"
    } else if has_condition(o, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

fn job_completions(o: &Value) -> String {
    let succeeded = o["status"]["succeeded"].as_i64().unwrap_or(0);
    match o["spec"]["completions"].as_i64() {
        Some(c) => format!("{succeeded}/{c}"),
        None => match o["spec"]["parallelism"].as_i64().unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    }
}

fn job_duration(o: &Value, now: i64) -> String {
    let t = |k: &str| o["status"][k].as_str().and_then(parse_rfc3339);
    match (t("startTime"), t("completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    }
}

/// Column definitions and cells of these kinds (kube-apiserver's printers).
pub fn columns(b: Builtin) -> (Vec<Value>, Cells) {
    let wide = |what: &str| {
        vec![
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
            col("Selector", "string", "", 1, what),
        ]
    };
    let n = |v: &Value| json!(v.as_i64().unwrap_or(0));
    match b {
        Builtin::Job => {
            let mut defs = vec![
                name_col(),
                col("Status", "string", "", 0, "Status of the job."),
                col(
                    "Completions",
                    "string",
                    "",
                    0,
                    "The number of pods which reached phase Succeeded.",
                ),
                col(
                    "Duration",
                    "string",
                    "",
                    0,
                    "Time required to complete the job.",
                ),
                age_col(),
            ];
            defs.extend(wide(
                "A label query over pods that should match the pod count.",
            ));
            (
                defs,
                Box::new(move |o, now| {
                    let (names, images) = containers(o);
                    vec![
                        json!(job_status(o)),
                        json!(job_completions(o)),
                        json!(job_duration(o, now)),
                        age(o, now),
                        names,
                        images,
                        json!(format_selector(&o["spec"]["selector"])),
                    ]
                }),
            )
        }
        Builtin::ReplicaSet | Builtin::ReplicationController => {
            let mut defs = vec![
                name_col(),
                col(
                    "Desired",
                    "integer",
                    "",
                    0,
                    "Replicas is the number of desired replicas.",
                ),
                col(
                    "Current",
                    "integer",
                    "",
                    0,
                    "Replicas is the most recently observed number of replicas.",
                ),
                col(
                    "Ready",
                    "integer",
                    "",
                    0,
                    "The number of ready replicas for this replica set.",
                ),
                age_col(),
            ];
            defs.extend(wide(
                "Selector is a label query over pods that should match the replica count.",
            ));
            (
                defs,
                Box::new(move |o, now| {
                    let (names, images) = containers(o);
                    let sel = if b == Builtin::ReplicaSet {
                        format_selector(&o["spec"]["selector"])
                    } else {
                        map_selector(&o["spec"]["selector"])
                    };
                    vec![
                        n(&o["spec"]["replicas"]),
                        n(&o["status"]["replicas"]),
                        n(&o["status"]["readyReplicas"]),
                        age(o, now),
                        names,
                        images,
                        json!(sel),
                    ]
                }),
            )
        }
        _ => {
            let mut defs = vec![
                name_col(),
                col(
                    "Ready",
                    "string",
                    "",
                    0,
                    "Number of the pod with ready state",
                ),
                age_col(),
            ];
            defs.extend(wide("").into_iter().take(2));
            (
                defs,
                Box::new(|o, now| {
                    let (names, images) = containers(o);
                    let n = |v: &Value| v.as_i64().unwrap_or(0);
                    vec![
                        json!(format!(
                            "{}/{}",
                            n(&o["status"]["readyReplicas"]),
                            n(&o["spec"]["replicas"])
                        )),
                        age(o, now),
                        names,
                        images,
                    ]
                }),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_gets_a_generated_selector_defaults_and_labels() {
        let mut job = json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl"}]}}}});
        prepare_create(Builtin::Job, &mut job).expect("prepared");
        assert_eq!(
            job["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
            "u-1"
        );
        assert_eq!(
            job["spec"]["template"]["metadata"]["labels"]["job-name"],
            "pi"
        );
        assert_eq!(job["metadata"]["labels"]["controller-uid"], "u-1");
        assert_eq!(
            (
                &job["spec"]["completions"],
                &job["spec"]["parallelism"],
                &job["spec"]["backoffLimit"]
            ),
            (&json!(1), &json!(1), &json!(6))
        );
        assert!(causes(Builtin::Job, &job, None).is_empty());
        assert_eq!(job_status(&job), "Running");
        assert_eq!(job_completions(&job), "0/1");
        let mut always = json!({"metadata": {"name": "x", "uid": "u-2"}, "spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "i"}]}}}});
        prepare_create(Builtin::Job, &mut always).expect("prepared");
        let c = causes(Builtin::Job, &always, None);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "spec.template.spec.restartPolicy");
        assert_eq!(
            c[0].message,
            "Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
        );
    }

    #[test]
    fn selectors_print_as_kubectl_shows_them() {
        assert_eq!(
            format_selector(&json!({"matchLabels": {"a": "1", "b": "2"},
                "matchExpressions": [{"key": "t", "operator": "In", "values": ["x", "y"]}]})),
            "a=1,b=2,t in (x,y)"
        );
        assert_eq!(format_selector(&Value::Null), "<none>");
        assert_eq!(map_selector(&json!({"app": "w"})), "app=w");
    }
}
