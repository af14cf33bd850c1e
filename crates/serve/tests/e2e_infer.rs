//! PodGroups inferred from owners, end to end against the test API server:
//! PyTorchJobs and their pods are created as the training operator creates
//! them (no group key on the pods, a controller owner reference to the
//! job); the service gives them a PodGroup and schedules them as gangs.
//!
//! The test server has no garbage collector, so that a PodGroup goes with
//! its PyTorchJob is not shown here; its owner reference is asserted.

mod common;

use std::collections::BTreeSet;

use common::*;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

fn pytorchjobs() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubeflow.org", "v1", "PyTorchJob"),
        "pytorchjobs",
    )
}

/// The PyTorchJob CRD, reduced to what the test needs.
async fn install_pytorchjob_crd(client: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "pytorchjobs.kubeflow.org"},
        "spec": {"group": "kubeflow.org", "scope": "Namespaced",
                 "names": {"kind": "PyTorchJob", "plural": "pytorchjobs",
                           "singular": "pytorchjob", "listKind": "PyTorchJobList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                   "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("a CRD");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("CRD accepted");
}

/// A PyTorchJob of one master and `workers` workers with `gpus` each, and
/// its pods as the training operator creates them; returns the job.
async fn pytorchjob(client: &Client, name: &str, labels: Value, workers: u32, gpus: u32) -> Value {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ml", &pytorchjobs());
    let template = json!({"spec": {"containers": [{"name": "pytorch", "image": "train:1"}]}});
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "ml", "labels": labels},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": template},
            "Worker": {"replicas": workers, "template": template}}}
    }))
    .expect("job");
    let job = api
        .create(&PostParams::default(), &job)
        .await
        .expect("job created");
    let uid = job.metadata.uid.clone().expect("a uid");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let replicas = std::iter::once(("master", 0)).chain((0..workers).map(|i| ("worker", i)));
    for (role, index) in replicas {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-{role}-{index}"), "namespace": "ml",
                         "labels": {"training.kubeflow.org/job-name": name,
                                    "training.kubeflow.org/operator-name": "pytorchjob-controller",
                                    "training.kubeflow.org/replica-type": role,
                                    "training.kubeflow.org/replica-index": index.to_string()},
                         "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                              "name": name, "uid": uid,
                                              "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"schedulerName": "trainyard", "containers": [{"name": "pytorch", "image": "train:1",
                     "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                                   "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &p)
            .await
            .expect("pod created");
    }
    serde_json::to_value(job).expect("json")
}

async fn pod_groups(client: &Client) -> Vec<DynamicObject> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "ml", &trainyard("PodGroup", "podgroups"));
    api.list(&ListParams::default()).await.expect("list").items
}

/// The PodGroup owned by `job`.
async fn group_of(client: &Client, job: &Value) -> DynamicObject {
    let uid = job["metadata"]["uid"].as_str().expect("uid");
    let groups = pod_groups(client).await;
    groups
        .into_iter()
        .find(|g| {
            g.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid)
        })
        .unwrap_or_else(|| panic!("no PodGroup owned by {}", job["metadata"]["name"]))
}

async fn label_namespace(client: &Client, queue: &str) {
    Api::<Namespace>::all(client.clone())
        .patch(
            "ml",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"trainyard.io/default-queue": queue}}})),
        )
        .await
        .expect("namespace labelled");
}

async fn failed_scheduling(client: &Client, pod: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), "ml");
    events
        .list(&ListParams::default().fields(&format!(
            "involvedObject.name={pod},reason=FailedScheduling"
        )))
        .await
        .expect("events")
        .items
        .into_iter()
        .map(|e| e.message.unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pytorchjob_gets_an_inferred_podgroup_and_starts_whole() {
    if skip_on_cluster(
        "the inference tests",
        "stand-in CRDs for the Kubeflow, JobSet and Ray kinds",
    ) {
        return;
    }
    let (_server, client) = server().await;
    cluster(&client).await;
    install_pytorchjob_crd(&client).await;
    // The namespace's default queue serves the job that names none.
    label_namespace(&client, "team").await;
    // 4 pods × 2 GPUs: fits. 5 pods × 4 GPUs = 20 GPUs: more than the
    // cluster's 16, though two of its pods alone would fit beside the first.
    let bert = pytorchjob(&client, "bert", json!({"trainyard.io/queue": "team"}), 3, 2).await;
    let huge = pytorchjob(&client, "huge", json!({}), 4, 4).await;

    let (mut progress, stop) = start(client.clone());
    let bound = until(&mut progress, "the PyTorchJob's binds", |p| {
        p.groups_created == 2 && p.written.binds == 4
    })
    .await;
    let later = bound.cycles + 3;
    let end = until(&mut progress, "three more cycles", |p| p.cycles >= later).await;
    assert_eq!((end.written.binds, end.written.failed), (4, 0), "{end:?}");
    assert_eq!(end.groups_created, 2, "{end:?}");

    let group = group_of(&client, &bert).await;
    let uid = bert["metadata"]["uid"].as_str().expect("uid");
    let name = group.metadata.name.clone().expect("name");
    assert!(name.starts_with("pytorchjob-bert-"), "{name}");
    assert_eq!(group.data["spec"]["minMember"], 4, "{:?}", group.data);
    assert_eq!(group.data["spec"]["queue"], "team", "{:?}", group.data);
    let owner = &group.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("PyTorchJob", "bert", uid)
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(false));

    let placed = placements(&client).await;
    let names: BTreeSet<&str> = placed.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "bert-master-0",
            "bert-worker-0",
            "bert-worker-1",
            "bert-worker-2"
        ])
    );
    devices_distinct(&placed);
    // Every pod carries its group's name.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let p = pods.get("bert-worker-2").await.expect("pod");
    let annotations = p.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("trainyard.io/pod-group"), Some(&name));

    // The job too big waits whole, in the namespace's default queue, and
    // its pods are told why.
    let too_big = group_of(&client, &huge).await;
    assert_eq!(too_big.data["spec"]["minMember"], 5, "{:?}", too_big.data);
    assert_eq!(too_big.data["spec"]["queue"], "team", "{:?}", too_big.data);
    // Its pods join one by one as their annotations are watched, so an
    // earlier message may say the gang is short of pods; once all five
    // are in, the message is about GPUs.
    let mut cycle = end.cycles;
    loop {
        let messages = failed_scheduling(&client, "huge-worker-3").await;
        if messages
            .iter()
            .any(|m| m.contains("gang needs 20 × nvidia.com/gpu in 5 pod(s)"))
        {
            break;
        }
        assert!(cycle < end.cycles + 100, "{messages:?}");
        cycle += 1;
        until(&mut progress, "another cycle", |p| p.cycles >= cycle).await;
    }
    let end = *progress.borrow();
    assert_eq!((end.written.binds, end.written.failed), (4, 0), "{end:?}");
    stop.send_replace(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_queue_the_pods_are_told_what_to_label_once() {
    if skip_on_cluster(
        "the inference tests",
        "stand-in CRDs for the Kubeflow, JobSet and Ray kinds",
    ) {
        return;
    }
    let (_server, client) = server().await;
    cluster(&client).await;
    install_pytorchjob_crd(&client).await;
    pytorchjob(&client, "orphan", json!({}), 1, 1).await;
    let mut settings = fast_settings();
    settings.service.default_queue = String::new();
    let (mut progress, stop) = start_with(client.clone(), settings);
    let told = until(&mut progress, "the pods told", |p| p.reports == 2).await;
    let later = told.cycles + 3;
    let end = until(&mut progress, "three more cycles", |p| p.cycles >= later).await;
    assert_eq!(
        (end.reports, end.groups_created, end.written.binds),
        (2, 0, 0),
        "told once, nothing created or bound: {end:?}"
    );
    let messages = failed_scheduling(&client, "orphan-worker-0").await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    for part in [
        "no queue for PodGroup pytorchjob-orphan-",
        "PyTorchJob orphan",
        "trainyard.io/queue=<queue>",
        "Namespace ml with trainyard.io/default-queue=<queue>",
    ] {
        assert!(messages[0].contains(part), "{part}: {}", messages[0]);
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let condition = pods
        .get("orphan-master-0")
        .await
        .expect("pod")
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("a PodScheduled condition");
    assert_eq!(condition.status, "False");
    assert!(pod_groups(&client).await.is_empty());

    // Labelling the namespace is enough: the next cycles group and bind.
    label_namespace(&client, "team").await;
    until(&mut progress, "the group and its binds", |p| {
        p.groups_created == 1 && p.written.binds == 2
    })
    .await;
    stop.send_replace(true);
}

/// A CRD serving `kind` of `group`/`version` with any content.
async fn install_crd(client: &Client, group: &str, version: &str, kind: &str, plural: &str) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                           "listKind": format!("{kind}List")},
                 "versions": [{"name": version, "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                   "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("a CRD");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("CRD accepted");
}

async fn create_owned(
    client: &Client,
    ar: &ApiResource,
    object: Value,
    owner: Option<&DynamicObject>,
) -> DynamicObject {
    let mut object = object;
    if let Some(o) = owner {
        let types = o.types.clone().expect("owner types");
        object["metadata"]["ownerReferences"] = json!([{
            "apiVersion": types.api_version, "kind": types.kind,
            "name": o.metadata.name, "uid": o.metadata.uid,
            "controller": true, "blockOwnerDeletion": true}]);
    }
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ml", ar);
    let o: DynamicObject = serde_json::from_value(object).expect("object");
    let mut created = api
        .create(&PostParams::default(), &o)
        .await
        .expect("created");
    created.types = o.types;
    created
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobset_of_indexed_jobs_starts_whole() {
    if skip_on_cluster(
        "the inference tests",
        "stand-in CRDs for the Kubeflow, JobSet and Ray kinds",
    ) {
        return;
    }
    let (_server, client) = server().await;
    cluster(&client).await;
    // batch/v1 Jobs are the test server's own (stored, with no Job
    // controller: the test creates their pods); a CRD stands in for JobSet.
    install_crd(&client, "jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets").await;
    let jobs =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch", "v1", "Job"), "jobs");
    let jobsets = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet"),
        "jobsets",
    );
    let job_spec = json!({"parallelism": 2, "completions": 2, "completionMode": "Indexed",
                          "template": {"spec": {"restartPolicy": "Never",
                                                "containers": [{"name": "c", "image": "train:1"}]}}});
    let js = create_owned(
        &client,
        &jobsets,
        json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
               "metadata": {"name": "llm", "namespace": "ml", "labels": {"trainyard.io/queue": "team"}},
               "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2,
                                            "template": {"spec": job_spec}}]}}),
        None,
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    for j in 0..2 {
        let job = create_owned(
            &client,
            &jobs,
            json!({"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": format!("llm-workers-{j}"), "namespace": "ml"},
                   "spec": job_spec}),
            Some(&js),
        )
        .await;
        for i in 0..2 {
            let p: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("llm-workers-{j}-{i}"), "namespace": "ml",
                             "labels": {"jobset.sigs.k8s.io/jobset-name": "llm",
                                        "jobset.sigs.k8s.io/replicatedjob-name": "workers",
                                        "jobset.sigs.k8s.io/job-index": j.to_string(),
                                        "batch.kubernetes.io/job-completion-index": i.to_string()},
                             "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                                  "name": job.metadata.name, "uid": job.metadata.uid,
                                                  "controller": true, "blockOwnerDeletion": true}]},
                "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                         "resources": {"requests": {"nvidia.com/gpu": "4"},
                                       "limits": {"nvidia.com/gpu": "4"}}}]}
            }))
            .expect("pod");
            pods.create(&PostParams::default(), &p)
                .await
                .expect("pod created");
        }
    }

    let (mut progress, stop) = start(client.clone());
    let end = until(&mut progress, "the JobSet's binds", |p| {
        p.groups_created == 1 && p.written.binds == 4
    })
    .await;
    assert_eq!(end.written.failed, 0, "{end:?}");
    let js = serde_json::to_value(&js).expect("json");
    let group = group_of(&client, &js).await;
    assert_eq!(group.data["spec"]["minMember"], 4, "{:?}", group.data);
    assert_eq!(group.data["spec"]["queue"], "team", "{:?}", group.data);
    let placed = placements(&client).await;
    assert_eq!(placed.len(), 4, "{placed:?}");
    devices_distinct(&placed);
    stop.send_replace(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ray_cluster_is_a_gang_of_its_head_and_minimum_workers() {
    if skip_on_cluster(
        "the inference tests",
        "stand-in CRDs for the Kubeflow, JobSet and Ray kinds",
    ) {
        return;
    }
    let (_server, client) = server().await;
    cluster(&client).await;
    install_crd(&client, "ray.io", "v1", "RayCluster", "rayclusters").await;
    let rayclusters = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("ray.io", "v1", "RayCluster"),
        "rayclusters",
    );
    let rc = create_owned(
        &client,
        &rayclusters,
        json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "rc", "namespace": "ml", "labels": {"kai.scheduler/queue": "team"}},
               "spec": {"headGroupSpec": {}, "workerGroupSpecs": [
                   {"groupName": "gpu", "replicas": 4, "minReplicas": 2, "maxReplicas": 4}]}}),
        None,
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let members = std::iter::once(("head", "head".to_string(), 0))
        .chain((0..4).map(|i| ("worker", format!("gpu-worker-{i}"), 4)));
    for (node_type, name, gpus) in members {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("rc-{name}"), "namespace": "ml",
                         "labels": {"ray.io/cluster": "rc", "ray.io/node-type": node_type},
                         "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                              "name": "rc", "uid": rc.metadata.uid,
                                              "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"schedulerName": "trainyard", "containers": [{"name": "ray", "image": "ray:2",
                     "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()},
                                   "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &p)
            .await
            .expect("pod created");
    }
    let (mut progress, stop) = start(client.clone());
    // The head and two workers are the gang; the other two workers are
    // its elastic part and fit too.
    let end = until(&mut progress, "the RayCluster's binds", |p| {
        p.groups_created == 1 && p.written.binds == 5
    })
    .await;
    assert_eq!(end.written.failed, 0, "{end:?}");
    let rc = serde_json::to_value(&rc).expect("json");
    let group = group_of(&client, &rc).await;
    assert_eq!(group.data["spec"]["minMember"], 3, "{:?}", group.data);
    assert_eq!(group.data["spec"]["queue"], "team", "{:?}", group.data);
    devices_distinct(&placements(&client).await);
    stop.send_replace(true);
}
