//! Nodes, their GPU devices, taints, and the label-matching rules of
//! Kubernetes node selectors, affinity and tolerations.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::resources::Resources;

/// One physical GPU on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuDevice {
    /// Device index on the node (0-based, as `nvidia-smi` numbers them).
    pub index: u32,
    /// Product name, e.g. `NVIDIA-H100-80GB-HBM3`; empty when unknown.
    pub model: String,
    /// Device memory in bytes; 0 when unknown.
    pub memory_bytes: u64,
}

/// A node as the scheduler sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    /// Capacity the scheduler may hand out (Kubernetes `status.allocatable`).
    /// `allocatable.gpu` equals `gpus.len() * 1000`.
    pub allocatable: Resources,
    /// Maximum number of pods (`allocatable.pods`); `None` = unlimited.
    pub max_pods: Option<u32>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// GPU devices one by one, sorted by index.
    pub gpus: Vec<GpuDevice>,
}

impl Node {
    /// What the topology needs of the node: its name, labels and number of
    /// GPU devices (at most `u32::MAX`, far above any real node).
    pub fn topology_input(&self) -> trainyard_topology::NodeInput<'_> {
        trainyard_topology::NodeInput {
            name: &self.name,
            labels: &self.labels,
            gpus: u32::try_from(self.gpus.len()).unwrap_or(u32::MAX),
        }
    }

    /// A node with `gpus` identical devices of `model` / `memory_bytes`.
    pub fn new(name: impl Into<String>, cpu_milli: u64, memory: u64, gpus: u32) -> Node {
        let devices = (0..gpus)
            .map(|index| GpuDevice {
                index,
                model: String::new(),
                memory_bytes: 0,
            })
            .collect();
        Node {
            name: name.into(),
            allocatable: Resources::new(cpu_milli, memory, 0).with_gpus(gpus as u64),
            max_pods: None,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            unschedulable: false,
            gpus: devices,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: TaintEffect,
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}", self.key)
        } else {
            write!(f, "{}={}", self.key, self.value)
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TolerationOperator {
    Equal,
    Exists,
}

/// A pod toleration, with Kubernetes semantics: an empty key with `Exists`
/// tolerates everything; an absent effect matches every effect.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Toleration {
    pub key: String,
    pub operator: TolerationOperator,
    pub value: String,
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(effect) = self.effect
            && effect != taint.effect
        {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => self.key.is_empty() || self.key == taint.key,
            TolerationOperator::Equal => self.key == taint.key && self.value == taint.value,
        }
    }
}

/// Operators of node selector requirements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LabelSelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

impl LabelSelectorOperator {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "In" => Self::In,
            "NotIn" => Self::NotIn,
            "Exists" => Self::Exists,
            "DoesNotExist" => Self::DoesNotExist,
            "Gt" => Self::Gt,
            "Lt" => Self::Lt,
            _ => return None,
        })
    }
}

/// One `matchExpressions` entry of a node selector term.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeSelectorRequirement {
    pub key: String,
    pub operator: LabelSelectorOperator,
    pub values: Vec<String>,
}

impl NodeSelectorRequirement {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let v = labels.get(&self.key);
        match self.operator {
            LabelSelectorOperator::In => v.is_some_and(|v| self.values.iter().any(|x| x == v)),
            LabelSelectorOperator::NotIn => v.is_none_or(|v| self.values.iter().all(|x| x != v)),
            LabelSelectorOperator::Exists => v.is_some(),
            LabelSelectorOperator::DoesNotExist => v.is_none(),
            LabelSelectorOperator::Gt | LabelSelectorOperator::Lt => {
                // Kubernetes: exactly one value, both sides parse as integers.
                let (Some(v), [want]) = (v, self.values.as_slice()) else {
                    return false;
                };
                match (v.parse::<i64>(), want.parse::<i64>()) {
                    (Ok(have), Ok(want)) => {
                        if self.operator == LabelSelectorOperator::Gt {
                            have > want
                        } else {
                            have < want
                        }
                    }
                    _ => false,
                }
            }
        }
    }
}

impl fmt::Display for NodeSelectorRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.key, self.operator)?;
        if !self.values.is_empty() {
            write!(f, " [{}]", self.values.join(","))?;
        }
        Ok(())
    }
}

/// A node selector term: all requirements must hold (AND). A pod's required
/// node affinity is a list of terms of which at least one must hold (OR).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeSelectorTerm {
    pub match_expressions: Vec<NodeSelectorRequirement>,
    /// `matchFields` requirements; only `metadata.name` exists in Kubernetes.
    pub match_fields: Vec<NodeSelectorRequirement>,
}

impl NodeSelectorTerm {
    pub fn matches(&self, node: &Node) -> bool {
        // Kubernetes: a term with no requirements matches nothing.
        if self.match_expressions.is_empty() && self.match_fields.is_empty() {
            return false;
        }
        if !self
            .match_expressions
            .iter()
            .all(|r| r.matches(&node.labels))
        {
            return false;
        }
        if self.match_fields.is_empty() {
            return true;
        }
        let fields = BTreeMap::from([("metadata.name".to_string(), node.name.clone())]);
        self.match_fields.iter().all(|r| r.matches(&fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: LabelSelectorOperator, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op,
            values: values.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn selector_operators() {
        use LabelSelectorOperator::*;
        let l = labels(&[("zone", "a"), ("gen", "9")]);
        assert!(req("zone", In, &["a", "b"]).matches(&l));
        assert!(!req("zone", In, &["b"]).matches(&l));
        assert!(req("zone", NotIn, &["b"]).matches(&l));
        assert!(req("missing", NotIn, &["b"]).matches(&l));
        assert!(req("zone", Exists, &[]).matches(&l));
        assert!(req("missing", DoesNotExist, &[]).matches(&l));
        assert!(req("gen", Gt, &["8"]).matches(&l));
        assert!(!req("gen", Gt, &["9"]).matches(&l));
        assert!(req("gen", Lt, &["10"]).matches(&l));
        assert!(
            !req("zone", Lt, &["10"]).matches(&l),
            "non-integer label never matches Lt"
        );
        assert!(
            !req("gen", Gt, &["1", "2"]).matches(&l),
            "Gt needs exactly one value"
        );
    }

    #[test]
    fn empty_term_matches_nothing_and_fields_match_name() {
        let node = Node::new("n1", 1000, 1, 0);
        assert!(
            !NodeSelectorTerm {
                match_expressions: vec![],
                match_fields: vec![]
            }
            .matches(&node)
        );
        let t = NodeSelectorTerm {
            match_expressions: vec![],
            match_fields: vec![req("metadata.name", LabelSelectorOperator::In, &["n1"])],
        };
        assert!(t.matches(&node));
    }

    #[test]
    fn tolerations() {
        let taint = Taint {
            key: "dedicated".into(),
            value: "infer".into(),
            effect: TaintEffect::NoSchedule,
        };
        let exact = Toleration {
            key: "dedicated".into(),
            operator: TolerationOperator::Equal,
            value: "infer".into(),
            effect: Some(TaintEffect::NoSchedule),
        };
        let wrong_value = Toleration {
            value: "train".into(),
            ..exact.clone()
        };
        let wildcard = Toleration {
            key: String::new(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: None,
        };
        let wrong_effect = Toleration {
            effect: Some(TaintEffect::NoExecute),
            ..exact.clone()
        };
        assert!(exact.tolerates(&taint));
        assert!(!wrong_value.tolerates(&taint));
        assert!(wildcard.tolerates(&taint));
        assert!(!wrong_effect.tolerates(&taint));
    }
}
