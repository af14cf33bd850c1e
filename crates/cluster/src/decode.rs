//! API objects to [`ObjectChange`]s: the one conversion from what a file
//! holds or an API server serves to what the world state applies.
//!
//! A file is read whole (`trainyard_ingest::read`); an object from a list
//! or a watch event is read alone (`trainyard_ingest::read_object`). Both
//! go through the same reader, and both end here, so the CLI, the
//! simulator's tests and the live service build the same snapshot from the
//! same objects.

use trainyard_ingest::dra::{DraKind, DraObject};
use trainyard_ingest::{LoadError, Objects};

use crate::ObjectChange;

/// What one read turned into.
#[derive(Debug, Default)]
pub struct Decoded {
    /// The upserts, in an order the state accepts (nodes, priority
    /// classes, queues, groups, DRA objects, pods, topology); order does not change the
    /// resulting snapshot.
    pub changes: Vec<ObjectChange>,
    /// Objects that could not be read, each naming object and field. Such
    /// an object makes no change: the caller decides whether its earlier
    /// version stays (see [`ObjectChange::gone`]).
    pub errors: Vec<LoadError>,
    pub warnings: Vec<String>,
}

impl Decoded {
    /// The changes that put every object of `objects` into the world.
    pub fn of(objects: Objects) -> Decoded {
        let mut changes = Vec::new();
        for (loc, n) in objects.nodes {
            changes.push(ObjectChange::Node(loc, Box::new(n)));
        }
        for (name, value) in &objects.priority_classes {
            changes.push(ObjectChange::PriorityClass {
                name: name.clone(),
                value: *value,
                never: objects.never_classes.contains(name),
            });
        }
        for (loc, q) in objects.queues {
            changes.push(ObjectChange::Queue(loc, Box::new(q)));
        }
        for (loc, g) in objects.pod_groups {
            changes.push(ObjectChange::PodGroup(loc, Box::new(g)));
        }
        let dra = objects.dra;
        let dra_objects = dra
            .slices
            .into_values()
            .map(|(l, o)| (l, DraObject::Slice(o)))
            .chain(
                dra.classes
                    .into_values()
                    .map(|(l, o)| (l, DraObject::Class(o))),
            )
            .chain(
                dra.claims
                    .into_values()
                    .map(|(l, o)| (l, DraObject::Claim(o))),
            )
            .chain(
                dra.templates
                    .into_values()
                    .map(|(l, o)| (l, DraObject::Template(o))),
            )
            .chain(
                dra.taint_rules
                    .into_values()
                    .map(|(l, o)| (l, DraObject::TaintRule(o))),
            );
        for (loc, o) in dra_objects {
            changes.push(ObjectChange::Dra(loc, Box::new(o)));
        }
        for (loc, p) in objects.pods {
            changes.push(ObjectChange::Pod(loc, Box::new(p)));
        }
        if let Some(t) = objects.topology {
            changes.push(ObjectChange::Topology(Some(Box::new(t))));
        }
        Decoded {
            changes,
            errors: objects.errors,
            warnings: objects.warnings,
        }
    }

    /// One object as a list or a watch delivers it (JSON), named `origin`
    /// in messages.
    pub fn object(value: &serde_json::Value, origin: &str) -> Decoded {
        Decoded::of(trainyard_ingest::read_object(value, origin))
    }
}

impl ObjectChange {
    /// The change that removes the object of `kind` (`Pod`, `Node`,
    /// `PodGroup`, `Queue`, `PriorityClass`, `Topology`, and the DRA kinds
    /// `ResourceSlice`, `DeviceClass`, `ResourceClaim`,
    /// `ResourceClaimTemplate`, `DeviceTaintRule`) named `name` in
    /// `namespace` (ignored for cluster-scoped kinds). `None` for kinds the
    /// world does not keep. A deleted `Queue` of any scheduler's group and
    /// a deleted `Topology` remove Trainyard's view of them.
    pub fn gone(kind: &str, namespace: Option<&str>, name: &str) -> Option<ObjectChange> {
        let namespace = namespace.filter(|n| !n.is_empty()).unwrap_or("default");
        Some(match kind {
            "Pod" => ObjectChange::PodGone {
                namespace: namespace.to_string(),
                name: name.to_string(),
            },
            "PodGroup" => ObjectChange::PodGroupGone {
                namespace: namespace.to_string(),
                name: name.to_string(),
            },
            "Node" => ObjectChange::NodeGone(name.to_string()),
            "Queue" => ObjectChange::QueueGone(name.to_string()),
            "PriorityClass" => ObjectChange::PriorityClassGone(name.to_string()),
            "Topology" => ObjectChange::Topology(None),
            other => {
                let kind = DraKind::parse(other)?;
                let key = if kind.namespaced() {
                    format!("{namespace}/{name}")
                } else {
                    name.to_string()
                };
                ObjectChange::DraGone { kind, key }
            }
        })
    }
}
