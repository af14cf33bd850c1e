//! Building one cycle's data from the snapshot: canonical order, the
//! accounting of what is bound and reserved, fair shares, and the reasons
//! a job can never be placed as submitted.

use super::*;
use trainyard_model::{GroupProblem, ResourceName};

impl<'s> Cycle<'s> {
    pub(super) fn new(snapshot: &'s Snapshot, config: &'s Config, now: Timestamp) -> Self {
        let tree = &snapshot.queues;
        let mut warnings = Vec::new();
        let mut nodes: Vec<&Node> = snapshot.nodes.iter().map(|n| &**n).collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        nodes.dedup_by(|b, a| {
            let dup = a.name == b.name;
            if dup {
                warnings.push(format!("node {} appears twice; the first is used", a.name));
            }
            dup
        });
        let index: HashMap<&str, usize, PairHash> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut states: Vec<NodeState> = nodes.iter().map(|n| NodeState::new(n)).collect();
        crate::dra::attach(snapshot, &nodes, &mut states);
        // The most any node has allocatable, per resource: a pod asking
        // for more can never be placed (`PendingReason::NeverFits`).
        let largest = largest_allocatable(&nodes);

        // Capacity held by pods outside Trainyard.
        let mut external: Vec<_> = snapshot.external.iter().collect();
        external.sort_by(|a, b| a.name.cmp(&b.name));
        let no_constraints = PlacementConstraints::default();
        // Holders (pods that hold capacity), numbered in order: external
        // pods first, then each job's bound tasks. Those with known device
        // indices are accounted as they are met (the task's data is at hand
        // then); the others wait for the lowest free devices, after all of
        // them. Rules between pods list members on nodes, and whether any
        // pod has rules is known only at the end: members are added after.
        let mut held = Held::default();
        // Per external holder: its position in `external` (its member id).
        let mut ext_ids: Vec<u32> = Vec::new();
        let mut ext_used: Vec<Resources> = vec![Resources::zero(); nodes.len()];
        for (e, p) in external.iter().enumerate() {
            match index.get(p.node.as_str()) {
                Some(&n) => {
                    ext_used[n].add(&p.requests);
                    held.hold(
                        (&nodes, &mut states),
                        (n, &p.requests, &no_constraints, p.gpus.as_ref()),
                        p.name.as_str(),
                        None,
                    );
                    ext_ids.push(e as u32);
                }
                None => warnings.push(format!(
                    "pod {} is bound to unknown node {}; its capacity is not counted",
                    p.name, p.node
                )),
            }
        }

        // Jobs in id order; tasks in name order.
        let mut jobs_sorted: Vec<&Job> = snapshot.jobs.iter().map(|j| &**j).collect();
        if !jobs_sorted.is_sorted_by(|a, b| a.id <= b.id) {
            jobs_sorted.sort_by(|a, b| a.id.cmp(&b.id));
        }
        let mut jobs = Vec::with_capacity(jobs_sorted.len());
        let mut alloc = vec![Resources::zero(); tree.len()];
        let mut alloc_np = vec![Resources::zero(); tree.len()];
        let mut leaf_demand = vec![Resources::zero(); tree.len()];
        // One buffer for every job's task order.
        let mut order: Vec<usize> = Vec::new();
        let mut bound_at: Vec<PlacedList> = Vec::with_capacity(jobs_sorted.len());
        // Running jobs' expected ends, for reservations.
        let list_ends = config.reservations.max_gangs > 0;
        let mut setup_ends: Vec<(i64, usize)> = Vec::new();
        let estimates =
            super::reserve::Estimates::new(&config.reservations, tree, &snapshot.runtimes);
        let mut end_known: Vec<bool> = Vec::with_capacity(jobs_sorted.len());
        // Intern constraint sets by value (ids in first-seen order over the
        // canonical job/task order, so they are deterministic), in the same
        // pass as the accounting (one visit to each task's constraints).
        let mut constraint_ids: HashMap<usize, u32, PairHash> = HashMap::default();
        let mut by_value: HashMap<&PlacementConstraints, u32> = HashMap::new();
        // The last set interned: most tasks carry a set equal to their
        // neighbour's (often the empty one) in an `Arc` of their own, and
        // comparing with it is cheaper than hashing it.
        let mut last: Option<(&PlacementConstraints, u32)> = None;
        let mut any_task_rules = false;
        for job in jobs_sorted {
            for t in &job.tasks {
                let ptr = Arc::as_ptr(&t.constraints) as usize;
                if let std::collections::hash_map::Entry::Vacant(slot) = constraint_ids.entry(ptr) {
                    let c: &PlacementConstraints = &t.constraints;
                    any_task_rules |= !c.pod_rules.is_empty();
                    let id = match last {
                        Some((l, id)) if *l == *c => id,
                        _ => {
                            let next = by_value.len() as u32;
                            *by_value.entry(c).or_insert(next)
                        }
                    };
                    last = Some((c, id));
                    slot.insert(id);
                }
            }
            order.clear();
            order.extend(0..job.tasks.len());
            if !job.tasks.is_sorted_by(|a, b| a.name <= b.name) {
                order.sort_by(|&a, &b| job.tasks[a].name.cmp(&job.tasks[b].name));
            }
            let mut bound_by_sub: BTreeMap<&str, u32> = BTreeMap::new();
            let mut placed_here = PlacedList::new();
            let mut bound_total = 0;
            let mut pending = Vec::new();
            let mut bound_req = Resources::zero();
            let mut pending_req = Resources::zero();
            let mut started: Option<Timestamp> = None;
            let mut terminating = false;
            for &t in &order {
                let task = &job.tasks[t];
                terminating |= task.terminating;
                match &task.state {
                    TaskState::Pending => {
                        pending.push(t);
                        pending_req.add(&task.requests);
                    }
                    TaskState::Bound { node, gpus } => {
                        bound_total += 1;
                        if let Some(s) = task.started {
                            started = Some(started.map_or(s, |m| m.min(s)));
                        }
                        // Only sub-group minimums need the per-group count.
                        if !job.subgroups.is_empty() {
                            *bound_by_sub
                                .entry(task.subgroup.as_deref().unwrap_or(""))
                                .or_default() += 1;
                        }
                        bound_req.add(&task.requests);
                        match index.get(node.as_str()) {
                            Some(&n) => {
                                // A pod holding DRA GPUs through its claim:
                                // on the claim's devices (KEP-5004).
                                let claimed = match gpus {
                                    None => crate::dra::claimed_slots(task, &states[n]),
                                    Some(_) => None,
                                };
                                let gpus = gpus.as_ref().or(claimed.as_ref());
                                if let Some(slots) = held.hold(
                                    (&nodes, &mut states),
                                    (n, &task.requests, &task.constraints, gpus),
                                    task.name.as_str(),
                                    Some((jobs.len(), t)),
                                ) {
                                    placed_here.push((t, n, slots));
                                }
                            }
                            None => warnings.push(format!(
                                "task {} is bound to unknown node {node}; it counts for its queue but holds no node capacity",
                                task.name
                            )),
                        }
                    }
                }
            }
            // Ranked pods in rank order (stable: equal ranks by name).
            if job.tasks.iter().any(|t| t.rank.is_some()) {
                pending.sort_by_key(|&t| (job.tasks[t].rank.is_none(), job.tasks[t].rank));
            }
            let leaf = tree.get(&job.queue);
            let blocked = Self::static_block(
                job,
                leaf,
                tree,
                &pending,
                (&bound_by_sub, bound_total),
                &largest,
            );
            let walltime = tree.walltime_in(leaf, job.walltime_seconds);
            let leaf = match leaf {
                Some(q) if tree.is_leaf(q) => q,
                _ => QueueTree::ROOT,
            };
            if leaf != QueueTree::ROOT {
                alloc[leaf.0].add(&bound_req);
                if !job.preemptible {
                    alloc_np[leaf.0].add(&bound_req);
                }
                leaf_demand[leaf.0].add(&bound_req);
                // A job larger than every node still counts as demand (its
                // queue's `requested`, its fair share): its pods are there
                // and ask for it; it is only never tried.
                if blocked
                    .as_ref()
                    .is_none_or(|b| matches!(b, PendingReason::NeverFits { .. }))
                {
                    leaf_demand[leaf.0].add(&pending_req);
                }
            }
            bound_at.push(placed_here);
            jobs.push(JobWork {
                index: jobs.len(),
                job,
                leaf,
                pending,
                bound_by_sub,
                bound_total,
                blocked,
                started,
                terminating,
                walltime,
            });
            if let Some(jw) = jobs.last() {
                let listed = list_ends && jw.bound_total > 0;
                end_known.push(listed);
                if listed && let Some(end) = super::reserve::expected_end(jw, now.0, &estimates) {
                    setup_ends.push((end, jw.index));
                }
            }
        }

        // Rules between pods: when any pod has one, every pod is a member
        // (external pods first, in name order, then each job's tasks), and
        // the pods that hold capacity are listed on their nodes.
        let any_rules = any_task_rules || external.iter().any(|p| !p.pod_rules.is_empty());
        let (rules, member_base) = if any_rules {
            let mut members = Vec::new();
            for p in &external {
                members.push(crate::podrules::Member {
                    namespace: &p.namespace,
                    labels: &p.labels,
                    rules: &p.pod_rules,
                });
            }
            let mut base = Vec::with_capacity(jobs.len());
            for jw in &jobs {
                base.push(members.len() as u32);
                for t in &jw.job.tasks {
                    members.push(crate::podrules::Member {
                        namespace: &t.key.namespace,
                        labels: &t.labels,
                        rules: &t.constraints.pod_rules,
                    });
                }
            }
            (crate::podrules::RuleIndex::new(&nodes, members), base)
        } else {
            (None, Vec::new())
        };
        let member_of = |holder: usize, owner: Option<(usize, usize)>| -> Option<u32> {
            rules.as_ref()?;
            match owner {
                Some((j, t)) => member_base.get(j).map(|b| b + t as u32),
                None => ext_ids.get(holder).copied(),
            }
        };

        // Root capacity: allocatable of schedulable nodes minus what
        // pods outside Trainyard hold there.
        let mut capacity = Resources::zero();
        for (i, node) in nodes.iter().enumerate() {
            if !node.unschedulable {
                let mut c = node.allocatable.clone();
                c.saturating_sub(&ext_used[i]);
                capacity.add(&c);
            }
        }

        // The device warnings of the holders accounted so far, after the
        // warnings of the walk (as when accounting was a pass of its own).
        warnings.append(&mut held.warnings);
        if rules.is_some() {
            for &(n, h, owner) in &held.members {
                if let Some(m) = member_of(h, owner) {
                    states[n].members.push(m);
                }
            }
        }
        // GPU slots whose DRA devices claims hold are in use before the
        // holders without known devices choose theirs.
        for st in states.iter_mut() {
            st.sync_gpu_slots();
        }
        // Holders whose devices are unknown get the lowest free ones.
        for (n, h, req, c, name, owner) in std::mem::take(&mut held.implicit) {
            let ask = GpuAsk::of(req, c).unwrap_or(GpuAsk::None);
            let mut pod = PodView::new(req, ask, c);
            pod.member = member_of(h, owner);
            if !req.fits_in(&states[n].free) {
                warnings.push(format!(
                    "node {} is overcommitted by pod {name} ({req} on {} free)",
                    nodes[n].name, states[n].free
                ));
            }
            let slots = states[n].best_devices(nodes[n], &pod);
            states[n].take(nodes[n], &pod, &slots);
            if let Some((j, t)) = owner {
                bound_at[j].push((t, n, slots.into()));
            }
        }

        // What bound pods hold of DRA devices is accounted; what comes
        // next is this cycle's.
        for st in &mut states {
            if let Some(d) = st.dra.as_mut() {
                d.settle();
            }
        }

        // Capacity reserved for nominated pending tasks (preemptors whose
        // victims have gone), until the nomination times out or is
        // withdrawn. Released when the job itself is tried.
        let mut reserved: Vec<Vec<Placed>> = vec![Vec::new(); jobs.len()];
        let mut nominated = vec![false; jobs.len()];
        let timeout = config.preemption.nomination_timeout_seconds;
        // Two passes: first every nomination whose own devices are free,
        // then the rest on the best free devices. So a stale nomination (a
        // job whose devices were given to others since) never takes the
        // devices another preemptor was nominated on. Within each pass the
        // newest nomination goes first: a cycle nominates on devices held
        // for an older nomination only by taking them back from it (the
        // older nominee's pending reason says `preempted by`), and the
        // older `nominatedNodeName` is withdrawn only at the end of that
        // cycle (or not at all, while a pod on its node is going), so the
        // newer one wins wherever both claim the same devices.
        let mut by_age: Vec<(Timestamp, usize, usize)> = Vec::new();
        for (j, jw) in jobs.iter().enumerate() {
            for &t in &jw.pending {
                if let Some(nom) = &jw.job.tasks[t].nomination
                    && now.secs_since(nom.since) < timeout
                {
                    by_age.push((nom.since, j, t));
                }
            }
        }
        // Stable: job order, then placement order, among equals.
        by_age.sort_by_key(|&(since, _, _)| std::cmp::Reverse(since));
        let mut held: std::collections::HashSet<(usize, usize)> = Default::default();
        for exact in [true, false] {
            for &(_, j, t) in &by_age {
                let jw = &jobs[j];
                let task = &jw.job.tasks[t];
                let Some(nom) = &task.nomination else {
                    continue;
                };
                if held.contains(&(j, t)) {
                    continue;
                }
                nominated[j] = true;
                let Some(&n) = index.get(nom.node.as_str()) else {
                    continue;
                };
                let mut pod = PodView::of_task(task);
                pod.member = member_of(usize::MAX, Some((j, t)));
                if !states[n].fits(nodes[n], &pod) {
                    continue;
                }
                // The nominated devices when they are known and free, else
                // the best free ones.
                let devs = &nodes[n].gpus;
                let named: Option<Vec<usize>> = nom.gpus.as_ref().and_then(|idx| {
                    let slots: Vec<usize> = idx
                        .iter()
                        .filter_map(|i| devs.iter().position(|d| d.index == *i))
                        .collect();
                    let free = slots.len() == idx.len()
                        && slots.iter().all(|&s| match pod.ask {
                            GpuAsk::None => true,
                            GpuAsk::Whole(_) => states[n].whole_free(nodes[n], &pod, &[s]),
                            _ => states[n].share_on(nodes[n], s, &pod).is_some(),
                        });
                    free.then_some(slots)
                });
                let slots = match named {
                    Some(slots) => slots,
                    None if exact => continue,
                    None => states[n].best_devices(nodes[n], &pod),
                };
                states[n].take(nodes[n], &pod, &slots);
                held.insert((j, t));
                reserved[j].push((t, n, slots.into()));
            }
        }
        // A nominated job runs from about now: its held room frees at its
        // expected end like a running job's (a reservation that never saw
        // it go would find no room there and hold nothing).
        if list_ends {
            for (j, room) in reserved.iter().enumerate() {
                if !room.is_empty() && !end_known[j] {
                    end_known[j] = true;
                    if let Some(end) = super::reserve::expected_end(&jobs[j], now.0, &estimates) {
                        setup_ends.push((end, j));
                    }
                }
            }
        }

        // Bubble leaf allocations up the tree.
        for q in tree.top_down().into_iter().rev() {
            if let Some(p) = tree.parent(q) {
                let a = alloc[q.0].clone();
                alloc[p.0].add(&a);
                let a = alloc_np[q.0].clone();
                alloc_np[p.0].add(&a);
            }
        }
        // Decayed usage by queue id, when the time-decayed fair share is on.
        let usage: Option<Vec<trainyard_model::Usage>> =
            config.fair_share.usage_half_life_seconds.map(|_| {
                let mut u = vec![trainyard_model::Usage::new(); tree.len()];
                for (name, used) in snapshot.usage.iter() {
                    if let Some(q) = tree.get(name) {
                        u[q.0] = used.clone();
                    }
                }
                u
            });
        let fs = fairshare::compute(tree, &capacity, &leaf_demand, usage.as_deref());
        let mut user_shares: Vec<BTreeMap<&str, u128>> = Vec::new();
        if config.fair_share.usage_half_life_seconds.is_some() {
            user_shares = vec![BTreeMap::new(); tree.len()];
            for (name, users) in snapshot.user_usage.iter() {
                let Some(q) = tree.get(name) else { continue };
                let list: Vec<&trainyard_model::Usage> = users.values().collect();
                let shares = fairshare::dominant_usage_shares(&list);
                user_shares[q.0] = users.keys().map(String::as_str).zip(shares).collect();
            }
        }

        let stats = CycleStats {
            nodes: nodes.len() as u32,
            ..CycleStats::default()
        };
        let scoring = Scoring::new(&config.scoring, &nodes, snapshot);
        let topo = snapshot.topology.as_ref().map(|t| {
            let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            topo::TopoIndex::new(Arc::clone(t), &names)
        });
        // The binds and their indexes grow to at most the pending pods:
        // reserved once, not doubled (and copied) a dozen times. Capped, so
        // a huge backlog on a full cluster reserves little.
        let bind_room = jobs
            .iter()
            .map(|jw| jw.pending.len())
            .sum::<usize>()
            .min(nodes.len().saturating_mul(8).max(1024));
        Cycle {
            world: World {
                config,
                now,
                tree,
                nodes,
                predicates: plugins::default_predicates(),
                scoring,
                topo,
                fair: fs.fair,
                demand: fs.demand,
                user_shares,
                nominated,
                constraint_ids,
                rules,
                member_base,
                pod_predicates: plugins::default_pod_predicates(),
                pod_scorers: plugins::default_pod_scorers(),
                estimates,
            },
            ledger: Ledger {
                jobs,
                state: ClusterState::new(states),
                alloc,
                alloc_np,
                bound_at,
                fresh: std::collections::HashSet::with_capacity_and_hasher(
                    bind_room,
                    Default::default(),
                ),
                bind_index: HashMap::with_capacity_and_hasher(bind_room, Default::default()),
                reserved,
                releasing: Vec::new(),
                reclaimed: Vec::new(),
                set_aside: std::collections::BTreeSet::new(),
                moved: std::collections::BTreeSet::new(),
                fresh_only: false,
                victim_need: Vec::new(),
                running: Vec::new(),
                holds: Vec::new(),
                hold_times: Vec::new(),
                start_at: now.0,
                ends: ends::EndOrder::new(setup_ends),
                end_known,
                holds_lifted: false,
                bound_log: Vec::new(),
                end_seen: 0,
            },
            outcome: Outcome {
                binds: Vec::with_capacity(bind_room),
                placements: Vec::new(),
                evictions: Vec::new(),
                nominations: Vec::new(),
                pending: BTreeMap::new(),
                warnings,
                stats,
                yields: 0,
                dropped_binds: std::collections::HashSet::new(),
                yielded: Vec::new(),
                changed_leaves: std::collections::BTreeSet::new(),
                moves: Vec::new(),
                consolidation_notes: BTreeMap::new(),
            },
            memo: Memo {
                filters: HashMap::new(),
                failed_shapes: HashMap::new(),
                diagnoses: HashMap::new(),
                shapes: HashMap::new(),
                ranked: HashMap::default(),
                room_seen: HashMap::new(),
                copies_seen: HashMap::new(),
                reserve_copies: HashMap::new(),
                ever_fits: HashMap::new(),
                filter_capacity: HashMap::new(),
            },
        }
    }

    /// Reasons a job can never be placed as submitted. `bound`: its bound
    /// pods per sub-group and in all; `largest`: the most any node has
    /// allocatable, per resource.
    pub(super) fn static_block(
        job: &Job,
        leaf: Option<QueueId>,
        tree: &QueueTree,
        pending: &[usize],
        bound: (&BTreeMap<&str, u32>, u32),
        largest: &Resources,
    ) -> Option<PendingReason> {
        match &job.group_problem {
            Some(GroupProblem::Missing { group }) => {
                return Some(PendingReason::WaitingForPodGroup {
                    group: group.clone(),
                });
            }
            Some(GroupProblem::Mismatch { message }) => {
                return Some(PendingReason::SchedulerError {
                    message: message.clone(),
                });
            }
            None => {}
        }
        if let Some(msg) = &job.rejected {
            return Some(PendingReason::Rejected {
                message: msg.clone(),
            });
        }
        match leaf {
            None => {
                return Some(PendingReason::Rejected {
                    message: format!("queue {:?} does not exist", job.queue),
                });
            }
            Some(q) if !tree.is_leaf(q) => {
                let kids: Vec<&str> = tree.children(q).iter().map(|c| tree.name(*c)).collect();
                return Some(PendingReason::Rejected {
                    message: format!(
                        "queue {:?} is not a leaf queue (children: {}); submit jobs to a leaf queue",
                        job.queue,
                        kids.join(", ")
                    ),
                });
            }
            _ => {}
        }
        // A declared walltime above the nearest maximum on the path.
        if let (Some(q), Some(w)) = (leaf, job.walltime_seconds)
            && !pending.is_empty()
            && let Some((a, max)) = tree
                .ancestors(q)
                .find_map(|a| tree.spec(a).max_walltime_seconds.map(|m| (a, m)))
            && w > max
        {
            return Some(PendingReason::ExceedsMaxWalltime {
                queue: tree.path(a).to_string(),
                walltime_seconds: w,
                max_seconds: max,
            });
        }
        if let Some(q) = leaf
            && tree
                .ancestors(q)
                .any(|a| !tree.spec(a).limit.is_unlimited())
            && !pending.is_empty()
        {
            // The minimum as `try_gang` would choose it, with nothing bound yet.
            let mut all: Vec<usize> = (0..job.tasks.len()).collect();
            all.sort_by(|&a, &b| job.tasks[a].name.cmp(&job.tasks[b].name));
            let mut min_req = Resources::zero();
            if let Ok(chosen) = select_minimum(job, &all, &BTreeMap::new(), 0, &[]) {
                for t in chosen {
                    min_req.add(&job.tasks[t].requests);
                }
            }
            for a in tree.ancestors(q) {
                if let Some((resource, limit)) = tree.spec(a).limit.first_exceeded(&min_req) {
                    return Some(PendingReason::ExceedsQueueLimit {
                        queue: tree.path(a).to_string(),
                        needs: min_req.get(&resource),
                        resource,
                        limit,
                    });
                }
            }
        }
        for &t in pending {
            let task = &job.tasks[t];
            if !task.constraints.waiting.is_empty() {
                return Some(PendingReason::Waiting {
                    pod: task.name.clone(),
                    what: task.constraints.waiting.clone(),
                });
            }
            if !task.constraints.unsupported.is_empty() {
                return Some(PendingReason::Unsupported {
                    pod: task.name.clone(),
                    features: task.constraints.unsupported.clone(),
                });
            }
            if let Err(message) = GpuAsk::of(&task.requests, &task.constraints) {
                return Some(PendingReason::InvalidRequest {
                    pod: task.name.clone(),
                    message,
                });
            }
        }
        never_fits(job, pending, bound, largest)
    }

    // ---- pass 1: gang minimums ----------------------------------------
}

/// Component-wise maximum of the nodes' allocatable.
fn largest_allocatable(nodes: &[&Node]) -> Resources {
    let mut largest = Resources::zero();
    for node in nodes {
        for (resource, amount) in node.allocatable.iter() {
            if amount > largest.get(&resource) {
                largest.set(&resource, amount);
            }
        }
    }
    largest
}

/// The resource (GPUs first) of which `requests` asks for more than any
/// node has allocatable.
fn beyond_every_node(requests: &Resources, largest: &Resources) -> Option<ResourceName> {
    if requests.fits_in(largest) {
        return None;
    }
    if requests.gpu > largest.gpu {
        return Some(ResourceName::Gpu);
    }
    requests.first_excess(largest)
}

/// `NeverFits` for the first pending pod of `job` larger than every node,
/// when the job's minimum cannot be met without the pods that are (it can
/// with all its pods: else it waits for pods, as `select_minimum` says).
/// An elastic pod above a minimum that is met blocks nothing.
fn never_fits(
    job: &Job,
    pending: &[usize],
    (bound_by_sub, bound_total): (&BTreeMap<&str, u32>, u32),
    largest: &Resources,
) -> Option<PendingReason> {
    let beyond = |t: usize| beyond_every_node(&job.tasks[t].requests, largest);
    // Usually none: nothing allocated then.
    let (t, resource) = pending.iter().find_map(|&t| beyond(t).map(|r| (t, r)))?;
    let fitting: Vec<usize> = pending
        .iter()
        .copied()
        .filter(|&u| beyond(u).is_none())
        .collect();
    let needed = select_minimum(job, pending, bound_by_sub, bound_total, &[]).is_ok()
        && select_minimum(job, &fitting, bound_by_sub, bound_total, &[]).is_err();
    needed.then(|| PendingReason::NeverFits {
        pod: job.tasks[t].name.clone(),
        requested: job.tasks[t].requests.get(&resource),
        largest: largest.get(&resource),
        resource,
    })
}

/// (job, task) of a holder that is one of Trainyard's own tasks.
type Owner = Option<(usize, usize)>;

/// A holder whose devices are unknown: node, holder number, request,
/// constraints, name, owner.
type Waiting<'s> = (
    usize,
    usize,
    &'s Resources,
    &'s PlacementConstraints,
    &'s str,
    Owner,
);

/// A holder with known device indices is accounted at once; this keeps
/// what must wait: the rest, member ids, and device warnings.
#[derive(Default)]
struct Held<'s> {
    /// Holders numbered so far.
    count: usize,
    /// (node, holder number, owner) of the holders accounted, in order.
    members: Vec<(usize, usize, Owner)>,
    /// Holders without device indices, in order.
    implicit: Vec<Waiting<'s>>,
    warnings: Vec<String>,
}

impl<'s> Held<'s> {
    /// Numbers one holder on node `n`; accounts it on its devices when
    /// their indices are known and returns the slots, else keeps it for
    /// later. `owner`: (job, task) for Trainyard's own tasks.
    fn hold(
        &mut self,
        (nodes, states): (&[&Node], &mut [NodeState]),
        (n, req, c, gpus): (
            usize,
            &'s Resources,
            &'s PlacementConstraints,
            Option<&Vec<u32>>,
        ),
        name: &'s str,
        owner: Owner,
    ) -> Option<Slots> {
        let h = self.count;
        self.count += 1;
        let Some(idx) = gpus else {
            self.implicit.push((n, h, req, c, name, owner));
            return None;
        };
        let ask = GpuAsk::of(req, c).unwrap_or(GpuAsk::None);
        let pod = PodView::new(req, ask, c);
        // Devices are usually numbered by position: look there first.
        let devs = &nodes[n].gpus;
        let mut slots = Slots::new();
        for &i in idx {
            let at = match devs.get(i as usize) {
                Some(d) if d.index == i => Some(i as usize),
                _ => devs.iter().position(|d| d.index == i),
            };
            if let Some(a) = at {
                slots.push(a);
            }
        }
        if slots.len() != idx.len() {
            self.warnings.push(format!(
                "pod {name} holds GPU indices {idx:?} not all present on node {}",
                nodes[n].name
            ));
        }
        // Two holders on one device: whole use, or shares above one GPU.
        for &slot in &slots {
            let add = ask.milli_on(&nodes[n].gpus[slot]).unwrap_or(1000);
            if states[n].gpu_used[slot] + add > 1000 {
                self.warnings.push(format!(
                    "pod {name} claims GPU {} on node {} that other pods already hold; the device is counted once",
                    nodes[n].gpus[slot].index, nodes[n].name
                ));
            }
        }
        states[n].take(nodes[n], &pod, &slots);
        self.members.push((n, h, owner));
        Some(slots)
    }
}
