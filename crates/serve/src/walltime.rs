//! Walltime enforced: a job that has run its walltime loses its pods
//! (`service.enforceWalltime`, off by default), as Slurm ends a job at its
//! time limit.
//!
//! The walltime is the one the core and the simulator use
//! ([`trainyard_model::QueueTree::walltime`]: the job's own, else its
//! queue's default, else its queue's maximum); the start is the earliest start of its bound pods
//! (`status.startTime`). At `start + walltime` every bound pod of the job
//! that is not already terminating is evicted through the Eviction API
//! with a `WalltimeExceeded` Event; an eviction refused (a budget) is asked
//! again after the retry period. The kubelet already ends a pod at its own
//! `activeDeadlineSeconds`; this rule ends a gang at its PodGroup's
//! `spec.walltime` or its queue's default or maximum, and all its pods
//! together.
//!
//! Pure: the snapshot and the time in, evictions out.

use trainyard_model::{Job, Snapshot, Timestamp, format_seconds};

use crate::repair::{Asked, RepairEviction};

/// The evictions asked (asked again only after the retry period), and the
/// pods told their job is past its walltime while enforcement is off.
#[derive(Clone, Debug, Default)]
pub struct Expiry {
    asked: Asked,
    told: Asked,
}

/// How long running job `job` has run and its walltime, when it has run
/// its walltime at `now` and still has a bound pod not terminating: what
/// enforcement evicts, and what `trainyard_jobs_past_walltime` counts
/// whether or not enforcement is on.
pub fn past_walltime(snapshot: &Snapshot, job: &Job, now: Timestamp) -> Option<(u64, u64)> {
    let walltime = snapshot.queues.walltime(&job.queue, job.walltime_seconds)?;
    let start = job.started_at()?;
    let ran = now.secs_since(start);
    let running = job.tasks.iter().any(|t| !t.is_pending() && !t.terminating);
    (ran >= walltime && running).then_some((ran, walltime))
}

impl Expiry {
    /// The bound pods of jobs past their walltime at `now`.
    pub fn check(
        &mut self,
        snapshot: &Snapshot,
        now: Timestamp,
        retry_seconds: u64,
    ) -> Vec<RepairEviction> {
        asked_for_overdue(
            &mut self.asked,
            snapshot,
            now,
            retry_seconds,
            "its pods are evicted",
        )
    }

    /// With enforcement off: the bound pods of jobs past their walltime at
    /// `now`, each once while its job stays past it (a `WalltimePassed`
    /// Event says the job runs on, and that reservations no longer count on
    /// its end). Nothing is evicted.
    pub fn notices(&mut self, snapshot: &Snapshot, now: Timestamp) -> Vec<RepairEviction> {
        // Told once: no retry while the pod stays a candidate.
        asked_for_overdue(
            &mut self.told,
            snapshot,
            now,
            u64::MAX,
            "it runs on (service.enforceWalltime is off), and reservations no longer count on its end",
        )
    }
}

/// Asks `asked` for each bound pod (not terminating) of every job past its
/// walltime at `now`, with a message naming the job, how long it ran, its
/// walltime and `then`; ends the check.
fn asked_for_overdue(
    asked: &mut Asked,
    snapshot: &Snapshot,
    now: Timestamp,
    retry_seconds: u64,
    then: &str,
) -> Vec<RepairEviction> {
    let mut out = Vec::new();
    for job in &snapshot.jobs {
        let Some((ran, walltime)) = past_walltime(snapshot, job, now) else {
            continue;
        };
        let message = format!(
            "job {} ran {}, past its walltime {}; {then}",
            job.id,
            format_seconds(ran),
            format_seconds(walltime)
        );
        for t in job
            .tasks
            .iter()
            .filter(|t| !t.is_pending() && !t.terminating)
        {
            asked.ask(&mut out, (&job.id, &t.key, &message), now, retry_seconds);
        }
    }
    asked.end_check();
    out
}

#[cfg(test)]
mod tests {
    use trainyard_model::{Job, Node, QueueSpec, QueueTree, Resources, TaskState};

    use super::*;

    fn running(id: &str, queue: &str, pods: usize, started_s: i64, walltime: Option<u64>) -> Job {
        let mut j = Job::gang(
            id,
            queue,
            vec![Resources::new(1000, 1 << 30, 0).with_gpus(1); pods],
        );
        for t in &mut j.tasks {
            t.state = TaskState::Bound {
                node: "n1".into(),
                gpus: None,
            };
            t.started = Some(Timestamp::from_secs(started_s));
        }
        j.walltime_seconds = walltime;
        j
    }

    fn snap(jobs: Vec<Job>) -> Snapshot {
        let mut team = QueueSpec::new("team");
        team.default_walltime_seconds = Some(3600);
        let leaf = QueueSpec::new("nlp").parent("team");
        let queues = QueueTree::build(vec![team, leaf, QueueSpec::new("free")]).expect("tree");
        Snapshot::new(vec![Node::new("n1", 64_000, 512 << 30, 8)], queues, jobs)
    }

    fn names(e: &[RepairEviction]) -> Vec<String> {
        e.iter().map(|e| e.task.to_string()).collect()
    }

    #[test]
    fn a_job_past_its_walltime_loses_every_pod_and_is_asked_again_after_the_retry() {
        let s = snap(vec![
            // Its own walltime, 10 min, from its earliest start.
            running("ml/own", "free", 2, 0, Some(600)),
            // The queue's default (team's, inherited): 1 h.
            running("ml/dflt", "nlp", 1, 0, None),
            // No walltime anywhere: runs on.
            running("ml/free", "free", 1, 0, None),
        ]);
        let mut x = Expiry::default();
        assert!(x.check(&s, Timestamp::from_secs(599), 10).is_empty());
        let e = x.check(&s, Timestamp::from_secs(600), 10);
        assert_eq!(names(&e), ["ml/own-0", "ml/own-1"]);
        assert_eq!(
            e[0].message,
            "job ml/own ran 10m, past its walltime 10m; its pods are evicted"
        );
        // Not asked again before the retry; then again, with the default's.
        assert!(x.check(&s, Timestamp::from_secs(605), 10).is_empty());
        let e = x.check(&s, Timestamp::from_secs(3600), 10);
        assert_eq!(names(&e), ["ml/own-0", "ml/own-1", "ml/dflt-0"]);
    }

    #[test]
    fn with_enforcement_off_each_pod_is_told_once_while_its_job_is_past_its_walltime() {
        let s = snap(vec![
            running("ml/own", "free", 2, 0, Some(600)),
            running("ml/free", "free", 1, 0, None),
        ]);
        let mut x = Expiry::default();
        assert!(x.notices(&s, Timestamp::from_secs(599)).is_empty());
        let n = x.notices(&s, Timestamp::from_secs(600));
        assert_eq!(names(&n), ["ml/own-0", "ml/own-1"]);
        assert_eq!(
            n[0].message,
            "job ml/own ran 10m, past its walltime 10m; it runs on (service.enforceWalltime is off), and reservations no longer count on its end"
        );
        // Not told again, however long it runs on.
        assert!(x.notices(&s, Timestamp::from_secs(86_400)).is_empty());
        // A pod that went (its job ended) is forgotten: a new job of the
        // same name is told again.
        let empty = snap(Vec::new());
        assert!(x.notices(&empty, Timestamp::from_secs(86_400)).is_empty());
        assert_eq!(
            names(&x.notices(&s, Timestamp::from_secs(86_400))),
            ["ml/own-0", "ml/own-1"]
        );
    }

    #[test]
    fn terminating_pods_and_jobs_not_started_are_left_alone() {
        let mut j = running("ml/own", "free", 2, 0, Some(60));
        j.tasks[0].terminating = true;
        let mut pending = running("ml/wait", "free", 1, 0, Some(60));
        pending.tasks[0].state = TaskState::Pending;
        pending.tasks[0].started = None;
        let s = snap(vec![j, pending]);
        let e = Expiry::default().check(&s, Timestamp::from_secs(120), 10);
        assert_eq!(names(&e), ["ml/own-1"]);
    }
}
