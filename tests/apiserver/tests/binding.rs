//! `pods/binding` as kube-apiserver ≥ 1.34 answers it: the bind clears
//! the pod's `status.nominatedNodeName` in the same write (KEP-5278,
//! kubernetes#132443), so a bound pod is nominated nowhere, whoever set
//! the nomination.

mod common;

use common::manual_server;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_clears_the_pods_nomination() {
    let server = manual_server().await;
    let client =
        Client::try_from(kube::Config::new(server.url().parse().expect("url"))).expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}}}))
    .expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    let nominated = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"nominatedNodeName": "n1"}})),
        )
        .await
        .expect("nominated");
    assert_eq!(
        nominated
            .status
            .and_then(|s| s.nominated_node_name)
            .as_deref(),
        Some("n1")
    );
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p"}, "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
    pods.create_subresource::<serde_json::Value, serde_json::Value>(
        "binding",
        "p",
        &PostParams::default(),
        &binding,
    )
    .await
    .expect("bound");
    let bound = pods.get("p").await.expect("get");
    assert_eq!(bound.spec.and_then(|s| s.node_name).as_deref(), Some("n1"));
    assert_eq!(
        bound.status.and_then(|s| s.nominated_node_name),
        None,
        "the bind cleared the nomination"
    );
}
