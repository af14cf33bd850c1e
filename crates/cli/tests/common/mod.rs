//! What the tests that run `trainyard serve` as a process share: a GPU
//! node and one pod of ours on the test API server, and a free port.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

/// A port nothing listens on now.
#[allow(dead_code)] // not every test binary asks for one
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Node `gpu-1` (8 GPUs, Ready) and pod `default/train-0` of ours asking
/// `gpus` GPUs; the pods' API.
pub async fn gpu_node_and_pod(client: &kube::Client, gpus: u32) -> Api<Pod> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "gpu-1"}})).expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    nodes
        .patch_status(
            "gpu-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }})),
        )
        .await
        .expect("node status");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "train-0"},
        "spec": {"schedulerName": "trainyard",
                 "containers": [{"name": "c", "image": "train:1",
                                 "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");
    pods
}
