//! Generators for common fabrics, so a simulated cluster needs only a few
//! parameters. Each returns a [`TopologySpec`] over the given node names
//! (in the given order), which [`crate::Topology::build`] then validates.

use crate::spec::{
    DomainSpec, GpuAffinitySpec, LinkSpec, NodeFabricSpec, SwitchKind, SwitchSpec, TopologySpec,
};

/// A rail-optimized fat tree: nodes in groups of `nodes_per_group` (a
/// scalable unit); NIC *r* of every node of group *g* links to leaf
/// `g{g}-rail{r}`; leaves of `groups_per_block` groups link to every spine
/// of their block. GPU *i* is closest to NIC `i × rails / gpus` and sits on
/// NUMA socket `i × numa_sockets / gpus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RailOptimized {
    pub rails: u32,
    pub nodes_per_group: u32,
    pub groups_per_block: u32,
    pub spines_per_block: u32,
    pub gpus_per_node: u32,
    pub numa_sockets: u32,
}

impl Default for RailOptimized {
    fn default() -> Self {
        RailOptimized {
            rails: 8,
            nodes_per_group: 32,
            groups_per_block: 4,
            spines_per_block: 8,
            gpus_per_node: 8,
            numa_sockets: 2,
        }
    }
}

pub fn rail_optimized(nodes: &[&str], p: &RailOptimized) -> TopologySpec {
    let per_group = p.nodes_per_group.max(1) as usize;
    let per_block = p.groups_per_block.max(1) as usize;
    let groups = nodes.len().div_ceil(per_group);
    let mut spec = TopologySpec::default();
    let blocks = groups.div_ceil(per_block);
    for b in 0..blocks {
        for s in 0..p.spines_per_block.max(1) {
            spec.switches.push(SwitchSpec {
                name: format!("b{b}-spine{s}"),
                kind: SwitchKind::Spine,
                block: Some(format!("block{b}")),
            });
        }
    }
    for g in 0..groups {
        let b = g / per_block;
        for r in 0..p.rails.max(1) {
            let leaf = format!("g{g}-rail{r}");
            spec.switches.push(SwitchSpec {
                name: leaf.clone(),
                kind: SwitchKind::Leaf,
                block: None,
            });
            for s in 0..p.spines_per_block.max(1) {
                spec.links.push(LinkSpec {
                    from: leaf.clone(),
                    to: format!("b{b}-spine{s}"),
                });
            }
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        let g = i / per_group;
        for r in 0..p.rails.max(1) {
            spec.links.push(LinkSpec {
                from: format!("{n}/nic{r}"),
                to: format!("g{g}-rail{r}"),
            });
        }
        spec.nodes
            .push(affinity(n, p.gpus_per_node, p.rails, p.numa_sockets));
    }
    spec
}

/// A leaf–spine fabric with one top-of-rack leaf per `nodes_per_leaf`
/// nodes (`leaf{l}`), `leaves_per_block` leaves per spine block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafSpine {
    pub nodes_per_leaf: u32,
    pub leaves_per_block: u32,
    pub spines_per_block: u32,
    pub gpus_per_node: u32,
    pub numa_sockets: u32,
}

pub fn leaf_spine(nodes: &[&str], p: &LeafSpine) -> TopologySpec {
    let per_leaf = p.nodes_per_leaf.max(1) as usize;
    let per_block = p.leaves_per_block.max(1) as usize;
    let leaves = nodes.len().div_ceil(per_leaf);
    let blocks = leaves.div_ceil(per_block);
    let mut spec = TopologySpec::default();
    for b in 0..blocks {
        for s in 0..p.spines_per_block.max(1) {
            spec.switches.push(SwitchSpec {
                name: format!("b{b}-spine{s}"),
                kind: SwitchKind::Spine,
                block: Some(format!("block{b}")),
            });
        }
    }
    for l in 0..leaves {
        let leaf = format!("leaf{l}");
        spec.switches.push(SwitchSpec {
            name: leaf.clone(),
            kind: SwitchKind::Leaf,
            block: None,
        });
        for s in 0..p.spines_per_block.max(1) {
            spec.links.push(LinkSpec {
                from: leaf.clone(),
                to: format!("b{}-spine{s}", l / per_block),
            });
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        spec.links.push(LinkSpec {
            from: n.to_string(),
            to: format!("leaf{}", i / per_leaf),
        });
        spec.nodes
            .push(affinity(n, p.gpus_per_node, 1, p.numa_sockets));
    }
    spec
}

/// Adds NVLink domains of `nodes_per_domain` consecutive nodes (`nvl{k}`),
/// e.g. 18 for a GB200 NVL72 rack.
pub fn add_nvlink_domains(spec: &mut TopologySpec, nodes: &[&str], nodes_per_domain: u32) {
    for (k, chunk) in nodes.chunks(nodes_per_domain.max(1) as usize).enumerate() {
        spec.nvlink_domains.push(DomainSpec {
            name: format!("nvl{k}"),
            nodes: chunk.iter().map(|n| n.to_string()).collect(),
        });
    }
}

fn affinity(node: &str, gpus: u32, nics: u32, sockets: u32) -> NodeFabricSpec {
    let gpus_n = gpus.max(1);
    NodeFabricSpec {
        node: node.to_string(),
        gpus: (0..gpus)
            .map(|i| GpuAffinitySpec {
                index: i,
                numa: Some(i * sockets.max(1) / gpus_n),
                nic: Some(i * nics.max(1) / gpus_n),
            })
            .collect(),
    }
}
