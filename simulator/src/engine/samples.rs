//! Queue and cluster samples, and the run's output.

use super::*;

impl Engine<'_> {
    /// Queue samples when nothing is pending: demand = fair share =
    /// allocation = running requests, per queue (inner queues sum their
    /// children). Written only for queues whose numbers changed.
    pub(super) fn sample_queues_idle(&mut self, now: Timestamp) {
        let alloc = self.queue_alloc();
        let tree = self.world.queues();
        for q in tree.top_down().into_iter().skip(1) {
            let path = tree.path(q).to_string();
            let a = &alloc[q.0];
            let vals = (a.clone(), a.clone(), a.clone());
            if self.last_queue.get(&path) != Some(&vals) {
                self.queues.push(QueueSample {
                    time: now,
                    queue: path.clone(),
                    name: tree.name(q).to_string(),
                    is_leaf: tree.is_leaf(q),
                    demand: a.clone(),
                    fair_share: a.clone(),
                    allocated: a.clone(),
                });
                self.last_queue.insert(path, vals);
            }
        }
    }

    /// Requests of the bound tasks of each queue (inner queues sum their
    /// children), by `QueueId`.
    pub(super) fn queue_alloc(&self) -> Vec<Resources> {
        let tree = self.world.queues();
        let mut alloc = self.leaf_alloc.clone();
        for q in tree.top_down().into_iter().rev() {
            if let Some(p) = tree.parent(q)
                && p != QueueTree::ROOT
            {
                let a = alloc[q.0].clone();
                alloc[p.0].add(&a);
            }
        }
        alloc
    }

    /// Milli-GPU on nodes that are up.
    pub(super) fn gpu_capacity(&self) -> u64 {
        self.nodes
            .iter()
            .zip(&self.node_up)
            .filter(|(_, up)| **up)
            .map(|(n, _)| n.allocatable.gpu)
            .sum()
    }

    pub(super) fn sample_cluster(&mut self, now: Timestamp) {
        let capacity = self.gpu_capacity();
        let s = ClusterSample {
            time: now,
            gpu_capacity: capacity,
            gpu_allocated: self.gpu_allocated,
            running_jobs: self.running,
            pending_jobs: self.pending,
            largest_free_leaf_gpus: self.leaf_free.as_ref().map(LeafFree::largest),
            scattered: self.scattered,
        };
        match self.cluster.last_mut() {
            Some(last) if last.time == now => *last = s,
            Some(last)
                if (
                    last.gpu_capacity,
                    last.gpu_allocated,
                    last.running_jobs,
                    last.pending_jobs,
                    last.largest_free_leaf_gpus,
                    last.scattered,
                ) == (
                    s.gpu_capacity,
                    s.gpu_allocated,
                    s.running_jobs,
                    s.pending_jobs,
                    s.largest_free_leaf_gpus,
                    s.scattered,
                ) => {}
            _ => self.cluster.push(s),
        }
    }

    pub(super) fn finish(self) -> SimOutput {
        let end = self.end;
        let start = self
            .input
            .jobs
            .iter()
            .map(|j| j.submit)
            .min()
            .unwrap_or(Timestamp(0));
        // Jobs whose arrival lies after the end (cut by --until) never
        // entered the simulation: they are left out.
        let mut jobs: Vec<JobRecord> = self
            .rt
            .into_iter()
            .map(|r| r.record)
            .filter(|r| r.submit <= end || r.state == JobState::Rejected)
            .collect();
        jobs.sort_by(|a, b| a.submit.cmp(&b.submit).then(a.id.cmp(&b.id)));
        SimOutput {
            policy: self.opts.policy.clone(),
            jobs,
            queues: self.queues,
            cluster: self.cluster,
            cycles: self.cycles,
            events: self.events,
            start_time: start,
            end_time: end,
            topology: self.opts.topology.as_deref().map(|t| {
                let leaf = t.leaf_level().map(|l| &t.levels()[l]);
                RunTopology {
                    levels: t.levels().iter().map(|l| l.name.clone()).collect(),
                    leaf_level: leaf.map(|l| l.name.clone()),
                    leaf_domains: leaf.map_or(0, |l| l.domains.len() as u32),
                    slowdown_ppm: self.opts.slowdown.per_spine_crossing_ppm,
                }
            }),
            evictions: self.evictions,
            eviction_model: self.opts.eviction,
            dra_claims: self.dra_claims,
        }
    }
}
