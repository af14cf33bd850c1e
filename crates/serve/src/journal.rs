//! The gang bind journal: a gang's binds are one intent in the store,
//! committed before the first bind is issued and removed when they are
//! all done, so a scheduler that dies in the middle of a gang leaves a
//! record of what it meant to do.
//!
//! At the next start (the first cycle as leader, once the watch has
//! listed everything), every intent left open is resolved against the
//! pods as the API server has them ([`resolve`], pure):
//!
//! - none of its pods is bound, or all are: closed, nothing to do;
//! - some are bound and every other member is still there, unbound: the
//!   gang is **completed**, the rest bound where the intent says (through
//!   the writer, under the same intent, closed when those binds are done),
//!   if that room is still free in the world as listed now
//!   ([`crate::machine::room`]); if another writer took it while no
//!   scheduler ran, the intent is closed and the core places the missing
//!   members again, as it would without a store;
//! - some are bound and a member is gone (deleted, or replaced by a pod of
//!   the same name with another UID), or the intent was already being
//!   rolled back: it is **rolled back**, the bound members evicted with an
//!   `IncompleteGang` Event, then closed.
//!
//! A pod is never bound twice: completion binds only pods the API shows
//! unbound, with the pod's UID as the bind's precondition, and the API
//! server refuses a second binding anyway (409). Without a store there is
//! no journal, and a partial gang is left to the repair timer
//! ([`crate::repair`], `gangRepairSeconds`), which stays as the backstop.

use std::sync::mpsc;

use trainyard_model::{Job, TaskKey, TaskState, Timestamp};
use trainyard_sched::decisions::Bind;
use trainyard_store::{JournalBind, JournalRecord, JournalState};

use crate::persist::Msg;
use crate::repair::RepairEviction;

/// The shell's handle on the journal in the store (cheap to clone): it
/// carries out what the machine decided ([`crate::machine::JournalOp`]).
#[derive(Clone)]
pub struct Journal {
    tx: mpsc::Sender<Msg>,
}

impl Journal {
    pub(crate) fn new(tx: mpsc::Sender<Msg>) -> Journal {
        Journal { tx }
    }

    /// Commits intent `id` as `rec` and waits until it is durable.
    pub async fn write(&self, id: u64, rec: JournalRecord) -> Result<(), String> {
        let (done, answer) = tokio::sync::oneshot::channel();
        self.tx
            .send(Msg::Intent {
                id,
                rec,
                done: Some(done),
            })
            .map_err(|_| "the store's thread has stopped".to_string())?;
        answer
            .await
            .map_err(|_| "the store's thread has stopped".to_string())?
    }

    /// Removes intent `id` (does not wait).
    pub fn close(&self, id: u64) {
        if self.tx.send(Msg::CloseIntent(id)).is_err() {
            tracing::error!("bind journal: intent {id} not closed: the store's thread has stopped");
        }
    }
}

/// The intent of `binds`, one gang's, written at `at`.
pub fn record_of(at: Timestamp, binds: &[Bind], state: JournalState) -> JournalRecord {
    JournalRecord {
        gang: binds.first().map(|b| b.job.to_string()).unwrap_or_default(),
        opened_s: at.0.div_euclid(1000),
        binds: binds
            .iter()
            .map(|b| JournalBind {
                pod: format!("{}/{}", crate::write::namespace(&b.task), b.task.name),
                uid: b.task.uid.clone(),
                node: b.node.to_string(),
                gpus: b.gpus.clone(),
            })
            .collect(),
        state,
    }
}

/// What a start does with an intent left open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// None of its pods is bound, or all are: nothing to do.
    Close,
    /// These binds are left, and every member is there to take them.
    Complete(Vec<Bind>),
    /// A member is gone: the bound ones are evicted.
    RollBack(Vec<RepairEviction>),
}

/// Decides what to do with `rec`, given its gang as the API server shows
/// it now (`None`: no pod of it is left).
pub fn resolve(rec: &JournalRecord, gang: Option<&Job>) -> Resolution {
    let task_of = |jb: &JournalBind| {
        let (ns, name) = jb
            .pod
            .split_once('/')
            .unwrap_or(("default", jb.pod.as_str()));
        gang?.tasks.iter().find(|t| {
            t.key.name == name
                && crate::write::namespace(&t.key) == ns
                && (jb.uid.is_empty() || t.key.uid.is_empty() || t.key.uid == jb.uid)
        })
    };
    let mut bound = Vec::new();
    let mut left = Vec::new();
    let mut gone = 0usize;
    for jb in &rec.binds {
        match task_of(jb) {
            Some(t) => match &t.state {
                TaskState::Bound { node, .. } => bound.push((t.key.clone(), node.clone())),
                TaskState::Pending if !t.terminating => left.push((t.key.clone(), jb)),
                TaskState::Pending => gone += 1,
            },
            None => gone += 1,
        }
    }
    if bound.is_empty() || (left.is_empty() && gone == 0 && rec.state == JournalState::Open) {
        return Resolution::Close;
    }
    if gone == 0 && rec.state == JournalState::Open {
        return Resolution::Complete(
            left.into_iter()
                .map(|(task, jb)| Bind {
                    job: rec.gang.as_str().into(),
                    task,
                    node: jb.node.as_str().into(),
                    gpus: jb.gpus.clone(),
                })
                .collect(),
        );
    }
    let why = if rec.state == JournalState::RollingBack {
        "its roll-back had begun".to_string()
    } else {
        format!("{gone} of its {} pods are gone", rec.binds.len())
    };
    Resolution::RollBack(
        bound
            .into_iter()
            .map(|(task, _node): (TaskKey, String)| RepairEviction {
                job: rec.gang.clone(),
                task,
                message: format!(
                    "gang {} was being bound when the scheduler stopped and {why}; its bound pods are evicted so they hold no GPUs (bind journal)",
                    rec.gang
                ),
            })
            .collect(),
    )
}

/// What a start did with the intents left open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Nothing to do: none of their pods bound, or all.
    pub closed: u64,
    /// The rest of their binds handed to the writer.
    pub completed: u64,
    /// Bound members evicted.
    pub rolled_back: u64,
    /// Not completed: the room planned for the missing members was taken
    /// meanwhile; the core places them again.
    pub replanned: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainyard_model::Resources;

    fn gang(bound: &[(&str, Option<&str>)]) -> Job {
        let mut j = Job::gang(
            "ml/g",
            "q",
            vec![Resources::zero().with_gpus(1); bound.len()],
        );
        for (t, (name, node)) in j.tasks.iter_mut().zip(bound) {
            t.key = TaskKey {
                namespace: "ml".into(),
                name: name.to_string(),
                uid: format!("u-{name}"),
            };
            t.name = format!("ml/{name}");
            if let Some(n) = node {
                t.state = TaskState::Bound {
                    node: n.to_string(),
                    gpus: Some(vec![0]),
                };
            }
        }
        j
    }

    fn intent(pods: &[&str], state: JournalState) -> JournalRecord {
        JournalRecord {
            gang: "ml/g".into(),
            opened_s: 10,
            binds: pods
                .iter()
                .enumerate()
                .map(|(i, p)| JournalBind {
                    pod: format!("ml/{p}"),
                    uid: format!("u-{p}"),
                    node: format!("n{i}"),
                    gpus: vec![i as u32],
                })
                .collect(),
            state,
        }
    }

    #[test]
    fn nothing_bound_or_everything_bound_closes() {
        let rec = intent(&["a", "b"], JournalState::Open);
        assert_eq!(
            resolve(&rec, Some(&gang(&[("a", None), ("b", None)]))),
            Resolution::Close
        );
        assert_eq!(
            resolve(&rec, Some(&gang(&[("a", Some("n0")), ("b", Some("n1"))]))),
            Resolution::Close
        );
        assert_eq!(resolve(&rec, None), Resolution::Close);
    }

    #[test]
    fn a_partial_gang_with_every_member_left_is_completed_as_intended() {
        let rec = intent(&["a", "b", "c"], JournalState::Open);
        let Resolution::Complete(binds) = resolve(
            &rec,
            Some(&gang(&[("a", Some("n0")), ("b", None), ("c", None)])),
        ) else {
            panic!("not completed");
        };
        let got: Vec<(String, String, String, Vec<u32>)> = binds
            .iter()
            .map(|b| {
                (
                    b.task.name.clone(),
                    b.task.uid.clone(),
                    b.node.to_string(),
                    b.gpus.clone(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("b".into(), "u-b".into(), "n1".into(), vec![1]),
                ("c".into(), "u-c".into(), "n2".into(), vec![2]),
            ]
        );
    }

    #[test]
    fn a_partial_gang_with_a_member_gone_is_rolled_back() {
        let rec = intent(&["a", "b", "c"], JournalState::Open);
        // c was deleted; b was recreated under its name with another UID.
        let mut g = gang(&[("a", Some("n0")), ("b", None)]);
        g.tasks[1].key.uid = "u-b2".into();
        let Resolution::RollBack(ev) = resolve(&rec, Some(&g)) else {
            panic!("not rolled back");
        };
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].task.name, "a");
        expect_test::expect![[r#"gang ml/g was being bound when the scheduler stopped and 2 of its 3 pods are gone; its bound pods are evicted so they hold no GPUs (bind journal)"#]]
            .assert_eq(&ev[0].message);
    }

    #[test]
    fn a_roll_back_that_had_begun_goes_on() {
        let rec = intent(&["a", "b"], JournalState::RollingBack);
        let Resolution::RollBack(ev) =
            resolve(&rec, Some(&gang(&[("a", Some("n0")), ("b", None)])))
        else {
            panic!("not rolled back");
        };
        assert_eq!(ev.len(), 1);
        // Every member bound, but undoing had begun: undone, not kept.
        let all = gang(&[("a", Some("n0")), ("b", Some("n1"))]);
        assert!(matches!(resolve(&rec, Some(&all)), Resolution::RollBack(e) if e.len() == 2));
    }

    #[test]
    fn a_terminating_member_counts_as_gone() {
        let rec = intent(&["a", "b"], JournalState::Open);
        let mut g = gang(&[("a", Some("n0")), ("b", None)]);
        g.tasks[1].terminating = true;
        assert!(matches!(resolve(&rec, Some(&g)), Resolution::RollBack(_)));
    }
}
