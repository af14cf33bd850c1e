//! Simulated nodes publishing their GPUs and NICs as DRA ResourceSlices
//! (`resource.k8s.io/v1`) instead of through a device plugin.
//!
//! [`publish`] is the one place that turns nodes into DRA objects: a
//! ResourceSlice of GPUs (attributes `productName` from the node's GPU
//! model, `index`, and the standard `resource.kubernetes.io/pcieRoot`,
//! two GPUs per PCIe root; capacity `memory` when the model's memory is
//! known) and one of NICs (`rail`, and the PCIe root of the GPUs beside
//! it), a DeviceClass per driver, the GPU class naming `nvidia.com/gpu`
//! as its extended resource (KEP-5004). They go through the one
//! conversion, [`trainyard_ingest::dra::build`] (which evaluates the
//! classes' CEL selectors), so a pod asking `nvidia.com/gpu` on such a
//! node is allocated DRA devices by the core. The benchmark's DRA cluster
//! and the simulator's DRA node pools both call it.
//!
//! The cluster spec records a pool's publication as node labels
//! ([`DraPublish::labels`], read back by [`DraPublish::from_labels`]), so
//! the nodes alone say which of them publish what, whatever path they
//! take into a run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};
use trainyard_model::dra::Dra;
use trainyard_model::{Node, ResourceName};

/// The GPU driver's name unless the spec names another (the NVIDIA DRA
/// driver's).
pub const DEFAULT_GPU_DRIVER: &str = "gpu.nvidia.com";
/// The NIC driver's name unless the spec names another.
pub const DEFAULT_NIC_DRIVER: &str = "nic.example.com";
/// Most NICs published per node.
pub const MAX_NICS_PER_NODE: u32 = 64;

/// Label naming the driver a node's GPUs are published with.
pub const LABEL_GPU_DRIVER: &str = "trainyard.io/dra-gpu-driver";
/// Label with the number of NICs a node publishes.
pub const LABEL_NICS: &str = "trainyard.io/dra-nics";
/// Label naming the driver a node's NICs are published with.
pub const LABEL_NIC_DRIVER: &str = "trainyard.io/dra-nic-driver";

/// The standard PCIe root attribute (`resource.kubernetes.io/pcieRoot`):
/// one name for every driver, so a `matchAttribute` on it keeps a GPU and
/// its NIC together.
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";

/// What one node publishes as DRA devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DraPublish {
    /// Its GPUs (then it has no device-plugin GPUs).
    pub gpus: bool,
    /// NICs, one per rail.
    pub nics: u32,
    pub gpu_driver: String,
    pub nic_driver: String,
}

impl Default for DraPublish {
    fn default() -> Self {
        DraPublish {
            gpus: true,
            nics: 0,
            gpu_driver: DEFAULT_GPU_DRIVER.to_string(),
            nic_driver: DEFAULT_NIC_DRIVER.to_string(),
        }
    }
}

impl DraPublish {
    /// The node labels that record this publication.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut l = BTreeMap::new();
        if self.gpus {
            l.insert(LABEL_GPU_DRIVER.to_string(), self.gpu_driver.clone());
        }
        if self.nics > 0 {
            l.insert(LABEL_NICS.to_string(), self.nics.to_string());
            l.insert(LABEL_NIC_DRIVER.to_string(), self.nic_driver.clone());
        }
        l
    }

    /// What `node`'s labels say it publishes; `None`: nothing (a NIC
    /// count that is not a whole number up to [`MAX_NICS_PER_NODE`]
    /// counts as none).
    pub fn from_labels(node: &Node) -> Option<DraPublish> {
        let gpu_driver = node.labels.get(LABEL_GPU_DRIVER);
        let nics = node
            .labels
            .get(LABEL_NICS)
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|n| *n <= MAX_NICS_PER_NODE)
            .unwrap_or(0);
        if gpu_driver.is_none() && nics == 0 {
            return None;
        }
        Some(DraPublish {
            gpus: gpu_driver.is_some(),
            nics,
            gpu_driver: gpu_driver
                .map_or(DEFAULT_GPU_DRIVER, String::as_str)
                .to_string(),
            nic_driver: node
                .labels
                .get(LABEL_NIC_DRIVER)
                .map_or(DEFAULT_NIC_DRIVER, String::as_str)
                .to_string(),
        })
    }
}

/// Nodes with their DRA devices published.
#[derive(Clone, Debug, Default)]
pub struct Published {
    /// The nodes in their order: those publishing GPUs without
    /// device-plugin GPUs, and with `nvidia.com/gpu` served by their
    /// devices as allocatable (`Dra::with_extended`).
    pub nodes: Vec<Arc<Node>>,
    pub dra: Dra,
    /// What the conversion warned about (none expected).
    pub warnings: Vec<String>,
}

/// Publishes the DRA devices of each node `how` names (see the module
/// documentation), in node order; deterministic.
pub fn publish(nodes: &[Arc<Node>], how: &dyn Fn(&Node) -> Option<DraPublish>) -> Published {
    let mut reader = Reader::default();
    let mut gpu_drivers = BTreeSet::new();
    let mut nic_drivers = BTreeSet::new();
    let mut out_nodes = Vec::with_capacity(nodes.len());
    for n in nodes {
        let Some(p) = how(n) else {
            out_nodes.push(Arc::clone(n));
            continue;
        };
        let gpus = n.gpus.len() as u32;
        // Two GPUs per PCIe root; the NICs spread over the same roots.
        let roots = gpus.div_ceil(2).max(1);
        if p.gpus && gpus > 0 {
            gpu_drivers.insert(p.gpu_driver.clone());
            let devices: Vec<Value> = n
                .gpus
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    let mut attributes = json!({
                        "index": {"int": i},
                        PCIE_ROOT: {"string": format!("pci{}", i / 2)},
                    });
                    if !g.model.is_empty() {
                        attributes["productName"] = json!({"string": g.model});
                    }
                    let mut d = json!({"name": format!("gpu-{i}"), "attributes": attributes});
                    if g.memory_bytes > 0 {
                        d["capacity"] = json!({"memory": {"value": g.memory_bytes.to_string()}});
                    }
                    d
                })
                .collect();
            reader.slice(&n.name, &p.gpu_driver, devices);
        }
        if p.nics > 0 {
            nic_drivers.insert(p.nic_driver.clone());
            let devices: Vec<Value> = (0..p.nics)
                .map(|i| {
                    json!({"name": format!("nic-{i}"), "attributes": {
                        "rail": {"int": i},
                        PCIE_ROOT: {"string": format!("pci{}", i as u64 * roots as u64 / p.nics as u64)},
                    }})
                })
                .collect();
            reader.slice(&n.name, &p.nic_driver, devices);
        }
        if p.gpus && gpus > 0 {
            let mut node = (**n).clone();
            node.gpus.clear();
            node.allocatable.gpu = 0;
            out_nodes.push(Arc::new(node));
        } else {
            out_nodes.push(Arc::clone(n));
        }
    }
    for d in &gpu_drivers {
        reader.class(d, Some(ResourceName::Gpu.as_str()));
    }
    for d in &nic_drivers {
        reader.class(d, None);
    }
    let has: BTreeMap<&str, &Node> = out_nodes.iter().map(|n| (n.name.as_str(), &**n)).collect();
    let node_has = |node: &str, resource: &str| {
        has.get(node)
            .is_some_and(|n| n.allocatable.get(&ResourceName::parse(resource)) > 0)
    };
    let built = trainyard_ingest::dra::build(
        &reader.objects,
        std::iter::empty(),
        &trainyard_ingest::LoadOptions::default(),
        &node_has,
    );
    let mut warnings = reader.warnings;
    warnings.extend(built.warnings);
    Published {
        nodes: built.dra.with_extended(&out_nodes),
        dra: built.dra,
        warnings,
    }
}

/// DRA objects read through the one reader of Kubernetes objects.
#[derive(Default)]
struct Reader {
    objects: trainyard_ingest::dra::DraObjects,
    warnings: Vec<String>,
}

impl Reader {
    fn add(&mut self, v: Value) {
        let read = trainyard_ingest::read_object(&v, "simulated DRA driver");
        self.objects.slices.extend(read.dra.slices);
        self.objects.classes.extend(read.dra.classes);
        self.warnings
            .extend(read.errors.iter().map(ToString::to_string));
        self.warnings.extend(read.warnings);
    }

    /// A DeviceClass named after `driver`, selecting its devices.
    fn class(&mut self, driver: &str, extended: Option<&str>) {
        let mut spec = json!({"selectors": [{"cel": {
            "expression": format!("device.driver == {}", json!(driver))}}]});
        if let Some(e) = extended {
            spec["extendedResourceName"] = json!(e);
        }
        self.add(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": driver}, "spec": spec,
        }));
    }

    /// The ResourceSlice of `driver`'s devices on `node` (one pool per
    /// node and driver, one slice).
    fn slice(&mut self, node: &str, driver: &str, devices: Vec<Value>) {
        self.add(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-{driver}")},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}
        }));
    }
}

#[cfg(test)]
mod tests;
