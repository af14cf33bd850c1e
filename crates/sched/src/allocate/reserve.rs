//! Reservations for starving gangs, and conservative backfill
//! (docs/scheduling.md, section 2).
//!
//! When a gang the walk meets has waited `reservations.starvingAfterSeconds`
//! and its minimum does not fit, the cycle projects the future on its own
//! node state: running jobs leave in the order of their expected end
//! (start plus walltime; without one, start plus the runtime its queue's
//! jobs were observed to run, with `reservations.runtimeEstimate`; else it
//! never leaves), and after each
//! group of ends the gang's minimum is placed again by the one node
//! search. The first time it fits is the reservation's start; the nodes it
//! took there are held from then on (`NodeState::held_until`), and the
//! projection is rolled back.
//!
//! A held node takes a pod only if the pod's job ends by the hold's start
//! (`PodView::ends`), so every later placement of the cycle, by any pass,
//! is conservative backfill: it never delays the reservation. Jobs
//! without a walltime never use held nodes. The search is exponential
//! then binary over the groups of ends, so a projection costs
//! `O(log groups)` placement tries.

use super::ends::EndOrder;
use super::*;
use crate::config::ReservationConfig;
use trainyard_model::RuntimeSamples;

/// A reservation made this cycle.
pub(super) struct Hold {
    /// The reserved job.
    pub(super) job: usize,
    /// When its minimum is expected to fit (ms).
    pub(super) start: i64,
    /// Node indices held for it, ascending, each with what the
    /// reservation leaves over there (`NodeState::held_slack`).
    pub(super) nodes: Vec<(usize, Resources)>,
}

impl<'s> Cycle<'s> {
    /// Whether job `j`, whose minimum just failed with `reason`, gets a
    /// reservation: reservations left this cycle, a lack of room (not a
    /// limit or a rule), waited long enough, and it would fit on its nodes
    /// if they were empty. Its minimum, when it does.
    pub(super) fn wants_reservation(
        &mut self,
        j: usize,
        reason: &PendingReason,
    ) -> Option<super::evict::Minimum> {
        let cfg = self.world.config.reservations;
        if self.ledger.holds.len() >= cfg.max_gangs as usize || !reason.is_lack_of_room() {
            return None;
        }
        let job = self.ledger.jobs[j].job;
        if self.world.now.secs_since(job.submit_time) < cfg.starving_after_seconds {
            return None;
        }
        // Nothing running is expected to end: no projection can help.
        self.refresh_end_order();
        if self.ledger.ends.is_empty() {
            return None;
        }
        let min = self.minimum_of(j)?;
        self.could_ever_fit(j, min.0[0], &min.1).then_some(min)
    }

    /// Projects when and where job `j`'s minimum `min` fits as running
    /// jobs end, and holds those nodes from then (see the module comment).
    /// Nothing is held when it never fits within the jobs' walltimes.
    pub(super) fn reserve(&mut self, j: usize, min: super::evict::Minimum) {
        self.refresh_end_order();
        // Taken out while the state changes, put back after.
        let mut order = std::mem::take(&mut self.ledger.ends);
        if !order.is_empty() {
            self.reserve_over(j, min, &mut order);
        }
        self.ledger.ends = order;
    }

    /// [`Cycle::reserve`] over running jobs by expected end, in groups
    /// of equal end times (`order`, sorted as far as the probes read).
    fn reserve_over(
        &mut self,
        j: usize,
        (chosen, needs, topo_search): super::evict::Minimum,
        order: &mut EndOrder,
    ) {
        let now = self.world.now.0;
        let outer = self.ledger.state.begin();
        // Its own nominated room and holds are its to use.
        self.ledger.release_reservations(&self.world, j);
        self.ledger.release_holds(&self.world, j);
        // State: `order`'s first `given` jobs gone, `lo_mark` taken there. The
        // probes go 1, 2, 4, ... groups further until the gang fits, then
        // bisect back to the first group after which it fits.
        let mut given = 0usize;
        let mut lo: Option<usize> = None;
        // Groups after which not even the copies of the gang's first pod
        // shape that fit (held nodes counted as usable) reach its count
        // cannot hold it: they are given back without a placement try.
        let mut k = self.skip_short(j, &chosen, order, &mut given);
        if k == order.cuts().len() {
            self.ledger.state.rollback(outer);
            return;
        }
        if k > 0 {
            lo = Some(k - 1);
        }
        let mut lo_mark = self.ledger.state.begin();
        let mut step = 1usize;
        let mut found: Option<(usize, Vec<(usize, Resources)>)> = None;
        loop {
            match self.fits_after(j, (&chosen, &needs, topo_search), order, given, k) {
                Some(placed) => {
                    found = Some((k, placed));
                    break;
                }
                None => {
                    lo = Some(k);
                    given = order.cuts()[k];
                    lo_mark = self.ledger.state.begin();
                }
            }
            let more = order.has_group(
                k + step,
                holding(
                    (&self.ledger.bound_at, &self.ledger.reserved),
                    &mut self.ledger.end_known,
                ),
            );
            let last = order.cuts().len() - 1;
            if !more && k == last {
                break;
            }
            k = (k + step).min(last);
            step *= 2;
        }
        let Some((mut hi, mut hi_placed)) = found else {
            self.ledger.state.rollback(outer);
            return;
        };
        self.ledger.state.rollback(lo_mark);
        loop {
            let first = lo.map_or(0, |l| l + 1);
            if first >= hi {
                break;
            }
            let mid = first + (hi - first) / 2;
            match self.fits_after(j, (&chosen, &needs, topo_search), order, given, mid) {
                Some(placed) => {
                    hi = mid;
                    hi_placed = placed;
                    self.ledger.state.rollback(lo_mark);
                }
                None => {
                    lo = Some(mid);
                    given = order.cuts()[mid];
                    lo_mark = self.ledger.state.begin();
                }
            }
        }
        self.ledger.state.rollback(outer);
        let start = order.group_end(hi).max(now);
        let nodes = hi_placed;
        for (n, slack) in nodes.iter().cloned() {
            // `slack` already counts an earlier hold's slack as the gang's
            // pods left it; an unheld node's `held_until` is `i64::MAX`.
            let until = self.ledger.state.nodes()[n].held_until.min(start);
            self.ledger.state.hold(n, until, slack);
        }
        if let Err(i) = self.ledger.hold_times.binary_search(&start) {
            self.ledger.hold_times.insert(i, start);
        }
        self.ledger.holds.push(Hold {
            job: j,
            start,
            nodes,
        });
    }

    /// Brings `Ledger::ends` up to date: jobs this cycle bound since the
    /// last look are added with their expected ends.
    fn refresh_end_order(&mut self) {
        let l = &mut self.ledger;
        let now = self.world.now.0;
        let mut added: Vec<(i64, usize)> = Vec::new();
        for &v in &l.bound_log[l.end_seen..] {
            if !l.end_known[v] {
                l.end_known[v] = true;
                if let Some(e) = expected_end(&l.jobs[v], now, &self.world.estimates) {
                    added.push((e, v));
                }
            }
        }
        l.end_seen = l.bound_log.len();
        l.ends.add(added);
    }

    /// Gives back, group by group from the first, the running jobs after
    /// whose end the copies of the gang's first pod shape that fit on its
    /// nodes (as the gang would run from that end: held nodes by its end
    /// then) still fall short of that shape's pods; returns the first
    /// group where they do not (its jobs not given), or the number of
    /// groups when none. `given` follows what was given. A necessary
    /// condition only: the placement search confirms.
    fn skip_short(
        &mut self,
        j: usize,
        chosen: &[usize],
        order: &mut EndOrder,
        given: &mut usize,
    ) -> usize {
        if !order.has_group(
            0,
            holding(
                (&self.ledger.bound_at, &self.ledger.reserved),
                &mut self.ledger.end_known,
            ),
        ) {
            return 0;
        }
        let job = self.ledger.jobs[j].job;
        let head = &job.tasks[chosen[0]];
        let need = super::run_end(job, chosen, 0) as i64;
        let key = self.memo.static_filter(&self.world, &head.constraints);
        let Some(mask) = self.memo.filters.get(&key).map(|f| f.mask.clone()) else {
            return 0;
        };
        // Only the holds' nodes can be held (each hold lists its nodes).
        let mut held: Vec<usize> = self
            .ledger
            .holds
            .iter()
            .flat_map(|h| h.nodes.iter().map(|(n, _)| *n))
            .filter(|&n| mask[n] && self.ledger.state.nodes()[n].held_until != i64::MAX)
            .collect();
        held.sort_unstable();
        held.dedup();
        let mut pod = PodView::of_task(head);
        let nodes = &self.world.nodes;
        let copies_on = |st: &ClusterState, pod: &PodView, n: usize| -> i64 {
            if mask[n] {
                i64::from(st.nodes()[n].copies(nodes[n], pod))
            } else {
                0
            }
        };
        // The copies per node now, kept per shape and end class across the
        // cycle's reservations: only nodes changed since are counted again.
        self.ledger.start_at = order.group_end(0).max(self.world.now.0);
        pod.ends = self.ledger.ends_of(j);
        self.ledger.start_at = self.world.now.0;
        let cache_key = (key, head.requests.clone());
        let log = self.ledger.state.changes();
        let (mut contrib, mut total) = match self.memo.reserve_copies.remove(&cache_key) {
            Some(mut c) => {
                for &n in &log[c.seen..] {
                    let n = n as usize;
                    let now = copies_on(&self.ledger.state, &pod, n);
                    c.total += now - c.per_node[n];
                    c.per_node[n] = now;
                }
                // Another end class: only held nodes judge by it (and any
                // node held or unheld since was read from the log above).
                if c.ends != pod.ends {
                    for &n in &held {
                        let now = copies_on(&self.ledger.state, &pod, n);
                        c.total += now - c.per_node[n];
                        c.per_node[n] = now;
                    }
                }
                (c.per_node, c.total)
            }
            None => {
                let contrib: Vec<i64> = (0..nodes.len())
                    .map(|n| copies_on(&self.ledger.state, &pod, n))
                    .collect();
                let total = contrib.iter().sum();
                (contrib, total)
            }
        };
        // Kept as the gives below leave it, as of the log before them:
        // the next use reads every node they (and their rollback) touched
        // again.
        let seen = log.len();
        let mut ends_now = pod.ends;
        let mut k = 0;
        while order.has_group(
            k,
            holding(
                (&self.ledger.bound_at, &self.ledger.reserved),
                &mut self.ledger.end_known,
            ),
        ) {
            let upto = order.cuts()[k];
            // The gang's end class if it started at this group's end.
            self.ledger.start_at = order.group_end(k).max(self.world.now.0);
            pod.ends = self.ledger.ends_of(j);
            self.ledger.start_at = self.world.now.0;
            let mark = self.ledger.state.begin();
            if ends_now != pod.ends {
                for &n in &held {
                    let c = copies_on(&self.ledger.state, &pod, n);
                    total += c - contrib[n];
                    contrib[n] = c;
                }
            }
            ends_now = pod.ends;
            for &(_, v) in order.sorted()[*given..upto].iter().filter(|e| e.1 != j) {
                self.ledger.give_job(&self.world, v, |st, n| {
                    let c = copies_on(st, &pod, n);
                    total += c - contrib[n];
                    contrib[n] = c;
                });
            }
            if total >= need {
                self.ledger.state.rollback(mark);
                break;
            }
            *given = upto;
            k += 1;
        }
        self.memo.reserve_copies.insert(
            cache_key,
            super::ReserveCopies {
                seen,
                ends: ends_now,
                per_node: contrib,
                total,
            },
        );
        k
    }

    /// With the first `given` jobs of `order` gone, gives back the rest of
    /// its groups up to group `k` too and tries the minimum at group `k`'s
    /// end time: the nodes it takes then, each with what stays free there
    /// after it. The placement is rolled back, the gives are kept.
    fn fits_after(
        &mut self,
        j: usize,
        (chosen, needs, topo_search): (&[usize], &Resources, bool),
        order: &EndOrder,
        given: usize,
        k: usize,
    ) -> Option<Vec<(usize, Resources)>> {
        let upto = order.cuts()[k];
        for &(_, v) in order.sorted()[given..upto].iter().filter(|e| e.1 != j) {
            self.ledger.give_job(&self.world, v, |_, _| {});
        }
        let mark = self.ledger.state.begin();
        self.ledger.start_at = order.group_end(k).max(self.world.now.0);
        let placed = self
            .place_chosen_or(j, chosen, needs, topo_search, false)
            .ok()
            .map(|placed| {
                let mut nodes: Vec<usize> = placed.iter().map(|(_, n, _)| *n).collect();
                nodes.sort_unstable();
                nodes.dedup();
                let st = self.ledger.state.nodes();
                // What stays free there after the gang; on a node an
                // earlier reservation holds, no more than that one's slack
                // once the gang's pods took from it.
                nodes
                    .into_iter()
                    .map(|n| {
                        let s = &st[n];
                        if s.held_until == i64::MAX {
                            (n, s.free.clone())
                        } else {
                            (n, s.free.min(&s.held_slack))
                        }
                    })
                    .collect::<Vec<_>>()
            });
        self.ledger.start_at = self.world.now.0;
        self.ledger.state.rollback(mark);
        placed
    }

    /// Per hold: the jobs backfilled ahead of its gang, as the cluster
    /// shows them (so the count changes only when such a job starts or
    /// ends, not from cycle to cycle): jobs with a pod on a held node,
    /// started after the gang was submitted (or bound by this cycle), and
    /// expected to end by the reservation's start. Only jobs in the end
    /// order up to the latest start can count.
    fn backfilled(&mut self, holds: &[Hold]) -> Vec<u32> {
        let mut counts = vec![0u32; holds.len()];
        let Some(latest) = holds.iter().map(|h| h.start).max() else {
            return counts;
        };
        let mut on_node: Vec<smallvec::SmallVec<[u32; 1]>> = Vec::new();
        for (i, h) in holds.iter().enumerate() {
            for (n, _) in &h.nodes {
                if on_node.len() <= *n {
                    on_node.resize(*n + 1, smallvec::SmallVec::new());
                }
                on_node[*n].push(i as u32);
            }
        }
        // Jobs bound since the last reservation are added first.
        self.refresh_end_order();
        let l = &mut self.ledger;
        l.ends.cover(
            latest,
            holding((&l.bound_at, &l.reserved), &mut l.end_known),
        );
        let l = &self.ledger;
        let ends = l.ends.sorted();
        let upto = ends.partition_point(|e| e.0 <= latest);
        let mut hit: Vec<u32> = Vec::new();
        for &(end, v) in &ends[..upto] {
            hit.clear();
            for (_, n, _) in &l.bound_at[v] {
                if let Some(hs) = on_node.get(*n) {
                    hit.extend(hs.iter().copied());
                }
            }
            if hit.is_empty() {
                continue;
            }
            hit.sort_unstable();
            hit.dedup();
            let started = if l.bound_at[v]
                .iter()
                .any(|(t, _, _)| l.fresh.contains(&(v, *t)))
            {
                self.world.now
            } else {
                l.jobs[v].started.unwrap_or(Timestamp(i64::MIN))
            };
            for &i in &hit {
                let h = &holds[i as usize];
                let gang = l.jobs[h.job].job;
                if v != h.job && started >= gang.submit_time && end <= h.start {
                    counts[i as usize] += 1;
                }
            }
        }
        counts
    }

    /// The reservations as decided, and each reserved job's pending reason
    /// (the failure it had kept as `detail`). A reserved job that was
    /// placed after all (by reclaim, say) keeps its own reason and shows no
    /// reservation.
    pub(super) fn finish_reservations(&mut self) -> Vec<Reservation> {
        let mut out = Vec::new();
        let holds = std::mem::take(&mut self.ledger.holds);
        let backfill = self.backfilled(&holds);
        for (h, backfilled) in holds.into_iter().zip(backfill) {
            let Some(reason) = self.outcome.pending.get(&h.job) else {
                continue;
            };
            let detail = match reason {
                PendingReason::InQuotaNoRoom { detail, .. } => detail.clone(),
                r if r.is_lack_of_room() => r.to_string(),
                _ => continue,
            };
            let names: std::collections::BTreeSet<&str> = h
                .nodes
                .iter()
                .map(|(n, _)| self.world.nodes[*n].name.as_str())
                .collect();
            let held: Vec<usize> = h.nodes.iter().map(|(n, _)| *n).collect();
            let domain = self.world.tightest_domain(&held);
            let jw = &self.ledger.jobs[h.job];
            let nodes: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            self.outcome.pending.insert(
                h.job,
                PendingReason::Reserved {
                    start: Timestamp(h.start),
                    starts_in_seconds: Timestamp(h.start).secs_since(self.world.now),
                    nodes: nodes.clone(),
                    domain: domain.clone(),
                    backfilled,
                    detail,
                },
            );
            out.push(Reservation {
                job: JobId(jw.job.id.clone()),
                queue: self.world.queue_label(jw),
                start: Timestamp(h.start),
                starts_in_seconds: Timestamp(h.start).secs_since(self.world.now),
                nodes: nodes.into_iter().map(NodeName).collect(),
                domain,
                backfilled,
            });
        }
        out
    }
}

impl<'s> Ledger<'s> {
    /// Gives back every placed pod of job `v` and the room held for its
    /// nominated pods (inside the caller's transaction), calling
    /// `after(state, node)` after each. `reserved[v]` lists room taken in
    /// the state: it is emptied when the job uses it.
    fn give_job(&mut self, w: &World<'_>, v: usize, mut after: impl FnMut(&ClusterState, usize)) {
        let job = self.jobs[v].job;
        for (t, n, slots) in self.bound_at[v].iter().chain(&self.reserved[v]) {
            let pod = w.pod_of(job, v, *t);
            self.state.give(*n, w.nodes[*n], &pod, slots);
            after(&self.state, *n);
        }
    }

    /// Job `j`'s end for the holds (`PodView::ends`): its start (now; in
    /// the eviction pass, once its victims are gone; or the projected
    /// start: `Ledger::start_at`) plus its walltime, rounded up to the first
    /// hold start at or after it, so jobs that may use the same held nodes
    /// share one pod shape; `i64::MAX` when no node is held or the job has
    /// no walltime, or a running job's walltime is over at the time
    /// placements are for (as [`expected_end`] no longer expects it to end
    /// then, its pods must not take held room).
    pub(super) fn ends_of(&self, j: usize) -> i64 {
        if self.hold_times.is_empty() {
            return i64::MAX;
        }
        let jw = &self.jobs[j];
        let Some(wall) = jw.walltime else {
            return i64::MAX;
        };
        let start = jw.started.map_or(self.start_at, |s| s.0.min(self.start_at));
        let Some(end) = walltime_end(start, wall, self.start_at) else {
            return i64::MAX;
        };
        match self.hold_times.binary_search(&end) {
            Ok(i) => self.hold_times[i],
            Err(i) => self.hold_times.get(i).copied().unwrap_or(i64::MAX),
        }
    }

    /// The longest a pod evicted now may take to go (ms): the largest
    /// grace period (`Task::grace_seconds`, else Kubernetes' default) of
    /// the running preemptible pods. A job that evicts starts no sooner,
    /// so the eviction pass judges held nodes by its end from then. Read
    /// only when something is held.
    pub(super) fn victim_wait_ms(&self) -> i64 {
        self.jobs
            .iter()
            .filter(|jw| jw.job.preemptible && jw.bound_total > 0)
            .flat_map(|jw| jw.job.tasks.iter())
            .filter(|t| !t.is_pending() && !t.terminating)
            .map(|t| {
                t.grace_seconds
                    .unwrap_or(trainyard_model::DEFAULT_GRACE_SECONDS)
            })
            .max()
            .map_or(0, |s| {
                i64::try_from(s).unwrap_or(i64::MAX).saturating_mul(1000)
            })
    }

    /// Job `j` is about to use the room held for its nominated pods
    /// (inside the caller's transaction). Set-up listed it in the end
    /// order, so a hold that starts before its expected end counted that
    /// room as taken then and left it out of the node's slack: its pods,
    /// which run past the hold's start, would be refused their own room.
    /// The room is added to such a node's slack; the reservation never
    /// counted on it.
    pub(super) fn credit_own_room(&mut self, w: &World<'_>, j: usize) {
        if self.hold_times.is_empty() || self.reserved[j].is_empty() {
            return;
        }
        let job = self.jobs[j].job;
        let end = expected_end(&self.jobs[j], w.now.0, &w.estimates).unwrap_or(i64::MAX);
        for i in 0..self.reserved[j].len() {
            let (t, n) = (self.reserved[j][i].0, self.reserved[j][i].1);
            let st = &self.state.nodes()[n];
            if st.held_until == i64::MAX || st.held_until >= end {
                continue;
            }
            let pod = w.pod_of(job, j, t);
            let mut add = pod.req.clone();
            if pod.ask.is_shared() {
                // A share counts as a whole device against the slack.
                add.gpu = trainyard_model::resources::MILLI_PER_GPU;
            }
            let mut slack = st.held_slack.clone();
            slack.add(&add);
            let until = st.held_until;
            self.state.hold(n, until, slack);
        }
    }

    /// Whether job `j` holds a reservation made this cycle.
    pub(super) fn has_hold(&self, j: usize) -> bool {
        self.holds.iter().any(|h| h.job == j)
    }

    /// Lifts job `j`'s own holds (it is being placed), inside the caller's
    /// transaction: each node it held is held again only by the other
    /// reservations on it (the earliest start), with no more slack than
    /// it has now (what longer pods took stays taken).
    pub(super) fn release_holds(&mut self, _w: &World<'_>, j: usize) {
        let Some(mine) = self.holds.iter().position(|h| h.job == j) else {
            return;
        };
        for i in 0..self.holds[mine].nodes.len() {
            let n = self.holds[mine].nodes[i].0;
            let mut until = i64::MAX;
            let mut slack: Option<Resources> = None;
            for h in self.holds.iter().filter(|h| h.job != j) {
                if let Ok(k) = h.nodes.binary_search_by_key(&n, |(m, _)| *m) {
                    until = until.min(h.start);
                    let s = &h.nodes[k].1;
                    slack = Some(slack.map_or_else(|| s.clone(), |x| x.min(s)));
                }
            }
            self.state
                .hold(n, until, slack.unwrap_or_else(Resources::zero));
        }
    }
}

/// The end (ms) of a walltime of `wall` seconds from `start`, unless it is
/// over at `at`: a walltime already over says nothing of when the job
/// ends (the service ends it only with `enforceWalltime`), so the job is
/// then taken as one without a walltime ([`expected_end`], `ends_of`).
fn walltime_end(start: i64, wall: u64, at: i64) -> Option<i64> {
    let end = start.saturating_add(wall_ms(wall));
    (end >= at).then_some(end)
}

/// A walltime in seconds as milliseconds, saturating.
fn wall_ms(seconds: u64) -> i64 {
    i64::try_from(seconds)
        .unwrap_or(i64::MAX)
        .saturating_mul(1000)
}

/// What the end order keeps of the jobs listed as running: those that
/// hold nodes (bound pods, or room held for nominated ones). One that
/// holds none (its pods are on nodes the snapshot does not have, or it
/// spent its nominated room on nothing) is dropped and no longer known, so
/// if the cycle binds it later it is listed again with its end.
fn holding<'a>(
    (bound_at, reserved): (&'a [PlacedList], &'a [Vec<Placed>]),
    known: &'a mut [bool],
) -> impl FnMut(usize) -> bool + 'a {
    move |v| {
        let holds = !bound_at[v].is_empty() || !reserved[v].is_empty();
        if !holds {
            known[v] = false;
        }
        holds
    }
}

/// When running job `jw` is expected to end (ms): its start plus its
/// walltime (declared, else its queue's default); now for a job with a pod
/// terminating. Without a walltime, or past it (the service evicts at
/// expiry only with `service.enforceWalltime`), its start plus the
/// runtime `estimates` gives its leaf queue for a job that ran as long as
/// it has: a walltime already over says nothing of when the job ends, and
/// taken as "now" it would start reservations on its nodes now, cycle
/// after cycle, with nothing allowed to backfill them. `None` without
/// either: it is never expected to end.
pub(super) fn expected_end(jw: &JobWork<'_>, now: i64, estimates: &Estimates<'_>) -> Option<i64> {
    if jw.terminating {
        return Some(now);
    }
    let start = jw.started.map_or(now, |s| s.0.min(now));
    if let Some(end) = jw.walltime.and_then(|wall| walltime_end(start, wall, now)) {
        return Some(end);
    }
    estimates
        .runtime(jw.leaf, now.saturating_sub(start))
        .map(|r| start.saturating_add(r))
}

/// The observed runtimes running jobs without a walltime are projected by
/// (`reservations.runtimeEstimate`): per leaf queue id, when it has
/// enough samples, the samples and the estimate for each position a job's
/// elapsed time can fall at among them (`RuntimeSamples::percentile_from`,
/// computed once per cycle rather than once per running job).
#[derive(Default)]
pub(super) struct Estimates<'s> {
    by_leaf: Vec<Option<(&'s RuntimeSamples, Vec<i64>)>>,
}

impl<'s> Estimates<'s> {
    /// The snapshot's runtimes of leaf queues with at least `minSamples`;
    /// none when the config has no `runtimeEstimate`.
    pub(super) fn new(
        config: &ReservationConfig,
        tree: &QueueTree,
        runtimes: &'s BTreeMap<String, RuntimeSamples>,
    ) -> Self {
        let Some(e) = config.estimate() else {
            return Estimates::default();
        };
        let mut by_leaf = vec![None; tree.len()];
        for (name, samples) in runtimes {
            if let Some(q) = tree.get(name)
                && tree.is_leaf(q)
                && samples.len() >= e.min_samples as usize
            {
                let at: Vec<i64> = (0..samples.len())
                    .filter_map(|first| samples.percentile_from(first, e.percentile))
                    .collect();
                by_leaf[q.0] = Some((samples, at));
            }
        }
        Estimates { by_leaf }
    }

    /// How long a job of leaf `leaf` that has run `elapsed` ms is expected
    /// to run in all; always more than `elapsed`.
    fn runtime(&self, leaf: QueueId, elapsed: i64) -> Option<i64> {
        let (samples, at) = self.by_leaf.get(leaf.0)?.as_ref()?;
        at.get(samples.first_longer(elapsed)).copied()
    }
}

impl World<'_> {
    /// The queue a job is reported under: its leaf's path, else the name
    /// it gave (a queue that does not exist).
    pub(super) fn queue_label(&self, jw: &JobWork<'_>) -> String {
        if jw.leaf == QueueTree::ROOT {
            jw.job.queue.clone()
        } else {
            self.tree.path(jw.leaf).to_string()
        }
    }

    /// The tightest topology domain holding all of `nodes`, as
    /// `LEVEL NAME` (`leaf g3`); `None` without a topology or when only
    /// the whole cluster does.
    pub(super) fn tightest_domain(&self, nodes: &[usize]) -> Option<String> {
        let ti = self.topo.as_ref()?;
        let first = *nodes.first()?;
        (0..ti.domain_of.len()).find_map(|l| {
            let d = ti.domain_of[l][first]?;
            nodes
                .iter()
                .all(|&n| ti.domain_of[l][n] == Some(d))
                .then(|| format!("{} {}", ti.level_name(l), ti.domain_name(l, d)))
        })
    }
}
