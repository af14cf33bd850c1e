//! Writes grouped into units (what is written together), the bind
//! journal's intents they open, and what is still in flight.
//!
//! A unit is the binds of one job (a gang: nominated first, with
//! `nominateBeforeBind`) after the DRA claim writes they need, or one
//! eviction, nomination or withdrawal. A gang's unit (two binds or more)
//! opens an intent in the journal before its first write; the intent is
//! closed when every write of the unit has an outcome.
//!
//! The claim writes of a unit come first; its binds are made only once
//! every one of them succeeded. When one fails, the unit's binds are not
//! made (each is reported failed, so the gang is decided again as a
//! whole), and the claims the unit did write are released
//! ([`crate::claims`]). A claim made for a pod's DRA-backed extended
//! resources is created first ([`crate::extended`]), and deleted when
//! released.

use std::collections::BTreeMap;

use serde_json::Value;
use trainyard_cluster::{ClaimWrite, Write};
use trainyard_model::Timestamp;
use trainyard_sched::decisions::Bind;
use trainyard_store::{JournalRecord, JournalState};

use crate::settings::NominateBeforeBind;

/// Writes the shell does together, in this order: the intent (when
/// `open`, committed durably before anything else), nominations (when
/// `nominate_first`), then the writes, concurrently.
#[derive(Clone, Debug, PartialEq)]
pub struct Unit {
    pub id: u64,
    /// The cycle it was decided in.
    pub at: Timestamp,
    pub nominate_first: bool,
    /// The journal's intent to commit before the first write (id, record).
    pub open: Option<(u64, JournalRecord)>,
    /// Claim writes first (in decision order), then the rest.
    pub writes: Vec<Write>,
    /// Each claim written, as the watch last showed it (by
    /// `namespace/name`): what its writes are conditional on.
    pub claims: BTreeMap<String, ClaimSeen>,
    /// Each claim the unit creates for a pod's DRA-backed extended
    /// resources, by the decision's key (`namespace/<pod>-extended-resources`).
    pub extended: BTreeMap<String, ExtendedClaim>,
}

/// What the claim of a pod's DRA-backed extended resources (KEP-5004) is
/// created with, beside its allocation: one request, `request-0`,
/// `exactly` `count` devices of `class`; and what the pod's
/// `status.extendedResourceClaimStatus.requestMappings` say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtendedClaim {
    /// The DeviceClass whose `extendedResourceName` is the resource.
    pub class: String,
    pub count: usize,
    /// `(containerName, resourceName)` of each container (init containers
    /// first, as the pod lists them) asking a resource the claim serves.
    pub mappings: Vec<(String, String)>,
}

/// A ResourceClaim as the watch last showed it: what a write of its
/// allocation is conditional on (`resourceVersion`) and keeps (its
/// finalizers and reservations, as merge patches replace lists).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimSeen {
    pub resource_version: String,
    pub uid: String,
    pub finalizers: Vec<String>,
    /// `status.reservedFor` entries, as shown.
    pub reserved_for: Vec<Value>,
    /// Whether it has `status.allocation`.
    pub allocated: bool,
}

impl ClaimSeen {
    /// What `object` (a ResourceClaim as JSON) shows.
    pub fn of(object: &Value) -> ClaimSeen {
        let m = &object["metadata"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        ClaimSeen {
            resource_version: text(&m["resourceVersion"]),
            uid: text(&m["uid"]),
            finalizers: m["finalizers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(text)
                .collect(),
            reserved_for: object["status"]["reservedFor"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
            allocated: !object["status"]["allocation"].is_null(),
        }
    }
}

/// Groups a cycle's writes into units: binds first (by job, in decision
/// order, each job's claim writes before its binds), then evictions,
/// nominations and withdrawals one by one.
pub fn plan(writes: Vec<Write>, nominate: NominateBeforeBind) -> Vec<(bool, Vec<Write>)> {
    let mut binds: BTreeMap<String, Vec<Write>> = BTreeMap::new();
    let mut claims: BTreeMap<String, Vec<Write>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut others = Vec::new();
    for w in writes {
        match &w {
            Write::Bind(b) => {
                let job = b.job.to_string();
                if !binds.contains_key(&job) {
                    order.push(job.clone());
                }
                binds.entry(job).or_default().push(w);
            }
            Write::Claim(c) => claims.entry(c.job.to_string()).or_default().push(w),
            _ => others.push((false, vec![w])),
        }
    }
    let mut out: Vec<(bool, Vec<Write>)> = order
        .into_iter()
        .filter_map(|job| {
            let gang = binds.remove(&job)?;
            let mut unit = claims.remove(&job).unwrap_or_default();
            unit.extend(gang);
            Some(unit)
        })
        .map(|unit| {
            let binds = unit.iter().filter(|w| matches!(w, Write::Bind(_))).count();
            let first = match nominate {
                NominateBeforeBind::Always => true,
                NominateBeforeBind::Gangs => binds > 1,
                NominateBeforeBind::Never => false,
            };
            (first, unit)
        })
        .collect();
    // Claim writes of a job without binds (none: the core decides claims
    // for its binds only) go alone, so none is lost.
    out.extend(claims.into_values().map(|c| (false, c)));
    out.extend(others);
    out
}

/// The binds among `writes`.
pub fn binds_of(writes: &[Write]) -> Vec<Bind> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Bind(b) => Some(b.clone()),
            _ => None,
        })
        .collect()
}

/// One unit not done yet.
#[derive(Clone, Debug)]
struct Open {
    at: Timestamp,
    left: usize,
    intent: Option<u64>,
}

/// Units handed to the shell and not yet done, and the journal's intents
/// open now (for the checkpoint).
#[derive(Debug, Default)]
pub struct Units {
    next_unit: u64,
    next_intent: u64,
    open: BTreeMap<u64, Open>,
    /// Intents open now, by id.
    pub intents: BTreeMap<u64, JournalRecord>,
    /// Whether gangs open intents (a store is configured).
    pub journal: bool,
}

impl Units {
    /// Units whose intents take ids after `last_intent` (the highest id
    /// the store holds).
    pub fn new(journal: bool, last_intent: u64) -> Units {
        Units {
            journal,
            next_intent: last_intent.saturating_add(1),
            ..Units::default()
        }
    }

    /// A fresh intent id.
    pub fn intent_id(&mut self) -> u64 {
        let id = self.next_intent;
        self.next_intent += 1;
        id
    }

    /// Makes the units of a cycle's writes at `at`; a gang's unit opens an
    /// intent when the journal is on.
    /// `seen` gives each claim as the watch last showed it.
    pub fn make(
        &mut self,
        at: Timestamp,
        writes: Vec<Write>,
        nominate: NominateBeforeBind,
        seen: impl Fn(&str) -> Option<ClaimSeen>,
        extended: impl Fn(&ClaimWrite) -> Option<ExtendedClaim>,
    ) -> Vec<Unit> {
        plan(writes, nominate)
            .into_iter()
            .map(|(nominate_first, writes)| {
                let claims: BTreeMap<String, ClaimSeen> = writes
                    .iter()
                    .filter_map(|w| match w {
                        Write::Claim(c) => Some((c.claim.clone(), seen(&c.claim)?)),
                        _ => None,
                    })
                    .collect();
                let created: BTreeMap<String, ExtendedClaim> = writes
                    .iter()
                    .filter_map(|w| match w {
                        Write::Claim(c) if c.creates() => Some((c.claim.clone(), extended(c)?)),
                        _ => None,
                    })
                    .collect();
                let binds = binds_of(&writes);
                let open = (self.journal && binds.len() > 1).then(|| {
                    let id = self.intent_id();
                    (
                        id,
                        crate::journal::record_of(at, &binds, JournalState::Open),
                    )
                });
                let intent = open.as_ref().map(|(id, _)| *id);
                let mut unit = self.track(at, intent, nominate_first, open, writes);
                unit.claims = claims;
                unit.extended = created;
                unit
            })
            .collect()
    }

    /// A unit of `writes` under `intent` (already in the store, or opened
    /// by this unit when `open`).
    pub fn track(
        &mut self,
        at: Timestamp,
        intent: Option<u64>,
        nominate_first: bool,
        open: Option<(u64, JournalRecord)>,
        writes: Vec<Write>,
    ) -> Unit {
        let id = self.next_unit;
        self.next_unit += 1;
        if let Some((i, rec)) = &open {
            self.intents.insert(*i, rec.clone());
        }
        self.open.insert(
            id,
            Open {
                at,
                left: writes.len(),
                intent,
            },
        );
        Unit {
            id,
            at,
            nominate_first,
            open,
            writes,
            claims: BTreeMap::new(),
            extended: BTreeMap::new(),
        }
    }

    /// One write of unit `id` is done; the intent to close when it was the
    /// unit's last.
    pub fn done(&mut self, id: u64) -> Option<u64> {
        let u = self.open.get_mut(&id)?;
        u.left = u.left.saturating_sub(1);
        if u.left > 0 {
            return None;
        }
        let intent = self.open.remove(&id).and_then(|u| u.intent)?;
        self.intents.remove(&intent);
        Some(intent)
    }

    /// The decision time of the oldest unit not done: assumptions from
    /// then on are not forgotten for their age (their writes may still be
    /// queued).
    pub fn oldest(&self) -> Option<Timestamp> {
        self.open.values().map(|u| u.at).min()
    }

    /// Writes not done.
    pub fn in_flight(&self) -> usize {
        self.open.values().map(|u| u.left).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainyard_model::TaskKey;
    use trainyard_sched::decisions::{Eviction, EvictionKind};

    fn bind(job: &str, pod: &str) -> Write {
        Write::Bind(Bind {
            job: job.into(),
            task: TaskKey {
                namespace: "ml".into(),
                name: pod.into(),
                uid: String::new(),
            },
            node: "n1".into(),
            gpus: vec![0],
        })
    }

    #[test]
    fn a_gang_opens_an_intent_closed_by_its_last_outcome() {
        let mut u = Units::new(true, 7);
        let evict = Write::Evict(Eviction {
            job: "ml/v".into(),
            task: TaskKey::default(),
            node: "n1".into(),
            kind: EvictionKind::Preempt,
            preemptor: "ml/g".into(),
            message: String::new(),
        });
        let units = u.make(
            Timestamp(5),
            vec![
                bind("ml/g", "a"),
                evict,
                bind("ml/g", "b"),
                bind("ml/s", "c"),
            ],
            NominateBeforeBind::Gangs,
            |_| None,
            |_| None,
        );
        assert_eq!(units.len(), 3);
        assert_eq!(units[0].open.as_ref().map(|o| o.0), Some(8));
        assert!(units[0].nominate_first);
        assert!(units[1].open.is_none(), "a single pod opens no intent");
        assert_eq!(u.in_flight(), 4);
        assert_eq!(u.done(units[0].id), None);
        assert_eq!(u.done(units[0].id), Some(8));
        assert!(u.intents.is_empty());
        assert_eq!(u.oldest(), Some(Timestamp(5)));
    }
}
