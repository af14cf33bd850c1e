//! Why nodes and jobs were refused: `FilterReason` (one node for one task)
//! and `PendingReason` (a job left pending), with their sentences, codes
//! and JSON forms.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use trainyard_model::{ResourceName, Resources, Timestamp};

/// Why a node was not a candidate for a task. Serialized as its sentence
/// (e.g. `"untolerated taint dedicated=infer"`), so it can key a JSON map.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FilterReason {
    Unschedulable,
    NodeSelectorMismatch,
    NodeAffinityMismatch,
    UntoleratedTaint(String),
    Insufficient(ResourceName),
    /// Enough GPU capacity in total, but not on whole free devices (or not
    /// on one device for a fractional request).
    GpuDevicesFragmented,
    /// No GPU device of a model the task allows.
    GpuModelMismatch,
    /// No GPU device with enough memory (known) for a memory-sized share.
    GpuMemoryTooSmall,
    TooManyPods,
    /// A required pod affinity term finds no selected pod in the node's domain.
    PodAffinity,
    /// A required pod anti-affinity term finds a selected pod there.
    PodAntiAffinity,
    /// A placed pod's required anti-affinity selects this pod.
    ExistingPodAntiAffinity,
    /// A DoNotSchedule topology spread constraint (skew or missing label).
    TopologySpread,
    /// A host port of the pod is in use on the node.
    HostPortInUse,
    /// The node is held for a starving gang's reservation, and the pod's
    /// job has no walltime that ends before the reservation starts.
    Reserved,
    /// The pod's DRA claims cannot be allocated on the node: which
    /// request, and how many devices it would need against how many are
    /// free (`crate::dra`).
    Devices(String),
    /// Too few free devices for a request of the pod's claims: how many
    /// it wants and how many are free here.
    /// A pending reason sums these over the nodes: `request gpu: 0/40
    /// nodes have 4 free devices of class gpu.nvidia.com matching ...; 12
    /// have 2, 28 have 0`.
    DeviceCount {
        request: String,
        class: String,
        matching: String,
        wanted: u32,
        free: u32,
    },
}

impl fmt::Display for FilterReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterReason::Unschedulable => f.write_str("node unschedulable"),
            FilterReason::NodeSelectorMismatch => f.write_str("node selector mismatch"),
            FilterReason::NodeAffinityMismatch => f.write_str("node affinity mismatch"),
            FilterReason::UntoleratedTaint(t) => write!(f, "untolerated taint {t}"),
            FilterReason::Insufficient(r) => write!(f, "insufficient {r}"),
            FilterReason::GpuDevicesFragmented => {
                f.write_str("GPU capacity split across partly used devices")
            }
            FilterReason::GpuModelMismatch => f.write_str("no GPU of an allowed model"),
            FilterReason::GpuMemoryTooSmall => {
                f.write_str("no GPU with enough (known) memory for the share")
            }
            FilterReason::TooManyPods => f.write_str("too many pods"),
            FilterReason::PodAffinity => f.write_str("pod affinity unmet"),
            FilterReason::PodAntiAffinity => f.write_str("pod anti-affinity"),
            FilterReason::ExistingPodAntiAffinity => {
                f.write_str("anti-affinity of a pod already there")
            }
            FilterReason::TopologySpread => f.write_str("topology spread skew"),
            FilterReason::HostPortInUse => f.write_str("host port in use"),
            FilterReason::Reserved => f.write_str("held for a reservation"),
            FilterReason::Devices(why) => f.write_str(why),
            FilterReason::DeviceCount {
                request,
                class,
                matching,
                wanted,
                free,
            } => {
                write!(
                    f,
                    "request {request}: {free} free of {wanted} wanted devices of class {class}{matching}"
                )
            }
        }
    }
}

/// The nodes that failed for want of devices, per request: how many
/// have what it wants and how many have how many fewer, as kube-scheduler
/// sums a reason over nodes (`request gpu: 0/40 nodes have 4 free
/// devices of class gpu.nvidia.com matching ...; 12 have 2, 28 have 0`).
fn device_counts(
    filters: &std::collections::BTreeMap<FilterReason, u32>,
    nodes_fit: u32,
    nodes_total: u32,
) -> Vec<String> {
    type Key<'a> = (&'a str, &'a str, &'a str, u32);
    let mut by: std::collections::BTreeMap<Key<'_>, std::collections::BTreeMap<u32, u32>> =
        std::collections::BTreeMap::new();
    for (r, n) in filters {
        if let FilterReason::DeviceCount {
            request,
            class,
            matching,
            wanted,
            free,
        } = r
        {
            *by.entry((request, class, matching, *wanted))
                .or_default()
                .entry(*free)
                .or_default() += n;
        }
    }
    by.into_iter()
        .map(|((request, class, matching, wanted), frees)| {
            let rest: Vec<String> = frees
                .iter()
                .rev()
                .map(|(free, n)| format!("{n} with {free}"))
                .collect();
            format!(
                "request {request}: {nodes_fit}/{nodes_total} nodes have {wanted} free devices of class {class}{matching} ({})",
                rest.join(", ")
            )
        })
        .collect()
}

impl Serialize for FilterReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FilterReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let fixed = [
            FilterReason::Unschedulable,
            FilterReason::NodeSelectorMismatch,
            FilterReason::NodeAffinityMismatch,
            FilterReason::GpuDevicesFragmented,
            FilterReason::GpuModelMismatch,
            FilterReason::GpuMemoryTooSmall,
            FilterReason::TooManyPods,
            FilterReason::PodAffinity,
            FilterReason::PodAntiAffinity,
            FilterReason::ExistingPodAntiAffinity,
            FilterReason::TopologySpread,
            FilterReason::HostPortInUse,
            FilterReason::Reserved,
        ];
        if let Some(r) = fixed.into_iter().find(|r| r.to_string() == text) {
            return Ok(r);
        }
        if let Some(t) = text.strip_prefix("untolerated taint ") {
            return Ok(FilterReason::UntoleratedTaint(t.to_string()));
        }
        if let Some(r) = text.strip_prefix("insufficient ") {
            return Ok(FilterReason::Insufficient(ResourceName::parse(r)));
        }
        Err(serde::de::Error::custom(format!(
            "unknown filter reason {text:?}"
        )))
    }
}

/// A structured reason a job is (still) pending after this cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum PendingReason {
    /// Not all of the gang's minimum could be placed.
    #[serde(rename_all = "camelCase")]
    Unschedulable {
        /// Total request of the pods the gang needed this cycle.
        needs: Resources,
        pods_needed: u32,
        /// Pods placed tentatively before one did not fit (all rolled back).
        pods_placed: u32,
        /// The pod that did not fit.
        failed_pod: String,
        nodes_total: u32,
        nodes_fit: u32,
        /// Nodes per reason, for the pod that did not fit.
        filters: BTreeMap<FilterReason, u32>,
    },
    /// Placing the gang would take a queue on its path above its limit.
    #[serde(rename_all = "camelCase")]
    QueueAtLimit {
        queue: String,
        resource: ResourceName,
        used: u64,
        requested: u64,
        limit: u64,
    },
    /// The gang's minimum alone is above a queue limit on its path: it can
    /// never run there as submitted.
    #[serde(rename_all = "camelCase")]
    ExceedsQueueLimit {
        queue: String,
        resource: ResourceName,
        needs: u64,
        limit: u64,
    },
    /// The job declares a walltime above the maximum of a queue on its
    /// path (Slurm's `PartitionTimeLimit`): it never starts there as
    /// submitted.
    #[serde(rename_all = "camelCase")]
    ExceedsMaxWalltime {
        queue: String,
        walltime_seconds: u64,
        max_seconds: u64,
    },
    /// Fewer pods exist than the gang's minimum.
    #[serde(rename_all = "camelCase")]
    NotEnoughPods {
        /// `None` for the whole gang, else the sub-group.
        subgroup: Option<String>,
        have: u32,
        min_member: u32,
    },
    /// A pod asks for more of a resource than any node has allocatable
    /// (not free: allocatable), so no freed room can ever place it, nor
    /// its gang when the gang's minimum needs it.
    #[serde(rename_all = "camelCase")]
    NeverFits {
        pod: String,
        resource: ResourceName,
        /// The pod's request, in the resource's unit (milli-GPU, ...).
        requested: u64,
        /// The most any node has allocatable, in the same unit.
        largest: u64,
    },
    /// A pod asks for something Trainyard cannot honour yet.
    Unsupported { pod: String, features: Vec<String> },
    /// A pod waits for an object before it can be placed (a
    /// ResourceClaim not created yet).
    Waiting { pod: String, what: Vec<String> },
    /// A pod's request is malformed (e.g. 1.5 GPUs).
    InvalidRequest { pod: String, message: String },
    /// The job was rejected before scheduling (e.g. unknown queue).
    Rejected { message: String },
    /// The job's pods contradict their Kubernetes PodGroup (they name
    /// different schedulers or priorities): refused as kube-scheduler
    /// refuses such a group, with its code.
    SchedulerError { message: String },
    /// Its pods name a Kubernetes PodGroup that does not exist yet.
    WaitingForPodGroup { group: String },
    /// A starving gang that does not fit now holds a reservation: the
    /// earliest time its minimum could start as running jobs end at their
    /// walltimes, and the nodes it would take then (held for it: only jobs
    /// that end before `start` may use them).
    #[serde(rename_all = "camelCase")]
    Reserved {
        start: Timestamp,
        /// `start` minus the cycle's time, in seconds.
        starts_in_seconds: u64,
        nodes: Vec<String>,
        /// The tightest topology domain holding every node (`leaf g3`),
        /// when the cluster has a topology and one below the whole
        /// cluster does.
        domain: Option<String>,
        /// Jobs on the held nodes that started after this one was
        /// submitted (or this cycle) and end by `start`.
        backfilled: u32,
        /// Why it does not fit now, as the placement said.
        detail: String,
    },
    /// The gang (or one sub-group) fits in no single domain of its
    /// required topology level.
    #[serde(rename_all = "camelCase")]
    TopologyUnfit {
        /// `gang` or `sub-group NAME`.
        scope: String,
        /// What it needs, in `unit`s (GPUs for GPU pods, else pods).
        needs: u64,
        unit: String,
        level: String,
        /// Room for this gang's pods in the roomiest domain of `level`.
        largest: u64,
        /// That domain, when any exists.
        domain: Option<String>,
    },
    /// The gang would span more leaves than its `maxLeaves` allows.
    #[serde(rename_all = "camelCase")]
    TooManyLeaves {
        scope: String,
        needs_leaves: u32,
        max_leaves: u32,
        /// GPUs (or pods) it needs, in `unit`s.
        needs: u64,
        unit: String,
    },
    /// A job that is not preemptible would take a queue above its quota.
    #[serde(rename_all = "camelCase")]
    NonPreemptibleOverQuota {
        queue: String,
        resource: ResourceName,
        used: u64,
        requested: u64,
        quota: u64,
    },
    /// Evictions were made for this gang; it waits for the victims to
    /// terminate, with capacity reserved on the nominated nodes.
    #[serde(rename_all = "camelCase")]
    WaitingForVictims { victims: u32, nodes: Vec<String> },
    /// Running jobs are being moved out of its way (consolidation): it is
    /// nominated onto the room they leave.
    #[serde(rename_all = "camelCase")]
    Consolidating {
        /// Each move, for people: `team-b/eval-3 (4 GPUs) from gpu-17 to
        /// gpu-22`.
        moves: Vec<String>,
        /// The nodes the moves free that the gang takes.
        frees: Vec<String>,
    },
    /// The gang's queues are within quota with it, yet it has no room, and
    /// reclaim could not make any: capacity may be free but split across
    /// nodes. GPU amounts in milli-GPU.
    #[serde(rename_all = "camelCase")]
    InQuotaNoRoom {
        needs: u64,
        pods: u32,
        /// Free GPUs on the nodes the gang may use.
        free: u64,
        /// Most free GPUs on one of them.
        largest: u64,
        /// Nodes the gang may use (selectors, taints, models), of `nodes`.
        usable: u32,
        nodes: u32,
        /// Why reclaim and preemption made no room.
        refused: String,
        /// The placement failure as first reported.
        detail: String,
    },
    /// Pods of the job were bound by this cycle, then taken back (not
    /// evicted: they never started) to make room for a gang that reclaim
    /// or preemption favours. Without this, the next cycle would evict them.
    #[serde(rename_all = "camelCase")]
    Yielded { preemptor: String, message: String },
    /// The gang would fit in room a reclaim of this cycle freed and its
    /// reclaimer left over, but that room is not given this cycle to a
    /// gang that takes a queue above its fair share: the victims' queues
    /// could reclaim it back in the next cycle, and the two would
    /// alternate. Next cycle it is free room like any other.
    #[serde(rename_all = "camelCase")]
    ReclaimedRoomKept {
        /// The queue that would end above its fair share (its path).
        queue: String,
        resource: ResourceName,
        /// What the queue would hold with the gang.
        with_gang: u64,
        fair_share: u64,
    },
    /// The gang would fit in room a reclaim of this cycle freed, but that
    /// room was kept this cycle from a higher-priority gang of its own
    /// leaf queue (`ReclaimedRoomKept`): given to this one, the next cycle
    /// would preempt it for that gang. Next cycle the room is free to all.
    #[serde(rename_all = "camelCase")]
    ReclaimedRoomKeptForPriority {
        /// The higher-priority gang the room was kept from.
        job: String,
        priority: i32,
        /// This gang's priority.
        own_priority: i32,
    },
    /// The gang runs; some elastic pods above its minimum did not fit.
    #[serde(rename_all = "camelCase")]
    ElasticPending {
        placed: u32,
        pending: u32,
        detail: String,
    },
}

impl PendingReason {
    /// A one-word code for the reason, as a Kubernetes condition or Event
    /// reason (`Unschedulable`, `QueueAtLimit`, ...) and a metric label.
    pub fn code(&self) -> &'static str {
        match self {
            PendingReason::Unschedulable { .. } => "Unschedulable",
            PendingReason::QueueAtLimit { .. } => "QueueAtLimit",
            PendingReason::ExceedsQueueLimit { .. } => "ExceedsQueueLimit",
            PendingReason::ExceedsMaxWalltime { .. } => "ExceedsMaxWalltime",
            PendingReason::NotEnoughPods { .. } => "NotEnoughPods",
            PendingReason::NeverFits { .. } => "NeverFits",
            PendingReason::Unsupported { .. } => "Unsupported",
            PendingReason::Waiting { .. } => "WaitingForResourceClaim",
            PendingReason::InvalidRequest { .. } => "InvalidRequest",
            PendingReason::Rejected { .. } => "Rejected",
            PendingReason::SchedulerError { .. } => "SchedulerError",
            PendingReason::WaitingForPodGroup { .. } => "WaitingForPodGroup",
            PendingReason::Reserved { .. } => "Reserved",
            PendingReason::TopologyUnfit { .. } => "TopologyUnfit",
            PendingReason::TooManyLeaves { .. } => "TooManyLeaves",
            PendingReason::NonPreemptibleOverQuota { .. } => "NonPreemptibleOverQuota",
            PendingReason::WaitingForVictims { .. } => "WaitingForVictims",
            PendingReason::Consolidating { .. } => "Consolidating",
            PendingReason::InQuotaNoRoom { .. } => "InQuotaNoRoom",
            PendingReason::Yielded { .. } => "Yielded",
            PendingReason::ElasticPending { .. } => "ElasticPending",
            PendingReason::ReclaimedRoomKept { .. } => "ReclaimedRoomKept",
            PendingReason::ReclaimedRoomKeptForPriority { .. } => "ReclaimedRoomKeptForPriority",
        }
    }

    /// The gang could not be placed for lack of room (anywhere, or in one
    /// domain of its topology level, or within its leaf cap): what reclaim,
    /// preemption and the refill may help.
    pub fn is_lack_of_room(&self) -> bool {
        matches!(
            self,
            PendingReason::Unschedulable { .. }
                | PendingReason::TopologyUnfit { .. }
                | PendingReason::TooManyLeaves { .. }
                | PendingReason::Reserved { .. }
                | PendingReason::ReclaimedRoomKept { .. }
                | PendingReason::ReclaimedRoomKeptForPriority { .. }
        )
    }
}

impl fmt::Display for PendingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PendingReason::Unschedulable {
                needs,
                pods_needed,
                pods_placed,
                failed_pod,
                nodes_total,
                nodes_fit,
                filters,
            } => {
                let what = if needs.gpu > 0 {
                    format!(
                        "{} × {}",
                        ResourceName::Gpu.format_amount(needs.gpu),
                        ResourceName::Gpu
                    )
                } else {
                    needs.to_string()
                };
                write!(f, "gang needs {what} in {pods_needed} pod(s)")?;
                if *pods_placed > 0 {
                    write!(
                        f,
                        "; {pods_placed} placed, then pod {failed_pod} did not fit"
                    )?;
                }
                write!(f, "; {nodes_fit}/{nodes_total} nodes fit")?;
                let mut items: Vec<_> = filters
                    .iter()
                    .filter(|(r, _)| !matches!(r, FilterReason::DeviceCount { .. }))
                    .collect();
                items.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
                let mut parts: Vec<String> =
                    items.iter().map(|(r, n)| format!("{n} {r}")).collect();
                parts.extend(device_counts(filters, *nodes_fit, *nodes_total));
                if !parts.is_empty() {
                    f.write_str(": ")?;
                    f.write_str(&parts.join(", "))?;
                }
                Ok(())
            }
            PendingReason::QueueAtLimit {
                queue,
                resource,
                used,
                requested,
                limit,
            } => write!(
                f,
                "queue {queue} at limit {resource} {}/{} (gang needs {} more)",
                resource.format_amount(*used),
                resource.format_amount(*limit),
                resource.format_amount(*requested)
            ),
            PendingReason::ReclaimedRoomKept {
                queue,
                resource,
                with_gang,
                fair_share,
            } => write!(
                f,
                "it fits only in room this cycle's reclaim freed, which is kept from gangs that take a queue above its fair share ({queue} would hold {resource} {} of its fair share {}); the room is free to all next cycle",
                resource.format_amount(*with_gang),
                resource.format_amount(*fair_share)
            ),
            PendingReason::ReclaimedRoomKeptForPriority {
                job,
                priority,
                own_priority,
            } => write!(
                f,
                "it fits only in room this cycle's reclaim freed, which is kept from {job} of its queue (priority {priority} > {own_priority}): that gang may not take it this cycle, and would preempt this one for it next cycle; the room is free to all next cycle"
            ),
            PendingReason::ExceedsQueueLimit {
                queue,
                resource,
                needs,
                limit,
            } => write!(
                f,
                "gang minimum needs {} {resource}, above the limit {} of queue {queue}; it can never run there",
                resource.format_amount(*needs),
                resource.format_amount(*limit)
            ),
            PendingReason::ExceedsMaxWalltime {
                queue,
                walltime_seconds,
                max_seconds,
            } => write!(
                f,
                "walltime {} is above the maximum {} of queue {queue}; it can never start there",
                trainyard_model::format_seconds(*walltime_seconds),
                trainyard_model::format_seconds(*max_seconds)
            ),
            PendingReason::NotEnoughPods {
                subgroup,
                have,
                min_member,
            } => match subgroup {
                None => write!(
                    f,
                    "gang has {have} pod(s), fewer than minMember {min_member}"
                ),
                Some(s) => write!(
                    f,
                    "sub-group {s} has {have} pod(s), fewer than its minMember {min_member}"
                ),
            },
            PendingReason::NeverFits {
                pod,
                resource,
                requested,
                largest,
            } => write!(
                f,
                "pod {pod} can never fit: no node has {} {resource} allocatable (largest: {})",
                resource.format_amount(*requested),
                resource.format_amount(*largest)
            ),
            PendingReason::Unsupported { pod, features } => write!(
                f,
                "pod {pod} uses unsupported feature(s): {}",
                features.join(", ")
            ),
            PendingReason::Waiting { pod, what } => {
                write!(f, "pod {pod} is {}", what.join(", "))
            }
            PendingReason::InvalidRequest { pod, message } => {
                write!(f, "pod {pod}: invalid request: {message}")
            }
            PendingReason::Rejected { message } => write!(f, "rejected: {message}"),
            PendingReason::SchedulerError { message } => write!(f, "{message}"),
            PendingReason::WaitingForPodGroup { group } => write!(
                f,
                "waiting for PodGroup {group} to be created (its pods name it by spec.schedulingGroup.podGroupName)"
            ),
            PendingReason::Reserved {
                start,
                starts_in_seconds,
                nodes,
                domain,
                backfilled,
                ..
            } => {
                let n = nodes.len();
                write!(f, "reserved {n} node{}", if n == 1 { "" } else { "s" })?;
                if let Some(d) = domain {
                    write!(f, " in {d}")?;
                }
                // No countdown: the message changes only when the
                // reservation does (it is written to pods when it changes).
                let now = Timestamp(start.0 - (*starts_in_seconds as i64) * 1000);
                write!(
                    f,
                    " from {}",
                    trainyard_model::format_utc_minute(*start, now)
                )?;
                if *backfilled > 0 {
                    write!(
                        f,
                        "; {backfilled} job{} backfilled ahead of it",
                        if *backfilled == 1 { "" } else { "s" }
                    )?;
                }
                Ok(())
            }
            PendingReason::TopologyUnfit {
                scope,
                needs,
                unit,
                level,
                largest,
                domain,
            } => {
                write!(
                    f,
                    "{scope} needs {needs} {unit} within one {level}; largest free {level} has {largest}"
                )?;
                if let Some(d) = domain {
                    write!(f, " ({d})")?;
                }
                Ok(())
            }
            PendingReason::TooManyLeaves {
                scope,
                needs_leaves,
                max_leaves,
                needs,
                unit,
            } => write!(
                f,
                "{scope} needs {needs} {unit} over at least {needs_leaves} leaves; maxLeaves is {max_leaves}"
            ),
            PendingReason::NonPreemptibleOverQuota {
                queue,
                resource,
                used,
                requested,
                quota,
            } => write!(
                f,
                "not preemptible, so it runs only within quota: queue {queue} would have {resource} {} + {} > quota {}",
                resource.format_amount(*used),
                resource.format_amount(*requested),
                resource.format_amount(*quota)
            ),
            PendingReason::WaitingForVictims { victims, nodes } => write!(
                f,
                "waiting for {victims} evicted pod(s) to terminate; room reserved on {}",
                nodes.join(", ")
            ),
            PendingReason::Consolidating { moves, frees } => write!(
                f,
                "consolidating: moving {} frees {} for this gang",
                moves.join(", "),
                frees.join(", ")
            ),
            PendingReason::InQuotaNoRoom {
                needs,
                pods,
                free,
                largest,
                usable,
                nodes,
                refused,
                detail,
            } => {
                let g = |v: &u64| ResourceName::Gpu.format_amount(*v);
                let on = if usable < nodes {
                    format!(" on the {usable} node(s) it may use")
                } else {
                    String::new()
                };
                if *pods == 1 && free >= needs && largest < needs {
                    // Enough in total, split across nodes.
                    write!(
                        f,
                        "in quota; {} GPUs free{on} but no node has {}",
                        g(free),
                        g(needs)
                    )?;
                } else if *pods > 1 && free >= needs {
                    write!(
                        f,
                        "in quota; {} GPUs free{on} but not where its {pods} pods fit ({detail})",
                        g(free)
                    )?;
                } else {
                    write!(f, "{detail}; in quota")?;
                }
                write!(f, "; reclaim refused: {refused}")
            }
            PendingReason::Yielded { message, .. } => {
                write!(f, "placed, then not bound: {message}")
            }
            PendingReason::ElasticPending {
                placed,
                pending,
                detail,
            } => write!(
                f,
                "{placed} elastic pod(s) placed, {pending} still pending: {detail}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_round_trip_through_json() {
        let reason = PendingReason::Unschedulable {
            needs: Resources::zero().with_gpus(16),
            pods_needed: 2,
            pods_placed: 1,
            failed_pod: "ml/a-1".into(),
            nodes_total: 40,
            nodes_fit: 0,
            filters: BTreeMap::from([
                (FilterReason::Insufficient(ResourceName::Gpu), 31),
                (FilterReason::UntoleratedTaint("dedicated=infer".into()), 9),
            ]),
        };
        assert_eq!(
            reason.to_string(),
            "gang needs 16 × nvidia.com/gpu in 2 pod(s); 1 placed, then pod ml/a-1 did not fit; 0/40 nodes fit: 31 insufficient nvidia.com/gpu, 9 untolerated taint dedicated=infer"
        );
        let json = serde_json::to_value(&reason).unwrap();
        assert_eq!(json["kind"], "unschedulable");
        assert_eq!(json["filters"]["insufficient nvidia.com/gpu"], 31);
        let back: PendingReason = serde_json::from_value(json).unwrap();
        assert_eq!(back, reason);
    }

    #[test]
    fn a_pod_larger_than_every_node_says_it_never_fits() {
        let reason = PendingReason::NeverFits {
            pod: "ml/big-0".into(),
            resource: ResourceName::Gpu,
            requested: 16_000,
            largest: 8_000,
        };
        expect_test::expect![
            "pod ml/big-0 can never fit: no node has 16 nvidia.com/gpu allocatable (largest: 8)"
        ]
        .assert_eq(&reason.to_string());
        assert_eq!(reason.code(), "NeverFits");
        assert!(!reason.is_lack_of_room(), "no freed room helps it");
        let json = serde_json::to_value(&reason).unwrap();
        assert_eq!(json["kind"], "neverFits");
        assert_eq!(json["requested"], 16_000);
        let back: PendingReason = serde_json::from_value(json).unwrap();
        assert_eq!(back, reason);
    }

    #[test]
    fn room_kept_for_a_higher_priority_gang_names_it() {
        let reason = PendingReason::ReclaimedRoomKeptForPriority {
            job: "ml/big".into(),
            priority: 50,
            own_priority: 0,
        };
        expect_test::expect!["it fits only in room this cycle's reclaim freed, which is kept from ml/big of its queue (priority 50 > 0): that gang may not take it this cycle, and would preempt this one for it next cycle; the room is free to all next cycle"]
            .assert_eq(&reason.to_string());
        assert_eq!(reason.code(), "ReclaimedRoomKeptForPriority");
        assert!(reason.is_lack_of_room());
        let json = serde_json::to_value(&reason).unwrap();
        assert_eq!(json["kind"], "reclaimedRoomKeptForPriority");
        assert_eq!(json["ownPriority"], 0);
        let back: PendingReason = serde_json::from_value(json).unwrap();
        assert_eq!(back, reason);
    }

    #[test]
    fn kept_reclaimed_room_says_which_queue_and_until_when() {
        let reason = PendingReason::ReclaimedRoomKept {
            queue: "org/c".into(),
            resource: ResourceName::Gpu,
            with_gang: 6000,
            fair_share: 4000,
        };
        expect_test::expect!["it fits only in room this cycle's reclaim freed, which is kept from gangs that take a queue above its fair share (org/c would hold nvidia.com/gpu 6 of its fair share 4); the room is free to all next cycle"]
            .assert_eq(&reason.to_string());
        assert_eq!(reason.code(), "ReclaimedRoomKept");
        assert!(reason.is_lack_of_room());
        let json = serde_json::to_value(&reason).unwrap();
        assert_eq!(json["kind"], "reclaimedRoomKept");
        assert_eq!(json["withGang"], 6000);
        let back: PendingReason = serde_json::from_value(json).unwrap();
        assert_eq!(back, reason);
    }
}
