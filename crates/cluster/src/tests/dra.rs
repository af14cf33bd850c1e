//! DRA objects fed one by one as watch events give the DRA part and the
//! task claims a whole-file load of the same objects gives.

use trainyard_ingest::{LoadOptions, Source};

use crate::{Change, ClusterState, Decoded, ObjectChange};

const OBJECTS: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 64Gi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpu}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {model: {string: H100}}, capacity: {memory: {value: 80Gi}}}
  - {name: gpu-1, attributes: {model: {string: H100}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpu-half}
spec:
  driver: other.example.com
  nodeName: n1
  pool: {name: p, generation: 1, resourceSliceCount: 2}
  devices: [{name: x}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: device.driver == "gpu.example.com"}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: ml}
spec:
  devices:
    requests: [{name: g, exactly: {deviceClassName: gpu, count: 2}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: g
        firstAvailable:
        - {name: big, deviceClassName: gpu, selectors: [{cel: {expression: "true"}}]}
        - {name: any, deviceClassName: missing-class}
---
apiVersion: resource.k8s.io/v1alpha3
kind: DeviceTaintRule
metadata: {name: t}
spec:
  deviceSelector: {device: gpu-1}
  taint: {key: k, effect: NoSchedule}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: ml, uid: ua}
spec:
  schedulerName: trainyard
  containers: [{name: c}]
  resourceClaims:
  - {name: s, resourceClaimName: shared}
  - {name: m, resourceClaimTemplateName: one}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: ml, uid: ub}
spec:
  schedulerName: trainyard
  containers: [{name: c}]
  resourceClaims:
  - {name: s, resourceClaimName: shared}
  - {name: late, resourceClaimName: later}
---
apiVersion: v1
kind: Pod
metadata: {name: ext, namespace: ml, uid: ue}
spec:
  nodeName: n1
  containers: [{name: c}]
  resourceClaims: [{name: s, resourceClaimName: shared}]
"#;

const LATER: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: later, namespace: ml}
spec:
  devices:
    requests: [{name: g, exactly: {deviceClassName: gpu}}]
"#;

fn load(text: &str) -> trainyard_model::Snapshot {
    trainyard_ingest::load(&[Source::new("f.yaml", text)], &LoadOptions::default())
        .expect("loads")
        .snapshot
}

fn objects(text: &str) -> Vec<serde_json::Value> {
    let docs = trainyard_ingest::parse_documents(&Source::new("f.yaml", text)).expect("parses");
    trainyard_ingest::split_objects(docs)
}

fn feed(s: &mut ClusterState, values: &[serde_json::Value]) {
    for v in values {
        let d = Decoded::object(v, "watch");
        assert!(d.errors.is_empty(), "{:?}", d.errors);
        for c in d.changes {
            s.apply(Change::Object(c));
        }
    }
}

/// The DRA part and every task's claims and constraints are equal.
fn assert_same(file: &trainyard_model::Snapshot, live: &trainyard_model::Snapshot) {
    assert_eq!(file.dra, live.dra);
    let tasks = |s: &trainyard_model::Snapshot| {
        s.jobs
            .iter()
            .flat_map(|j| j.tasks.iter())
            .map(|t| (t.name.clone(), t.claims.clone(), (*t.constraints).clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(tasks(file), tasks(live));
}

#[test]
fn dra_from_watch_events_equals_dra_from_a_file() {
    let want = load(OBJECTS);
    assert!(!want.dra.is_empty());
    assert_eq!(want.dra.claims.len(), 2, "shared, and a's planned claim");
    // In file order and in reverse order (pods before their claims).
    let mut values = objects(OBJECTS);
    for _ in 0..2 {
        let mut s = ClusterState::for_objects(LoadOptions::default());
        feed(&mut s, &values);
        assert_same(&want, &s.snapshot());
        values.reverse();
    }
}

#[test]
fn dra_changes_are_applied_incrementally() {
    let mut s = ClusterState::for_objects(LoadOptions::default());
    feed(&mut s, &objects(OBJECTS));
    let before = s.snapshot();
    let b = before.jobs.iter().find(|j| j.id == "ml/b").expect("job b");
    assert_eq!(
        b.tasks[0].constraints.waiting,
        ["waiting for ResourceClaim ml/later to be created"]
    );

    // The claim b waits for appears: b is unblocked, as in a load of all.
    feed(&mut s, &objects(LATER));
    let all = format!("{OBJECTS}---\n{LATER}");
    assert_same(&load(&all), &s.snapshot());

    // The template goes: a waits for it; the planned claim is gone.
    let gone = ObjectChange::gone("ResourceClaimTemplate", Some("ml"), "one").expect("a DRA kind");
    s.apply(Change::Object(gone));
    let without = all.replace(
        "kind: ResourceClaimTemplate\nmetadata: {name: one, namespace: ml}",
        "kind: ResourceClaimTemplate\nmetadata: {name: other, namespace: ml}",
    );
    let want = load(&without);
    assert!(!want.dra.claims.contains_key("ml/a-m"));
    assert_same(&want, &s.snapshot());

    // A slice removed: its devices go.
    let gone = ObjectChange::gone("ResourceSlice", None, "n1-gpu").expect("a DRA kind");
    s.apply(Change::Object(gone));
    assert!(!s.snapshot().dra.nodes.contains_key("n1"));
    // The incomplete pool's warning is among the problems.
    assert!(
        s.problems()
            .warnings
            .iter()
            .any(|w| w.contains("other.example.com/p")),
        "{:?}",
        s.problems().warnings
    );
}

const RAILS: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {example.com/block: b1}}
status: {allocatable: {cpu: "8", memory: 64Gi}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {example.com/block: b1}}
status: {allocatable: {cpu: "8", memory: 64Gi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpu}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}, {name: gpu-2}, {name: gpu-3}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors: [{cel: {expression: device.driver == "gpu.example.com"}}]
  extendedResourceName: nvidia.com/gpu
---
apiVersion: trainyard.io/v1alpha1
kind: Topology
metadata: {name: blocks}
spec:
  levels:
  - {name: block, nodeLabel: example.com/block}
"#;

#[test]
fn a_node_whose_dra_devices_serve_gpus_has_them_in_the_topology_live_as_in_a_file() {
    let want = load(RAILS);
    let n1 = want.nodes.iter().find(|n| n.name == "n1").expect("n1");
    assert_eq!(n1.gpus.len(), 4, "one GPU slot per device");
    let topology =
        |s: &trainyard_model::Snapshot| serde_json::to_value(s.topology.as_deref()).expect("json");
    assert!(
        topology(&want).to_string().contains("\"gpus\":4"),
        "the file's topology counts n1's GPUs: {}",
        topology(&want)
    );
    let mut values = objects(RAILS);
    for _ in 0..2 {
        let mut s = ClusterState::for_objects(LoadOptions::default());
        feed(&mut s, &values);
        let live = s.snapshot();
        assert_eq!(topology(&want), topology(&live));
        assert_eq!(want.nodes, live.nodes);
        values.reverse();
    }
}
