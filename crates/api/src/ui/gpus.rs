//! The GPU map: every node grouped by its topology domains (widest level
//! first), every device with the jobs holding it as the core accounts
//! them (`trainyard_sched::holdings`), the cycle's reservations and
//! nominations, and the free devices a pending job could use. Pure: a
//! cycle in, JSON out (docs/ui.md, `/ui/api/gpus`).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use trainyard_model::Snapshot;
use trainyard_serve::view::CycleView;

use crate::auth::Visible;
use crate::convert;

/// A pending job's usable free devices: its id, and per node (by name)
/// the device indices (`trainyard_sched::free_devices_for`).
pub type Fit<'a> = (&'a str, &'a [(String, Vec<u32>)]);

/// Every job holding a device of cycle `c`, by id (to ask what the
/// caller sees of them).
pub fn holders(h: &[trainyard_sched::NodeHoldings]) -> Vec<&str> {
    let mut out: Vec<&str> = h
        .iter()
        .flat_map(|n| n.devices.iter())
        .flat_map(|d| d.holders.iter().map(|(j, _, _)| j.as_str()))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The map of cycle `c` with its device holders `h`, jobs `v` hides
/// named "" (their devices still show held), and `fit` (job id, node ->
/// device positions) when a pending job is selected.
pub fn map(
    c: &CycleView,
    h: &[trainyard_sched::NodeHoldings],
    v: &Visible,
    fit: Option<Fit<'_>>,
) -> Value {
    // Jobs by index; every job `v` hides shares one index, named "", so
    // a caller learns neither their names nor how many there are.
    let mut jobs: Vec<&str> = Vec::new();
    let mut hidden: Option<usize> = None;
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for id in holders(h) {
        let i = if v.shows_job(id) {
            jobs.push(id);
            jobs.len() - 1
        } else {
            *hidden.get_or_insert_with(|| {
                jobs.push("");
                jobs.len() - 1
            })
        };
        index.insert(id, i);
    }
    let node_pos: BTreeMap<&str, usize> = h
        .iter()
        .enumerate()
        .map(|(i, n)| (n.node.as_str(), i))
        .collect();
    let by_name: BTreeMap<&str, &trainyard_model::Node> = c
        .snapshot
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), &**n))
        .collect();
    let (levels, domains, tightest) = domains(&c.snapshot, &node_pos);
    let nodes: Vec<Value> = h
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let devices: Vec<Value> = n
                .devices
                .iter()
                .map(|d| {
                    let mut cells: Vec<Value> = d
                        .holders
                        .iter()
                        // Every holder is in `index`: it was built from them.
                        .map(|(job, _, milli)| json!([index[job.as_str()], milli]))
                        .collect();
                    if d.outside > 0 {
                        cells.push(json!([-1, d.outside]));
                    }
                    Value::Array(cells)
                })
                .collect();
            json!({
                "name": n.node,
                "domain": tightest.get(i).cloned().unwrap_or_default(),
                "cordoned": by_name.get(n.node.as_str()).is_some_and(|n| n.unschedulable),
                "devices": devices,
            })
        })
        .collect();
    let (reservations, nominations) = plans(c, h, &node_pos, v);
    let fit = fit.map(|(job, nodes)| {
        let at: BTreeMap<&str, Vec<u32>> = nodes
            .iter()
            .map(|(n, idx)| (n.as_str(), positions(h, &node_pos, n, idx)))
            .collect();
        let devices: usize = at.values().map(Vec::len).sum();
        json!({
            "job": job,
            "nodes": at,
            "message": format!(
                "{devices} free device(s) on {} node(s) where its pods pass their filters and fit",
                at.len()
            ),
        })
    });
    json!({
        "cycle": super::cycle_json(&convert::cycle(c)),
        "levels": levels,
        "domains": domains,
        "nodes": nodes,
        "jobs": jobs,
        "reservations": reservations,
        "nominations": nominations,
        "fit": fit,
    })
}

/// The cycle's reservations and nominations of the jobs `v` shows
/// (nominated devices as positions).
fn plans(
    c: &CycleView,
    h: &[trainyard_sched::NodeHoldings],
    node_pos: &BTreeMap<&str, usize>,
    v: &Visible,
) -> (Vec<Value>, Vec<Value>) {
    let reservations: Vec<Value> = c
        .decisions
        .reservations
        .iter()
        .filter(|r| v.shows_job(r.job.as_str()))
        .map(|r| {
            json!({
                "job": r.job.to_string(),
                "nodes": r.nodes.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
                "startMs": r.start.0,
            })
        })
        .collect();
    let nominations: Vec<Value> = c
        .decisions
        .nominations
        .iter()
        .filter(|n| v.shows_job(n.job.as_str()))
        .map(|n| {
            json!({
                "job": n.job.to_string(),
                "pod": n.task.to_string(),
                "node": n.node.to_string(),
                "gpus": positions(h, node_pos, n.node.as_str(), &n.gpus),
            })
        })
        .collect();
    (reservations, nominations)
}

/// Device indices on `node` as positions in its device list.
fn positions(
    h: &[trainyard_sched::NodeHoldings],
    node_pos: &BTreeMap<&str, usize>,
    node: &str,
    indices: &[u32],
) -> Vec<u32> {
    let Some(&n) = node_pos.get(node) else {
        return Vec::new();
    };
    // `node_pos` holds the positions of `h`.
    indices
        .iter()
        .filter_map(|i| h[n].devices.iter().position(|d| d.index == *i))
        .map(|p| p as u32)
        .collect()
}

/// The topology's levels (widest first), its domains nested widest
/// first with each node in its tightest domain, and each node's tightest
/// domain name (by position in `node_pos`). Without a topology, one
/// domain holds every node.
fn domains(
    snapshot: &Snapshot,
    node_pos: &BTreeMap<&str, usize>,
) -> (Vec<String>, Vec<Value>, Vec<String>) {
    let all = || (0..node_pos.len()).collect::<Vec<usize>>();
    let Some(topo) = &snapshot.topology else {
        let d = json!({"level": "", "name": "all nodes", "domains": [], "nodes": all()});
        return (Vec::new(), vec![d], Vec::new());
    };
    let levels = topo.levels();
    // Per level, per domain: child domains (of the next tighter level)
    // and member nodes (those whose tightest domain it is).
    let mut children: Vec<Vec<Vec<u32>>> = levels
        .iter()
        .map(|l| vec![Vec::new(); l.domains.len()])
        .collect();
    let mut members: Vec<Vec<Vec<usize>>> = levels
        .iter()
        .map(|l| vec![Vec::new(); l.domains.len()])
        .collect();
    for (li, l) in levels.iter().enumerate().skip(1) {
        let tighter = &levels[li - 1];
        for (di, d) in tighter.domains.iter().enumerate() {
            if let Some(p) = d.parent
                && (p as usize) < l.domains.len()
            {
                children[li][p as usize].push(di as u32);
            }
        }
    }
    let mut tightest = vec![String::new(); node_pos.len()];
    let mut loose = Vec::new();
    for (name, &pos) in node_pos {
        let found = topo.node_id(name).and_then(|id| {
            levels.iter().enumerate().find_map(|(li, l)| {
                l.of_node
                    .get(id as usize)
                    .copied()
                    .flatten()
                    .map(|d| (li, d))
            })
        });
        match found {
            Some((li, d)) => {
                members[li][d as usize].push(pos);
                tightest[pos] = levels[li].domains[d as usize].name.clone();
            }
            None => loose.push(pos),
        }
    }
    fn build(
        levels: &[trainyard_model::topology::Level],
        children: &[Vec<Vec<u32>>],
        members: &[Vec<Vec<usize>>],
        li: usize,
        di: usize,
    ) -> Value {
        let kids: Vec<Value> = if li == 0 {
            Vec::new()
        } else {
            children[li][di]
                .iter()
                .map(|&c| build(levels, children, members, li - 1, c as usize))
                .collect()
        };
        json!({
            "level": levels[li].name,
            "name": levels[li].domains[di].name,
            "domains": kids,
            "nodes": members[li][di],
        })
    }
    // Top: every domain with no parent, widest level first.
    let mut top = Vec::new();
    for li in (0..levels.len()).rev() {
        for (di, d) in levels[li].domains.iter().enumerate() {
            let has_parent = li + 1 < levels.len() && d.parent.is_some();
            if !has_parent {
                top.push(build(levels, &children, &members, li, di));
            }
        }
    }
    if !loose.is_empty() {
        top.push(json!({"level": "", "name": "no domain", "domains": [], "nodes": loose}));
    }
    let level_names = levels.iter().rev().map(|l| l.name.clone()).collect();
    (level_names, top, tightest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::tests::cycle_of;

    fn node(name: &str, block: &str, rack: &str) -> String {
        format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{example.com/block: {block}, example.com/rack: {rack}}}}}\nstatus: {{allocatable: {{cpu: '64', memory: 512Gi, pods: '110', nvidia.com/gpu: '4'}}}}\n"
        )
    }

    /// Blocks b0 (racks r1: a0; r2: b0) and b1 (rack r3: c0, with a pod
    /// outside Trainyard on devices 0 and 2); `ml/run` bound on a0's
    /// devices 1 and 3; `ml/wait` pending, for block b1 only.
    fn cluster() -> CycleView {
        let mut text = String::new();
        text += &node("a0", "b0", "r1");
        text += &node("b0", "b0", "r2");
        text += &node("c0", "b1", "r3");
        text += "---
apiVersion: trainyard.io/v1alpha1
kind: Topology
metadata: {name: racks}
spec:
  levels:
  - {name: block, nodeLabel: example.com/block}
  - {name: rack, nodeLabel: example.com/rack}
---
apiVersion: v1
kind: Pod
metadata: {name: other, namespace: x, annotations: {trainyard.io/gpu-indices: '0,2'}}
spec: {nodeName: c0, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '2'}}}]}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: run, namespace: ml, annotations: {trainyard.io/gpu-indices: '1,3'}}
spec: {schedulerName: trainyard, nodeName: a0, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '2'}}}]}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: wait, namespace: ml}
spec: {schedulerName: trainyard, nodeSelector: {example.com/block: b1}, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '1'}}}]}
";
        cycle_of(&text)
    }

    #[test]
    fn nodes_nest_in_their_domains_and_devices_name_their_holders() {
        let c = cluster();
        let h = trainyard_sched::holdings(&c.snapshot, &c.config, c.now);
        let fit = trainyard_sched::free_devices_for(&c.snapshot, &c.config, c.now, "ml/wait")
            .expect("wait is pending");
        let m = map(&c, &h, &Visible::All, Some(("ml/wait", &fit)));
        assert_eq!(m["levels"], json!(["block", "rack"]));
        let tree: Vec<String> = m["domains"]
            .as_array()
            .expect("domains")
            .iter()
            .map(|b| {
                let racks: Vec<String> = b["domains"]
                    .as_array()
                    .expect("racks")
                    .iter()
                    .map(|r| format!("{}:{}", r["name"].as_str().unwrap_or(""), r["nodes"]))
                    .collect();
                format!("{} [{}]", b["name"].as_str().unwrap_or(""), racks.join(" "))
            })
            .collect();
        // Domain names are qualified by their parent, as the topology names them.
        assert_eq!(tree, ["b0 [b0/r1:[0] b0/r2:[1]]", "b1 [b1/r3:[2]]"]);
        assert_eq!(m["jobs"], json!(["ml/run"]));
        assert_eq!(
            m["nodes"][0]["devices"],
            json!([[], [[0, 1000]], [], [[0, 1000]]])
        );
        assert_eq!(
            m["nodes"][2]["devices"],
            json!([[[-1, 1000]], [], [[-1, 1000]], []])
        );
        // wait's selector allows c0 only, where devices 1 and 3 are free.
        assert_eq!(m["fit"]["nodes"], json!({"c0": [1, 3]}));
        // A caller who may not see ml: run's devices held, its name not.
        let hidden = map(&c, &h, &Visible::Only(Default::default()), None);
        assert_eq!(hidden["jobs"], json!([""]));
        assert_eq!(hidden["fit"], Value::Null);
    }
}
