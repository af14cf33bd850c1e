//! Helpers of the DRA tests (`dra.rs`, `dra_controller.rs`).

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::core::Status;
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use trainyard_testapi::TestApiServer;

pub fn client(server: &TestApiServer, token: Option<&str>) -> Client {
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.default_retry = false;
    config.auth_info.token = token.map(|t| t.to_string().into());
    Client::try_from(config).expect("client")
}

pub fn obj<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("object")
}

pub fn status(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other:?}"),
    }
}

pub fn causes(s: &Status) -> Vec<(String, String)> {
    s.details
        .as_ref()
        .map(|d| {
            d.causes
                .iter()
                .map(|c| (c.field.clone(), c.message.clone()))
                .collect()
        })
        .unwrap_or_default()
}

pub fn node(name: &str) -> Node {
    obj(
        json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}),
    )
}

pub fn claim(name: &str) -> ResourceClaim {
    obj(json!({"metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}))
}

/// An allocation of one device on `node` for the request `gpu`.
pub fn allocation(node: &str, device: &str) -> Value {
    json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": device}]},
           "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}})
}

pub fn reservation(pod: &Pod) -> Value {
    json!({"resource": "pods", "name": pod.name_any(), "uid": pod.uid().expect("uid")})
}

pub fn pod_with_claims(name: &str, claims: Value) -> Pod {
    obj(json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
                 "resourceClaims": claims}}))
}

pub fn condition(pod: &Pod, ty: &str) -> Option<(String, String, String)> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
        .map(|c| {
            (
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

pub async fn bind(server: &TestApiServer, pod: &str, node: &str) {
    let c = client(server, None);
    let req = http::Request::post(format!("/api/v1/namespaces/default/pods/{pod}/binding"))
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}}))
            .expect("json"),
        )
        .expect("request");
    let _: Value = c.request(req).await.expect("bind");
}
