//! Job life between cycles: arrivals, finishes, node events, restarts
//! and the removal of evicted pods, each applied to the world as changes.

use super::*;

impl Engine<'_> {
    /// How long a preemptor waits for its victims, as the core is told
    /// (`Task::grace_seconds`): the grace period, up to the cycle after it
    /// (cycles run at multiples of the period), in whole seconds.
    pub(super) fn grace_seconds(&self) -> u64 {
        let grace = self.opts.eviction.grace_ms;
        let period = self.opts.cycle_period_ms.max(1);
        grace.div_ceil(period).saturating_mul(period).div_ceil(1000)
    }

    pub(super) fn arrive(&mut self, j: usize) {
        let sj = &self.input.jobs[j];
        let tasks = sj.pending_tasks(self.grace_seconds());
        let job = Job {
            moved_at: None,
            id: sj.id.clone(),
            queue: sj.queue.clone(),
            priority: sj.priority,
            submit_time: sj.submit,
            min_member: sj.min_member,
            subgroups: sj.subgroups.clone(),
            topology: sj.topology.clone(),
            preemptible: sj.preemptible,
            preempts: true,
            tasks,
            // Workload jobs take their queue's delay.
            preemption_delay_seconds: None,
            walltime_seconds: sj.walltime_seconds,
            rejected: None,
            group_problem: None,
            evict_whole: false,
        };
        self.rt[j].live = true;
        self.live.insert(job.id.clone(), j);
        self.world.apply(Change::Job(job));
        self.pending += 1;
    }

    pub(super) fn finish_tasks(
        &mut self,
        j: usize,
        epoch: u32,
        since: i64,
        tasks: &[u32],
        now: Timestamp,
    ) -> bool {
        if self.rt[j].epoch != epoch || !self.rt[j].live {
            return false;
        }
        // Still the tasks bound at `since`: an elastic pod evicted alone is
        // pending or bound again later, and its old finish is stale.
        let is_done = |t: &Task| {
            !t.is_pending()
                && t.started == Some(Timestamp(since))
                && t.rank.is_some_and(|i| tasks.contains(&i))
        };
        let id = self.rt[j].record.id.clone();
        if !self
            .world
            .job(&id)
            .is_some_and(|job| job.tasks.iter().any(is_done))
        {
            return false;
        }
        let mut freed = 0u64;
        let mut ended = 0u32;
        let mut freed_req = Resources::zero();
        let leaf_free = &mut self.leaf_free;
        let (nodes, up) = (&self.nodes, &self.node_up);
        self.world.update_job(&id, |job| {
            job.tasks.retain(|t| {
                let done = is_done(t);
                if done {
                    freed += t.requests.gpu;
                    freed_req.add(&t.requests);
                    ended += 1;
                    if let (
                        Some(lf),
                        TaskState::Bound {
                            node,
                            gpus: Some(g),
                        },
                    ) = (leaf_free.as_mut(), &t.state)
                    {
                        lf.change(nodes, up, node, g, false);
                    }
                }
                !done
            });
            // The job stops growing: drop pending elastic pods, no minimum left.
            job.tasks.retain(|t| !t.is_pending());
            job.min_member = 0;
            job.subgroups.clear();
        });
        let rt = &mut self.rt[j];
        for i in tasks {
            rt.saved.remove(i);
        }
        rt.winding_down = true;
        rt.bound -= ended.min(rt.bound);
        rt.gpu_bound -= freed.min(rt.gpu_bound);
        rt.bound_req.saturating_sub(&freed_req);
        if let Some(q) = rt.leaf {
            self.leaf_alloc[q.0].saturating_sub(&freed_req);
        }
        self.gpu_allocated -= freed.min(self.gpu_allocated);
        if rt.bound == 0 {
            self.complete(j, now);
        }
        true
    }

    /// Job `j`'s last task has ended.
    pub(super) fn complete(&mut self, j: usize, now: Timestamp) {
        let rt = &mut self.rt[j];
        rt.record.end = Some(now);
        rt.record.state = if rt.timed_out {
            JobState::TimedOut
        } else {
            JobState::Completed
        };
        rt.live = false;
        self.live.remove(&rt.record.id);
        if rt.timed_out {
            // Ended at its walltime, not on its own: no observed runtime.
            self.world.mark_evicted(&rt.record.id);
        }
        self.world.apply(Change::JobGone(rt.record.id.clone()));
        self.running -= 1;
        self.finished += 1;
    }

    pub(super) fn node_event(&mut self, index: usize, up: bool, now: Timestamp) -> bool {
        if self.node_up[index] == up {
            return false;
        }
        self.node_up[index] = up;
        if let Some(lf) = &mut self.leaf_free {
            lf.node(index, up);
        }
        let name = self.nodes[index].name.clone();
        if up {
            self.world.apply(Change::Node(self.nodes[index].clone()));
            return true;
        }
        self.world.apply(Change::NodeGone(name.clone()));
        // Every job with a task on the node restarts.
        let hit: Vec<usize> = self
            .world
            .jobs()
            .filter(|job| {
                job.tasks
                    .iter()
                    .any(|t| matches!(&t.state, TaskState::Bound { node, .. } if *node == name))
            })
            .filter_map(|job| self.by_id.get(&job.id).copied())
            .collect();
        for j in hit {
            self.restart(j, now, Kill::NodeFault);
        }
        true
    }

    /// The running job in `slot` is killed as a whole and goes back to
    /// pending (gang semantics): its bound tasks lose work per the
    /// lost-work model, and the next start does what checkpoints did not
    /// keep.
    pub(super) fn restart(&mut self, j: usize, now: Timestamp, why: Kill) {
        let model = self.rt[j].lost_work;
        let mut lost = 0u64;
        let id = self.rt[j].record.id.clone();
        let Some(job) = self.world.job(&id) else {
            return;
        };
        for t in &job.tasks {
            if let TaskState::Bound { node, gpus } = &t.state {
                let elapsed = t.started.map_or(0, |s| (now.0 - s.0).max(0) as u64);
                lost = lost.saturating_add(t.requests.gpu.saturating_mul(model.lost_ms(elapsed)));
                if let (Some(lf), Some(g)) = (&mut self.leaf_free, gpus) {
                    lf.change(&self.nodes, &self.node_up, node, g, false);
                }
            }
        }
        // A cut-short run is no observed runtime.
        self.world.mark_evicted(&id);
        let rt = &mut self.rt[j];
        let why = if why == Kill::Eviction && rt.moving {
            Kill::Move
        } else {
            why
        };
        rt.moving = false;
        match why {
            Kill::Move => rt.record.lost.moves = rt.record.lost.moves.saturating_add(lost),
            Kill::NodeFault => {
                rt.record.lost.node_faults = rt.record.lost.node_faults.saturating_add(lost)
            }
            Kill::Eviction => {
                rt.record.lost.evictions = rt.record.lost.evictions.saturating_add(lost)
            }
        }
        // Checkpoints of the gang count from its start.
        let elapsed = rt.record.start.map_or(0, |s| (now.0 - s.0).max(0) as u64);
        rt.work_ms = work_after_kill(rt.work_ms, rt.run_ms, model.saved_ms(elapsed));
        rt.run_ms = rt.work_ms;
        rt.saved.clear();
        self.gpu_allocated -= rt.gpu_bound.min(self.gpu_allocated);
        if let Some(q) = rt.leaf {
            self.leaf_alloc[q.0].saturating_sub(&rt.bound_req);
        }
        rt.bound_req = Resources::zero();
        rt.epoch += 1;
        rt.bound = 0;
        rt.gpu_bound = 0;
        rt.record.restarts += 1;
        rt.record.start = None;
        rt.record.topology = None;
        rt.record.state = JobState::Pending;
        let was_winding = rt.winding_down;
        rt.winding_down = false;
        self.running -= 1;
        self.pending += 1;
        // Back to the job as submitted.
        let sj = &self.input.jobs[j];
        let grace = self.grace_seconds();
        self.world.update_job(&id, |job| {
            if was_winding {
                job.min_member = sj.min_member;
                job.subgroups = sj.subgroups.clone();
            }
            job.tasks = sj.pending_tasks(grace);
        });
    }

    /// The grace period of evicted `tasks` (index, start) of job `j` is
    /// over: the ones still there are killed. If the rest of the job still
    /// holds its gang minimum (and every sub-group's), they go back to
    /// pending and the job runs on; otherwise the whole job restarts, as
    /// after a node failure. Pods of a job that is winding down (a task has
    /// ended) are dropped, as its pending elastic pods are.
    pub(super) fn remove_evicted(
        &mut self,
        j: usize,
        epoch: u32,
        tasks: &[(u32, i64)],
        now: Timestamp,
    ) -> bool {
        if self.rt[j].epoch != epoch || !self.rt[j].live {
            return false;
        }
        let Some(job) = self.world.job(&self.rt[j].record.id) else {
            return false;
        };
        let is_gone = |t: &Task| {
            t.terminating
                && !t.is_pending()
                && t.rank.is_some_and(|i| {
                    tasks
                        .iter()
                        .any(|(x, s)| *x == i && t.started.map_or(i64::MIN, |v| v.0) == *s)
                })
        };
        let gone: Vec<usize> = (0..job.tasks.len())
            .filter(|&k| is_gone(&job.tasks[k]))
            .collect();
        if gone.is_empty() {
            return false;
        }
        let winding = self.rt[j].winding_down;
        if !winding {
            let stays = |t: &Task| !t.is_pending() && !is_gone(t);
            let left = job.tasks.iter().filter(|t| stays(t)).count() as u32;
            let groups_ok = job.subgroups.iter().all(|sg| {
                job.tasks
                    .iter()
                    .filter(|t| stays(t) && t.subgroup.as_deref() == Some(sg.name.as_str()))
                    .count() as u32
                    >= sg.min_member
            });
            if left < job.min_member || !groups_ok {
                self.restart(j, now, Kill::Eviction);
                return true;
            }
        }
        // Kill the pods one by one; the job keeps running.
        let mut job = job.clone();
        let model = self.rt[j].lost_work;
        for &k in gone.iter().rev() {
            let t = &mut job.tasks[k];
            let elapsed = t.started.map_or(0, |s| (now.0 - s.0).max(0) as u64);
            let lost = t.requests.gpu.saturating_mul(model.lost_ms(elapsed));
            let req = t.requests.clone();
            let held = std::mem::replace(&mut t.state, TaskState::Pending);
            t.started = None;
            t.terminating = false;
            t.nomination = None;
            let ti = t.rank;
            if winding {
                job.tasks.remove(k);
            }
            if let (
                Some(lf),
                TaskState::Bound {
                    node,
                    gpus: Some(g),
                },
            ) = (&mut self.leaf_free, &held)
            {
                lf.change(&self.nodes, &self.node_up, node, g, false);
            }
            let rt = &mut self.rt[j];
            if rt.moving {
                rt.record.lost.moves = rt.record.lost.moves.saturating_add(lost);
            } else {
                rt.record.lost.evictions = rt.record.lost.evictions.saturating_add(lost);
            }
            if let Some(ti) = ti {
                if winding {
                    rt.saved.remove(&ti);
                } else {
                    let kept = model.saved_ms(elapsed);
                    let s = rt.saved.entry(ti).or_default();
                    *s = s.saturating_add(kept);
                }
            }
            rt.bound = rt.bound.saturating_sub(1);
            rt.gpu_bound = rt.gpu_bound.saturating_sub(req.gpu);
            rt.bound_req.saturating_sub(&req);
            if let Some(q) = rt.leaf {
                self.leaf_alloc[q.0].saturating_sub(&req);
            }
            self.gpu_allocated = self.gpu_allocated.saturating_sub(req.gpu);
        }
        self.world.apply(Change::Job(job));
        self.rt[j].moving = false;
        if winding && self.rt[j].bound == 0 {
            self.complete(j, now);
        }
        // A running job with pending pods again may grow.
        self.elastic_waiting = self.count_elastic_waiting();
        true
    }
}
