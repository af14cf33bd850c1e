use super::*;
use trainyard_model::dra::{
    AllocatedDevice, AllocationMode, AttrValue, CapacityPolicy, ClaimAllocation, ClaimNeed,
    DeviceTaint, DeviceTaintEffect, DeviceToleration, PodClaim, SelectorSet,
};

// --- Dynamic Resource Allocation (resource.k8s.io) --------------------------

/// Two nodes' GPUs (one pool each), a MIG-style partitionable device with
/// shared counters, a shared NIC; classes, claims, a template, a taint
/// rule, and pods using them.
pub(crate) const DRA_OBJECTS: &str = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpu}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 2, resourceSliceCount: 1}
  devices:
  - name: gpu-1
    attributes:
      model: {string: H100}
      index: {int: 1}
      other.example.com/numa: {int: 0}
      driverVersion: {version: 1.2.3}
      healthy: {bool: true}
    capacity:
      memory: {value: 80Gi}
  - name: gpu-0
    attributes:
      model: {string: H100}
      index: {int: 0}
    capacity:
      memory: {value: 80Gi}
    taints: [{key: maintenance, value: soon, effect: NoSchedule}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpu-old}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-stale}
---
apiVersion: resource.k8s.io/v1beta2
kind: ResourceSlice
metadata: {name: n1-mig-counters}
spec:
  driver: mig.example.com
  nodeName: n1
  pool: {name: n1-mig, generation: 0, resourceSliceCount: 2}
  sharedCounters:
  - name: gpu-0-set
    counters: {memory: {value: 40Gi}, slices: {value: "7"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-mig-devices}
spec:
  driver: mig.example.com
  nodeName: n1
  pool: {name: n1-mig, generation: 0, resourceSliceCount: 2}
  devices:
  - name: mig-1g
    consumesCounters:
    - counterSet: gpu-0-set
      counters: {memory: {value: 5Gi}, slices: {value: "1"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n2-nic}
spec:
  driver: nic.example.com
  nodeName: n2
  pool: {name: n2, generation: 0, resourceSliceCount: 1}
  devices:
  - name: nic-0
    allowMultipleAllocations: true
    capacity:
      bandwidth:
        value: 100G
        requestPolicy:
          default: 10G
          validRange: {min: 1G, max: 100G, step: 1G}
      queues: {value: "8"}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.example.com"}
  extendedResourceName: example.com/gpu
  config: [{opaque: {driver: gpu.example.com, parameters: {}}}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: nic}
spec:
  selectors:
  - cel: {expression: device.driver == "nic.example.com"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu, namespace: ml, uid: u-shared}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu
        selectors:
        - cel:
            expression: 'device.attributes["gpu.example.com"].model == "H100"'
        allocationMode: ExactCount
        count: 2
        tolerations: [{key: maintenance, operator: Exists, effect: NoSchedule}]
    constraints:
    - matchAttribute: other.example.com/numa
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: held, namespace: ml, uid: u-held}
spec:
  devices:
    requests:
    - name: nic
      firstAvailable:
      - name: fast
        deviceClassName: nic
        capacity: {requests: {nic.example.com/bandwidth: 40G}}
      - name: any
        deviceClassName: nic
        allocationMode: All
    constraints:
    - {requests: [nic], distinctAttribute: nic.example.com/index}
status:
  allocation:
    devices:
      results:
      - request: nic/fast
        driver: nic.example.com
        pool: n2
        device: nic-0
        consumedCapacity: {bandwidth: 40G, queues: "0"}
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [n2]}]
  reservedFor:
  - {resource: pods, name: user, uid: u1}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  metadata: {labels: {a: b}}
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu}
---
apiVersion: resource.k8s.io/v1alpha3
kind: DeviceTaintRule
metadata: {name: drain-gpu-1}
spec:
  deviceSelector: {driver: gpu.example.com, device: gpu-1}
  taint: {key: drain, effect: NoExecute}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: ml}
spec:
  schedulerName: trainyard
  containers: [{name: c}]
  resourceClaims:
  - {name: shared, resourceClaimName: shared-gpu}
  - {name: mine, resourceClaimTemplateName: one-gpu}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: ml}
spec:
  schedulerName: trainyard
  containers: [{name: c}]
  resourceClaims:
  - {name: shared, resourceClaimName: shared-gpu}
---
apiVersion: v1
kind: Pod
metadata: {name: user, namespace: ml}
spec:
  schedulerName: trainyard
  nodeName: n2
  containers: [{name: c}]
  resourceClaims:
  - {name: net, resourceClaimName: held}
  - {name: gpu, resourceClaimTemplateName: one-gpu}
status:
  resourceClaimStatuses:
  - {name: gpu, resourceClaimName: user-gpu-x7k2p}
---
apiVersion: v1
kind: Pod
metadata: {name: waiting, namespace: ml}
spec:
  schedulerName: trainyard
  containers: [{name: c}]
  resourceClaims:
  - {name: x, resourceClaimName: not-yet}
  - {name: y, resourceClaimTemplateName: no-template}
  - {name: z, resourceClaimTemplateName: one-gpu}
status:
  resourceClaimStatuses:
  - {name: z}
"#;

const GIB_MILLI: u64 = (1 << 30) * 1000;
const G_MILLI: u64 = 1_000_000_000 * 1000;

#[test]
fn slices_become_devices_per_node() {
    let loaded = load_one(DRA_OBJECTS).unwrap();
    let dra = &loaded.snapshot.dra;
    assert_eq!(dra.nodes.keys().collect::<Vec<_>>(), ["n1", "n2"]);
    let n1 = &dra.nodes["n1"];
    // Sorted by (driver, pool, name); the stale generation is left out.
    let ids: Vec<String> = n1.devices.iter().map(|d| d.id()).collect();
    assert_eq!(
        ids,
        [
            "gpu.example.com/n1/gpu-0",
            "gpu.example.com/n1/gpu-1",
            "mig.example.com/n1-mig/mig-1g"
        ]
    );
    let gpu1 = &n1.devices[1];
    assert_eq!(
        gpu1.attribute("gpu.example.com/model"),
        Some(&AttrValue::String("H100".into()))
    );
    assert_eq!(
        gpu1.attribute("gpu.example.com/driverVersion"),
        Some(&AttrValue::Version("1.2.3".into()))
    );
    assert_eq!(
        gpu1.attribute("gpu.example.com/healthy"),
        Some(&AttrValue::Bool(true))
    );
    // A name with a domain keeps it.
    assert_eq!(
        gpu1.attribute("other.example.com/numa"),
        Some(&AttrValue::Int(0))
    );
    assert_eq!(
        gpu1.capacity["gpu.example.com/memory"].value,
        80 * GIB_MILLI
    );
    assert_eq!(gpu1.capacity["gpu.example.com/memory"].policy, None);
    // The slice's taint, and the DeviceTaintRule's on gpu-1 only.
    assert_eq!(
        n1.devices[0].taints,
        [DeviceTaint {
            key: "maintenance".into(),
            value: "soon".into(),
            effect: DeviceTaintEffect::NoSchedule
        }]
    );
    assert_eq!(
        gpu1.taints,
        [DeviceTaint {
            key: "drain".into(),
            value: String::new(),
            effect: DeviceTaintEffect::NoExecute
        }]
    );
    // Counters: the pool's set (published in its own slice) and the use.
    assert_eq!(n1.counter_sets.len(), 1);
    let set = &n1.counter_sets[0];
    assert_eq!(
        (set.driver.as_str(), set.pool.as_str(), set.name.as_str()),
        ("mig.example.com", "n1-mig", "gpu-0-set")
    );
    assert_eq!(set.counters["memory"], 40 * GIB_MILLI);
    assert_eq!(set.counters["slices"], 7000);
    let mig = &n1.devices[2];
    assert_eq!(mig.consumes[0].set, "gpu-0-set");
    assert_eq!(mig.consumes[0].counters["slices"], 1000);
    // A shared device: every capacity consumable, with its policy.
    let nic = &dra.nodes["n2"].devices[0];
    assert!(nic.multi);
    assert_eq!(
        nic.capacity["nic.example.com/bandwidth"].policy,
        Some(CapacityPolicy {
            default: Some(10 * G_MILLI),
            valid_values: vec![],
            range: Some((G_MILLI, Some(100 * G_MILLI), Some(G_MILLI))),
        })
    );
    assert_eq!(
        nic.capacity["nic.example.com/queues"].policy,
        Some(CapacityPolicy {
            default: Some(8000),
            valid_values: vec![],
            range: None,
        })
    );
    // Classes are kept for whoever needs them.
    assert_eq!(
        loaded.device_classes["gpu"]
            .extended_resource_name
            .as_deref(),
        Some("example.com/gpu")
    );
    // Every selector set is evaluated over the devices (trainyard-dra).
    assert_eq!(dra.matches.len(), dra.selectors.len());
}

#[test]
fn claims_requests_and_selector_sets() {
    let loaded = load_one(DRA_OBJECTS).unwrap();
    let dra = &loaded.snapshot.dra;
    // Sorted by value, deduplicated: the class's expressions first.
    let gpu_class = r#"device.driver == "gpu.example.com""#.to_string();
    let nic_class = r#"device.driver == "nic.example.com""#.to_string();
    assert_eq!(
        dra.selectors,
        [
            SelectorSet {
                class: "gpu".into(),
                expressions: vec![gpu_class.clone()]
            },
            SelectorSet {
                class: "gpu".into(),
                expressions: vec![
                    gpu_class,
                    r#"device.attributes["gpu.example.com"].model == "H100""#.into()
                ]
            },
            SelectorSet {
                class: "nic".into(),
                expressions: vec![nic_class]
            },
        ]
    );
    let shared = &dra.claims["ml/shared-gpu"];
    assert_eq!(shared.uid, "u-shared");
    let sub = &shared.spec.requests[0].alternatives[0];
    assert_eq!(
        (sub.name.as_str(), sub.selector, sub.mode),
        ("gpu", 1, AllocationMode::ExactCount(2))
    );
    assert_eq!(
        sub.tolerations,
        [DeviceToleration {
            key: "maintenance".into(),
            exists: true,
            value: String::new(),
            effect: Some(DeviceTaintEffect::NoSchedule)
        }]
    );
    assert_eq!(
        shared.spec.constraints[0].attribute,
        "other.example.com/numa"
    );
    assert!(!shared.spec.constraints[0].distinct);

    let held = &dra.claims["ml/held"];
    let alts = &held.spec.requests[0].alternatives;
    assert_eq!(
        alts.iter()
            .map(|a| (a.name.as_str(), a.selector, a.mode))
            .collect::<Vec<_>>(),
        [
            ("nic/fast", 2, AllocationMode::ExactCount(1)),
            ("nic/any", 2, AllocationMode::All)
        ]
    );
    assert_eq!(alts[0].capacity["nic.example.com/bandwidth"], 40 * G_MILLI);
    assert!(held.spec.constraints[0].distinct);
    assert_eq!(held.spec.constraints[0].requests, ["nic"]);
    // The allocation read back: node from the field selector, consumed
    // capacity qualified with the driver.
    assert_eq!(
        held.allocation,
        Some(ClaimAllocation {
            node: Some("n2".into()),
            devices: vec![AllocatedDevice {
                request: "nic/fast".into(),
                driver: "nic.example.com".into(),
                pool: "n2".into(),
                device: "nic-0".into(),
                admin_access: false,
                consumed: [
                    ("nic.example.com/bandwidth".to_string(), 40 * G_MILLI),
                    ("nic.example.com/queues".to_string(), 0)
                ]
                .into(),
            }],
        })
    );
    assert_eq!(held.reserved_for, ["ml/user"]);
}

#[test]
fn pods_claims_templates_and_missing_objects() {
    let loaded = load_one(DRA_OBJECTS).unwrap();
    let dra = &loaded.snapshot.dra;
    // Pod a: the shared claim (b names it too) and a planned claim of its
    // own from the template.
    let a = task(&loaded, "ml/a");
    assert_eq!(
        a.claims,
        [
            PodClaim {
                name: "shared".into(),
                claim: "ml/shared-gpu".into()
            },
            PodClaim {
                name: "mine".into(),
                claim: "ml/a-mine".into()
            }
        ]
    );
    let planned = &dra.claims["ml/a-mine"];
    assert_eq!(planned.planned_from.as_deref(), Some("ml/one-gpu"));
    assert_eq!(planned.allocation, None);
    assert_eq!(planned.spec.requests[0].alternatives[0].selector, 0);
    assert_eq!(
        a.constraints.claims,
        [
            ClaimNeed::Shared("ml/shared-gpu".into()),
            ClaimNeed::Own(planned.spec.clone())
        ]
    );
    assert!(a.constraints.unsupported.is_empty());
    // Pod user: the allocated claim is shared (by key); the template's
    // claim is the one its status names, not known here: planned.
    let user = task(&loaded, "ml/user");
    assert_eq!(
        user.constraints.claims,
        [
            ClaimNeed::Shared("ml/held".into()),
            ClaimNeed::Own(planned.spec.clone())
        ]
    );
    assert_eq!(user.claims[1].claim, "ml/user-gpu");
    // Pod waiting: a claim and a template that do not exist block it; an
    // entry whose status says no claim was needed is ignored.
    let w = task(&loaded, "ml/waiting");
    assert!(w.claims.is_empty());
    assert_eq!(
        w.constraints.waiting,
        [
            "waiting for ResourceClaim ml/not-yet to be created",
            "waiting for ResourceClaimTemplate ml/no-template to be created"
        ]
    );
    assert_eq!(
        dra.claims.keys().collect::<Vec<_>>(),
        ["ml/a-mine", "ml/held", "ml/shared-gpu", "ml/user-gpu"]
    );
}

#[test]
fn a_claim_named_in_the_pod_status_is_used() {
    let text = format!(
        "{DRA_OBJECTS}---\n{}",
        r#"apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: user-gpu-x7k2p, namespace: ml}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu}}]
"#
    );
    let loaded = load_one(&text).unwrap();
    let user = task(&loaded, "ml/user");
    assert_eq!(user.claims[1].claim, "ml/user-gpu-x7k2p");
    let dra = &loaded.snapshot.dra;
    assert!(!dra.claims.contains_key("ml/user-gpu"));
    // Unallocated, named by this pod only: its own.
    assert_eq!(
        user.constraints.claims[1],
        ClaimNeed::Own(dra.claims["ml/user-gpu-x7k2p"].spec.clone())
    );
}

#[test]
fn pools_newest_generation_complete_only() {
    let slice = |name: &str, pool: &str, generation: u32, count: u32, device: &str| {
        format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {name}}}\nspec:\n  driver: d.example.com\n  nodeName: n1\n  pool: {{name: {pool}, generation: {generation}, resourceSliceCount: {count}}}\n  devices: [{{name: {device}}}]\n"
        )
    };
    let text = [
        // Pool p: generation 3 has one of its two slices: not used.
        slice("p-old", "p", 2, 1, "old"),
        slice("p-new-a", "p", 3, 2, "a"),
        // Pool q: two slices of two at generation 5.
        slice("q-a", "q", 5, 2, "a"),
        slice("q-b", "q", 5, 2, "b"),
        // Pool r: one device published twice.
        slice("r-a", "r", 0, 2, "x"),
        slice("r-b", "r", 0, 2, "x"),
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: everywhere}\nspec:\n  driver: d.example.com\n  allNodes: true\n  pool: {name: net, generation: 0, resourceSliceCount: 1}\n  devices: [{name: n}]\n".to_string(),
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: zone-a}\nspec:\n  driver: d.example.com\n  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}\n  pool: {name: zone-a, generation: 0, resourceSliceCount: 1}\n  devices: [{name: n}]\n".to_string(),
        "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: per-device}\nspec:\n  driver: d.example.com\n  perDeviceNodeSelection: true\n  pool: {name: pd, generation: 0, resourceSliceCount: 1}\n  devices: [{name: n, nodeName: n1}]\n".to_string(),
    ]
    .concat();
    let loaded = load_one(&text).unwrap();
    let ids: Vec<String> = loaded.snapshot.dra.nodes["n1"]
        .devices
        .iter()
        .map(|d| d.id())
        .collect();
    assert_eq!(ids, ["d.example.com/q/a", "d.example.com/q/b"]);
    expect![[r#"
        [
            "cluster.yaml: document 7: ResourceSlice everywhere: spec.allNodes is not supported yet (only node-local slices, spec.nodeName, are); its devices are left out",
            "cluster.yaml: document 8: ResourceSlice zone-a: spec.nodeSelector is not supported yet (only node-local slices, spec.nodeName, are); its devices are left out",
            "cluster.yaml: document 9: ResourceSlice per-device: spec.perDeviceNodeSelection is not supported yet (only node-local slices, spec.nodeName, are); its devices are left out",
            "cluster.yaml: document 2: ResourceSlice pool d.example.com/p (generation 3) has 1 of its 2 slice(s) (p-new-a): the pool is being updated; its devices are not used until every slice is published",
            "cluster.yaml: document 5: ResourceSlice pool d.example.com/r (generation 0) is invalid: device x is published twice (ResourceSlices r-a and r-b); its devices are not used",
        ]
    "#]]
    .assert_debug_eq(&loaded.warnings);
}

#[test]
fn dra_errors_name_object_and_field() {
    let text = r#"
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: d.example.com
  nodeName: n1
  pool: {name: p, generation: 0, resourceSliceCount: 1}
  devices:
  - name: x
    attributes:
      both: {int: 1, string: one}
      none: {}
    capacity:
      mem: {value: 1Zi}
      neg: {value: "-1"}
      big: {value: 1E+30}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: ml}
spec:
  devices:
    requests:
    - name: a
      exactly: {deviceClassName: gpu, allocationMode: Some}
    - name: b
      exactly: {deviceClassName: gpu, count: 0}
    - name: c
      exactly: {deviceClassName: gpu}
      firstAvailable: [{name: x, deviceClassName: gpu}]
    - name: d
      deviceClassName: gpu
    - name: e
      exactly: {deviceClassName: gpu, allocationMode: All, count: 2}
    constraints:
    - {matchAttribute: numa}
    - {requests: [zz], matchAttribute: d.example.com/numa, distinctAttribute: d.example.com/x}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: t, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: a
        firstAvailable: [{deviceClassName: ""}]
---
apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: old, namespace: ml}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  containers: [{name: c}]
  resourceClaims:
  - {name: a, resourceClaimName: x, resourceClaimTemplateName: y}
  - {name: b}
"#;
    expect![[r#"
        cluster.yaml: document 1: ResourceSlice s: spec.devices[0].attributes.both: has 2 value types (int, string); expected exactly one of int, bool, string or version
        cluster.yaml: document 1: ResourceSlice s: spec.devices[0].attributes.none: has no value; expected exactly one of int, bool, string or version
        cluster.yaml: document 1: ResourceSlice s: spec.devices[0].capacity.big.value: quantity "1000000000000000000000000000000" is too large
        cluster.yaml: document 1: ResourceSlice s: spec.devices[0].capacity.mem.value: invalid quantity "1Zi"; expected a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent (e.g. 1e3), such as "500m", "8" or "64Gi"
        cluster.yaml: document 1: ResourceSlice s: spec.devices[0].capacity.neg.value: quantity "-1" is negative; expected an amount of zero or more
        cluster.yaml: document 2: ResourceClaim ml/c: spec.devices.requests[0].exactly.allocationMode: unknown allocationMode "Some"; expected ExactCount or All
        cluster.yaml: document 2: ResourceClaim ml/c: spec.devices.requests[1].exactly.count: 0; expected a number of devices greater than zero with allocationMode ExactCount
        cluster.yaml: document 2: ResourceClaim ml/c: spec.devices.requests[2]: sets both exactly and firstAvailable; expected exactly one of them
        cluster.yaml: document 2: ResourceClaim ml/c: spec.devices.requests[3]: sets neither exactly nor firstAvailable; expected exactly one of them (resource.k8s.io/v1 moved deviceClassName and the other fields under exactly)
        cluster.yaml: document 2: ResourceClaim ml/c: spec.devices.requests[4].exactly.count: 2: count is only used with allocationMode ExactCount; leave it out with All
        cluster.yaml: document 2: ResourceClaim ml/c: spec.devices.constraints[0].matchAttribute: "numa" must include the domain qualifier, such as gpu.nvidia.com/numa
        cluster.yaml: document 2: ResourceClaim ml/c: spec.devices.constraints[1]: expected exactly one of matchAttribute or distinctAttribute
        cluster.yaml: document 3: ResourceClaimTemplate ml/t: spec.spec.devices.requests[0].firstAvailable[0].name: missing; expected the subrequest's name
        cluster.yaml: document 3: ResourceClaimTemplate ml/t: spec.spec.devices.requests[0].firstAvailable[0].deviceClassName: missing; expected the name of a DeviceClass
        cluster.yaml: document 4: ResourceClaim ml/old: apiVersion: "resource.k8s.io/v1beta1" is not supported: its shape differs from resource.k8s.io/v1 (requests without exactly/firstAvailable, devices under basic); expected "resource.k8s.io/v1" (or v1beta2); convert the object (kubectl get -o yaml from a cluster serving v1 gives it)
        cluster.yaml: document 5: Pod ml/p: spec.resourceClaims[0]: sets both of resourceClaimName and resourceClaimTemplateName; expected exactly one
        cluster.yaml: document 5: Pod ml/p: spec.resourceClaims[1]: sets neither of resourceClaimName and resourceClaimTemplateName; expected exactly one
    "#]]
    .assert_eq(&format!("{}\n", errors_of(text)));
}

#[test]
fn allocation_node_selectors() {
    let claim = |name: &str, selector: &str| {
        format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {name}}}\nspec: {{devices: {{requests: [{{name: r, exactly: {{deviceClassName: c}}}}]}}}}\nstatus:\n  allocation:\n    devices: {{results: [{{request: r, driver: d.example.com, pool: p, device: x}}]}}\n{selector}"
        )
    };
    let text = [
        claim(
            "by-host",
            "    nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n7]}]}]}\n",
        ),
        claim("anywhere", ""),
        claim(
            "by-zone",
            "    nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [a]}]}]}\n",
        ),
    ]
    .concat();
    let loaded = load_one(&text).unwrap();
    let node = |k: &str| {
        loaded.snapshot.dra.claims[k]
            .allocation
            .as_ref()
            .unwrap()
            .node
            .clone()
    };
    assert_eq!(node("default/by-host").as_deref(), Some("n7"));
    assert_eq!(node("default/anywhere"), None);
    assert_eq!(node("default/by-zone"), None);
    expect![[r#"
        [
            "cluster.yaml: document 3: ResourceClaim default/by-zone: status.allocation.nodeSelector does not name one node (by metadata.name or kubernetes.io/hostname); the allocation is taken as usable from any node",
        ]
    "#]]
    .assert_debug_eq(&loaded.warnings);
}

#[test]
fn a_snapshot_without_dra_objects_has_an_empty_dra() {
    let loaded = load_one(&pod("p", "", "  containers: [{name: c}]\n")).unwrap();
    assert!(loaded.snapshot.dra.is_empty());
    assert!(loaded.snapshot.dra.selectors.is_empty());
    assert!(task(&loaded, "ml/p").claims.is_empty());
}
