//! Consolidation's moves, kept between cycles (docs/consolidation.md).
//!
//! When the core moves a job (`Decisions::moves`), its pods are evicted
//! and their controller creates replacements: new pods, often with other
//! names and another job id (a Deployment's pods are jobs of one pod
//! each), sometimes with the same names (a StatefulSet's, the
//! simulator's restarted tasks). The room the core planned for them must
//! stay theirs meanwhile. The live service and the simulator both keep
//! one [`Moves`]; each cycle, before the core sees the snapshot, every
//! plan still open is applied to it:
//!
//! - pods of the same controller and namespace that are not the moved
//!   ones (a moved pod is one of the plan's names that is terminating or
//!   started before the move) claim the plan's slots: a bound one the
//!   slot on its node, a pending one the next free slot, which becomes
//!   its nomination (so the core keeps that room for it, and binds it
//!   there);
//! - a slot no replacement claims yet is held by a placeholder pod (an
//!   external pod named `consolidation-hold/...`), so nothing else takes it;
//! - the jobs of that controller are marked moved (`Job::moved_at`), and
//!   stay so for `consolidation.noMoveSeconds`.
//!
//! A plan ends when every slot is claimed by a bound replacement, or when
//! the nomination timeout (`preemption.nominationTimeoutSeconds`) passes
//! first: then the hold is released and the replacements are scheduled as
//! any pod.
//!
//! Pure: tested on plain values.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use trainyard_model::{ExternalPod, Nomination, Resources, Snapshot, Task, TaskState, Timestamp};
use trainyard_sched::Decisions;

/// One moved pod's planned room.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Slot {
    node: String,
    gpus: Vec<u32>,
    requests: Resources,
}

/// One moved job's plan: its pods' controller, the pods that left, where
/// the replacements go.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Plan {
    namespace: String,
    controller: String,
    /// The moved pods (`namespace/name`): they are not replacements.
    old: Vec<String>,
    slots: Vec<Slot>,
    since: Timestamp,
}

impl Plan {
    /// One of the moved pods, not a replacement: a name of the plan that
    /// is terminating, or bound since before the move (a replacement
    /// with the same name is pending or started after it).
    fn is_old(&self, t: &Task) -> bool {
        if t.terminating {
            return true;
        }
        let started_before = match &t.state {
            TaskState::Pending => false,
            TaskState::Bound { .. } => t.started.is_none_or(|s| s < self.since),
        };
        started_before && self.old.iter().any(|o| *o == t.key.to_string())
    }
}

/// The open plans, by moved job id, and when each controller's pods were
/// last moved.
///
/// Serializable, so that the live service's checkpoint carries the open
/// plans to a restarted or new leader ([`Moves::merge`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moves {
    plans: BTreeMap<String, Plan>,
    /// By namespace, then controller: looked up for every pod while any
    /// move is recent, so by `&str`, without building a key.
    moved: BTreeMap<String, BTreeMap<String, Timestamp>>,
}

/// What applying the plans did, for the log and the metrics.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// Slots held by a placeholder (no replacement yet).
    pub placeholders: usize,
    /// Replacement pods nominated onto their slot.
    pub nominated: usize,
    /// Plans dropped this cycle because their replacements did not come
    /// in time.
    pub expired: Vec<String>,
}

impl Moves {
    /// After a cycle: the moves it decided, with the requests of the
    /// moved pods as `snapshot` has them.
    pub fn record(&mut self, snapshot: &Snapshot, d: &Decisions, now: Timestamp) {
        for m in &d.moves {
            let Some(job) = snapshot.jobs.iter().find(|j| j.id == m.job.as_str()) else {
                continue;
            };
            let mut controller = None;
            let mut slots = Vec::with_capacity(m.pods.len());
            for p in &m.pods {
                let Some(t) = job.tasks.iter().find(|t| t.key == p.task) else {
                    continue;
                };
                controller = controller.or(t.controller.clone());
                slots.push(Slot {
                    node: p.to.to_string(),
                    gpus: p.gpus.clone(),
                    requests: t.requests.clone(),
                });
            }
            // The core moves only pods with a controller.
            let Some(controller) = controller else {
                continue;
            };
            let namespace = m
                .pods
                .first()
                .map(|p| p.task.namespace.clone())
                .unwrap_or_default();
            self.moved
                .entry(namespace.clone())
                .or_default()
                .insert(controller.clone(), now);
            self.plans.insert(
                m.job.to_string(),
                Plan {
                    namespace,
                    controller,
                    old: m.pods.iter().map(|p| p.task.to_string()).collect(),
                    slots,
                    since: now,
                },
            );
        }
    }

    /// Before a cycle: `snapshot` with the open plans applied (see the
    /// module docs). `timeout_s` ends a plan whose replacements did not
    /// come; `no_move_s` is how long moved jobs stay marked.
    pub fn hold(
        &mut self,
        snapshot: Arc<Snapshot>,
        now: Timestamp,
        timeout_s: u64,
        no_move_s: u64,
    ) -> (Arc<Snapshot>, Held) {
        let mut held = Held::default();
        let timeout_ms = (timeout_s as i64).saturating_mul(1000);
        let expired: Vec<String> = self
            .plans
            .iter()
            .filter(|(_, p)| now.0.saturating_sub(p.since.0) >= timeout_ms)
            .map(|(j, _)| j.clone())
            .collect();
        for j in &expired {
            self.plans.remove(j);
        }
        held.expired = expired;
        let period_ms = (no_move_s as i64).saturating_mul(1000);
        for by in self.moved.values_mut() {
            by.retain(|_, at| now.0.saturating_sub(at.0) < period_ms);
        }
        self.moved.retain(|_, by| !by.is_empty());
        if self.plans.is_empty() && self.moved.is_empty() {
            return (snapshot, held);
        }
        let mut s = (*snapshot).clone();
        let mut done: Vec<String> = Vec::new();
        for (id, plan) in &self.plans {
            let mut free: Vec<Option<&Slot>> = plan.slots.iter().map(Some).collect();
            let mut bound_claims = 0;
            // Bound replacements first: each takes the slot on its node.
            let mut pending: Vec<(usize, usize)> = Vec::new();
            for (ji, job) in s.jobs.iter().enumerate() {
                for (ti, t) in job.tasks.iter().enumerate() {
                    if t.key.namespace != plan.namespace
                        || t.controller.as_deref() != Some(plan.controller.as_str())
                        || plan.is_old(t)
                    {
                        continue;
                    }
                    match &t.state {
                        TaskState::Bound { node, .. } => {
                            if let Some(k) = free
                                .iter()
                                .position(|f| f.is_some_and(|sl| sl.node == *node))
                            {
                                free[k] = None;
                                bound_claims += 1;
                            }
                        }
                        TaskState::Pending => pending.push((ji, ti)),
                    }
                }
            }
            if bound_claims == plan.slots.len() {
                done.push(id.clone());
                continue;
            }
            // Pending replacements: the next free slots, as nominations.
            for (ji, ti) in pending {
                let Some(k) = free.iter().position(Option::is_some) else {
                    break;
                };
                let Some(slot) = free[k].take() else {
                    continue;
                };
                let job = Arc::make_mut(&mut s.jobs[ji]);
                job.tasks[ti].nomination = Some(Nomination {
                    node: slot.node.clone(),
                    since: plan.since,
                    gpus: Some(slot.gpus.clone()),
                });
                held.nominated += 1;
            }
            // The rest: placeholders.
            for (k, slot) in free.into_iter().enumerate() {
                let Some(slot) = slot else { continue };
                s.external.push(Arc::new(ExternalPod {
                    name: format!("consolidation-hold/{id}/{k}"),
                    node: slot.node.clone(),
                    requests: slot.requests.clone(),
                    gpus: Some(slot.gpus.clone()),
                    namespace: plan.namespace.clone(),
                    labels: BTreeMap::new(),
                    pod_rules: Default::default(),
                }));
                held.placeholders += 1;
            }
        }
        for id in done {
            self.plans.remove(&id);
        }
        for job in &mut s.jobs {
            let since = job.tasks.iter().find_map(|t| {
                let c = t.controller.as_deref()?;
                self.moved.get(t.key.namespace.as_str())?.get(c).copied()
            });
            if let Some(at) = since
                && job.moved_at.is_none_or(|m| m < at)
            {
                Arc::make_mut(job).moved_at = Some(at);
            }
        }
        (Arc::new(s), held)
    }

    /// Plans still open.
    pub fn open(&self) -> usize {
        self.plans.len()
    }

    /// Nothing open and no job marked moved.
    pub fn is_empty(&self) -> bool {
        self.plans.is_empty() && self.moved.is_empty()
    }

    /// Adds what `other` knows and this does not (a checkpoint read by a
    /// restarted or new leader): its plans for jobs without one here, and
    /// its moved controllers, the later time kept. Plans older than the
    /// timeout end at the next [`Moves::hold`], as any.
    pub fn merge(&mut self, other: Moves) {
        for (job, plan) in other.plans {
            self.plans.entry(job).or_insert(plan);
        }
        for (ns, by) in other.moved {
            let mine = self.moved.entry(ns).or_default();
            for (controller, at) in by {
                let t = mine.entry(controller).or_insert(at);
                *t = (*t).max(at);
            }
        }
    }

    /// The first moment after `now` when time alone changes what
    /// [`Moves::hold`] does: a plan times out, or a moved controller's
    /// no-move period ends. A driver that sleeps between changes (the
    /// simulator) wakes up then.
    pub fn next_change(&self, now: Timestamp, timeout_s: u64, no_move_s: u64) -> Option<Timestamp> {
        let timeout_ms = (timeout_s as i64).saturating_mul(1000);
        let period_ms = (no_move_s as i64).saturating_mul(1000);
        let plans = self
            .plans
            .values()
            .map(|p| p.since.0.saturating_add(timeout_ms));
        let moved = self
            .moved
            .values()
            .flat_map(|by| by.values())
            .map(|at| at.0.saturating_add(period_ms));
        plans
            .chain(moved)
            .filter(|t| *t > now.0)
            .min()
            .map(Timestamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainyard_model::{Job, JobId, Node, NodeName, QueueSpec, QueueTree, TaskKey};
    use trainyard_sched::{Move, MovedPod};

    const GI: u64 = 1 << 30;

    fn gpus(k: u64) -> Resources {
        Resources::new(1000, GI, 0).with_gpus(k)
    }

    /// A pod of ReplicaSet `rs` in namespace ml, bound to `node` or pending.
    fn pod(name: &str, rs: &str, node: Option<(&str, Vec<u32>)>) -> Job {
        let mut j = Job::gang(format!("ml/{name}"), "team", vec![gpus(2)]);
        let t = &mut j.tasks[0];
        t.key = TaskKey {
            namespace: "ml".into(),
            name: name.into(),
            uid: String::new(),
        };
        t.controller = Some(format!("ReplicaSet/{rs}"));
        if let Some((n, g)) = node {
            t.state = TaskState::Bound {
                node: n.into(),
                gpus: Some(g),
            };
            t.started = Some(Timestamp(0));
        }
        j
    }

    fn snapshot(jobs: Vec<Job>) -> Arc<Snapshot> {
        let nodes = vec![
            Node::new("n1", 96_000, 1024 * GI, 8),
            Node::new("n2", 96_000, 1024 * GI, 8),
        ];
        let tree = QueueTree::build(vec![QueueSpec::new("team")]).expect("a queue");
        Arc::new(Snapshot::new(nodes, tree, jobs))
    }

    fn moved() -> Decisions {
        Decisions {
            moves: vec![Move {
                job: JobId("ml/eval-0".into()),
                for_job: JobId("ml/train".into()),
                pods: vec![MovedPod {
                    task: TaskKey {
                        namespace: "ml".into(),
                        name: "eval-0".into(),
                        uid: String::new(),
                    },
                    from: NodeName("n1".into()),
                    to: NodeName("n2".into()),
                    gpus: vec![2, 3],
                }],
                message: String::new(),
            }],
            ..Decisions::default()
        }
    }

    /// Before the replacement comes its room is held by a placeholder; a
    /// pending replacement is nominated onto it; once bound there the plan
    /// ends; the controller's jobs stay marked moved for the period.
    #[test]
    fn the_planned_room_is_held_until_the_replacement_is_bound_there() {
        let mut m = Moves::default();
        let before = snapshot(vec![pod("eval-0", "eval", Some(("n1", vec![0, 1])))]);
        m.record(&before, &moved(), Timestamp(1_000));
        assert_eq!(m.open(), 1);

        // The old pod is terminating; no replacement yet.
        let (s, held) = m.hold(before.clone(), Timestamp(5_000), 300, 3_600);
        assert_eq!((held.placeholders, held.nominated), (1, 0));
        let hold = &s.external[0];
        assert_eq!(
            (hold.node.as_str(), hold.gpus.clone(), hold.requests.gpu),
            ("n2", Some(vec![2, 3]), 2000)
        );
        assert_eq!(s.jobs[0].moved_at, Some(Timestamp(1_000)));

        // The replacement is pending: nominated onto the slot.
        let (s, held) = m.hold(
            snapshot(vec![pod("eval-x7k", "eval", None)]),
            Timestamp(9_000),
            300,
            3_600,
        );
        assert_eq!((held.placeholders, held.nominated), (0, 1));
        let nom = s.jobs[0].tasks[0].nomination.clone().expect("nominated");
        assert_eq!((nom.node.as_str(), nom.gpus), ("n2", Some(vec![2, 3])));
        assert!(s.external.is_empty());

        // Bound there: the plan ends, the job stays marked moved.
        let (s, held) = m.hold(
            snapshot(vec![pod("eval-x7k", "eval", Some(("n2", vec![2, 3])))]),
            Timestamp(12_000),
            300,
            3_600,
        );
        assert_eq!(held, Held::default());
        assert_eq!(m.open(), 0);
        assert_eq!(s.jobs[0].moved_at, Some(Timestamp(1_000)));
        // After the period, not any more.
        let (s, _) = m.hold(
            snapshot(vec![pod("eval-x7k", "eval", Some(("n2", vec![2, 3])))]),
            Timestamp(1_000 + 3_600_000),
            300,
            3_600,
        );
        assert_eq!(s.jobs[0].moved_at, None);
    }

    /// Through the core: scenario 83's move (eval-a-0 from n1 to n2 for
    /// train), then the cycles after it. While eval-a-0 terminates and
    /// before its replacement exists, a 6-GPU pod that would fit n2 only
    /// on the planned devices does not get them; the replacement, when it
    /// comes, is bound on them; then the hold ends.
    #[test]
    fn through_the_core_the_replacement_gets_the_planned_devices() {
        let nodes = "apiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {name: team}\nspec: {}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '96', memory: 1Ti, pods: '110', nvidia.com/gpu: '8'}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n2}\nstatus: {allocatable: {cpu: '96', memory: 1Ti, pods: '110', nvidia.com/gpu: '8'}}\n";
        let running = |name: &str, rs: &str, node: &str, gpus: &str, extra: &str| {
            format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml, labels: {{trainyard.io/queue: team}}, annotations: {{trainyard.io/gpu-indices: '{gpus}'}}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: {rs}, uid: u-{rs}, controller: true}}]{extra}}}\nspec: {{schedulerName: trainyard, nodeName: {node}, containers: [{{name: c, resources: {{requests: {{cpu: '4', nvidia.com/gpu: '2'}}}}}}]}}\nstatus: {{phase: Running, startTime: '2027-01-15T07:00:00Z'}}\n"
            )
        };
        let pending = |name: &str, rs: Option<&str>, gpus: u32| {
            let owner = rs.map_or(String::new(), |rs| format!(", ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: {rs}, uid: u-{rs}, controller: true}}]"));
            format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml, labels: {{trainyard.io/queue: team}}, creationTimestamp: '2027-01-15T07:50:00Z'{owner}}}\nspec: {{schedulerName: trainyard, containers: [{{name: c, resources: {{requests: {{cpu: '4', nvidia.com/gpu: '{gpus}'}}}}}}]}}\n"
            )
        };
        let load = |text: &str| {
            trainyard_ingest::load(
                &[trainyard_ingest::Source::new("t.yaml", text)],
                &trainyard_ingest::LoadOptions::default(),
            )
            .expect("loads")
            .snapshot
        };
        let mut cfg = trainyard_sched::Config::default();
        cfg.consolidation.enabled = true;
        let t0 = Timestamp::from_secs(1_800_000_000);
        let later = |s: i64| Timestamp(t0.0 + s * 1000);
        let mut m = Moves::default();

        // The move: eval-a (younger) from n1 to n2, for train.
        let first = load(&format!(
            "{nodes}{}{}{}",
            running("eval-a-0", "eval-a", "n1", "0,1", ""),
            running("eval-b-0", "eval-b", "n2", "0,1", ""),
            pending("train", None, 8)
        ));
        let first = Arc::new(first);
        let (s, _) = m.hold(first.clone(), t0, 300, 3_600);
        let d = trainyard_sched::schedule(&s, &cfg, t0);
        assert_eq!(d.moves.len(), 1, "{:?}", d.pending);
        let planned = d.moves[0].pods[0].gpus.clone();
        assert_eq!(d.moves[0].pods[0].to.as_str(), "n2");
        m.record(&s, &d, t0);

        // eval-a-0 is gone, no replacement yet; a 6-GPU pod asks. n2 has
        // 6 free GPUs, but 2 of them are held: it does not fit there.
        let gap = load(&format!(
            "{nodes}{}{}",
            running("eval-b-0", "eval-b", "n2", "0,1", ""),
            pending("greedy", None, 6)
        ));
        let (s, held) = m.hold(Arc::new(gap), later(40), 300, 3_600);
        assert_eq!(held.placeholders, 1);
        let d = trainyard_sched::schedule(&s, &cfg, later(40));
        let on_n2: Vec<&trainyard_sched::Bind> =
            d.binds.iter().filter(|b| b.node.as_str() == "n2").collect();
        assert!(on_n2.is_empty(), "nothing takes n2's held GPUs: {on_n2:?}");

        // The replacement comes: bound on the planned devices.
        let back = load(&format!(
            "{nodes}{}{}",
            running("eval-b-0", "eval-b", "n2", "0,1", ""),
            pending("eval-a-x7k", Some("eval-a"), 2)
        ));
        let (s, held) = m.hold(Arc::new(back), later(50), 300, 3_600);
        assert_eq!((held.placeholders, held.nominated), (0, 1));
        let d = trainyard_sched::schedule(&s, &cfg, later(50));
        let b = d
            .binds
            .iter()
            .find(|b| b.task.name == "eval-a-x7k")
            .expect("the replacement is bound");
        assert_eq!((b.node.as_str(), b.gpus.clone()), ("n2", planned.clone()));

        // Bound there: the plan ends, and the job is not moved again.
        let idx = planned
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let after = load(&format!(
            "{nodes}{}{}{}",
            running("eval-b-0", "eval-b", "n2", "0,1", ""),
            running("eval-a-x7k", "eval-a", "n2", &idx, ""),
            pending("train2", None, 8)
        ));
        let (s, held) = m.hold(Arc::new(after), later(60), 300, 3_600);
        assert_eq!(held, Held::default());
        assert_eq!(m.open(), 0);
        let moved_at = s
            .jobs
            .iter()
            .find(|j| j.id.contains("eval-a-x7k"))
            .and_then(|j| j.moved_at);
        assert_eq!(moved_at, Some(t0));
    }

    /// A replacement that does not come within the timeout loses the hold;
    /// another controller's pods are not taken for it.
    #[test]
    fn a_hold_ends_after_the_timeout_and_claims_only_its_controller() {
        let mut m = Moves::default();
        let before = snapshot(vec![pod("eval-0", "eval", Some(("n1", vec![0, 1])))]);
        m.record(&before, &moved(), Timestamp(1_000));
        let other = snapshot(vec![pod("web-1", "web", None)]);
        let (s, held) = m.hold(other.clone(), Timestamp(2_000), 300, 3_600);
        assert_eq!((held.placeholders, held.nominated), (1, 0));
        assert!(s.jobs[0].tasks[0].nomination.is_none());
        let (s, held) = m.hold(other, Timestamp(301_000), 300, 3_600);
        assert_eq!(held.expired, vec!["ml/eval-0".to_string()]);
        assert!(s.external.is_empty());
        assert_eq!(m.open(), 0);
    }

    /// A replacement with the moved pod's own name (a StatefulSet's, the
    /// simulator's restarted task) claims the slot once it is pending or
    /// bound after the move; the moved pod itself never does.
    #[test]
    fn a_replacement_with_the_same_name_claims_the_slot() {
        let mut m = Moves::default();
        let before = snapshot(vec![pod("eval-0", "eval", Some(("n1", vec![0, 1])))]);
        m.record(&before, &moved(), Timestamp(1_000));
        // Still running where it was (the eviction not done yet): held.
        let (_, held) = m.hold(before.clone(), Timestamp(2_000), 300, 3_600);
        assert_eq!((held.placeholders, held.nominated), (1, 0));
        // Gone and back, pending, with the same name: nominated.
        let (s, held) = m.hold(
            snapshot(vec![pod("eval-0", "eval", None)]),
            Timestamp(3_000),
            300,
            3_600,
        );
        assert_eq!((held.placeholders, held.nominated), (0, 1));
        assert!(s.jobs[0].tasks[0].nomination.is_some());
        // Bound on the slot since after the move: the plan ends.
        let mut back = pod("eval-0", "eval", Some(("n2", vec![2, 3])));
        back.tasks[0].started = Some(Timestamp(4_000));
        let (_, held) = m.hold(snapshot(vec![back]), Timestamp(5_000), 300, 3_600);
        assert_eq!(held, Held::default());
        assert_eq!(m.open(), 0);
    }
}
