//! The machine driven by hand: inputs in, commands checked.

use serde_json::json;
use trainyard_cluster::usage::UsageHistory;
use trainyard_model::Timestamp;

use super::*;

/// A machine over the streams Node (0) and Pod (1); election as given.
fn machine(elected: bool) -> Service {
    let mut settings = Settings::default();
    settings.service.leader_election.enabled = elected;
    settings.service.store.checkpoint_seconds = 0;
    machine_with(settings)
}

/// A machine with `settings` over the streams Node (0) and Pod (1).
pub(super) fn machine_with(settings: Settings) -> Service {
    Service::new(Start {
        settings,
        streams: Streams::of([("", "Node"), ("", "Pod")]),
        infer: false,
        history: UsageHistory::new(3600),
        journal: None,
        stopwatch: Box::new(|| 0),
        now: Timestamp(0),
    })
}

/// Lists one 8-GPU node and one pending 1-GPU pod of ours.
fn list(m: &mut Service) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "uid": "u-p"},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c",
            "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}});
    for (stream, object) in [(0, node), (1, pod)] {
        let events = [
            WorldEvent::ListStart { stream },
            WorldEvent::Applied { stream, object },
            WorldEvent::ListDone { stream },
        ];
        for e in events {
            assert!(m.handle(Input::Watch(e), Timestamp(0)).is_empty());
        }
    }
}

/// Ticks at `at`; the first write of the first unit (its unit's id).
fn first_write(m: &mut Service, at: Timestamp) -> (u64, Write) {
    let commands = m.handle(Input::Tick, at);
    let Some(Command::Unit(unit)) = commands.iter().find(|c| matches!(c, Command::Unit(_))) else {
        panic!("no bind");
    };
    (unit.id, unit.writes[0].clone())
}

fn binds(commands: &[Command]) -> Vec<String> {
    commands
        .iter()
        .filter_map(|c| match c {
            Command::Unit(u) => Some(u.writes.iter().map(|w| w.task().name.clone())),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn a_replica_without_the_lease_never_writes() {
    let mut m = machine(true);
    list(&mut m);
    let at = m.wake_at();
    assert!(binds(&m.handle(Input::Tick, at)).is_empty(), "role unknown");
    m.handle(Input::Role(Role::Standby), at);
    let at = m.wake_at();
    assert!(binds(&m.handle(Input::Tick, at)).is_empty(), "standby");
    let leading = m.handle(Input::Role(Role::Leader), at);
    assert!(matches!(leading[..], [Command::Leading(true)]));
    let at = m.wake_at();
    assert_eq!(binds(&m.handle(Input::Tick, at)), ["p"], "leader");
}

#[test]
fn an_accepted_bind_holds_its_room_past_the_assume_timeout() {
    let mut m = machine(false);
    list(&mut m);
    let at = m.wake_at();
    let (id, write) = first_write(&mut m, at);
    m.handle(
        Input::Written {
            unit: id,
            write,
            error: None,
        },
        at,
    );
    // Long after the assume timeout, the watch still silent: the pod is
    // not decided again.
    let later = Timestamp(at.0 + 120_000);
    assert!(binds(&m.handle(Input::Tick, later)).is_empty());
}

#[test]
fn a_bind_refused_is_decided_again_and_one_without_answer_is_not() {
    let refused = Failure {
        reason: "conflict".into(),
        message: "409 Conflict".into(),
        uncertain: false,
    };
    let lost = Failure {
        reason: "transport".into(),
        message: "timed out".into(),
        uncertain: true,
    };
    for (failure, again) in [(refused, true), (lost, false)] {
        let mut m = machine(false);
        list(&mut m);
        let at = m.wake_at();
        let (id, write) = first_write(&mut m, at);
        m.handle(
            Input::Written {
                unit: id,
                write,
                error: Some(failure.clone()),
            },
            at,
        );
        let next = m.wake_at();
        let decided = !binds(&m.handle(Input::Tick, next)).is_empty();
        assert_eq!(decided, again, "{}", failure.reason);
    }
}

#[test]
fn a_bind_refused_as_already_assigned_names_the_node() {
    let f = Failure {
        reason: "conflict".into(),
        message: r#"Operation cannot be fulfilled on pods "p": pod p is already assigned to node "gpu-3""#.into(),
        uncertain: false,
    };
    assert_eq!(f.assigned_to(), Some("gpu-3"));
    let other = Failure {
        message: "409 Conflict: the object has been modified".into(),
        ..f
    };
    assert_eq!(other.assigned_to(), None);
}
