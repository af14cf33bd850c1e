//! Turning read objects into a snapshot: pods into jobs and external pods,
//! queues into a tree, the Topology document and node labels into the
//! topology.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use trainyard_crd::gpu::{GpuShare, nominal_gpu_share};
use trainyard_crd::keys::{self, KeyPlace};
use trainyard_crd::names::dns1123_subdomain_problem;
use trainyard_crd::preemption::{PreemptibleMark, default_preemptible, preemptible_marks};
use trainyard_crd::{ConstraintField, PodGroup, Queue, TopologyConstraintSpec};
use trainyard_model::{
    GroupProblem, Job, Node, Nomination, PlacementConstraints, QueueError, QueueSpec, QueueTree,
    Snapshot, SubGroup, Task, TaskKey, TaskState, Timestamp, TopologyConstraint,
};

use crate::dra::PodClaims;
use crate::interpret::Objects;
use crate::k8s::PodInfo;
use crate::meta::*;
use crate::read::{Loc, Reader};
use crate::topology::{self, ClusterTopology};
use crate::{LoadError, LoadErrors, LoadOptions, Loaded};

/// Priority classes every cluster has.
const BUILTIN_PRIORITY_CLASSES: &[(&str, i32)] = &[
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

pub(crate) struct Member {
    loc: Loc,
    /// Its group was named by `spec.schedulingGroup.podGroupName`.
    upstream_group: bool,
    pod: PodInfo,
    /// Queue named on the pod: (key, value).
    queue: Option<(&'static str, String)>,
    subgroup: Option<String>,
    rank: Option<u32>,
    /// Topology levels named by the pod's annotations (Kueue, KAI): (key, value).
    required: Option<(&'static str, String)>,
    preferred: Option<(&'static str, String)>,
    /// Preemptibility keys on the pod with a valid value, in precedence order.
    preemptible: Vec<PreemptibleMark>,
}

pub(crate) struct JobDraft {
    pub(crate) namespace: String,
    /// `None` for a pod without a group (gang of one).
    pub(crate) group: Option<String>,
    pub(crate) members: Vec<Member>,
    /// Pods of other schedulers naming the same Kubernetes PodGroup by
    /// `spec.schedulingGroup.podGroupName`: (pod, schedulerName).
    pub(crate) strangers: Vec<(String, String)>,
}

pub(crate) struct Ctx {
    pub(crate) opts: LoadOptions,
    pub(crate) errors: Vec<LoadError>,
    pub(crate) warnings: Vec<String>,
    pub(crate) priority_classes: BTreeMap<String, i32>,
    /// Priority classes with `preemptionPolicy: Never`.
    pub(crate) never_classes: BTreeSet<String>,
    /// Unresolvable class -> who uses it (where defined, `Kind ns/name`).
    pub(crate) unresolved: BTreeMap<String, Vec<(Loc, String)>>,
    pub(crate) constraints: BTreeMap<PlacementConstraints, Arc<PlacementConstraints>>,
    pub(crate) topology: ClusterTopology,
    /// Names of the snapshot's nodes (for nominations).
    pub(crate) node_names: BTreeSet<String>,
    /// What each pod of ours claims (DRA), by pod key.
    pub(crate) pod_claims: Arc<BTreeMap<String, PodClaims>>,
}

impl Ctx {
    pub(crate) fn new(
        opts: &LoadOptions,
        nodes: &[(Loc, Node)],
        priority_classes: BTreeMap<String, i32>,
        never_classes: BTreeSet<String>,
        topology: ClusterTopology,
    ) -> Ctx {
        Ctx {
            opts: opts.clone(),
            errors: Vec::new(),
            warnings: Vec::new(),
            priority_classes,
            never_classes,
            unresolved: BTreeMap::new(),
            constraints: BTreeMap::new(),
            topology,
            node_names: nodes.iter().map(|(_, n)| n.name.clone()).collect(),
            pod_claims: Arc::default(),
        }
    }

    /// One warning per priority class no PriorityClass defines, at its
    /// first user.
    pub(crate) fn flush_unresolved(&mut self) {
        for (class, users) in std::mem::take(&mut self.unresolved) {
            let Some((loc, first)) = users.first() else {
                continue;
            };
            let mut msg = format!(
                "{}: {first}: priorityClassName {class:?} is not defined by any PriorityClass document; treated as unset",
                loc.at()
            );
            if users.len() > 1 {
                let others: Vec<String> = users[1..].iter().map(|(_, u)| u.clone()).collect();
                msg.push_str(&format!(" (also used by {})", list_names(&others)));
            }
            self.warnings.push(msg);
        }
    }

    fn resolve(&mut self, class: &str, loc: &Loc, user: String) -> Option<i32> {
        let v = self.priority_classes.get(class).copied().or_else(|| {
            BUILTIN_PRIORITY_CLASSES
                .iter()
                .find(|(n, _)| *n == class)
                .map(|(_, v)| *v)
        });
        if v.is_none() {
            self.unresolved
                .entry(class.to_string())
                .or_default()
                .push((loc.clone(), user));
        }
        v
    }

    fn intern(&mut self, c: PlacementConstraints) -> Arc<PlacementConstraints> {
        if let Some(a) = self.constraints.get(&c) {
            return Arc::clone(a);
        }
        let a = Arc::new(c.clone());
        self.constraints.insert(c, Arc::clone(&a));
        a
    }
}

pub(crate) fn assemble(reader: Reader, opts: &LoadOptions) -> Result<Loaded, LoadErrors> {
    let Objects {
        mut nodes,
        mut pods,
        priority_classes,
        never_classes,
        queues,
        pod_groups,
        workloads,
        topology: topology_doc,
        dra,
        mut errors,
        mut warnings,
    } = reader.objects;
    let built = {
        let has: BTreeMap<&str, &trainyard_model::Node> =
            nodes.iter().map(|(_, n)| (n.name.as_str(), n)).collect();
        let node_has = |node: &str, resource: &str| {
            has.get(node).is_some_and(|n| {
                n.allocatable
                    .get(&trainyard_model::ResourceName::parse(resource))
                    > 0
            })
        };
        crate::dra::build(&dra, pods.iter().map(|(_, p)| p), opts, &node_has)
    };
    // Nodes whose DRA devices serve extended resources have them (GPUs
    // one by one) before the topology counts their GPUs.
    if !built.dra.backed.is_empty() {
        let extended = built.dra.with_extended(
            &nodes
                .iter()
                .map(|(_, n)| Arc::new(n.clone()))
                .collect::<Vec<_>>(),
        );
        for ((_, n), e) in nodes.iter_mut().zip(extended) {
            *n = Arc::unwrap_or_clone(e);
        }
    }
    let topology = topology::build(&nodes, topology_doc.as_ref(), &mut errors, &mut warnings);
    let mut cx = Ctx::new(opts, &nodes, priority_classes, never_classes, topology);
    cx.errors = errors;
    cx.warnings = warnings;
    cx.warnings.extend(built.warnings);
    cx.pod_claims = Arc::new(built.pods);

    GpuMemory::of(&nodes).set_shares(&mut pods, opts, &mut cx.warnings);

    // Pods: ours, external, or ignored.
    let mut external = Vec::new();
    let mut foreign_pending = Vec::new();
    let mut drafts: BTreeMap<JobKey, JobDraft> = BTreeMap::new();
    let mut strangers: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
    for (loc, pod) in pods {
        if pod.terminal {
            continue;
        }
        if pod.scheduler != opts.scheduler_name {
            if let Some(g) = &pod.scheduling_group {
                strangers
                    .entry((pod.namespace.clone(), g.clone()))
                    .or_default()
                    .push((pod.key(), pod.scheduler.clone()));
            }
            match &pod.node_name {
                Some(node) => external.push(pod.external(node)),
                None => foreign_pending.push(pod.key()),
            }
            continue;
        }
        let (key, member) = member(&mut cx, loc, pod);
        drafts
            .entry(key.clone())
            .or_insert_with(|| JobDraft {
                namespace: key.namespace.clone(),
                group: key.group.then(|| key.name.clone()),
                members: Vec::new(),
                strangers: Vec::new(),
            })
            .members
            .push(member);
    }
    for (key, draft) in drafts.iter_mut() {
        if key.group
            && let Some(s) = strangers.remove(&(key.namespace.clone(), key.name.clone()))
        {
            draft.strangers = s;
        }
    }
    if !foreign_pending.is_empty() {
        foreign_pending.sort();
        cx.warnings.push(format!(
            "ignored {} pending pod(s) of other schedulers (schedulerName is not {:?}): {}",
            foreign_pending.len(),
            opts.scheduler_name,
            list_names(&foreign_pending)
        ));
    }

    // Job ids must be unique: a group and a group-less pod may collide.
    let mut ids: BTreeMap<String, (bool, String)> = BTreeMap::new();
    for (
        JobKey {
            namespace: ns,
            group: is_group,
            name,
        },
        d,
    ) in &drafts
    {
        let id = format!("{ns}/{name}");
        if let Some((_, first)) = ids.get(&id) {
            // Invariant: a draft is created together with its first member.
            let m = &d.members[0];
            cx.errors.push(m.loc.error(
                Some(&format!("Pod {}", m.pod.key())),
                "",
                format!(
                    "job id {id:?} is used both by {first} and by {}; rename the pod or the group",
                    if *is_group {
                        format!("group {name:?}")
                    } else {
                        "this group-less pod".to_string()
                    }
                ),
            ));
        } else {
            let what = if *is_group {
                format!("group {name:?}")
            } else {
                format!("group-less pod {id}")
            };
            ids.insert(id, (*is_group, what));
        }
    }

    let groups_by_key: BTreeMap<(String, String), (Loc, PodGroup)> = pod_groups
        .into_iter()
        .map(|(loc, pg)| {
            (
                (pg.namespace().to_string(), pg.metadata.name.clone()),
                (loc, pg),
            )
        })
        .collect();

    workload_refs(&groups_by_key, &workloads, &mut cx.warnings);

    let mut jobs = Vec::new();
    let mut default_used = false;
    let mut groups_used: BTreeSet<(String, String)> = BTreeSet::new();
    for draft in drafts.into_values() {
        let key = draft
            .group
            .as_ref()
            .map(|g| (draft.namespace.clone(), g.clone()));
        let pg = key.as_ref().and_then(|k| groups_by_key.get(k));
        if pg.is_some()
            && let Some(k) = key
        {
            groups_used.insert(k);
        }
        let job = build_job(&mut cx, draft, pg);
        default_used |= job.queue == opts.default_queue;
        jobs.push(job);
    }
    // PodGroups no pod joins: checked when read (levels here), otherwise unused.
    for (key, (loc, pg)) in &groups_by_key {
        if !groups_used.contains(key) {
            for e in pg.upstream_problems() {
                cx.errors
                    .push(loc.error(Some(&e.object), &e.field, e.message));
            }
            group_constraint(&mut cx, loc, pg, None, &pg.spec.topology);
            for (i, sg) in pg.spec.sub_groups.iter().enumerate() {
                group_constraint(&mut cx, loc, pg, Some(i), &sg.topology);
            }
            cx.warnings.push(format!(
                "{}: {} has no pods; ignored",
                loc.at(),
                pg.object()
            ));
        }
    }

    // Unresolvable priority classes: one warning each, at the first user.
    cx.flush_unresolved();

    // Queue tree, with the implicit default queue. The live service's
    // rule: a Queue the tree cannot use is left out with its reason (a
    // warning naming file, object and field), its jobs pend with it, and
    // the rest is scheduled.
    let usable = usable_queue_tree(&queues, default_used, opts);
    cx.warnings.extend(
        usable
            .errors
            .iter()
            .map(|e| format!("{e}; the queue is left out, its jobs wait")),
    );

    if !cx.errors.is_empty() {
        return Err(LoadErrors(cx.errors));
    }
    let tree = usable.tree;
    for job in &mut jobs {
        crate::interpret::check_queue_usable(&tree, &usable.excluded, job);
    }

    nodes.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    jobs.sort_by(|a, b| a.id.cmp(&b.id));
    external.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Loaded {
        snapshot: Snapshot {
            nodes: nodes.into_iter().map(|(_, n)| Arc::new(n)).collect(),
            dra: Arc::new(built.dra),
            queues: Arc::new(tree),
            jobs: jobs.into_iter().map(Arc::new).collect(),
            external: external.into_iter().map(Arc::new).collect(),
            topology: cx.topology.topology.clone(),
            usage: Default::default(),
            user_usage: Default::default(),
            runtimes: Default::default(),
        },
        warnings: cx.warnings,
        device_classes: built.classes,
    })
}

mod job;
mod member;
mod queues;

pub(crate) use job::{build_job, group_constraint};
pub use member::JobKey;
pub(crate) use member::{GpuMemory, member};
pub use queues::UsableTree;
pub(crate) use queues::{reject_if_bad_queue, usable_queue_tree};

/// Warns of a Kubernetes PodGroup naming a template its Workload (when
/// loaded) does not have. The PodGroup carries what Trainyard reads, so
/// it is still used.
fn workload_refs(
    groups: &BTreeMap<(String, String), (Loc, PodGroup)>,
    workloads: &[(Loc, trainyard_crd::podgroup::upstream::Workload)],
    warnings: &mut Vec<String>,
) {
    for (loc, pg) in groups.values() {
        let Some((workload, template)) = pg.upstream.as_ref().and_then(|u| u.workload.as_ref())
        else {
            continue;
        };
        let found = workloads.iter().find(|(_, w)| {
            w.metadata.name == *workload && w.metadata.namespace_or_default() == pg.namespace()
        });
        if let Some((_, w)) = found
            && !w.templates.contains(template)
        {
            warnings.push(format!(
                "{}: {}: names template {template:?} of {}, which has only {}",
                loc.at(),
                pg.object(),
                w.object(),
                w.templates
                    .iter()
                    .map(|t| format!("{t:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
}
