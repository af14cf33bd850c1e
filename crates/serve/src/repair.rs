//! Partial gangs repaired: no gang below its minimum keeps GPUs.
//!
//! A gang's binds are issued together, after the core placed its whole
//! minimum in one cycle. Some can fail (the pod was deleted, its node went
//! away, the API refused): the failed bind's assumption is dropped at once
//! ([`trainyard_cluster::ClusterState::forget_write`]), so the next cycle
//! sees the gang with fewer members bound than its minimum and places the
//! missing ones where they fit (the retry). A gang that stays *incomplete*
//! (some members bound, fewer than `minMember` or than a sub-group's
//! minimum bound to nodes that exist, none of them terminating) for `gangRepairSeconds` has its bound
//! members evicted through the Eviction API, so it holds no GPUs while it
//! cannot run; its controller (a Job, a PyTorchJob) recreates them and the
//! gang is placed whole again.
//!
//! A gang seen complete once is never repaired by this rule: members that
//! finished (Succeeded, Failed) are not in the snapshot, so a gang whose
//! pods end one by one looks incomplete, and evicting the rest would kill
//! a job that is finishing; a running gang that loses a member is its
//! controller's to restart (its restart policy), as with Volcano. After a
//! scheduler restart, a gang is "seen complete" again at the first cycle
//! that shows it so; a gang that is finishing at that moment is repaired
//! only if it stays incomplete for the whole period.
//!
//! Pure: the snapshot and the time in, evictions out.

use std::collections::{BTreeMap, BTreeSet};

use trainyard_model::{Job, Snapshot, Task, TaskKey, TaskState, Timestamp};

/// A bound member of an incomplete gang to evict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairEviction {
    pub job: String,
    pub task: TaskKey,
    /// For people, e.g. `gang ml/train had 2 of minMember 4 pods bound for
    /// 60 s; its bound pods are evicted so they hold no GPUs`.
    pub message: String,
}

/// How long each incomplete gang has been so, across cycles.
#[derive(Clone, Debug, Default)]
pub struct Repair {
    /// Incomplete gangs, since when.
    since: BTreeMap<String, Timestamp>,
    /// Gangs seen complete (never repaired).
    complete: BTreeSet<String>,
    /// Evictions asked, and when (asked again only after `retry_ms`).
    asked: BTreeMap<TaskKey, Timestamp>,
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
    if job.tasks.iter().any(|t| t.terminating) {
        // Being evicted already (reclaim, preemption, or this rule).
        return None;
    }
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
    /// least `timeout_seconds`. An eviction already asked is asked again
    /// only after `retry_seconds` (a PodDisruptionBudget refused it, or the
    /// watch has not shown it yet).
    pub fn check(
        &mut self,
        snapshot: &Snapshot,
        now: Timestamp,
        timeout_seconds: u64,
        retry_seconds: u64,
    ) -> Vec<RepairEviction> {
        let mut out = Vec::new();
        let mut present = BTreeSet::new();
        let mut tasks = BTreeSet::new();
        for job in &snapshot.jobs {
            present.insert(job.id.as_str());
            if self.complete.contains(&job.id) {
                continue;
            }
            let Some((bound, needed, what)) = incomplete(snapshot, job) else {
                if job.tasks.iter().any(|t| !t.is_pending())
                    && !job.tasks.iter().any(|t| t.terminating)
                {
                    self.complete.insert(job.id.clone());
                }
                self.since.remove(&job.id);
                continue;
            };
            let since = *self.since.entry(job.id.clone()).or_insert(now);
            let waited = now.secs_since(since);
            if waited < timeout_seconds {
                continue;
            }
            let message = format!(
                "gang {} had {bound} of {what} {needed} pods running for {waited} s; its bound pods are evicted so they hold no GPUs",
                job.id
            );
            for t in job.tasks.iter().filter(|t| !t.is_pending()) {
                tasks.insert(t.key.clone());
                let again = self
                    .asked
                    .get(&t.key)
                    .is_none_or(|at| now.secs_since(*at) >= retry_seconds);
                if again {
                    self.asked.insert(t.key.clone(), now);
                    out.push(RepairEviction {
                        job: job.id.clone(),
                        task: t.key.clone(),
                        message: message.clone(),
                    });
                }
            }
        }
        self.since.retain(|id, _| present.contains(id.as_str()));
        self.complete.retain(|id| present.contains(id.as_str()));
        self.asked.retain(|k, _| tasks.contains(k));
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

    fn names(e: &[RepairEviction]) -> Vec<String> {
        e.iter().map(|e| e.task.to_string()).collect()
    }

    #[test]
    fn an_incomplete_gang_is_evicted_after_the_timeout_and_asked_again_after_the_retry() {
        let mut r = Repair::default();
        let s = snap(vec![gang("ml/a", 4, 2), gang("ml/b", 2, 0)]);
        assert!(r.check(&s, Timestamp(0), 60, 10).is_empty());
        assert!(r.check(&s, Timestamp(59_999), 60, 10).is_empty());
        let e = r.check(&s, Timestamp(60_000), 60, 10);
        assert_eq!(names(&e), ["ml/a-0", "ml/a-1"]);
        assert_eq!(
            e[0].message,
            "gang ml/a had 2 of minMember 4 pods running for 60 s; its bound pods are evicted so they hold no GPUs"
        );
        assert!(r.check(&s, Timestamp(65_000), 60, 10).is_empty(), "asked");
        assert_eq!(
            r.check(&s, Timestamp(70_000), 60, 10).len(),
            2,
            "asked again"
        );
    }

    #[test]
    fn a_gang_completed_by_the_retry_is_not_evicted_and_never_is_later() {
        let mut r = Repair::default();
        assert!(
            r.check(&snap(vec![gang("ml/a", 4, 3)]), Timestamp(0), 60, 10)
                .is_empty()
        );
        assert!(
            r.check(&snap(vec![gang("ml/a", 4, 4)]), Timestamp(30_000), 60, 10)
                .is_empty()
        );
        // One member finished (it leaves the snapshot): not repaired.
        assert!(
            r.check(&snap(vec![gang("ml/a", 3, 3)]), Timestamp(200_000), 60, 10)
                .is_empty()
        );
        assert!(
            r.check(&snap(vec![gang("ml/a", 3, 2)]), Timestamp(400_000), 60, 10)
                .is_empty()
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
        assert!(r.check(&s, Timestamp(0), 60, 10).is_empty());
        let e = r.check(&s, Timestamp(61_000), 60, 10);
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
        assert!(r.check(&s, Timestamp(0), 1, 10).is_empty());
        let e = r.check(&s, Timestamp(1_000), 1, 10);
        assert_eq!(names(&e), ["ml/a-0", "ml/a-1"], "both bound members go");
        assert!(
            e[0].message.contains("1 of minMember 2"),
            "{}",
            e[0].message
        );
    }

    #[test]
    fn a_gang_being_evicted_is_left_alone() {
        let mut j = gang("ml/a", 4, 2);
        j.tasks[0].terminating = true;
        let mut r = Repair::default();
        let s = snap(vec![j]);
        assert!(r.check(&s, Timestamp(0), 0, 10).is_empty());
    }
}
