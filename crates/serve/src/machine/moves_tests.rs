//! Consolidation's open moves across a restart: written into the
//! checkpoint by the cycle that moved, and held again by a replica that
//! reads it.

use serde_json::{Value, json};
use trainyard_model::Timestamp;

use super::*;

/// A leader with consolidation on and a checkpoint every hour.
fn machine() -> Service {
    let mut settings = Settings::default();
    settings.service.leader_election.enabled = false;
    settings.service.store.checkpoint_seconds = 3600;
    settings.scheduler.consolidation.enabled = true;
    super::tests::machine_with(settings)
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}}})
}

/// A running 2-GPU pod of ReplicaSet `rs` on `node`, devices 0 and 1.
fn running(name: &str, rs: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("u-{name}"),
            "annotations": {"trainyard.io/gpu-indices": "0,1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                "uid": format!("u-{rs}"), "controller": true}]},
        "spec": {"schedulerName": "trainyard", "nodeName": node, "containers": [{"name": "c",
            "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "2"}}}]},
        "status": {"phase": "Running", "startTime": "1970-01-01T00:00:00Z"}})
}

fn pending(name: &str, gpus: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("u-{name}")},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c",
            "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": gpus.to_string()}}}]}})
}

/// Lists two 8-GPU nodes and `pods`.
fn list(m: &mut Service, pods: Vec<Value>) {
    for (stream, objects) in [(0, vec![node("n1"), node("n2")]), (1, pods)] {
        assert!(
            m.handle(Input::Watch(WorldEvent::ListStart { stream }), Timestamp(0))
                .is_empty()
        );
        for object in objects {
            m.handle(
                Input::Watch(WorldEvent::Applied { stream, object }),
                Timestamp(0),
            );
        }
        m.handle(Input::Watch(WorldEvent::ListDone { stream }), Timestamp(0));
    }
}

/// Ticks until the checkpoint is asked, answers `ck`, and ticks the
/// first cycle: its commands.
fn first_cycle(
    m: &mut Service,
    ck: Option<crate::checkpoint::Checkpoint>,
    at: Timestamp,
) -> Vec<Command> {
    let asked = m.handle(Input::Tick, at);
    assert!(
        asked.iter().any(|c| matches!(c, Command::ReadCheckpoint)),
        "the checkpoint is read first"
    );
    m.handle(Input::CheckpointRead(Ok(ck)), at);
    m.handle(Input::Tick, at)
}

/// The writes of a cycle's units: (kind, pod, node).
fn writes(commands: &[Command]) -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    for c in commands {
        if let Command::Unit(u) = c {
            for w in &u.writes {
                match w {
                    Write::Bind(b) => out.push(("bind", b.task.name.clone(), b.node.to_string())),
                    Write::Evict(e) => out.push(("evict", e.task.name.clone(), e.node.to_string())),
                    _ => {}
                }
            }
        }
    }
    out
}

#[test]
fn open_moves_are_checkpointed_at_once_and_held_after_a_restart() {
    // The move: eval-a-0 from n1 to n2, for train (scenario 83's case).
    let mut old = machine();
    list(
        &mut old,
        vec![
            running("eval-a-0", "eval-a", "n1"),
            running("eval-b-0", "eval-b", "n2"),
        ],
    );
    let start = Timestamp(3_600_000);
    let quiet = first_cycle(&mut old, None, start);
    assert!(
        quiet
            .iter()
            .any(|c| matches!(c, Command::WriteCheckpoint(_))),
        "the first checkpoint"
    );
    old.handle(Input::CheckpointWritten(Ok(())), start);
    // train comes; the next cycle moves, well within the hour's interval.
    old.handle(
        Input::Watch(WorldEvent::Applied {
            stream: 1,
            object: pending("train", 8),
        }),
        start,
    );
    let t0 = old.wake_at();
    let commands = old.handle(Input::Tick, t0);
    let evicted: Vec<_> = writes(&commands)
        .into_iter()
        .filter(|w| w.0 == "evict")
        .collect();
    assert_eq!(evicted.len(), 1, "one pod moved: {evicted:?}");
    let (from, to) = if evicted[0].2 == "n1" {
        ("n1", "n2")
    } else {
        ("n2", "n1")
    };
    let ck = commands
        .iter()
        .find_map(|c| match c {
            Command::WriteCheckpoint(ck) => Some((**ck).clone()),
            _ => None,
        })
        .expect("the cycle that moved writes the checkpoint at once");
    assert_eq!(ck.moves.open(), 1);
    // It goes through the ConfigMap's text.
    let text = ck.to_text("checkpoint").expect("fits");
    let ck: crate::checkpoint::Checkpoint = serde_json::from_str(&text).expect("reads back");

    // A new leader, 20 s later: the moved pod is gone, its replacement
    // not there yet; train waits; greedy (6 GPUs) would fit the
    // destination only on the held devices.
    let stays = if from == "n1" {
        running("eval-b-0", "eval-b", "n2")
    } else {
        running("eval-a-0", "eval-a", "n1")
    };
    let world = || vec![stays.clone(), pending("train", 8), pending("greedy", 6)];
    let t1 = Timestamp(t0.0 + 20_000);
    let mut new = machine();
    list(&mut new, world());
    let binds = writes(&first_cycle(&mut new, Some(ck), t1));
    assert!(
        !binds
            .iter()
            .any(|(k, pod, node)| *k == "bind" && pod == "greedy" && node == to),
        "greedy took the room held for the moved job: {binds:?}"
    );
    // Without the checkpoint's moves, it would.
    let mut forgetful = machine();
    list(&mut forgetful, world());
    let binds = writes(&first_cycle(&mut forgetful, None, t1));
    assert!(
        binds
            .iter()
            .any(|(k, pod, node)| *k == "bind" && pod == "greedy" && node == to),
        "{binds:?}"
    );
}
