//! The `Topology` document (cluster-scoped): the network topology of the
//! cluster, merged with the nodes' `topology.trainyard.io/` labels when a
//! snapshot is loaded. At most one per snapshot.
//!
//! ```yaml
//! apiVersion: trainyard.io/v1alpha1
//! kind: Topology
//! metadata: { name: fabric }
//! spec:                       # a trainyard_topology::TopologySpec
//!   switches:
//!     - { name: leaf-0, kind: leaf }
//!     - { name: spine-0, kind: spine }
//!   links:
//!     - { from: node-1, to: leaf-0 }
//!     - { from: leaf-0, to: spine-0 }
//! ```
//!
//! KAI-Scheduler's (`kai.scheduler/v1alpha1`) and Kueue's
//! (`kueue.x-k8s.io/v1alpha1`, `v1beta1`) `Topology` are accepted too:
//! `spec.levels: [{nodeLabel: KEY}, ...]`, widest first. Each entry becomes
//! a level named by its label key; other fields are ignored.
//!
//! The document is read and checked here; it is validated against the
//! cluster's nodes when the snapshot is assembled
//! ([`trainyard_model::topology::Topology::build`]).

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trainyard_model::topology::{LevelSpec, TopologySpec};

use crate::status::TopologyStatus;

use crate::names::dns1123_subdomain_problem;
use crate::{
    API_VERSION, ApiError, ApiErrors, ObjectMeta, check_type, describe_object, from_value,
};

/// `apiVersion` of KAI-Scheduler's `Topology`.
pub const KAI_TOPOLOGY_API_VERSION: &str = "kai.scheduler/v1alpha1";
/// `apiVersion`s of Kueue's `Topology`.
pub const KUEUE_TOPOLOGY_API_VERSIONS: &[&str] =
    &["kueue.x-k8s.io/v1alpha1", "kueue.x-k8s.io/v1beta1"];

/// Every `apiVersion` a `Topology` document may have.
pub const TOPOLOGY_API_VERSIONS: &[&str] = &[
    API_VERSION,
    KAI_TOPOLOGY_API_VERSION,
    KUEUE_TOPOLOGY_API_VERSIONS[0],
    KUEUE_TOPOLOGY_API_VERSIONS[1],
];

/// A `Topology` document (ours, or a KAI/Kueue one converted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologyDocument {
    pub api_version: String,
    pub kind: String,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    pub metadata: ObjectMeta,
    /// `spec:` with no value (null) says nothing.
    #[serde(default, deserialize_with = "crate::de::null_default")]
    pub spec: TopologySpec,
    /// Ignored (present in `kubectl get -o yaml` output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
}

/// The `spec` of [`TopologyResource`], the object as the API serves it,
/// from which the CRD is generated: a [`TopologySpec`].
#[derive(
    Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, CustomResource, JsonSchema,
)]
#[kube(
    crates(kube_core = "::kube_core"),
    group = "trainyard.io",
    version = "v1alpha1",
    kind = "Topology",
    root = "TopologyResource",
    status = "TopologyStatus",
    shortname = "tytopo",
    category = "trainyard",
    doc = "The cluster's network topology: levels (widest first), switches, links, NVLink domains and GPU affinity.",
    printcolumn(name = "Nodes", type_ = "integer", json_path = ".status.nodes"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(transparent)]
#[schemars(
    description = "Levels (widest first) and the fabric: switches, links, NVLink domains, GPU affinity per node. Merged with the nodes' topology.trainyard.io/ labels."
)]
pub struct TopologyResourceSpec(pub TopologySpec);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ForeignTopology {
    #[serde(default, deserialize_with = "crate::de::null_default")]
    metadata: ObjectMeta,
    #[serde(default, deserialize_with = "crate::de::null_default")]
    spec: ForeignSpec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ForeignSpec {
    #[serde(default, deserialize_with = "crate::de::null_default")]
    levels: Vec<ForeignLevel>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ForeignLevel {
    node_label: String,
}

impl TopologyDocument {
    /// Reads a `Topology` document of any accepted `apiVersion`. Ours is
    /// read strictly (unknown fields are errors, with their path); KAI's
    /// and Kueue's leniently. Names and foreign levels are checked by
    /// [`TopologyDocument::validate`].
    pub fn from_value(value: &serde_json::Value) -> Result<TopologyDocument, ApiErrors> {
        let object = describe_object("Topology", value);
        let version = check_type(value, &object, "Topology", TOPOLOGY_API_VERSIONS)?;
        if version == API_VERSION {
            return Ok(from_value(value, &object)?);
        }
        let foreign: ForeignTopology = from_value(value, &object)?;
        Ok(TopologyDocument {
            api_version: version,
            kind: "Topology".to_string(),
            metadata: foreign.metadata,
            spec: TopologySpec {
                levels: foreign
                    .spec
                    .levels
                    .into_iter()
                    .map(|l| LevelSpec {
                        name: l.node_label.clone(),
                        node_label: Some(l.node_label),
                        ..LevelSpec::default()
                    })
                    .collect(),
                ..TopologySpec::default()
            },
            status: None,
        })
    }

    /// Whether this is KAI's or Kueue's shape (levels from node labels only).
    pub fn is_foreign(&self) -> bool {
        self.api_version != API_VERSION
    }

    /// How errors name this document: `Topology <name>`.
    pub fn object(&self) -> String {
        format!("Topology {}", self.metadata.name)
    }

    /// Checks the name and, for KAI/Kueue documents, the levels; reports
    /// every problem found. The rest is checked against the nodes when the
    /// snapshot is assembled.
    pub fn validate(&self) -> Result<(), ApiErrors> {
        let object = self.object();
        let mut errors = Vec::new();
        if let Some(p) = dns1123_subdomain_problem(&self.metadata.name) {
            errors.push(ApiError::new(&object, "metadata.name", p));
        }
        if self.is_foreign() {
            if self.spec.levels.is_empty() {
                errors.push(ApiError::new(
                    &object,
                    "spec.levels",
                    "expected at least one level, such as {nodeLabel: cloud.provider.com/topology-rack}",
                ));
            }
            for (i, l) in self.spec.levels.iter().enumerate() {
                if l.name.is_empty() {
                    errors.push(ApiError::new(
                        &object,
                        format!("spec.levels[{i}].nodeLabel"),
                        "must not be empty; expected a node label key",
                    ));
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ApiErrors(errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use trainyard_model::topology::{FabricLevel, SwitchKind};

    fn parse(v: serde_json::Value) -> Result<TopologyDocument, ApiErrors> {
        let t = TopologyDocument::from_value(&v)?;
        t.validate()?;
        Ok(t)
    }

    #[test]
    fn ours_reads_the_whole_spec() {
        let t = parse(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Topology",
            "metadata": {"name": "fabric"},
            "spec": {
                "levels": [{"name": "block", "fabric": "spineBlock"}, {"name": "leaf", "fabric": "leaf"}],
                "switches": [{"name": "l0", "kind": "leaf"}, {"name": "s0", "kind": "spine", "block": "b0"}],
                "links": [{"from": "n1", "to": "l0"}, {"from": "l0", "to": "s0"}],
                "nvlinkDomains": [{"name": "rack-0", "nodes": ["n1"]}],
                "nodes": [{"node": "n1", "gpus": [{"index": 0, "numa": 0, "nic": 0}]}]
            }
        }))
        .unwrap();
        assert_eq!(t.object(), "Topology fabric");
        assert!(!t.is_foreign());
        assert_eq!(t.spec.levels[0].fabric, Some(FabricLevel::SpineBlock));
        assert_eq!(t.spec.switches[1].kind, SwitchKind::Spine);
        assert_eq!(t.spec.switches[1].block.as_deref(), Some("b0"));
        assert_eq!(t.spec.links.len(), 2);
        assert_eq!(t.spec.nodes[0].gpus[0].nic, Some(0));
        let t = parse(json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Topology", "metadata": {"name": "x"}, "spec": null})).unwrap();
        assert!(t.spec.is_empty());
    }

    #[test]
    fn kai_and_kueue_levels_are_named_by_their_label() {
        for api in ["kai.scheduler/v1alpha1", "kueue.x-k8s.io/v1beta1"] {
            let t = parse(json!({
                "apiVersion": api, "kind": "Topology",
                "metadata": {"name": "cluster-topology", "uid": "1"},
                "spec": {"levels": [{"nodeLabel": "cloud/block"}, {"nodeLabel": "cloud/rack"}]},
                "status": {}
            }))
            .unwrap();
            assert!(t.is_foreign());
            let names: Vec<&str> = t.spec.levels.iter().map(|l| l.name.as_str()).collect();
            assert_eq!(names, ["cloud/block", "cloud/rack"]);
            assert_eq!(t.spec.levels[1].node_label.as_deref(), Some("cloud/rack"));
        }
    }

    #[test]
    fn bad_input_names_the_field() {
        let text = parse(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Topology",
            "metadata": {"name": "f"},
            "spec": {"switches": [{"name": "l0", "kind": "leaf", "speed": 400}]}
        }))
        .unwrap_err()
        .to_string();
        assert!(
            text.starts_with("Topology f: spec.switches[0].speed: unknown field `speed`"),
            "{text}"
        );
        let text = parse(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Topology",
            "metadata": {"name": "f"},
            "spec": {"switches": [{"name": "l0", "kind": "core"}]}
        }))
        .unwrap_err()
        .to_string();
        assert!(
            text.starts_with("Topology f: spec.switches[0].kind: unknown variant `core`"),
            "{text}"
        );
        let text = parse(json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Topology",
            "metadata": {"name": "f"}, "spec": {"links": "none"}
        }))
        .unwrap_err()
        .to_string();
        assert_eq!(
            text,
            "Topology f: spec.links: expected a sequence, found \"none\""
        );
        let text = parse(json!({
            "apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology",
            "metadata": {"name": "Bad_Name"}, "spec": {"levels": [{"nodeLabel": ""}]}
        }))
        .unwrap_err()
        .to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with("Topology Bad_Name: metadata.name: "),
            "{text}"
        );
        assert_eq!(
            lines[1],
            "Topology Bad_Name: spec.levels[0].nodeLabel: must not be empty; expected a node label key"
        );
        let text = parse(json!({
            "apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology",
            "metadata": {"name": "t"}, "spec": {"levels": [{"label": "x"}]}
        }))
        .unwrap_err()
        .to_string();
        assert_eq!(
            text,
            "Topology t: spec.levels[0]: missing field `nodeLabel`"
        );
        let text = parse(json!({
            "apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology",
            "metadata": {"name": "t"}, "spec": {}
        }))
        .unwrap_err()
        .to_string();
        assert!(
            text.starts_with("Topology t: spec.levels: expected at least one level"),
            "{text}"
        );
    }
}
