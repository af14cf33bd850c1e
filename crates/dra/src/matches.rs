//! Which devices each selector set accepts, per node.

use std::collections::BTreeMap;
use std::sync::Arc;

use trainyard_model::dra::{DeviceMask, NodeDevices, SelectorMatches, SelectorSet};

use crate::env::Evaluator;
use crate::selector::Selector;

/// A selector set compiled once: its class's and its request's
/// expressions, all of which must accept a device.
#[derive(Debug)]
pub struct CompiledSet {
    known_class: bool,
    /// The selectors, or the first compile error's message.
    selectors: Result<Vec<Selector>, String>,
}

impl CompiledSet {
    /// Compiles `set`'s expressions; `known_class`: its device class
    /// exists (a set of an unknown class accepts nothing and is not
    /// evaluated).
    pub fn compile(set: &SelectorSet, known_class: bool) -> CompiledSet {
        let selectors = if known_class {
            set.expressions
                .iter()
                .map(|e| Selector::compile(e).map_err(|err| format!("class {}: {err}", set.class)))
                .collect()
        } else {
            Ok(Vec::new())
        };
        CompiledSet {
            known_class,
            selectors,
        }
    }

    /// Whether the set can accept any device: its class exists and its
    /// expressions compiled.
    pub fn usable(&self) -> bool {
        self.known_class && self.selectors.is_ok()
    }
}

/// One selector set on one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeMatch {
    /// The node's devices the set accepts.
    pub mask: DeviceMask,
    /// The first evaluation error on the node's devices, in device order.
    pub error: Option<String>,
}

/// Evaluates every set on every device of one node (`node` names it in
/// errors): one [`NodeMatch`] per set, same index. A set's expressions
/// are evaluated in order, and the first that is false (or fails) decides,
/// as in Kubernetes.
pub fn matches_on_node(
    evaluator: &Evaluator,
    node: &str,
    devices: &NodeDevices,
    sets: &[CompiledSet],
) -> Vec<NodeMatch> {
    let mut out: Vec<NodeMatch> = sets
        .iter()
        .map(|_| NodeMatch {
            mask: DeviceMask::with_len(devices.devices.len()),
            error: None,
        })
        .collect();
    if !sets.iter().any(CompiledSet::usable) {
        return out;
    }
    for (i, device) in devices.devices.iter().enumerate() {
        let input = evaluator.device(device);
        for (set, result) in sets.iter().zip(out.iter_mut()) {
            let Ok(selectors) = &set.selectors else {
                continue;
            };
            if !set.known_class {
                continue;
            }
            let mut accepted = true;
            for selector in selectors {
                match evaluator.matches(selector, &input) {
                    Ok(true) => {}
                    Ok(false) => {
                        accepted = false;
                        break;
                    }
                    Err(err) => {
                        accepted = false;
                        if result.error.is_none() {
                            result.error =
                                Some(format!("node {node}: device {}: {err}", device.id()));
                        }
                        break;
                    }
                }
            }
            if accepted {
                result.mask.insert(i);
            }
        }
    }
    out
}

/// A set's matches from its per-node results, taken in the order given
/// (node order, for the first error to be the first node's): nodes
/// without an accepted device are left out; the error is the set's
/// compile error, else the first node error.
pub fn assemble<'a>(
    set: &CompiledSet,
    per_node: impl IntoIterator<Item = (&'a str, &'a NodeMatch)>,
) -> SelectorMatches {
    let mut out = SelectorMatches {
        by_node: BTreeMap::new(),
        error: set.selectors.as_ref().err().cloned(),
        unknown_class: !set.known_class,
    };
    if !set.usable() {
        return out;
    }
    for (node, m) in per_node {
        if out.error.is_none() {
            out.error.clone_from(&m.error);
        }
        if m.mask.count() > 0 {
            out.by_node.insert(node.to_string(), m.mask.clone());
        }
    }
    out
}

/// Every selector set's matches over every node: one per set, same index
/// (`Dra::matches` for `Dra::selectors`). `known_class` tells whether a
/// device class exists. Deterministic: nodes in name order, devices in
/// their order.
pub fn compute_matches(
    nodes: &BTreeMap<String, Arc<NodeDevices>>,
    sets: &[SelectorSet],
    known_class: impl Fn(&str) -> bool,
) -> Vec<Arc<SelectorMatches>> {
    let compiled: Vec<CompiledSet> = sets
        .iter()
        .map(|s| CompiledSet::compile(s, known_class(&s.class)))
        .collect();
    let evaluator = Evaluator::new();
    let per_node: Vec<(&str, Vec<NodeMatch>)> = nodes
        .iter()
        .map(|(name, devices)| {
            (
                name.as_str(),
                matches_on_node(&evaluator, name, devices, &compiled),
            )
        })
        .collect();
    compiled
        .iter()
        .enumerate()
        .map(|(i, set)| {
            Arc::new(assemble(
                set,
                per_node.iter().map(|(node, ms)| (*node, &ms[i])),
            ))
        })
        .collect()
}

/// Matches kept from one computation to the next, so that a rebuild of
/// the DRA part (a claim or a pod changed) evaluates only the selector
/// sets and nodes that are new or whose devices changed. Sets no longer
/// asked for and nodes no longer present are dropped.
#[derive(Debug, Default)]
pub struct MatchCache {
    sets: std::collections::HashMap<(SelectorSet, bool), CachedSet>,
}

#[derive(Debug)]
struct CachedSet {
    compiled: CompiledSet,
    /// Per node: the devices evaluated and the result.
    nodes: BTreeMap<String, (Arc<NodeDevices>, NodeMatch)>,
}

impl MatchCache {
    /// The same as [`compute_matches`], evaluating only what the cache
    /// does not hold for the same set and the same devices.
    pub fn matches(
        &mut self,
        nodes: &BTreeMap<String, Arc<NodeDevices>>,
        sets: &[SelectorSet],
        known_class: impl Fn(&str) -> bool,
    ) -> Vec<Arc<SelectorMatches>> {
        let evaluator = Evaluator::new();
        let mut kept = std::collections::HashMap::new();
        let mut out = Vec::with_capacity(sets.len());
        for set in sets {
            let key = (set.clone(), known_class(&set.class));
            let mut entry = self.sets.remove(&key).unwrap_or_else(|| CachedSet {
                compiled: CompiledSet::compile(set, key.1),
                nodes: BTreeMap::new(),
            });
            entry.nodes.retain(|name, _| nodes.contains_key(name));
            for (name, devices) in nodes {
                let fresh = entry
                    .nodes
                    .get(name)
                    .is_some_and(|(seen, _)| Arc::ptr_eq(seen, devices) || **seen == **devices);
                if !fresh {
                    let m = matches_on_node(
                        &evaluator,
                        name,
                        devices,
                        std::slice::from_ref(&entry.compiled),
                    )
                    .pop()
                    .unwrap_or_default();
                    entry.nodes.insert(name.clone(), (Arc::clone(devices), m));
                }
            }
            out.push(Arc::new(assemble(
                &entry.compiled,
                entry.nodes.iter().map(|(n, (_, m))| (n.as_str(), m)),
            )));
            kept.insert(key, entry);
        }
        self.sets = kept;
        out
    }
}

#[cfg(test)]
mod tests {
    use trainyard_model::dra::{AttrValue, Device};

    use super::*;

    fn device(name: &str, kind: &str, index: i64) -> Device {
        Device {
            driver: "gpu.nvidia.com".into(),
            pool: "pool".into(),
            name: name.into(),
            attributes: BTreeMap::from([
                ("gpu.nvidia.com/type".into(), AttrValue::String(kind.into())),
                ("gpu.nvidia.com/index".into(), AttrValue::Int(index)),
            ]),
            capacity: BTreeMap::new(),
            consumes: Vec::new(),
            taints: Vec::new(),
            multi: false,
        }
    }

    fn nodes() -> BTreeMap<String, Arc<NodeDevices>> {
        let a = NodeDevices {
            devices: vec![
                device("gpu-0", "gpu", 0),
                device("mig-0", "mig", 0),
                device("gpu-1", "gpu", 1),
            ],
            counter_sets: Vec::new(),
        };
        let b = NodeDevices {
            devices: vec![device("mig-1", "mig", 1)],
            counter_sets: Vec::new(),
        };
        BTreeMap::from([
            ("a".to_string(), Arc::new(a)),
            ("b".to_string(), Arc::new(b)),
        ])
    }

    fn set(class: &str, exprs: &[&str]) -> SelectorSet {
        SelectorSet {
            class: class.into(),
            expressions: exprs.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn masks_per_node() {
        let sets = [
            set(
                "gpu",
                &[r#"device.attributes["gpu.nvidia.com"].type == "gpu""#],
            ),
            set(
                "gpu",
                &[
                    r#"device.attributes["gpu.nvidia.com"].type == "gpu""#,
                    r#"device.attributes["gpu.nvidia.com"].index == 1"#,
                ],
            ),
            set(
                "mig",
                &[r#"device.attributes["gpu.nvidia.com"].type == "mig""#],
            ),
            set("gpu", &[]),
        ];
        let m = compute_matches(&nodes(), &sets, |_| true);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].by_node["a"].iter().collect::<Vec<_>>(), vec![0, 2]);
        assert!(!m[0].by_node.contains_key("b"));
        assert_eq!(m[1].by_node["a"].iter().collect::<Vec<_>>(), vec![2]);
        assert_eq!(m[2].by_node["a"].iter().collect::<Vec<_>>(), vec![1]);
        assert_eq!(m[2].by_node["b"].iter().collect::<Vec<_>>(), vec![0]);
        // No expressions: every device.
        assert_eq!(m[3].by_node["a"].count(), 3);
        assert!(m.iter().all(|s| s.error.is_none() && !s.unknown_class));
    }

    #[test]
    fn unknown_classes_and_errors() {
        let sets = [
            set("missing", &["true"]),
            set("gpu", &["device.driver =="]),
            // Fails on MIG devices only (no `profile` on any): first error
            // is node a's mig-0.
            set(
                "gpu",
                &[
                    r#"device.attributes["gpu.nvidia.com"].type == "gpu" || device.attributes["gpu.nvidia.com"].profile == "1g""#,
                ],
            ),
        ];
        let m = compute_matches(&nodes(), &sets, |c| c != "missing");
        assert!(m[0].unknown_class && m[0].by_node.is_empty() && m[0].error.is_none());
        let e = m[1].error.as_deref().unwrap();
        assert!(
            e.starts_with("class gpu: selector `device.driver ==`: syntax error"),
            "{e}"
        );
        assert!(m[1].by_node.is_empty());
        let e = m[2].error.as_deref().unwrap();
        assert!(
            e.starts_with("node a: device gpu.nvidia.com/pool/mig-0: selector"),
            "{e}"
        );
        assert!(e.ends_with("no such key: profile"), "{e}");
        assert_eq!(m[2].by_node["a"].iter().collect::<Vec<_>>(), vec![0, 2]);
    }

    #[test]
    fn shareable_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Selector>();
        send_sync::<Evaluator>();
        send_sync::<CompiledSet>();
    }

    #[test]
    fn one_node_at_a_time_agrees() {
        let sets = [set(
            "gpu",
            &[r#"device.attributes["gpu.nvidia.com"].index == 1"#],
        )];
        let all = compute_matches(&nodes(), &sets, |_| true);
        let compiled = [CompiledSet::compile(&sets[0], true)];
        let ev = Evaluator::new();
        let ns = nodes();
        let per: Vec<(&str, Vec<NodeMatch>)> = ns
            .iter()
            .map(|(n, d)| (n.as_str(), matches_on_node(&ev, n, d, &compiled)))
            .collect();
        let again = assemble(&compiled[0], per.iter().map(|(n, m)| (*n, &m[0])));
        assert_eq!(*all[0], again);
    }
}
