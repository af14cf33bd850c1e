//! The object store: one global resourceVersion counter (like etcd's revision), the
//! objects of every resource, and a bounded history of changes that watches replay.
//!
//! Every change goes through [`Store::commit`], which stamps the new revision into the
//! object, appends a [`Event`] to the history (dropping the oldest past the compaction
//! window) and broadcasts it to open watches.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;

use crate::error::ApiError;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

impl EventType {
    /// The watch event `type` string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as retained in the history.
#[derive(Debug)]
pub struct Event {
    /// The revision this change created.
    pub rv: u64,
    /// Storage key of the resource (`group/plural`).
    pub resource: String,
    /// What happened.
    pub ty: EventType,
    /// The object after the change (for `Deleted`, the last state, carrying the new rv).
    pub object: Value,
    /// The object before the change (`None` for `Added`).
    pub prev: Option<Value>,
}

/// `(namespace, name)`; the namespace is empty for cluster-scoped objects.
pub type ObjKey = (String, String);

/// The store.
pub struct Store {
    rv: u64,
    objects: BTreeMap<String, BTreeMap<ObjKey, Value>>,
    history: VecDeque<Arc<Event>>,
    window: usize,
    compacted: u64,
    tx: broadcast::Sender<Arc<Event>>,
}

/// Namespace and name of an object.
pub fn obj_key(obj: &Value) -> ObjKey {
    let md = &obj["metadata"];
    (
        md["namespace"].as_str().unwrap_or_default().to_string(),
        md["name"].as_str().unwrap_or_default().to_string(),
    )
}

/// The `metadata.resourceVersion` of an object parsed as a number.
pub fn obj_rv(obj: &Value) -> Option<u64> {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
}

impl Store {
    /// An empty store retaining `window` events of history.
    pub fn new(window: usize) -> Self {
        let (tx, _) = broadcast::channel(4096);
        Store {
            rv: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            window: window.max(1),
            compacted: 0,
            tx,
        }
    }

    /// The current revision.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// The highest revision no longer in history: watches from below it get 410.
    pub fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Changes the compaction window (events retained).
    pub fn set_window(&mut self, window: usize) {
        self.window = window.max(1);
        self.trim();
    }

    /// Forgets all history up to the current revision, as an etcd compaction would.
    pub fn compact_all(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }

    fn trim(&mut self) {
        while self.history.len() > self.window {
            if let Some(e) = self.history.pop_front() {
                self.compacted = e.rv;
            }
        }
    }

    /// A receiver of all future events.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// One object.
    pub fn get(&self, resource: &str, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(resource)?
            .get(&(ns.to_string(), name.to_string()))
    }

    /// The objects of a resource in key order, by reference.
    pub fn iter(&self, resource: &str) -> impl Iterator<Item = &Value> {
        self.objects
            .get(resource)
            .into_iter()
            .flat_map(|m| m.values())
    }

    /// All objects of a resource, optionally in one namespace, in key order.
    pub fn list(&self, resource: &str, ns: Option<&str>) -> Vec<Value> {
        let Some(m) = self.objects.get(resource) else {
            return Vec::new();
        };
        m.iter()
            .filter(|((n, _), _)| ns.is_none_or(|want| want == n))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// What [`Store::list`] and [`Store::list_at`] give (`at` `None`: now), by
    /// reference, limited to keys after `after` (a continue token's): a page of a
    /// large list copies only its own objects, not every object of the resource.
    pub fn list_refs<'a>(
        &'a self,
        resource: &str,
        ns: Option<&str>,
        at: Option<u64>,
        after: Option<&ObjKey>,
    ) -> Result<Vec<&'a Value>, ApiError> {
        use std::ops::Bound;
        let lower = after.map_or(Bound::Unbounded, |k| Bound::Excluded(k.clone()));
        let mut m: BTreeMap<(&'a str, &'a str), &'a Value> = self
            .objects
            .get(resource)
            .map(|o| {
                o.range((lower, Bound::Unbounded))
                    .map(|((n, k), v)| ((n.as_str(), k.as_str()), v))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(at) = at {
            if at < self.compacted {
                return Err(too_old(at, self.compacted));
            }
            for e in self.history.iter().rev() {
                if e.rv <= at {
                    break;
                }
                if e.resource != resource {
                    continue;
                }
                let md = &e.object["metadata"];
                let k = (
                    md["namespace"].as_str().unwrap_or_default(),
                    md["name"].as_str().unwrap_or_default(),
                );
                if after.is_some_and(|a| k <= (a.0.as_str(), a.1.as_str())) {
                    continue;
                }
                match (&e.ty, &e.prev) {
                    (EventType::Added, _) => {
                        m.remove(&k);
                    }
                    (_, Some(p)) => {
                        m.insert(k, p);
                    }
                    (_, None) => {}
                }
            }
        }
        Ok(m.into_iter()
            .filter(|((n, _), _)| ns.is_none_or(|want| want == *n))
            .map(|(_, v)| v)
            .collect())
    }

    /// The objects of a resource as they stood at revision `at`, rebuilt by undoing the
    /// retained history after it. 410 if `at` is older than the compaction point.
    pub fn list_at(
        &self,
        resource: &str,
        ns: Option<&str>,
        at: u64,
    ) -> Result<Vec<Value>, ApiError> {
        if at < self.compacted {
            return Err(too_old(at, self.compacted));
        }
        let mut m: BTreeMap<ObjKey, Value> =
            self.objects.get(resource).cloned().unwrap_or_default();
        for e in self.history.iter().rev() {
            if e.rv <= at {
                break;
            }
            if e.resource != resource {
                continue;
            }
            let k = obj_key(&e.object);
            match (&e.ty, &e.prev) {
                (EventType::Added, _) => {
                    m.remove(&k);
                }
                (_, Some(p)) => {
                    m.insert(k, p.clone());
                }
                (_, None) => {}
            }
        }
        Ok(m.into_iter()
            .filter(|((n, _), _)| ns.is_none_or(|want| want == n))
            .map(|(_, v)| v)
            .collect())
    }

    /// Retained events after revision `after`, or 410 if some were compacted away.
    pub fn events_after(&self, after: u64) -> Result<Vec<Arc<Event>>, ApiError> {
        if after < self.compacted {
            return Err(too_old(after, self.compacted));
        }
        Ok(self
            .history
            .iter()
            .filter(|e| e.rv > after)
            .cloned()
            .collect())
    }

    /// Records a change: stamps the next revision into `object`, stores or removes it,
    /// appends history, and notifies watches. Returns the stored object.
    pub fn commit(&mut self, resource: &str, ty: EventType, mut object: Value) -> Value {
        self.rv += 1;
        let rv = self.rv;
        if let Some(md) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            md.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let key = obj_key(&object);
        let map = self.objects.entry(resource.to_string()).or_default();
        let prev = match ty {
            EventType::Deleted => map.remove(&key),
            _ => map.insert(key, object.clone()),
        };
        let ev = Arc::new(Event {
            rv,
            resource: resource.to_string(),
            ty,
            object: object.clone(),
            prev,
        });
        self.history.push_back(ev.clone());
        self.trim();
        // No receivers is fine: nobody is watching.
        let _ = self.tx.send(ev);
        object
    }

    /// Drops every object of a resource (a CRD was deleted), emitting DELETED events.
    pub fn drop_resource(&mut self, resource: &str) {
        for obj in self.list(resource, None) {
            self.commit(resource, EventType::Deleted, obj);
        }
        self.objects.remove(resource);
    }
}

/// The 410 a watch or list from a compacted revision gets.
pub fn too_old(asked: u64, compacted: u64) -> ApiError {
    ApiError::expired(format!("too old resource version: {asked} ({compacted})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str, v: i64) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns"}, "v": v})
    }

    #[test]
    fn list_at_undoes_history_and_compaction_expires() {
        let mut s = Store::new(3);
        s.commit("/pods", EventType::Added, obj("a", 1));
        let at = s.rv();
        s.commit("/pods", EventType::Modified, obj("a", 2));
        s.commit("/pods", EventType::Added, obj("b", 1));
        let old = s.list_at("/pods", None, at).unwrap_or_default();
        assert_eq!(old.len(), 1);
        assert_eq!(old[0]["v"], 1);
        let refs = s
            .list_refs("/pods", None, Some(at), None)
            .unwrap_or_default();
        assert_eq!(refs.into_iter().cloned().collect::<Vec<_>>(), old);
        let key = ("ns".to_string(), "a".to_string());
        let after: Vec<Value> = s
            .list_refs("/pods", None, None, Some(&key))
            .unwrap_or_default()
            .into_iter()
            .cloned()
            .collect();
        assert_eq!(
            after,
            vec![obj("b", 1)]
                .into_iter()
                .map(|mut o| {
                    o["metadata"]["resourceVersion"] = json!(s.rv().to_string());
                    o
                })
                .collect::<Vec<_>>()
        );
        assert_eq!(s.list("/pods", None).len(), 2);
        s.commit("/pods", EventType::Deleted, obj("b", 1));
        s.commit("/pods", EventType::Deleted, obj("a", 2));
        let err = s.events_after(at).err().map(|e| e.code);
        assert_eq!(err, Some(410));
        assert_eq!(s.events_after(s.rv() - 1).map(|v| v.len()).unwrap_or(0), 1);
    }
}
