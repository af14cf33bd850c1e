//! The upstream PodGroups through the machine: watch events in, status
//! patches out.

use serde_json::{Value, json};
use trainyard_cluster::usage::UsageHistory;
use trainyard_model::Timestamp;

use super::*;

/// A machine over Node (0), Pod (1) and the upstream PodGroup (2) in
/// `version`.
fn machine(version: &str) -> Service {
    let mut settings = Settings::default();
    settings.service.leader_election.enabled = false;
    settings.service.store.checkpoint_seconds = 0;
    Service::new(Start {
        settings,
        streams: Streams::of_versioned([
            ("", "v1", "Node"),
            ("", "v1", "Pod"),
            ("scheduling.k8s.io", version, "PodGroup"),
        ]),
        infer: false,
        history: UsageHistory::new(3600),
        journal: None,
        stopwatch: Box::new(|| 0),
        now: Timestamp(0),
    })
}

fn group(name: &str, min: u32, status: Value) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
           "metadata": {"name": name, "namespace": "ml", "generation": 2},
           "spec": {"schedulingPolicy": {"gang": {"minCount": min}}},
           "status": status})
}

/// A pod of `group` (named both ways: the upstream field, and Trainyard's
/// label, so that this worktree's reader makes the job `ml/<group>`).
fn pod(name: &str, group: &str, scheduler: &str, node: Option<&str>, gpus: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "ml", "uid": format!("u-{name}"),
                        "labels": {"trainyard.io/pod-group": group}},
           "spec": {"schedulerName": scheduler, "nodeName": node,
                    "schedulingGroup": {"podGroupName": group},
                    "containers": [{"name": "c",
                        "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()}}}]},
           "status": {"phase": if node.is_some() { "Running" } else { "Pending" }}})
}

fn list(m: &mut Service, streams: [Vec<Value>; 3]) {
    for (stream, objects) in streams.into_iter().enumerate() {
        m.handle(Input::Watch(WorldEvent::ListStart { stream }), Timestamp(0));
        for object in objects {
            m.handle(
                Input::Watch(WorldEvent::Applied { stream, object }),
                Timestamp(0),
            );
        }
        m.handle(Input::Watch(WorldEvent::ListDone { stream }), Timestamp(0));
    }
}

fn node() -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}}})
}

/// The upstream status patches of a tick, as `group: type=status reason`.
fn patches(commands: &[Command]) -> Vec<(String, Value)> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::Statuses {
                kind: StatusKind::UpstreamPodGroup,
                changes,
            } => Some(changes.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

fn said(p: &[(String, Value)]) -> Vec<String> {
    p.iter()
        .flat_map(|(id, patch)| {
            patch["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |c| {
                    format!(
                        "{id}: {}={} {} (gen {})",
                        c["type"].as_str().unwrap_or(""),
                        c["status"].as_str().unwrap_or(""),
                        c["reason"].as_str().unwrap_or(""),
                        c["observedGeneration"]
                    )
                })
        })
        .collect()
}

#[test]
fn streams_know_the_upstream_kinds_only_with_their_version() {
    let s = Streams::of_versioned([
        ("", "v1", "Pod"),
        ("trainyard.io", "v1alpha1", "PodGroup"),
        ("scheduling.k8s.io", "v1alpha2", "PodGroup"),
        ("scheduling.k8s.io", "v1alpha2", "Workload"),
    ]);
    assert_eq!(
        (s.group, s.upstream_group, s.upstream_workload),
        (Some(1), Some(2), Some(3))
    );
    assert_eq!(s.upstream, Some(UpstreamVersion::V1Alpha2));
    let plain = Streams::of([("scheduling.k8s.io", "PodGroup")]);
    assert_eq!((plain.upstream_group, plain.upstream), (None, None));
}

#[test]
fn trainyards_groups_get_their_conditions_and_kube_schedulers_none() {
    let mut m = machine("v1beta1");
    let foreign = json!({"type": "example.com/Checked", "status": "True", "reason": "X",
                         "message": "another writer's", "lastTransitionTime": "t0"});
    list(
        &mut m,
        [
            vec![node()],
            vec![
                pod("a", "train", "trainyard", Some("n1"), 1),
                pod("b", "train", "trainyard", Some("n1"), 1),
                pod("w", "wide", "trainyard", None, 16),
                pod("k", "kube", "default-scheduler", None, 1),
            ],
            vec![
                group("train", 2, json!({"conditions": [foreign.clone()]})),
                group("wide", 1, json!({})),
                group("kube", 1, json!({})),
            ],
        ],
    );
    let at = m.wake_at();
    let first = patches(&m.handle(Input::Tick, at));
    expect_test::expect![[r#"
        [
            "ml/train: example.com/Checked=True X (gen null)",
            "ml/train: PodGroupInitiallyScheduled=True Scheduled (gen 2)",
            "ml/wide: PodGroupInitiallyScheduled=False Unschedulable (gen 2)",
        ]
    "#]]
    .assert_debug_eq(&said(&first));
    assert_eq!(m.progress().upstream_statuses, 2);

    // Nothing changed: nothing written.
    let at = m.wake_at();
    assert!(patches(&m.handle(Input::Tick, at)).is_empty());

    // A failed write is written again.
    m.handle(
        Input::StatusFailed {
            kind: StatusKind::UpstreamPodGroup,
            keys: vec!["ml/wide".into()],
        },
        at,
    );
    let at = m.wake_at();
    let again = patches(&m.handle(Input::Tick, at));
    assert_eq!(
        again.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["ml/wide"]
    );
}

#[test]
fn a_new_leader_writes_nothing_the_api_shows_and_v1beta1_stays_true() {
    let mut m = machine("v1beta1");
    // Written by the last leader: True. Its pods are gone since, and the
    // group waits again: it stays True.
    let shown = json!({"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True",
        "reason": "Scheduled", "message": "2 pods bound of minCount 2",
        "lastTransitionTime": "t0", "observedGeneration": 2}]});
    list(
        &mut m,
        [
            vec![node()],
            vec![pod("a", "train", "trainyard", None, 16)],
            vec![group("train", 1, shown)],
        ],
    );
    let at = m.wake_at();
    assert!(patches(&m.handle(Input::Tick, at)).is_empty());

    // In v1alpha2 the same group reads False again.
    let mut m = machine("v1alpha2");
    let shown = json!({"conditions": [{"type": "PodGroupScheduled", "status": "True",
        "reason": "Scheduled", "message": "x", "lastTransitionTime": "t0"}]});
    list(
        &mut m,
        [
            vec![node()],
            vec![pod("a", "train", "trainyard", None, 16)],
            vec![group("train", 1, shown)],
        ],
    );
    let at = m.wake_at();
    expect_test::expect![[r#"
        [
            "ml/train: PodGroupScheduled=False Unschedulable (gen 2)",
        ]
    "#]]
    .assert_debug_eq(&said(&patches(&m.handle(Input::Tick, at))));
}
