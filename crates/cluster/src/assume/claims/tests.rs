//! Claims assumed over the world until it shows them.

use serde_json::{Value, json};
use trainyard_model::dra::AllocatedDevice;
use trainyard_model::{TaskKey, Timestamp};
use trainyard_sched::{Bind, ClaimDecision, Decisions};

use crate::{Change, ClusterState, Decoded, Write};

fn apply(s: &mut ClusterState, object: Value) {
    for c in Decoded::object(&object, "t").changes {
        s.apply(Change::Object(c));
    }
}

fn claim(name: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("u-{name}")},
        "spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "gpu"}}]}}})
}

fn pod(name: &str, claim: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "uid": format!("u-{name}")},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c"}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}})
}

fn key(name: &str) -> TaskKey {
    TaskKey {
        namespace: "ml".into(),
        name: name.into(),
        uid: format!("u-{name}"),
    }
}

/// One node with gpu-0 and gpu-1, claims c1 and c2, pod p1 (claim c1).
fn world() -> ClusterState {
    let mut s = ClusterState::for_objects(trainyard_ingest::LoadOptions::default());
    apply(
        &mut s,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}}}),
    );
    apply(
        &mut s,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "n1-gpu"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                     "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}),
    );
    apply(
        &mut s,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu"}, "spec": {}}),
    );
    apply(&mut s, claim("c1"));
    apply(&mut s, claim("c2"));
    apply(&mut s, pod("p1", "c1"));
    s.snapshot();
    s
}

/// p1 bound to n1 with its claim c1 allocated gpu-1 (not the first free
/// device: the accounting of a bound pod whose claim looks unallocated
/// would take gpu-0).
fn decided() -> Decisions {
    Decisions {
        binds: vec![Bind {
            job: "ml/p1".into(),
            task: key("p1"),
            node: "n1".into(),
            gpus: vec![],
        }],
        claims: vec![ClaimDecision {
            claim: "ml/c1".into(),
            node: "n1".into(),
            pods: vec![key("p1")],
            allocation: Some(vec![AllocatedDevice {
                request: "gpu".into(),
                driver: "gpu.example.com".into(),
                pool: "n1".into(),
                device: "gpu-1".into(),
                admin_access: false,
                consumed: Default::default(),
            }]),
            extended: Vec::new(),
        }],
        ..Decisions::default()
    }
}

fn devices_of(d: &Decisions) -> Vec<String> {
    d.claims
        .iter()
        .flat_map(|c| c.allocation.iter().flatten().map(|a| a.device.to_string()))
        .collect()
}

#[test]
fn an_assumed_allocation_shows_until_the_world_does_and_its_device_stays_taken() {
    let mut s = world();
    let now = Timestamp::from_secs(1_800_000_000);
    s.assume(&decided(), now);
    assert!(
        matches!(s.writes(), [Write::Bind(_), Write::Claim(c)] if c.claim == "ml/c1"),
        "{:?}",
        s.writes()
    );
    let snap = s.snapshot();
    let c1 = &snap.dra.claims["ml/c1"];
    assert_eq!(c1.reserved_for, ["ml/p1"]);
    assert_eq!(
        c1.allocation.as_ref().map(|a| &*a.devices[0].device),
        Some("gpu-1")
    );
    // p2 comes: it gets gpu-0, not the device assumed for p1.
    apply(&mut s, pod("p2", "c2"));
    let d = trainyard_sched::schedule(&s.snapshot(), &Default::default(), now);
    assert_eq!(devices_of(&d), ["gpu-0"]);

    // The world shows the allocation: the assumption goes.
    let mut shown = claim("c1");
    shown["status"] = json!({"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                 "pool": "n1", "device": "gpu-1"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
        "reservedFor": [{"resource": "pods", "name": "p1", "uid": "u-p1"}]});
    apply(&mut s, shown);
    s.snapshot();
    assert!(s.assumed_claims().is_empty());
}

#[test]
fn a_refused_or_expired_claim_write_frees_its_device() {
    let now = Timestamp::from_secs(1_800_000_000);
    for refused in [true, false] {
        let mut s = world();
        s.assume(&decided(), now);
        let writes = s.take_writes();
        if refused {
            for w in &writes {
                assert!(s.forget_write(w));
            }
        } else {
            s.forget_assumed(Timestamp(now.0 + 1));
        }
        assert!(s.assumed_claims().is_empty());
        let snap = s.snapshot();
        assert!(snap.dra.claims["ml/c1"].allocation.is_none());
    }
    // A write that landed stays past its age.
    let mut s = world();
    s.assume(&decided(), now);
    for w in s.take_writes() {
        s.write_landed(&w);
    }
    s.forget_assumed(Timestamp(now.0 + 1));
    assert_eq!(s.assumed_claims().len(), 1);
}
