//! What users read of the live state follows the pods (issue 43): a
//! Queue's status and gauges after its last pod is gone, a PodGroup's
//! phase once its pods are all deleted or preempted, and transition times
//! that survive a restart. Read from the API objects through kube-rs.

mod common;

use common::*;
use kube::Client;
use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use tokio::sync::watch;
use trainyard_serve::Progress;

async fn queue_status(client: &Client, name: &str) -> Value {
    let queues: Api<DynamicObject> = Api::all_with(client.clone(), &trainyard("Queue", "queues"));
    queues.get(name).await.expect("queue").data["status"].clone()
}

async fn group_status(client: &Client, name: &str) -> Value {
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "ml", &trainyard("PodGroup", "podgroups"));
    groups.get(name).await.expect("group").data["status"].clone()
}

/// Reads `read` after each cycle until `done` holds (at most 200 cycles):
/// the status is written after the cycle that computed it.
async fn until_read(
    progress: &mut watch::Receiver<Progress>,
    what: &str,
    read: impl AsyncFn() -> Value,
    done: impl Fn(&Value) -> bool,
) -> Value {
    for _ in 0..200 {
        let v = read().await;
        if done(&v) {
            return v;
        }
        let c = progress.borrow().cycles;
        until(progress, what, |p| p.cycles > c).await;
    }
    panic!("{what}: never held; last read: {}", read().await);
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_and_group_status_follow_the_pods_when_they_are_gone_and_after_a_restart() {
    if skip_on_cluster("the status test", "the test server's manual kubelet") {
        return;
    }
    let (env, client) = env().await;
    cluster(&client).await;
    gang(&client, "train", "team", 2, 4).await;
    let (mut progress, stop) = start(client.clone());
    until(&mut progress, "the gang's binds", |p| p.written.binds == 2).await;
    env.tick();
    let q = until_read(
        &mut progress,
        "the queue's allocation",
        || queue_status(&client, "team"),
        |s| s["allocated"]["nvidia.com/gpu"] == "8" && s["runningJobs"] == 1,
    )
    .await;
    assert_eq!(q["allocated"]["cpu"], Value::Null, "{q}");
    // Jobs that name no queue run in `default`, a Queue `kubectl get tyq`
    // lists (created by the service as it started), with a status.
    let d = until_read(
        &mut progress,
        "the default queue",
        || async {
            let queues: Api<DynamicObject> =
                Api::all_with(client.clone(), &trainyard("Queue", "queues"));
            match queues.get_opt("default").await.expect("a get") {
                Some(q) => q.data["status"].clone(),
                None => Value::Null,
            }
        },
        |s| s.is_object(),
    )
    .await;
    assert_eq!(condition(&d, "Ready")["status"], "True", "{d}");
    until_read(
        &mut progress,
        "the group running",
        || group_status(&client, "train"),
        |s| s["phase"] == "Running" && s["running"] == 2,
    )
    .await;

    // Every pod deleted (not by Trainyard): the queue holds nothing, the
    // group says its pods were deleted.
    env.delete("Pod", "ml", "train-0").await;
    env.delete("Pod", "ml", "train-1").await;
    env.tick();
    let q = until_read(
        &mut progress,
        "the queue emptied",
        || queue_status(&client, "team"),
        |s| s["runningJobs"] == 0 && s["allocated"]["nvidia.com/gpu"] == "0",
    )
    .await;
    assert_eq!(
        q["allocated"],
        json!({"nvidia.com/gpu": "0"}),
        "nothing of the old allocation is left: {q}"
    );
    assert_eq!(q["requested"]["nvidia.com/gpu"], "0", "{q}");
    let g = until_read(
        &mut progress,
        "the group's pods gone",
        || group_status(&client, "train"),
        |s| s["phase"] == "Deleted",
    )
    .await;
    assert_eq!(
        (g["scheduled"].as_u64(), g["running"].as_u64()),
        (Some(0), Some(0)),
        "{g}"
    );
    assert_eq!(condition(&g, "Scheduled")["reason"], "Deleted", "{g}");
    let ready_since = condition(&q, "Ready")["lastTransitionTime"].clone();
    let deleted_since = g["phaseTransitionTime"].clone();
    let cycles = progress.borrow().cycles;
    until(&mut progress, "a few more cycles", |p| {
        p.cycles >= cycles + 3
    })
    .await;
    stop.send_replace(true);

    // A new process reads the statuses back: nothing changed, nothing
    // moves, the times are those of the change.
    let (mut progress, stop) = start(client.clone());
    let after = until(&mut progress, "five cycles of the new process", |p| {
        p.cycles >= 5
    })
    .await;
    assert_eq!(
        (after.queue_statuses, after.group_statuses),
        (0, 0),
        "a restart rewrites no status that did not change: {after:?}"
    );
    let q = queue_status(&client, "team").await;
    let g = group_status(&client, "train").await;
    assert_eq!(
        condition(&q, "Ready")["lastTransitionTime"],
        ready_since,
        "{q}"
    );
    assert_eq!(g["phase"], "Deleted", "{g}");
    assert_eq!(g["phaseTransitionTime"], deleted_since, "{g}");

    // A group created without pods waits for them, and says so.
    create(
        &client,
        &trainyard("PodGroup", "podgroups"),
        Some("ml"),
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
               "metadata": {"name": "empty", "namespace": "ml"},
               "spec": {"queue": "team", "minMember": 2}}),
    )
    .await;
    let e = until_read(
        &mut progress,
        "the empty group's status",
        || group_status(&client, "empty"),
        |s| s["phase"].is_string(),
    )
    .await;
    assert_eq!(e["phase"], "Pending", "{e}");
    assert_eq!(
        condition(&e, "Scheduled")["reason"],
        "WaitingForPods",
        "{e}"
    );
    stop.send_replace(true);
}

async fn queue(client: &Client, name: &str, spec: Value) {
    create(
        client,
        &trainyard("Queue", "queues"),
        None,
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
               "metadata": {"name": name}, "spec": spec}),
    )
    .await;
}

async fn scheduled_message(client: &Client, pod: &str) -> String {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "ml");
    let p = pods.get(pod).await.expect("pod");
    p.status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .and_then(|c| c.message)
        .unwrap_or_default()
}

/// Queues the API accepted but the tree cannot use, present when the
/// service starts: each is left out with its reason (Ready=False, a
/// metric, its jobs told why), and every other queue is scheduled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_queue_is_reported_and_never_stops_the_others() {
    let (_env, client) = env().await;
    cluster(&client).await;
    queue(
        &client,
        "loop-a",
        json!({"parent": "loop-b", "quota": {"nvidia.com/gpu": 1}}),
    )
    .await;
    queue(
        &client,
        "loop-b",
        json!({"parent": "loop-a", "quota": {"nvidia.com/gpu": 1}}),
    )
    .await;
    queue(
        &client,
        "orphan",
        json!({"parent": "no-such-org", "quota": {"nvidia.com/gpu": 1}}),
    )
    .await;
    // Children promised more than their parent holds.
    queue(&client, "org", json!({"quota": {"nvidia.com/gpu": 4}})).await;
    queue(
        &client,
        "kid-1",
        json!({"parent": "org", "quota": {"nvidia.com/gpu": 4}}),
    )
    .await;
    queue(
        &client,
        "kid-2",
        json!({"parent": "org", "quota": {"nvidia.com/gpu": 4}}),
    )
    .await;
    gang(&client, "good", "team", 2, 4).await;
    gang(&client, "looped", "loop-a", 1, 1).await;

    let metrics = std::sync::Arc::new(trainyard_serve::metrics::Metrics::new());
    let mut svc = spawn_service(
        client.clone(),
        fast_settings(),
        metrics.clone(),
        trainyard_serve::reload::Own::default(),
    );
    until(&mut svc.progress, "the valid queue's gang bound", |p| {
        p.written.binds == 2
    })
    .await;

    for (name, words) in [
        ("loop-a", "cycle"),
        ("loop-b", "cycle"),
        ("orphan", "no-such-org"),
        ("org", "quota"),
        ("kid-1", "parent queue \"org\" is excluded"),
    ] {
        let s = until_read(
            &mut svc.progress,
            "the invalid queue's status",
            || queue_status(&client, name),
            |s| condition(s, "Ready")["status"] == "False",
        )
        .await;
        let ready = condition(&s, "Ready");
        assert_eq!(ready["reason"], "Invalid", "{name}: {s}");
        let message = ready["message"].as_str().unwrap_or("");
        assert!(message.contains(words), "{name}: {message}");
    }
    let team = queue_status(&client, "team").await;
    assert_eq!(condition(&team, "Ready")["status"], "True", "{team}");

    let message = scheduled_message(&client, "looped-0").await;
    assert!(
        message.contains("queue \"loop-a\" is invalid") && message.contains("cycle"),
        "the job says why its queue is not scheduled: {message}"
    );
    let text = metrics.prometheus_text();
    for name in ["loop-a", "loop-b", "orphan", "org", "kid-1", "kid-2"] {
        assert!(
            text.contains(&format!("trainyard_queue_invalid{{queue=\"{name}\"}} 1")),
            "{name} counted as invalid:\n{text}"
        );
    }
    assert!(
        !text.contains("trainyard_queue_invalid{queue=\"team\"}"),
        "{text}"
    );
    svc.stop.send_replace(true);
}

/// A gang with priority `class` whose PodGroup names it: `pods` pods of
/// 8 GPUs in queue `team`.
async fn ranked_gang(client: &Client, name: &str, class: &str, pods: u32) {
    create(
        client,
        &trainyard("PodGroup", "podgroups"),
        Some("ml"),
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
               "metadata": {"name": name, "namespace": "ml"},
               "spec": {"queue": "team", "minMember": pods, "priorityClassName": class}}),
    )
    .await;
    let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "ml");
    for i in 0..pods {
        let p = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-{i}"), "namespace": "ml",
                         "labels": {"trainyard.io/pod-group": name}},
            "spec": {"schedulerName": "trainyard", "priorityClassName": class,
                     "containers": [{"name": "c", "image": "train:1",
                     "resources": {"requests": {"nvidia.com/gpu": "8"},
                                   "limits": {"nvidia.com/gpu": "8"}}}]}
        }))
        .expect("pod");
        api.create(&kube::api::PostParams::default(), &p)
            .await
            .expect("pod created");
    }
}

/// A gang preempted whole says so once its pods are gone: phase
/// `Preempted`, counts 0, an `Evicted` condition naming the rule and the
/// job that took the room (today it kept `Running 2/2` for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_preempted_whole_says_it_was_preempted() {
    if skip_on_cluster(
        "the preemption status test",
        "the test server's manual kubelet",
    ) {
        return;
    }
    let (env, client) = env().await;
    cluster(&client).await;
    let classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(client.clone());
    for (name, value) in [("low", 50), ("high", 1000)] {
        let pc = serde_json::from_value(json!({"metadata": {"name": name}, "value": value}))
            .expect("class");
        classes
            .create(&kube::api::PostParams::default(), &pc)
            .await
            .expect("class created");
    }
    ranked_gang(&client, "low", "low", 2).await;
    let (mut progress, stop) = start(client.clone());
    until(&mut progress, "the low gang bound", |p| {
        p.written.binds == 2
    })
    .await;
    env.tick();
    until_read(
        &mut progress,
        "the low gang running",
        || group_status(&client, "low"),
        |s| s["phase"] == "Running",
    )
    .await;

    ranked_gang(&client, "high", "high", 2).await;
    until(&mut progress, "the low gang evicted", |p| {
        p.written.evictions >= 2
    })
    .await;
    env.tick();
    env.tick();
    let g = until_read(
        &mut progress,
        "the low gang's status after its pods went",
        || group_status(&client, "low"),
        |s| s["phase"] != "Running" && s["phase"] != "Evicting",
    )
    .await;
    assert_eq!(g["phase"], "Preempted", "{g}");
    assert_eq!(
        (g["scheduled"].as_u64(), g["running"].as_u64()),
        (Some(0), Some(0)),
        "{g}"
    );
    let evicted = condition(&g, "Evicted");
    assert_eq!(evicted["reason"], "Preempted", "{g}");
    assert!(
        evicted["message"]
            .as_str()
            .unwrap_or("")
            .contains("ml/high"),
        "names the job that took the room: {g}"
    );
    stop.send_replace(true);
}
