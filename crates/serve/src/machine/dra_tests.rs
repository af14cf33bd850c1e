//! The machine with DRA claims: claim writes before binds in one unit,
//! assumed allocations, and a refused claim write retried as a gang.

use super::units::ExtendedClaim;
use serde_json::{Value, json};
use trainyard_cluster::usage::UsageHistory;
use trainyard_model::Timestamp;

use super::*;

/// Streams: Node 0, Pod 1, ResourceSlice 2, DeviceClass 3, ResourceClaim 4.
fn machine() -> Service {
    let mut settings = Settings::default();
    settings.service.leader_election.enabled = false;
    settings.service.store.checkpoint_seconds = 0;
    Service::new(Start {
        settings,
        streams: Streams::of([
            ("", "Node"),
            ("", "Pod"),
            ("resource.k8s.io", "ResourceSlice"),
            ("resource.k8s.io", "DeviceClass"),
            ("resource.k8s.io", "ResourceClaim"),
        ]),
        infer: false,
        history: UsageHistory::new(3600),
        journal: None,
        stopwatch: Box::new(|| 0),
        now: Timestamp(0),
    })
}

fn claim(name: &str, rv: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("u-{name}"),
                     "resourceVersion": rv},
        "spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "gpu"}}]}}})
}

fn pod(name: &str, claim: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("u-{name}")},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c"}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}})
}

/// One node with two GPUs published in a slice, the class, claims c1 and
/// c2, and pod p1 using c1.
fn list(m: &mut Service) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}}});
    let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "n1-gpu"},
        "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                 "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}});
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}});
    let lists: [(usize, Vec<Value>); 5] = [
        (0, vec![node]),
        (1, vec![pod("p1", "c1")]),
        (2, vec![slice]),
        (3, vec![class]),
        (4, vec![claim("c1", "5"), claim("c2", "6")]),
    ];
    for (stream, objects) in lists {
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

fn units(commands: Vec<Command>) -> Vec<Unit> {
    commands
        .into_iter()
        .filter_map(|c| match c {
            Command::Unit(u) => Some(u),
            _ => None,
        })
        .collect()
}

/// The devices the claim writes of `units` allocate, by claim.
fn allocated(units: &[Unit]) -> Vec<(String, String)> {
    units
        .iter()
        .flat_map(|u| u.writes.iter())
        .filter_map(|w| match w {
            Write::Claim(c) => Some(
                c.allocation
                    .iter()
                    .flatten()
                    .map(|d| (c.claim.clone(), d.device.to_string())),
            ),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn a_claim_is_written_before_its_pods_bind_in_one_unit_conditional_on_what_was_seen() {
    let mut m = machine();
    list(&mut m);
    let at = m.wake_at();
    let units = units(m.handle(Input::Tick, at));
    assert_eq!(units.len(), 1);
    let kinds: Vec<&str> = units[0]
        .writes
        .iter()
        .map(|w| match w {
            Write::Claim(_) => "claim",
            Write::Bind(_) => "bind",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["claim", "bind"]);
    let Write::Claim(c) = &units[0].writes[0] else {
        panic!("a claim first");
    };
    assert_eq!(c.claim, "ml/c1");
    assert_eq!(c.pods[0].uid, "u-p1");
    assert_eq!(units[0].claims["ml/c1"].resource_version, "5");
    assert_eq!(allocated(&units).len(), 1);
}

#[test]
fn an_assumed_allocation_keeps_its_device_from_the_next_cycle() {
    let mut m = machine();
    list(&mut m);
    let at = m.wake_at();
    let first = units(m.handle(Input::Tick, at));
    // Until the watch shows it, the claim is assumed allocated and
    // reserved for its pod.
    let snap = m.world.state.snapshot();
    let c1 = &snap.dra.claims["ml/c1"];
    let devices: Vec<&str> = c1
        .allocation
        .iter()
        .flat_map(|a| a.devices.iter().map(|d| &*d.device))
        .collect();
    assert_eq!(devices, [allocated(&first)[0].1.as_str()]);
    assert_eq!(c1.reserved_for, ["ml/p1"]);
    // The writes are in flight; p2 arrives; the watch has shown nothing.
    m.handle(
        Input::Watch(WorldEvent::Applied {
            stream: 1,
            object: pod("p2", "c2"),
        }),
        at,
    );
    let next = m.wake_at();
    let second = units(m.handle(Input::Tick, next));
    let (a, b) = (allocated(&first), allocated(&second));
    assert_eq!((a.len(), b.len()), (1, 1), "{a:?} {b:?}");
    assert_ne!(a[0].1, b[0].1, "one device in two claims");
}

#[test]
fn a_refused_claim_write_fails_its_binds_and_the_gang_is_decided_again() {
    let mut m = machine();
    list(&mut m);
    let at = m.wake_at();
    let unit = units(m.handle(Input::Tick, at)).remove(0);
    let conflict = Failure {
        reason: "conflict".into(),
        message: "409 Conflict: the object has been modified".into(),
        uncertain: false,
    };
    // As the writer reports it: the bind not made, then the claim.
    let [claim_write, bind] = [unit.writes[0].clone(), unit.writes[1].clone()];
    m.handle(
        Input::Written {
            unit: unit.id,
            write: bind,
            error: Some(Failure {
                reason: "claim_conflict".into(),
                ..conflict.clone()
            }),
        },
        at,
    );
    m.handle(
        Input::Written {
            unit: unit.id,
            write: claim_write,
            error: Some(conflict),
        },
        at,
    );
    assert_eq!(m.units.in_flight(), 0);
    // A fresher view of the claim arrives; the next cycle writes again,
    // on that version.
    m.handle(
        Input::Watch(WorldEvent::Applied {
            stream: 4,
            object: claim("c1", "9"),
        }),
        at,
    );
    let next = m.wake_at();
    let again = units(m.handle(Input::Tick, next));
    assert_eq!(again.len(), 1, "decided again");
    assert!(matches!(
        &again[0].writes[..],
        [Write::Claim(_), Write::Bind(_)]
    ));
    assert_eq!(again[0].claims["ml/c1"].resource_version, "9");
}

#[test]
fn a_pod_whose_template_claim_is_not_made_yet_waits() {
    let mut m = machine();
    list(&mut m);
    let template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "gpu"}}]}}}});
    m.world.state.apply(trainyard_cluster::Change::Object(
        trainyard_cluster::Decoded::object(&template, "t")
            .changes
            .remove(0),
    ));
    let mut p = pod("p3", "");
    p["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimTemplateName": "t"}]);
    m.handle(
        Input::Watch(WorldEvent::Applied {
            stream: 1,
            object: p,
        }),
        Timestamp(0),
    );
    let at = m.wake_at();
    let commands = m.handle(Input::Tick, at);
    let bound: Vec<String> = units(commands.clone())
        .iter()
        .flat_map(|u| u.writes.iter())
        .filter_map(|w| match w {
            Write::Bind(b) => Some(b.task.name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(bound, ["p1"]);
    let told = commands.iter().find_map(|c| match c {
        Command::Report { changes, .. } => changes
            .iter()
            .find(|(t, _)| t.name == "p3")
            .map(|(_, m)| m.clone()),
        _ => None,
    });
    let told = told.unwrap_or_default();
    assert!(
        told.contains("waiting for ResourceClaim ml/p3-gpu to be created from template ml/t"),
        "{told}"
    );
}

/// n1 with two GPUs in a slice and no `nvidia.com/gpu` allocatable, the
/// class serving `nvidia.com/gpu` from them, and pod `p1` asking one.
fn extended_list(m: &mut Service) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}}});
    let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "n1-gpu"},
        "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                 "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}});
    let class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}],
                 "extendedResourceName": "nvidia.com/gpu"}});
    let lists: [(usize, Vec<Value>); 5] = [
        (0, vec![node]),
        (1, vec![gpu_pod("p1")]),
        (2, vec![slice]),
        (3, vec![class]),
        (4, vec![]),
    ];
    for (stream, objects) in lists {
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

fn gpu_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("u-{name}")},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "main",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
}

#[test]
fn an_extended_resource_claim_is_created_before_the_bind_and_assumed_until_the_pod_names_it() {
    let mut m = machine();
    extended_list(&mut m);
    let at = m.wake_at();
    let first = units(m.handle(Input::Tick, at));
    assert_eq!(first.len(), 1);
    let [Write::Claim(c), Write::Bind(b)] = &first[0].writes[..] else {
        panic!("the claim, then the bind: {:?}", first[0].writes);
    };
    assert_eq!(c.claim, "ml/p1-extended-resources");
    assert_eq!(c.extended, ["nvidia.com/gpu"]);
    // The DRA GPU is placed as a GPU slot: the bind carries the slot,
    // and the claim the slot's device.
    assert_eq!((b.task.name.as_str(), b.gpus.len()), ("p1", 1));
    assert_eq!(
        first[0].extended["ml/p1-extended-resources"],
        ExtendedClaim {
            class: "gpu".into(),
            count: 1,
            mappings: vec![("main".into(), "nvidia.com/gpu".into())],
        }
    );
    let device = allocated(&first)[0].1.clone();
    // Until the watch shows it, the claim is laid over the world under the
    // decision's key, allocated and reserved for p1, and p1 holds it.
    let snap = m.world.state.snapshot();
    let assumed = &snap.dra.claims["ml/p1-extended-resources"];
    let devices: Vec<&str> = assumed
        .allocation
        .iter()
        .flat_map(|a| a.devices.iter().map(|d| &*d.device))
        .collect();
    assert_eq!(devices, [device.as_str()]);
    assert_eq!(assumed.reserved_for, ["ml/p1"]);

    // In flight, the watch showing nothing: p2 gets the other device.
    m.handle(
        Input::Watch(WorldEvent::Applied {
            stream: 1,
            object: gpu_pod("p2"),
        }),
        at,
    );
    let next = m.wake_at();
    let second = units(m.handle(Input::Tick, next));
    let again = allocated(&second);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].0, "ml/p2-extended-resources");
    assert_ne!(again[0].1, device, "one device in two claims");

    // The writes land; the watch shows p1's claim (named by the API),
    // allocated and reserved, and p1 bound naming it: the assumption goes,
    // and the device stays p1's.
    for w in first[0].writes.clone() {
        m.handle(
            Input::Written {
                unit: first[0].id,
                write: w,
                error: None,
            },
            next,
        );
    }
    let mut claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "p1-extended-resources-abcde", "namespace": "ml",
                     "uid": "u-c", "resourceVersion": "9",
                     "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"}},
        "spec": {"devices": {"requests": [{"name": "request-0",
            "exactly": {"deviceClassName": "gpu", "count": 1}}]}}});
    claim["status"] = json!({"allocation": {"devices": {"results": [{"request": "request-0",
        "driver": "gpu.example.com", "pool": "n1", "device": device}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
        "reservedFor": [{"resource": "pods", "name": "p1", "uid": "u-p1"}]});
    let mut bound = gpu_pod("p1");
    bound["spec"]["nodeName"] = json!("n1");
    bound["status"] = json!({"phase": "Running", "extendedResourceClaimStatus": {
        "resourceClaimName": "p1-extended-resources-abcde",
        "requestMappings": [{"containerName": "main", "resourceName": "nvidia.com/gpu",
            "requestName": "request-0"}]}});
    for (stream, object) in [(4, claim), (1, bound)] {
        m.handle(Input::Watch(WorldEvent::Applied { stream, object }), next);
    }
    let snap = m.world.state.snapshot();
    assert!(
        m.world
            .state
            .assumed_claims()
            .iter()
            .all(|a| a.write.claim != "ml/p1-extended-resources"),
        "p1's claim is shown"
    );
    assert!(!snap.dra.claims.contains_key("ml/p1-extended-resources"));
    let held = &snap.dra.claims["ml/p1-extended-resources-abcde"];
    let devices: Vec<&str> = held
        .allocation
        .iter()
        .flat_map(|a| a.devices.iter().map(|d| &*d.device))
        .collect();
    assert_eq!(devices, [device.as_str()]);
}

#[test]
fn a_failed_extended_claim_fails_the_bind_and_the_pod_is_decided_again() {
    let mut m = machine();
    extended_list(&mut m);
    let at = m.wake_at();
    let unit = units(m.handle(Input::Tick, at)).remove(0);
    let refused = Failure {
        reason: "forbidden".into(),
        message: "403 Forbidden: cannot create resourceclaims".into(),
        uncertain: false,
    };
    // As the writer reports it: the bind not made, then the claim (the
    // writer deleted what it had created).
    let [claim_write, bind] = [unit.writes[0].clone(), unit.writes[1].clone()];
    m.handle(
        Input::Written {
            unit: unit.id,
            write: bind,
            error: Some(Failure {
                reason: "claim_forbidden".into(),
                ..refused.clone()
            }),
        },
        at,
    );
    m.handle(
        Input::Written {
            unit: unit.id,
            write: claim_write,
            error: Some(refused),
        },
        at,
    );
    assert_eq!(m.units.in_flight(), 0);
    assert!(m.world.state.assumed_claims().is_empty());
    let next = m.wake_at();
    let again = units(m.handle(Input::Tick, next));
    assert_eq!(again.len(), 1, "decided again");
    assert!(matches!(
        &again[0].writes[..],
        [Write::Claim(c), Write::Bind(_)] if c.creates()
    ));
}
