//! The node label contract: how a Kubernetes node says where it sits.
//!
//! | label | value | meaning |
//! |---|---|---|
//! | `topology.trainyard.io/leaf` | switch name | the node's one uplink (ToR) |
//! | `topology.trainyard.io/rails` | `leaf-a,leaf-b,…` | NIC *i* links to entry *i* (rail-optimized) |
//! | `topology.trainyard.io/spine-block` | block name | the spine block above the node's leaves |
//! | `topology.trainyard.io/nvlink-domain` | domain name | NVLink domain (e.g. a GB200 rack) |
//! | `topology.trainyard.io/gpu-numa` | `0,0,0,0,1,1,1,1` | NUMA socket of GPU 0, 1, … |
//! | `topology.trainyard.io/gpu-nics` | `0,1,2,3,4,5,6,7` | closest NIC of GPU 0, 1, … |
//!
//! Tree-style labels other schedulers use (KAI, Kueue, Volcano) are read
//! through a `Topology` document's `levels[].nodeLabel` instead.

use std::collections::{BTreeMap, BTreeSet};

use crate::TopologyError;
use crate::spec::{
    DomainSpec, GpuAffinitySpec, LinkSpec, NodeFabricSpec, SwitchKind, SwitchSpec, TopologySpec,
};

pub const LEAF: &str = "topology.trainyard.io/leaf";
pub const RAILS: &str = "topology.trainyard.io/rails";
pub const SPINE_BLOCK: &str = "topology.trainyard.io/spine-block";
pub const NVLINK_DOMAIN: &str = "topology.trainyard.io/nvlink-domain";
pub const GPU_NUMA: &str = "topology.trainyard.io/gpu-numa";
pub const GPU_NICS: &str = "topology.trainyard.io/gpu-nics";

/// Prefix of the spine switch standing for a block named only by label.
pub const BLOCK_SPINE_PREFIX: &str = "spine-block/";

/// One cluster node as the topology sees it.
#[derive(Clone, Copy, Debug)]
pub struct NodeInput<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    /// Number of GPU devices (indices `0..gpus`).
    pub gpus: u32,
}

/// Whether any node carries a label of the contract.
pub fn any_labelled(nodes: &[NodeInput]) -> bool {
    nodes.iter().any(|n| {
        [LEAF, RAILS, SPINE_BLOCK, NVLINK_DOMAIN, GPU_NUMA, GPU_NICS]
            .iter()
            .any(|k| n.labels.contains_key(*k))
    })
}

/// Adds what the nodes' labels say to `spec`: leaf switches and links,
/// one spine per labelled block, NVLink domains, GPU affinity. Labels never
/// override what the spec states explicitly for the same node.
pub fn apply_node_labels(
    spec: &mut TopologySpec,
    nodes: &[NodeInput],
) -> Result<(), TopologyError> {
    let mut switches: BTreeMap<String, SwitchKind> = spec
        .switches
        .iter()
        .map(|s| (s.name.clone(), s.kind))
        .collect();
    let mut add_switch = |spec: &mut TopologySpec, name: &str, kind: SwitchKind, block| {
        if !switches.contains_key(name) {
            switches.insert(name.to_string(), kind);
            spec.switches.push(SwitchSpec {
                name: name.to_string(),
                kind,
                block,
            });
        }
    };
    let linked: BTreeSet<String> = spec
        .links
        .iter()
        .map(|l| l.from.split('/').next().unwrap_or("").to_string())
        .collect();
    let with_affinity: BTreeSet<String> = spec.nodes.iter().map(|n| n.node.clone()).collect();
    let mut nvlink: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut leaf_links: BTreeSet<(String, String)> = BTreeSet::new();
    for node in nodes {
        let bad = |label: &str, expected: &str| TopologyError::BadLabel {
            node: node.name.to_string(),
            label: label.to_string(),
            value: node.labels.get(label).cloned().unwrap_or_default(),
            expected: expected.to_string(),
        };
        let mut leaves: Vec<String> = Vec::new();
        if !linked.contains(node.name) {
            if let Some(leaf) = node.labels.get(LEAF) {
                if leaf.is_empty() {
                    return Err(bad(LEAF, "a leaf switch name"));
                }
                if node.labels.contains_key(RAILS) {
                    return Err(bad(
                        LEAF,
                        "either topology.trainyard.io/leaf or topology.trainyard.io/rails, not both",
                    ));
                }
                add_switch(spec, leaf, SwitchKind::Leaf, None);
                spec.links.push(LinkSpec {
                    from: node.name.to_string(),
                    to: leaf.clone(),
                });
                leaves.push(leaf.clone());
            }
            if let Some(rails) = node.labels.get(RAILS) {
                for (i, leaf) in rails.split(',').map(str::trim).enumerate() {
                    if leaf.is_empty() {
                        return Err(bad(RAILS, "comma-separated leaf switch names, NIC 0 first"));
                    }
                    add_switch(spec, leaf, SwitchKind::Leaf, None);
                    spec.links.push(LinkSpec {
                        from: format!("{}/nic{i}", node.name),
                        to: leaf.to_string(),
                    });
                    leaves.push(leaf.to_string());
                }
            }
        }
        if let Some(block) = node.labels.get(SPINE_BLOCK) {
            if block.is_empty() {
                return Err(bad(SPINE_BLOCK, "a spine block name"));
            }
            let spine = format!("{BLOCK_SPINE_PREFIX}{block}");
            add_switch(spec, &spine, SwitchKind::Spine, Some(block.clone()));
            for leaf in leaves {
                leaf_links.insert((leaf, spine.clone()));
            }
        }
        if let Some(d) = node.labels.get(NVLINK_DOMAIN) {
            if d.is_empty() {
                return Err(bad(NVLINK_DOMAIN, "an NVLink domain name"));
            }
            nvlink
                .entry(d.clone())
                .or_default()
                .push(node.name.to_string());
        }
        if !with_affinity.contains(node.name)
            && (node.labels.contains_key(GPU_NUMA) || node.labels.contains_key(GPU_NICS))
        {
            let list = |label: &str| -> Result<Option<Vec<u32>>, TopologyError> {
                let Some(v) = node.labels.get(label) else {
                    return Ok(None);
                };
                let parsed: Result<Vec<u32>, _> =
                    v.split(',').map(|s| s.trim().parse::<u32>()).collect();
                match parsed {
                    Ok(p) if p.len() == node.gpus as usize => Ok(Some(p)),
                    _ => Err(bad(
                        label,
                        &format!(
                            "{} comma-separated integers, one per GPU (GPU 0 first)",
                            node.gpus
                        ),
                    )),
                }
            };
            let numa = list(GPU_NUMA)?;
            let nics = list(GPU_NICS)?;
            spec.nodes.push(NodeFabricSpec {
                node: node.name.to_string(),
                gpus: (0..node.gpus)
                    .map(|i| GpuAffinitySpec {
                        index: i,
                        numa: numa.as_ref().map(|v| v[i as usize]),
                        nic: nics.as_ref().map(|v| v[i as usize]),
                    })
                    .collect(),
            });
        }
    }
    for (leaf, spine) in leaf_links {
        spec.links.push(LinkSpec {
            from: leaf,
            to: spine,
        });
    }
    let explicit: BTreeSet<String> = spec.nvlink_domains.iter().map(|d| d.name.clone()).collect();
    for (name, nodes) in nvlink {
        if !explicit.contains(&name) {
            spec.nvlink_domains.push(DomainSpec { name, nodes });
        }
    }
    Ok(())
}
