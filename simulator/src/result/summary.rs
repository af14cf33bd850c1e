//! The summary of a simulation: waits, utilisation, fairness, preemption
//! and topology, computed from the records and samples of [`SimOutput`].

use super::*;

/// Mean and percentiles, in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

impl Stats {
    /// From millisecond samples; nearest-rank percentiles.
    pub fn of(mut ms: Vec<i64>) -> Stats {
        if ms.is_empty() {
            return Stats::default();
        }
        ms.sort_unstable();
        let n = ms.len();
        let rank = |p: f64| -> f64 {
            // Nearest rank: ceil(p × n), 1-based.
            let r = ((p * n as f64).ceil() as usize).clamp(1, n);
            ms[r - 1] as f64 / 1000.0
        };
        let sum: i128 = ms.iter().map(|v| *v as i128).sum();
        Stats {
            count: n as u64,
            mean: round3(sum as f64 / n as f64 / 1000.0),
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
        }
    }
}

/// Rounds to 3 decimals so JSON output is stable and readable.
fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Waits of the jobs of one size class (see `Summary::wait_by_size`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SizeClassWait {
    /// `≤1`, `2-8`, `9-64` or `65+` (GPUs).
    pub class: String,
    /// Of its jobs, those that never started.
    pub never_started: u64,
    pub wait_seconds: Stats,
}

/// The size classes of `Summary::wait_by_size`: name and largest GPU
/// count (milli-GPU) in it.
pub(crate) const SIZE_CLASSES: [(&str, u64); 4] = [
    ("≤1", 1000),
    ("2-8", 8000),
    ("9-64", 64_000),
    ("65+", u64::MAX),
];

/// Per-queue part of the summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueSummary {
    pub jobs: u64,
    pub completed: u64,
    pub wait_seconds: Stats,
    pub jct_seconds: Stats,
    /// Time-weighted mean of allocated / fair share (GPU), while it had demand.
    pub mean_share_ratio: f64,
    /// Pods of this queue's jobs evicted (the queue as victim).
    #[serde(default)]
    pub evicted_pods: u64,
    /// GPU-hours this queue's jobs lost to evictions.
    #[serde(default)]
    pub lost_gpu_hours: f64,
    /// Times the queue became starved (see [`PreemptionSummary`]).
    #[serde(default)]
    pub starved_episodes: u64,
    /// Time from becoming starved to being within one gang of its fair
    /// share, over the episodes that ended.
    #[serde(default)]
    pub time_to_fair_share_seconds: Stats,
    /// How long the queue had been starved when the run ended (0: not
    /// starved then).
    #[serde(default)]
    pub starved_at_end_seconds: f64,
    /// GPU-hours its jobs held over the run (leaf queues).
    #[serde(default)]
    pub gpu_hours: f64,
    /// The same per week of the run (the last week may be short).
    #[serde(default)]
    pub gpu_hours_by_week: Vec<f64>,
}

/// Reclaim and preemption over a run.
///
/// With `G` the GPUs of the largest gang minimum among a leaf queue's jobs
/// (not rejected), the queue is *within one gang* of its fair share when
/// `allocated ≥ fair share` or `allocated + G > fair share` (no further gang
/// of it fits under its share), and *starved* at a queue sample when it has
/// pending GPU demand (demand > allocated) and is not within one gang. A
/// starved episode starts at the first starved sample and ends at the first
/// later sample where the queue is within one gang; its length is the
/// *time to fair share*. GPUs only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionSummary {
    /// Grace period between an eviction and the pod's removal.
    pub grace_seconds: f64,
    /// The run's lost-work model: `restart` or `checkpoint`.
    pub lost_work: String,
    /// Checkpoint interval, with `checkpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_every_seconds: Option<f64>,
    /// Victim jobs of reclaim: each cycle counts the distinct jobs it
    /// evicted pods of.
    pub reclaims: u64,
    /// Victim jobs of preemption, counted the same way.
    pub preemptions: u64,
    /// Pods evicted (reclaim and preemption).
    pub evicted_pods: u64,
    /// GPUs × lost time of pods killed after an eviction, in GPU-hours.
    pub lost_gpu_hours: f64,
    /// The same for jobs killed by node failures.
    pub node_fault_lost_gpu_hours: f64,
    /// Jobs moved by consolidation: each cycle counts the distinct jobs
    /// it moved (absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub moves: u64,
    /// Pods evicted to move their jobs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub moved_pods: u64,
    /// GPUs × lost time of moved pods, in GPU-hours.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub move_lost_gpu_hours: f64,
    /// Starved episodes over all leaf queues.
    pub starved_episodes: u64,
    /// Time to fair share over all leaf queues' episodes that ended.
    pub time_to_fair_share_seconds: Stats,
    /// Leaf queues still starved when the run ended.
    pub starved_at_end: u64,
}

/// `summary.json`: deterministic (no wall-clock values; see `timing.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub policy: String,
    pub jobs: u64,
    pub completed: u64,
    pub running_at_end: u64,
    pub pending_at_end: u64,
    pub rejected: u64,
    /// Jobs ended at their walltime.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub timed_out: u64,
    pub wait_seconds: Stats,
    /// Waits by the job's size in GPUs (`≤1`, `2-8`, `9-64`, `65+`;
    /// classes without jobs left out; jobs without GPUs in none). Unlike
    /// `wait_seconds`, a job that never started counts, with its wait
    /// until the end of the run (a lower bound): starved gangs must show.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wait_by_size: Vec<SizeClassWait>,
    /// Jobs that held a reservation at some time while they waited.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reserved_jobs: u64,
    pub jct_seconds: Stats,
    /// ∫ allocated GPUs dt / ∫ GPU capacity dt over the run.
    pub gpu_allocation_ratio: f64,
    /// Share of the run's time with free GPUs scattered: a job waiting
    /// for room whose minimum's GPUs were free in total
    /// ([`ClusterSample::scattered`]).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub scattered_share: f64,
    /// Time-weighted mean of Jain's index of allocated / fair share (GPU)
    /// across leaf queues with GPU demand.
    pub jain_fairness: f64,
    pub per_queue: BTreeMap<String, QueueSummary>,
    /// Evictions, lost work and time to fair share.
    #[serde(default)]
    pub preemption: PreemptionSummary,
    pub cycles: u64,
    pub events: u64,
    /// DRA claims the core allocated (absent when none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dra_claims: u64,
    pub simulated_seconds: f64,
    /// Placement quality on the network topology; only with a topology.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologySummary>,
}

/// How gangs sat on the fabric. "Gangs" are the jobs that started with two
/// or more pods (the same set under every policy); single-node gangs count
/// as in one leaf, with no hops and rail-aligned.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologySummary {
    /// Domains of the leaf level.
    pub leaf_domains: u32,
    /// Jobs that started with two or more pods.
    pub gangs: u64,
    /// Of those, the ones on more than one node.
    pub multi_node_gangs: u64,
    /// Share of gangs inside one leaf domain.
    pub one_leaf_share: f64,
    /// Mean leaf domains per gang.
    pub mean_leaves: f64,
    /// Mean ring hops that cross a spine, per gang.
    pub mean_spine_crossings: f64,
    /// Share of gangs whose pods are rail-aligned.
    pub rail_aligned_share: f64,
    /// Share of gangs placed in their tightest feasible domain level, over
    /// the gangs the scheduler reported a placement for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_tightest_share: Option<f64>,
    /// Mean run time added by the slowdown model, in percent, per gang.
    pub mean_slowdown_percent: f64,
    /// Time-weighted mean of the largest gang (GPUs) that could still be
    /// placed in one leaf domain.
    pub mean_largest_free_leaf_gpus: f64,
}

/// Allocated / fair share (GPU) of each leaf queue (by leaf name) that
/// has GPU demand and a GPU fair share, in path order.
fn share_ratios<'a>(current: &BTreeMap<&'a str, &'a QueueSample>) -> Vec<(&'a str, f64)> {
    let mut out = Vec::new();
    for s in current.values() {
        if s.demand.gpu > 0 && s.fair_share.gpu > 0 {
            // Jobs name their leaf queue; samples carry it beside the path.
            out.push((
                s.name.as_str(),
                s.allocated.gpu as f64 / s.fair_share.gpu as f64,
            ));
        }
    }
    out
}

/// Jain's fairness index of `xs`: (Σx)² / (n Σx²); 1 when all equal.
pub fn jain(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if s2 == 0.0 {
        return Some(1.0);
    }
    Some(s * s / (xs.len() as f64 * s2))
}

impl SimOutput {
    pub fn summary(&self) -> Summary {
        let end = self.end_time;
        let started: Vec<&JobRecord> = self.jobs.iter().filter(|j| j.start.is_some()).collect();
        let mut per_queue: BTreeMap<String, QueueSummary> = BTreeMap::new();
        let mut by_queue: BTreeMap<&str, (Vec<i64>, Vec<i64>)> = BTreeMap::new();
        for j in &self.jobs {
            let q = per_queue.entry(j.queue.clone()).or_default();
            q.jobs += 1;
            if j.state == JobState::Completed {
                q.completed += 1;
            }
            let e = by_queue.entry(&j.queue).or_default();
            if j.start.is_some() {
                e.0.push(j.wait_ms(end));
            }
            if let Some(t) = j.jct_ms() {
                e.1.push(t);
            }
        }
        for (q, (w, c)) in by_queue {
            if let Some(s) = per_queue.get_mut(q) {
                s.wait_seconds = Stats::of(w);
                s.jct_seconds = Stats::of(c);
            }
        }

        // Time-weighted integrals between consecutive samples.
        let mut alloc_int = 0f64;
        let mut cap_int = 0f64;
        let mut scattered_ms = 0i64;
        for w in self.cluster.windows(2) {
            let dt = (w[1].time.0 - w[0].time.0) as f64;
            alloc_int += w[0].gpu_allocated as f64 * dt;
            cap_int += w[0].gpu_capacity as f64 * dt;
            if w[0].scattered {
                scattered_ms += w[1].time.0 - w[0].time.0;
            }
        }
        if let Some(last) = self.cluster.last() {
            // The last state holds until the end of the run.
            let dt = (end.0 - last.time.0).max(0) as f64;
            alloc_int += last.gpu_allocated as f64 * dt;
            cap_int += last.gpu_capacity as f64 * dt;
            if last.scattered {
                scattered_ms += (end.0 - last.time.0).max(0);
            }
        }

        // Jain's index and share ratios, weighted by time.
        let mut jain_int = 0f64;
        let mut jain_dt = 0f64;
        let mut ratio_int: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
        self.walk_leaves(|t, next, current| {
            let dt = (next.0 - t.0).max(0) as f64;
            let ratios = share_ratios(current);
            for (leaf, x) in &ratios {
                let e = ratio_int.entry(leaf).or_default();
                e.0 += x * dt;
                e.1 += dt;
            }
            let xs: Vec<f64> = ratios.iter().map(|r| r.1).collect();
            if let Some(j) = jain(&xs) {
                jain_int += j * dt;
                jain_dt += dt;
            }
        });
        // GPU-hours per leaf, in total and per week of the run.
        const WEEK_MS: i64 = 7 * 86_400_000;
        let start = self.start_time.0;
        let mut held: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        self.walk_leaves(|t, next, current| {
            for s in current.values() {
                let weeks = held.entry(s.name.clone()).or_default();
                let mut a = t.0;
                while a < next.0 {
                    let w = (a - start).max(0) / WEEK_MS;
                    let b = next.0.min(start + (w + 1) * WEEK_MS);
                    if weeks.len() <= w as usize {
                        weeks.resize(w as usize + 1, 0.0);
                    }
                    weeks[w as usize] += s.allocated.gpu as f64 / 1000.0 * (b - a) as f64 / 3.6e6;
                    a = b;
                }
            }
        });
        for (q, weeks) in held {
            if let Some(s) = per_queue.get_mut(&q) {
                s.gpu_hours = round3(weeks.iter().sum());
                s.gpu_hours_by_week = weeks.into_iter().map(round3).collect();
            }
        }
        for (q, (num, den)) in ratio_int {
            if let Some(s) = per_queue.get_mut(q)
                && den > 0.0
            {
                s.mean_share_ratio = round3(num / den);
            }
        }
        let mut by_size: Vec<(Vec<i64>, u64)> = vec![(Vec::new(), 0); SIZE_CLASSES.len()];
        for j in self.jobs.iter().filter(|j| j.gpu_milli > 0) {
            if j.state == JobState::Rejected || j.submit > end {
                continue;
            }
            let c = SIZE_CLASSES
                .iter()
                .position(|(_, max)| j.gpu_milli <= *max)
                .unwrap_or(SIZE_CLASSES.len() - 1);
            by_size[c].0.push(j.wait_ms(end));
            by_size[c].1 += u64::from(j.start.is_none());
        }
        let wait_by_size = SIZE_CLASSES
            .iter()
            .zip(by_size)
            .filter(|(_, (w, _))| !w.is_empty())
            .map(|((name, _), (w, never))| SizeClassWait {
                class: name.to_string(),
                never_started: never,
                wait_seconds: Stats::of(w),
            })
            .collect();
        let preemption = self.preemption_summary(&mut per_queue);
        let count = |st: JobState| self.jobs.iter().filter(|j| j.state == st).count() as u64;
        let topology = self.topology.as_ref().map(|t| self.topology_summary(t));
        Summary {
            policy: self.policy.clone(),
            jobs: self.jobs.len() as u64,
            completed: count(JobState::Completed),
            running_at_end: count(JobState::Running),
            pending_at_end: count(JobState::Pending),
            rejected: count(JobState::Rejected),
            timed_out: count(JobState::TimedOut),
            wait_seconds: Stats::of(started.iter().map(|j| j.wait_ms(end)).collect()),
            wait_by_size,
            reserved_jobs: self
                .jobs
                .iter()
                .filter(|j| j.reserved_start.is_some())
                .count() as u64,
            jct_seconds: Stats::of(self.jobs.iter().filter_map(|j| j.jct_ms()).collect()),
            scattered_share: {
                let span = (end.0 - self.start_time.0).max(0);
                if span > 0 {
                    round3(scattered_ms as f64 / span as f64)
                } else {
                    0.0
                }
            },
            gpu_allocation_ratio: if cap_int > 0.0 {
                round3(alloc_int / cap_int)
            } else {
                0.0
            },
            jain_fairness: if jain_dt > 0.0 {
                round3(jain_int / jain_dt)
            } else {
                1.0
            },
            per_queue,
            preemption,
            cycles: self.cycles,
            events: self.events,
            dra_claims: self.dra_claims,
            simulated_seconds: round3((end.0 - self.start_time.0) as f64 / 1000.0),
            topology,
        }
    }

    /// Walks the queue samples in time order. Samples are written only when
    /// a queue's numbers change, so each leaf's last sample is carried
    /// forward until its next one: at each distinct sample time `t`, `f`
    /// gets `t`, the next sample time (the run's end after the last) and
    /// the latest sample of every leaf queue seen so far, by path.
    fn walk_leaves<'a>(
        &'a self,
        mut f: impl FnMut(Timestamp, Timestamp, &BTreeMap<&'a str, &'a QueueSample>),
    ) {
        let mut times: Vec<Timestamp> = self.queues.iter().map(|s| s.time).collect();
        times.dedup();
        let mut current: BTreeMap<&str, &QueueSample> = BTreeMap::new();
        let mut idx = 0;
        for (ti, t) in times.iter().enumerate() {
            while idx < self.queues.len() && self.queues[idx].time == *t {
                let s = &self.queues[idx];
                idx += 1;
                if s.is_leaf {
                    current.insert(&s.queue, s);
                }
            }
            let next = times.get(ti + 1).copied().unwrap_or(self.end_time);
            f(*t, next, &current);
        }
    }

    /// Jain's index of allocated / fair share (GPU) across the leaf queues
    /// with GPU demand and a GPU fair share, from each queue sample time on
    /// (`None` while no leaf has both). The summary's `jainFairness` is its
    /// time-weighted mean.
    pub fn jain_series(&self) -> Vec<(Timestamp, Option<f64>)> {
        let mut out = Vec::new();
        self.walk_leaves(|t, _, current| {
            let xs: Vec<f64> = share_ratios(current).iter().map(|r| r.1).collect();
            out.push((t, jain(&xs)));
        });
        out
    }

    /// Starved episodes per leaf queue (path, name) (see [`PreemptionSummary`]):
    /// lengths (ms) of those that ended, and the start of one still open.
    pub fn starved_episodes(&self) -> BTreeMap<(&str, &str), Episodes> {
        // G: the largest gang minimum of each queue, by leaf name.
        let mut gang: BTreeMap<&str, u64> = BTreeMap::new();
        for j in self.jobs.iter().filter(|j| j.state != JobState::Rejected) {
            let g = gang.entry(j.queue.as_str()).or_default();
            *g = (*g).max(j.min_gpu_milli);
        }
        let mut out: BTreeMap<(&str, &str), Episodes> = BTreeMap::new();
        for s in self.queues.iter().filter(|s| s.is_leaf) {
            let g = gang.get(s.name.as_str()).copied().unwrap_or(0);
            let (alloc, fair, demand) = (s.allocated.gpu, s.fair_share.gpu, s.demand.gpu);
            let e = out.entry((s.queue.as_str(), s.name.as_str())).or_default();
            // Within one gang: no further gang of the queue fits under its
            // fair share.
            let within = alloc >= fair || alloc.saturating_add(g) > fair;
            match e.1 {
                None if demand > alloc && !within => e.1 = Some(s.time),
                Some(since) if within => {
                    e.0.push(s.time.0 - since.0);
                    e.1 = None;
                }
                _ => {}
            }
        }
        out
    }

    /// The run's [`PreemptionSummary`]; fills the per-queue eviction and
    /// starvation numbers of `per_queue`.
    fn preemption_summary(
        &self,
        per_queue: &mut BTreeMap<String, QueueSummary>,
    ) -> PreemptionSummary {
        let hours = |milli_ms: u128| round3(milli_ms as f64 / MILLI_GPU_MS_PER_GPU_HOUR as f64);
        let mut lost_evicted = 0u128;
        let mut lost_faults = 0u128;
        let mut lost_moves = 0u128;
        let mut by_queue: BTreeMap<&str, (u64, u128)> = BTreeMap::new();
        for j in &self.jobs {
            lost_evicted += j.lost.evictions as u128;
            lost_faults += j.lost.node_faults as u128;
            lost_moves += j.lost.moves as u128;
            let e = by_queue.entry(&j.queue).or_default();
            e.0 += j.evicted_pods as u64;
            e.1 += j.lost.evictions as u128;
        }
        for (q, (pods, lost)) in by_queue {
            if let Some(s) = per_queue.get_mut(q) {
                s.evicted_pods = pods;
                s.lost_gpu_hours = hours(lost);
            }
        }
        let mut all = Vec::new();
        let mut episodes = 0u64;
        let mut at_end = 0u64;
        for ((_, leaf), (ended, open)) in self.starved_episodes() {
            let n = ended.len() as u64 + open.is_some() as u64;
            episodes += n;
            at_end += open.is_some() as u64;
            all.extend_from_slice(&ended);
            if let Some(s) = per_queue.get_mut(leaf) {
                s.starved_episodes = n;
                s.starved_at_end_seconds = open
                    .map(|t| round3((self.end_time.0 - t.0).max(0) as f64 / 1000.0))
                    .unwrap_or(0.0);
                s.time_to_fair_share_seconds = Stats::of(ended);
            }
        }
        let sum = |f: fn(&EvictionSample) -> u32| -> u64 {
            self.evictions.iter().map(|e| f(e) as u64).sum()
        };
        let m = self.eviction_model;
        PreemptionSummary {
            grace_seconds: round3(m.grace_ms as f64 / 1000.0),
            lost_work: m.lost_work.name().to_string(),
            checkpoint_every_seconds: match m.lost_work {
                LostWork::Checkpoint { every_ms } => Some(round3(every_ms as f64 / 1000.0)),
                LostWork::Restart => None,
            },
            reclaims: sum(|e| e.reclaim_jobs),
            preemptions: sum(|e| e.preempt_jobs),
            evicted_pods: sum(|e| e.reclaim_pods) + sum(|e| e.preempt_pods),
            lost_gpu_hours: hours(lost_evicted),
            node_fault_lost_gpu_hours: hours(lost_faults),
            moves: sum(|e| e.move_jobs),
            moved_pods: sum(|e| e.move_pods),
            move_lost_gpu_hours: hours(lost_moves),
            starved_episodes: episodes,
            time_to_fair_share_seconds: Stats::of(all),
            starved_at_end: at_end,
        }
    }

    fn topology_summary(&self, t: &RunTopology) -> TopologySummary {
        let gangs: Vec<&JobTopology> = self
            .jobs
            .iter()
            .filter_map(|j| j.topology.as_ref())
            .collect();
        let n = gangs.len() as u64;
        let share = |k: usize, of: usize| {
            if of == 0 {
                0.0
            } else {
                round3(k as f64 / of as f64)
            }
        };
        let mean = |sum: u64| share(sum as usize, gangs.len());
        let reported: Vec<bool> = gangs.iter().filter_map(|g| g.in_tightest).collect();
        // Time-weighted largest free leaf, like the allocation ratio.
        let mut int = 0f64;
        let mut dt_sum = 0f64;
        let mut acc = |v: Option<u32>, dt: f64| {
            if let Some(v) = v {
                int += v as f64 * dt;
                dt_sum += dt;
            }
        };
        for w in self.cluster.windows(2) {
            acc(
                w[0].largest_free_leaf_gpus,
                (w[1].time.0 - w[0].time.0) as f64,
            );
        }
        if let Some(last) = self.cluster.last() {
            acc(
                last.largest_free_leaf_gpus,
                (self.end_time.0 - last.time.0).max(0) as f64,
            );
        }
        TopologySummary {
            leaf_domains: t.leaf_domains,
            gangs: n,
            multi_node_gangs: gangs.iter().filter(|g| g.nodes > 1).count() as u64,
            one_leaf_share: share(gangs.iter().filter(|g| g.leaves <= 1).count(), gangs.len()),
            mean_leaves: mean(gangs.iter().map(|g| g.leaves as u64).sum()),
            mean_spine_crossings: mean(gangs.iter().map(|g| g.spine_crossings as u64).sum()),
            rail_aligned_share: share(gangs.iter().filter(|g| g.rail_aligned).count(), gangs.len()),
            in_tightest_share: (!reported.is_empty())
                .then(|| share(reported.iter().filter(|b| **b).count(), reported.len())),
            mean_slowdown_percent: if gangs.is_empty() {
                0.0
            } else {
                round3(
                    gangs.iter().map(|g| g.slowdown_ppm as f64).sum::<f64>()
                        / gangs.len() as f64
                        / 10_000.0,
                )
            },
            mean_largest_free_leaf_gpus: if dt_sum > 0.0 {
                round3(int / dt_sum)
            } else {
                self.cluster
                    .last()
                    .and_then(|c| c.largest_free_leaf_gpus)
                    .map_or(0.0, f64::from)
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s = Stats::of((1..=100).map(|v| v * 1000).collect());
        assert_eq!((s.p50, s.p95, s.p99, s.mean), (50.0, 95.0, 99.0, 50.5));
        assert_eq!(Stats::of(vec![]).count, 0);
    }

    fn sample(t: i64, q: &str, demand: u64, fair: u64, alloc: u64) -> QueueSample {
        QueueSample {
            time: Timestamp(t),
            queue: q.into(),
            name: q.rsplit('/').next().unwrap_or(q).into(),
            is_leaf: true,
            demand: Resources::new(0, 0, demand),
            fair_share: Resources::new(0, 0, fair),
            allocated: Resources::new(0, 0, alloc),
        }
    }

    #[test]
    fn fairness_carries_unchanged_queues_forward() {
        // a: 8/8 from 0; b gets demand at 100 (fair 4 each, a keeps 8, b 0);
        // at 1000 a is done and b runs 8/8 until 1200.
        // Jain: 0–100 [1] → 1; 100–1000 [2, 0] → 0.5; 1000–1200 [1] → 1.
        // Time-weighted: (100 + 450 + 200) / 1200 = 0.625.
        let out = SimOutput {
            policy: "p".into(),
            jobs: vec![],
            queues: vec![
                sample(0, "a", 8000, 8000, 8000),
                sample(100_000, "b", 8000, 4000, 0),
                sample(100_000, "a", 8000, 4000, 8000),
                sample(1_000_000, "a", 0, 0, 0),
                sample(1_000_000, "b", 8000, 8000, 8000),
            ],
            cluster: vec![],
            cycles: 0,
            events: 0,
            start_time: Timestamp(0),
            end_time: Timestamp(1_200_000),
            topology: None,
            evictions: vec![],
            eviction_model: Default::default(),
            dra_claims: 0,
        };
        let s = out.summary();
        assert_eq!(s.jain_fairness, 0.625);
        // a: 1 for 100 s, 2 for 900 s → 1.9; b: 0 for 900 s, 1 for 200 s.
        assert_eq!(
            s.per_queue.get("a").map(|q| q.mean_share_ratio),
            None,
            "no jobs, no per-queue entry"
        );
    }

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[1.0, 1.0, 1.0]), Some(1.0));
        assert_eq!(jain(&[1.0, 0.0]), Some(0.5));
        assert_eq!(jain(&[]), None);
    }
}
