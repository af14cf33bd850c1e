//! A gang's minimum: which of its pending tasks to place now (nominated
//! ones first), and what they would add to its queue.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use trainyard_model::{Job, Resources};

use super::JobWork;
use crate::decisions::PendingReason;

/// What the gang minimum of a job would add to its queue (nothing when the
/// pods for it do not exist: the job fails at once when tried).
pub(super) fn minimum_ask(jw: &JobWork) -> Resources {
    let mut needs = Resources::zero();
    if let Ok(chosen) = select_minimum(jw.job, &jw.pending, &jw.bound_by_sub, jw.bound_total, &[]) {
        for t in chosen {
            needs.add(&jw.job.tasks[t].requests);
        }
    }
    needs
}

/// `pending` with the pods whose room is held (`held`) first, then the
/// other nominated ones, newest nomination first (an older one was taken
/// back by whoever holds its room now), then the rest; placement order
/// within each.
pub(super) fn prefer_nominated(job: &Job, pending: &[usize], held: &[usize]) -> Vec<usize> {
    let mut is_held = vec![false; job.tasks.len()];
    for &t in held {
        is_held[t] = true;
    }
    let mut v = pending.to_vec();
    // Stable: placement order within each class and age.
    v.sort_by_key(|&t| match &job.tasks[t].nomination {
        _ if is_held[t] => (0, Reverse(i64::MAX)),
        Some(n) => (1, Reverse(n.since.0)),
        None => (2, Reverse(i64::MAX)),
    });
    v
}

/// The tasks to place now for a gang's minimum: for each sub-group, enough
/// of its pending tasks (in `pending` order) to reach the sub-group's
/// `minMember`, then enough more to reach the job's. Bound tasks count
/// toward both. Fails when the pods do not exist.
pub(super) fn select_minimum(
    job: &Job,
    pending: &[usize],
    bound_by_sub: &BTreeMap<&str, u32>,
    bound_total: u32,
    held: &[usize],
) -> Result<Vec<usize>, PendingReason> {
    // Pods with room held for them (`held`) are chosen first, then other
    // nominated ones: the room held for a preemptor is held for the pods
    // it nominated, and a gang that lost pods to an eviction since may
    // have others ahead of them in placement order. What is chosen keeps
    // placement order.
    let reordered = pending
        .iter()
        .any(|&t| job.tasks[t].nomination.is_some())
        .then(|| prefer_nominated(job, pending, held));
    let prefer = reordered.as_deref().unwrap_or(pending);
    let in_order = |picked: Vec<usize>| -> Vec<usize> {
        if reordered.is_none() {
            return picked;
        }
        let mut mark = vec![false; job.tasks.len()];
        for &t in &picked {
            mark[t] = true;
        }
        pending.iter().copied().filter(|&t| mark[t]).collect()
    };
    let mut chosen: Vec<usize> = Vec::new();
    let mut taken = vec![false; job.tasks.len()];
    for sg in &job.subgroups {
        let have = bound_by_sub.get(sg.name.as_str()).copied().unwrap_or(0);
        let need = sg.min_member.saturating_sub(have) as usize;
        let cands: Vec<usize> = prefer
            .iter()
            .copied()
            .filter(|&t| job.tasks[t].subgroup.as_deref() == Some(sg.name.as_str()))
            .take(need)
            .collect();
        if cands.len() < need {
            let total = job
                .tasks
                .iter()
                .filter(|t| t.subgroup.as_deref() == Some(sg.name.as_str()))
                .count();
            return Err(PendingReason::NotEnoughPods {
                subgroup: Some(sg.name.clone()),
                have: total as u32,
                min_member: sg.min_member,
            });
        }
        for t in in_order(cands) {
            taken[t] = true;
            chosen.push(t);
        }
    }
    let need = (job.min_member as usize).saturating_sub(bound_total as usize + chosen.len());
    let rest: Vec<usize> = prefer
        .iter()
        .copied()
        .filter(|&t| !taken[t])
        .take(need)
        .collect();
    if rest.len() < need {
        return Err(PendingReason::NotEnoughPods {
            subgroup: None,
            have: job.tasks.len() as u32,
            min_member: job.min_member,
        });
    }
    chosen.extend(in_order(rest));
    Ok(chosen)
}
