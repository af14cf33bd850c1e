//! The mirrors kept from a watch (a group's pods, the upstream groups)
//! forget on a relist what it no longer shows: the keys seen between the
//! list's start and its end are kept, the others dropped.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// `(namespace, name)` of an object, from its JSON (`default` for a
/// namespace not given).
pub fn object_key(o: &Value) -> (String, String) {
    let m = &o["metadata"];
    (
        m["namespace"].as_str().unwrap_or("default").to_string(),
        m["name"].as_str().unwrap_or("").to_string(),
    )
}

/// The keys a relist in progress has shown.
#[derive(Debug)]
pub struct Listing<K> {
    seen: Option<BTreeSet<K>>,
}

impl<K> Default for Listing<K> {
    fn default() -> Self {
        Listing { seen: None }
    }
}

impl<K: Ord + Clone> Listing<K> {
    /// A relist begins.
    pub fn start(&mut self) {
        self.seen = Some(BTreeSet::new());
    }

    /// `key` was shown (by the relist, if one is in progress).
    pub fn saw(&mut self, key: &K) {
        if let Some(seen) = &mut self.seen {
            seen.insert(key.clone());
        }
    }

    /// The relist ended: what it did not show leaves `mirror`.
    pub fn done<V>(&mut self, mirror: &mut BTreeMap<K, V>) {
        if let Some(seen) = self.seen.take() {
            mirror.retain(|k, _| seen.contains(k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relist_forgets_what_it_did_not_show_and_only_then() {
        let mut mirror: BTreeMap<u32, ()> = [(1, ()), (2, ())].into();
        let mut l = Listing::default();
        l.saw(&1);
        l.done(&mut mirror);
        assert_eq!(mirror.len(), 2, "no relist in progress: nothing dropped");
        l.start();
        l.saw(&2);
        l.done(&mut mirror);
        assert_eq!(mirror.keys().copied().collect::<Vec<_>>(), [2]);
    }
}
