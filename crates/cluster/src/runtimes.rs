//! Observed runtimes per leaf queue: the jobs that ended on their own, the
//! latest `window` of each queue, for the reservations' estimate of when a
//! running job without a walltime ends
//! (`reservations.runtimeEstimate`, docs/scheduling.md).

use std::collections::{BTreeMap, VecDeque};

use trainyard_model::RuntimeSamples;

/// The latest runtimes (ms) of each leaf queue, in the order the jobs
/// ended.
#[derive(Clone, Debug)]
pub struct RuntimeHistory {
    window: usize,
    by_queue: BTreeMap<String, VecDeque<i64>>,
}

impl RuntimeHistory {
    /// Keeps the latest `window` runtimes per queue (at least one).
    pub fn new(window: u32) -> Self {
        RuntimeHistory {
            window: (window as usize).max(1),
            by_queue: BTreeMap::new(),
        }
    }

    pub fn window(&self) -> usize {
        self.window
    }

    /// Keeps `window` from now on; queues with more drop their oldest.
    pub fn set_window(&mut self, window: u32) {
        self.window = (window as usize).max(1);
        for q in self.by_queue.values_mut() {
            while q.len() > self.window {
                q.pop_front();
            }
        }
    }

    /// A job of `queue` ran `ms`; the queue's oldest runtime is dropped
    /// when it has `window`.
    pub fn record(&mut self, queue: &str, ms: i64) {
        let q = self.by_queue.entry(queue.to_string()).or_default();
        if q.len() == self.window {
            q.pop_front();
        }
        q.push_back(ms.max(0));
    }

    /// Every queue's runtimes in the order they ended, oldest first: what
    /// a checkpoint keeps.
    pub fn recent(&self) -> BTreeMap<String, Vec<i64>> {
        self.by_queue
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(name, q)| (name.clone(), Vec::from(q.clone())))
            .collect()
    }

    /// Runtimes of `queue` that ended before those kept (oldest first, as
    /// [`RuntimeHistory::recent`] gives them): put ahead of them, as far
    /// as the window has room (the latest of them first).
    pub fn restore_older(&mut self, queue: &str, older: &[i64]) {
        let q = self.by_queue.entry(queue.to_string()).or_default();
        for &ms in older.iter().rev() {
            if q.len() >= self.window {
                break;
            }
            q.push_front(ms.max(0));
        }
    }

    /// Every queue's runtimes, ascending: what a snapshot carries.
    pub fn samples(&self) -> BTreeMap<String, RuntimeSamples> {
        self.by_queue
            .keys()
            .filter_map(|q| Some((q.clone(), self.samples_of(q)?)))
            .collect()
    }

    /// Queue `queue`'s runtimes, ascending; `None` when it has none.
    pub fn samples_of(&self, queue: &str) -> Option<RuntimeSamples> {
        let ms = self.by_queue.get(queue)?;
        Some(RuntimeSamples::from(Vec::from(ms.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Change, ClusterState};
    use trainyard_model::{Job, Node, Resources, TaskKey, TaskState, Timestamp};
    use trainyard_sched::{Decisions, Eviction, EvictionKind};

    fn running(id: &str, queue: &str, started_ms: i64) -> Job {
        let mut j = Job::gang(
            id,
            queue,
            vec![Resources::new(1000, 1 << 30, 0).with_gpus(1)],
        );
        j.tasks[0].state = TaskState::Bound {
            node: "n1".to_string(),
            gpus: Some(vec![0]),
        };
        j.tasks[0].started = Some(Timestamp(started_ms));
        j
    }

    fn samples(s: &mut ClusterState, queue: &str) -> Vec<i64> {
        s.snapshot()
            .runtimes
            .get(queue)
            .map(|r| r.as_slice().to_vec())
            .unwrap_or_default()
    }

    /// A job's runtime is measured from the sample that first sees it
    /// holding something to the one that sees it hold nothing; a run the
    /// scheduler evicted is not counted; the window drops the oldest.
    #[test]
    fn jobs_that_end_on_their_own_leave_their_runtimes_in_the_snapshot() {
        let mut s = ClusterState::new();
        s.apply(Change::Node(Node::new("n1", 64_000, 512 << 30, 8)));
        s.track_runtimes(Some(2));
        s.sample_usage(Timestamp(0));
        s.apply(Change::Job(running("ns/a", "q", 0)));
        s.apply(Change::Job(running("ns/b", "q", 0)));
        s.apply(Change::Job(running("ns/c", "r", 0)));
        s.sample_usage(Timestamp(1_000));
        // No usage published: only the accounting runs.
        assert!(s.snapshot().usage.is_empty());
        assert!(s.snapshot().runtimes.is_empty());
        s.apply(Change::JobGone("ns/a".into()));
        s.sample_usage(Timestamp(61_000));
        assert_eq!(samples(&mut s, "q"), vec![60_000]);
        // b is evicted by a decision, then its pods go: not counted.
        let d = Decisions {
            evictions: vec![Eviction {
                job: "ns/b".into(),
                task: TaskKey::named("ns/b-0"),
                node: "n1".into(),
                kind: EvictionKind::Reclaim,
                preemptor: "ns/x".into(),
                message: String::new(),
            }],
            ..Decisions::default()
        };
        assert_eq!(s.apply_decisions(&d, Timestamp(70_000)).evictions, vec![0]);
        s.apply(Change::JobGone("ns/b".into()));
        s.sample_usage(Timestamp(80_000));
        assert_eq!(samples(&mut s, "q"), vec![60_000]);
        // Marked by the service's own rule (a gang repair): not counted.
        s.apply(Change::Job(running("ns/d", "q", 80_000)));
        s.sample_usage(Timestamp(80_000));
        s.mark_evicted("ns/d");
        s.apply(Change::JobGone("ns/d".into()));
        s.sample_usage(Timestamp(90_000));
        assert_eq!(samples(&mut s, "q"), vec![60_000]);
        // Two more in q: the window keeps the latest two, ascending.
        for (id, end) in [("ns/e", 95_000), ("ns/f", 92_000)] {
            s.apply(Change::Job(running(id, "q", 90_000)));
            s.sample_usage(Timestamp(90_000));
            s.apply(Change::JobGone(id.into()));
            s.sample_usage(Timestamp(end));
        }
        assert_eq!(samples(&mut s, "q"), vec![2_000, 5_000]);
        assert_eq!(samples(&mut s, "r"), Vec::<i64>::new());
        // A bind assumed, seen by a sample, then forgotten unconfirmed (it
        // failed): the job held something for a while, but did not run.
        let mut g = running("ns/g", "q", 0);
        g.tasks[0].state = TaskState::Pending;
        g.tasks[0].started = None;
        s.apply(Change::Job(g));
        let bind = trainyard_sched::Bind {
            job: "ns/g".into(),
            task: TaskKey::named("ns/g-0"),
            node: "n1".into(),
            gpus: vec![0],
        };
        let d = Decisions {
            binds: vec![bind.clone()],
            ..Decisions::default()
        };
        assert_eq!(s.assume(&d, Timestamp(100_000)).binds, vec![0]);
        s.sample_usage(Timestamp(100_000));
        assert!(s.forget_write(&crate::Write::Bind(bind)));
        s.sample_usage(Timestamp(130_000));
        assert_eq!(samples(&mut s, "q"), vec![2_000, 5_000]);
        // A smaller window drops the oldest; none drops them all.
        s.track_runtimes(Some(1));
        assert_eq!(samples(&mut s, "q"), vec![2_000]);
        s.track_runtimes(None);
        assert!(s.snapshot().runtimes.is_empty());
    }

    #[test]
    fn each_queue_keeps_its_latest_runtimes() {
        let mut h = RuntimeHistory::new(3);
        for (q, ms) in [("a", 5), ("a", 1), ("b", 7), ("a", 3), ("a", 9), ("a", -2)] {
            h.record(q, ms);
        }
        let s = h.samples();
        // a: 5 and 1 fell out; -2 counts as 0.
        assert_eq!(s["a"].as_slice(), &[0, 3, 9]);
        assert_eq!(s["b"].as_slice(), &[7]);
        h.set_window(1);
        assert_eq!(h.samples()["a"].as_slice(), &[0]);
        assert_eq!(h.window(), 1);
    }

    #[test]
    fn restored_runtimes_go_ahead_of_those_kept_within_the_window() {
        let mut h = RuntimeHistory::new(4);
        h.record("a", 50);
        h.record("a", 60);
        // A checkpoint's, oldest first: only the latest two have room.
        h.restore_older("a", &[10, 20, 30]);
        h.restore_older("b", &[7]);
        assert_eq!(h.recent()["a"], [20, 30, 50, 60]);
        assert_eq!(h.recent()["b"], [7]);
        // The next run ends: the oldest (restored) one goes first.
        h.record("a", 70);
        assert_eq!(h.recent()["a"], [30, 50, 60, 70]);
        // What a checkpoint keeps is what a new history restores.
        let mut again = RuntimeHistory::new(4);
        for (q, ms) in h.recent() {
            again.restore_older(&q, &ms);
        }
        assert_eq!(again.recent(), h.recent());
        assert_eq!(again.samples(), h.samples());
    }
}
