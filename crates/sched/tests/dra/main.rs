//! DRA claims allocated in the gang transaction: scenarios of issue 44
//! (a selector and a PCIe-root `matchAttribute`, kubernetes#138765's
//! partitionable device, a claim shared by a gang, MIG-style counters,
//! `All` mode, taints, a claim allocated before a restart), checked on
//! the decisions.

mod props;
mod support;

use std::collections::{BTreeMap, BTreeSet};

use support::*;
use trainyard_model::Timestamp;
use trainyard_model::dra::{AllocationMode, DeviceTaint, DeviceTaintEffect, DeviceToleration};
use trainyard_sched::{Config, Decisions, schedule};

fn run(b: &Build) -> Decisions {
    schedule(&b.snapshot(), &Config::default(), Timestamp(0))
}

/// Per claim: node and devices allocated.
fn allocations(d: &Decisions) -> BTreeMap<String, (String, Vec<String>)> {
    d.claims
        .iter()
        .filter_map(|c| {
            let devs = c
                .allocation
                .as_ref()?
                .iter()
                .map(|a| a.device.to_string())
                .collect();
            Some((c.claim.clone(), (c.node.to_string(), devs)))
        })
        .collect()
}

/// Eight GPUs, two per PCIe root; `h100` of them H100s, the rest A100s,
/// every other one from device 0.
fn gpu_node(b: &mut Build, name: &str, h100: &[usize]) {
    let devices = (0..8)
        .map(|i| {
            let product = if h100.contains(&i) { "H100" } else { "A100" };
            let root = format!("pci{}", i / 2);
            device(
                &format!("gpu-{i}"),
                &[
                    ("type", "gpu"),
                    ("productName", product),
                    ("pcieRoot", &root),
                ],
            )
        })
        .collect();
    b.node(name, devices);
}

#[test]
fn a_gang_of_four_with_two_h100_on_one_pcie_root_each_is_placed_whole_or_not_at_all() {
    let mut b = Build::default();
    // n1: H100s at 0, 2, 4, 6 (one per root); n2: eight H100s.
    gpu_node(&mut b, "n1", &[0, 2, 4, 6]);
    gpu_node(&mut b, "n2", &[0, 1, 2, 3, 4, 5, 6, 7]);
    let req = b.exact("gpu", "type=gpu&productName=H100", 2);
    b.gang("ml/train", 4, spec(vec![req], vec![match_attr("pcieRoot")]));
    let d = run(&b);
    assert_eq!(d.binds.len(), 4, "{:#?}", d.pending);
    let allocs = allocations(&d);
    assert_eq!(allocs.len(), 4);
    let mut seen = BTreeSet::new();
    for (node, devs) in allocs.values() {
        assert_eq!(node, "n2");
        assert_eq!(devs.len(), 2);
        let roots: BTreeSet<usize> = devs
            .iter()
            .map(|d| d.trim_start_matches("gpu-").parse::<usize>().unwrap() / 2)
            .collect();
        assert_eq!(roots.len(), 1, "both GPUs on one PCIe root: {devs:?}");
        for dev in devs {
            assert!(seen.insert(dev.clone()), "{dev} allocated twice");
        }
    }

    // With two H100 roots fewer on n2, the gang does not fit: nothing binds.
    let mut b = Build::default();
    gpu_node(&mut b, "n1", &[0, 2, 4, 6]);
    gpu_node(&mut b, "n2", &[0, 1, 2, 3, 4, 5]);
    let req = b.exact("gpu", "type=gpu&productName=H100", 2);
    b.gang("ml/train", 4, spec(vec![req], vec![match_attr("pcieRoot")]));
    let d = run(&b);
    assert!(d.binds.is_empty());
    assert!(d.claims.is_empty());
    let msg = &d.pending[0].message;
    assert!(msg.contains("request gpu"), "{msg}");
}

#[test]
fn kubernetes_138765_a_gang_that_fits_only_if_an_earlier_choice_is_revisited() {
    // One device of two widgets, as a whole or as two halves; each pod's
    // claim prefers the whole device, then a half.
    let mut b = Build::default();
    let nd = b.node("n1", Vec::new());
    partitionable(nd, "dev", 2, true);
    let req = b.first_available(
        "dev",
        &[("whole", "type=whole", 1), ("half", "type=half", 1)],
    );
    b.gang("ml/pair", 2, spec(vec![req], Vec::new()));
    let d = run(&b);
    assert_eq!(d.binds.len(), 2, "{:#?}", d.pending);
    let allocs = allocations(&d);
    let devs: BTreeSet<&str> = allocs
        .values()
        .flat_map(|(_, d)| d.iter().map(String::as_str))
        .collect();
    assert_eq!(devs, BTreeSet::from(["dev-half-0", "dev-half-1"]));
    for c in &d.claims {
        let a = c.allocation.as_ref().unwrap();
        assert_eq!(&*a[0].request, "dev/half");
    }

    // A lone pod gets its preferred whole device.
    let mut b = Build::default();
    let nd = b.node("n1", Vec::new());
    partitionable(nd, "dev", 2, true);
    let req = b.first_available(
        "dev",
        &[("whole", "type=whole", 1), ("half", "type=half", 1)],
    );
    b.gang("ml/one", 1, spec(vec![req], Vec::new()));
    let d = run(&b);
    let allocs = allocations(&d);
    assert_eq!(allocs.values().next().unwrap().1, ["dev"]);
}

#[test]
fn a_claim_shared_by_a_gang_is_allocated_once_and_its_pods_go_where_it_is() {
    let mut b = Build::default();
    gpu_node(&mut b, "n1", &[]);
    gpu_node(&mut b, "n2", &[]);
    let req = b.exact("gpu", "type=gpu", 2);
    b.sharing_gang("ml/shared", 3, "ml/team-gpus", spec(vec![req], Vec::new()));
    let d = run(&b);
    assert_eq!(d.binds.len(), 3, "{:#?}", d.pending);
    let nodes: BTreeSet<&str> = d.binds.iter().map(|b| b.node.as_str()).collect();
    assert_eq!(nodes.len(), 1, "every pod on the claim's node");
    assert_eq!(d.claims.len(), 1);
    assert_eq!(d.claims[0].pods.len(), 3);
    assert_eq!(d.claims[0].allocation.as_ref().unwrap().len(), 2);
}

#[test]
fn partitions_draw_on_the_counters_of_their_device() {
    // One GPU of 8 slices: a whole GPU, or slices. Three pods of 3 slices
    // each cannot share it (9 > 8); two can, and then the whole is gone.
    let mut b = Build::default();
    let nd = b.node("n1", Vec::new());
    partitionable(nd, "gpu0", 8, false);
    let req = b.exact("mig", "type=slice", 3);
    b.gang("ml/mig", 2, spec(vec![req.clone()], Vec::new()));
    let whole = b.exact("gpu", "type=whole", 1);
    b.gang("ml/whole", 1, spec(vec![whole], Vec::new()));
    let d = run(&b);
    let bound: BTreeSet<&str> = d.binds.iter().map(|b| b.job.as_str()).collect();
    assert_eq!(bound, BTreeSet::from(["ml/mig"]), "{:#?}", d.pending);
    let used: Vec<String> = allocations(&d).into_values().flat_map(|(_, d)| d).collect();
    assert_eq!(used.len(), 6);
    assert_eq!(used.iter().collect::<BTreeSet<_>>().len(), 6);

    let mut b = Build::default();
    let nd = b.node("n1", Vec::new());
    partitionable(nd, "gpu0", 8, false);
    let req = b.exact("mig", "type=slice", 3);
    b.gang("ml/mig", 3, spec(vec![req], Vec::new()));
    assert!(run(&b).binds.is_empty(), "9 slices of 8 do not fit");
}

#[test]
fn all_mode_takes_every_matching_device_and_fails_if_one_is_in_use() {
    let mut b = Build::default();
    let nics = (0..4)
        .map(|i| device(&format!("nic-{i}"), &[("type", "nic")]))
        .collect();
    b.node("n1", nics);
    let sub = b.sub("nics", "type=nic", AllocationMode::All);
    let req = trainyard_model::dra::DeviceRequest {
        name: "nics".into(),
        alternatives: vec![sub],
    };
    b.gang("ml/all", 1, spec(vec![req.clone()], Vec::new()));
    let d = run(&b);
    assert_eq!(allocations(&d).values().next().unwrap().1.len(), 4);

    // One NIC held by a claim allocated before: All cannot be satisfied.
    let one = b.exact("nic", "type=nic", 1);
    let mut b2 = Build::default();
    let nics = (0..4)
        .map(|i| device(&format!("nic-{i}"), &[("type", "nic")]))
        .collect();
    b2.node("n1", nics);
    let sub = b2.sub("nics", "type=nic", AllocationMode::All);
    let req = trainyard_model::dra::DeviceRequest {
        name: "nics".into(),
        alternatives: vec![sub],
    };
    b2.sels = b.sels.clone();
    b2.sharing_gang("ml/holder", 1, "ml/held", spec(vec![one], Vec::new()));
    b2.allocate("ml/held", "n1", &["nic-2"]);
    // The holder is bound there.
    b2.jobs[0].tasks[0].state = trainyard_model::TaskState::Bound {
        node: "n1".into(),
        gpus: None,
    };
    b2.gang("ml/all", 1, spec(vec![req], Vec::new()));
    let d = run(&b2);
    assert!(d.binds.is_empty(), "{:#?}", d.binds);
    let msg = &d.pending[0].message;
    assert!(msg.contains("request nics: 3 of 4 devices"), "{msg}");
}

#[test]
fn a_tainted_device_is_allocated_only_to_a_request_that_tolerates_it() {
    let mut b = Build::default();
    let mut gpus: Vec<_> = (0..2)
        .map(|i| device(&format!("gpu-{i}"), &[("type", "gpu")]))
        .collect();
    gpus[0].taints.push(DeviceTaint {
        key: "example.com/unhealthy".into(),
        value: String::new(),
        effect: DeviceTaintEffect::NoSchedule,
    });
    b.node("n1", gpus);
    let req = b.exact("gpu", "type=gpu", 2);
    b.gang("ml/two", 1, spec(vec![req.clone()], Vec::new()));
    let d = run(&b);
    assert!(d.binds.is_empty());

    let mut tolerant = req;
    tolerant.alternatives[0].tolerations.push(DeviceToleration {
        key: "example.com/unhealthy".into(),
        exists: true,
        value: String::new(),
        effect: None,
    });
    b.jobs.clear();
    b.claims.clear();
    b.gang("ml/two", 1, spec(vec![tolerant], Vec::new()));
    assert_eq!(run(&b).binds.len(), 1);
}

#[test]
fn a_claim_allocated_before_a_restart_is_kept_as_it_is() {
    let mut b = Build::default();
    gpu_node(&mut b, "n1", &[]);
    gpu_node(&mut b, "n2", &[]);
    let req = b.exact("gpu", "type=gpu", 2);
    // The pod's claim was allocated on n2 (gpu-5, gpu-6) by an earlier
    // leader; the pod is not bound yet.
    b.sharing_gang(
        "ml/resumed",
        1,
        "ml/resumed-claim",
        spec(vec![req.clone()], Vec::new()),
    );
    b.allocate("ml/resumed-claim", "n2", &["gpu-5", "gpu-6"]);
    // Another gang wants all eight GPUs of one node.
    let eight = b.exact("gpu", "type=gpu", 8);
    b.gang("ml/eight", 1, spec(vec![eight], Vec::new()));
    let d = run(&b);
    let at: BTreeMap<&str, &str> = d
        .binds
        .iter()
        .map(|b| (b.job.as_str(), b.node.as_str()))
        .collect();
    assert_eq!(at.get("ml/resumed"), Some(&"n2"));
    assert_eq!(at.get("ml/eight"), Some(&"n1"));
    let resumed = d
        .claims
        .iter()
        .find(|c| c.claim == "ml/resumed-claim")
        .unwrap();
    assert!(resumed.allocation.is_none(), "kept as it is, only reserved");
}

#[test]
fn dra_gpus_serve_nvidia_com_gpu_slot_by_slot_beside_explicit_claims() {
    let mut b = Build::default();
    gpu_node(&mut b, "n1", &[0, 1, 2, 3, 4, 5, 6, 7]);
    b.back_gpus("n1", "type=gpu");
    // An explicit claim of two GPUs of the class, and a pod asking six
    // GPUs as an extended resource: the eight devices are shared out,
    // none twice; a pod asking one more waits.
    let two = b.exact("gpu", "type=gpu", 2);
    b.gang("ml/claims", 1, spec(vec![two], Vec::new()));
    let mut six = trainyard_model::Job::gang(
        "ml/six",
        "q",
        vec![trainyard_model::Resources::new(1000, 1 << 30, 0).with_gpus(6)],
    );
    six.submit_time = Timestamp(1);
    b.jobs.push(six);
    let mut one = trainyard_model::Job::gang(
        "ml/one",
        "q",
        vec![trainyard_model::Resources::new(1000, 1 << 30, 0).with_gpus(1)],
    );
    one.submit_time = Timestamp(2);
    b.jobs.push(one);
    let snap = b.snapshot();
    assert_eq!(snap.nodes[0].gpus.len(), 8, "slots made from the devices");
    let d = schedule(&snap, &Config::default(), Timestamp(0));
    let bound: BTreeSet<&str> = d.binds.iter().map(|b| b.job.as_str()).collect();
    assert_eq!(
        bound,
        BTreeSet::from(["ml/claims", "ml/six"]),
        "{:#?}",
        d.pending
    );
    let mut seen = BTreeSet::new();
    for c in &d.claims {
        for a in c.allocation.iter().flatten() {
            assert!(seen.insert(a.device.to_string()), "{} twice", a.device);
        }
    }
    assert_eq!(seen.len(), 8);
    let six = d
        .claims
        .iter()
        .find(|c| c.claim == "ml/six-0-extended-resources")
        .unwrap();
    assert_eq!(six.extended, ["nvidia.com/gpu"]);
    // The bind's slots are the claim's devices.
    let slots = &d
        .binds
        .iter()
        .find(|b| b.job.as_str() == "ml/six")
        .unwrap()
        .gpus;
    let devs: Vec<String> = six
        .allocation
        .iter()
        .flatten()
        .map(|a| a.device.to_string())
        .collect();
    let want: Vec<String> = slots.iter().map(|k| format!("gpu-{k}")).collect();
    assert_eq!(devs, want);
}
