//! Building DRA snapshots by hand: devices, claims and selector sets whose
//! matches are computed here by plain predicates over the devices (the
//! edge's CEL evaluation is tested on its own, in trainyard-dra).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use trainyard_model::dra::{
    AllocatedDevice, AllocationMode, AttrValue, Claim, ClaimAllocation, ClaimNeed, ClaimSpec,
    CounterSet, CounterUse, Device, DeviceConstraint, DeviceMask, DeviceRequest, Dra, NodeDevices,
    PodClaim, SelectorMatches, SelectorSet, SubRequest,
};
use trainyard_model::{Job, Node, PlacementConstraints, QueueSpec, QueueTree, Resources, Snapshot};

pub const DRIVER: &str = "gpu.example.com";

/// A device of `DRIVER` with string attributes (qualified with the
/// driver's domain).
pub fn device(name: &str, attrs: &[(&str, &str)]) -> Device {
    Device {
        driver: DRIVER.into(),
        pool: "pool".into(),
        name: name.into(),
        attributes: attrs
            .iter()
            .map(|(k, v)| (format!("{DRIVER}/{k}"), AttrValue::String(v.to_string())))
            .collect(),
        capacity: BTreeMap::new(),
        consumes: Vec::new(),
        taints: Vec::new(),
        multi: false,
    }
}

/// The attribute `name` of a device, as a string.
pub fn attr<'d>(d: &'d Device, name: &str) -> Option<&'d str> {
    match d.attributes.get(&format!("{DRIVER}/{name}"))? {
        AttrValue::String(s) => Some(s),
        _ => None,
    }
}

/// A selector as the tests write it: attribute `key` equals `value`
/// (`type=gpu`), or `*` for any device.
#[derive(Clone, Debug)]
pub struct Sel(pub String);

impl Sel {
    pub fn accepts(&self, d: &Device) -> bool {
        if self.0 == "*" {
            return true;
        }
        self.0
            .split('&')
            .all(|clause| match clause.split_once('=') {
                Some((k, v)) => attr(d, k) == Some(v),
                None => false,
            })
    }
}

/// A snapshot under construction.
#[derive(Default)]
pub struct Build {
    pub nodes: Vec<Node>,
    pub devices: BTreeMap<String, NodeDevices>,
    pub sels: Vec<Sel>,
    pub claims: BTreeMap<String, Claim>,
    pub jobs: Vec<Job>,
    pub backed: BTreeMap<String, Vec<trainyard_model::dra::Backed>>,
}

impl Build {
    pub fn node(&mut self, name: &str, devices: Vec<Device>) -> &mut NodeDevices {
        self.nodes.push(Node::new(name, 64_000, 512 << 30, 0));
        self.devices.insert(
            name.to_string(),
            NodeDevices {
                devices,
                counter_sets: Vec::new(),
            },
        );
        self.devices.get_mut(name).unwrap()
    }

    /// The selector set index of `sel` (interned).
    pub fn sel(&mut self, sel: &str) -> u32 {
        if let Some(i) = self.sels.iter().position(|s| s.0 == sel) {
            return i as u32;
        }
        self.sels.push(Sel(sel.to_string()));
        (self.sels.len() - 1) as u32
    }

    pub fn exact(&mut self, name: &str, sel: &str, count: u32) -> DeviceRequest {
        DeviceRequest {
            name: name.to_string(),
            alternatives: vec![self.sub(name, sel, AllocationMode::ExactCount(count))],
        }
    }

    pub fn sub(&mut self, name: &str, sel: &str, mode: AllocationMode) -> SubRequest {
        SubRequest {
            name: name.to_string(),
            class: "gpu".to_string(),
            selector: self.sel(sel),
            mode,
            admin_access: false,
            tolerations: Vec::new(),
            capacity: BTreeMap::new(),
        }
    }

    /// A `firstAvailable` request over `(sub name, selector, count)`.
    pub fn first_available(&mut self, name: &str, subs: &[(&str, &str, u32)]) -> DeviceRequest {
        DeviceRequest {
            name: name.to_string(),
            alternatives: subs
                .iter()
                .map(|(s, sel, n)| {
                    self.sub(&format!("{name}/{s}"), sel, AllocationMode::ExactCount(*n))
                })
                .collect(),
        }
    }

    /// A gang of `pods` pending pods, each with its own claim of `spec`
    /// (as from a template), asking `cpu` millicores.
    pub fn gang(&mut self, id: &str, pods: usize, spec: ClaimSpec) -> usize {
        let spec = Arc::new(spec);
        let mut job = Job::gang(id, "q", vec![Resources::new(1000, 1 << 30, 0); pods]);
        for (i, t) in job.tasks.iter_mut().enumerate() {
            let key = format!("{id}-{i}-claim");
            self.claims.insert(
                key.clone(),
                Claim {
                    key: key.clone(),
                    uid: String::new(),
                    spec: spec.clone(),
                    allocation: None,
                    reserved_for: Vec::new(),
                    planned_from: Some("ml/template".to_string()),
                },
            );
            t.claims = vec![PodClaim {
                name: "gpu".to_string(),
                claim: key,
            }];
            t.constraints = Arc::new(PlacementConstraints {
                claims: vec![ClaimNeed::Own(spec.clone())],
                ..PlacementConstraints::default()
            });
        }
        self.jobs.push(job);
        self.jobs.len() - 1
    }

    /// A gang whose pods all use one claim `key` of `spec`.
    pub fn sharing_gang(&mut self, id: &str, pods: usize, key: &str, spec: ClaimSpec) -> usize {
        self.claims.insert(
            key.to_string(),
            Claim {
                key: key.to_string(),
                uid: String::new(),
                spec: Arc::new(spec),
                allocation: None,
                reserved_for: Vec::new(),
                planned_from: None,
            },
        );
        let mut job = Job::gang(id, "q", vec![Resources::new(1000, 1 << 30, 0); pods]);
        let c = Arc::new(PlacementConstraints {
            claims: vec![ClaimNeed::Shared(key.to_string())],
            ..PlacementConstraints::default()
        });
        for t in &mut job.tasks {
            t.claims = vec![PodClaim {
                name: "shared".to_string(),
                claim: key.to_string(),
            }];
            t.constraints = c.clone();
        }
        self.jobs.push(job);
        self.jobs.len() - 1
    }

    pub fn allocate(&mut self, key: &str, node: &str, devices: &[&str]) {
        if let Some(c) = self.claims.get_mut(key) {
            c.allocation = Some(ClaimAllocation {
                node: Some(node.to_string()),
                devices: devices
                    .iter()
                    .map(|d| AllocatedDevice {
                        request: "gpu".into(),
                        driver: DRIVER.into(),
                        pool: "pool".into(),
                        device: (*d).into(),
                        admin_access: false,
                        consumed: BTreeMap::new(),
                    })
                    .collect(),
            });
        }
    }

    pub fn dra(&self) -> Dra {
        let nodes: BTreeMap<String, Arc<NodeDevices>> = self
            .devices
            .iter()
            .map(|(k, v)| (k.clone(), Arc::new(v.clone())))
            .collect();
        let matches = self
            .sels
            .iter()
            .map(|s| {
                let mut m = SelectorMatches::default();
                for (name, nd) in &nodes {
                    let mut mask = DeviceMask::with_len(nd.devices.len());
                    for (i, d) in nd.devices.iter().enumerate() {
                        if s.accepts(d) {
                            mask.insert(i);
                        }
                    }
                    m.by_node.insert(name.clone(), mask);
                }
                Arc::new(m)
            })
            .collect();
        Dra {
            nodes,
            claims: self
                .claims
                .iter()
                .map(|(k, c)| (k.clone(), Arc::new(c.clone())))
                .collect(),
            selectors: self
                .sels
                .iter()
                .map(|s| SelectorSet {
                    class: "gpu".to_string(),
                    expressions: vec![s.0.clone()],
                })
                .collect(),
            matches,
            backed: self.backed.clone(),
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::new(
            self.nodes.clone(),
            QueueTree::build(vec![QueueSpec::new("q")]).unwrap(),
            self.jobs.clone(),
        );
        let dra = self.dra();
        s.nodes = dra.with_extended(&s.nodes);
        s.dra = Arc::new(dra);
        s
    }

    /// Node `node`'s devices accepted by `sel` serve `nvidia.com/gpu`
    /// (KEP-5004).
    pub fn back_gpus(&mut self, node: &str, sel: &str) {
        let selector = self.sel(sel);
        let s = Sel(sel.to_string());
        let devices = self.devices[node]
            .devices
            .iter()
            .filter(|d| s.accepts(d))
            .count() as u64;
        self.backed
            .entry(node.to_string())
            .or_default()
            .push(trainyard_model::dra::Backed {
                resource: "nvidia.com/gpu".to_string(),
                class: "gpu".to_string(),
                selector,
                devices,
            });
    }
}

pub fn spec(requests: Vec<DeviceRequest>, constraints: Vec<DeviceConstraint>) -> ClaimSpec {
    ClaimSpec {
        requests,
        constraints,
    }
}

pub fn match_attr(attr: &str) -> DeviceConstraint {
    DeviceConstraint {
        requests: Vec::new(),
        attribute: format!("{DRIVER}/{attr}"),
        distinct: false,
    }
}

/// A partitionable GPU `gpu` of `slices` memory slices: the whole device
/// and `slices` one-slice partitions, all drawing on one counter set.
pub fn partitionable(nd: &mut NodeDevices, gpu: &str, slices: u64, halves: bool) {
    let set = format!("{gpu}-counters");
    nd.counter_sets.push(CounterSet {
        driver: DRIVER.to_string(),
        pool: "pool".to_string(),
        name: set.clone(),
        counters: BTreeMap::from([("memory".to_string(), slices)]),
    });
    let draw = |n: u64| {
        vec![CounterUse {
            set: set.clone(),
            counters: BTreeMap::from([("memory".to_string(), n)]),
        }]
    };
    let mut whole = device(gpu, &[("type", "whole")]);
    whole.consumes = draw(slices);
    nd.devices.push(whole);
    let (parts, size, kind) = if halves {
        (2, slices / 2, "half")
    } else {
        (slices, 1, "slice")
    };
    for p in 0..parts {
        let mut d = device(&format!("{gpu}-{kind}-{p}"), &[("type", kind)]);
        d.consumes = draw(size);
        nd.devices.push(d);
    }
}
