//! Topology-aware gang placement: the tightest domain that fits, best fit
//! among equals, split over as few child domains as possible, rail-aligned
//! GPU indices, neighbouring ranks together. See `docs/topology.md`.
//!
//! The search works on **scopes**: a set of nodes that is one domain of a
//! level (or the whole cluster). Sizes are counted in *copies* of a pod
//! shape ([`NodeState::copies`]); every choice is then confirmed by really
//! placing the pods inside the cycle's transaction, so an estimate that was
//! too kind costs a retry, never a wrong placement.

use std::collections::BTreeMap;
use std::sync::Arc;

use trainyard_model::topology::Topology;
use trainyard_model::{Job, JobId, PlacementConstraints, Resources, TopologyConstraint};

use super::run_end;
use super::{Cycle, Ledger, Placed, World};
use crate::decisions::{GangPlacement, PendingReason};
use crate::state::{GpuAsk, NodeState, PodView};

/// Candidate domains tried per level before moving one level up. Bounds
/// the work for a gang that fits nowhere tight; the estimate ranks them.
const TRIES_PER_LEVEL: usize = 4;

/// The topology as one cycle uses it: node indices mapped both ways.
pub(super) struct TopoIndex {
    pub topo: Arc<Topology>,
    /// Cycle node index → topology node id.
    pub topo_of: Vec<Option<u32>>,
    /// Domain of each cycle node at each level (tightest first).
    pub domain_of: Vec<Vec<Option<u32>>>,
}

impl TopoIndex {
    pub fn new(topo: Arc<Topology>, names: &[&str]) -> TopoIndex {
        let topo_of: Vec<Option<u32>> = names.iter().map(|n| topo.node_id(n)).collect();
        let domain_of = topo
            .levels()
            .iter()
            .map(|l| {
                topo_of
                    .iter()
                    .map(|t| t.and_then(|t| l.of_node[t as usize]))
                    .collect()
            })
            .collect();
        TopoIndex {
            topo,
            topo_of,
            domain_of,
        }
    }

    pub(super) fn level_name(&self, l: usize) -> &str {
        &self.topo.levels()[l].name
    }

    pub(super) fn domain_name(&self, l: usize, d: u32) -> &str {
        &self.topo.levels()[l].domains[d as usize].name
    }

    /// Checks that every level a constraint names exists.
    pub fn check(&self, c: &TopologyConstraint, what: &str) -> Result<(), String> {
        for (field, level) in [("required", &c.required), ("preferred", &c.preferred)] {
            if let Some(l) = level
                && self.topo.level_index(l).is_none()
            {
                return Err(format!(
                    "{what} topology.{field}: no level {l:?} in the cluster topology (levels, widest first: {})",
                    self.topo.level_names().join(", ")
                ));
            }
        }
        if c.max_leaves == Some(0) {
            return Err(format!("{what} topology.maxLeaves: must be at least 1"));
        }
        Ok(())
    }
}

/// Preferred device windows for whole-GPU pods that take fewer GPUs than a
/// node has: aligned blocks of `k` devices, most commonly free first, so
/// every pod of the gang gets the same indices (same rails, same NUMA
/// socket).
#[derive(Clone, Debug, Default)]
pub(super) struct RailPlan {
    pub windows: Vec<Vec<usize>>,
    /// Also prefer nodes that have a window free (multi-node gangs).
    pub node_pref: bool,
}

impl RailPlan {
    /// Rank of the first preferred window wholly free on the node, if any.
    pub fn window_on(
        &self,
        node: &trainyard_model::Node,
        st: &NodeState,
        pod: &PodView,
    ) -> Option<usize> {
        self.windows
            .iter()
            .position(|w| st.whole_free(node, pod, w))
    }
}

/// One part of a gang placed under one constraint: a sub-group, or the
/// pods outside constrained sub-groups.
struct Part {
    label: String,
    constraint: TopologyConstraint,
    /// Task indices in rank order.
    tasks: Vec<usize>,
}

/// Pods of one shape in a part, for sizing.
struct Shape<'a> {
    req: &'a Resources,
    constraints: &'a Arc<PlacementConstraints>,
    count: u32,
}

impl<'s> Cycle<'s> {
    /// Places the gang minimum `chosen` (task indices) domain by domain.
    /// Runs inside the caller's transaction; on error the caller rolls back.
    pub(super) fn place_gang_topology(
        &mut self,
        j: usize,
        chosen: &[usize],
        needs: &Resources,
    ) -> Result<Vec<Placed>, PendingReason> {
        let job = self.ledger.jobs[j].job;
        let parts = parts_of(job, chosen);
        let all: Vec<usize> = chosen.to_vec();
        let shapes = shapes_of(job, &all);
        let Some(ti) = self.world.topo.as_ref() else {
            return Err(PendingReason::Rejected {
                message: "the cluster has no topology".into(),
            });
        };
        let levels = ti.topo.levels().len();
        let required = job
            .topology
            .required
            .as_deref()
            .and_then(|l| ti.topo.level_index(l));
        let top = required.unwrap_or(levels.saturating_sub(1));
        let copies = self.copies_per_node(j, &shapes);
        let scope_all: Vec<usize> = (0..self.world.nodes.len())
            .filter(|&n| copies[n].iter().any(|c| *c > 0))
            .collect();

        let mut last_err: Option<PendingReason> = None;
        for level in 0..levels.min(top + 1) {
            let mut cands = self.world.candidates(&scope_all, level, &copies, &shapes);
            if cands.is_empty() {
                continue;
            }
            // Fewest leaves first, then best fit (least room), then name.
            cands.truncate(TRIES_PER_LEVEL);
            for (_, _, _, nodes) in cands {
                let mark = self.ledger.state.begin();
                match self.place_parts(j, &parts, &nodes, Some(level)) {
                    Ok(placed) => {
                        return self.world.check_leaves(job, placed, needs);
                    }
                    Err(e) => {
                        self.ledger.state.rollback(mark);
                        last_err = Some(e);
                    }
                }
            }
        }
        if let Some(r) = required {
            // Sub-group failures inside a fitting domain say more.
            if let Some(e @ PendingReason::TopologyUnfit { .. }) = &last_err
                && e_scope_is_subgroup(e)
            {
                return Err(e.clone());
            }
            return Err(self
                .world
                .unfit_reason("gang", r, &scope_all, &copies, &shapes, needs));
        }
        // No single domain: the whole cluster, still split tightly.
        let mark = self.ledger.state.begin();
        match self.place_parts(j, &parts, &scope_all, None) {
            Ok(placed) => self.world.check_leaves(job, placed, needs),
            Err(e) => {
                self.ledger.state.rollback(mark);
                Err(e)
            }
        }
    }

    /// Copies of each shape of job `j` per node (0 where statically
    /// infeasible or held for a reservation the job may not use).
    fn copies_per_node(&mut self, j: usize, shapes: &[Shape]) -> Vec<Vec<u32>> {
        let ends = self.ledger.ends_of(j);
        let mut out = vec![vec![0u32; shapes.len()]; self.world.nodes.len()];
        for (s, shape) in shapes.iter().enumerate() {
            let key = self.memo.static_filter(&self.world, shape.constraints);
            let ask = GpuAsk::of(shape.req, shape.constraints).unwrap_or(GpuAsk::None);
            let mut pod = PodView::new(shape.req, ask, shape.constraints);
            pod.ends = ends;
            if let Some(f) = self.memo.filters.get(&key) {
                for &n in &f.feasible {
                    let n = n as usize;
                    out[n][s] = self.ledger.state.nodes()[n].copies(self.world.nodes[n], &pod);
                }
            }
        }
        out
    }

    /// Places every part inside `scope` (a domain of `level`, or the
    /// cluster when `None`).
    fn place_parts(
        &mut self,
        j: usize,
        parts: &[Part],
        scope: &[usize],
        level: Option<usize>,
    ) -> Result<Vec<Placed>, PendingReason> {
        let job = self.ledger.jobs[j].job;
        let mut placed = Vec::new();
        let mut plans: BTreeMap<(usize, u32), RailPlan> = BTreeMap::new();
        for part in parts {
            let shapes = shapes_of(job, &part.tasks);
            let req_level = part
                .constraint
                .required
                .as_deref()
                .or(part.constraint.preferred.as_deref())
                .and_then(|l| self.world.topo.as_ref().and_then(|t| t.topo.level_index(l)));
            let within = match (req_level, level) {
                (Some(r), Some(l)) if r < l => Some(r),
                (Some(r), None) => Some(r),
                _ => None,
            };
            if let Some(r) = within {
                let copies = self.copies_per_node(j, &shapes);
                let cands = self.world.candidates(scope, r, &copies, &shapes);
                let mut done = false;
                for (_, _, _, nodes) in cands.into_iter().take(TRIES_PER_LEVEL) {
                    let mark = self.ledger.state.begin();
                    match self.place_split(j, &part.tasks, &nodes, Some(r), &mut plans) {
                        Ok(p) => {
                            placed.extend(p);
                            done = true;
                            break;
                        }
                        Err(()) => self.ledger.state.rollback(mark),
                    }
                }
                if done {
                    continue;
                }
                if part.constraint.required.is_some() {
                    let mut needs = Resources::zero();
                    for &t in &part.tasks {
                        needs.add(&job.tasks[t].requests);
                    }
                    return Err(self.world.unfit_reason(
                        &part.label,
                        r,
                        scope,
                        &copies,
                        &shapes,
                        &needs,
                    ));
                }
            }
            match self.place_split(j, &part.tasks, scope, level, &mut plans) {
                Ok(p) => placed.extend(p),
                Err(()) => {
                    // Hand back the usual diagnosis for the first pod.
                    let t = &job.tasks[part.tasks[0]];
                    let mut needs = Resources::zero();
                    for &t in &part.tasks {
                        needs.add(&job.tasks[t].requests);
                    }
                    let (nodes_fit, filters) = self.search().diagnose_task(j, part.tasks[0]);
                    return Err(PendingReason::Unschedulable {
                        needs,
                        pods_needed: part.tasks.len() as u32,
                        pods_placed: placed.len() as u32,
                        failed_pod: t.name.clone(),
                        nodes_total: self.world.nodes.len() as u32,
                        nodes_fit,
                        filters,
                    });
                }
            }
        }
        Ok(placed)
    }

    /// Places `tasks` (rank order) inside `scope` of `level`: into the
    /// best-fitting child domain if one holds them all, else over the
    /// fewest children (largest first, the last one best-fit), filling
    /// children in turn so neighbouring ranks share one. At the tightest
    /// level, nodes are chosen by the node scoring (restricted to the scope)
    /// with rail-aligned device windows.
    fn place_split(
        &mut self,
        j: usize,
        tasks: &[usize],
        scope: &[usize],
        level: Option<usize>,
        plans: &mut BTreeMap<(usize, u32), RailPlan>,
    ) -> Result<Vec<Placed>, ()> {
        let job = self.ledger.jobs[j].job;
        let child_level = match level {
            Some(0) => None,
            Some(l) => Some(l - 1),
            None => self
                .world
                .topo
                .as_ref()
                .map(|t| t.topo.levels().len())
                .filter(|n| *n > 0)
                .map(|n| n - 1),
        };
        let shapes = shapes_of(job, tasks);
        if let Some(cl) = child_level
            && shapes.len() == 1
            && self.world.topo.is_some()
        {
            let copies = self.copies_per_node(j, &shapes);
            let Some(ti) = &self.world.topo else {
                return Err(());
            };
            let mut groups: BTreeMap<Option<u32>, Vec<usize>> = BTreeMap::new();
            for &n in scope {
                if copies[n][0] > 0 {
                    groups.entry(ti.domain_of[cl][n]).or_default().push(n);
                }
            }
            let need = tasks.len() as u64;
            let mut kids: Vec<(u64, String, Vec<usize>)> = groups
                .into_iter()
                .map(|(d, ns)| {
                    let name = d.map_or(String::from("~"), |d| ti.domain_name(cl, d).to_string());
                    (room_of(&ns, &copies)[0], name, ns)
                })
                .collect();
            let total: u64 = kids.iter().map(|k| k.0).sum();
            if total < need {
                return Err(());
            }
            // One child holds all: the best fit.
            let single = kids
                .iter()
                .filter(|k| k.0 >= need)
                .min_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)))
                .map(|k| k.2.clone());
            if let Some(nodes) = single {
                return self.place_split(j, tasks, &nodes, Some(cl), plans);
            }
            // Fewest children: largest first, the last best-fit.
            kids.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut chosen: Vec<usize> = Vec::new();
            let mut sum = 0u64;
            for (i, k) in kids.iter().enumerate() {
                if sum + k.0 >= need {
                    // Smallest later child that still completes the set.
                    let last = (i..kids.len())
                        .filter(|&x| sum + kids[x].0 >= need)
                        .min_by(|&a, &b| (kids[a].0, &kids[a].1).cmp(&(kids[b].0, &kids[b].1)))
                        .unwrap_or(i);
                    chosen.push(last);
                    break;
                }
                chosen.push(i);
                sum += k.0;
            }
            let mut placed = Vec::new();
            let mut at = 0usize;
            for (pos, &c) in chosen.iter().enumerate() {
                let left = tasks.len() - at;
                let take = if pos + 1 == chosen.len() {
                    left
                } else {
                    (kids[c].0 as usize).min(left)
                };
                if take == 0 {
                    continue;
                }
                let nodes = kids[c].2.clone();
                let p = self.place_split(j, &tasks[at..at + take], &nodes, Some(cl), plans)?;
                placed.extend(p);
                at += take;
            }
            return if at == tasks.len() {
                Ok(placed)
            } else {
                Err(())
            };
        }
        // Bottom: node scoring inside the scope, shape by shape.
        let mut placed = Vec::new();
        let mut start = 0;
        while start < tasks.len() {
            let head = &job.tasks[tasks[start]];
            let end = run_end(job, tasks, start);
            let key = (
                self.world.constraint_id(&head.constraints) as usize,
                head.requests.gpu as u32,
            );
            let plan = match plans.get(&key) {
                Some(p) => p.clone(),
                None => {
                    let p = self.ledger.rail_plan(
                        &self.world,
                        head.requests.clone(),
                        &head.constraints,
                        scope,
                        tasks.len() > 1 || job.tasks.len() > 1,
                    );
                    plans.insert(key, p.clone());
                    p
                }
            };
            self.search()
                .place_run(&tasks[start..end], j, &mut placed, Some(scope), Some(&plan))
                .map_err(|_| ())?;
            start = end;
        }
        Ok(placed)
    }

    /// Tightest level with one domain that has room for all of `chosen`
    /// (by the copy estimate), before placing.
    pub(super) fn tightest_feasible(&mut self, j: usize, chosen: &[usize]) -> Option<usize> {
        let levels = self.world.topo.as_ref()?.topo.levels().len();
        let job = self.ledger.jobs[j].job;
        let shapes = shapes_of(job, chosen);
        let copies = self.copies_per_node(j, &shapes);
        let scope: Vec<usize> = (0..self.world.nodes.len()).collect();
        (0..levels).find(|&l| {
            !self
                .world
                .candidates(&scope, l, &copies, &shapes)
                .is_empty()
        })
    }
}

fn e_scope_is_subgroup(e: &PendingReason) -> bool {
    matches!(e, PendingReason::TopologyUnfit { scope, .. } if scope != "gang")
}

/// Sum of copies per shape over `nodes`.
fn room_of(nodes: &[usize], copies: &[Vec<u32>]) -> Vec<u64> {
    let width = nodes.first().map_or(0, |&n| copies[n].len()).max(1);
    let mut room = vec![0u64; width];
    for &n in nodes {
        for (s, c) in copies[n].iter().enumerate() {
            room[s] += u64::from(*c);
        }
    }
    room
}

/// A need in GPUs (whole, rounded up) when the pods ask for GPUs, else in pods.
fn amount(needs: &Resources, pods: u64) -> (u64, String) {
    if needs.gpu > 0 {
        (needs.gpu.div_ceil(1000), "GPUs".into())
    } else {
        (pods, "pods".into())
    }
}

/// Distinct shapes of `tasks`, most numerous first (then first seen).
fn shapes_of<'a>(job: &'a Job, tasks: &[usize]) -> Vec<Shape<'a>> {
    let mut shapes: Vec<Shape<'a>> = Vec::new();
    for &t in tasks {
        let task = &job.tasks[t];
        match shapes
            .iter_mut()
            .find(|s| s.req == &task.requests && Arc::ptr_eq(s.constraints, &task.constraints))
        {
            Some(s) => s.count += 1,
            None => shapes.push(Shape {
                req: &task.requests,
                constraints: &task.constraints,
                count: 1,
            }),
        }
    }
    shapes.sort_by_key(|s| std::cmp::Reverse(s.count));
    shapes
}

/// Splits the gang minimum into parts: each sub-group with a topology
/// constraint on its own (in sub-group order), then everything else.
fn parts_of(job: &Job, chosen: &[usize]) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut rest: Vec<usize> = chosen.to_vec();
    for sg in &job.subgroups {
        if sg.topology.is_empty() {
            continue;
        }
        let tasks: Vec<usize> = chosen
            .iter()
            .copied()
            .filter(|&t| job.tasks[t].subgroup.as_deref() == Some(sg.name.as_str()))
            .collect();
        if tasks.is_empty() {
            continue;
        }
        rest.retain(|t| !tasks.contains(t));
        parts.push(Part {
            label: format!("sub-group {}", sg.name),
            constraint: sg.topology.clone(),
            tasks,
        });
    }
    if !rest.is_empty() {
        parts.push(Part {
            label: "gang".into(),
            constraint: TopologyConstraint::default(),
            tasks: rest,
        });
    }
    parts
}

impl World<'_> {
    /// Whether gang placement searches the topology this cycle.
    pub(super) fn topology_aware(&self) -> bool {
        self.topo.is_some()
            && self.config.topology.placement == crate::config::TopologyPlacement::Aware
    }

    /// Enforces `maxLeaves` on a placement (rolled back by the caller).
    pub(super) fn check_leaves(
        &self,
        job: &Job,
        placed: Vec<Placed>,
        needs: &Resources,
    ) -> Result<Vec<Placed>, PendingReason> {
        let Some(max) = job.topology.max_leaves else {
            return Ok(placed);
        };
        let Some(ti) = &self.topo else {
            return Ok(placed);
        };
        let Some(leaf) = ti.topo.leaf_level() else {
            return Ok(placed);
        };
        let mut leaves: Vec<Option<u32>> = placed.iter().map(|p| ti.domain_of[leaf][p.1]).collect();
        leaves.sort();
        leaves.dedup();
        if leaves.len() as u32 > max {
            let (needs_n, unit) = amount(needs, job.tasks.len() as u64);
            return Err(PendingReason::TooManyLeaves {
                scope: "gang".into(),
                needs_leaves: leaves.len() as u32,
                max_leaves: max,
                needs: needs_n,
                unit,
            });
        }
        Ok(placed)
    }

    /// Domains of `level` among `scope` that can hold every shape, sorted
    /// by (leaves needed, room, name): (leaves, room, domain, nodes).
    fn candidates(
        &self,
        scope: &[usize],
        level: usize,
        copies: &[Vec<u32>],
        shapes: &[Shape],
    ) -> Vec<(u32, u64, u32, Vec<usize>)> {
        let Some(ti) = &self.topo else {
            return Vec::new();
        };
        let mut groups: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for &n in scope {
            if let Some(d) = ti.domain_of[level][n] {
                groups.entry(d).or_default().push(n);
            }
        }
        let leaf = ti.topo.leaf_level();
        let mut out = Vec::new();
        for (d, nodes) in groups {
            let room = room_of(&nodes, copies);
            if !shapes
                .iter()
                .enumerate()
                .all(|(s, sh)| room[s] >= u64::from(sh.count))
            {
                continue;
            }
            // Leaves needed: greedy over leaf domains, main shape.
            let leaves = match leaf {
                Some(lf) if lf < level => {
                    let mut per: BTreeMap<Option<u32>, u64> = BTreeMap::new();
                    for &n in &nodes {
                        *per.entry(ti.domain_of[lf][n]).or_default() += u64::from(copies[n][0]);
                    }
                    let mut caps: Vec<u64> = per.into_values().collect();
                    caps.sort_unstable_by(|a, b| b.cmp(a));
                    let mut left = u64::from(shapes[0].count);
                    let mut k = 0;
                    for c in caps {
                        if left == 0 {
                            break;
                        }
                        left = left.saturating_sub(c);
                        k += 1;
                    }
                    k
                }
                _ => 1,
            };
            out.push((leaves, room[0], d, nodes));
        }
        out.sort_by(|a, b| {
            (a.0, a.1, ti.domain_name(level, a.2)).cmp(&(b.0, b.1, ti.domain_name(level, b.2)))
        });
        out
    }

    /// The reason a gang (or sub-group) fits in no domain of `level`.
    fn unfit_reason(
        &self,
        scope: &str,
        level: usize,
        nodes: &[usize],
        copies: &[Vec<u32>],
        shapes: &[Shape],
        needs: &Resources,
    ) -> PendingReason {
        let Some(ti) = &self.topo else {
            return PendingReason::Rejected {
                message: "the cluster has no topology".into(),
            };
        };
        let pods: u64 = shapes.iter().map(|s| u64::from(s.count)).sum();
        let (needs_n, unit) = amount(needs, pods);
        let per_pod = needs_n / pods.max(1);
        let mut best: Option<(u64, u32)> = None;
        let mut groups: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for &n in nodes {
            if let Some(d) = ti.domain_of[level][n] {
                groups.entry(d).or_default().push(n);
            }
        }
        for (d, ns) in &groups {
            let room = room_of(ns, copies)[0] * per_pod;
            if best.is_none_or(|(b, _)| room > b) {
                best = Some((room, *d));
            }
        }
        PendingReason::TopologyUnfit {
            scope: scope.to_string(),
            needs: needs_n,
            unit,
            level: ti.level_name(level).to_string(),
            largest: best.map_or(0, |b| b.0),
            domain: best.map(|(_, d)| ti.domain_name(level, d).to_string()),
        }
    }
}

impl<'s> Ledger<'s> {
    /// Device windows for whole-GPU pods smaller than the nodes in `scope`.
    pub(super) fn rail_plan(
        &self,
        w: &World<'_>,
        req: Resources,
        c: &PlacementConstraints,
        scope: &[usize],
        multi: bool,
    ) -> RailPlan {
        let ask = GpuAsk::of(&req, c).unwrap_or(GpuAsk::None);
        let GpuAsk::Whole(k) = ask else {
            return RailPlan::default();
        };
        let k = k as usize;
        let pod = PodView::new(&req, ask, c);
        // Device count of the scope's nodes (the most common one).
        // An empty scope means the whole cluster.
        let all: Vec<usize>;
        let scope = if scope.is_empty() {
            all = (0..w.nodes.len()).collect();
            &all[..]
        } else {
            scope
        };
        let mut counts: BTreeMap<usize, u32> = BTreeMap::new();
        for &n in scope {
            *counts.entry(w.nodes[n].gpus.len()).or_default() += 1;
        }
        let Some((&g, _)) = counts.iter().max_by_key(|(g, c)| (**c, **g)) else {
            return RailPlan::default();
        };
        if k == 0 || k >= g {
            return RailPlan::default();
        }
        // Aligned blocks of k inside each NUMA socket (if known), else overall.
        let first = scope.iter().copied().find(|&n| w.nodes[n].gpus.len() == g);
        let numa: Vec<Option<u32>> = (0..g)
            .map(|i| {
                first.and_then(|n| {
                    let ti = w.topo.as_ref()?;
                    ti.topo.gpu_numa(ti.topo_of[n]?, w.nodes[n].gpus[i].index)
                })
            })
            .collect();
        let mut windows: Vec<Vec<usize>> = Vec::new();
        let mut i = 0;
        while i < g {
            let mut j = i;
            while j < g && numa[j] == numa[i] {
                j += 1;
            }
            // Socket [i, j): blocks of k; if k exceeds the socket, plain blocks.
            if j - i >= k {
                let mut s = i;
                while s + k <= j {
                    windows.push((s..s + k).collect());
                    s += k;
                }
                i = j;
            } else {
                windows.clear();
                let mut s = 0;
                while s + k <= g {
                    windows.push((s..s + k).collect());
                    s += k;
                }
                break;
            }
        }
        if !multi {
            return RailPlan {
                windows,
                node_pref: false,
            };
        }
        // Most commonly free first, so the gang's pods agree on indices.
        let mut scored: Vec<(u32, usize, Vec<usize>)> = windows
            .into_iter()
            .enumerate()
            .map(|(pos, win)| {
                let free = scope
                    .iter()
                    .filter(|&&n| self.state.nodes()[n].whole_free(w.nodes[n], &pod, &win))
                    .count() as u32;
                (free, pos, win)
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        RailPlan {
            windows: scored.into_iter().map(|s| s.2).collect(),
            node_pref: multi,
        }
    }

    /// Where gang `j` sits after placing `placed` (only with a topology).
    pub(super) fn gang_placement(
        &self,
        w: &World<'_>,
        j: usize,
        placed: &[Placed],
        tightest: Option<usize>,
    ) -> Option<GangPlacement> {
        let ti = w.topo.as_ref()?;
        let job = self.jobs[j].job;
        let mut pods: Vec<(Option<u32>, &str, u32, Vec<u32>)> = placed
            .iter()
            .filter_map(|(t, n, slots)| {
                let id = ti.topo_of[*n]?;
                let task = &job.tasks[*t];
                let gpus = slots.iter().map(|&s| w.nodes[*n].gpus[s].index).collect();
                Some((task.rank, task.name.as_str(), id, gpus))
            })
            .collect();
        pods.sort_by(|a, b| (a.0.is_none(), a.0, a.1).cmp(&(b.0.is_none(), b.0, b.1)));
        let list: Vec<(u32, Vec<u32>)> = pods.into_iter().map(|p| (p.2, p.3)).collect();
        let span = ti.topo.span(&list);
        let level = span.level.map(|l| ti.level_name(l as usize).to_string());
        Some(GangPlacement {
            job: JobId(job.id.clone()),
            in_tightest: match (span.level, tightest) {
                (_, None) => true,
                (Some(l), Some(t)) => l as usize <= t,
                (None, Some(_)) => false,
            },
            tightest_feasible: tightest.map(|l| ti.level_name(l).to_string()),
            level,
            span,
        })
    }
}
