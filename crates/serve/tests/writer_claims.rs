//! The writer's DRA claim writes against the test API server, through
//! kube-rs: a gang's claims are written before its binds, conditional on
//! the resourceVersion the machine saw; a stale one is refused (409), the
//! gang's binds are then not made, and a claim the unit did write is
//! released (allocation, reservations and finalizer gone).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use trainyard_cluster::{ClaimWrite, Write};
use trainyard_model::dra::AllocatedDevice;
use trainyard_model::{TaskKey, Timestamp};
use trainyard_sched::decisions::Bind;
use trainyard_serve::conn::{Conn, Fence};
use trainyard_serve::events::EventSink;
use trainyard_serve::machine::Unit;
use trainyard_serve::machine::units::ClaimSeen;
use trainyard_serve::settings::NominateBeforeBind;
use trainyard_serve::write::Writer;

fn claims_api(client: &Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
    ));
    Api::namespaced_with(client.clone(), "ml", &ar)
}

/// Creates claim `ml/{name}` (one GPU) and returns what a watch shows of it.
async fn claim(client: &Client, name: &str) -> ClaimSeen {
    let o: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "gpu.example.com"}}]}}}))
    .expect("claim");
    let made = claims_api(client)
        .create(&PostParams::default(), &o)
        .await
        .expect("claim created");
    ClaimSeen::of(&serde_json::to_value(made).expect("json"))
}

async fn pod(client: &Client, name: &str) -> TaskKey {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "i"}]}
    }))
    .expect("pod");
    let made = Api::<Pod>::namespaced(client.clone(), "ml")
        .create(&PostParams::default(), &p)
        .await
        .expect("pod created");
    TaskKey {
        namespace: "ml".into(),
        name: name.into(),
        uid: made.metadata.uid.expect("uid"),
    }
}

fn claim_write(name: &str, pod: &TaskKey, device: &str) -> ClaimWrite {
    ClaimWrite {
        job: "ml/g".into(),
        claim: format!("ml/{name}"),
        node: "n1".into(),
        pods: vec![pod.clone()],
        allocation: Some(vec![AllocatedDevice {
            request: "gpu".into(),
            driver: "gpu.example.com".into(),
            pool: "n1".into(),
            device: device.into(),
            admin_access: false,
            consumed: Default::default(),
        }]),
        extended: Vec::new(),
    }
}

fn bind(pod: &TaskKey) -> Write {
    Write::Bind(Bind {
        job: "ml/g".into(),
        task: pod.clone(),
        node: "n1".into(),
        gpus: vec![],
    })
}

fn writer(client: &Client) -> Writer {
    let conn = Arc::new(Conn::new(
        client.clone(),
        10_000,
        10_000,
        Arc::new(Fence::open()),
    ));
    let (events, _) = EventSink::spawn(conn.clone(), 100, 4);
    Writer::spawn(conn, events, 4, NominateBeforeBind::Never, None)
}

/// Writes one unit; its outcomes as (what, error reason or "ok"), sorted.
async fn write(
    w: &mut Writer,
    writes: Vec<Write>,
    seen: BTreeMap<String, ClaimSeen>,
) -> Vec<(String, String)> {
    let n = writes.len();
    w.send_unit(Unit {
        id: 1,
        at: Timestamp::from_secs(1_800_000_000),
        nominate_first: false,
        open: None,
        writes,
        claims: seen,
        extended: BTreeMap::new(),
    });
    let mut out = Vec::new();
    for _ in 0..n {
        let o = w.outcome().await.expect("an outcome");
        let what = match &o.write {
            Write::Claim(c) => format!("claim {}", c.claim),
            Write::Bind(b) => format!("bind {}", b.task.name),
            other => format!("{other:?}"),
        };
        out.push((what, o.error.map_or("ok".into(), |e| e.reason)));
    }
    out.sort();
    out
}

async fn shown(client: &Client, name: &str) -> Value {
    serde_json::to_value(claims_api(client).get(name).await.expect("claim")).expect("json")
}

async fn node_of(client: &Client, pod: &str) -> Option<String> {
    Api::<Pod>::namespaced(client.clone(), "ml")
        .get(pod)
        .await
        .expect("pod")
        .spec
        .and_then(|s| s.node_name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_land_before_the_binds_and_a_stale_one_stops_the_gang_and_is_undone() {
    let (_server, client) = server().await;
    cluster(&client).await;
    let mut w = writer(&client);

    // Fresh views: the claims, then the binds.
    let (p0, p1) = (pod(&client, "p0").await, pod(&client, "p1").await);
    let (c0, c1) = (claim(&client, "c0").await, claim(&client, "c1").await);
    let seen = BTreeMap::from([("ml/c0".to_string(), c0), ("ml/c1".to_string(), c1)]);
    let writes = vec![
        Write::Claim(claim_write("c0", &p0, "gpu-0")),
        Write::Claim(claim_write("c1", &p1, "gpu-1")),
        bind(&p0),
        bind(&p1),
    ];
    let done = write(&mut w, writes, seen).await;
    let ok = |w: &str| (w.to_string(), "ok".to_string());
    assert_eq!(
        done,
        [
            ok("bind p0"),
            ok("bind p1"),
            ok("claim ml/c0"),
            ok("claim ml/c1")
        ]
    );
    let c0 = shown(&client, "c0").await;
    assert_eq!(
        c0["status"]["allocation"]["devices"]["results"][0]["device"],
        "gpu-0"
    );
    assert_eq!(c0["status"]["reservedFor"][0]["uid"], json!(p0.uid));
    assert_eq!(
        c0["metadata"]["finalizers"],
        json!(["resource.kubernetes.io/delete-protection"])
    );
    assert_eq!(node_of(&client, "p0").await.as_deref(), Some("n1"));

    // A gang of two: c3's view is stale (it changed since), c2's fresh.
    let (p2, p3) = (pod(&client, "p2").await, pod(&client, "p3").await);
    let c2 = claim(&client, "c2").await;
    let mut c3 = claim(&client, "c3").await;
    let changed = json!({"metadata": {"labels": {"touched": "yes"}}});
    claims_api(&client)
        .patch("c3", &Default::default(), &kube::api::Patch::Merge(changed))
        .await
        .expect("changed");
    c3.finalizers.clear();
    let seen = BTreeMap::from([("ml/c2".to_string(), c2), ("ml/c3".to_string(), c3)]);
    let writes = vec![
        Write::Claim(claim_write("c2", &p2, "gpu-2")),
        Write::Claim(claim_write("c3", &p3, "gpu-3")),
        bind(&p2),
        bind(&p3),
    ];
    let done = write(&mut w, writes, seen).await;
    let failed = |w: &str, why: &str| (w.to_string(), why.to_string());
    assert_eq!(
        done,
        [
            failed("bind p2", "claim_conflict"),
            failed("bind p3", "claim_conflict"),
            failed("claim ml/c2", "released"),
            failed("claim ml/c3", "conflict"),
        ]
    );
    assert_eq!(node_of(&client, "p2").await, None);
    assert_eq!(node_of(&client, "p3").await, None);
    // c2 was written, then released whole.
    let c2 = shown(&client, "c2").await;
    assert!(c2["status"]["allocation"].is_null(), "{c2}");
    assert!(
        c2["status"]["reservedFor"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{c2}"
    );
    assert!(
        c2["metadata"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{c2}"
    );
    let c3 = shown(&client, "c3").await;
    assert!(c3["status"]["allocation"].is_null(), "{c3}");
}
