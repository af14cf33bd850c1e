//! Trainyard's network topology model.
//!
//! A [`Topology`] is a petgraph graph of typed vertices — spine and leaf
//! switches, NVLink domains, nodes, NUMA sockets, GPUs and NICs — and typed
//! edges (GPU–NIC affinity, NIC–leaf cables, leaf–spine cables, NVLink
//! membership). It is a graph, not a tree: in a rail-optimized fabric a
//! node's eight NICs hang under eight leaves.
//!
//! From the graph, [`Topology::build`] derives what the scheduler asks
//! cheaply, many times per cycle:
//! - **levels**, tightest first, each a partition of nodes into domains
//!   (an NVLink domain, a leaf group, a spine block, or a tree level read
//!   from node labels), validated to nest;
//! - per node and GPU the rail leaf and NUMA socket;
//! - [`Topology::distance`] between two GPUs, and [`Topology::span`] of a
//!   placed gang (leaves, spine crossings, rail alignment).
//!
//! Free capacity per domain depends on the cluster state, so the scheduling
//! core computes it; this crate is static and pure (no I/O, no clock).

pub mod generate;
pub mod labels;
pub mod spec;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use petgraph::graph::{NodeIndex, UnGraph};
use petgraph::visit::EdgeRef;
use serde::{Deserialize, Serialize};

pub use labels::NodeInput;
pub use spec::{
    DomainSpec, FabricLevel, GpuAffinitySpec, LevelSpec, LinkSpec, NodeFabricSpec, SwitchKind,
    SwitchSpec, TopologySpec,
};

/// Why a topology is invalid. Every variant names the offending item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("levels[{index}] ({name:?}): {message}")]
    BadLevel {
        index: usize,
        name: String,
        message: String,
    },
    #[error("switches: switch {name:?} is declared twice")]
    DuplicateSwitch { name: String },
    #[error("links[{index}] ({from} → {to}): {message}")]
    DanglingLink {
        index: usize,
        from: String,
        to: String,
        message: String,
    },
    #[error("level {level:?}: node {node:?} is in two domains, {first:?} and {second:?}")]
    NodeInTwoDomains {
        level: String,
        node: String,
        first: String,
        second: String,
    },
    #[error(
        "level {level:?}: domain {domain:?} is not inside one domain of level {wider:?} (its nodes {a:?} and {b:?} are in different ones); levels must nest"
    )]
    NotNested {
        level: String,
        domain: String,
        wider: String,
        a: String,
        b: String,
    },
    #[error("node {node}: label {label}={value:?}: expected {expected}")]
    BadLabel {
        node: String,
        label: String,
        value: String,
        expected: String,
    },
    #[error("nodes: node {node:?}: GPU {index}: {message}")]
    BadAffinity {
        node: String,
        index: u32,
        message: String,
    },
}

/// A vertex of the topology graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Vertex {
    Spine { name: String, block: String },
    Leaf { name: String },
    Nvlink { name: String },
    Node { name: String },
    Numa { node: u32, socket: u32 },
    Gpu { node: u32, index: u32 },
    Nic { node: u32, index: u32 },
}

/// An edge of the topology graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    /// Node ↔ its NUMA socket; socket ↔ its GPUs and NICs.
    Contains,
    /// GPU ↔ the NIC closest to it (its rail).
    GpuNic,
    /// NIC ↔ leaf switch.
    NicLeaf,
    /// Leaf ↔ spine.
    LeafSpine,
    /// Node ↔ its NVLink domain.
    NvlinkMember,
}

/// How close two GPUs are, tightest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Distance {
    SameNode,
    SameNvlink,
    /// Same leaf switch (for rails: same rail leaf).
    SameLeaf,
    /// Different leaves under one spine block.
    SameBlock,
    AcrossSpines,
}

/// How a level's domains are formed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LevelKind {
    Fabric(FabricLevel),
    NodeLabel(String),
    Explicit,
}

/// One domain: a named set of nodes (indices into [`Topology::node_names`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    pub name: String,
    pub nodes: Vec<u32>,
    /// The domain of the next wider level containing this one.
    pub parent: Option<u32>,
}

/// One level: a partition of (some) nodes into domains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Level {
    pub name: String,
    pub kind: LevelKind,
    /// Sorted by name.
    pub domains: Vec<Domain>,
    /// Domain of each node at this level; `None` when the node is in none.
    pub of_node: Vec<Option<u32>>,
}

#[derive(Clone, Debug)]
struct NodeTopo {
    /// Rail leaf of each GPU (by device index), as a leaf-switch id.
    gpu_leaf: Vec<Option<u32>>,
    /// NUMA socket of each GPU (by device index).
    gpu_numa: Vec<Option<u32>>,
    nvlink: Option<u32>,
}

/// A validated topology over a fixed list of nodes. Serialises as the
/// (label-merged) spec and the label values its levels read, and
/// deserialises by building again.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "TopologySource", into = "TopologySource")]
pub struct Topology {
    source: TopologySource,
    graph: UnGraph<Vertex, Edge>,
    node_names: Vec<String>,
    node_ids: BTreeMap<String, u32>,
    nodes: Vec<NodeTopo>,
    /// Tightest first.
    levels: Vec<Level>,
    /// Spine blocks above each leaf switch (sorted block ids).
    leaf_blocks: Vec<Vec<u32>>,
    leaf_level: Option<usize>,
    warnings: Vec<String>,
}

/// What a [`Topology`] is built from, in serialisable form.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologySource {
    pub spec: TopologySpec,
    /// Nodes with their GPU count and the labels the levels read.
    pub nodes: Vec<SourceNode>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceNode {
    pub name: String,
    pub gpus: u32,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl TryFrom<TopologySource> for Topology {
    type Error = TopologyError;
    fn try_from(src: TopologySource) -> Result<Self, Self::Error> {
        let inputs: Vec<NodeInput> = src
            .nodes
            .iter()
            .map(|n| NodeInput {
                name: &n.name,
                labels: &n.labels,
                gpus: n.gpus,
            })
            .collect();
        Topology::build_merged(src.spec.clone(), &inputs)
    }
}

impl From<Topology> for TopologySource {
    fn from(t: Topology) -> Self {
        t.source
    }
}

/// How a placed gang sits on the fabric.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Span {
    /// Distinct nodes.
    pub nodes: u32,
    /// Distinct domains of the leaf level (leaf groups / ToRs).
    pub leaves: u32,
    /// Tightest level with one domain holding every pod (index into
    /// [`Topology::levels`]); `None`: only the whole cluster does.
    pub level: Option<u32>,
    /// Ring hops (pod *i* → pod *i+1*, closing the ring) between nodes.
    pub hops: u32,
    /// Hops whose traffic crosses a spine: some GPU pair with the same local
    /// rank is on different leaves (different rails, or different leaf groups).
    pub spine_crossings: u32,
    /// Pods use GPU index sets that are equal or disjoint, so local rank *r*
    /// of every pod is on the same rail.
    pub rail_aligned: bool,
}

impl Topology {
    /// Builds and validates a topology for `nodes` from `spec` plus the
    /// nodes' topology labels (see [`labels`]). Returns `Ok(None)` when
    /// neither says anything.
    pub fn build(
        spec: &TopologySpec,
        nodes: &[NodeInput],
    ) -> Result<Option<Topology>, TopologyError> {
        if spec.is_empty() && !labels::any_labelled(nodes) {
            return Ok(None);
        }
        let mut merged = spec.clone();
        labels::apply_node_labels(&mut merged, nodes)?;
        Topology::build_merged(merged, nodes).map(Some)
    }

    fn build_merged(spec: TopologySpec, inputs: &[NodeInput]) -> Result<Topology, TopologyError> {
        let mut sorted: Vec<&NodeInput> = inputs.iter().collect();
        sorted.sort_by(|a, b| a.name.cmp(b.name));
        sorted.dedup_by(|a, b| a.name == b.name);
        let node_names: Vec<String> = sorted.iter().map(|n| n.name.to_string()).collect();
        let node_ids: BTreeMap<String, u32> = node_names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i as u32))
            .collect();
        let mut warnings = Vec::new();
        let mut g: UnGraph<Vertex, Edge> = UnGraph::default();

        // Switches.
        let mut leaf_ids: BTreeMap<&str, u32> = BTreeMap::new();
        let mut leaf_vertex: Vec<NodeIndex> = Vec::new();
        let mut spine_vertex: BTreeMap<&str, (NodeIndex, &str)> = BTreeMap::new();
        let mut block_ids: BTreeMap<&str, u32> = BTreeMap::new();
        for s in &spec.switches {
            if leaf_ids.contains_key(s.name.as_str()) || spine_vertex.contains_key(s.name.as_str())
            {
                return Err(TopologyError::DuplicateSwitch {
                    name: s.name.clone(),
                });
            }
            match s.kind {
                SwitchKind::Leaf => {
                    leaf_ids.insert(&s.name, leaf_vertex.len() as u32);
                    leaf_vertex.push(g.add_node(Vertex::Leaf {
                        name: s.name.clone(),
                    }));
                }
                SwitchKind::Spine => {
                    let block = s.block.as_deref().unwrap_or(&s.name);
                    let next = block_ids.len() as u32;
                    block_ids.entry(block).or_insert(next);
                    let v = g.add_node(Vertex::Spine {
                        name: s.name.clone(),
                        block: block.to_string(),
                    });
                    spine_vertex.insert(&s.name, (v, block));
                }
            }
        }
        let leaf_names: Vec<&str> = {
            let mut v = vec![""; leaf_ids.len()];
            for (name, id) in &leaf_ids {
                v[*id as usize] = name;
            }
            v
        };

        // Nodes, with NUMA sockets, GPUs and NICs.
        let affinity: BTreeMap<&str, &NodeFabricSpec> =
            spec.nodes.iter().map(|n| (n.node.as_str(), n)).collect();
        for a in &spec.nodes {
            if !node_ids.contains_key(&a.node) {
                warnings.push(format!(
                    "topology: nodes: {} is not a node of the cluster; ignored",
                    a.node
                ));
            }
        }
        let mut node_vertex = Vec::with_capacity(sorted.len());
        let mut gpu_vertex: Vec<Vec<NodeIndex>> = Vec::with_capacity(sorted.len());
        let mut nodes: Vec<NodeTopo> = Vec::with_capacity(sorted.len());
        let mut gpu_nic: Vec<Vec<Option<u32>>> = Vec::with_capacity(sorted.len());
        for (id, n) in sorted.iter().enumerate() {
            let id = id as u32;
            let nv = g.add_node(Vertex::Node {
                name: n.name.to_string(),
            });
            node_vertex.push(nv);
            let mut numa = vec![None; n.gpus as usize];
            let mut nic = vec![None; n.gpus as usize];
            if let Some(a) = affinity.get(n.name) {
                for gspec in &a.gpus {
                    let Some(slot) = numa.get_mut(gspec.index as usize) else {
                        return Err(TopologyError::BadAffinity {
                            node: n.name.to_string(),
                            index: gspec.index,
                            message: format!(
                                "the node has {} GPUs (indices 0..{})",
                                n.gpus, n.gpus
                            ),
                        });
                    };
                    *slot = gspec.numa;
                    nic[gspec.index as usize] = gspec.nic;
                }
            }
            let mut sockets: BTreeMap<u32, NodeIndex> = BTreeMap::new();
            let mut gv = Vec::with_capacity(n.gpus as usize);
            for i in 0..n.gpus {
                let v = g.add_node(Vertex::Gpu { node: id, index: i });
                if let Some(s) = numa[i as usize] {
                    let sv = *sockets.entry(s).or_insert_with(|| {
                        let sv = g.add_node(Vertex::Numa {
                            node: id,
                            socket: s,
                        });
                        g.add_edge(nv, sv, Edge::Contains);
                        sv
                    });
                    g.add_edge(sv, v, Edge::Contains);
                } else {
                    g.add_edge(nv, v, Edge::Contains);
                }
                gv.push(v);
            }
            gpu_vertex.push(gv);
            nodes.push(NodeTopo {
                gpu_leaf: vec![None; n.gpus as usize],
                gpu_numa: numa,
                nvlink: None,
            });
            // NIC affinity is resolved after the links create the NICs.
            gpu_nic.push(nic);
        }

        // Links. A node's NICs: index → (vertex, leaf id).
        let mut nics: Vec<BTreeMap<u32, (NodeIndex, u32)>> = vec![BTreeMap::new(); sorted.len()];
        let mut uplink: Vec<Option<u32>> = vec![None; sorted.len()];
        let mut leaf_spines: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); leaf_vertex.len()];
        for (index, l) in spec.links.iter().enumerate() {
            let dangling = |message: String| TopologyError::DanglingLink {
                index,
                from: l.from.clone(),
                to: l.to.clone(),
                message,
            };
            if let Some(&leaf) = leaf_ids.get(l.from.as_str()) {
                let Some(&(sv, block)) = spine_vertex.get(l.to.as_str()) else {
                    return Err(dangling(if leaf_ids.contains_key(l.to.as_str()) {
                        "a leaf links up to a spine, not to another leaf".into()
                    } else {
                        format!("no spine switch named {:?} is declared", l.to)
                    }));
                };
                g.add_edge(leaf_vertex[leaf as usize], sv, Edge::LeafSpine);
                leaf_spines[leaf as usize].insert(block_ids[block]);
                continue;
            }
            let Some(&leaf) = leaf_ids.get(l.to.as_str()) else {
                return Err(dangling(if spine_vertex.contains_key(l.to.as_str()) {
                    "nodes and NICs link to leaf switches, not to spines".into()
                } else {
                    format!("no leaf switch named {:?} is declared", l.to)
                }));
            };
            let (node_name, nic_ix) = match l.from.split_once('/') {
                Some((n, nic)) => match nic.strip_prefix("nic").and_then(|k| k.parse::<u32>().ok())
                {
                    Some(k) => (n, Some(k)),
                    None => {
                        return Err(dangling(format!(
                            "expected NODE/nicN (e.g. node-1/nic0), got NIC {nic:?}"
                        )));
                    }
                },
                None => (l.from.as_str(), None),
            };
            let Some(&nid) = node_ids.get(node_name) else {
                if spine_vertex.contains_key(node_name) {
                    return Err(dangling("a spine is the upper end of a link".into()));
                }
                warnings.push(format!(
                    "topology: links[{index}]: {node_name} is neither a declared switch nor a node of the cluster; ignored"
                ));
                continue;
            };
            let n = nid as usize;
            match nic_ix {
                None => {
                    if uplink[n].is_some_and(|u| u != leaf) {
                        return Err(dangling(format!(
                            "node {node_name} already has an uplink to {:?}; use NODE/nicN links for several NICs",
                            leaf_names[uplink[n].unwrap_or(0) as usize]
                        )));
                    }
                    uplink[n] = Some(leaf);
                    let v = g.add_node(Vertex::Nic {
                        node: nid,
                        index: 0,
                    });
                    g.add_edge(node_vertex[n], v, Edge::Contains);
                    g.add_edge(v, leaf_vertex[leaf as usize], Edge::NicLeaf);
                    nics[n].insert(0, (v, leaf));
                }
                Some(k) => {
                    if nics[n].get(&k).is_some_and(|(_, l0)| *l0 != leaf) {
                        return Err(dangling(format!(
                            "NIC {k} of node {node_name} is linked to two leaves"
                        )));
                    }
                    let v = g.add_node(Vertex::Nic {
                        node: nid,
                        index: k,
                    });
                    g.add_edge(node_vertex[n], v, Edge::Contains);
                    g.add_edge(v, leaf_vertex[leaf as usize], Edge::NicLeaf);
                    nics[n].insert(k, (v, leaf));
                }
            }
        }
        // GPU → NIC: explicit affinity, else spread GPUs evenly over the
        // node's NICs in index order (8 GPUs, 8 NICs: GPU i ↔ NIC i).
        for (n, node) in nodes.iter_mut().enumerate() {
            let list: Vec<(u32, (NodeIndex, u32))> =
                nics[n].iter().map(|(k, v)| (*k, *v)).collect();
            let gpus = node.gpu_leaf.len();
            for i in 0..gpus {
                let chosen = match gpu_nic[n][i] {
                    Some(k) => match nics[n].get(&k) {
                        Some(v) => Some(*v),
                        None => {
                            warnings.push(format!(
                                "topology: node {}: GPU {i} names NIC {k}, which links nowhere",
                                node_names[n]
                            ));
                            None
                        }
                    },
                    None if list.is_empty() => None,
                    None => Some(list[i * list.len() / gpus].1),
                };
                node.gpu_leaf[i] = chosen.map(|(_, leaf)| leaf);
                if let Some((nv, _)) = chosen {
                    g.add_edge(gpu_vertex[n][i], nv, Edge::GpuNic);
                }
            }
        }
        // Leaf blocks, read back from the graph.
        let mut leaf_blocks: Vec<Vec<u32>> = vec![Vec::new(); leaf_vertex.len()];
        for (l, v) in leaf_vertex.iter().enumerate() {
            let mut blocks: BTreeSet<u32> = BTreeSet::new();
            for e in g.edges(*v) {
                if let Vertex::Spine { block, .. } = &g[e.target()] {
                    blocks.insert(block_ids[block.as_str()]);
                }
            }
            debug_assert_eq!(blocks, leaf_spines[l]);
            leaf_blocks[l] = blocks.into_iter().collect();
        }

        // NVLink domains.
        let mut nvlink_domains: Vec<(String, Vec<u32>)> = Vec::new();
        for d in &spec.nvlink_domains {
            let dv = g.add_node(Vertex::Nvlink {
                name: d.name.clone(),
            });
            let id = nvlink_domains.len() as u32;
            let mut members = Vec::new();
            for name in &d.nodes {
                let Some(&n) = node_ids.get(name) else {
                    warnings.push(format!(
                        "topology: NVLink domain {}: {name} is not a node of the cluster; ignored",
                        d.name
                    ));
                    continue;
                };
                if let Some(prev) = nodes[n as usize].nvlink
                    && prev != id
                {
                    return Err(TopologyError::NodeInTwoDomains {
                        level: "nvlink".into(),
                        node: name.clone(),
                        first: nvlink_domains[prev as usize].0.clone(),
                        second: d.name.clone(),
                    });
                }
                nodes[n as usize].nvlink = Some(id);
                g.add_edge(node_vertex[n as usize], dv, Edge::NvlinkMember);
                members.push(n);
            }
            nvlink_domains.push((d.name.clone(), members));
        }

        // Levels, widest first as written; stored tightest first.
        let level_specs: Vec<LevelSpec> = if spec.levels.is_empty() {
            let mut v = Vec::new();
            if !spine_vertex.is_empty() {
                v.push(fabric_level("spineBlock", FabricLevel::SpineBlock));
            }
            if !leaf_vertex.is_empty() {
                v.push(fabric_level("leaf", FabricLevel::Leaf));
            }
            if !nvlink_domains.is_empty() {
                v.push(fabric_level("nvlink", FabricLevel::Nvlink));
            }
            v
        } else {
            spec.levels.clone()
        };
        let mut levels: Vec<Level> = Vec::new();
        let mut seen_names = BTreeSet::new();
        let mut label_path: Vec<&str> = Vec::new();
        for (index, ls) in level_specs.iter().enumerate() {
            let bad = |message: String| TopologyError::BadLevel {
                index,
                name: ls.name.clone(),
                message,
            };
            if ls.name.is_empty() {
                return Err(bad("a level needs a name".into()));
            }
            if !seen_names.insert(ls.name.as_str()) {
                return Err(bad("two levels have this name".into()));
            }
            let sources = ls.node_label.is_some() as u8
                + ls.fabric.is_some() as u8
                + (!ls.domains.is_empty()) as u8;
            if sources != 1 {
                return Err(bad(
                    "give exactly one of nodeLabel, fabric (spineBlock, leaf or nvlink) or domains"
                        .into(),
                ));
            }
            // Domain key per node.
            let mut keys: Vec<Option<String>> = vec![None; sorted.len()];
            let kind;
            if let Some(label) = &ls.node_label {
                label_path.push(label);
                for (n, input) in sorted.iter().enumerate() {
                    let values: Option<Vec<&str>> = label_path
                        .iter()
                        .map(|k| input.labels.get(*k).map(String::as_str))
                        .collect();
                    keys[n] = values.map(|v| v.join("/"));
                }
                kind = LevelKind::NodeLabel(label.clone());
            } else if let Some(f) = ls.fabric {
                match f {
                    FabricLevel::Nvlink => {
                        if nvlink_domains.is_empty() {
                            return Err(bad(
                                "fabric nvlink, but no NVLink domains are given".into()
                            ));
                        }
                        for (n, node) in nodes.iter().enumerate() {
                            keys[n] = node.nvlink.map(|d| nvlink_domains[d as usize].0.clone());
                        }
                    }
                    FabricLevel::Leaf => {
                        if leaf_vertex.is_empty() {
                            return Err(bad("fabric leaf, but no leaf switches are given".into()));
                        }
                        for (n, links) in nics.iter().enumerate() {
                            let set: BTreeSet<u32> = links.values().map(|(_, l)| *l).collect();
                            keys[n] = leaf_set_name(&set, &leaf_names);
                        }
                    }
                    FabricLevel::SpineBlock => {
                        if spine_vertex.is_empty() {
                            return Err(bad(
                                "fabric spineBlock, but no spine switches are given".into()
                            ));
                        }
                        let block_names: BTreeMap<u32, &str> =
                            block_ids.iter().map(|(k, v)| (*v, *k)).collect();
                        for (n, links) in nics.iter().enumerate() {
                            let set: BTreeSet<u32> = links
                                .values()
                                .flat_map(|(_, l)| leaf_blocks[*l as usize].iter().copied())
                                .collect();
                            if !set.is_empty() {
                                let names: Vec<&str> = set.iter().map(|b| block_names[b]).collect();
                                keys[n] = Some(names.join("+"));
                            }
                        }
                    }
                }
                kind = LevelKind::Fabric(f);
            } else {
                let mut owner: Vec<Option<&str>> = vec![None; sorted.len()];
                for d in &ls.domains {
                    for name in &d.nodes {
                        let Some(&n) = node_ids.get(name) else {
                            warnings.push(format!(
                                "topology: level {}: domain {}: {name} is not a node of the cluster; ignored",
                                ls.name, d.name
                            ));
                            continue;
                        };
                        if let Some(first) = owner[n as usize]
                            && first != d.name
                        {
                            return Err(TopologyError::NodeInTwoDomains {
                                level: ls.name.clone(),
                                node: name.clone(),
                                first: first.to_string(),
                                second: d.name.clone(),
                            });
                        }
                        owner[n as usize] = Some(&d.name);
                        keys[n as usize] = Some(d.name.clone());
                    }
                }
                kind = LevelKind::Explicit;
            }
            let mut by_key: BTreeMap<String, Vec<u32>> = BTreeMap::new();
            for (n, k) in keys.iter().enumerate() {
                if let Some(k) = k {
                    by_key.entry(k.clone()).or_default().push(n as u32);
                }
            }
            let mut of_node = vec![None; sorted.len()];
            let domains: Vec<Domain> = by_key
                .into_iter()
                .enumerate()
                .map(|(d, (name, members))| {
                    for &n in &members {
                        of_node[n as usize] = Some(d as u32);
                    }
                    Domain {
                        name,
                        nodes: members,
                        parent: None,
                    }
                })
                .collect();
            levels.push(Level {
                name: ls.name.clone(),
                kind,
                domains,
                of_node,
            });
        }
        levels.reverse();
        // Nesting: every domain sits inside one domain of the next wider level.
        for i in 0..levels.len().saturating_sub(1) {
            let (tight, wide) = levels.split_at_mut(i + 1);
            let (tight, wide) = (&mut tight[i], &wide[0]);
            for d in &mut tight.domains {
                let first = d.nodes[0];
                let parent = wide.of_node[first as usize];
                if let Some(&other) = d
                    .nodes
                    .iter()
                    .find(|&&n| wide.of_node[n as usize] != parent)
                {
                    return Err(TopologyError::NotNested {
                        level: tight.name.clone(),
                        domain: d.name.clone(),
                        wider: wide.name.clone(),
                        a: node_names[first as usize].clone(),
                        b: node_names[other as usize].clone(),
                    });
                }
                d.parent = parent;
            }
        }
        let leaf_level = levels
            .iter()
            .position(|l| l.kind == LevelKind::Fabric(FabricLevel::Leaf))
            .or_else(|| {
                levels
                    .iter()
                    .position(|l| l.kind != LevelKind::Fabric(FabricLevel::Nvlink))
            });

        let source = TopologySource {
            spec,
            nodes: sorted
                .iter()
                .map(|n| SourceNode {
                    name: n.name.to_string(),
                    gpus: n.gpus,
                    labels: n
                        .labels
                        .iter()
                        .filter(|(k, _)| label_path.contains(&k.as_str()))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                })
                .collect(),
        };
        Ok(Topology {
            source,
            graph: g,
            node_names,
            node_ids,
            nodes,
            levels,
            leaf_blocks,
            leaf_level,
            warnings,
        })
    }

    /// The graph itself (for inspection and export).
    pub fn graph(&self) -> &UnGraph<Vertex, Edge> {
        &self.graph
    }

    /// The spec with the nodes' labels merged in.
    pub fn spec(&self) -> &TopologySpec {
        &self.source.spec
    }

    /// Things the build ignored (names of nodes not in the cluster, …).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Node names, sorted; a node's id is its position.
    pub fn node_names(&self) -> &[String] {
        &self.node_names
    }

    pub fn node_id(&self, name: &str) -> Option<u32> {
        self.node_ids.get(name).copied()
    }

    /// Levels, tightest first.
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// Position of the level named `name` in [`Topology::levels`].
    pub fn level_index(&self, name: &str) -> Option<usize> {
        self.levels.iter().position(|l| l.name == name)
    }

    /// Names of the levels, widest first, for messages.
    pub fn level_names(&self) -> Vec<&str> {
        self.levels.iter().rev().map(|l| l.name.as_str()).collect()
    }

    /// The level counted as "leaf" (leaf groups / ToRs; for label-only
    /// trees the tightest level that is not NVLink).
    pub fn leaf_level(&self) -> Option<usize> {
        self.leaf_level
    }

    /// NUMA socket of GPU `index` of node `node`, if known.
    pub fn gpu_numa(&self, node: u32, index: u32) -> Option<u32> {
        self.nodes
            .get(node as usize)?
            .gpu_numa
            .get(index as usize)
            .copied()
            .flatten()
    }

    /// Rail leaf switch (id) of GPU `index` of node `node`, if known.
    pub fn gpu_leaf(&self, node: u32, index: u32) -> Option<u32> {
        self.nodes
            .get(node as usize)?
            .gpu_leaf
            .get(index as usize)
            .copied()
            .flatten()
    }

    /// How far apart GPU `ga` of node `a` and GPU `gb` of node `b` are.
    pub fn distance(&self, a: u32, ga: u32, b: u32, gb: u32) -> Distance {
        if a == b {
            return Distance::SameNode;
        }
        let (na, nb) = (&self.nodes[a as usize], &self.nodes[b as usize]);
        if na.nvlink.is_some() && na.nvlink == nb.nvlink {
            return Distance::SameNvlink;
        }
        if let (Some(la), Some(lb)) = (self.gpu_leaf(a, ga), self.gpu_leaf(b, gb)) {
            if la == lb {
                return Distance::SameLeaf;
            }
            let (ba, bb) = (
                &self.leaf_blocks[la as usize],
                &self.leaf_blocks[lb as usize],
            );
            return if ba.iter().any(|x| bb.contains(x)) {
                Distance::SameBlock
            } else {
                Distance::AcrossSpines
            };
        }
        // Tree levels without switches: the leaf level, then wider ones.
        let Some(leaf) = self.leaf_level else {
            return Distance::AcrossSpines;
        };
        for (i, l) in self.levels.iter().enumerate().skip(leaf) {
            let d = l.of_node[a as usize];
            if d.is_some() && d == l.of_node[b as usize] {
                return if i == leaf {
                    Distance::SameLeaf
                } else {
                    Distance::SameBlock
                };
            }
        }
        Distance::AcrossSpines
    }

    /// Tightest level with one domain holding every node of `nodes`.
    pub fn common_level(&self, nodes: &[u32]) -> Option<usize> {
        let first = *nodes.first()?;
        self.levels.iter().position(|l| {
            let d = l.of_node[first as usize];
            d.is_some() && nodes.iter().all(|&n| l.of_node[n as usize] == d)
        })
    }

    /// How a gang placed as `pods` (node id, GPU indices; in rank order)
    /// sits on the fabric.
    pub fn span(&self, pods: &[(u32, Vec<u32>)]) -> Span {
        let nodes: BTreeSet<u32> = pods.iter().map(|p| p.0).collect();
        let node_list: Vec<u32> = nodes.iter().copied().collect();
        let leaves = match self.leaf_level {
            Some(l) => {
                let set: BTreeSet<Option<u32>> = node_list
                    .iter()
                    .map(|&n| self.levels[l].of_node[n as usize])
                    .collect();
                set.len() as u32
            }
            None => 0,
        };
        let mut hops = 0;
        let mut crossings = 0;
        let k = pods.len();
        let pairs: Vec<(usize, usize)> = match k {
            0 | 1 => Vec::new(),
            2 => vec![(0, 1)],
            _ => (0..k).map(|i| (i, (i + 1) % k)).collect(),
        };
        for (i, j) in pairs {
            let (a, b) = (&pods[i], &pods[j]);
            if a.0 == b.0 {
                continue;
            }
            hops += 1;
            let ranks = a.1.len().min(b.1.len()).max(1);
            let crosses = (0..ranks).any(|r| {
                let ga = a.1.get(r).copied().unwrap_or(0);
                let gb = b.1.get(r).copied().unwrap_or(0);
                self.distance(a.0, ga, b.0, gb) >= Distance::SameBlock
            });
            if crosses {
                crossings += 1;
            }
        }
        let mut sets: Vec<BTreeSet<u32>> =
            pods.iter().map(|p| p.1.iter().copied().collect()).collect();
        sets.sort();
        sets.dedup();
        let rail_aligned = nodes.len() <= 1
            || sets
                .iter()
                .enumerate()
                .all(|(i, a)| sets[i + 1..].iter().all(|b| a.is_disjoint(b)));
        Span {
            nodes: nodes.len() as u32,
            leaves,
            level: self.common_level(&node_list).map(|l| l as u32),
            hops,
            spine_crossings: crossings,
            rail_aligned,
        }
    }
}

fn fabric_level(name: &str, f: FabricLevel) -> LevelSpec {
    LevelSpec {
        name: name.into(),
        fabric: Some(f),
        ..LevelSpec::default()
    }
}

/// Name of a leaf group: the leaf itself, or `first..last` of its leaves.
fn leaf_set_name(set: &BTreeSet<u32>, names: &[&str]) -> Option<String> {
    let mut it = set.iter().map(|l| names[*l as usize]);
    let first = it.next()?;
    Some(match it.next_back() {
        None => first.to_string(),
        Some(last) => format!("{first}..{last}"),
    })
}

impl fmt::Display for Distance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Distance::SameNode => "same node",
            Distance::SameNvlink => "same NVLink domain",
            Distance::SameLeaf => "same leaf",
            Distance::SameBlock => "same spine block",
            Distance::AcrossSpines => "across spines",
        })
    }
}

#[cfg(test)]
mod tests;
