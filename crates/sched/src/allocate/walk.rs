//! The queue walk: which leaf queue is served next, and which of its jobs.
//!
//! From the root, at each level, the walk takes the child whose share would
//! be lowest **with** the job it would run next. For a child `c` whose next
//! job asks for `ask`, let `after = allocated(c) + ask`. Children are
//! ordered by
//!
//! 1. whether `after` goes above a **zero** fair share on some resource
//!    (those come last: the cluster owes them nothing, and a bind there is
//!    what the next cycle's reclaim takes back);
//! 2. `max over resources with a fair share of after / fair share`, lowest
//!    first (so the job goes where it leaves its queue furthest below its
//!    share, not merely to the queue that is lowest before it);
//! 3. name (children are kept in name order).
//!
//! A child's next job is the job the walk would reach inside it, so it is
//! found recursively; it is cached per queue and recomputed only on the
//! path of the leaf that was served (the only allocations and job lists
//! that changed). Inside a leaf, jobs go by priority (high first), then
//! submission time, then id.

use std::cmp::Ordering;
use std::collections::VecDeque;

use trainyard_model::resources::cmp_ratio;
use trainyard_model::{QueueId, QueueTree, Resources};

use super::{JobWork, Ledger, World};

/// One walk over a set of jobs (one pass of the cycle).
pub(super) struct Walk {
    /// Per leaf queue, its jobs in order.
    queues: Vec<VecDeque<usize>>,
    /// Per queue, how many jobs are left below it.
    active: Vec<u32>,
    /// Per job index, what its next placement asks for (set for walked jobs).
    ask: Vec<Option<Resources>>,
    /// Per queue, the job the walk would take next inside it; `None` when
    /// it must be recomputed.
    next: Vec<Option<Option<usize>>>,
}

/// How a child ranks: (goes above a zero fair share, max after / fair).
type ShareKey = (bool, (u64, u64));

fn cmp_key(a: &ShareKey, b: &ShareKey) -> Ordering {
    a.0.cmp(&b.0)
        .then_with(|| cmp_ratio(a.1.0, a.1.1, b.1.0, b.1.1))
}

impl<'s> Ledger<'s> {
    /// The job the walk would take next inside queue `q` (cached).
    fn next_in(&self, world: &World<'_>, w: &mut Walk, q: QueueId) -> Option<usize> {
        if let Some(cached) = w.next[q.0] {
            return cached;
        }
        let kids = world.tree.children(q);
        let found = if kids.is_empty() {
            w.queues[q.0].front().copied()
        } else {
            let mut best: Option<(usize, ShareKey)> = None;
            // Children are in name order, so the first of equals wins.
            for &c in kids {
                if w.active[c.0] == 0 {
                    continue;
                }
                let Some(j) = self.next_in(world, w, c) else {
                    continue;
                };
                let key = match &w.ask[j] {
                    Some(ask) => self.share_key(world, c, ask),
                    None => self.share_key(world, c, &Resources::zero()),
                };
                if best
                    .as_ref()
                    .is_none_or(|(_, b)| cmp_key(&key, b) == Ordering::Less)
                {
                    best = Some((j, key));
                }
            }
            best.map(|(j, _)| j)
        };
        w.next[q.0] = Some(found);
        found
    }

    /// The leaf queue to serve next, or `None` when no job is left.
    pub(super) fn pick_leaf(&self, world: &World<'_>, w: &mut Walk) -> Option<QueueId> {
        if w.active[QueueTree::ROOT.0] == 0 {
            return None;
        }
        let j = self.next_in(world, w, QueueTree::ROOT)?;
        Some(self.jobs[j].leaf)
    }
}

impl Walk {
    /// Allocations changed outside the served leaf's path (evictions):
    /// every cached next job is recomputed.
    pub(super) fn changed(&mut self) {
        self.next.iter_mut().for_each(|n| *n = None);
    }
}

impl World<'_> {
    /// Takes the next job of `leaf` off the walk.
    pub(super) fn pop_job(&self, leaf: QueueId, w: &mut Walk) -> Option<usize> {
        let j = w.queues[leaf.0].pop_front()?;
        for a in self.tree.ancestors(leaf) {
            w.active[a.0] -= 1;
            w.next[a.0] = None;
        }
        w.active[QueueTree::ROOT.0] -= 1;
        w.next[QueueTree::ROOT.0] = None;
        Some(j)
    }
}

impl<'s> Ledger<'s> {
    /// The walk over the jobs `include` selects; `ask` is what a job's next
    /// placement requests (its gang minimum, or its next elastic pod).
    pub(super) fn build_walk(
        &self,
        w: &World<'_>,
        include: impl Fn(&JobWork) -> bool,
        ask: impl Fn(&JobWork) -> Resources,
    ) -> Walk {
        let mut per_leaf: Vec<Vec<usize>> = vec![Vec::new(); w.tree.len()];
        let mut asks: Vec<Option<Resources>> = vec![None; self.jobs.len()];
        for (i, jw) in self.jobs.iter().enumerate() {
            if jw.leaf != QueueTree::ROOT && include(jw) {
                per_leaf[jw.leaf.0].push(i);
                asks[i] = Some(ask(jw));
            }
        }
        let mut active = vec![0u32; w.tree.len()];
        let mut queues = Vec::with_capacity(per_leaf.len());
        for (q, mut list) in per_leaf.into_iter().enumerate() {
            // With the time-decayed fair share, the user (namespace) who
            // used less of this leaf lately goes first among equals in
            // priority, as in Slurm's fair share between an account's users.
            let shares = w.user_shares.get(q).filter(|m| !m.is_empty());
            let share = |j: &trainyard_model::Job| {
                shares.map_or(0, |m| {
                    let user = j.id.split_once('/').map_or("", |(ns, _)| ns);
                    m.get(user).copied().unwrap_or(0)
                })
            };
            list.sort_by(|&a, &b| {
                let (ja, jb) = (self.jobs[a].job, self.jobs[b].job);
                jb.priority
                    .cmp(&ja.priority)
                    .then_with(|| share(ja).cmp(&share(jb)))
                    .then(ja.submit_time.cmp(&jb.submit_time))
                    .then(ja.id.cmp(&jb.id))
            });
            if !list.is_empty() {
                for a in w.tree.ancestors(QueueId(q)) {
                    active[a.0] += list.len() as u32;
                }
                active[QueueTree::ROOT.0] += list.len() as u32;
            }
            queues.push(VecDeque::from(list));
        }
        Walk {
            queues,
            active,
            ask: asks,
            next: vec![None; w.tree.len()],
        }
    }

    /// The rank of queue `q` if it ran job `j` next.
    pub(super) fn share_key(&self, w: &World<'_>, q: QueueId, ask: &Resources) -> ShareKey {
        let mut after = self.alloc[q.0].clone();
        after.add(ask);
        let mut above_zero = false;
        let mut best = (0u64, 1u64);
        for (r, a) in after.iter() {
            let f = w.fair[q.0].get(&r);
            if f == 0 {
                above_zero |= a > 0;
                continue;
            }
            if cmp_ratio(a, f, best.0, best.1) == Ordering::Greater {
                best = (a, f);
            }
        }
        (above_zero, best)
    }
}
