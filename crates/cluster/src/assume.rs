//! Decisions assumed until the world confirms them, and the writes owed.

mod claims;

use std::collections::BTreeMap;
use std::sync::Arc;

use trainyard_model::{Job, Nomination, Task, TaskKey, TaskState, Timestamp};
use trainyard_sched::{Bind, Decisions, Eviction, NominationDecision, Withdrawal};

use crate::ClusterState;

pub use claims::{ClaimAssumption, ClaimWrite};
pub(crate) use claims::{ClaimsAssumed, put_back};

/// The pod of a write that names none (a claim write with no pods, which
/// the core never decides).
static NO_TASK: TaskKey = TaskKey {
    namespace: String::new(),
    name: String::new(),
    uid: String::new(),
};

/// What an assumed decision does to its task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Bound to `node` on devices `gpus`, started at the assumption's time.
    Bind { node: String, gpus: Vec<u32> },
    /// Terminating: it keeps its capacity until it is gone.
    Evict,
    /// Room on `node` (and devices `gpus`) reserved for the pending task.
    Nominate { node: String, gpus: Vec<u32> },
    /// The pending task's nomination is withdrawn: it names no node.
    Withdraw,
}

/// One decision laid over the world until confirmed or forgotten.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assumption {
    pub task: TaskKey,
    /// When it was assumed.
    pub at: Timestamp,
    pub effect: Effect,
    /// The API accepted its write: it is kept until the world shows it or
    /// the task is gone, whatever its age ([`ClusterState::write_landed`]).
    pub landed: bool,
}

/// A write the I/O edge owes the world for an assumed decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    Bind(Bind),
    Evict(Eviction),
    Nominate(NominationDecision),
    /// Clear the pod's `status.nominatedNodeName`.
    Withdraw(Withdrawal),
    /// Allocate a DRA claim (or reserve it) for pods before their binds.
    Claim(ClaimWrite),
}

impl Effect {
    /// A nomination or its withdrawal: what the task's nominated node is.
    fn names_node(&self) -> bool {
        matches!(self, Effect::Nominate { .. } | Effect::Withdraw)
    }
}

impl Write {
    /// The job and pod written.
    pub fn target(&self) -> (&str, &TaskKey) {
        match self {
            Write::Bind(b) => (b.job.as_str(), &b.task),
            Write::Evict(e) => (e.job.as_str(), &e.task),
            Write::Nominate(n) => (n.job.as_str(), &n.task),
            Write::Withdraw(w) => (w.job.as_str(), &w.task),
            Write::Claim(c) => (c.job.as_str(), c.pods.first().unwrap_or(&NO_TASK)),
        }
    }

    /// The pod written (a claim write: its first pod).
    pub fn task(&self) -> &TaskKey {
        match self {
            Write::Bind(b) => &b.task,
            Write::Evict(e) => &e.task,
            Write::Nominate(n) => &n.task,
            Write::Withdraw(w) => &w.task,
            Write::Claim(c) => c.pods.first().unwrap_or(&NO_TASK),
        }
    }

    fn is_for(&self, job: &str, a: &Assumption) -> bool {
        match (self, &a.effect) {
            (Write::Bind(b), Effect::Bind { .. }) => b.job == job && b.task == a.task,
            (Write::Evict(e), Effect::Evict) => e.job == job && e.task == a.task,
            (Write::Nominate(n), Effect::Nominate { .. }) => n.job == job && n.task == a.task,
            (Write::Withdraw(w), Effect::Withdraw) => w.job == job && w.task == a.task,
            _ => false,
        }
    }
}

/// Which decisions of one [`ClusterState::assume`] took effect, by index
/// into the decisions' vectors. A decision about an unknown task, a bind
/// of a task that is not pending, an eviction of a pending or terminating
/// task, or a nomination or withdrawal of a task that is not pending does
/// not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub binds: Vec<usize>,
    pub evictions: Vec<usize>,
    pub nominations: Vec<usize>,
    pub withdrawals: Vec<usize>,
}

/// Sets `effect` on `t`, as of time `at`.
fn set(t: &mut Task, effect: &Effect, at: Timestamp) {
    match effect {
        Effect::Bind { node, gpus } => {
            t.state = TaskState::Bound {
                node: node.clone(),
                gpus: Some(gpus.clone()),
            };
            t.started = Some(at);
            t.nomination = None;
        }
        Effect::Evict => t.terminating = true,
        Effect::Nominate { node, gpus } => {
            // A nomination keeps the time it was first made on its node.
            if t.nomination.as_ref().is_none_or(|n| n.node != *node) {
                t.nomination = Some(Nomination {
                    node: node.clone(),
                    since: at,
                    gpus: Some(gpus.clone()),
                });
            }
        }
        Effect::Withdraw => t.nomination = None,
    }
}

/// Whether the world's task `t` shows the assumption's effect (confirmed)
/// or made it moot; either way the assumption is dropped.
fn settled(t: &Task, effect: &Effect) -> bool {
    match effect {
        // Bound anywhere: the world decided (on our node: confirmed).
        Effect::Bind { .. } => !t.is_pending(),
        Effect::Evict => t.is_pending() || t.terminating,
        Effect::Nominate { node, .. } => {
            !t.is_pending() || t.nomination.as_ref().is_some_and(|n| n.node == *node)
        }
        Effect::Withdraw => !t.is_pending() || t.nomination.is_none(),
    }
}

/// Whether `t` already shows the effect: a nomination on the same node,
/// or none to withdraw.
fn already(t: &Task, effect: &Effect) -> bool {
    match effect {
        Effect::Nominate { node, .. } => t.nomination.as_ref().is_some_and(|n| n.node == *node),
        Effect::Withdraw => t.nomination.is_none(),
        _ => false,
    }
}

/// Whether the assumption still applies to the view's task `t`.
fn applies(t: &Task, effect: &Effect) -> bool {
    match effect {
        Effect::Bind { .. } | Effect::Nominate { .. } | Effect::Withdraw => t.is_pending(),
        Effect::Evict => !t.is_pending() && !t.terminating,
    }
}

impl ClusterState {
    /// Lays the cycle's decisions over the world (binds, then evictions,
    /// then nominations, then withdrawals) and records the writes they owe.
    /// Returns which took effect.
    pub fn assume(&mut self, d: &Decisions, now: Timestamp) -> Applied {
        let mut applied = Applied::default();
        // Writes owed before this cycle's: only those may be replaced.
        let owed_from = self.writes.len();
        // The touched jobs as this cycle's decisions leave them, each
        // copied once, so a decision sees the ones before it.
        let mut work: BTreeMap<String, (Job, Vec<Assumption>)> = BTreeMap::new();
        // `Some(owed)` when the decision takes effect: `owed` when it is
        // assumed (and owes a write), not when the task already shows it.
        let mut add =
            |s: &ClusterState, job: &str, task: &TaskKey, effect: Effect| -> Option<bool> {
                let (k, _) = s.task(job, task)?;
                if !work.contains_key(job) {
                    let current = s.job(job)?;
                    work.insert(job.to_string(), (current.clone(), Vec::new()));
                }
                let (j, list) = work.get_mut(job)?;
                if !applies(&j.tasks[k], &effect) {
                    return None;
                }
                if already(&j.tasks[k], &effect) {
                    // A nomination already on that node keeps its time: nothing
                    // to assume, nothing owed, but it counts as taken.
                    return Some(false);
                }
                set(&mut j.tasks[k], &effect, now);
                list.push(Assumption {
                    task: task.clone(),
                    at: now,
                    effect,
                    landed: false,
                });
                Some(true)
            };
        for (i, b) in d.binds.iter().enumerate() {
            let effect = Effect::Bind {
                node: b.node.0.clone(),
                gpus: b.gpus.clone(),
            };
            if add(self, b.job.as_str(), &b.task, effect).is_some() {
                self.writes.push(Write::Bind(b.clone()));
                applied.binds.push(i);
            }
        }
        self.assume_claims(d, &applied.binds, now);
        for (i, e) in d.evictions.iter().enumerate() {
            if add(self, e.job.as_str(), &e.task, Effect::Evict).is_some() {
                self.writes.push(Write::Evict(e.clone()));
                self.mark_evicted(e.job.as_str());
                applied.evictions.push(i);
            }
        }
        for (i, n) in d.nominations.iter().enumerate() {
            let effect = Effect::Nominate {
                node: n.node.0.clone(),
                gpus: n.gpus.clone(),
            };
            if let Some(owed) = add(self, n.job.as_str(), &n.task, effect) {
                if owed {
                    self.writes.push(Write::Nominate(n.clone()));
                }
                applied.nominations.push(i);
            }
        }
        for (i, w) in d.withdrawals.iter().enumerate() {
            if let Some(owed) = add(self, w.job.as_str(), &w.task, Effect::Withdraw) {
                if owed {
                    self.writes.push(Write::Withdraw(w.clone()));
                }
                applied.withdrawals.push(i);
            }
        }
        for (id, (job, list)) in work {
            let earlier = self.assumed.entry(id.clone()).or_default();
            // A nomination or withdrawal replaces an earlier one of the same
            // task not yet confirmed, with its write if still owed: the
            // world's state confirms only the latest (an echo that still
            // shows no nomination would otherwise settle a withdrawal laid
            // over an unconfirmed nomination, and bring the nomination back).
            let replaced: Vec<Assumption> = {
                let (gone, keep): (Vec<Assumption>, Vec<Assumption>) =
                    std::mem::take(earlier).into_iter().partition(|a| {
                        a.effect.names_node()
                            && list
                                .iter()
                                .any(|b| b.effect.names_node() && b.task == a.task)
                    });
                *earlier = keep;
                gone
            };
            earlier.extend(list);
            let new_writes = self.writes.split_off(owed_from);
            self.writes
                .retain(|w| !replaced.iter().any(|a| w.is_for(&id, a)));
            self.writes.extend(new_writes);
            self.views.insert(id.clone(), Arc::new(job));
            self.touch(&id);
            self.note_nominations(&id);
        }
        applied
    }

    /// The decisions done at once by a world that is its own API server
    /// (the simulator): each takes effect on the world's job by the rules of
    /// [`ClusterState::assume`] (binds, then evictions, then nominations,
    /// then withdrawals),
    /// with nothing assumed and no write owed. Returns which took effect.
    pub fn apply_decisions(&mut self, d: &Decisions, now: Timestamp) -> Applied {
        let mut applied = Applied::default();
        let mut touched: Vec<&str> = Vec::new();
        let take = |s: &mut ClusterState, job: &str, task: &TaskKey, effect: &Effect| {
            let (Some(world), Some(pos)) = (s.jobs.get_mut(job), s.task_pos.get(job)) else {
                return false;
            };
            let Some(k) = pos.get(world, task) else {
                return false;
            };
            if !applies(&world.tasks[k], effect) {
                return false;
            }
            set(&mut Arc::make_mut(world).tasks[k], effect, now);
            true
        };
        for (i, b) in d.binds.iter().enumerate() {
            let effect = Effect::Bind {
                node: b.node.0.clone(),
                gpus: b.gpus.clone(),
            };
            if take(self, b.job.as_str(), &b.task, &effect) {
                applied.binds.push(i);
                touched.push(b.job.as_str());
            }
        }
        for (i, e) in d.evictions.iter().enumerate() {
            if take(self, e.job.as_str(), &e.task, &Effect::Evict) {
                self.mark_evicted(e.job.as_str());
                applied.evictions.push(i);
                touched.push(e.job.as_str());
            }
        }
        for (i, n) in d.nominations.iter().enumerate() {
            let effect = Effect::Nominate {
                node: n.node.0.clone(),
                gpus: n.gpus.clone(),
            };
            // A pending task keeps the time of a nomination already on
            // that node (`set` leaves it); it counts as taken either way.
            if take(self, n.job.as_str(), &n.task, &effect) {
                applied.nominations.push(i);
                touched.push(n.job.as_str());
            }
        }
        for (i, w) in d.withdrawals.iter().enumerate() {
            if take(self, w.job.as_str(), &w.task, &Effect::Withdraw) {
                applied.withdrawals.push(i);
                touched.push(w.job.as_str());
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for id in touched {
            self.reconcile(id);
        }
        applied
    }

    /// The writes owed, in decision order.
    pub fn writes(&self) -> &[Write] {
        &self.writes
    }

    /// Hands the owed writes to the I/O edge. Their assumptions stay until
    /// the world confirms them or they are forgotten.
    pub fn take_writes(&mut self) -> Vec<Write> {
        std::mem::take(&mut self.writes)
    }

    /// The world did everything assumed, at once (the simulator, which is
    /// its own API server): every view becomes the world's job.
    pub fn confirm_assumed(&mut self) {
        for (id, view) in std::mem::take(&mut self.views) {
            self.touch(&id);
            self.jobs.insert(id.clone(), view);
            // A withdrawal leaves the job without nominations now.
            self.note_nominations(&id);
        }
        self.assumed.clear();
    }

    /// Drops assumptions made before `older_than` that the world never
    /// confirmed (a bind that failed, an eviction never seen), with the
    /// writes still owed for them. Returns them, by job.
    pub fn forget_assumed(&mut self, older_than: Timestamp) -> Vec<(String, Assumption)> {
        let old_claims = self
            .claims_assumed()
            .map(|c| c.forget_older(older_than))
            .unwrap_or_default();
        self.writes.retain(|w| match w {
            Write::Claim(c) => !old_claims.iter().any(|a| a.write == *c),
            _ => true,
        });
        let mut gone = Vec::new();
        let ids: Vec<String> = self.assumed.keys().cloned().collect();
        for id in ids {
            let Some(list) = self.assumed.get_mut(&id) else {
                continue;
            };
            let (old, keep): (Vec<Assumption>, Vec<Assumption>) =
                list.drain(..).partition(|a| a.at < older_than && !a.landed);
            *list = keep;
            if old.is_empty() {
                continue;
            }
            self.writes
                .retain(|w| !old.iter().any(|a| w.is_for(&id, a)));
            // A bind that never happened is no run of the job's own.
            if old.iter().any(|a| matches!(a.effect, Effect::Bind { .. })) {
                self.mark_evicted(&id);
            }
            gone.extend(old.into_iter().map(|a| (id.clone(), a)));
            self.rebuild_view(&id);
            self.note_nominations(&id);
        }
        gone
    }

    /// The API accepted `write`: its assumption is kept until the world
    /// shows it (or the task is gone), however long the watch takes, as
    /// kube-scheduler keeps an assumed pod whose binding finished. Forgetting
    /// it for its age would show the pod pending and its room free while
    /// the pod holds it (`forget_assumed`). True when there was one.
    pub fn write_landed(&mut self, write: &Write) -> bool {
        if let Write::Claim(c) = write {
            return self
                .claims_assumed()
                .is_some_and(|a| a.update(c, |a| a.landed = true));
        }
        self.update_assumption(write, |a| a.landed = true)
    }

    /// `write` failed without saying whether it took effect (no answer, a
    /// 504): its assumption stays, aged from `now`, so the world has the
    /// assume timeout to show what happened before its room is given to
    /// anyone else. True when there was one.
    pub fn write_uncertain(&mut self, write: &Write, now: Timestamp) -> bool {
        if let Write::Claim(c) = write {
            return self
                .claims_assumed()
                .is_some_and(|a| a.update(c, |a| a.at = a.at.max(now)));
        }
        self.update_assumption(write, |a| a.at = a.at.max(now))
    }

    /// Applies `f` to the assumption behind `write`; whether there was one.
    fn update_assumption(&mut self, write: &Write, f: impl Fn(&mut Assumption)) -> bool {
        let (job, task) = write.target();
        let Some(list) = self.assumed.get_mut(job) else {
            return false;
        };
        let mut found = false;
        for a in list
            .iter_mut()
            .filter(|a| a.task == *task && write.is_for(job, a))
        {
            f(a);
            found = true;
        }
        found
    }

    /// Drops the assumption behind `write`, which failed (the pod was
    /// deleted, its node is gone, the API refused): the world will not show
    /// it, so the next snapshot has the task as the world has it and the
    /// next cycle decides again. True when there was one.
    pub fn forget_write(&mut self, write: &Write) -> bool {
        if let Write::Claim(c) = write {
            return self.claims_assumed().is_some_and(|a| a.forget(c));
        }
        let (job, task) = write.target();
        let Some(list) = self.assumed.get_mut(job) else {
            return false;
        };
        let before = list.len();
        list.retain(|a| !(a.task == *task && write.is_for(job, a)));
        if list.len() == before {
            return false;
        }
        // A bind that never happened is no run of the job's own.
        if matches!(write, Write::Bind(_)) {
            self.mark_evicted(job);
        }
        self.rebuild_view(job);
        self.note_nominations(job);
        true
    }

    /// Assumptions not yet confirmed, by job id.
    pub fn assumed(&self) -> impl Iterator<Item = (&str, &Assumption)> {
        self.assumed
            .iter()
            .flat_map(|(id, l)| l.iter().map(move |a| (id.as_str(), a)))
    }

    /// After the world's job `id` changed: drops the assumptions its new
    /// state confirms or makes moot, and lays the rest over it again.
    pub(crate) fn reconcile(&mut self, id: &str) {
        if let (Some(list), Some(world)) = (self.assumed.get_mut(id), self.jobs.get(id)) {
            let pos = self.task_pos.get(id);
            // Each assumption is judged on the task as the world shows it
            // with the earlier ones kept laid over it: an eviction decided
            // for a pod whose bind has not landed yet is not moot because
            // the world still shows the pod pending (dropped, it would be
            // decided again every cycle, its writes queued again and again).
            let mut tasks = world.tasks.clone();
            list.retain(|a| {
                let Some(k) = pos.and_then(|p| p.get(world, &a.task)) else {
                    return false;
                };
                if settled(&tasks[k], &a.effect) {
                    return false;
                }
                if applies(&tasks[k], &a.effect) {
                    set(&mut tasks[k], &a.effect, a.at);
                }
                true
            });
        }
        self.rebuild_view(id);
        self.note_nominations(id);
    }

    /// The view of job `id`: the world's job with its assumptions laid over
    /// it in order; none when it has none.
    fn rebuild_view(&mut self, id: &str) {
        // Every change of a job's world state or view ends here.
        self.touch(id);
        let list = match self.assumed.get(id) {
            Some(l) if !l.is_empty() => l,
            _ => {
                self.assumed.remove(id);
                self.views.remove(id);
                return;
            }
        };
        let (Some(world), Some(pos)) = (self.jobs.get(id), self.task_pos.get(id)) else {
            return;
        };
        let mut job: Job = (**world).clone();
        for a in list {
            if let Some(k) = pos.get(world, &a.task)
                && applies(&job.tasks[k], &a.effect)
            {
                set(&mut job.tasks[k], &a.effect, a.at);
            }
        }
        self.views.insert(id.to_string(), Arc::new(job));
    }

    /// Keeps the set of jobs with nominations current for job `id`.
    fn note_nominations(&mut self, id: &str) {
        // The world's too: a withdrawal assumed in the view leaves the
        // world's nomination to expire until the world shows it gone.
        let has = |j: Option<&Arc<Job>>| {
            j.is_some_and(|j| j.tasks.iter().any(|t| t.nomination.is_some()))
        };
        if has(self.views.get(id)) || has(self.jobs.get(id)) {
            self.nominated.insert(id.to_string());
        } else {
            self.nominated.remove(id);
        }
    }

    /// Clears nominations as old as `timeout_seconds`, or whose task is no
    /// longer pending (the core ignores them from then on), in the world
    /// and among the assumptions.
    pub fn expire_nominations(&mut self, now: Timestamp, timeout_seconds: u64) {
        let live = |t: &Task| {
            t.nomination
                .as_ref()
                .is_some_and(|n| t.is_pending() && now.secs_since(n.since) < timeout_seconds)
        };
        let ids: Vec<String> = self.nominated.iter().cloned().collect();
        for id in ids {
            if let Some(job) = self.jobs.get_mut(&id)
                && job.tasks.iter().any(|t| t.nomination.is_some() && !live(t))
            {
                for t in &mut Arc::make_mut(job).tasks {
                    if t.nomination.is_some() && !live(t) {
                        t.nomination = None;
                    }
                }
            }
            if let Some(list) = self.assumed.get_mut(&id) {
                let pos = self.task_pos.get(&id);
                let view = self.views.get(&id);
                list.retain(|a| match &a.effect {
                    Effect::Nominate { .. } => {
                        let t = view
                            .and_then(|v| pos.and_then(|p| p.get(v, &a.task)).map(|k| &v.tasks[k]));
                        t.is_some_and(&live)
                    }
                    _ => true,
                });
            }
            self.rebuild_view(&id);
            self.note_nominations(&id);
        }
    }
}
