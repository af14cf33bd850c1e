//! Consolidation end to end (docs/consolidation.md, "In the live
//! service"): two 8-GPU nodes with a 2-GPU ReplicaSet pod on each, and an
//! 8-GPU pod that fits in total (12 GPUs free) but on no node. The service
//! evicts one of the small pods through the Eviction API with a
//! `Consolidated` Event naming the waiting pod and the node the moved pod
//! goes to, binds the big pod on the node it vacated, and holds the
//! planned room on the other node for the moved pod's replacement (which
//! the test creates, playing the ReplicaSet controller): nothing else is
//! bound there meanwhile, the replacement is bound there when it comes,
//! and the hold ends after `preemption.nominationTimeoutSeconds` when it
//! does not. Everything is read from API objects (pods, Events).
//!
//! The service runs on the wall clock, so the timeout is a few real
//! seconds; the waits are watches with a deadline, never sleeps.

mod common;

use common::*;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;
use trainyard_serve::GPU_DEVICES_ANNOTATION;

/// Why the tests skip on a real cluster: their pods name ReplicaSets that
/// do not exist (a real garbage collector deletes such pods), and they
/// step the kubelet by hand.
const SKIP: &str = "owner references to absent ReplicaSets and the manual kubelet";

/// GPUs of the competing pod: n2's free GPUs, 6 with the moved pod's
/// planned 2 of them, 4 without. It fits only on the held room.
const COMPETITOR_GPUS: u32 = 6;

/// The ReplicaSet owning `pod` (`eval-a-0` → `eval-a`).
fn replica_set(pod: &str) -> &str {
    pod.rsplit_once('-').map_or(pod, |(rs, _)| rs)
}

fn owner(rs: &str) -> serde_json::Value {
    json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
            "uid": format!("uid-{rs}"), "controller": true}])
}

/// A pod of `queue` asking for `gpus`, pending with `schedulerName:
/// trainyard`, or already on `on` = (node, GPU devices); with a
/// ReplicaSet controller when `rs` is given.
async fn pod(
    client: &Client,
    name: &str,
    queue: &str,
    gpus: u32,
    rs: Option<&str>,
    on: Option<(&str, &str)>,
) {
    let mut p = json!({
        "metadata": {"name": name, "namespace": "ml",
                     "labels": {"trainyard.io/queue": queue}},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                 "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                               "limits": {"nvidia.com/gpu": gpus.to_string()}}}]}
    });
    if let Some(rs) = rs {
        p["metadata"]["ownerReferences"] = owner(rs);
    }
    if let Some((node, devices)) = on {
        p["spec"]["nodeName"] = node.into();
        p["metadata"]["annotations"] = json!({GPU_DEVICES_ANNOTATION: devices});
    }
    let p: Pod = serde_json::from_value(p).expect("pod");
    Api::<Pod>::namespaced(client.clone(), "ml")
        .create(&PostParams::default(), &p)
        .await
        .expect("pod created");
}

/// Namespace `ml`, nodes n1 and n2 with 8 GPUs each, queues `team-a` and
/// `team-b` (8 GPUs of quota each); `eval-a-0` (ReplicaSet `eval-a`) on
/// n1 and `eval-b-0` (ReplicaSet `eval-b`) on n2, 2 GPUs each, of
/// `team-b`, running (a kubelet step); `train`, 8 GPUs of `team-a`,
/// pending.
async fn scattered(server: &trainyard_testapi::TestApiServer, client: &Client) {
    namespace(client, "ml").await;
    node(client, "n1", 8).await;
    node(client, "n2", 8).await;
    for q in ["team-a", "team-b"] {
        create(
            client,
            &trainyard("Queue", "queues"),
            None,
            json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
                   "metadata": {"name": q}, "spec": {"quota": {"nvidia.com/gpu": 8}}}),
        )
        .await;
    }
    pod(
        client,
        "eval-a-0",
        "team-b",
        2,
        Some("eval-a"),
        Some(("n1", "0,1")),
    )
    .await;
    pod(
        client,
        "eval-b-0",
        "team-b",
        2,
        Some("eval-b"),
        Some(("n2", "0,1")),
    )
    .await;
    // Kubelet: both run (phase Running, startTime), before the service
    // starts, so they are movable from its first cycle on.
    server.tick();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    for name in ["eval-a-0", "eval-b-0"] {
        within(
            name,
            await_condition(pods.clone(), name, conditions::is_pod_running()),
        )
        .await;
    }
    pod(client, "train", "team-a", 8, None, None).await;
}

/// Fast settings with consolidation on and `timeout_s` as the nomination
/// timeout (how long a moved job's room is held for its replacement).
fn consolidating(timeout_s: u64) -> trainyard_serve::Settings {
    let mut s = fast_settings();
    s.scheduler.consolidation.enabled = true;
    s.scheduler.preemption.nomination_timeout_seconds = timeout_s;
    s
}

/// Awaits a watch condition for 30 s at most.
async fn within<T>(
    what: &str,
    wait: impl std::future::Future<Output = Result<T, kube::runtime::wait::Error>>,
) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap_or_else(|e| panic!("the watch for {what}: {e}"))
}

/// Waits (on a watch) until pod `name` satisfies `cond`; returns it.
async fn pod_until(
    client: &Client,
    name: &str,
    what: &str,
    cond: impl Fn(&Pod) -> bool + Send + 'static,
) -> Pod {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let c = move |p: Option<&Pod>| p.is_some_and(&cond);
    within(what, await_condition(pods, name, c))
        .await
        .unwrap_or_else(|| panic!("{name} gone while waiting for {what}"))
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref().and_then(|s| s.node_name.clone())
}

fn devices_of(p: &Pod) -> Vec<u32> {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(GPU_DEVICES_ANNOTATION))
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_default()
}

/// Told it waits (`PodScheduled=False`), or bound.
fn decided(p: &Pod) -> bool {
    node_of(p).is_some()
        || p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "PodScheduled" && c.status == "False")
            })
}

/// The move, as the service's `Consolidated` Event tells it.
struct Moved {
    /// The evicted pod.
    pod: String,
    /// The node it leaves (the big pod's room).
    from: String,
    /// The node its replacement is held room on.
    to: String,
    event: Event,
}

/// Waits for the one `Consolidated` Event; checks it names `train` and
/// reads the move from it.
async fn consolidated(client: &Client) -> Moved {
    let events = events_until(client, "ml", 1, |e| {
        e.reason.as_deref() == Some("Consolidated")
    })
    .await;
    let event = events.into_iter().next().expect("one Event");
    let pod = event
        .involved_object
        .name
        .clone()
        .expect("the Event names the pod");
    let message = event.message.clone().unwrap_or_default();
    // `moved to make room for ml/train (consolidation): ml/eval-a-0 (2
    // GPUs) from n1 to n2`.
    let prefix = "moved to make room for ml/train (consolidation): ";
    assert!(message.starts_with(prefix), "{message}");
    assert!(
        message.contains(&format!("ml/{pod} (2 GPUs) from ")),
        "{message}"
    );
    let (from, to) = message
        .rsplit_once(" from ")
        .and_then(|(_, r)| r.split_once(" to "))
        .unwrap_or_else(|| panic!("no `from X to Y` in {message}"));
    let (from, to) = (from.to_string(), to.to_string());
    assert!(["n1", "n2"].contains(&from.as_str()), "{message}");
    assert!(["n1", "n2"].contains(&to.as_str()), "{message}");
    assert_ne!(from, to, "{message}");
    Moved {
        pod,
        from,
        to,
        event,
    }
}

/// Up to the hold: the move is made (one eviction, its Event), the moved
/// pod goes (a kubelet step), `train` is bound on the node it vacated,
/// and a 6-GPU pod of `team-b` (`greedy`), which would fit only on the
/// room held on the destination, is created. Returns the move.
async fn moved_and_train_bound(
    server: &trainyard_testapi::TestApiServer,
    client: &Client,
    progress: &mut tokio::sync::watch::Receiver<trainyard_serve::Progress>,
) -> Moved {
    let m = consolidated(client).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    // Evicted through the Eviction API: terminating (or gone already).
    if let Some(p) = pods.get_opt(&m.pod).await.expect("get") {
        assert!(
            p.metadata.deletion_timestamp.is_some(),
            "{} not terminating after its Consolidated Event",
            m.pod
        );
        assert_eq!(node_of(&p).as_deref(), Some(m.from.as_str()));
    }
    let done = until(progress, "the eviction counted", |p| {
        p.written.evictions >= 1
    })
    .await;
    assert_eq!(done.written.evictions, 1, "{done:?}");
    // Kubelet: the moved pod stops.
    server.tick();
    within(
        "the moved pod gone",
        await_condition(pods.clone(), &m.pod, |p: Option<&Pod>| p.is_none()),
    )
    .await;
    let train = pod_until(client, "train", "train bound", |p| node_of(p).is_some()).await;
    assert_eq!(
        node_of(&train).as_deref(),
        Some(m.from.as_str()),
        "train goes to the node the move vacated"
    );
    assert_eq!(devices_of(&train), (0..8).collect::<Vec<u32>>());
    // The moved pod's replacement does not exist yet. A 6-GPU pod fits
    // n2 (eval-b's 2 GPUs used) only on the 2 GPUs planned for it.
    pod(client, "greedy", "team-b", COMPETITOR_GPUS, None, None).await;
    m
}

/// The service moves one ReplicaSet pod out of the way of an 8-GPU pod;
/// the room planned for its replacement is held (a competing pod that
/// would fit only there stays pending, one that fits beside it is bound)
/// until the replacement, created as its ReplicaSet would, comes and is
/// bound there: on the held devices, the only free ones left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_pods_replacement_gets_the_room_held_for_it() {
    if skip_on_cluster("the consolidation test", SKIP) {
        return;
    }
    let (server, client) = server().await;
    scattered(&server, &client).await;
    let (mut progress, stop) = start_with(client.clone(), consolidating(300));
    let m = moved_and_train_bound(&server, &client, &mut progress).await;
    // The planned room is the moved pod's (eval-b's node has room for it).
    assert_eq!(m.to, if m.from == "n1" { "n2" } else { "n1" });

    // The competitor is seen and told it waits; a few cycles later it is
    // still not bound: the held room is not its.
    let greedy = pod_until(&client, "greedy", "greedy decided", decided).await;
    assert_eq!(
        node_of(&greedy),
        None,
        "greedy took the room held for {}'s replacement",
        m.pod
    );
    let now = progress.borrow().cycles;
    until(&mut progress, "three more cycles", |p| p.cycles >= now + 3).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let greedy = pods.get("greedy").await.expect("greedy");
    assert_eq!(node_of(&greedy), None, "greedy bound on the held room");

    // A 4-GPU pod takes the rest of the destination: all but the held
    // room. (Bound, it shows the hold is the planned 2 GPUs, not the
    // node.) From now on the replacement fits only on the held devices,
    // which it gets only as the hold's nominee.
    pod(&client, "filler", "team-b", 4, None, None).await;
    let filler = pod_until(&client, "filler", "filler bound", |p| node_of(p).is_some()).await;
    assert_eq!(node_of(&filler).as_deref(), Some(m.to.as_str()));
    let greedy = pods.get("greedy").await.expect("greedy");
    assert_eq!(node_of(&greedy), None, "greedy bound on the held room");

    // The ReplicaSet controller: a replacement, new name, same owner.
    let rs = replica_set(&m.pod).to_string();
    let replacement = format!("{rs}-x7k");
    pod(&client, &replacement, "team-b", 2, Some(&rs), None).await;
    let r = pod_until(&client, &replacement, "the replacement bound", |p| {
        node_of(p).is_some()
    })
    .await;
    assert_eq!(
        node_of(&r).as_deref(),
        Some(m.to.as_str()),
        "the replacement goes where the Event said"
    );
    assert_eq!(devices_of(&r).len(), 2, "{:?}", r.metadata.annotations);
    let placed = placements(&client).await;
    devices_distinct(&placed);
    // Nothing else moved, nothing was bound twice (train, filler, the
    // replacement), greedy still waits (the destination is full).
    let later = progress.borrow().cycles + 2;
    let end = until(&mut progress, "two more cycles", |p| p.cycles >= later).await;
    assert_eq!(
        (end.written.evictions, end.written.binds, end.written.failed),
        (1, 3, 0),
        "{end:?}"
    );
    let greedy = pods.get("greedy").await.expect("greedy");
    assert_eq!(node_of(&greedy), None, "{placed:?}");
    let consolidated: Vec<Event> = Api::<Event>::namespaced(client.clone(), "ml")
        .list(&Default::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Consolidated"))
        .collect();
    assert_eq!(consolidated.len(), 1, "one move: {consolidated:?}");
    stop.send_replace(true);
}

/// The replacement never comes: once the nomination timeout has passed
/// since the move, the held room is released and the competing pod is
/// bound on it, not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_whose_replacement_never_comes_is_released_after_the_timeout() {
    if skip_on_cluster("the consolidation test", SKIP) {
        return;
    }
    const TIMEOUT_S: i64 = 5;
    let (server, client) = server().await;
    scattered(&server, &client).await;
    let (mut progress, stop) = start_with(client.clone(), consolidating(TIMEOUT_S as u64));
    let m = moved_and_train_bound(&server, &client, &mut progress).await;
    let greedy = pod_until(&client, "greedy", "greedy bound", |p| node_of(p).is_some()).await;
    assert_eq!(
        node_of(&greedy).as_deref(),
        Some(m.to.as_str()),
        "greedy takes the released room"
    );
    // Not before the timeout: the bind's Event is stamped with its cycle's
    // time, the move's with the move's cycle's (whole seconds, so the
    // difference of the two is at least the timeout's).
    let scheduled = events_until(&client, "ml", 1, |e| {
        e.reason.as_deref() == Some("Scheduled")
            && e.involved_object.name.as_deref() == Some("greedy")
    })
    .await;
    let at = |e: &Event| {
        e.first_timestamp
            .as_ref()
            .map(|t| t.0.as_second())
            .expect("firstTimestamp")
    };
    let held_for = at(&scheduled[0]) - at(&m.event);
    assert!(
        held_for >= TIMEOUT_S,
        "greedy bound {held_for} s after the move, within the {TIMEOUT_S} s hold"
    );
    let placed = placements(&client).await;
    devices_distinct(&placed);
    let end = progress.borrow().written;
    assert_eq!((end.evictions, end.failed), (1, 0), "{end:?}");
    stop.send_replace(true);
}
