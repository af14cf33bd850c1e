//! Watch events into the one world state.
//!
//! Each watched kind is one stream of [`WorldEvent`]s, as a kube-rs
//! watcher delivers them: a (re)list (`ListStart`, objects, `ListDone`)
//! and then live changes. Every object is read by `Decoded::object` (the
//! same reader as a file's) into `ClusterState`; a relist that no longer
//! shows an object removes it, so a watch that missed a delete (a dropped
//! connection, a 410) heals at its next list. Pure: tested on plain
//! vectors of events.
//!
//! Namespaces are kept apart ([`World::namespaces`]): the core has no use
//! for them, the grouper reads their default-queue labels.
//!
//! A pending pod of ours that names no group but whose controller is a
//! workload Trainyard groups ([`crate::infer::workload_owner`]) is held
//! back ([`World::held`]) until [`crate::grouper`] has given it a group and
//! the watch shows the pod with it: otherwise a cycle could bind one pod of
//! a PyTorchJob alone, before its group exists.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use trainyard_cluster::{Change, ClusterState, Decoded, ObjectChange};
use trainyard_ingest::{LoadError, LoadOptions};

/// One event of one watched kind (`stream` numbers the kinds).
#[derive(Clone, Debug, PartialEq)]
pub enum WorldEvent {
    /// The watcher starts a (re)list of its kind.
    ListStart { stream: usize },
    /// An object as listed or as changed (JSON, with `apiVersion` and
    /// `kind`).
    Applied { stream: usize, object: Value },
    /// An object deleted.
    Deleted { stream: usize, object: Value },
    /// The (re)list is complete: what it did not show is gone.
    ListDone { stream: usize },
}

/// `kind`, namespace and name: the key of an object in its stream.
pub type Key = (String, String, String);

pub(crate) fn key_of(object: &Value) -> Key {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    (
        s(&object["kind"]),
        s(&object["metadata"]["namespace"]),
        s(&object["metadata"]["name"]),
    )
}

/// The world state and, per stream, the objects it holds from that stream.
pub struct World {
    pub state: ClusterState,
    known: BTreeMap<usize, BTreeSet<Key>>,
    listing: BTreeMap<usize, BTreeSet<Key>>,
    /// Objects that could not be read, by key, with their problems (the
    /// service reports them; they make no change).
    pub unreadable: BTreeMap<Key, Vec<LoadError>>,
    /// Streams that finished at least one list.
    listed: BTreeSet<usize>,
    /// Pending pods of ours waiting for an inferred group, by key, with
    /// their stream and latest version (not in `state`).
    pub held: BTreeMap<Key, (usize, Value)>,
    /// Namespaces by name, as watched (their labels name default queues
    /// for inferred groups); not part of `state`.
    pub namespaces: BTreeMap<String, Value>,
    /// The `status` of each Queue and PodGroup as the API shows it, by
    /// stream and key: what the service last wrote, or another writer
    /// did, also before a restart (what a new status is compared with,
    /// and where its transition times come from).
    statuses: BTreeMap<(usize, Key), Value>,
    /// `metadata.generation` of the same objects (bumped by spec changes
    /// only, where status is a subresource), with their labels and
    /// annotations as text: what a status-only change leaves as it was.
    generations: BTreeMap<(usize, Key), (i64, String)>,
    /// Each ResourceClaim as last shown (`namespace/name`): what a write
    /// of its allocation is conditional on and appends to.
    claims: BTreeMap<String, crate::machine::units::ClaimSeen>,
    /// Per pod (`namespace/name`) asking extended resources, each
    /// container's `(name, resource)` ([`crate::extended::asks`]): the
    /// request mappings of a claim made for them.
    asks: BTreeMap<String, Vec<(String, String)>>,
    /// Whether pods are held for inferred groups (`service.inferPodGroups`).
    infer: bool,
    scheduler_name: String,
}

impl World {
    pub fn new(mut opts: LoadOptions) -> World {
        if opts.default_queue.is_empty() {
            // No default queue for inferred groups (`defaultQueue: ""`);
            // pods and PodGroups of their own that name none keep going to
            // the loader's default.
            opts.default_queue = LoadOptions::default().default_queue;
        }
        let scheduler_name = opts.scheduler_name.clone();
        World {
            state: ClusterState::for_objects(opts),
            known: BTreeMap::new(),
            listing: BTreeMap::new(),
            unreadable: BTreeMap::new(),
            listed: BTreeSet::new(),
            held: BTreeMap::new(),
            namespaces: BTreeMap::new(),
            statuses: BTreeMap::new(),
            generations: BTreeMap::new(),
            claims: BTreeMap::new(),
            asks: BTreeMap::new(),
            infer: true,
            scheduler_name,
        }
    }

    /// Whether pods wait for a group inferred from their owner (default:
    /// yes); without, they are one-pod jobs as their keys say.
    pub fn inferring(mut self, on: bool) -> World {
        self.infer = on;
        self
    }

    /// Whether `object` is a pending pod of ours to hold for an inferred
    /// group.
    fn to_hold(&self, object: &Value) -> bool {
        let spec = &object["spec"];
        self.infer
            && object["kind"] == "Pod"
            && spec["schedulerName"].as_str() == Some(self.scheduler_name.as_str())
            && spec["nodeName"].as_str().is_none_or(str::is_empty)
            && !matches!(
                object["status"]["phase"].as_str(),
                Some("Succeeded" | "Failed")
            )
            && crate::infer::workload_owner(object).is_some()
            // Grouped already by its upstream PodGroup
            // (`spec.schedulingGroup.podGroupName`).
            && crate::upstream_status::group_of(object).is_none()
    }

    /// Whether each of `streams` finished its first list (before that, a
    /// cycle would see a partial cluster).
    pub fn synced(&self, streams: usize) -> bool {
        (0..streams).all(|s| self.listed.contains(&s))
    }

    /// Whether stream `stream` holds the object of `kind` named `name` in
    /// `namespace` (empty for cluster-scoped kinds).
    pub fn holds(&self, stream: usize, kind: &str, namespace: &str, name: &str) -> bool {
        let key = (kind.to_string(), namespace.to_string(), name.to_string());
        self.known.get(&stream).is_some_and(|k| k.contains(&key))
    }

    /// The `status` of the object of `kind` named `name` in `namespace`
    /// from stream `stream`, as the API last showed it (Queues and
    /// PodGroups only).
    pub fn status_of(
        &self,
        stream: usize,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<&Value> {
        let key = (kind.to_string(), namespace.to_string(), name.to_string());
        self.statuses.get(&(stream, key))
    }

    /// The ResourceClaim `namespace/name` as the watch last showed it.
    pub fn claim(&self, key: &str) -> Option<&crate::machine::units::ClaimSeen> {
        self.claims.get(key)
    }

    /// What the claim `c` creates for a pod's DRA-backed extended
    /// resources is made of: the class serving its first resource (the
    /// first by name when several do), its devices, and the containers
    /// asking the resources. `None` when `c` creates none.
    pub fn extended_claim(
        &self,
        c: &trainyard_cluster::ClaimWrite,
    ) -> Option<crate::machine::units::ExtendedClaim> {
        let first = c.extended.first()?;
        let class = self
            .state
            .device_classes()
            .into_iter()
            .find(|(_, d)| d.extended_resource_name.as_deref() == Some(first.as_str()))
            .map(|(name, _)| name)?;
        let pod = c.pods.first()?;
        let mappings = self
            .asks
            .get(&format!("{}/{}", pod.namespace, pod.name))
            .into_iter()
            .flatten()
            .filter(|(_, r)| c.extended.contains(r))
            .cloned()
            .collect();
        Some(crate::machine::units::ExtendedClaim {
            class,
            count: c.allocation.as_ref().map_or(0, Vec::len),
            mappings,
        })
    }

    /// `(namespace, name)` of every object of `kind` stream `stream`
    /// holds, in order.
    pub fn names(&self, stream: usize, kind: &str) -> Vec<(String, String)> {
        self.known
            .get(&stream)
            .into_iter()
            .flatten()
            .filter(|k| k.0 == kind)
            .map(|k| (k.1.clone(), k.2.clone()))
            .collect()
    }

    /// Applies one event. Returns whether it is *news*: something that may
    /// let a pod be placed or change a decision (a pending pod, a pod or
    /// object gone, a pod finishing or terminating, any other kind's
    /// change, a list's end), so a cycle should run soon. A pod seen bound
    /// and running (the confirmation of a bind, ours or another
    /// scheduler's) only takes room: the next periodic cycle sees it.
    pub fn handle(&mut self, event: WorldEvent) -> bool {
        let news = match &event {
            WorldEvent::Applied { object, stream } => {
                !is_running_pod(object) && !self.status_only(*stream, object)
            }
            _ => true,
        };
        match event {
            WorldEvent::ListStart { stream } => {
                self.listing.insert(stream, BTreeSet::new());
            }
            WorldEvent::Applied { stream, object } => {
                let key = key_of(&object);
                if let Some(seen) = self.listing.get_mut(&stream) {
                    seen.insert(key.clone());
                }
                if object["kind"] == "Pod" {
                    let pod = format!("{}/{}", key.1, key.2);
                    match crate::extended::asks(&object) {
                        a if a.is_empty() => self.asks.remove(&pod),
                        a => self.asks.insert(pod, a),
                    };
                }
                if is_claim(&object) {
                    let seen = crate::machine::units::ClaimSeen::of(&object);
                    self.claims.insert(format!("{}/{}", key.1, key.2), seen);
                }
                if self.status_only(stream, &object) {
                    // Only the status changed (most often the service's
                    // own write coming back): nothing to read again.
                    self.keep_status(stream, &key, &object);
                } else if self.to_hold(&object) {
                    self.remove(stream, &key);
                    self.held.insert(key, (stream, object));
                } else {
                    self.held.remove(&key);
                    self.apply(stream, key, &object);
                }
            }
            WorldEvent::Deleted { stream, object } => {
                let key = key_of(&object);
                self.held.remove(&key);
                self.remove(stream, &key);
            }
            WorldEvent::ListDone { stream } => {
                let seen = self.listing.remove(&stream).unwrap_or_default();
                let gone: Vec<Key> = self
                    .known
                    .get(&stream)
                    .map(|k| k.difference(&seen).cloned().collect())
                    .unwrap_or_default();
                for key in gone {
                    self.remove(stream, &key);
                }
                self.held
                    .retain(|key, (s, _)| *s != stream || seen.contains(key));
                self.listed.insert(stream);
            }
        }
        news
    }

    fn apply(&mut self, stream: usize, key: Key, object: &Value) {
        if key.0 == "Namespace" && key.1.is_empty() {
            self.namespaces.insert(key.2.clone(), object.clone());
            self.known.entry(stream).or_default().insert(key);
            return;
        }
        let origin = format!("watch {} {}/{}", key.0, key.1, key.2);
        let decoded = Decoded::object(object, &origin);
        if !decoded.errors.is_empty() {
            for e in &decoded.errors {
                tracing::warn!(object = %origin, "{e}");
            }
            // The earlier version, if any, no longer describes the object.
            self.remove(stream, &key);
            self.keep_status(stream, &key, object);
            self.unreadable.insert(key, decoded.errors);
            return;
        }
        self.keep_status(stream, &key, object);
        self.unreadable.remove(&key);
        for w in &decoded.warnings {
            tracing::debug!(object = %origin, "{w}");
        }
        for change in decoded.changes {
            self.state.apply(Change::Object(change));
        }
        self.known.entry(stream).or_default().insert(key);
    }

    fn keep_status(&mut self, stream: usize, key: &Key, object: &Value) {
        if matches!(key.0.as_str(), "Queue" | "PodGroup") {
            let status = object.get("status").cloned().unwrap_or(Value::Null);
            self.statuses.insert((stream, key.clone()), status);
            if let Some(g) = object["metadata"]["generation"].as_i64() {
                self.generations
                    .insert((stream, key.clone()), (g, meta_text(object)));
            }
        }
    }

    /// Whether `object` is a Queue or PodGroup already held whose spec did
    /// not change (same `metadata.generation`): a status write, the
    /// service's own most often, changes no decision. Never a
    /// ResourceClaim: its status (`allocation`, `reservedFor`) is what the
    /// core reads of it.
    fn status_only(&self, stream: usize, object: &Value) -> bool {
        let key = key_of(object);
        matches!(key.0.as_str(), "Queue" | "PodGroup")
            && object["metadata"]["generation"].as_i64().is_some_and(|g| {
                self.generations
                    .get(&(stream, key.clone()))
                    .is_some_and(|(was, meta)| *was == g && *meta == meta_text(object))
                    && self.known.get(&stream).is_some_and(|k| k.contains(&key))
            })
    }

    fn remove(&mut self, stream: usize, key: &Key) {
        if key.0 == "ResourceClaim" {
            self.claims.remove(&format!("{}/{}", key.1, key.2));
        }
        if key.0 == "Pod" {
            self.asks.remove(&format!("{}/{}", key.1, key.2));
        }
        self.unreadable.remove(key);
        self.statuses.remove(&(stream, key.clone()));
        self.generations.remove(&(stream, key.clone()));
        let was_known = self.known.get_mut(&stream).is_some_and(|k| k.remove(key));
        if !was_known {
            return;
        }
        if key.0 == "Namespace" && key.1.is_empty() {
            self.namespaces.remove(&key.2);
            return;
        }
        let ns = (!key.1.is_empty()).then_some(key.1.as_str());
        if let Some(change) = ObjectChange::gone(&key.0, ns, &key.2) {
            self.state.apply(Change::Object(change));
        }
    }
}

/// A `resource.k8s.io` ResourceClaim.
fn is_claim(object: &Value) -> bool {
    object["kind"] == "ResourceClaim"
        && object["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("resource.k8s.io/"))
}

/// An object's labels and annotations as text, to tell a status-only
/// change from one of its metadata.
fn meta_text(object: &Value) -> String {
    let m = &object["metadata"];
    format!("{}{}", m["labels"], m["annotations"])
}

/// A pod bound to a node, not terminating and not finished.
fn is_running_pod(object: &Value) -> bool {
    object["kind"] == "Pod"
        && object["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty())
        && object["metadata"]["deletionTimestamp"].is_null()
        && !matches!(
            object["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(name: &str, gpus: u32) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
               "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110",
                                           "nvidia.com/gpu": gpus.to_string()}}})
    }

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "ml", "uid": format!("u-{name}")},
               "spec": {"schedulerName": "trainyard",
                        "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}})
    }

    fn names(w: &mut World) -> (Vec<String>, Vec<String>) {
        let s = w.state.snapshot();
        (
            s.nodes.iter().map(|n| n.name.to_string()).collect(),
            s.jobs.iter().map(|j| j.id.to_string()).collect(),
        )
    }

    #[test]
    fn lists_then_changes_then_a_relist_that_missed_a_delete() {
        let mut w = World::new(LoadOptions::default());
        for e in [
            WorldEvent::ListStart { stream: 0 },
            WorldEvent::Applied {
                stream: 0,
                object: node("n1", 8),
            },
            WorldEvent::Applied {
                stream: 0,
                object: node("n2", 8),
            },
            WorldEvent::ListDone { stream: 0 },
            WorldEvent::ListStart { stream: 1 },
            WorldEvent::Applied {
                stream: 1,
                object: pod("a"),
            },
            WorldEvent::ListDone { stream: 1 },
        ] {
            w.handle(e);
        }
        assert!(w.synced(2));
        assert_eq!(
            names(&mut w),
            (vec!["n1".into(), "n2".into()], vec!["ml/a".into()])
        );
        w.handle(WorldEvent::Applied {
            stream: 1,
            object: pod("b"),
        });
        w.handle(WorldEvent::Deleted {
            stream: 0,
            object: node("n1", 8),
        });
        assert_eq!(
            names(&mut w),
            (vec!["n2".into()], vec!["ml/a".into(), "ml/b".into()])
        );
        // The pod watch drops; pod a was deleted meanwhile; the relist
        // shows only b, so a goes.
        for e in [
            WorldEvent::ListStart { stream: 1 },
            WorldEvent::Applied {
                stream: 1,
                object: pod("b"),
            },
            WorldEvent::ListDone { stream: 1 },
        ] {
            w.handle(e);
        }
        assert_eq!(names(&mut w), (vec!["n2".into()], vec!["ml/b".into()]));
    }

    #[test]
    fn an_unreadable_object_replaces_its_readable_version_with_nothing() {
        let mut w = World::new(LoadOptions::default());
        w.handle(WorldEvent::Applied {
            stream: 0,
            object: pod("a"),
        });
        let mut bad = pod("a");
        bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("lots");
        w.handle(WorldEvent::Applied {
            stream: 0,
            object: bad,
        });
        assert_eq!(names(&mut w).1, Vec::<String>::new());
        let problems: Vec<String> = w
            .unreadable
            .values()
            .flatten()
            .map(|e| e.to_string())
            .collect();
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0]
                .starts_with("watch Pod ml/a: Pod ml/a: spec.containers[0].resources.requests.cpu"),
            "{problems:?}"
        );
        w.handle(WorldEvent::Applied {
            stream: 0,
            object: pod("a"),
        });
        assert_eq!(names(&mut w).1, vec!["ml/a".to_string()]);
        assert!(w.unreadable.is_empty());
    }

    fn owned_pod(name: &str) -> Value {
        let mut p = pod(name);
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob", "name": "bert", "uid": "u-bert", "controller": true}]);
        p
    }

    fn applied(object: Value) -> WorldEvent {
        WorldEvent::Applied { stream: 1, object }
    }

    #[test]
    fn pods_of_a_grouped_workload_wait_until_they_name_their_group() {
        let mut w = World::new(LoadOptions::default());
        w.handle(WorldEvent::ListStart { stream: 1 });
        w.handle(applied(owned_pod("bert-worker-0")));
        w.handle(applied(owned_pod("bert-worker-1")));
        w.handle(applied(pod("alone")));
        w.handle(WorldEvent::ListDone { stream: 1 });
        assert_eq!(names(&mut w).1, vec!["ml/alone".to_string()]);
        let held: Vec<&str> = w.held.keys().map(|k| k.2.as_str()).collect();
        assert_eq!(held, ["bert-worker-0", "bert-worker-1"]);

        // The grouper's annotation arrives: the pod joins its group.
        let mut named = owned_pod("bert-worker-0");
        named["metadata"]["annotations"] = json!({"trainyard.io/pod-group": "pytorchjob-bert"});
        w.handle(applied(named));
        assert_eq!(
            names(&mut w).1,
            vec!["ml/alone".to_string(), "ml/pytorchjob-bert".to_string()]
        );
        assert_eq!(w.held.len(), 1);

        // Deleted, or gone from a relist: no longer held.
        w.handle(WorldEvent::Deleted {
            stream: 1,
            object: owned_pod("bert-worker-1"),
        });
        assert!(w.held.is_empty());
        w.handle(applied(owned_pod("bert-worker-2")));
        w.handle(WorldEvent::ListStart { stream: 1 });
        w.handle(applied(pod("alone")));
        w.handle(WorldEvent::ListDone { stream: 1 });
        assert!(w.held.is_empty());
        assert_eq!(names(&mut w).1, vec!["ml/alone".to_string()]);
    }

    #[test]
    fn a_bound_running_pod_is_no_news_but_pending_finished_and_gone_ones_are() {
        let mut w = World::new(LoadOptions::default());
        assert!(w.handle(WorldEvent::Applied {
            stream: 1,
            object: pod("a"),
        }));
        let mut bound = pod("a");
        bound["spec"]["nodeName"] = json!("n1");
        assert!(!w.handle(WorldEvent::Applied {
            stream: 1,
            object: bound.clone(),
        }));
        let mut done = bound.clone();
        done["status"]["phase"] = json!("Succeeded");
        assert!(w.handle(WorldEvent::Applied {
            stream: 1,
            object: done,
        }));
        let mut leaving = bound.clone();
        leaving["metadata"]["deletionTimestamp"] = json!("2026-11-26T00:00:00Z");
        assert!(w.handle(WorldEvent::Applied {
            stream: 1,
            object: leaving,
        }));
        assert!(w.handle(WorldEvent::Deleted {
            stream: 1,
            object: bound,
        }));
        assert!(w.handle(WorldEvent::Applied {
            stream: 0,
            object: node("n1", 8),
        }));
    }

    #[test]
    fn namespaces_are_kept_apart_and_leave_with_a_relist() {
        let ns = |name: &str| {
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": name, "labels": {"trainyard.io/default-queue": "team-a"}}})
        };
        let mut w = World::new(LoadOptions::default());
        w.handle(WorldEvent::ListStart { stream: 2 });
        w.handle(WorldEvent::Applied {
            stream: 2,
            object: ns("ml"),
        });
        w.handle(WorldEvent::Applied {
            stream: 2,
            object: ns("web"),
        });
        w.handle(WorldEvent::ListDone { stream: 2 });
        assert_eq!(
            w.namespaces.keys().collect::<Vec<_>>(),
            [&"ml".to_string(), &"web".to_string()]
        );
        assert_eq!(
            w.namespaces["ml"]["metadata"]["labels"]["trainyard.io/default-queue"],
            "team-a"
        );
        assert!(w.unreadable.is_empty());
        assert_eq!(names(&mut w), (vec![], vec![]));
        w.handle(WorldEvent::Deleted {
            stream: 2,
            object: ns("web"),
        });
        w.handle(WorldEvent::Applied {
            stream: 2,
            object: ns("tmp"),
        });
        // A relist that no longer shows tmp (its delete was missed).
        w.handle(WorldEvent::ListStart { stream: 2 });
        w.handle(WorldEvent::Applied {
            stream: 2,
            object: ns("ml"),
        });
        w.handle(WorldEvent::ListDone { stream: 2 });
        assert_eq!(w.namespaces.keys().collect::<Vec<_>>(), [&"ml".to_string()]);
    }

    #[test]
    fn bound_foreign_and_uninferred_pods_are_not_held() {
        let mut bound = owned_pod("b");
        bound["spec"]["nodeName"] = json!("n1");
        let mut foreign = owned_pod("f");
        foreign["spec"]["schedulerName"] = json!("default-scheduler");
        let mut done = owned_pod("d");
        done["status"] = json!({"phase": "Succeeded"});
        let mut w = World::new(LoadOptions::default());
        for p in [bound, foreign, done] {
            w.handle(applied(p));
        }
        assert!(w.held.is_empty());
        assert_eq!(names(&mut w).1, vec!["ml/b".to_string()]);

        // A pod first seen pending and held, then seen bound (by another
        // hand): it is the world's again.
        w.handle(applied(owned_pod("late")));
        assert_eq!(w.held.len(), 1);
        let mut late = owned_pod("late");
        late["spec"]["nodeName"] = json!("n1");
        w.handle(applied(late));
        assert!(w.held.is_empty());
        assert_eq!(
            names(&mut w).1,
            vec!["ml/b".to_string(), "ml/late".to_string()]
        );

        // With inference off, owned pods are one-pod jobs as before.
        let mut off = World::new(LoadOptions::default()).inferring(false);
        off.handle(applied(owned_pod("x")));
        assert!(off.held.is_empty());
        assert_eq!(names(&mut off).1, vec!["ml/x".to_string()]);
    }

    #[test]
    fn a_claims_status_is_news_and_kept_for_its_next_write() {
        let mut w = World::new(LoadOptions::default());
        let claim = |rv: &str, status: Value| {
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                   "metadata": {"name": "c", "namespace": "ml", "uid": "u-c",
                                "resourceVersion": rv, "generation": 1},
                   "spec": {"devices": {"requests": []}}, "status": status})
        };
        w.handle(WorldEvent::ListStart { stream: 0 });
        w.handle(WorldEvent::Applied {
            stream: 0,
            object: claim("1", json!({})),
        });
        w.handle(WorldEvent::ListDone { stream: 0 });
        let reserved = json!({"reservedFor": [{"resource": "pods", "name": "p", "uid": "u-p"}],
            "allocation": {"devices": {"results": []}}});
        assert!(
            w.handle(WorldEvent::Applied {
                stream: 0,
                object: claim("2", reserved),
            }),
            "an allocation written is news"
        );
        let seen = w.claim("ml/c").cloned().unwrap_or_default();
        assert_eq!(
            (seen.resource_version.as_str(), seen.allocated),
            ("2", true)
        );
        assert_eq!(seen.reserved_for.len(), 1);
        w.handle(WorldEvent::Deleted {
            stream: 0,
            object: claim("2", json!({})),
        });
        assert!(w.claim("ml/c").is_none());
    }

    #[test]
    fn a_status_write_coming_back_is_no_news_and_a_spec_change_is() {
        let mut w = World::new(LoadOptions::default());
        let group = |generation: i64, min: u32, phase: &str| {
            json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
                   "metadata": {"name": "g", "namespace": "ml", "generation": generation},
                   "spec": {"minMember": min}, "status": {"phase": phase}})
        };
        w.handle(WorldEvent::ListStart { stream: 0 });
        w.handle(WorldEvent::Applied {
            stream: 0,
            object: group(1, 2, "Pending"),
        });
        w.handle(WorldEvent::ListDone { stream: 0 });
        let news = w.handle(WorldEvent::Applied {
            stream: 0,
            object: group(1, 2, "Running"),
        });
        assert!(!news, "only the status changed");
        assert_eq!(
            w.status_of(0, "PodGroup", "ml", "g")
                .map(|s| s["phase"].clone()),
            Some(json!("Running")),
            "the status shown is kept"
        );
        let mut labelled = group(1, 2, "Running");
        labelled["metadata"]["labels"] = json!({"trainyard.io/queue": "a"});
        assert!(
            w.handle(WorldEvent::Applied {
                stream: 0,
                object: labelled
            }),
            "a label changed"
        );
        assert!(
            w.handle(WorldEvent::Applied {
                stream: 0,
                object: group(2, 3, "Running")
            }),
            "the spec changed"
        );
    }
}
