//! The cluster's topology (the `Topology` document plus the nodes'
//! `topology.trainyard.io/` labels), the levels gangs name, and pod ranks.
//! User-facing description: docs/topology-api.md.

use std::sync::Arc;

use trainyard_crd::keys::{self, KeyPlace};
use trainyard_crd::{ObjectMeta, TopologyDocument};
use trainyard_model::Node;
use trainyard_model::topology::{
    FabricLevel, LevelKind, NodeInput, Topology, TopologyError, labels,
};

use crate::LoadError;
use crate::read::Loc;

/// Why a constraint cannot name a level when there is no topology.
const NO_TOPOLOGY: &str =
    "the cluster has no topology (no Topology document and no topology.trainyard.io/ node labels)";

/// The topology as far as job assembly is concerned.
#[derive(Default)]
pub(crate) struct ClusterTopology {
    pub topology: Option<Arc<Topology>>,
    /// Building it failed (reported): constraints are not checked against it.
    pub failed: bool,
    /// Name of the Topology document, if there is one.
    pub document: Option<String>,
}

/// Builds the topology from the Topology document (if any) and every
/// node's labels. Errors and warnings are pushed; a failure leaves
/// `failed` set.
pub(crate) fn build(
    nodes: &[(Loc, Node)],
    doc: Option<&(Loc, TopologyDocument)>,
    errors: &mut Vec<LoadError>,
    warnings: &mut Vec<String>,
) -> ClusterTopology {
    let inputs: Vec<NodeInput> = nodes.iter().map(|(_, n)| n.topology_input()).collect();
    let empty = trainyard_model::topology::TopologySpec::default();
    let spec = doc.map_or(&empty, |(_, d)| &d.spec);
    let document = doc.map(|(_, d)| d.metadata.name.clone());
    match Topology::build(spec, &inputs) {
        Ok(Some(t)) => {
            for w in t.warnings() {
                warnings.push(match doc {
                    Some((loc, d)) => {
                        let w = w.strip_prefix("topology: ").unwrap_or(w);
                        // Paths inside the document's spec.
                        let spec = if w.starts_with("links[") || w.starts_with("nodes:") {
                            "spec."
                        } else {
                            ""
                        };
                        format!("{}: {}: {spec}{w}", loc.at(), d.object())
                    }
                    None => w.clone(),
                });
            }
            ClusterTopology {
                topology: Some(Arc::new(t)),
                failed: false,
                document,
            }
        }
        Ok(None) => {
            if let Some((loc, d)) = doc {
                warnings.push(format!(
                    "{}: {}: describes nothing and no node has topology.trainyard.io/ labels; the cluster has no topology",
                    loc.at(),
                    d.object()
                ));
            }
            ClusterTopology {
                topology: None,
                failed: false,
                document,
            }
        }
        Err(e) => {
            errors.push(build_error(&e, nodes, doc));
            ClusterTopology {
                topology: None,
                failed: true,
                document,
            }
        }
    }
}

/// A [`TopologyError`] as a loader error: at the node label it comes from,
/// or at the field of the Topology document.
fn build_error(
    e: &TopologyError,
    nodes: &[(Loc, Node)],
    doc: Option<&(Loc, TopologyDocument)>,
) -> LoadError {
    let node_error = |name: &str, field: &str, message: String| {
        nodes
            .iter()
            .find(|(_, n)| n.name == name)
            .map(|(loc, _)| loc.error(Some(&format!("Node {name}")), field, message))
    };
    let doc_error = |field: Option<String>, message: String| {
        doc.map(|(loc, d)| loc.error(Some(&d.object()), field.as_deref().unwrap_or(""), message))
    };
    let spec = doc.map(|(_, d)| &d.spec);
    let level_field = |level: &str, suffix: &str| {
        spec.and_then(|s| s.levels.iter().position(|l| l.name == level))
            .map(|i| format!("spec.levels[{i}]{suffix}"))
    };
    let found = match e {
        TopologyError::BadLabel {
            node,
            label,
            value,
            expected,
        } => node_error(
            node,
            &format!("metadata.labels.{label}"),
            format!("{value:?}: expected {expected}"),
        ),
        TopologyError::BadLevel {
            index,
            name,
            message,
        } => doc_error(
            spec.filter(|s| *index < s.levels.len())
                .map(|_| format!("spec.levels[{index}]")),
            format!("level {name:?}: {message}"),
        ),
        TopologyError::DuplicateSwitch { name } => doc_error(
            spec.and_then(|s| {
                s.switches
                    .iter()
                    .enumerate()
                    .filter(|(_, sw)| &sw.name == name)
                    .nth(1)
                    .map(|(i, _)| format!("spec.switches[{i}].name"))
            }),
            format!("switch {name:?} is declared twice"),
        ),
        TopologyError::DanglingLink {
            index,
            from,
            to,
            message,
        } => {
            let message = format!("{from} → {to}: {message}");
            match spec {
                Some(s) if *index < s.links.len() => {
                    doc_error(Some(format!("spec.links[{index}]")), message)
                }
                // A link made from a node's leaf or rails label.
                _ => {
                    let (node, label) = match from.split_once('/') {
                        Some((n, _)) => (n, labels::RAILS),
                        None => (from.as_str(), labels::LEAF),
                    };
                    node_error(node, &format!("metadata.labels.{label}"), message)
                        .or_else(|| doc_error(None, e.to_string()))
                }
            }
        }
        TopologyError::NodeInTwoDomains { level, node, .. } => {
            let field = level_field(level, ".domains").or_else(|| {
                spec.filter(|s| level == "nvlink" && !s.nvlink_domains.is_empty())
                    .map(|_| "spec.nvlinkDomains".to_string())
            });
            doc_error(field, e.to_string()).or_else(|| node_error(node, "", e.to_string()))
        }
        TopologyError::NotNested { level, b, .. } => {
            doc_error(level_field(level, ""), e.to_string()).or_else(|| {
                node_error(
                    b,
                    "",
                    format!("{e} (levels from the nodes' topology.trainyard.io/ labels)"),
                )
            })
        }
        TopologyError::BadAffinity {
            node,
            index,
            message,
        } => doc_error(
            spec.and_then(|s| s.nodes.iter().position(|n| &n.node == node))
                .map(|i| format!("spec.nodes[{i}].gpus")),
            format!("node {node:?}: GPU {index}: {message}"),
        ),
    };
    found.unwrap_or_else(|| LoadError {
        source_name: String::new(),
        document: None,
        object: None,
        field: None,
        message: format!("topology: {e}"),
    })
}

impl ClusterTopology {
    /// The level `value` names: a level name, the node label key of a
    /// label level, or a `topology.trainyard.io/` label key of a fabric
    /// level. `Ok(None)` when the topology failed to build (reported
    /// already); `Err` is the message for the field naming it.
    pub fn resolve(&self, value: &str) -> Result<Option<String>, String> {
        if self.failed {
            return Ok(None);
        }
        let Some(t) = &self.topology else {
            return Err(format!(
                "{value:?} names a topology level, but {NO_TOPOLOGY}"
            ));
        };
        if t.level_index(value).is_some() {
            return Ok(Some(value.to_string()));
        }
        let fabric = match value {
            labels::LEAF | labels::RAILS => Some(FabricLevel::Leaf),
            labels::SPINE_BLOCK => Some(FabricLevel::SpineBlock),
            labels::NVLINK_DOMAIN => Some(FabricLevel::Nvlink),
            _ => None,
        };
        let found = t.levels().iter().find(|l| match &l.kind {
            LevelKind::NodeLabel(k) => k == value,
            LevelKind::Fabric(f) => fabric == Some(*f),
            LevelKind::Explicit => false,
        });
        match found {
            Some(l) => Ok(Some(l.name.clone())),
            None => Err(format!(
                "unknown topology level {value:?}; expected one of {} (a level name, or the node label key of a label level)",
                t.level_names().join(", ")
            )),
        }
    }

    /// Checks that `maxLeaves` can be honoured; `Err` is the message.
    pub fn check_max_leaves(&self) -> Result<(), String> {
        if self.failed {
            return Ok(());
        }
        match &self.topology {
            None => Err(format!("maxLeaves needs a topology, but {NO_TOPOLOGY}")),
            Some(t) if t.leaf_level().is_none() => Err(format!(
                "maxLeaves counts leaf domains, but the topology has no leaf level (its levels: {})",
                t.level_names().join(", ")
            )),
            Some(_) => Ok(()),
        }
    }

    /// Whether level `a` is wider than level `b` (both resolved names).
    pub fn wider(&self, a: &str, b: &str) -> bool {
        let Some(t) = &self.topology else {
            return false;
        };
        matches!((t.level_index(a), t.level_index(b)), (Some(x), Some(y)) if x > y)
    }
}

/// A problem with a pod's metadata: field path and message.
pub(crate) type MetaError = (String, String);

fn meta_path(meta: &ObjectMeta, key: &str, place: KeyPlace) -> String {
    crate::meta::meta_field(meta, key, place)
}

/// Reads a whole-number index from `key`; `None` when absent.
fn index(meta: &ObjectMeta, key: &str, place: KeyPlace) -> Option<Result<u32, MetaError>> {
    let v = meta.lookup(key, place)?;
    Some(v.trim().parse::<u32>().map_err(|_| {
        (
            meta_path(meta, key, place),
            format!("{v:?} is not a whole number; expected an index from 0 to 4294967295"),
        )
    }))
}

/// The pod's rank in its gang, from the first of: `trainyard.io/rank`;
/// Kubeflow's replica index; JobSet's job index with the completion index
/// (`job × 65536 + completion`); an Indexed Job's completion index.
pub(crate) fn pod_rank(meta: &ObjectMeta) -> Result<Option<u32>, MetaError> {
    if let Some(r) = index(meta, keys::RANK, KeyPlace::LabelOrAnnotation) {
        return r.map(Some);
    }
    if let Some(r) = index(meta, keys::KUBEFLOW_REPLICA_INDEX, KeyPlace::Label) {
        return r.map(Some);
    }
    let completion = index(
        meta,
        keys::JOB_COMPLETION_INDEX,
        KeyPlace::LabelOrAnnotation,
    );
    let job = index(meta, keys::JOBSET_JOB_INDEX, KeyPlace::LabelOrAnnotation);
    match (job, completion) {
        (_, None) => Ok(None),
        (None, Some(c)) => c.map(Some),
        (Some(j), Some(c)) => {
            let (j, c) = (j?, c?);
            if c >= keys::JOBSET_RANK_STRIDE {
                return Err((
                    meta_path(
                        meta,
                        keys::JOB_COMPLETION_INDEX,
                        KeyPlace::LabelOrAnnotation,
                    ),
                    format!(
                        "{c} is too large to combine with {}={j}; expected below {} (rank = job index × {} + completion index)",
                        keys::JOBSET_JOB_INDEX,
                        keys::JOBSET_RANK_STRIDE,
                        keys::JOBSET_RANK_STRIDE
                    ),
                ));
            }
            j.checked_mul(keys::JOBSET_RANK_STRIDE)
                .and_then(|r| r.checked_add(c))
                .map(Some)
                .ok_or_else(|| {
                    (
                        meta_path(meta, keys::JOBSET_JOB_INDEX, KeyPlace::LabelOrAnnotation),
                        format!(
                            "{j} is too large; expected below {} (rank = job index × {} + completion index)",
                            u32::MAX / keys::JOBSET_RANK_STRIDE + 1,
                            keys::JOBSET_RANK_STRIDE
                        ),
                    )
                })
        }
    }
}
