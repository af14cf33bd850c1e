//! The node-by-node side of the victim search: the pool's units grouped
//! by node (`ByNode`), and per node the cheapest units whose departure lets
//! one pod of the gang fit, taken cheapest node first until they hold it.

use std::collections::{BTreeMap, BTreeSet};

use trainyard_model::Resources;
use trainyard_model::resources::MILLI_PER_GPU;

use crate::allocate::evict::Unit;
use crate::allocate::place::Search;
use crate::allocate::{Ledger, World};
use crate::state::{NodeState, PodView};

/// Room on one node for pods of the gang: (cost: max priority of the pods
/// evicted, pods evicted, lost work, max priority of the binds of this
/// cycle taken back, `i64::MIN` for none: below any priority, even
/// `i32::MIN`), copies of the pod it adds, node, units it adds (indices
/// into the pool).
type NodeOption = ((i32, usize, u64, i64), u32, usize, Vec<usize>);

/// For each node, the positions in `pool` of the units with a pod there,
/// in pool order (cost order), and which of their pods sit there: arrays
/// grouped by node (so giving a unit back on one node costs its pods
/// there, not all its pods).
pub(super) struct ByNode {
    /// `units[start[n]..start[n + 1]]` are node `n`'s.
    start: Vec<u32>,
    units: Vec<u32>,
    /// `pods[pod_start[n]..pod_start[n + 1]]`: (unit position, index into
    /// its `tasks`) of node `n`'s pods, in pool order.
    pod_start: Vec<u32>,
    pods: Vec<(u32, u32)>,
    /// What the whole pool frees (summed in the same pass over it).
    pub(super) freed: Resources,
}

impl ByNode {
    pub(super) fn of(pool: &[&Unit], nodes: usize) -> ByNode {
        // Counting sort by node: count, prefix sums, fill in pool order.
        let mut start = vec![0u32; nodes + 1];
        let mut pod_start = vec![0u32; nodes + 1];
        let mut last = vec![u32::MAX; nodes];
        let mut freed = Resources::zero();
        for (i, u) in pool.iter().enumerate() {
            freed.add(&u.freed);
            for (_, n, _) in &u.tasks {
                pod_start[*n + 1] += 1;
                if last[*n] != i as u32 {
                    last[*n] = i as u32;
                    start[*n + 1] += 1;
                }
            }
        }
        for n in 0..nodes {
            start[n + 1] += start[n];
            pod_start[n + 1] += pod_start[n];
        }
        let mut fill: Vec<u32> = start[..nodes].to_vec();
        let mut pod_fill: Vec<u32> = pod_start[..nodes].to_vec();
        let mut units = vec![0u32; start[nodes] as usize];
        let mut pods = vec![(0u32, 0u32); pod_start[nodes] as usize];
        last.fill(u32::MAX);
        for (i, u) in pool.iter().enumerate() {
            for (k, (_, n, _)) in u.tasks.iter().enumerate() {
                pods[pod_fill[*n] as usize] = (i as u32, k as u32);
                pod_fill[*n] += 1;
                if last[*n] != i as u32 {
                    last[*n] = i as u32;
                    units[fill[*n] as usize] = i as u32;
                    fill[*n] += 1;
                }
            }
        }
        ByNode {
            start,
            units,
            pod_start,
            pods,
            freed,
        }
    }

    /// The positions of the units with a pod on node `n`.
    fn on(&self, n: usize) -> &[u32] {
        match (self.start.get(n), self.start.get(n + 1)) {
            (Some(&a), Some(&b)) => &self.units[a as usize..b as usize],
            _ => &[],
        }
    }

    /// (unit position, index into its `tasks`) of the pods on node `n`,
    /// grouped by unit in the order of [`ByNode::on`].
    fn pods_on(&self, n: usize) -> &[(u32, u32)] {
        match (self.pod_start.get(n), self.pod_start.get(n + 1)) {
            (Some(&a), Some(&b)) => &self.pods[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Gives back into `st`, a copy of node `n`'s state, the pods of unit
    /// `pool[i]` on that node.
    fn give(
        &self,
        (l, w): (&Ledger<'_>, &World<'_>),
        st: &mut NodeState,
        n: usize,
        pool: &[&Unit],
        i: usize,
    ) {
        let (Some(&a), Some(&b)) = (self.pod_start.get(n), self.pod_start.get(n + 1)) else {
            return;
        };
        let u = pool[i];
        let vj = l.jobs[u.job].job;
        for &(ui, k) in &self.pods[a as usize..b as usize] {
            if ui as usize == i {
                let (t, _, slots) = &u.tasks[k as usize];
                st.give(w.nodes[n], &w.pod_of(vj, u.job, *t), slots);
            }
        }
    }
}

impl Search<'_, '_> {
    /// Copies of a pod that fit on each node as the state is now, for one
    /// constraint set and request; kept until the room changes (a plan is
    /// applied), and not kept while binds are set aside.
    fn copies_now(&mut self, key: u32, req: &Resources, pod: &PodView) -> std::rc::Rc<Vec<u32>> {
        let cache = self.l.set_aside.is_empty() && !self.l.holds_lifted;
        if cache && let Some(v) = self.m.copies_seen.get(&(key, req.clone(), pod.ends)) {
            return std::rc::Rc::clone(v);
        }
        let v: std::rc::Rc<Vec<u32>> = std::rc::Rc::new(
            self.w
                .nodes
                .iter()
                .enumerate()
                .map(|(n, node)| self.l.state.nodes()[n].copies(node, pod))
                .collect(),
        );
        if cache {
            self.m
                .copies_seen
                .insert((key, req.clone(), pod.ends), std::rc::Rc::clone(&v));
        }
        v
    }

    /// For a gang of one pod shape: whether the nodes could hold all its
    /// pods with every unit of `pool` gone (an upper bound, no placement).
    /// Gangs of several shapes always could, as far as this says.
    pub(super) fn could_cover(
        &mut self,
        j: usize,
        chosen: &[usize],
        pool: &[&Unit],
        on_node: &ByNode,
    ) -> bool {
        let job = self.l.jobs[j].job;
        if !crate::allocate::one_shape(job, chosen) {
            return true;
        }
        let head = &job.tasks[chosen[0]];
        let mut pod = PodView::of_task(head);
        pod.ends = self.l.ends_of(j);
        let key = self.m.static_filter(self.w, &head.constraints);
        let Some(mask) = self.m.filters.get(&key).map(|f| f.mask.clone()) else {
            return true;
        };
        let now = self.copies_now(key, &head.requests, &pod);
        let mut total = 0usize;
        for (n, node) in self.w.nodes.iter().enumerate() {
            if !mask[n] {
                continue;
            }
            let here = on_node.on(n);
            total += match here.is_empty() {
                true => now[n] as usize,
                false => {
                    let mut st = self.l.state.nodes()[n].clone();
                    for &i in here {
                        on_node.give((&*self.l, self.w), &mut st, n, pool, i as usize);
                    }
                    st.copies(node, &pod) as usize
                }
            };
            if total >= chosen.len() {
                return true;
            }
        }
        false
    }

    /// Node by node, the cheapest units (of `pool`, cheapest first) whose
    /// departure lets one pod of the gang's main shape fit; the cheapest
    /// nodes until the gang's pods are covered. Empty when no cover exists.
    ///
    /// Nodes that need earlier victims given back (nothing fits there now,
    /// no bind of this cycle to take back) are costly to evaluate, so they
    /// are evaluated in the order of a lower bound on their cost's
    /// priority ([`Search::cost_bound`]), and no longer once the nodes
    /// already evaluated below the next bound cover the gang: every node
    /// left would sort after them, so the choice is the one a full pass
    /// makes.
    pub(super) fn node_centric<'u>(
        &mut self,
        j: usize,
        chosen: &[usize],
        pool: &[&'u Unit],
        on_node: &ByNode,
    ) -> Vec<&'u Unit> {
        let job = self.l.jobs[j].job;
        let head = &job.tasks[chosen[0]];
        let mut pod = PodView::of_task(head);
        pod.ends = self.l.ends_of(j);
        let key = self.m.static_filter(self.w, &head.constraints);
        let Some(mask) = self.m.filters.get(&key).map(|f| f.mask.clone()) else {
            return Vec::new();
        };
        let now = self.copies_now(key, &head.requests, &pod);
        let Some(first) = self.w.nodes.first() else {
            return Vec::new();
        };
        let mut scratch = (NodeState::new(first), NodeState::new(first));
        let mut options: Vec<NodeOption> = Vec::new();
        // (bound, node) of the nodes left for later.
        let mut deferred: Vec<(i32, usize)> = Vec::new();
        for n in 0..self.w.nodes.len() {
            if !mask[n] {
                continue;
            }
            let here = on_node.on(n);
            let fresh_here = here.iter().any(|&i| pool[i as usize].fresh);
            if now[n] == 0 && !here.is_empty() && !fresh_here {
                if let Some(bound) = self.cost_bound(n, &pod, pool, on_node) {
                    deferred.push((bound, n));
                }
                continue;
            }
            options.extend(self.node_options(n, &pod, now[n], pool, on_node, &mut scratch));
        }
        deferred.sort_unstable();
        // Copies of the options so far, by their cost's priority.
        let mut by_priority: BTreeMap<i32, u64> = BTreeMap::new();
        for o in &options {
            *by_priority.entry(o.0.0).or_default() += u64::from(o.1);
        }
        let want = chosen.len() as u64;
        let mut next = 0;
        while let Some(&(bound, _)) = deferred.get(next) {
            let below: u64 = by_priority.range(..bound).map(|(_, c)| *c).sum();
            if below >= want {
                break;
            }
            while let Some(&(b, n)) = deferred.get(next)
                && b == bound
            {
                next += 1;
                for o in self.node_options(n, &pod, 0, pool, on_node, &mut scratch) {
                    *by_priority.entry(o.0.0).or_default() += u64::from(o.1);
                    options.push(o);
                }
            }
        }
        // Debug builds (the test suite) check the bound against the full
        // pass: every node left evaluated, the same choice.
        #[cfg(debug_assertions)]
        {
            let mut all = options.clone();
            for &(_, n) in &deferred[next..] {
                all.extend(self.node_options(n, &pod, 0, pool, on_node, &mut scratch));
            }
            debug_assert_eq!(
                Self::cheapest_cover(all, want),
                Self::cheapest_cover(options.clone(), want),
                "the bounded node-centric search chose differently from the full pass"
            );
        }
        // Pool order is cost order.
        Self::cheapest_cover(options, want)
            .map(|picked| picked.into_iter().map(|i| pool[i]).collect())
            .unwrap_or_default()
    }

    /// The units of the cheapest options that together hold `want` pods,
    /// `None` when all of them do not.
    fn cheapest_cover(mut options: Vec<NodeOption>, want: u64) -> Option<BTreeSet<usize>> {
        options.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        let mut covered = 0u64;
        let mut picked: BTreeSet<usize> = BTreeSet::new();
        for (_, copies, _, used) in options {
            if covered >= want {
                break;
            }
            covered += u64::from(copies);
            picked.extend(used);
        }
        (covered >= want).then_some(picked)
    }

    /// The options node `n` offers (see [`Search::node_centric`]), cheapest
    /// first: binds of this cycle taken back in cost order (lowest priority
    /// first), one option at each cost where that lets more copies fit;
    /// else the cheapest prefix of its other units after which one copy
    /// fits. Each option counts the copies and units it adds to the ones
    /// before it, and costs strictly more than they do, so a cover taking
    /// the options cheapest first always takes a node's options in order.
    /// `now`: copies that fit as the node is; `scratch`: two node states
    /// whose allocations are reused from node to node.
    fn node_options(
        &self,
        n: usize,
        pod: &PodView,
        now: u32,
        pool: &[&Unit],
        on_node: &ByNode,
        scratch: &mut (NodeState, NodeState),
    ) -> Vec<NodeOption> {
        let node = self.w.nodes[n];
        let here = on_node.on(n);
        let mut options: Vec<NodeOption> = Vec::new();
        if now > 0 {
            options.push(((i32::MIN, 0, 0, i64::MIN), now, n, Vec::new()));
        }
        if here.is_empty() {
            // No candidate here: what fits now is all there is.
            return options;
        }
        let (st, with) = (&mut scratch.0, &mut scratch.1);
        st.clone_from(&self.l.state.nodes()[n]);
        // Binds of this cycle cost nothing but their priority: their room
        // counts as free where it lets more pods of the gang fit, lower
        // priority going back first (pool order), so a gang that needs
        // only the room of low-priority binds does not take back a
        // higher-priority one beside them.
        let fresh: Vec<usize> = here
            .iter()
            .map(|&i| i as usize)
            .filter(|&i| pool[i].fresh)
            .collect();
        if !fresh.is_empty() {
            with.clone_from(st);
            let mut copies = now;
            let mut pending: Vec<usize> = Vec::new();
            for (k, &i) in fresh.iter().enumerate() {
                on_node.give((self.l, self.w), with, n, pool, i);
                pending.push(i);
                let priority = pool[i].priority;
                // Options only where the cost rises: the next unit has a
                // higher priority, or this is the last.
                let rises = fresh
                    .get(k + 1)
                    .is_none_or(|&x| pool[x].priority > priority);
                if !rises {
                    continue;
                }
                let more = with.copies(node, pod);
                if more > copies {
                    options.push((
                        (i32::MIN, 0, 0, i64::from(priority)),
                        more - copies,
                        n,
                        std::mem::take(&mut pending),
                    ));
                    copies = more;
                }
            }
        }
        if !options.is_empty() {
            return options;
        }
        let mut used: Vec<usize> = Vec::new();
        let mut copies = 0;
        for i in here.iter().map(|&i| i as usize).filter(|&i| !pool[i].fresh) {
            on_node.give((self.l, self.w), st, n, pool, i);
            used.push(i);
            copies = st.copies(node, pod);
            if copies > 0 {
                break;
            }
        }
        if copies == 0 {
            return options;
        }
        let prio = used
            .iter()
            .map(|&i| pool[i].cost_priority())
            .max()
            .unwrap_or(i32::MIN);
        let pods: usize = used.iter().map(|&i| pool[i].evicted_pods()).sum();
        let lost: u64 = used.iter().map(|&i| self.w.lost_work(pool[i])).sum();
        options.push(((prio, pods, lost, i64::MIN), copies, n, used));
        options
    }

    /// For a node where nothing fits now and every unit is an earlier
    /// bind: a lower bound on the priority of the cost
    /// [`Search::node_options`] finds there, or `None` when no prefix of its
    /// units can make room. The bound walks the units in pool order,
    /// adding what each could give back on this node at most (requests;
    /// for GPUs, a whole device per slot, which is the most any pod is
    /// charged on one), until CPU, memory and (for whole-GPU pods) GPUs
    /// would suffice: the option needs at least that prefix.
    fn cost_bound(&self, n: usize, pod: &PodView, pool: &[&Unit], on_node: &ByNode) -> Option<i32> {
        let st = &self.l.state.nodes()[n];
        let (mut cpu, mut memory, mut gpu) = (st.free.cpu, st.free.memory, st.free.gpu);
        let whole = matches!(pod.ask, crate::state::GpuAsk::Whole(_));
        let mut bound = i32::MIN;
        let pods = on_node.pods_on(n);
        let mut p = 0;
        for &i in on_node.on(n) {
            let u = pool[i as usize];
            bound = bound.max(u.cost_priority());
            // Unit i's pods on this node (the same pool order as units).
            while let Some(&(ui, k)) = pods.get(p)
                && ui == i
            {
                p += 1;
                let (t, _, slots) = &u.tasks[k as usize];
                let req = if u.tasks.len() == 1 {
                    &u.freed
                } else {
                    &self.l.jobs[u.job].job.tasks[*t].requests
                };
                cpu = cpu.saturating_add(req.cpu);
                memory = memory.saturating_add(req.memory);
                gpu = gpu.saturating_add(slots.len() as u64 * MILLI_PER_GPU);
            }
            if pod.req.cpu <= cpu && pod.req.memory <= memory && (!whole || pod.req.gpu <= gpu) {
                return Some(bound);
            }
        }
        None
    }
}
