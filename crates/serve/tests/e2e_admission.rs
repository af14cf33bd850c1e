//! Queue-admission gating end to end: a gated job stays gated while its
//! queue is at its limit and is ungated (then bound) when room appears.

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

async fn gated_pod(client: &Client, name: &str, queue: &str, gpus: u32) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "labels": {"trainyard.io/queue": queue}},
        "spec": {"schedulerName": "trainyard",
                 "schedulingGates": [{"name": "trainyard.io/admission"}],
                 "containers": [{"name": "c", "image": "train:1",
                     "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                                   "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    }))
    .expect("pod");
    api.create(&PostParams::default(), &p)
        .await
        .expect("pod created");
}

async fn gates_and_node(client: &Client, name: &str) -> (Vec<String>, Option<String>) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let p = api.get(name).await.expect("pod");
    let spec = p.spec.unwrap_or_default();
    let gates = spec
        .scheduling_gates
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.name)
        .collect();
    (gates, spec.node_name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_job_waits_for_room_in_its_queue_then_is_ungated_and_bound() {
    let (env, client) = env().await;
    cluster(&client).await;
    create(
        &client,
        &trainyard("Queue", "queues"),
        None,
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
               "metadata": {"name": "small"},
               "spec": {"quota": {"nvidia.com/gpu": 8}, "limit": {"nvidia.com/gpu": 8}}}),
    )
    .await;
    gated_pod(&client, "first", "small", 8).await;
    gated_pod(&client, "second", "small", 8).await;
    let mut settings = fast_settings();
    settings.service.admission_gating = true;
    let (mut progress, stop) = start_with(client.clone(), settings);
    let bound = until(&mut progress, "the first job admitted and bound", |p| {
        p.admitted >= 1 && p.written.binds >= 1
    })
    .await;
    let later = bound.cycles + 3;
    let end = until(&mut progress, "three more cycles", |p| p.cycles >= later).await;
    assert_eq!((end.admitted, end.written.binds), (1, 1), "{end:?}");
    // The cluster has room for both (16 GPUs), the queue's limit for one:
    // the second stays gated, so an autoscaler would not scale for it.
    let (gates, node) = gates_and_node(&client, "first").await;
    assert!(gates.is_empty() && node.is_some(), "{gates:?} {node:?}");
    let (gates, node) = gates_and_node(&client, "second").await;
    assert_eq!(gates, ["trainyard.io/admission"]);
    assert_eq!(node, None);

    // The first job ends: the queue has room, the second is admitted.
    env.delete("Pod", "ml", "first").await;
    env.tick();
    let end = until(&mut progress, "the second job admitted and bound", |p| {
        p.admitted >= 2 && p.written.binds >= 2
    })
    .await;
    assert_eq!(end.written.failed, 0, "{end:?}");
    let (gates, node) = gates_and_node(&client, "second").await;
    assert!(gates.is_empty() && node.is_some(), "{gates:?} {node:?}");
    stop.send_replace(true);
}
