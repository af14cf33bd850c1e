//! `enforceWalltime`: a gang that has run its PodGroup's walltime loses
//! all its pods, each with a `WalltimeExceeded` Event; a gang without a
//! walltime runs on; the run cut short is no observed runtime for the
//! reservations' estimate, while a job that ended on its own is one. With
//! it off (the default), the gang runs on and each pod gets one
//! `WalltimePassed` Event.
//! Against the test API server (its kubelet sets each pod's
//! `status.startTime` when it starts the pod).

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::json;

/// PodGroup `short` (walltime 2 s) with two pods of 2 GPUs, in `team`.
async fn short_gang(client: &kube::Client) {
    create(
        client,
        &trainyard("PodGroup", "podgroups"),
        Some("ml"),
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
               "metadata": {"name": "short", "namespace": "ml"},
               "spec": {"queue": "team", "minMember": 2, "walltime": "2s"}}),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    for i in 0..2 {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("short-{i}"), "namespace": "ml",
                         "labels": {"trainyard.io/pod-group": "short"}},
            "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                     "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &p)
            .await
            .expect("pod created");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_past_its_walltime_loses_its_pods_with_an_event() {
    let (server, client) = server().await;
    cluster(&client).await;
    short_gang(&client).await;
    gang(&client, "long", "team", 1, 2).await;
    gang(&client, "done", "team", 1, 1).await;
    let mut settings = fast_settings();
    settings.service.enforce_walltime = true;
    let (mut progress, stop) = start_with(client.clone(), settings);
    let bound = until(&mut progress, "the gangs bound", |p| p.written.binds == 4).await;
    // A job that ends on its own (its pod goes) after a usage sample saw
    // it run: one observed runtime.
    pod_ends_on_its_own(&server, &mut progress, bound, "done-0", 1).await;
    // Kubelet: the pods start (status.startTime).
    server.tick();
    let events = events_until(&client, "ml", 2, |e| {
        e.reason.as_deref() == Some("WalltimeExceeded")
    })
    .await;
    let mut about: Vec<String> = events
        .iter()
        .map(|e| e.involved_object.name.clone().unwrap_or_default())
        .collect();
    about.sort();
    assert_eq!(about, ["short-0", "short-1"]);
    for e in &events {
        let m = e.message.as_deref().unwrap_or_default();
        assert!(
            m.starts_with("job ml/short ran ")
                && m.ends_with(", past its walltime 2s; its pods are evicted"),
            "{m}"
        );
    }
    let seen = until(&mut progress, "the evictions counted", |p| {
        p.walltime_evictions == 2
    })
    .await;
    // The evicted pods go (the kubelet stops them): `short` ended, cut at
    // its walltime, which is not a runtime of its own.
    let accounted = seen.accounted;
    server.tick();
    let gone = until(&mut progress, "short's end accounted", |p| {
        p.accounted > accounted
    })
    .await;
    assert_eq!(gone.runtimes, 1, "{gone:?}");
    // Three cycles later: the gang without a walltime still runs.
    until(&mut progress, "three more cycles", |p| {
        p.cycles >= seen.cycles + 3
    })
    .await;
    assert_eq!(progress.borrow().walltime_evictions, 2);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let long = pods.get("long-0").await.expect("long-0 still there");
    assert!(long.metadata.deletion_timestamp.is_none(), "{long:?}");
    stop.send_replace(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_enforcement_off_a_gang_past_its_walltime_runs_on_and_each_pod_is_told_once() {
    let (server, client) = server().await;
    cluster(&client).await;
    short_gang(&client).await;
    let settings = fast_settings();
    assert!(!settings.service.enforce_walltime, "off by default");
    let (mut progress, stop) = start_with(client.clone(), settings);
    until(&mut progress, "the gang bound", |p| p.written.binds == 2).await;
    // Kubelet: the pods start (status.startTime).
    server.tick();
    let events = events_until(&client, "ml", 2, |e| {
        e.reason.as_deref() == Some("WalltimePassed")
    })
    .await;
    let mut about: Vec<String> = events
        .iter()
        .map(|e| e.involved_object.name.clone().unwrap_or_default())
        .collect();
    about.sort();
    assert_eq!(about, ["short-0", "short-1"]);
    for e in &events {
        let m = e.message.as_deref().unwrap_or_default();
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert!(
            m.starts_with("job ml/short ran ")
                && m.ends_with(
                    ", past its walltime 2s; it runs on (service.enforceWalltime is off), and reservations no longer count on its end"
                ),
            "{m}"
        );
    }
    let told = until(&mut progress, "the notices counted", |p| {
        p.walltime_notices == 2
    })
    .await;
    // Three cycles later: told once, nothing evicted.
    until(&mut progress, "three more cycles", |p| {
        p.cycles >= told.cycles + 3
    })
    .await;
    let done = *progress.borrow();
    assert_eq!((done.walltime_notices, done.walltime_evictions), (2, 0));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    for name in ["short-0", "short-1"] {
        let p = pods.get(name).await.expect("still there");
        assert!(p.metadata.deletion_timestamp.is_none(), "{p:?}");
    }
    stop.send_replace(true);
}
