//! Writes grouped into units (what is written together), the bind
//! journal's intents they open, and what is still in flight.
//!
//! A unit is the binds of one job (a gang: nominated first, with
//! `nominateBeforeBind`), or one eviction, nomination or withdrawal. A
//! gang's unit (two binds or more) opens an intent in the journal before
//! its first bind; the intent is closed when every write of the unit has
//! an outcome.

use std::collections::BTreeMap;

use trainyard_cluster::Write;
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
    pub writes: Vec<Write>,
}

/// Groups a cycle's writes into units: binds first (by job, in decision
/// order), then evictions, nominations and withdrawals one by one.
pub fn plan(writes: Vec<Write>, nominate: NominateBeforeBind) -> Vec<(bool, Vec<Write>)> {
    let mut binds: BTreeMap<String, Vec<Write>> = BTreeMap::new();
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
            _ => others.push((false, vec![w])),
        }
    }
    let mut out: Vec<(bool, Vec<Write>)> = order
        .into_iter()
        .filter_map(|job| binds.remove(&job))
        .map(|gang| {
            let first = match nominate {
                NominateBeforeBind::Always => true,
                NominateBeforeBind::Gangs => gang.len() > 1,
                NominateBeforeBind::Never => false,
            };
            (first, gang)
        })
        .collect();
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
    pub fn make(
        &mut self,
        at: Timestamp,
        writes: Vec<Write>,
        nominate: NominateBeforeBind,
    ) -> Vec<Unit> {
        plan(writes, nominate)
            .into_iter()
            .map(|(nominate_first, writes)| {
                let binds = binds_of(&writes);
                let open = (self.journal && binds.len() > 1).then(|| {
                    let id = self.intent_id();
                    (
                        id,
                        crate::journal::record_of(at, &binds, JournalState::Open),
                    )
                });
                let intent = open.as_ref().map(|(id, _)| *id);
                self.track(at, intent, nominate_first, open, writes)
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
