//! Binds that go wrong, end to end: a gang whose node is deleted while its
//! binds are in flight ends with no member holding GPUs.

mod common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use trainyard_serve::GPU_DEVICES_ANNOTATION;
use trainyard_testapi::Faults;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_deleted_mid_bind_leaves_no_partial_gang() {
    if skip_on_cluster("the mid-bind node deletion", "added API latency") {
        return;
    }
    let (server, client) = server().await;
    cluster(&client).await;
    // One pod per node: the gang needs both.
    gang(&client, "g", "team", 2, 8).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let mut annotated = watcher(pods.clone(), watcher::Config::default())
        .applied_objects()
        .try_filter(|p| {
            let has = p
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(GPU_DEVICES_ANNOTATION));
            std::future::ready(has)
        })
        .boxed();
    // Every API call of the service takes a while, so its binds are in
    // flight when the node goes.
    server.set_faults(Faults {
        latency_ms: 150,
        ..Faults::default()
    });
    let mut settings = fast_settings();
    settings.service.gang_repair_seconds = 1;
    let (mut progress, stop) = start_with(client.clone(), settings);
    let first = annotated
        .next()
        .await
        .expect("a pod gets its devices")
        .expect("watch");
    server
        .delete("v1", "Node", "", "n2")
        .expect("node n2 deleted");
    server.set_faults(Faults::default());
    let end = until(&mut progress, "the incomplete gang's repair", |p| {
        p.repairs >= 1
    })
    .await;
    assert_eq!(
        end.written.binds, 2,
        "both binds went out: {end:?} (first {:?})",
        first.metadata.name
    );

    // From the API: no member of the gang runs on a node that exists
    // without being on its way out.
    for p in pods.list(&ListParams::default()).await.expect("pods") {
        let name = p.metadata.name.clone().unwrap_or_default();
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
        let leaving = p.metadata.deletion_timestamp.is_some();
        assert!(
            node.is_none() || node.as_deref() == Some("n2") || leaving,
            "{name} holds GPUs on {node:?} in an incomplete gang"
        );
    }
    let repaired = events_until(&client, "ml", 1, |e| {
        e.reason.as_deref() == Some("IncompleteGang")
    })
    .await;
    assert!(!repaired.is_empty(), "an IncompleteGang event");
    let message = repaired[0].message.clone().unwrap_or_default();
    assert!(
        message.starts_with("gang ml/g had 1 of minMember 2 pods running for "),
        "{message}"
    );
    stop.send_replace(true);
}
