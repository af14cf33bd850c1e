//! Watch and list semantics seen through kube-rs's raw `Api::watch`/`Api::list`:
//! history replay after a revision, bookmarks, Exact lists, 410 after compaction,
//! metadata-only lists, and the pause/latency faults.

mod common;

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use trainyard_testapi::TestApiServer;

use common::manual_server;

fn client(server: &TestApiServer) -> Client {
    Client::try_from(kube::Config::new(server.url().parse().expect("url"))).expect("client")
}

fn code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("not an API error: {other:?}"),
    }
}

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})).expect("node")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_watch_replays_history_sends_bookmarks_and_expires() {
    use kube::api::{VersionMatch, WatchEvent, WatchParams};
    let server = manual_server().await;
    let c = client(&server);
    let nodes: Api<Node> = Api::all(c.clone());
    let pp = PostParams::default();
    nodes.create(&pp, &node("a")).await.expect("node");
    let before = nodes
        .list(&ListParams::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("collection rv");
    nodes.create(&pp, &node("b")).await.expect("node");
    nodes
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .expect("patch");
    nodes
        .delete("b", &DeleteParams::default())
        .await
        .expect("delete");

    // Exact list at the earlier revision, rebuilt from history; PartialObjectMetadata lists.
    let old = nodes
        .list(
            &ListParams::default()
                .matching(VersionMatch::Exact)
                .at(&before),
        )
        .await
        .expect("exact");
    assert_eq!(
        old.items
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect::<Vec<_>>(),
        ["a"]
    );
    assert!(
        old.items[0].metadata.labels.is_none(),
        "state as of the revision"
    );
    let meta = nodes
        .list_metadata(&ListParams::default())
        .await
        .expect("metadata list");
    assert_eq!(meta.items.len(), 1);

    // Watch from the earlier revision: the history after it, in order, then bookmarks.
    let stream = nodes
        .watch(&WatchParams::default(), &before)
        .await
        .expect("watch");
    let mut stream = Box::pin(stream);
    let mut seen = Vec::new();
    let deadline = Duration::from_secs(20);
    while seen.len() < 4 {
        let ev = tokio::time::timeout(deadline, stream.next())
            .await
            .expect("event in time")
            .expect("stream open")
            .expect("event");
        seen.push(match ev {
            WatchEvent::Added(n) => format!("ADDED {}", n.metadata.name.unwrap_or_default()),
            WatchEvent::Modified(n) => format!("MODIFIED {}", n.metadata.name.unwrap_or_default()),
            WatchEvent::Deleted(n) => format!("DELETED {}", n.metadata.name.unwrap_or_default()),
            WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.metadata.resource_version),
            WatchEvent::Error(e) => panic!("error event {e:?}"),
        });
    }
    let rv_now = server.resource_version();
    assert_eq!(
        seen,
        [
            "ADDED b".to_string(),
            "MODIFIED a".into(),
            "DELETED b".into(),
            format!("BOOKMARK {rv_now}")
        ]
    );

    // After compaction the same watch gets a 410 ERROR event; lists at it get 410.
    server.compact();
    let stream = nodes
        .watch(&WatchParams::default(), &before)
        .await
        .expect("watch");
    let mut stream = Box::pin(stream);
    match tokio::time::timeout(deadline, stream.next())
        .await
        .expect("in time")
        .expect("open")
        .expect("event")
    {
        WatchEvent::Error(st) => assert_eq!((st.code, st.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {other:?}"),
    }
    assert_eq!(
        code(
            nodes
                .list(
                    &ListParams::default()
                        .matching(VersionMatch::Exact)
                        .at(&before)
                )
                .await
                .expect_err("compacted")
        ),
        410
    );

    // A paused server holds requests until it is resumed; latency delays them.
    server.pause(true);
    let held = tokio::time::timeout(Duration::from_millis(300), nodes.get("a")).await;
    assert!(held.is_err(), "request answered while paused");
    let pending = tokio::spawn({
        let nodes = nodes.clone();
        async move { nodes.get("a").await }
    });
    server.pause(false);
    assert!(pending.await.expect("join").is_ok());
    server.set_faults(trainyard_testapi::Faults {
        latency_ms: 300,
        ..Default::default()
    });
    let t = tokio::time::Instant::now();
    nodes.get("a").await.expect("slow get");
    assert!(t.elapsed() >= Duration::from_millis(300));
}
