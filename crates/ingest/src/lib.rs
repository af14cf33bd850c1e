//! Reads Kubernetes-shaped documents into a [`trainyard_model::Snapshot`].
//!
//! Input is text (YAML or JSON, one or many documents per source) with a
//! source name used in messages; output is values. No I/O. Accepted kinds:
//! `List` (and typed lists such as `PodList`, as `kubectl get nodes,pods -o
//! yaml` prints), `Node`, `Pod`, `PriorityClass`, and Trainyard's `Queue`,
//! `PodGroup` (plus Volcano, KAI and scheduler-plugins PodGroups) and
//! `Topology` (plus KAI and Kueue Topologies), and the Dynamic Resource
//! Allocation kinds `ResourceSlice`, `DeviceClass`, `ResourceClaim`,
//! `ResourceClaimTemplate` (`resource.k8s.io/v1` or `v1beta2`) and
//! `DeviceTaintRule` (`v1alpha3`), which fill `Snapshot::dra` ([`dra`]).
//! Other kinds are skipped with a warning.
//!
//! Sources are read as a stream, object by object: the items of a `List`
//! are converted one at a time as they are parsed, and no document tree is
//! built, so memory grows with what is kept, not with the text (see
//! `read`).
//!
//! Every problem is collected, not just the first; each names the source,
//! the document, the object, the field path and what was expected.

mod assemble;
pub mod dra;
mod interpret;
mod k8s;
mod meta;
mod read;
mod topology;

use std::fmt;

use trainyard_model::Snapshot;

pub use assemble::{JobKey, UsableTree};
pub use interpret::{
    Interpreted, Interpreter, Objects, PodRole, check_queue_usable, pod_role, read, read_object,
    usable_tree,
};
pub use k8s::PodInfo;
pub use read::{Loc, parse_documents, present_documents, split_objects};

/// One input text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// Shown in messages, e.g. the file path.
    pub name: String,
    pub text: String,
}

impl Source {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Source {
            name: name.into(),
            text: text.into(),
        }
    }
}

/// How to interpret the documents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// Queue of pods and groups that name none. Created implicitly (top
    /// level, no quota, no limit) when used but not defined.
    pub default_queue: String,
    /// Pods with this `spec.schedulerName` are Trainyard's; others are
    /// external.
    pub scheduler_name: String,
    /// A pod whose claim comes from a ResourceClaimTemplate that has not
    /// made its claim yet is planned with the claim the template will
    /// make (files, the simulator); when false (the live service, which
    /// writes the allocation into the claim and so needs it to exist), it
    /// waits with the reason `waiting for ResourceClaim <pod>-<claim> to
    /// be created from template <namespace>/<template>`.
    pub planned_claims: bool,
    /// DeviceClasses' `extendedResourceName` serve their resource from DRA
    /// devices on nodes without it (KEP-5004): files and the simulator;
    /// not yet the live service, which does not create the claim such a
    /// pod needs (docs/dra.md), so there the class is read and the
    /// resource is not served.
    pub extended_resources: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            default_queue: "default".to_string(),
            scheduler_name: "trainyard".to_string(),
            planned_claims: true,
            extended_resources: true,
        }
    }
}

/// The result of a successful load.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub snapshot: Snapshot,
    /// Things that were ignored or assumed, one message each.
    pub warnings: Vec<String>,
    /// DeviceClasses by name (the snapshot's selector sets carry their
    /// selectors; the core does not need them otherwise).
    pub device_classes: std::collections::BTreeMap<String, dra::DeviceClass>,
}

/// One problem in the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct LoadError {
    /// Source name (file path).
    pub source_name: String,
    /// 1-based document number within the source, when the problem is in one.
    pub document: Option<usize>,
    /// Kind and name, e.g. `Pod ml/train-0`, when known.
    pub object: Option<String>,
    /// Field path within the document, e.g.
    /// `items[3].spec.containers[0].resources.requests.cpu`.
    pub field: Option<String>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for LoadError {
    /// `source: document N: Object ns/name: field.path: message`, omitting
    /// unknown parts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if !self.source_name.is_empty() {
            parts.push(self.source_name.clone());
        }
        if let Some(d) = self.document {
            parts.push(format!("document {d}"));
        }
        if let Some(o) = &self.object {
            parts.push(o.clone());
        }
        if let Some(p) = &self.field {
            parts.push(p.clone());
        }
        parts.push(self.message.clone());
        f.write_str(&parts.join(": "))
    }
}

/// Every problem found (never empty when returned as an error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct LoadErrors(pub Vec<LoadError>);

impl fmt::Display for LoadErrors {
    /// One problem per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        trainyard_crd::write_lines(f, &self.0)
    }
}

/// Reads every source and builds a snapshot: nodes sorted by name, jobs by
/// id, external pods by name. Returns every error found, or the snapshot
/// with warnings.
pub fn load(sources: &[Source], opts: &LoadOptions) -> Result<Loaded, LoadErrors> {
    let mut reader = read::Reader::default();
    for source in sources {
        reader.read_source(source);
    }
    assemble::assemble(reader, opts)
}

#[cfg(test)]
mod tests;
