//! The writer against the test API server, through kube-rs: every write
//! names the pod it was decided for (its uid), and one pod's writes land
//! in the order of their cycles.

mod common;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use trainyard_cluster::Write;
use trainyard_model::{TaskKey, Timestamp};
use trainyard_sched::decisions::{Eviction, EvictionKind, NominationDecision, Withdrawal};
use trainyard_serve::conn::{Conn, Fence};
use trainyard_serve::events::EventSink;
use trainyard_serve::settings::NominateBeforeBind;
use trainyard_serve::write::{Outcome, Writer};

/// A writer of four concurrent requests with no rate limit to speak of.
fn writer(client: &Client) -> Writer {
    writer_of(client, 4)
}

/// A writer with `concurrency` requests in flight at most.
fn writer_of(client: &Client, concurrency: usize) -> Writer {
    let conn = Arc::new(Conn::new(
        client.clone(),
        10_000,
        10_000,
        Arc::new(Fence::open()),
    ));
    let (events, _) = EventSink::spawn(conn.clone(), 100, 4);
    Writer::spawn(conn, events, concurrency, NominateBeforeBind::Gangs, None)
}

/// Creates the pending pod `ml/{name}` and returns its key with its uid.
async fn pod(client: &Client, name: &str) -> TaskKey {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}
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

fn nominate(task: &TaskKey) -> Write {
    Write::Nominate(NominationDecision {
        job: "ml/j".into(),
        task: task.clone(),
        node: "n1".into(),
        gpus: vec![3],
    })
}

fn withdraw(task: &TaskKey) -> Write {
    Write::Withdraw(Withdrawal {
        job: "ml/j".into(),
        task: task.clone(),
        node: "n1".into(),
    })
}

fn evict(task: &TaskKey) -> Write {
    Write::Evict(Eviction {
        job: "ml/j".into(),
        task: task.clone(),
        node: "n1".into(),
        kind: EvictionKind::Preempt,
        preemptor: "ml/k".into(),
        message: "preempted for ml/k".into(),
    })
}

/// The next `n` outcomes, as (write, error reason or "ok").
async fn outcomes(w: &mut Writer, n: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let Outcome { write, error, .. } = w.outcome().await.expect("an outcome");
        let what = match &write {
            Write::Bind(b) => format!("bind {}", b.task.name),
            Write::Evict(e) => format!("evict {}", e.task.name),
            Write::Nominate(n) => format!("nominate {}", n.task.name),
            Write::Withdraw(x) => format!("withdraw {}", x.task.name),
            Write::Claim(c) => format!("claim {}", c.claim),
        };
        out.push((what, error.map_or("ok".into(), |e| e.reason)));
    }
    out
}

/// `ml/{name}`'s nominated node and its Trainyard annotations.
async fn nomination(client: &Client, name: &str) -> (Option<String>, Vec<String>) {
    let p = Api::<Pod>::namespaced(client.clone(), "ml")
        .get(name)
        .await
        .expect("pod");
    let annotations = p
        .metadata
        .annotations
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k.starts_with("trainyard.io/"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    (p.status.and_then(|s| s.nominated_node_name), annotations)
}

#[tokio::test]
async fn writes_touch_only_the_pod_they_were_decided_for() {
    let (server, client) = common::server().await;
    common::namespace(&client, "ml").await;
    common::node(&client, "n1", 8).await;
    let old = pod(&client, "p").await;
    // The pod the cycle decided on goes; a namesake, nominated by someone
    // else, takes its name before the writes land.
    server.delete("v1", "Pod", "ml", "p").expect("deleted");
    let new = pod(&client, "p").await;
    assert_ne!(old.uid, new.uid);
    Api::<Pod>::namespaced(client.clone(), "ml")
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"nominatedNodeName": "n9"}})),
        )
        .await
        .expect("nominated");

    let mut w = writer(&client);
    w.send(
        Timestamp::from_secs(1),
        vec![withdraw(&old), nominate(&old), evict(&old)],
    );
    let got = outcomes(&mut w, 3).await;
    assert_eq!(
        got,
        [
            ("withdraw p".to_string(), "invalid".to_string()),
            ("nominate p".into(), "invalid".into()),
            ("evict p".into(), "conflict".into()),
        ]
    );
    // The namesake is untouched: still there, still nominated on n9.
    assert_eq!(nomination(&client, "p").await, (Some("n9".into()), vec![]));

    // Its own writes land.
    w.send(Timestamp::from_secs(2), vec![nominate(&new)]);
    assert_eq!(outcomes(&mut w, 1).await[0].1, "ok");
    let (node, annotations) = nomination(&client, "p").await;
    assert_eq!(node.as_deref(), Some("n1"));
    assert!(
        annotations
            .iter()
            .any(|a| a == "trainyard.io/gpu-indices=3"),
        "{annotations:?}"
    );
    w.send(Timestamp::from_secs(3), vec![withdraw(&new), evict(&new)]);
    assert_eq!(
        outcomes(&mut w, 2).await,
        [
            ("withdraw p".to_string(), "ok".to_string()),
            ("evict p".into(), "ok".into()),
        ]
    );
    assert!(
        server.get("v1", "Pod", "ml", "p").is_none(),
        "evicted (a pending pod goes at once)"
    );
    w.stop().await;
}

#[tokio::test]
async fn one_pods_writes_land_in_the_order_of_their_cycles() {
    let (server, client) = common::server().await;
    common::namespace(&client, "ml").await;
    common::node(&client, "n1", 8).await;
    let p = pod(&client, "p").await;
    let q = pod(&client, "q").await;
    let mut w = writer(&client);
    // Every request waits at the server: three cycles' writes are handed
    // over while the first is still unwritten.
    server.pause(true);
    w.send(Timestamp::from_secs(1), vec![nominate(&p)]);
    w.send(Timestamp::from_secs(2), vec![withdraw(&p)]);
    w.send(Timestamp::from_secs(3), vec![nominate(&q)]);
    // p's nomination and q's (a later cycle's, another pod) are both at
    // the server: the writer went past p's withdrawal, which waits.
    server.held(2).await;
    server.pause(false);
    let got = outcomes(&mut w, 3).await;
    let at = |what: &str| got.iter().position(|(w, _)| w == what).expect(what);
    assert!(got.iter().all(|(_, r)| r == "ok"), "{got:?}");
    assert!(at("nominate p") < at("withdraw p"), "{got:?}");
    // So p ends withdrawn, annotations and all; q stays nominated.
    assert_eq!(nomination(&client, "p").await, (None, vec![]));
    assert_eq!(nomination(&client, "q").await.0.as_deref(), Some("n1"));
    w.stop().await;
}

#[tokio::test]
async fn writes_waiting_for_their_pod_leave_the_permits_to_other_pods() {
    let (server, client) = common::server().await;
    common::namespace(&client, "ml").await;
    common::node(&client, "n1", 8).await;
    let p = pod(&client, "p").await;
    let q = pod(&client, "q").await;
    // Two requests at once. p's nomination is held at the server; its
    // withdrawal (a cycle later) and a re-nomination wait for it.
    let mut w = writer_of(&client, 2);
    server.pause(true);
    w.send(Timestamp::from_secs(1), vec![nominate(&p)]);
    w.send(Timestamp::from_secs(2), vec![withdraw(&p)]);
    w.send(Timestamp::from_secs(3), vec![nominate(&p)]);
    w.send(Timestamp::from_secs(4), vec![nominate(&q)]);
    // q's nomination takes the second permit and reaches the server while
    // p's later writes wait (when waiting writes held a slot, it never
    // did: the timeout is the failure, not a wait for something).
    tokio::time::timeout(std::time::Duration::from_secs(30), server.held(2))
        .await
        .expect("q's nomination reached the server while p's writes waited");
    server.pause(false);
    let got = outcomes(&mut w, 4).await;
    assert!(got.iter().all(|(_, r)| r == "ok"), "{got:?}");
    let nominated: Vec<&str> = got
        .iter()
        .filter(|(w, _)| w == "nominate p" || w == "withdraw p")
        .map(|(w, _)| w.as_str())
        .collect();
    assert_eq!(nominated, ["nominate p", "withdraw p", "nominate p"]);
    assert_eq!(nomination(&client, "p").await.0.as_deref(), Some("n1"));
    assert_eq!(nomination(&client, "q").await.0.as_deref(), Some("n1"));
    w.stop().await;
}

#[tokio::test]
async fn a_namesake_of_a_gated_pod_is_not_ungated() {
    use trainyard_serve::admission::{GatedPods, ungate};
    let (server, client) = common::server().await;
    common::namespace(&client, "ml").await;
    let api = Api::<Pod>::namespaced(client.clone(), "ml");
    let gated = |_: ()| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "g", "namespace": "ml"},
            "spec": {"schedulerName": "trainyard",
                     "schedulingGates": [{"name": "trainyard.io/admission"}],
                     "containers": [{"name": "c", "image": "i"}]}
        }))
        .expect("pod")
    };
    let first = api
        .create(&PostParams::default(), &gated(()))
        .await
        .expect("created");
    let mut seen = GatedPods::default();
    seen.applied(&serde_json::to_value(&first).expect("json"), "trainyard");
    let g = seen.pods[&("ml".to_string(), "g".to_string())].clone();
    // The pod seen goes; a namesake, gated the same way, takes its name.
    server.delete("v1", "Pod", "ml", "g").expect("deleted");
    api.create(&PostParams::default(), &gated(()))
        .await
        .expect("namesake");
    let conn = Conn::new(client.clone(), 100, 100, Arc::new(Fence::open()));
    let e = ungate(&conn, "ml", "g", &g).await.expect_err("another uid");
    assert!(
        matches!(&e, kube::Error::Api(s) if s.code == 422 && s.message.contains("/metadata/uid")),
        "{e}"
    );
    let gates = api
        .get("g")
        .await
        .expect("pod")
        .spec
        .expect("spec")
        .scheduling_gates;
    assert_eq!(
        gates.map(|g| g.len()),
        Some(1),
        "the namesake keeps its gate"
    );
}

#[tokio::test]
async fn a_gang_member_whose_bind_fails_loses_the_nomination_made_before_it() {
    let (_server, client) = common::server().await;
    common::namespace(&client, "ml").await;
    common::node(&client, "n1", 8).await;
    common::node(&client, "n2", 8).await;
    let p = pod(&client, "p").await;
    let q = pod(&client, "q").await;
    // p is bound elsewhere before the gang's writes land: its bind fails.
    Api::<Pod>::namespaced(client.clone(), "ml")
        .create_subresource::<serde_json::Value, serde_json::Value>(
            "binding",
            "p",
            &PostParams::default(),
            &json!({"apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": "p", "namespace": "ml"},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": "n2"}}),
        )
        .await
        .expect("bound");
    let bind = |task: &TaskKey| {
        Write::Bind(trainyard_sched::decisions::Bind {
            job: "ml/g".into(),
            task: task.clone(),
            node: "n1".into(),
            gpus: vec![0],
        })
    };
    let mut w = writer(&client);
    // A gang of two: nominated first (`nominateBeforeBind: gangs`).
    w.send(Timestamp::from_secs(1), vec![bind(&p), bind(&q)]);
    let mut got = outcomes(&mut w, 2).await;
    got.sort();
    assert_eq!(
        got,
        [
            ("bind p".to_string(), "conflict".to_string()),
            ("bind q".into(), "ok".into()),
        ]
    );
    let api = Api::<Pod>::namespaced(client.clone(), "ml");
    let (p_now, q_now) = (
        api.get("p").await.expect("p"),
        api.get("q").await.expect("q"),
    );
    let nominated = |x: &Pod| {
        x.status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
    };
    let node = |x: &Pod| x.spec.as_ref().and_then(|s| s.node_name.clone());
    assert_eq!((node(&p_now), nominated(&p_now)), (Some("n2".into()), None));
    assert_eq!(node(&q_now).as_deref(), Some("n1"));
    w.stop().await;
}
