//! Kubernetes' own gangs (`scheduling.k8s.io`) through the test API
//! server, one test per version, the server serving only that version as
//! that release does: 1.36's `v1alpha2` and 1.37's `v1beta1`. The objects
//! are shaped as the Job controller's `WorkloadWithJob` (KEP-5547) makes
//! them for an Indexed Job of parallelism N: a Workload `<job>-<hash>`
//! with one podGroupTemplate (gang minCount N), the PodGroup
//! `<workload>-<template>-<hash>` made from it (owned by the Job, naming
//! the template), and the Job's pods, owned by the Job and the PodGroup,
//! naming it in `spec.schedulingGroup.podGroupName`. Trainyard binds the
//! pods together, writes the version's scheduled condition
//! (`PodGroupScheduled`, `PodGroupInitiallyScheduled`, the latter never
//! back to `False`) and `DisruptionTarget` when another queue reclaims
//! the group; kubectl reads the condition back. A server serving neither
//! version leaves the feature off and Trainyard's own gangs scheduled.

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tokio::sync::watch;
use trainyard_serve::Progress;
use trainyard_testapi::WorkloadApis;

/// One version of Kubernetes' gang API, as its release serves it.
#[derive(Clone, Copy)]
struct Version {
    version: &'static str,
    apis: WorkloadApis,
    /// The scheduled condition's type.
    scheduled: &'static str,
    /// Never back to `False` once `True`.
    sticky: bool,
}

const V1ALPHA2: Version = Version {
    version: "v1alpha2",
    apis: WorkloadApis::V1ALPHA2,
    scheduled: "PodGroupScheduled",
    sticky: false,
};

const V1BETA1: Version = Version {
    version: "v1beta1",
    apis: WorkloadApis::V1BETA1,
    scheduled: "PodGroupInitiallyScheduled",
    sticky: true,
};

/// The Job's Workload and PodGroup names, as the Job controller derives
/// them (`<job>-<hash>`, `<workload>-<template>-<hash>`).
const WORKLOAD: &str = "train-5d8f7";
const TEMPLATE: &str = "workers";
const GROUP: &str = "train-5d8f7-workers-6c4b9";

impl Version {
    fn api_version(self) -> String {
        format!("scheduling.k8s.io/{}", self.version)
    }

    fn resource(self, kind: &str, plural: &str) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("scheduling.k8s.io", self.version, kind),
            plural,
        )
    }

    /// The PodGroup's spec: the template's policy, and the reference to
    /// the template in this version's shape.
    fn group_spec(self, n: u32) -> Value {
        let policy = json!({"gang": {"minCount": n}});
        match self.version {
            "v1alpha2" => json!({
                "podGroupTemplateRef": {"workload": {"workloadName": WORKLOAD, "podGroupTemplateName": TEMPLATE}},
                "schedulingPolicy": policy}),
            _ => json!({
                "workloadRef": {"workloadName": WORKLOAD, "templateName": TEMPLATE},
                "schedulingPolicy": policy}),
        }
    }
}

async fn queues(client: &Client) {
    namespace(client, "ml").await;
    node(client, "n1", 8).await;
    node(client, "n2", 8).await;
    // Queue a has no quota: what it runs is borrowed, and a gang of it can
    // be reclaimed whole (a queue is never taken below its quota).
    for (name, quota) in [("a", 0), ("b", 8)] {
        create(
            client,
            &trainyard("Queue", "queues"),
            None,
            json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
                   "metadata": {"name": name},
                   "spec": {"quota": {"nvidia.com/gpu": quota}, "overQuotaWeight": 1}}),
        )
        .await;
    }
}

/// An Indexed Job of `n` pods of `gpus` GPUs in queue `queue`, with its
/// Workload and PodGroup, and its pods, as the Job controller makes them.
async fn indexed_job(client: &Client, v: Version, name: &str, queue: &str, n: u32, gpus: u32) {
    let template = json!({"metadata": {"labels": {"trainyard.io/queue": queue}},
        "spec": {"schedulerName": "trainyard", "restartPolicy": "Never",
                 "containers": [{"name": "c", "image": "train:1",
                     "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                                   "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}});
    let job_ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch", "v1", "Job"), "jobs");
    create(
        client,
        &job_ar,
        Some("ml"),
        json!({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": name, "namespace": "ml", "uid": format!("job-{name}")},
               "spec": {"completionMode": "Indexed", "parallelism": n, "completions": n,
                        "template": template}}),
    )
    .await;
    let jobs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ml", &job_ar);
    let uid = jobs
        .get(name)
        .await
        .expect("the job")
        .metadata
        .uid
        .unwrap_or_default();
    let owner = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
                        "controller": true, "blockOwnerDeletion": true}]);
    let workload = create(
        client,
        &v.resource("Workload", "workloads"),
        Some("ml"),
        json!({"apiVersion": v.api_version(), "kind": "Workload",
               "metadata": {"name": WORKLOAD, "namespace": "ml", "ownerReferences": owner},
               "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": name},
                        "podGroupTemplates": [{"name": TEMPLATE,
                            "schedulingPolicy": {"gang": {"minCount": n}}}]}}),
    )
    .await;
    let mut group_owners = owner.clone();
    if let Some(list) = group_owners.as_array_mut() {
        list.push(
            json!({"apiVersion": v.api_version(), "kind": "Workload", "name": WORKLOAD,
                         "uid": workload["metadata"]["uid"]}),
        );
    }
    let group = create(
        client,
        &v.resource("PodGroup", "podgroups"),
        Some("ml"),
        json!({"apiVersion": v.api_version(), "kind": "PodGroup",
               "metadata": {"name": GROUP, "namespace": "ml", "ownerReferences": group_owners},
               "spec": v.group_spec(n)}),
    )
    .await;
    let mut pod_owners = owner.clone();
    if let Some(list) = pod_owners.as_array_mut() {
        list.push(
            json!({"apiVersion": v.api_version(), "kind": "PodGroup", "name": GROUP,
                         "uid": group["metadata"]["uid"]}),
        );
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    for i in 0..n {
        let mut p = template.clone();
        p["metadata"] = json!({"name": format!("{name}-{i}"), "namespace": "ml",
            "ownerReferences": pod_owners,
            "labels": {"trainyard.io/queue": queue, "batch.kubernetes.io/job-name": name,
                       "batch.kubernetes.io/job-completion-index": i.to_string()},
            "annotations": {"batch.kubernetes.io/job-completion-index": i.to_string()}});
        p["spec"]["schedulingGroup"] = json!({"podGroupName": GROUP});
        let p: Pod = serde_json::from_value(p).expect("pod");
        pods.create(&PostParams::default(), &p)
            .await
            .expect("pod created");
    }
}

async fn group_status(client: &Client, v: Version, name: &str) -> Value {
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "ml", &v.resource("PodGroup", "podgroups"));
    groups.get(name).await.expect("group").data["status"].clone()
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

/// Reads the group's status after each cycle until `done` holds (at most
/// 200 cycles), checking at every read that a sticky scheduled
/// condition, once `True`, stays so.
async fn until_status(
    progress: &mut watch::Receiver<Progress>,
    client: &Client,
    (v, name): (Version, &str),
    what: &str,
    was_true: &mut bool,
    done: impl Fn(&Value) -> bool,
) -> Value {
    for _ in 0..200 {
        let s = group_status(client, v, name).await;
        let scheduled = &condition(&s, v.scheduled)["status"];
        assert!(
            !(v.sticky && *was_true && scheduled == "False"),
            "{} went back to False: {s}",
            v.scheduled
        );
        *was_true |= scheduled == "True";
        if done(&s) {
            return s;
        }
        let c = progress.borrow().cycles;
        until(progress, what, |p| p.cycles > c).await;
    }
    panic!(
        "{what}: never held; last read: {}",
        group_status(client, v, name).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_1_36_v1alpha2_gang_binds_together_is_scheduled_and_marked_when_reclaimed() {
    gang_binds_is_scheduled_and_marked_when_reclaimed(V1ALPHA2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_1_37_v1beta1_gang_binds_together_is_scheduled_and_marked_when_reclaimed() {
    gang_binds_is_scheduled_and_marked_when_reclaimed(V1BETA1).await;
}

async fn gang_binds_is_scheduled_and_marked_when_reclaimed(v: Version) {
    if skip_on_cluster("the upstream gang test", "the test server's manual kubelet") {
        return;
    }
    let (env, client) = env_serving(v.apis).await;
    queues(&client).await;
    // Queue a borrows the whole cluster while b is idle: two pods of 8.
    indexed_job(&client, v, "train", "a", 2, 8).await;
    let (mut progress, stop) = start(client.clone());
    let mut was_true = false;
    let bound = until(&mut progress, "the gang's binds", |p| p.written.binds == 2).await;
    assert_eq!(bound.written.binds, 2, "both pods in one cycle: {bound:?}");
    env.tick();
    let s = until_status(
        &mut progress,
        &client,
        (v, GROUP),
        "the group scheduled",
        &mut was_true,
        |s| condition(s, v.scheduled)["status"] == "True",
    )
    .await;
    let c = condition(&s, v.scheduled);
    assert_eq!(c["reason"], "Scheduled", "{s}");
    assert!(c["lastTransitionTime"].is_string(), "{s}");
    assert!(c["observedGeneration"].is_i64(), "{s}");
    assert_eq!(condition(&s, "DisruptionTarget"), &Value::Null, "{s}");
    kubectl_reads_condition(&env, v, "True");

    // Queue b, within its quota, takes back a node: the gang is reclaimed
    // whole.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "b-big", "namespace": "ml", "labels": {"trainyard.io/queue": "b"}},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                 "resources": {"requests": {"nvidia.com/gpu": "8"},
                               "limits": {"nvidia.com/gpu": "8"}}}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &p)
        .await
        .expect("pod created");
    until(&mut progress, "the reclaim", |p| p.written.evictions >= 1).await;
    let s = until_status(
        &mut progress,
        &client,
        (v, GROUP),
        "DisruptionTarget",
        &mut was_true,
        |s| condition(s, "DisruptionTarget")["status"] == "True",
    )
    .await;
    let d = condition(&s, "DisruptionTarget");
    assert_eq!(d["reason"], "PreemptionByScheduler", "{s}");
    let message = d["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("Trainyard reclaimed") && message.contains("ml/b-big"),
        "{message}"
    );
    // A few cycles more: v1beta1's condition stays True (checked at every
    // read by `until_status`); v1alpha2's follows the group, which waits
    // again once its pods are gone.
    env.tick();
    for _ in 0..3 {
        let c = progress.borrow().cycles;
        until(&mut progress, "a cycle", |p| p.cycles > c).await;
        let s = group_status(&client, v, GROUP).await;
        if v.sticky {
            assert_eq!(condition(&s, v.scheduled)["status"], "True", "{s}");
        }
    }
    if v.sticky {
        kubectl_reads_condition(&env, v, "True");
    }
    stop.send_replace(true);
}

/// kubectl (the real one, installed by `scripts/install-test-tools.sh`)
/// reads the scheduled condition the service wrote; a printed skip when
/// it is not there.
fn kubectl_reads_condition(env: &Env, v: Version, want: &str) {
    let Some(server) = env.test.as_ref() else {
        return;
    };
    let Some(kubectl) = find_kubectl() else {
        let msg = "SKIPPED: the kubectl read of the PodGroup condition (kubectl not found; run scripts/install-test-tools.sh)";
        println!("{msg}");
        eprintln!("{msg}");
        return;
    };
    let dir = std::env::temp_dir().join(format!("trainyard-e2e-upstream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let config = dir.join(format!("kubeconfig-{}", v.version));
    server
        .write_kubeconfig(&config)
        .expect("kubeconfig written");
    let path = format!(
        "jsonpath={{.status.conditions[?(@.type==\"{}\")].status}}",
        v.scheduled
    );
    let out = std::process::Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(&config)
        .args([
            "get",
            &format!("podgroups.{}.scheduling.k8s.io", v.version),
            GROUP,
            "-n",
            "ml",
            "-o",
            &path,
        ])
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
}

/// A server serving neither version: the feature is off, the service
/// runs, and Trainyard's own gangs are scheduled as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gang_api_the_service_schedules_its_own_gangs() {
    if skip_on_cluster("the no-gang-API test", "the test server's served versions") {
        return;
    }
    let (_env, client) = env_serving(WorkloadApis::NONE).await;
    queues(&client).await;
    create(
        &client,
        &trainyard("PodGroup", "podgroups"),
        Some("ml"),
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
               "metadata": {"name": "own", "namespace": "ml"}, "spec": {"minMember": 2}}),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    for i in 0..2 {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("own-{i}"), "namespace": "ml",
                         "labels": {"trainyard.io/queue": "b", "trainyard.io/pod-group": "own"}},
            "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                     "resources": {"requests": {"nvidia.com/gpu": "8"},
                                   "limits": {"nvidia.com/gpu": "8"}}}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &p)
            .await
            .expect("pod created");
    }
    let (mut progress, stop) = start(client.clone());
    let done = until(&mut progress, "the gang's binds", |p| p.written.binds == 2).await;
    assert_eq!(done.upstream_statuses, 0, "{done:?}");
    stop.send_replace(true);
}

/// A pending pod of `group` for `scheduler`, 4 GPUs, in queue b.
async fn member(client: &Client, name: &str, group: &str, scheduler: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "labels": {"trainyard.io/queue": "b"}},
        "spec": {"schedulerName": scheduler, "schedulingGroup": {"podGroupName": group},
                 "containers": [{"name": "c", "image": "train:1",
                     "resources": {"requests": {"nvidia.com/gpu": "4"},
                                   "limits": {"nvidia.com/gpu": "4"}}}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &p)
        .await
        .expect("pod created");
}

/// Live, on 1.37's v1beta1: pods whose PodGroup does not exist yet wait
/// for it; the group then waits with `Unschedulable` and the core's
/// reason while its minCount is above its pods; a lowered minCount binds
/// it from the next cycles; a group whose pods name two schedulers gets
/// `SchedulerError` and nothing of it is bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_group_waits_for_its_object_follows_min_count_and_refuses_mixed_schedulers() {
    if skip_on_cluster(
        "the live upstream group test",
        "the test server's served versions",
    ) {
        return;
    }
    let (_env, client) = env_serving(WorkloadApis::V1BETA1).await;
    queues(&client).await;
    member(&client, "late-0", "late", "trainyard").await;
    member(&client, "late-1", "late", "trainyard").await;
    member(&client, "mixed-0", "mixed", "trainyard").await;
    member(&client, "mixed-1", "mixed", "default-scheduler").await;
    let (mut progress, stop) = start(client.clone());
    // Cycles run, nothing is bound: the pods wait for their group.
    let c = progress.borrow().cycles;
    until(&mut progress, "a few cycles", |p| p.cycles > c + 5).await;
    assert_eq!(
        progress.borrow().written.binds,
        0,
        "{:?}",
        *progress.borrow()
    );
    let ar = V1BETA1.resource("PodGroup", "podgroups");
    for (name, min) in [("late", 3), ("mixed", 2)] {
        create(
            &client,
            &ar,
            Some("ml"),
            json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                   "metadata": {"name": name, "namespace": "ml"},
                   "spec": {"schedulingPolicy": {"gang": {"minCount": min}}}}),
        )
        .await;
    }
    let (mut late_true, mut mixed_true) = (false, false);
    let late = (V1BETA1, "late");
    let s = until_status(
        &mut progress,
        &client,
        late,
        "late waits",
        &mut late_true,
        |s| condition(s, "PodGroupInitiallyScheduled")["reason"] == "Unschedulable",
    )
    .await;
    let c = condition(&s, "PodGroupInitiallyScheduled");
    assert_eq!(c["status"], "False", "{s}");
    assert!(
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains("minMember 3")),
        "the core's reason: {s}"
    );
    let mixed = (V1BETA1, "mixed");
    let s = until_status(
        &mut progress,
        &client,
        mixed,
        "mixed refused",
        &mut mixed_true,
        |s| condition(s, "PodGroupInitiallyScheduled")["reason"] == "SchedulerError",
    )
    .await;
    let m = condition(&s, "PodGroupInitiallyScheduled")["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(m.contains("default-scheduler (ml/mixed-1)"), "{m}");
    assert_eq!(
        progress.borrow().written.binds,
        0,
        "{:?}",
        *progress.borrow()
    );
    // The controller lowers minCount (mutable in v1beta1): bound.
    let groups: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ml", &ar);
    groups
        .patch(
            "late",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}),
            ),
        )
        .await
        .expect("minCount lowered");
    let done = until(&mut progress, "late's binds", |p| p.written.binds == 2).await;
    assert_eq!(done.written.binds, 2, "{done:?}");
    until_status(
        &mut progress,
        &client,
        late,
        "late scheduled",
        &mut late_true,
        |s| condition(s, "PodGroupInitiallyScheduled")["status"] == "True",
    )
    .await;
    stop.send_replace(true);
}
