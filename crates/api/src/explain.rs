//! `ExplainJob`: the core's pending reason, grouped by cause, its
//! breakdown over nodes (as kube-scheduler sums it: `0/5000 nodes are
//! available: ...`), and what would have to change for the job to fit.
//! Everything is read from the reason the core gave; nothing is decided
//! again here.

use trainyard_model::ResourceName;
use trainyard_sched::{FilterReason, PendingJob, PendingReason};

use crate::pb;

/// The cause a reason is grouped under.
pub fn cause(reason: &PendingReason) -> pb::Cause {
    use PendingReason as R;
    match reason {
        R::Unschedulable { .. } | R::InQuotaNoRoom { .. } | R::ElasticPending { .. } => {
            pb::Cause::Room
        }
        R::QueueAtLimit { .. }
        | R::ExceedsQueueLimit { .. }
        | R::NonPreemptibleOverQuota { .. } => pb::Cause::Quota,
        R::ReclaimedRoomKept { .. }
        | R::ReclaimedRoomKeptForPriority { .. }
        | R::Yielded { .. } => pb::Cause::FairShare,
        R::TopologyUnfit { .. } | R::TooManyLeaves { .. } => pb::Cause::Topology,
        R::NotEnoughPods { .. } => pb::Cause::Gang,
        R::Reserved { .. } => pb::Cause::Reservation,
        R::WaitingForVictims { .. } | R::Consolidating { .. } => pb::Cause::Preemption,
        R::ExceedsMaxWalltime { .. }
        | R::NeverFits { .. }
        | R::Unsupported { .. }
        | R::Waiting { .. }
        | R::InvalidRequest { .. }
        | R::Rejected { .. }
        | R::SchedulerError { .. }
        | R::WaitingForPodGroup { .. } => pb::Cause::Request,
    }
}

/// Nodes per filter reason, most first (then by reason).
pub fn node_reasons(
    filters: &std::collections::BTreeMap<FilterReason, u32>,
) -> Vec<pb::NodeReason> {
    let mut rows: Vec<pb::NodeReason> = filters
        .iter()
        .map(|(r, n)| pb::NodeReason {
            reason: r.to_string(),
            nodes: *n,
        })
        .collect();
    rows.sort_by(|a, b| b.nodes.cmp(&a.nodes).then_with(|| a.reason.cmp(&b.reason)));
    rows
}

/// `0/5 nodes are available: 3 insufficient nvidia.com/gpu, 2 node
/// unschedulable.`
pub fn summary(nodes_fit: u32, nodes_total: u32, rows: &[pb::NodeReason]) -> String {
    let parts: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {}", r.nodes, r.reason))
        .collect();
    if parts.is_empty() {
        return format!("{nodes_fit}/{nodes_total} nodes are available.");
    }
    format!(
        "{nodes_fit}/{nodes_total} nodes are available: {}.",
        parts.join(", ")
    )
}

fn amount(r: &ResourceName, v: u64) -> String {
    format!("{} {r}", r.format_amount(v))
}

/// What a node refusal asks to change, for `n` nodes.
fn node_fix(r: &FilterReason, n: u32, pod: &str) -> String {
    match r {
        FilterReason::Insufficient(res) => {
            format!(
                "more free {res} on a node ({n} nodes have too little for pod {pod}), or ask for less {res} per pod"
            )
        }
        FilterReason::UntoleratedTaint(t) => {
            format!("a toleration of taint {t} ({n} nodes carry it)")
        }
        FilterReason::NodeSelectorMismatch | FilterReason::NodeAffinityMismatch => {
            format!("a node selector or affinity that more nodes match ({n} do not)")
        }
        FilterReason::Unschedulable => format!("{n} cordoned nodes uncordoned"),
        FilterReason::GpuDevicesFragmented => format!(
            "whole free GPU devices: {n} nodes have the GPU capacity only split across partly used devices"
        ),
        FilterReason::Reserved => {
            format!("a walltime that ends before the reservation holding {n} nodes starts")
        }
        other => format!("{n} nodes refuse it for {other}"),
    }
}

/// What would have to change for the job to fit, each a sentence.
pub fn to_fit(reason: &PendingReason) -> Vec<String> {
    use PendingReason as R;
    match reason {
        R::Unschedulable {
            filters,
            failed_pod,
            pods_needed,
            pods_placed,
            ..
        } => {
            let mut out = vec![format!(
                "room for pod {failed_pod}: {pods_placed} of the {pods_needed} pods the gang needs were placed before it did not fit"
            )];
            let mut sorted: Vec<(&FilterReason, &u32)> = filters.iter().collect();
            sorted.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
            out.extend(
                sorted
                    .into_iter()
                    .take(3)
                    .map(|(k, n)| node_fix(k, *n, failed_pod)),
            );
            out
        }
        R::QueueAtLimit {
            queue,
            resource,
            used,
            requested,
            limit,
        } => vec![format!(
            "queue {queue}'s limit on {resource} raised to at least {} (now {}), or {} freed in it",
            amount(resource, used + requested),
            amount(resource, *limit),
            amount(resource, (used + requested).saturating_sub(*limit))
        )],
        R::ExceedsQueueLimit {
            queue,
            resource,
            needs,
            limit,
        } => vec![format!(
            "a minimum of at most {} (the limit of queue {queue}), or that limit raised to {}",
            amount(resource, *limit),
            amount(resource, *needs)
        )],
        R::ExceedsMaxWalltime {
            queue,
            max_seconds,
            ..
        } => vec![format!(
            "a walltime of at most {max_seconds} s, the maximum of queue {queue}"
        )],
        R::NotEnoughPods {
            have, min_member, ..
        } => vec![format!(
            "{} more pods, or a minMember of {have}",
            min_member.saturating_sub(*have)
        )],
        R::NeverFits {
            pod,
            resource,
            largest,
            ..
        } => vec![format!(
            "pod {pod} asking for at most {} (the largest node's allocatable), or a larger node",
            amount(resource, *largest)
        )],
        R::TopologyUnfit {
            scope,
            needs,
            unit,
            level,
            largest,
            domain,
        } => vec![format!(
            "{} more {unit} free in one {level} domain for the {scope} (the roomiest, {}, has {largest} of {needs}), or a wider required level",
            needs.saturating_sub(*largest),
            domain.as_deref().unwrap_or("none")
        )],
        R::TooManyLeaves {
            needs_leaves,
            max_leaves,
            ..
        } => vec![format!(
            "maxLeaves of at least {needs_leaves} (now {max_leaves}), or its leaves emptier"
        )],
        R::NonPreemptibleOverQuota {
            queue,
            resource,
            used,
            requested,
            quota,
        } => vec![format!(
            "the job preemptible, or queue {queue}'s quota on {resource} raised to {} (now {})",
            amount(resource, used + requested),
            amount(resource, *quota)
        )],
        R::WaitingForVictims { victims, .. } => vec![format!(
            "nothing: it starts when its {victims} evicted pods are gone"
        )],
        R::Consolidating { moves, .. } => vec![format!(
            "nothing: it starts when the {} moved job(s) have left its nodes",
            moves.len()
        )],
        R::Reserved { .. } => vec![
            "nothing: room is held for it from the reservation's start; a smaller request may fit sooner".to_string(),
        ],
        R::InQuotaNoRoom {
            needs,
            largest,
            refused,
            ..
        } => vec![format!(
            "room for {} on the nodes it may use (the most free on one is {}); reclaim and preemption made none: {refused}",
            amount(&ResourceName::Gpu, *needs),
            amount(&ResourceName::Gpu, *largest)
        )],
        R::ElasticPending { pending, .. } => {
            vec![format!("room for {pending} more pods (the job runs at its minimum)")]
        }
        R::Yielded { .. } | R::ReclaimedRoomKept { .. } | R::ReclaimedRoomKeptForPriority { .. } => {
            vec!["nothing: the room is free to it from the next cycle on".to_string()]
        }
        R::Unsupported { pod, features } => vec![format!(
            "pod {pod} without {}",
            features.join(", ")
        )],
        R::Waiting { what, .. } => what.iter().map(|w| format!("{w} created")).collect(),
        R::InvalidRequest { pod, message } => vec![format!("pod {pod} fixed: {message}")],
        R::Rejected { message } => vec![format!("the job fixed: {message}")],
        R::SchedulerError { .. } => vec![
            "every pod of the PodGroup with the same schedulerName and priority".to_string(),
        ],
        R::WaitingForPodGroup { group } => vec![format!("PodGroup {group} created")],
    }
}

/// The explanation of a pending job (its `job` filled by the caller).
pub fn explain(p: &PendingJob) -> pb::ExplainJobResponse {
    let (nodes_fit, nodes_total, rows) = match &p.reason {
        PendingReason::Unschedulable {
            nodes_fit,
            nodes_total,
            filters,
            ..
        } => (*nodes_fit, *nodes_total, node_reasons(filters)),
        _ => (0, 0, Vec::new()),
    };
    let summary = match &p.reason {
        PendingReason::Unschedulable { .. } => summary(nodes_fit, nodes_total, &rows),
        PendingReason::InQuotaNoRoom { detail, .. }
        | PendingReason::Reserved { detail, .. }
        | PendingReason::ElasticPending { detail, .. } => detail.clone(),
        _ => String::new(),
    };
    pb::ExplainJobResponse {
        cycle: None,
        job: None,
        pending: true,
        reason: p.reason.code().to_string(),
        message: p.message.clone(),
        cause: cause(&p.reason) as i32,
        summary,
        nodes_total,
        nodes_fit,
        node_reasons: rows,
        to_fit: to_fit(&p.reason),
        reason_json: serde_json::to_string(&p.reason).unwrap_or_default(),
        reservation: crate::convert::reservation(&p.reason),
    }
}

#[cfg(test)]
mod tests;
