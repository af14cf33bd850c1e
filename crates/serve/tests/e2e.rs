//! The service end to end against the test API server: objects go in
//! through kube-rs, the service watches, schedules and binds, and the test
//! reads the outcome from the API objects (not from the service's state).

mod common;

use std::collections::BTreeSet;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_and_dropped_watches_lose_nothing_and_bind_nothing_twice() {
    if skip_on_cluster("the restart test", "cut watches and forced 410s") {
        return;
    }
    let (server, client) = server().await;
    cluster(&client).await;
    gang(&client, "first", "team", 2, 4).await;
    let (mut progress, stop) = start(client.clone());
    until(&mut progress, "the first gang's binds", |p| {
        p.written.binds == 2
    })
    .await;
    stop.send_replace(true);

    // A new scheduler process: it learns the first gang's binds from the
    // API, not from memory; its watches are cut and its lists expire.
    let (mut progress, _stop) = start(client.clone());
    until(&mut progress, "a cycle of the new scheduler", |p| {
        p.cycles >= 1
    })
    .await;
    server.drop_watches();
    server.force_410(2);
    gang(&client, "second", "team", 2, 4).await;
    let bound = until(&mut progress, "the second gang's binds", |p| {
        p.written.binds == 2
    })
    .await;
    let later = bound.cycles + 3;
    let end = until(&mut progress, "three more cycles", |p| p.cycles >= later).await;
    assert_eq!((end.written.binds, end.written.failed), (2, 0), "{end:?}");

    let placed = placements(&client).await;
    let names: BTreeSet<&str> = placed.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from(["first-0", "first-1", "second-0", "second-1"])
    );
    devices_distinct(&placed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_fits_binds_whole_and_one_that_does_not_binds_nothing() {
    let (_env, client) = env().await;
    cluster(&client).await;
    gang(&client, "fits", "team", 4, 4).await;
    gang(&client, "too-big", "team", 3, 8).await;
    gang(&client, "single", "team", 1, 0).await;
    let history = PodHistory::start(&client).await;

    let (mut progress, stop) = start(client.clone());
    let bound = until(&mut progress, "the fitting gang's binds", |p| {
        p.written.binds == 5
    })
    .await;
    // A few more cycles: nothing else may be bound, nothing twice.
    let later = bound.cycles + 3;
    let end = until(
        &mut progress,
        "three more cycles and the bound gang's status",
        |p| p.cycles >= later && p.group_statuses >= 3,
    )
    .await;
    assert_eq!(end.written.binds, 5, "{end:?}");
    assert_eq!(end.written.failed, 0, "{end:?}");

    let placed = placements(&client).await;
    let names: BTreeSet<&str> = placed.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from(["fits-0", "fits-1", "fits-2", "fits-3", "single-0"])
    );
    for (name, (_, gpus)) in &placed {
        let want = if name.starts_with("fits") { 4 } else { 0 };
        assert_eq!(gpus.len(), want, "{placed:?}");
    }
    devices_distinct(&placed);

    // Each member of the gang was nominated to its node before it was
    // bound there (autoscalers keep nominated nodes); the lone pod was
    // bound straight away.
    let seen = history.events();
    for (name, (node, _)) in &placed {
        let first_nominated = seen
            .iter()
            .position(|(n, nominated, _)| n == name && nominated.as_ref() == Some(node));
        let first_bound = seen
            .iter()
            .position(|(n, _, bound)| n == name && bound.is_some());
        if name.starts_with("fits") {
            let (Some(nominated), Some(bound)) = (first_nominated, first_bound) else {
                panic!("{name}: nominated {first_nominated:?}, bound {first_bound:?} in {seen:?}");
            };
            assert!(
                nominated < bound,
                "{name} bound before its nomination: {seen:?}"
            );
        } else {
            assert_eq!(first_nominated, None, "{name}: {seen:?}");
        }
    }

    // The gang that does not fit: every pod says why, once.
    assert_eq!(end.reports, 3, "{end:?}");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let waiting = pods.get("too-big-0").await.expect("pod");
    let condition = waiting
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("a PodScheduled condition");
    assert_eq!(condition.status, "False");
    assert_eq!(condition.reason.as_deref(), Some("Unschedulable"));
    let message = condition.message.unwrap_or_default();
    assert!(message.contains("gang"), "{message}");
    events_until(&client, "ml", 1, |e| {
        e.reason.as_deref() == Some("FailedScheduling")
            && e.involved_object.name.as_deref() == Some("too-big-0")
    })
    .await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "ml");
    let failed: Vec<_> = events
        .list(&ListParams::default().fields("involvedObject.name=too-big-0"))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
        .collect();
    assert_eq!(failed.len(), 1, "one event while the reason stays the same");
    let scheduled = events_until(&client, "ml", 1, |e| {
        e.reason.as_deref() == Some("Scheduled")
            && e.involved_object.name.as_deref() == Some("fits-0")
    })
    .await;
    assert_eq!(scheduled.len(), 1, "{scheduled:?}");
    let node = &placed["fits-0"].0;
    assert_eq!(
        scheduled[0].message.as_deref(),
        Some(format!("Successfully assigned ml/fits-0 to {node}").as_str())
    );
    assert_eq!(failed[0].message.as_deref(), Some(message.as_str()));

    // The queue's status, as `kubectl get tyq` shows it.
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &trainyard("Queue", "queues"));
    let team = queues.get("team").await.expect("queue");
    let status = &team.data["status"];
    assert_eq!(status["allocated"]["nvidia.com/gpu"], "16", "{status}");
    assert_eq!(status["fairShare"]["nvidia.com/gpu"], "16", "{status}");
    assert_eq!(status["runningJobs"], 2, "{status}");
    assert_eq!(status["pendingJobs"], 1, "{status}");
    assert!(end.queue_statuses >= 1, "{end:?}");
    let ready = status["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == "Ready"))
        .expect("a Ready condition");
    assert_eq!(ready["status"], "True", "{status}");

    // The PodGroups' status, as `kubectl get typg` shows it.
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "ml", &trainyard("PodGroup", "podgroups"));
    let fits = groups.get("fits").await.expect("group");
    let s = &fits.data["status"];
    if cluster_kubeconfig().is_none() {
        assert_eq!(s["phase"], "Scheduled", "bound, not yet running: {s}");
    } else {
        // A real cluster's kubelets may have started them already.
        assert!(s["phase"] == "Scheduled" || s["phase"] == "Running", "{s}");
    }
    assert_eq!(s["scheduled"], 4, "{s}");
    assert_eq!(s["conditions"][0]["type"], "Scheduled", "{s}");
    assert_eq!(s["conditions"][0]["status"], "True", "{s}");
    let too_big = groups.get("too-big").await.expect("group");
    let s = &too_big.data["status"];
    assert_eq!(s["phase"], "Pending", "{s}");
    assert_eq!(s["conditions"][0]["status"], "False", "{s}");
    assert_eq!(s["conditions"][0]["reason"], "Unschedulable", "{s}");
    assert_eq!(s["conditions"][0]["message"], message.as_str(), "{s}");
    assert!(end.group_statuses >= 2, "{end:?}");
    stop.send_replace(true);
}
