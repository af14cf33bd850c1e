//! Property: over random devices, selectors and gangs, the decisions never
//! allocate a device twice, never draw a counter set past its total, and
//! every allocation satisfies its request's selectors (recomputed here from
//! the devices, not read from the snapshot's masks), taints, count and the
//! claim's constraints; no gang is bound in part; a claim's pods sit on
//! its node.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use trainyard_model::dra::{
    AllocatedDevice, AllocationMode, ClaimSpec, DeviceConstraint, DeviceTaint, DeviceTaintEffect,
    taint_blocks,
};
use trainyard_model::{Snapshot, Timestamp};
use trainyard_sched::{Config, Decisions, schedule};

use super::support::*;

const SELECTORS: [&str; 6] = [
    "*",
    "type=gpu",
    "type=gpu&productName=H100",
    "type=nic",
    "type=half",
    "type=whole",
];

#[derive(Clone, Debug)]
struct NodeGen {
    gpus: Vec<(bool, u8, bool)>, // (H100, root, tainted)
    nics: u8,
    partitionable: bool,
}

#[derive(Clone, Debug)]
struct ReqGen {
    sel: usize,
    alt: Option<usize>,
    count: u32,
    all: bool,
}

#[derive(Clone, Debug)]
struct JobGen {
    pods: usize,
    reqs: Vec<ReqGen>,
    constraint: u8, // 0 none, 1 match pcieRoot, 2 distinct pcieRoot
    shared: bool,
}

fn node_gen() -> impl Strategy<Value = NodeGen> {
    (
        prop::collection::vec((any::<bool>(), 0u8..4, prop::bool::weighted(0.1)), 0..8),
        0u8..3,
        prop::bool::weighted(0.3),
    )
        .prop_map(|(gpus, nics, partitionable)| NodeGen {
            gpus,
            nics,
            partitionable,
        })
}

fn req_gen() -> impl Strategy<Value = ReqGen> {
    (
        0..SELECTORS.len(),
        prop::option::weighted(0.2, 0..SELECTORS.len()),
        1u32..4,
        prop::bool::weighted(0.1),
    )
        .prop_map(|(sel, alt, count, all)| ReqGen {
            sel,
            alt,
            count,
            all,
        })
}

fn job_gen() -> impl Strategy<Value = JobGen> {
    (
        1usize..4,
        prop::collection::vec(req_gen(), 1..3),
        0u8..3,
        prop::bool::weighted(0.2),
    )
        .prop_map(|(pods, reqs, constraint, shared)| JobGen {
            pods,
            reqs,
            constraint,
            shared,
        })
}

fn build(nodes: &[NodeGen], jobs: &[JobGen]) -> Build {
    let mut b = Build::default();
    for (i, n) in nodes.iter().enumerate() {
        let mut devices = Vec::new();
        for (g, (h100, root, tainted)) in n.gpus.iter().enumerate() {
            let product = if *h100 { "H100" } else { "A100" };
            let mut d = device(
                &format!("gpu-{g}"),
                &[
                    ("type", "gpu"),
                    ("productName", product),
                    ("pcieRoot", &format!("pci{root}")),
                ],
            );
            if *tainted {
                d.taints.push(DeviceTaint {
                    key: "bad".into(),
                    value: String::new(),
                    effect: DeviceTaintEffect::NoSchedule,
                });
            }
            devices.push(d);
        }
        for k in 0..n.nics {
            devices.push(device(
                &format!("nic-{k}"),
                &[("type", "nic"), ("pcieRoot", &format!("pci{k}"))],
            ));
        }
        let nd = b.node(&format!("n{i}"), devices);
        if n.partitionable {
            partitionable(nd, "part", 2, true);
        }
    }
    for (j, g) in jobs.iter().enumerate() {
        let mut requests = Vec::new();
        for (r, q) in g.reqs.iter().enumerate() {
            let name = format!("r{r}");
            let mode = if q.all {
                AllocationMode::All
            } else {
                AllocationMode::ExactCount(q.count)
            };
            let mut req = match q.alt {
                None => trainyard_model::dra::DeviceRequest {
                    name: name.clone(),
                    alternatives: vec![b.sub(&name, SELECTORS[q.sel], mode)],
                },
                Some(alt) => b.first_available(
                    &name,
                    &[("a", SELECTORS[q.sel], q.count), ("b", SELECTORS[alt], 1)],
                ),
            };
            if q.all && q.alt.is_none() {
                req.alternatives[0].mode = AllocationMode::All;
            }
            requests.push(req);
        }
        let constraints = match g.constraint {
            1 => vec![match_attr("pcieRoot")],
            2 => vec![DeviceConstraint {
                distinct: true,
                ..match_attr("pcieRoot")
            }],
            _ => Vec::new(),
        };
        let s = spec(requests, constraints);
        if g.shared {
            b.sharing_gang(&format!("ml/j{j}"), g.pods, &format!("ml/j{j}-shared"), s);
        } else {
            b.gang(&format!("ml/j{j}"), g.pods, s);
        }
    }
    b
}

/// Every property the decisions must keep, recomputed from `b` and `d`.
fn check(b: &Build, snap: &Snapshot, d: &Decisions) -> Result<(), String> {
    // No partial gang.
    let mut bound: BTreeMap<&str, usize> = BTreeMap::new();
    for x in &d.binds {
        *bound.entry(x.job.as_str()).or_default() += 1;
    }
    for j in &b.jobs {
        let n = bound.get(j.id.as_str()).copied().unwrap_or(0);
        if n != 0 && n < j.min_member as usize {
            return Err(format!("{} bound {n} of {}", j.id, j.min_member));
        }
    }
    // Every bound pod's claims are decided, on its node.
    let at: BTreeMap<String, &str> = d
        .binds
        .iter()
        .map(|x| (x.task.to_string(), x.node.as_str()))
        .collect();
    let decided: BTreeMap<&str, &trainyard_sched::ClaimDecision> =
        d.claims.iter().map(|c| (c.claim.as_str(), c)).collect();
    if decided.len() != d.claims.len() {
        return Err("a claim decided twice".into());
    }
    for j in &b.jobs {
        for t in &j.tasks {
            let Some(node) = at.get(&t.key.to_string()) else {
                continue;
            };
            for pc in &t.claims {
                let Some(c) = decided.get(pc.claim.as_str()) else {
                    return Err(format!("{} bound without claim {}", t.name, pc.claim));
                };
                if c.node.as_str() != *node {
                    return Err(format!(
                        "claim {} on {} but pod {} on {node}",
                        pc.claim, c.node, t.name
                    ));
                }
            }
        }
    }
    // Devices: each allocated once, counters within their sets.
    let mut uses: BTreeMap<(String, String), u32> = BTreeMap::new();
    for c in &d.claims {
        let Some(devs) = &c.allocation else { continue };
        let spec = &snap.dra.claims[&c.claim].spec;
        check_claim(b, c.node.as_str(), spec, devs)
            .map_err(|e| format!("claim {}: {e}", c.claim))?;
        for a in devs {
            *uses
                .entry((c.node.to_string(), a.device.to_string()))
                .or_default() += 1;
        }
    }
    if let Some(((n, dev), k)) = uses.iter().find(|(_, k)| **k > 1) {
        return Err(format!("{n}/{dev} allocated {k} times"));
    }
    for (node, nd) in &b.devices {
        for set in &nd.counter_sets {
            let drawn: u64 = nd
                .devices
                .iter()
                .filter(|dv| uses.contains_key(&(node.clone(), dv.name.to_string())))
                .flat_map(|dv| dv.consumes.iter().filter(|u| u.set == set.name))
                .map(|u| u.counters.get("memory").copied().unwrap_or(0))
                .sum();
            if drawn > set.counters["memory"] {
                return Err(format!("{node}: counter set {} drawn {drawn}", set.name));
            }
        }
    }
    Ok(())
}

fn check_claim(
    b: &Build,
    node: &str,
    spec: &ClaimSpec,
    devs: &[AllocatedDevice],
) -> Result<(), String> {
    let nd = &b.devices[node];
    let find = |name: &str| nd.devices.iter().find(|d| &*d.name == name);
    for req in &spec.requests {
        let got: Vec<&AllocatedDevice> = devs
            .iter()
            .filter(|a| *a.request == *req.name || a.request.starts_with(&format!("{}/", req.name)))
            .collect();
        let alt = req
            .alternatives
            .iter()
            .find(|s| got.first().is_some_and(|a| *a.request == *s.name))
            .ok_or_else(|| format!("request {} has no devices", req.name))?;
        let sel = &b.sels[alt.selector as usize];
        for a in &got {
            if *a.request != *alt.name {
                return Err(format!("request {} mixes alternatives", req.name));
            }
            let dv = find(&a.device).ok_or_else(|| format!("unknown device {}", a.device))?;
            if !sel.accepts(dv) {
                return Err(format!("{} does not match {:?}", a.device, sel.0));
            }
            if dv.taints.iter().any(|t| taint_blocks(t, &alt.tolerations)) {
                return Err(format!("{} is tainted", a.device));
            }
        }
        match alt.mode {
            AllocationMode::ExactCount(k) if got.len() != k as usize => {
                return Err(format!(
                    "request {}: {} devices for {k}",
                    req.name,
                    got.len()
                ));
            }
            AllocationMode::All => {
                // Every device the selectors accept and the request may take
                // (a taint it does not tolerate leaves a device out).
                let all = nd
                    .devices
                    .iter()
                    .filter(|d| sel.accepts(d))
                    .filter(|d| !d.taints.iter().any(|t| taint_blocks(t, &alt.tolerations)))
                    .count();
                if got.len() != all || all == 0 {
                    return Err(format!(
                        "request {} in All mode: {} of {all}",
                        req.name,
                        got.len()
                    ));
                }
            }
            _ => {}
        }
    }
    for k in &spec.constraints {
        let values: Vec<Option<String>> = devs
            .iter()
            .map(|a| {
                find(&a.device)
                    .and_then(|d| d.attributes.get(&k.attribute))
                    .map(|v| v.to_string())
            })
            .collect();
        if values.iter().any(Option::is_none) {
            return Err(format!("a device lacks {}", k.attribute));
        }
        let distinct: BTreeSet<_> = values.iter().collect();
        if k.distinct && distinct.len() != values.len() {
            return Err(format!("{} not distinct: {values:?}", k.attribute));
        }
        if !k.distinct && distinct.len() > 1 {
            return Err(format!("{} not equal: {values:?}", k.attribute));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn allocations_keep_every_rule(
        nodes in prop::collection::vec(node_gen(), 1..4),
        jobs in prop::collection::vec(job_gen(), 1..5),
    ) {
        let b = build(&nodes, &jobs);
        let snap = b.snapshot();
        let d = schedule(&snap, &Config::default(), Timestamp(0));
        if let Err(e) = check(&b, &snap, &d) {
            prop_assert!(false, "{e}\n{:#?}", d.claims);
        }
    }
}
