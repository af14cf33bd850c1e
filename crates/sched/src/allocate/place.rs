//! The one node search: static filters per constraint set, then the
//! best nodes for a run of identical pods (by the per-shape ranking or a
//! scan), and the reason when none fits.

use super::*;

/// The node search's view of the cycle: what it reads (the world) and
/// what it changes (the ledger and the caches), borrowed for one search.
pub(super) struct Search<'a, 's> {
    pub(super) w: &'a World<'s>,
    pub(super) l: &'a mut Ledger<'s>,
    pub(super) m: &'a mut Memo,
}

impl<'s> Cycle<'s> {
    /// The node search over this cycle's parts.
    pub(super) fn search(&mut self) -> Search<'_, 's> {
        Search {
            w: &self.world,
            l: &mut self.ledger,
            m: &mut self.memo,
        }
    }
}

impl Search<'_, '_> {
    /// Places identical tasks `run` (indices into `job.tasks`) one by one on
    /// the best node by [`Scoring::evaluate`]. Nodes are scored once; after
    /// each placement only the changed node is re-scored (scores depend on
    /// the node alone). On failure returns the position in `run` that did not
    /// fit (earlier ones stay in `placed` and in the state; the caller rolls
    /// back or keeps them).
    pub(super) fn place_run(
        &mut self,
        run: &[usize],
        j: usize,
        placed: &mut Vec<Placed>,
        scope: Option<&[usize]>,
        rail: Option<&topo::RailPlan>,
    ) -> Result<(), usize> {
        let job = self.l.jobs[j].job;
        let head = &job.tasks[run[0]];
        // A claim shared by pods and not allocated before: the first pod
        // allocates it on its node, and the others go there too.
        if let Some(shared) = self.unallocated_shared(head) {
            let pinned: Vec<usize> = (0..self.w.nodes.len())
                .filter(|&n| {
                    self.l.state.nodes()[n]
                        .dra
                        .as_ref()
                        .is_some_and(|d| shared.iter().any(|k| d.holds(k)))
                })
                .filter(|n| scope.is_none_or(|s| s.contains(n)))
                .collect();
            if !pinned.is_empty() {
                return self.place_run_once(run, j, placed, Some(&pinned), rail);
            }
            if run.len() > 1 {
                self.place_run_once(&run[..1], j, placed, scope, rail)?;
                return self
                    .place_run(&run[1..], j, placed, scope, rail)
                    .map_err(|p| p + 1);
            }
        }
        self.place_run_once(run, j, placed, scope, rail)
    }

    /// The keys of `task`'s shared claims that no allocation existed for
    /// at the start of the cycle; `None` when there are none.
    fn unallocated_shared(&self, task: &trainyard_model::Task) -> Option<Vec<String>> {
        let first = self.l.state.nodes().first()?.dra.as_ref()?;
        let keys: Vec<String> = task
            .constraints
            .claims
            .iter()
            .filter_map(|c| match c {
                trainyard_model::dra::ClaimNeed::Shared(k) => Some(k),
                trainyard_model::dra::ClaimNeed::Own(_)
                | trainyard_model::dra::ClaimNeed::Extended(_) => None,
            })
            .filter(|k| {
                first
                    .world
                    .claims
                    .get(*k)
                    .is_some_and(|c| c.allocation.is_none())
            })
            .cloned()
            .collect();
        (!keys.is_empty()).then_some(keys)
    }

    /// [`place_run`](Self::place_run) once shared claims are settled.
    fn place_run_once(
        &mut self,
        run: &[usize],
        j: usize,
        placed: &mut Vec<Placed>,
        scope: Option<&[usize]>,
        rail: Option<&topo::RailPlan>,
    ) -> Result<(), usize> {
        let job = self.l.jobs[j].job;
        let head = &job.tasks[run[0]];
        let req = &head.requests;
        let key = self.m.static_filter(self.w, &head.constraints);
        let ends = self.l.ends_of(j);
        let (shape, ask) = self.m.shape(key, req, &head.constraints);
        // Rules between pods: one pod at a time, every node scored again.
        if self.run_is_ruled(run, j) {
            return self.place_ruled((run, j), placed, scope, rail, key, ask);
        }
        let mut pod = PodView::new(req, ask, &head.constraints);
        pod.salt = crate::scoring::salt_of(&head.name);
        pod.ends = ends;
        let feasible = self
            .m
            .filters
            .get_mut(&key)
            .map(|f| std::mem::take(&mut f.feasible))
            .unwrap_or_default();
        // Without a per-pod salt, a scope or a rail window preference, a
        // shape's second and later runs in the cycle use its ranking (the
        // same choice, without scoring unchanged nodes again).
        let rankable =
            scope.is_none() && !rail.is_some_and(|p| p.node_pref) && !self.w.scoring.uses_salt();
        if rankable {
            // One ranking per shape whatever the job's end (`Ranked::pod`).
            let ranked = match self.m.ranked.remove(&shape) {
                Some(Some(r)) => Some(r),
                Some(None) => Some(ranked::Ranked::build(
                    &self.w.scoring,
                    &self.w.nodes,
                    &self.l.state,
                    &feasible,
                    &ranked::Ranked::pod(&pod),
                )),
                None => None,
            };
            if let Some(f) = self.m.filters.get_mut(&key) {
                f.feasible = feasible;
            }
            match ranked {
                Some(mut r) => {
                    let result = self.place_ranked(&mut r, (run, j), &pod, placed, rail, key);
                    self.m.ranked.insert(shape, Some(r));
                    return result;
                }
                None => {
                    self.m.ranked.insert(shape, None);
                    return self.place_scanned((run, j), &pod, placed, rail, None, key);
                }
            }
        }
        if let Some(f) = self.m.filters.get_mut(&key) {
            f.feasible = feasible;
        }
        self.place_scanned((run, j), &pod, placed, rail, scope, key)
    }

    /// `place_run` with a shape's ranking: the best node is the ranking's
    /// best, brought up to date first and after each placement.
    pub(super) fn place_ranked(
        &mut self,
        r: &mut ranked::Ranked,
        (run, j): (&[usize], usize),
        pod: &PodView,
        placed: &mut Vec<Placed>,
        rail: Option<&topo::RailPlan>,
        key: u32,
    ) -> Result<(), usize> {
        let rank_pod = ranked::Ranked::pod(pod);
        if let Some(f) = self.m.filters.get(&key) {
            r.refresh(
                &self.w.scoring,
                &self.w.nodes,
                &self.l.state,
                &f.mask,
                &rank_pod,
            );
        }
        debug_assert!(r.is_current(&self.l.state), "ranking behind the state");
        for (pos, &t) in run.iter().enumerate() {
            let Some((n, devices)) = r.best(&self.l.state, pod) else {
                return Err(pos);
            };
            let slots = self.l.slots_for(self.w, n, devices, pod, rail);
            // Listed on its node when the cycle checks rules between pods.
            let mut taken = *pod;
            taken.member = self.w.member_of(j, t);
            self.l.state.take(n, self.w.nodes[n], &taken, &slots);
            placed.push((t, n, slots.into()));
            r.changed_here(&self.w.scoring, &self.w.nodes, &self.l.state, n, &rank_pod);
        }
        Ok(())
    }

    /// `place_run` by scoring every feasible node (or those of `scope`)
    /// once, then only the node that changed after each placement.
    pub(super) fn place_scanned(
        &mut self,
        (run, j): (&[usize], usize),
        pod: &PodView,
        placed: &mut Vec<Placed>,
        rail: Option<&topo::RailPlan>,
        scope: Option<&[usize]>,
        key: u32,
    ) -> Result<(), usize> {
        // Taken out while the state is mutated below; put back after scoring.
        let feasible = self
            .m
            .filters
            .get_mut(&key)
            .map(|f| std::mem::take(&mut f.feasible))
            .unwrap_or_default();
        // With a rail plan, nodes with a preferred device window free come
        // first (multi-node gangs), and the window is the devices taken.
        let window_rank = |cycle: &Self, n: usize| -> Reverse<usize> {
            match rail {
                Some(plan) if plan.node_pref => Reverse(
                    plan.window_on(cycle.w.nodes[n], &cycle.l.state.nodes()[n], pod)
                        .unwrap_or(usize::MAX),
                ),
                _ => Reverse(0),
            }
        };
        let mut candidates: Vec<Candidate> = Vec::with_capacity(feasible.len());
        let mut consider = |cycle: &Self, n: usize| {
            if let Some(e) =
                cycle
                    .w
                    .scoring
                    .evaluate(cycle.w.nodes[n], &cycle.l.state.nodes()[n], pod)
            {
                candidates.push((
                    window_rank(cycle, n),
                    e.total,
                    e.tiebreak,
                    Reverse(n as u32),
                    e.devices,
                ));
            }
        };
        match scope {
            None => {
                for &n in &feasible {
                    consider(self, n as usize);
                }
            }
            Some(nodes) => {
                let mask = self.m.filters.get(&key).map(|f| &f.mask);
                for &n in nodes {
                    if mask.is_some_and(|m| m[n]) {
                        consider(self, n);
                    }
                }
            }
        }
        let mut heap = BinaryHeap::from(candidates);
        // Put the cached list back.
        if let Some(f) = self.m.filters.get_mut(&key) {
            f.feasible = feasible;
        }
        for (pos, &t) in run.iter().enumerate() {
            let Some((_, _, _, Reverse(n), devices)) = heap.pop() else {
                return Err(pos);
            };
            let n = n as usize;
            let node = self.w.nodes[n];
            let slots = self.l.slots_for(self.w, n, devices, pod, rail);
            let mut taken = *pod;
            taken.member = self.w.member_of(j, t);
            self.l.state.take(n, node, &taken, &slots);
            placed.push((t, n, slots.into()));
            if let Some(e) = self.w.scoring.evaluate(node, &self.l.state.nodes()[n], pod) {
                heap.push((
                    window_rank(self, n),
                    e.total,
                    e.tiebreak,
                    Reverse(n as u32),
                    e.devices,
                ));
            }
        }
        Ok(())
    }

    /// For a task that did not fit: how many nodes fit it now, and why the
    /// others do not.
    pub(super) fn diagnose(
        &mut self,
        req: &Resources,
        c: &Arc<PlacementConstraints>,
        ends: i64,
    ) -> (u32, BTreeMap<FilterReason, u32>) {
        let key = self.m.static_filter(self.w, c);
        let ask = GpuAsk::of(req, c).unwrap_or(GpuAsk::None);
        let mut pod = PodView::new(req, ask, c);
        pod.ends = ends;
        let Some(f) = self.m.filters.get(&key) else {
            return (0, BTreeMap::new());
        };
        let state = &self.l.state;
        let nodes = &self.w.nodes;
        self.m
            .diagnoses
            .entry((key, req.clone()))
            .or_insert_with(|| diagnosis::Diagnosis::new(state, nodes, &f.mask, &pod))
            .counts(state, nodes, &pod, &f.rejected)
    }
}

impl Memo {
    /// The shape of a run of identical pods (constraint id, request):
    /// its dense id and GPU ask, interned and classified the first time
    /// the cycle meets it (pending requests classify: `static_block`).
    pub(super) fn shape(
        &mut self,
        cid: u32,
        req: &Resources,
        c: &PlacementConstraints,
    ) -> (u32, GpuAsk) {
        let next = self.shapes.len() as u32;
        *self
            .shapes
            .entry((cid, req.clone()))
            .or_insert_with(|| (next, GpuAsk::of(req, c).unwrap_or(GpuAsk::None)))
    }

    /// Evaluates the static predicates for `c` once per cycle; returns the cache key.
    pub(super) fn static_filter(&mut self, w: &World<'_>, c: &Arc<PlacementConstraints>) -> u32 {
        let key = w.constraint_id(c);
        let nodes = &w.nodes;
        let predicates = &w.predicates;
        self.filters.entry(key).or_insert_with(|| {
            let mut feasible = Vec::new();
            let mut rejected: BTreeMap<FilterReason, u32> = BTreeMap::new();
            for (i, node) in nodes.iter().enumerate() {
                match predicates.iter().try_for_each(|p| p.filter(c, node)) {
                    Ok(()) => feasible.push(i as u32),
                    Err(r) => *rejected.entry(r).or_default() += 1,
                }
            }
            let mut mask = vec![false; nodes.len()];
            for &n in &feasible {
                mask[n as usize] = true;
            }
            StaticFilter {
                feasible,
                mask,
                rejected,
            }
        });
        key
    }
}

impl<'s> Ledger<'s> {
    /// The device slots a pod takes on node `n`: the rail plan's window
    /// when one is free there, else the evaluation's choice.
    pub(super) fn slots_for(
        &self,
        w: &World<'_>,
        n: usize,
        devices: DeviceChoice,
        pod: &PodView,
        rail: Option<&topo::RailPlan>,
    ) -> Vec<usize> {
        let node = w.nodes[n];
        let window = rail.and_then(|plan| {
            let w = plan.window_on(node, &self.state.nodes()[n], pod)?;
            Some(plan.windows[w].clone())
        });
        match window {
            Some(w) => w,
            None => devices.slots(node, &self.state.nodes()[n], pod),
        }
    }
}
