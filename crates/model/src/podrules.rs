//! Placement rules between pods, as Kubernetes states them: inter-pod
//! affinity and anti-affinity (`spec.affinity.podAffinity`,
//! `podAntiAffinity`), topology spread constraints
//! (`spec.topologySpreadConstraints`) and host ports.
//!
//! These are data: `trainyard-ingest` converts a pod's fields into them
//! (resolving defaults such as the pod's own namespace and merging
//! `matchLabelKeys`/`mismatchLabelKeys` into the selector), and the core
//! (`trainyard-sched`) checks and scores them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::node::NodeSelectorRequirement;

/// The label every namespace carries with its own name; the only
/// namespace label known without reading Namespace objects.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A Kubernetes label selector over pod labels: every `matchLabels` entry
/// and every expression must hold. An empty selector matches every pod.
/// Expressions use `In`, `NotIn`, `Exists` and `DoesNotExist` only.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<NodeSelectorRequirement>,
}

impl LabelSelector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

/// Which namespaces a term looks at: all of them, those listed, or those
/// whose labels match `selector` (evaluated on the one label known for
/// every namespace, [`NAMESPACE_NAME_LABEL`]). The converter resolves the
/// default (the pod's own namespace) into `names`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NamespaceFilter {
    #[serde(default)]
    pub all: bool,
    /// Sorted, no duplicates.
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub selector: Option<LabelSelector>,
}

impl NamespaceFilter {
    pub fn matches(&self, namespace: &str) -> bool {
        if self.all || self.names.iter().any(|n| n == namespace) {
            return true;
        }
        self.selector.as_ref().is_some_and(|s| {
            let labels =
                BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), namespace.to_string())]);
            s.matches(&labels)
        })
    }
}

/// One inter-pod affinity or anti-affinity term: the pods it selects and
/// the node label whose values are its domains.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodAffinityTerm {
    /// `None` (Kubernetes: a null selector) selects no pod.
    pub selector: Option<LabelSelector>,
    pub namespaces: NamespaceFilter,
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// Whether the term selects a pod of `namespace` with `labels`.
    pub fn selects(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.selector.as_ref().is_some_and(|s| s.matches(labels))
            && self.namespaces.matches(namespace)
    }
}

/// A preferred term and its weight (1–100).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WeightedPodAffinityTerm {
    pub weight: u32,
    pub term: PodAffinityTerm,
}

/// `whenUnsatisfiable` of a topology spread constraint.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum WhenUnsatisfiable {
    /// A filter: nodes that would break `maxSkew` are not used.
    #[default]
    DoNotSchedule,
    /// A score: nodes that keep the skew low are preferred.
    ScheduleAnyway,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy`: whether nodes the pod may
/// not use count as domains of the spread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

/// One topology spread constraint. Pods counted are those of the pod's own
/// namespace that `selector` matches, on nodes that carry `topology_key`
/// (and every other key of the pod's constraints) and pass the policies.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SpreadConstraint {
    /// At least 1.
    pub max_skew: u32,
    pub topology_key: String,
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// `None` counts no pod.
    pub selector: Option<LabelSelector>,
    /// With fewer eligible domains than this, the global minimum is 0.
    pub min_domains: Option<u32>,
    /// Default `Honor`: only nodes matching the pod's node selector and
    /// required node affinity are domains.
    pub node_affinity_policy: InclusionPolicy,
    /// Default `Ignore`: tainted nodes count too.
    pub node_taints_policy: InclusionPolicy,
}

/// A host port a pod opens on its node.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct HostPort {
    pub port: u16,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// The host IP; `0.0.0.0` (the default) binds every address.
    pub ip: String,
}

impl HostPort {
    /// Two pods cannot share a node when their ports conflict: same port
    /// and protocol, and the same IP or either one `0.0.0.0`.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        let any = |ip: &str| ip.is_empty() || ip == "0.0.0.0";
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || any(&self.ip) || any(&other.ip))
    }
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.port, self.protocol)?;
        if !self.ip.is_empty() && self.ip != "0.0.0.0" {
            write!(f, " on {}", self.ip)?;
        }
        Ok(())
    }
}

/// A pod's rules about other pods. Empty for most pods; a cycle in which
/// every pod's rules are empty pays nothing for them.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodRules {
    /// Required pod affinity: every term must find a selected pod in the
    /// candidate node's domain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub affinity: Vec<PodAffinityTerm>,
    /// Required pod anti-affinity: no term may find a selected pod in the
    /// candidate node's domain (and, symmetrically, a placed pod's term
    /// keeps pods it selects out of its own domain).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anti_affinity: Vec<PodAffinityTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_affinity: Vec<WeightedPodAffinityTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_anti_affinity: Vec<WeightedPodAffinityTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spread: Vec<SpreadConstraint>,
    /// Sorted, no duplicates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_ports: Vec<HostPort>,
}

impl PodRules {
    pub fn is_empty(&self) -> bool {
        self.affinity.is_empty()
            && self.anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty()
            && self.spread.is_empty()
            && self.host_ports.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::LabelSelectorOperator;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn selectors_and_namespaces() {
        let sel = LabelSelector {
            match_labels: labels(&[("app", "web")]),
            match_expressions: vec![NodeSelectorRequirement {
                key: "tier".into(),
                operator: LabelSelectorOperator::NotIn,
                values: vec!["db".into()],
            }],
        };
        assert!(sel.matches(&labels(&[("app", "web")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert!(!sel.matches(&labels(&[])));
        assert!(LabelSelector::default().matches(&labels(&[])));
        let term = PodAffinityTerm {
            selector: Some(sel),
            namespaces: NamespaceFilter {
                names: vec!["ml".into()],
                ..Default::default()
            },
            topology_key: "zone".into(),
        };
        assert!(term.selects("ml", &labels(&[("app", "web")])));
        assert!(!term.selects("other", &labels(&[("app", "web")])));
        let null = PodAffinityTerm {
            selector: None,
            ..term.clone()
        };
        assert!(!null.selects("ml", &labels(&[("app", "web")])));
        let by_name = NamespaceFilter {
            selector: Some(LabelSelector {
                match_labels: labels(&[(NAMESPACE_NAME_LABEL, "team-a")]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(by_name.matches("team-a") && !by_name.matches("team-b"));
    }

    #[test]
    fn host_ports_conflict_on_any_address() {
        let p = |port, proto: &str, ip: &str| HostPort {
            port,
            protocol: proto.into(),
            ip: ip.into(),
        };
        assert!(p(80, "TCP", "0.0.0.0").conflicts(&p(80, "TCP", "10.0.0.1")));
        assert!(p(80, "TCP", "10.0.0.1").conflicts(&p(80, "TCP", "10.0.0.1")));
        assert!(!p(80, "TCP", "10.0.0.1").conflicts(&p(80, "TCP", "10.0.0.2")));
        assert!(!p(80, "TCP", "").conflicts(&p(80, "UDP", "")));
        assert!(!p(80, "TCP", "").conflicts(&p(81, "TCP", "")));
    }
}
