//! Partial gangs repaired: no gang below its minimum keeps GPUs.
//!
//! A gang's binds are issued together, after the core placed its whole
//! minimum in one cycle. Some can fail (the pod was deleted, its node went
//! away, the API refused): the failed bind's assumption is dropped at once
//! ([`trainyard_cluster::ClusterState::forget_write`]), so the next cycle
//! sees the gang with fewer members bound than its minimum and places the
//! missing ones where they fit (the retry). A gang that stays *incomplete*
//! (some members bound, fewer than `minMember` or than a sub-group's
//! minimum bound to nodes that exist) for `gangRepairSeconds` has its bound
//! members evicted through the Eviction API, so it holds no GPUs while it
//! cannot run (not while one of them is terminating: that waits for it to
//! go, but the time counts from when the gang was first seen incomplete;
//! the deterministic simulation found that a member deleted every minute
//! kept a gang partial for good when termination reset the clock); its controller (a Job, a PyTorchJob) recreates them and the
//! gang is placed whole again.
//!
//! The same holds for a gang that ran whole and lost a member (its node
//! died, the pod was deleted) with no room to place it again: it is
//! incomplete, and after the period its remaining pods go. A gang with a
//! finished member (Succeeded or Failed, counted from the pods as the API
//! shows them: finished pods are not in the snapshot) is *finishing*, not
//! incomplete: its pods end one by one, and its controller (restart
//! policy) decides what a failure means, so this rule leaves it alone.
//!
//! Pure: the snapshot and the time in, evictions out.

use std::collections::{BTreeMap, BTreeSet};

use trainyard_model::{Job, Snapshot, Task, TaskKey, TaskState, Timestamp};

/// A bound pod a rule of the service evicts: a member of an incomplete
/// gang (here, and the journal's roll-back), or of a job past its walltime
/// ([`crate::walltime`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairEviction {
    pub job: String,
    pub task: TaskKey,
    /// For people, e.g. `gang ml/train had 2 of minMember 4 pods bound for
    /// 60 s; its bound pods are evicted so they hold no GPUs`.
    pub message: String,
}

/// Evictions a rule asked, and when: one is asked again only after the
/// retry period, and forgotten once its pod is no longer a candidate.
#[derive(Clone, Debug, Default)]
pub(crate) struct Asked {
    at: BTreeMap<TaskKey, Timestamp>,
    /// The candidates of the current check.
    seen: BTreeSet<TaskKey>,
}

impl Asked {
    /// Pushes an eviction of `task` onto `out` unless it was asked less
    /// than `retry_seconds` ago; `task` stays a candidate either way.
    pub(crate) fn ask(
        &mut self,
        out: &mut Vec<RepairEviction>,
        (job, task, message): (&str, &TaskKey, &str),
        now: Timestamp,
        retry_seconds: u64,
    ) {
        self.seen.insert(task.clone());
        let again = self
            .at
            .get(task)
            .is_none_or(|at| now.secs_since(*at) >= retry_seconds);
        if again {
            self.at.insert(task.clone(), now);
            out.push(RepairEviction {
                job: job.to_string(),
                task: task.clone(),
                message: message.to_string(),
            });
        }
    }

    /// Ends a check: forgets the pods that were no candidate in it.
    pub(crate) fn end_check(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        self.at.retain(|k, _| seen.contains(k));
    }
}

/// How long each incomplete gang has been so, across cycles.
#[derive(Clone, Debug, Default)]
pub struct Repair {
    /// Incomplete gangs, since when.
    since: BTreeMap<String, Timestamp>,
    /// Evictions asked (asked again only after the retry period).
    asked: Asked,
}

/// Whether `task` is bound to a node the snapshot has (a member bound to
/// a node deleted meanwhile does not run).
fn runs(snapshot: &Snapshot, task: &Task) -> bool {
    match &task.state {
        TaskState::Pending => false,
        // Snapshot nodes are sorted by name (the canonical order).
        TaskState::Bound { node, .. } => snapshot
            .nodes
            .binary_search_by(|n| n.name.as_str().cmp(node.as_str()))
            .is_ok(),
    }
}

/// Why `job` is incomplete, if it is: `(running, needed, what)`.
fn incomplete(snapshot: &Snapshot, job: &Job) -> Option<(u32, u32, String)> {
    if job.tasks.iter().all(Task::is_pending) {
        return None;
    }
    let live = |sub: Option<&str>| {
        job.tasks
            .iter()
            .filter(|t| runs(snapshot, t) && sub.is_none_or(|s| t.subgroup.as_deref() == Some(s)))
            .count() as u32
    };
    let bound = live(None);
    if bound < job.min_member {
        return Some((bound, job.min_member, "minMember".into()));
    }
    job.subgroups.iter().find_map(|sg| {
        let have = live(Some(sg.name.as_str()));
        (have < sg.min_member).then(|| {
            (
                have,
                sg.min_member,
                format!("sub-group {}'s minimum", sg.name),
            )
        })
    })
}

impl Repair {
    /// The bound members to evict at `now`: of gangs incomplete for at
    /// least `timeout_seconds` and not `finishing` (a member of the job id
    /// finished). An eviction already asked is asked again only after
    /// `retry_seconds` (a PodDisruptionBudget refused it, or the watch has
    /// not shown it yet).
    pub fn check(
        &mut self,
        snapshot: &Snapshot,
        now: Timestamp,
        timeout_seconds: u64,
        retry_seconds: u64,
        finishing: impl Fn(&str) -> bool,
    ) -> Vec<RepairEviction> {
        let mut out = Vec::new();
        let mut present = BTreeSet::new();
        for job in &snapshot.jobs {
            present.insert(job.id.as_str());
            let found = incomplete(snapshot, job).filter(|_| !finishing(&job.id));
            let Some((bound, needed, what)) = found else {
                self.since.remove(&job.id);
                continue;
            };
            let since = *self.since.entry(job.id.clone()).or_insert(now);
            let waited = now.secs_since(since);
            // A member terminating (being evicted already: reclaim,
            // preemption, this rule, or deleted) waits for it to go; the
            // gang stays incomplete since the first time it was seen so.
            if waited < timeout_seconds || job.tasks.iter().any(|t| t.terminating) {
                continue;
            }
            let message = format!(
                "gang {} had {bound} of {what} {needed} pods running for {waited} s; its bound pods are evicted so they hold no GPUs",
                job.id
            );
            for t in job.tasks.iter().filter(|t| !t.is_pending()) {
                // A bare pod is not recreated: say so where its owner
                // reads it (the Event on the pod, the log).
                let message = match &t.controller {
                    Some(_) => message.clone(),
                    None => format!(
                        "{message}; this pod has no controller, so it is deleted for good: nothing recreates it (create the gang's pods from a Job, JobSet or another controller to have them come back)"
                    ),
                };
                self.asked
                    .ask(&mut out, (&job.id, &t.key, &message), now, retry_seconds);
            }
        }
        self.since.retain(|id, _| present.contains(id.as_str()));
        self.asked.end_check();
        out
    }
}

#[cfg(test)]
mod tests {
    use trainyard_model::{Node, Resources};

    use super::*;

    fn gang(id: &str, pods: usize, bound: usize) -> Job {
        let mut j = Job::gang(
            id,
            "q",
            vec![Resources::new(1000, 1 << 30, 0).with_gpus(1); pods],
        );
        for t in j.tasks.iter_mut().take(bound) {
            t.state = TaskState::Bound {
                node: "n1".into(),
                gpus: None,
            };
        }
        j
    }

    fn snap(jobs: Vec<Job>) -> Snapshot {
        let nodes = vec![
            Node::new("n1", 64_000, 512 << 30, 8),
            Node::new("n2", 64_000, 512 << 30, 8),
        ];
        Snapshot::new(nodes, Default::default(), jobs)
    }

    impl Repair {
        /// `check` with no gang finishing.
        fn check_all(
            &mut self,
            s: &Snapshot,
            now: Timestamp,
            timeout: u64,
            retry: u64,
        ) -> Vec<RepairEviction> {
            self.check(s, now, timeout, retry, |_| false)
        }
    }

    fn names(e: &[RepairEviction]) -> Vec<String> {
        e.iter().map(|e| e.task.to_string()).collect()
    }

    #[test]
    fn an_incomplete_gang_is_evicted_after_the_timeout_and_asked_again_after_the_retry() {
        let mut r = Repair::default();
        let mut a = gang("ml/a", 4, 2);
        // The first pod has a controller; the second is bare.
        a.tasks[0].controller = Some("Job/a".into());
        let s = snap(vec![a, gang("ml/b", 2, 0)]);
        assert!(r.check_all(&s, Timestamp(0), 60, 10).is_empty());
        assert!(r.check_all(&s, Timestamp(59_999), 60, 10).is_empty());
        let e = r.check_all(&s, Timestamp(60_000), 60, 10);
        assert_eq!(names(&e), ["ml/a-0", "ml/a-1"]);
        assert_eq!(
            e[0].message,
            "gang ml/a had 2 of minMember 4 pods running for 60 s; its bound pods are evicted so they hold no GPUs"
        );
        assert!(
            e[1].message
                .ends_with("this pod has no controller, so it is deleted for good: nothing recreates it (create the gang's pods from a Job, JobSet or another controller to have them come back)"),
            "{}",
            e[1].message
        );
        assert!(
            r.check_all(&s, Timestamp(65_000), 60, 10).is_empty(),
            "asked"
        );
        assert_eq!(
            r.check_all(&s, Timestamp(70_000), 60, 10).len(),
            2,
            "asked again"
        );
    }

    #[test]
    fn a_gang_completed_by_the_retry_is_not_evicted_and_a_finishing_one_never_is() {
        let mut r = Repair::default();
        assert!(
            r.check_all(&snap(vec![gang("ml/a", 4, 3)]), Timestamp(0), 60, 10)
                .is_empty()
        );
        assert!(
            r.check_all(&snap(vec![gang("ml/a", 4, 4)]), Timestamp(30_000), 60, 10)
                .is_empty()
        );
        // Members finished (they leave the snapshot; the pods say so).
        let finishing = |id: &str| id == "ml/a";
        let mut a = gang("ml/a", 2, 2);
        a.min_member = 4;
        for t in [0, 200_000, 400_000] {
            let s = snap(vec![a.clone()]);
            assert!(r.check(&s, Timestamp(t), 60, 10, finishing).is_empty());
        }
        // The same gang with no finished member lost two: repaired.
        assert!(
            r.check_all(&snap(vec![a.clone()]), Timestamp(500_000), 60, 10)
                .is_empty()
        );
        assert_eq!(
            r.check_all(&snap(vec![a]), Timestamp(560_000), 60, 10)
                .len(),
            2
        );
    }

    #[test]
    fn a_sub_group_below_its_minimum_makes_the_gang_incomplete() {
        let mut j = gang("ml/a", 4, 3);
        j.min_member = 3;
        j.subgroups = vec![trainyard_model::SubGroup {
            name: "ps".into(),
            min_member: 1,
            topology: Default::default(),
        }];
        j.tasks[3].subgroup = Some("ps".into());
        let mut r = Repair::default();
        let s = snap(vec![j]);
        assert!(r.check_all(&s, Timestamp(0), 60, 10).is_empty());
        let e = r.check_all(&s, Timestamp(61_000), 60, 10);
        assert_eq!(e.len(), 3);
        assert!(
            e[0].message.contains("sub-group ps's minimum 1"),
            "{}",
            e[0].message
        );
    }

    #[test]
    fn a_member_bound_to_a_deleted_node_does_not_count() {
        let mut j = gang("ml/a", 2, 2);
        j.tasks[1].state = TaskState::Bound {
            node: "gone".into(),
            gpus: None,
        };
        let mut r = Repair::default();
        let s = snap(vec![j]);
        assert!(r.check_all(&s, Timestamp(0), 1, 10).is_empty());
        let e = r.check_all(&s, Timestamp(1_000), 1, 10);
        assert_eq!(names(&e), ["ml/a-0", "ml/a-1"], "both bound members go");
        assert!(
            e[0].message.contains("1 of minMember 2"),
            "{}",
            e[0].message
        );
    }

    #[test]
    fn a_member_terminating_does_not_restart_the_clock() {
        let mut r = Repair::default();
        let partial = gang("ml/a", 4, 2);
        assert!(
            r.check_all(&snap(vec![partial.clone()]), Timestamp(0), 60, 10)
                .is_empty()
        );
        let mut going = partial.clone();
        going.tasks[1].terminating = true;
        assert!(
            r.check_all(&snap(vec![going]), Timestamp(30_000), 60, 10)
                .is_empty()
        );
        let mut left = partial;
        left.tasks.remove(1);
        let e = r.check_all(&snap(vec![left]), Timestamp(61_000), 60, 10);
        assert_eq!(names(&e), ["ml/a-0"], "incomplete since 0, not since 30 s");
    }

    #[test]
    fn a_gang_being_evicted_is_left_alone() {
        let mut j = gang("ml/a", 4, 2);
        j.tasks[0].terminating = true;
        let mut r = Repair::default();
        let s = snap(vec![j]);
        assert!(r.check_all(&s, Timestamp(0), 0, 10).is_empty());
    }
}
