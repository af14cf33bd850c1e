//! Placement under rules between pods (`crate::podrules`): which tasks
//! pay for them, and the node search for those, one pod at a time.
//!
//! A task is checked when the cycle has any rule and the task has rules
//! of its own or another pod's term selects it. Such a task is placed by
//! scoring every feasible node again for each pod (the counts its rules
//! read change with every placement, anywhere in a domain), through the
//! same evaluation as every other pod plus the pod predicates and scorers
//! of [`crate::plugins`]. Every placement lists the pod on its node
//! (`NodeState::members`), inside the open transaction, so later pods of
//! the gang and of the cycle see it, and a rollback takes it away.

use super::place::Search;
use super::*;
use crate::podrules::PodCheck;

impl World<'_> {
    /// Member id of task `t` of job `j`, when the cycle checks rules.
    pub(super) fn member_of(&self, j: usize, t: usize) -> Option<u32> {
        self.rules.as_ref()?;
        self.member_base.get(j).map(|b| b + t as u32)
    }

    /// Whether placing task `t` of job `j` must check rules between pods.
    pub(super) fn affected(&self, j: usize, t: usize) -> bool {
        match (&self.rules, self.member_of(j, t)) {
            (Some(ix), Some(m)) => ix.affected(m),
            _ => false,
        }
    }

    /// The placement view of task `t` of job `j`, listed on its node when
    /// taken (the ledger's gives and takes of placed tasks use it; the node
    /// search sets the member itself).
    pub(super) fn pod_of<'t>(&self, job: &'t Job, j: usize, t: usize) -> PodView<'t> {
        let mut pod = PodView::of_task(&job.tasks[t]);
        pod.member = self.member_of(j, t);
        pod
    }

    /// The counts the rules of task `t` of job `j` read, on `state`.
    fn pod_check(
        &self,
        job: &Job,
        j: usize,
        t: usize,
        state: &ClusterState,
    ) -> Option<PodCheck<'_, '_>> {
        let ix = self.rules.as_ref()?;
        let pod = ix.member(self.member_of(j, t)?)?;
        Some(PodCheck::new(
            ix,
            pod,
            &job.tasks[t].constraints,
            &self.nodes,
            state,
        ))
    }

    /// The first pod predicate node `n` fails for the pod of `check`.
    fn pod_filter(
        &self,
        check: &PodCheck,
        state: &ClusterState,
        n: usize,
    ) -> Result<(), FilterReason> {
        self.pod_predicates
            .iter()
            .try_for_each(|p| p.filter(check, state, n))
    }
}

impl Search<'_, '_> {
    /// Whether any task of `run` (of job `j`) must check rules.
    pub(super) fn run_is_ruled(&self, run: &[usize], j: usize) -> bool {
        self.w.rules.is_some() && run.iter().any(|&t| self.w.affected(j, t))
    }

    /// `place_run` under rules between pods: for each pod, every feasible
    /// node (of `scope`, when given) is evaluated, filtered by the pod
    /// predicates, and scored with the pod scorers added; the best takes
    /// the pod. On failure returns the position in `run` that did not fit.
    pub(super) fn place_ruled(
        &mut self,
        (run, j): (&[usize], usize),
        placed: &mut Vec<Placed>,
        scope: Option<&[usize]>,
        rail: Option<&topo::RailPlan>,
        key: u32,
        ask: GpuAsk,
    ) -> Result<(), usize> {
        let job = self.l.jobs[j].job;
        let nodes: Vec<usize> = match (scope, self.m.filters.get(&key)) {
            (_, None) => Vec::new(),
            (None, Some(f)) => f.feasible.iter().map(|&n| n as usize).collect(),
            (Some(s), Some(f)) => s.iter().copied().filter(|&n| f.mask[n]).collect(),
        };
        for (pos, &t) in run.iter().enumerate() {
            let task = &job.tasks[t];
            let mut pod = PodView::new(&task.requests, ask, &task.constraints);
            pod.salt = crate::scoring::salt_of(&task.name);
            pod.member = self.w.member_of(j, t);
            pod.ends = self.l.ends_of(j);
            let w = self.w;
            let state = &self.l.state;
            let check = w.pod_check(job, j, t, state);
            let mut cands: Vec<(usize, crate::scoring::Evaluation)> = Vec::new();
            for &n in &nodes {
                let Some(e) = w.scoring.evaluate(w.nodes[n], &state.nodes()[n], &pod) else {
                    continue;
                };
                if let Some(c) = &check
                    && w.pod_filter(c, state, n).is_err()
                {
                    continue;
                }
                cands.push((n, e));
            }
            if let Some(c) = &check {
                let mut rule = vec![0u64; cands.len()];
                for s in w.pod_scorers.iter().filter(|s| s.applies(c)) {
                    let raws: Vec<Option<i64>> = cands.iter().map(|(n, _)| s.raw(c, *n)).collect();
                    let min = raws.iter().flatten().copied().min().unwrap_or(0);
                    let max = raws.iter().flatten().copied().max().unwrap_or(0);
                    for (r, raw) in rule.iter_mut().zip(&raws) {
                        *r += s.normalize(*raw, min, max);
                    }
                }
                for ((_, e), r) in cands.iter_mut().zip(rule) {
                    *e = w.scoring.with_pod_rules(*e, r);
                }
            }
            let window_rank = |n: usize| -> Reverse<usize> {
                match rail {
                    Some(plan) if plan.node_pref => Reverse(
                        plan.window_on(w.nodes[n], &state.nodes()[n], &pod)
                            .unwrap_or(usize::MAX),
                    ),
                    _ => Reverse(0),
                }
            };
            let best = cands
                .iter()
                .max_by_key(|(n, e)| (window_rank(*n), e.total, e.tiebreak, Reverse(*n)))
                .map(|(n, e)| (*n, e.devices));
            let Some((n, devices)) = best else {
                return Err(pos);
            };
            let slots = self.l.slots_for(self.w, n, devices, &pod, rail);
            self.l.state.take(n, self.w.nodes[n], &pod, &slots);
            placed.push((t, n, slots.into()));
        }
        Ok(())
    }

    /// `diagnose` for task `t` of job `j` under rules: nodes that fit by
    /// capacity are checked by the pod predicates too.
    pub(super) fn diagnose_task(
        &mut self,
        j: usize,
        t: usize,
    ) -> (u32, BTreeMap<FilterReason, u32>) {
        let job = self.l.jobs[j].job;
        let task = &job.tasks[t];
        if !self.w.affected(j, t) {
            return self.diagnose(&task.requests, &task.constraints, self.l.ends_of(j));
        }
        let key = self.m.static_filter(self.w, &task.constraints);
        let ask = GpuAsk::of(&task.requests, &task.constraints).unwrap_or(GpuAsk::None);
        let mut pod = PodView::new(&task.requests, ask, &task.constraints);
        pod.ends = self.l.ends_of(j);
        let (feasible, mut reasons) = match self.m.filters.get(&key) {
            Some(f) => (f.feasible.clone(), f.rejected.clone()),
            None => (Vec::new(), BTreeMap::new()),
        };
        let state = &self.l.state;
        let check = self.w.pod_check(job, j, t, state);
        let mut fit = 0;
        for n in feasible {
            let n = n as usize;
            let r = state.nodes()[n]
                .fit(self.w.nodes[n], &pod)
                .and_then(|()| match &check {
                    Some(c) => self.w.pod_filter(c, state, n),
                    None => Ok(()),
                });
            match r {
                Ok(()) => fit += 1,
                Err(r) => *reasons.entry(r).or_default() += 1,
            }
        }
        (fit, reasons)
    }
}
