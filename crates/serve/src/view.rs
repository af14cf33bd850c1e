//! A read-only view of the running service, for the gRPC API
//! (`trainyard-api`): the latest cycle (its snapshot, decisions and
//! config), each cycle as it runs, the objects as the watches show them,
//! and whether this replica is ready and leads.
//!
//! The shell fills it; readers never lock the loop out for long: the
//! cycle is an `Arc` behind a `watch`, the cycles a `broadcast`, and the
//! objects a map cloned out under a mutex. Nothing here decides, and
//! nothing a reader does reaches the service.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::{broadcast, watch};
use trainyard_model::{Snapshot, Timestamp};
use trainyard_sched::{Config, Decisions};

use crate::world::WorldEvent;

/// One cycle as the leader ran it.
#[derive(Debug)]
pub struct CycleView {
    /// Cycles this replica ran since it started (1 is the first).
    pub number: u64,
    /// The cycle's time.
    pub now: Timestamp,
    /// The snapshot the core was given (assumptions laid over the world,
    /// PodDisruptionBudgets applied).
    pub snapshot: Arc<Snapshot>,
    pub decisions: Arc<Decisions>,
    /// The scheduler configuration of the cycle.
    pub config: Arc<Config>,
    /// Writes handed to the writer and not yet answered, after the cycle.
    pub writes_in_flight: usize,
}

/// Whether this replica answers: every watch listed, and its role.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    pub synced: bool,
    pub leader: bool,
}

/// What the service publishes for readers.
#[derive(Debug)]
pub struct LiveView {
    latest: watch::Sender<Option<Arc<CycleView>>>,
    cycles: broadcast::Sender<Arc<CycleView>>,
    readiness: watch::Sender<Readiness>,
    objects: Mutex<Objects>,
    /// Where usage history is asked (`/usage`, the dashboard).
    usage: Mutex<crate::http::UsageSource>,
    /// `spec.schedulerName` of the pods Trainyard schedules, and the
    /// queue of those that name none (`service.schedulerName`,
    /// `service.defaultQueue`).
    pub scheduler_name: String,
    pub default_queue: String,
}

/// Cycles a slow reader of [`LiveView::cycles`] may fall behind by
/// before it misses some (and is told how many).
const CYCLE_BACKLOG: usize = 64;

impl LiveView {
    pub fn new(scheduler_name: &str, default_queue: &str) -> LiveView {
        LiveView {
            latest: watch::Sender::new(None),
            cycles: broadcast::Sender::new(CYCLE_BACKLOG),
            readiness: watch::Sender::new(Readiness::default()),
            objects: Mutex::new(Objects::default()),
            usage: Mutex::new(None),
            scheduler_name: scheduler_name.to_string(),
            default_queue: default_queue.to_string(),
        }
    }

    /// The latest cycle (`None` before the first), changing with each.
    pub fn latest(&self) -> watch::Receiver<Option<Arc<CycleView>>> {
        self.latest.subscribe()
    }

    /// Every cycle from now on.
    pub fn cycles(&self) -> broadcast::Receiver<Arc<CycleView>> {
        self.cycles.subscribe()
    }

    pub fn readiness(&self) -> watch::Receiver<Readiness> {
        self.readiness.subscribe()
    }

    /// A cycle ran.
    pub fn publish(&self, cycle: CycleView) {
        let cycle = Arc::new(cycle);
        self.latest.send_replace(Some(cycle.clone()));
        // No reader: nothing to do.
        let _ = self.cycles.send(cycle);
    }

    /// Usage history is asked of `source` from now on.
    pub fn set_usage_source(&self, source: crate::http::UsageSource) {
        match self.usage.lock() {
            Ok(mut u) => *u = source,
            Err(poisoned) => *poisoned.into_inner() = source,
        }
    }

    /// Where usage history is asked; `None` when the service keeps no
    /// store.
    pub fn usage_source(&self) -> crate::http::UsageSource {
        match self.usage.lock() {
            Ok(u) => u.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn set_readiness(&self, now: Readiness) {
        self.readiness.send_if_modified(|r| {
            let changed = *r != now;
            *r = now;
            changed
        });
    }

    /// A watch event, kept as the API shows the object (without
    /// `metadata.managedFields`).
    pub fn watched(&self, event: &WorldEvent) {
        match self.objects.lock() {
            Ok(mut o) => o.apply(event),
            // A reader panicked while holding the lock: the map is still
            // whole (every change is one insert or remove).
            Err(poisoned) => poisoned.into_inner().apply(event),
        }
    }

    /// The objects as watched, by kind, namespace and name, without the
    /// kinds `trainyard schedule` does not read (Namespaces,
    /// PodDisruptionBudgets).
    pub fn objects(&self) -> Vec<Arc<Value>> {
        let o = match self.objects.lock() {
            Ok(o) => o,
            Err(poisoned) => poisoned.into_inner(),
        };
        o.by_key
            .iter()
            .filter(|((_, (kind, _, _)), _)| kind != "Namespace" && kind != "PodDisruptionBudget")
            .map(|(_, v)| Arc::clone(v))
            .collect()
    }
}

/// (stream, (kind, namespace, name)).
type Key = (usize, crate::world::Key);

/// The watched objects, relists healed as in [`crate::world::World`].
#[derive(Debug, Default)]
struct Objects {
    /// Shared: a reader takes them without copying 50,000 pods.
    by_key: BTreeMap<Key, Arc<Value>>,
    listing: BTreeMap<usize, std::collections::BTreeSet<Key>>,
}

impl Objects {
    fn apply(&mut self, event: &WorldEvent) {
        match event {
            WorldEvent::ListStart { stream } => {
                self.listing.insert(*stream, Default::default());
            }
            WorldEvent::Applied { stream, object } => {
                let key = (*stream, crate::world::key_of(object));
                let mut object = object.clone();
                if let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("managedFields");
                }
                if let Some(l) = self.listing.get_mut(stream) {
                    l.insert(key.clone());
                }
                self.by_key.insert(key, Arc::new(object));
            }
            WorldEvent::Deleted { stream, object } => {
                self.by_key.remove(&(*stream, crate::world::key_of(object)));
            }
            WorldEvent::ListDone { stream } => {
                let Some(seen) = self.listing.remove(stream) else {
                    return;
                };
                self.by_key
                    .retain(|k, _| k.0 != *stream || seen.contains(k));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "ml", "managedFields": [{}]}})
    }

    fn names(v: &LiveView) -> Vec<String> {
        v.objects()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    }

    #[test]
    fn objects_follow_the_watch_and_a_relist_heals_a_missed_delete() {
        let v = LiveView::new("trainyard", "default");
        v.watched(&WorldEvent::ListStart { stream: 1 });
        v.watched(&WorldEvent::Applied {
            stream: 1,
            object: pod("a"),
        });
        v.watched(&WorldEvent::Applied {
            stream: 1,
            object: pod("b"),
        });
        v.watched(&WorldEvent::ListDone { stream: 1 });
        assert_eq!(names(&v), ["a", "b"]);
        assert!(v.objects()[0]["metadata"].get("managedFields").is_none());
        v.watched(&WorldEvent::Deleted {
            stream: 1,
            object: pod("a"),
        });
        assert_eq!(names(&v), ["b"]);
        // A relist that no longer shows `b` (its delete was missed).
        v.watched(&WorldEvent::ListStart { stream: 1 });
        v.watched(&WorldEvent::Applied {
            stream: 1,
            object: pod("c"),
        });
        v.watched(&WorldEvent::ListDone { stream: 1 });
        assert_eq!(names(&v), ["c"]);
    }

    #[test]
    fn namespaces_and_disruption_budgets_are_not_in_the_objects() {
        let v = LiveView::new("trainyard", "default");
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}});
        v.watched(&WorldEvent::Applied {
            stream: 0,
            object: ns,
        });
        v.watched(&WorldEvent::Applied {
            stream: 1,
            object: pod("a"),
        });
        assert_eq!(names(&v), ["a"]);
    }
}
