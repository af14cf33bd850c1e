//! The topology as written down: levels, switches, links, NVLink domains and
//! per-node GPU affinity. Plain data; [`crate::Topology::build`] validates
//! it against the cluster's nodes and turns it into a graph.

use serde::{Deserialize, Serialize};

/// Everything known about the fabric. All fields are optional; an empty
/// spec (and no topology labels on nodes) means "no topology".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologySpec {
    /// Named levels, **widest first** (e.g. block, leaf, nvlink). Gangs name
    /// these in their `required` / `preferred` constraints. Empty: derived
    /// from the fabric (`spineBlock` if there are spines, `leaf` if there
    /// are leaves, `nvlink` if there are NVLink domains).
    #[serde(default)]
    pub levels: Vec<LevelSpec>,
    #[serde(default)]
    pub switches: Vec<SwitchSpec>,
    #[serde(default)]
    pub links: Vec<LinkSpec>,
    #[serde(default)]
    pub nvlink_domains: Vec<DomainSpec>,
    /// GPU → NUMA socket / NIC affinity per node (optional).
    #[serde(default)]
    pub nodes: Vec<NodeFabricSpec>,
}

/// One named level. Exactly one of `nodeLabel`, `fabric`, `domains` says
/// how nodes map to its domains.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LevelSpec {
    pub name: String,
    /// Tree style (KAI, Kueue, Volcano): nodes with equal values of this
    /// label, and of every label level above it, share a domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_label: Option<String>,
    /// Derived from the switch graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<FabricLevel>,
    /// Explicit membership lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<DomainSpec>,
}

/// A level computed from the switch graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum FabricLevel {
    /// Nodes whose leaves hang under the same spine block(s).
    SpineBlock,
    /// Nodes whose NICs link to the same set of leaf switches: one ToR, or
    /// in a rail-optimized fabric the same rail leaves (a leaf group).
    Leaf,
    /// Nodes in the same NVLink domain.
    Nvlink,
}

impl FabricLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            FabricLevel::SpineBlock => "spineBlock",
            FabricLevel::Leaf => "leaf",
            FabricLevel::Nvlink => "nvlink",
        }
    }
}

/// A named set of nodes (an NVLink domain, or a domain of an explicit level).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DomainSpec {
    pub name: String,
    pub nodes: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum SwitchKind {
    /// A leaf (top-of-rack, or rail) switch that nodes' NICs link to.
    Leaf,
    /// A spine switch joining leaves.
    Spine,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SwitchSpec {
    pub name: String,
    pub kind: SwitchKind,
    /// Spine block of a spine switch (default: the spine's own name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<String>,
}

/// A cable. `from` is a node (`node-1`: its only uplink, ToR style), one NIC
/// of a node (`node-1/nic3`), or a leaf; `to` is a leaf (for nodes and NICs)
/// or a spine (for leaves).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkSpec {
    pub from: String,
    pub to: String,
}

/// GPU affinity inside one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeFabricSpec {
    pub node: String,
    pub gpus: Vec<GpuAffinitySpec>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuAffinitySpec {
    /// Device index (as `nvidia-smi` numbers it).
    pub index: u32,
    /// NUMA socket of the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<u32>,
    /// Index of the NIC closest to the device (its rail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<u32>,
}

impl TopologySpec {
    /// Whether the spec says nothing at all.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
            && self.switches.is_empty()
            && self.links.is_empty()
            && self.nvlink_domains.is_empty()
            && self.nodes.is_empty()
    }
}
