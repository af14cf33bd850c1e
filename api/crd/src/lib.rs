//! Trainyard's user-facing documents as Kubernetes-style objects.
//!
//! Documents (`Queue`, `PodGroup`, `Topology`) have `apiVersion:
//! trainyard.io/v1alpha1`, a `kind`, `metadata` and a `spec`. This crate
//! turns already-parsed document trees (`serde_json::Value`, which YAML and
//! JSON both parse into) into typed, validated objects, and those into
//! model values. It also parses Kubernetes quantities and RFC 3339
//! timestamps exactly, names the label/annotation keys Trainyard
//! understands, and reads the GPU-sharing annotations of pods ([`gpu`]).
//! No I/O.
//!
//! Every error names the object (`Queue team-a`, `PodGroup ml/train-1`),
//! the field path (`spec.quota.nvidia.com/gpu`) and what was expected.

pub mod cel;
pub mod de;
pub mod duration;
pub mod foreign_queue;
pub mod gpu;
pub mod keys;
pub mod names;
pub mod podgroup;
pub mod preemption;
pub mod quantity;
pub mod queue;
pub mod resources;
pub mod schema;
pub mod status;
pub mod time;
pub mod topology;

use std::collections::BTreeMap;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use duration::{DurationError, RawDuration, parse_duration_ms, parse_duration_seconds};
pub use gpu::{GpuAnnotationError, GpuAnnotationProblem, GpuShare, GpuSharingRequest};
pub use podgroup::{
    ConstraintField, PodGroup, PodGroupResource, PodGroupSpec, SubGroupSpec, TopologyConstraintSpec,
};
pub use quantity::{Quantity, QuantityError, RawQuantity, parse_quantity};
pub use queue::{LimitValue, Queue, QueueResource, QueueSpecDoc};
pub use resources::{crd_yaml, crds, crds_yaml};
pub use status::{PodGroupPhase, PodGroupStatus, QueueStatus, TopologyStatus};
pub use time::{TimestampError, parse_rfc3339};
pub use topology::{TopologyDocument, TopologyResource, TopologyResourceSpec};

/// `apiVersion` of Trainyard's own documents.
pub const API_VERSION: &str = "trainyard.io/v1alpha1";
/// `apiVersion` of Volcano PodGroups.
pub const VOLCANO_API_VERSION: &str = "scheduling.volcano.sh/v1beta1";
/// `apiVersion` of scheduler-plugins (coscheduling) PodGroups.
pub const COSCHEDULING_API_VERSION: &str = "scheduling.x-k8s.io/v1alpha1";
/// `apiVersion` of KAI-Scheduler PodGroups.
pub const KAI_API_VERSION: &str = "scheduling.run.ai/v2alpha2";

/// One problem with one object.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ApiError {
    /// Kind and name, e.g. `Queue team-a` or `PodGroup ml/train-1`.
    pub object: String,
    /// Path of the offending field, e.g. `spec.quota.nvidia.com/gpu`;
    /// empty when the problem is with the object as a whole.
    pub field: String,
    /// What was expected and what was found.
    pub message: String,
}

impl ApiError {
    pub fn new(
        object: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            object: object.into(),
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.object, self.message)
        } else {
            write!(f, "{}: {}: {}", self.object, self.field, self.message)
        }
    }
}

/// Every problem found with one object (never empty when returned as an error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ApiErrors(pub Vec<ApiError>);

impl fmt::Display for ApiErrors {
    /// One problem per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_lines(f, &self.0)
    }
}

/// Writes `items` one per line (no trailing newline): the shared format
/// of every "all problems at once" error list.
pub fn write_lines<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            f.write_str("\n")?;
        }
        write!(f, "{e}")?;
    }
    Ok(())
}

impl From<ApiError> for ApiErrors {
    fn from(e: ApiError) -> Self {
        ApiErrors(vec![e])
    }
}

/// Kubernetes object metadata: the parts Trainyard reads. Unknown fields
/// (resourceVersion, managedFields, ...) are ignored, so real
/// `kubectl get -o yaml` output parses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default, deserialize_with = "de::null_default")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The API server's id of this object (empty when the document has
    /// none, as in hand-written files).
    #[serde(
        default,
        deserialize_with = "de::null_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub uid: String,
    #[serde(
        default,
        deserialize_with = "de::null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub labels: BTreeMap<String, String>,
    #[serde(
        default,
        deserialize_with = "de::null_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
    /// RFC 3339 text; see [`ObjectMeta::creation_time`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// RFC 3339 text, set while the object is being deleted; see
    /// [`ObjectMeta::deletion_time`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// The objects this one belongs to; the one with `controller: true`
    /// recreates it (a pod without one is gone for good once deleted).
    #[serde(
        default,
        deserialize_with = "de::null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub owner_references: Vec<OwnerReference>,
}

/// One `metadata.ownerReferences` entry (the fields the scheduler reads).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
}

impl ObjectMeta {
    /// `metadata.namespace`, `default` when absent or empty.
    pub fn namespace_or_default(&self) -> &str {
        match self.namespace.as_deref() {
            Some(ns) if !ns.is_empty() => ns,
            _ => "default",
        }
    }

    /// `metadata.creationTimestamp` parsed; `None` when absent.
    pub fn creation_time(&self) -> Result<Option<trainyard_model::Timestamp>, TimestampError> {
        self.creation_timestamp
            .as_deref()
            .map(parse_rfc3339)
            .transpose()
    }

    /// `metadata.deletionTimestamp` parsed; `None` when absent.
    pub fn deletion_time(&self) -> Result<Option<trainyard_model::Timestamp>, TimestampError> {
        self.deletion_timestamp
            .as_deref()
            .map(parse_rfc3339)
            .transpose()
    }

    /// The value of `key` looked up as `place` says; empty values count as absent.
    pub fn lookup(&self, key: &str, place: keys::KeyPlace) -> Option<&str> {
        let label = || {
            self.labels
                .get(key)
                .map(String::as_str)
                .filter(|v| !v.is_empty())
        };
        let annotation = || {
            self.annotations
                .get(key)
                .map(String::as_str)
                .filter(|v| !v.is_empty())
        };
        match place {
            keys::KeyPlace::Label => label(),
            keys::KeyPlace::Annotation => annotation(),
            keys::KeyPlace::LabelOrAnnotation => label().or_else(annotation),
        }
    }
}

/// Whether objects of `kind` live in a namespace (as far as Trainyard knows).
pub fn is_namespaced(kind: &str) -> bool {
    matches!(kind, "Pod" | "PodGroup")
}

/// How errors name an object: `Queue team-a`, `PodGroup ml/train-1`,
/// `Pod default/x` (namespaced kinds default to namespace `default`),
/// `Node <unnamed>` when it has no name. Reads `metadata` leniently.
pub fn describe_object(kind: &str, value: &serde_json::Value) -> String {
    let meta = value.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(|n| n.as_str())
        .filter(|n| !n.is_empty())
        .unwrap_or("<unnamed>");
    if is_namespaced(kind) {
        let ns = meta
            .and_then(|m| m.get("namespace"))
            .and_then(|n| n.as_str())
            .filter(|n| !n.is_empty())
            .unwrap_or("default");
        format!("{kind} {ns}/{name}")
    } else {
        format!("{kind} {name}")
    }
}

/// Deserializes `value` into `T`; on failure the error carries the field
/// path of the problem and a message in plain words (no Rust type names;
/// see [`de::plain_message`]).
pub fn from_value<T: DeserializeOwned>(
    value: &serde_json::Value,
    object: &str,
) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        ApiError::new(
            object,
            field,
            de::plain_message(&e.into_inner().to_string()),
        )
    })
}

/// Checks `apiVersion`/`kind` of a document against what a type accepts.
pub(crate) fn check_type(
    value: &serde_json::Value,
    object: &str,
    kind: &str,
    api_versions: &[&str],
) -> Result<String, ApiError> {
    let found_kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    if found_kind != kind {
        return Err(ApiError::new(
            object,
            "kind",
            format!("expected {kind:?}, found {found_kind:?}"),
        ));
    }
    let expected = api_versions
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(" or ");
    match value.get("apiVersion") {
        None | Some(serde_json::Value::Null) => Err(ApiError::new(
            object,
            "apiVersion",
            format!("missing; expected {expected}"),
        )),
        Some(serde_json::Value::String(v)) if api_versions.contains(&v.as_str()) => Ok(v.clone()),
        Some(other) => Err(ApiError::new(
            object,
            "apiVersion",
            format!("expected {expected}, found {other}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn describes_objects() {
        assert_eq!(
            describe_object("Queue", &json!({"metadata": {"name": "a"}})),
            "Queue a"
        );
        assert_eq!(
            describe_object("Pod", &json!({"metadata": {"name": "a"}})),
            "Pod default/a"
        );
        assert_eq!(
            describe_object(
                "PodGroup",
                &json!({"metadata": {"name": "a", "namespace": "ml"}})
            ),
            "PodGroup ml/a"
        );
        assert_eq!(describe_object("Node", &json!({})), "Node <unnamed>");
    }

    #[test]
    fn metadata_is_lenient_and_nulls_are_empty() {
        let m: ObjectMeta = serde_json::from_value(json!({
            "name": "x", "uid": "123", "labels": null, "creationTimestamp": null,
            "annotations": {"a": "b"}
        }))
        .unwrap();
        assert_eq!(m.name, "x");
        assert!(m.labels.is_empty());
        assert_eq!(m.creation_time(), Ok(None));
        assert_eq!(m.lookup("a", keys::KeyPlace::LabelOrAnnotation), Some("b"));
        assert_eq!(m.lookup("a", keys::KeyPlace::Label), None);
        assert_eq!(m.namespace_or_default(), "default");
        assert_eq!(m.deletion_time(), Ok(None));
        let m: ObjectMeta = serde_json::from_value(json!({
            "deletionTimestamp": "2026-11-22T10:00:00Z"
        }))
        .unwrap();
        assert_eq!(
            m.deletion_time(),
            Ok(Some(trainyard_model::Timestamp(1_795_341_600_000)))
        );
    }

    #[test]
    fn errors_display_with_field() {
        let e = ApiErrors(vec![
            ApiError::new("Queue a", "spec.quota.cpu", "bad"),
            ApiError::new("Queue a", "", "worse"),
        ]);
        assert_eq!(
            e.to_string(),
            "Queue a: spec.quota.cpu: bad\nQueue a: worse"
        );
    }
}
