//! Upstream gangs (Kubernetes 1.37 `scheduling.k8s.io/v1beta1`) through
//! the test API server, shaped as the Job controller's `WorkloadWithJob`
//! (KEP-5547) makes them: for an Indexed Job of parallelism N, a Workload
//! with one podGroupTemplate whose policy is gang minCount N, a PodGroup
//! made from it, and the Job's pods naming the PodGroup in
//! `spec.schedulingGroup.podGroupName`. Trainyard binds the pods
//! together, writes `PodGroupInitiallyScheduled` (which never goes back to
//! `False`), and `DisruptionTarget` when another queue reclaims the group.
//!
//! Needs the reader of the upstream kinds (`crates/ingest`) and the test
//! server serving them (`tests/apiserver`).

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tokio::sync::watch;
use trainyard_serve::Progress;

fn upstream(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.k8s.io", "v1beta1", kind),
        plural,
    )
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
async fn indexed_job(client: &Client, name: &str, queue: &str, n: u32, gpus: u32) {
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
    let group = format!("{name}-workers");
    create(
        client,
        &upstream("Workload", "workloads"),
        Some("ml"),
        json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
               "metadata": {"name": name, "namespace": "ml", "ownerReferences": owner},
               "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": name},
                        "podGroupTemplates": [{"name": "workers",
                            "schedulingPolicy": {"gang": {"minCount": n}}}]}}),
    )
    .await;
    create(
        client,
        &upstream("PodGroup", "podgroups"),
        Some("ml"),
        json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
               "metadata": {"name": group, "namespace": "ml", "ownerReferences": owner},
               "spec": {"workloadRef": {"workloadName": name, "templateName": "workers"},
                        "schedulingPolicy": {"gang": {"minCount": n}}}}),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    for i in 0..n {
        let mut p = template.clone();
        p["metadata"] = json!({"name": format!("{name}-{i}"), "namespace": "ml",
            "ownerReferences": owner,
            "labels": {"trainyard.io/queue": queue, "batch.kubernetes.io/job-name": name,
                       "batch.kubernetes.io/job-completion-index": i.to_string()},
            "annotations": {"batch.kubernetes.io/job-completion-index": i.to_string()}});
        p["spec"]["schedulingGroup"] = json!({"podGroupName": group});
        let p: Pod = serde_json::from_value(p).expect("pod");
        pods.create(&PostParams::default(), &p)
            .await
            .expect("pod created");
    }
}

async fn group_status(client: &Client, name: &str) -> Value {
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "ml", &upstream("PodGroup", "podgroups"));
    groups.get(name).await.expect("group").data["status"].clone()
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

/// Reads the group's status after each cycle until `done` holds (at most
/// 200 cycles), checking at every read that `PodGroupInitiallyScheduled`,
/// once `True`, stays so.
async fn until_status(
    progress: &mut watch::Receiver<Progress>,
    client: &Client,
    what: &str,
    was_true: &mut bool,
    done: impl Fn(&Value) -> bool,
) -> Value {
    for _ in 0..200 {
        let s = group_status(client, "train-workers").await;
        let scheduled = &condition(&s, "PodGroupInitiallyScheduled")["status"];
        assert!(
            !(*was_true && scheduled == "False"),
            "PodGroupInitiallyScheduled went back to False: {s}"
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
        group_status(client, "train-workers").await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_gang_binds_together_is_scheduled_and_marked_when_reclaimed() {
    if skip_on_cluster("the upstream gang test", "the test server's manual kubelet") {
        return;
    }
    let (env, client) = env().await;
    queues(&client).await;
    // Queue a borrows the whole cluster while b is idle: two pods of 8.
    indexed_job(&client, "train", "a", 2, 8).await;
    let (mut progress, stop) = start(client.clone());
    let mut was_true = false;
    let bound = until(&mut progress, "the gang's binds", |p| p.written.binds == 2).await;
    assert_eq!(bound.written.binds, 2, "both pods in one cycle: {bound:?}");
    env.tick();
    let s = until_status(
        &mut progress,
        &client,
        "the group scheduled",
        &mut was_true,
        |s| condition(s, "PodGroupInitiallyScheduled")["status"] == "True",
    )
    .await;
    let c = condition(&s, "PodGroupInitiallyScheduled");
    assert_eq!(c["reason"], "Scheduled", "{s}");
    assert!(c["lastTransitionTime"].is_string(), "{s}");
    assert!(c["observedGeneration"].is_i64(), "{s}");
    assert_eq!(condition(&s, "DisruptionTarget"), &Value::Null, "{s}");

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
    assert_eq!(
        condition(&s, "PodGroupInitiallyScheduled")["status"],
        "True",
        "never back to False: {s}"
    );
    // A few cycles more: still True.
    env.tick();
    for _ in 0..3 {
        let c = progress.borrow().cycles;
        until(&mut progress, "a cycle", |p| p.cycles > c).await;
        let s = group_status(&client, "train-workers").await;
        assert_eq!(
            condition(&s, "PodGroupInitiallyScheduled")["status"],
            "True",
            "{s}"
        );
    }
    stop.send_replace(true);
}
