//! A pod of ours as a job member: the job it joins (`JobKey`), what the
//! job needs of it, and its nominal GPU-memory share.

use super::*;

/// Which job a pod of ours belongs to: its group's, or its own when it
/// names none. The job id is `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobKey {
    pub namespace: String,
    /// Named by a group (label or annotation), not a group-less pod.
    pub group: bool,
    pub name: String,
}

impl JobKey {
    /// The job a pod of ours joins: its group's ([`group_name`]), else
    /// its own.
    pub fn of(pod: &PodInfo) -> JobKey {
        match group_name(pod) {
            Some(g) => JobKey {
                namespace: pod.namespace.clone(),
                group: true,
                name: g.name.to_string(),
            },
            None => JobKey {
                namespace: pod.namespace.clone(),
                group: false,
                name: pod.name.clone(),
            },
        }
    }

    /// The job id, `namespace/name`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Where a pod's group name was read: `spec.schedulingGroup.podGroupName`
/// (Kubernetes' own PodGroup), or a label or annotation.
pub(crate) const SCHEDULING_GROUP_FIELD: &str = "spec.schedulingGroup.podGroupName";

/// A pod's group, as [`group_name`] reads it.
pub(crate) struct GroupName<'p> {
    pub(crate) name: &'p str,
    /// Named by `spec.schedulingGroup.podGroupName`.
    pub(crate) upstream: bool,
    /// Where it was read: the key, or [`SCHEDULING_GROUP_FIELD`].
    pub(crate) from: &'static str,
    /// Other places naming another group: (where, name).
    pub(crate) others: Vec<(&'static str, &'p str)>,
}

/// The group a pod joins, in precedence order: Trainyard's key
/// (`trainyard.io/pod-group`), then Kubernetes' own
/// `spec.schedulingGroup.podGroupName`, then the peers' keys (Volcano,
/// coscheduling, KAI). docs/snapshot.md gives the order.
pub(crate) fn group_name(pod: &PodInfo) -> Option<GroupName<'_>> {
    let mut found: Vec<(&'static str, &str)> = Vec::new();
    for (i, (k, place)) in keys::POD_GROUP_KEYS.iter().enumerate() {
        if let Some(v) = pod.meta.lookup(k, *place) {
            found.push((k, v));
        }
        if i == 0
            && let Some(g) = &pod.scheduling_group
        {
            found.push((SCHEDULING_GROUP_FIELD, g.as_str()));
        }
    }
    let (&(from, name), rest) = found.split_first()?;
    Some(GroupName {
        name,
        upstream: from == SCHEDULING_GROUP_FIELD,
        from,
        others: rest.iter().copied().filter(|(_, v)| *v != name).collect(),
    })
}

/// Interprets one pod of ours (its scheduler is Trainyard's, it is not
/// finished): the job it joins and what the job needs of it. Problems are
/// pushed to `cx`.
pub(crate) fn member(cx: &mut Ctx, loc: Loc, pod: PodInfo) -> (JobKey, Member) {
    let object = format!("Pod {}", pod.key());
    if !pod.ignored.is_empty() {
        cx.warnings.push(format!(
            "{}: {object}: ignored: {}",
            loc.at(),
            pod.ignored.join(", ")
        ));
    }
    // Only a pending pod is placed, so only there do unchecked fields
    // matter; they do not stop placement.
    if pod.node_name.is_none() {
        for note in &pod.unchecked {
            cx.warnings.push(format!("{}: {object}: {note}", loc.at()));
        }
    }
    for conflict in label_annotation_conflicts(&pod.meta, POD_KEYS) {
        cx.warnings
            .push(format!("{}: {object}: {conflict}", loc.at()));
    }
    let named = group_name(&pod);
    let upstream_group = named.as_ref().is_some_and(|g| g.upstream);
    let group = named.map(|g| {
        let (k, v) = (g.from, g.name);
        if !g.others.is_empty() {
            let o: Vec<String> = g.others.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            cx.warnings.push(format!(
                "{}: {object}: group names disagree ({k}={v:?}, {}); using {v:?}",
                loc.at(),
                o.join(", ")
            ));
        }
        v.to_string()
    });
    let queue = first_of(&pod.meta, keys::QUEUE_KEYS).and_then(|(k, place, v, others)| {
        if !others.is_empty() {
            let o: Vec<String> = others.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            cx.warnings.push(format!(
                "{}: {object}: queue names disagree ({k}={v:?}, {}); using {v:?}",
                loc.at(),
                o.join(", ")
            ));
        }
        // Queue names follow the rule of Queue metadata.name.
        if let Some(problem) = dns1123_subdomain_problem(v) {
            cx.errors.push(loc.error(
                Some(&object),
                &meta_field(&pod.meta, k, place),
                format!("invalid queue name: {problem}"),
            ));
            return None;
        }
        Some((k, v.to_string()))
    });
    let subgroup = pod
        .meta
        .lookup(keys::SUB_GROUP, KeyPlace::LabelOrAnnotation)
        .map(str::to_string);
    let rank = topology::pod_rank(&pod.meta).unwrap_or_else(|(field, message)| {
        cx.errors
            .push(loc.error(Some(&object), &field, format!("bad rank: {message}")));
        None
    });
    let mut level_keys = |keys: &[(&'static str, KeyPlace)], what: &str| {
        first_of(&pod.meta, keys).map(|(k, _, v, others)| {
            if !others.is_empty() {
                let o: Vec<String> = others.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
                cx.warnings.push(format!(
                    "{}: {object}: {what} topology levels disagree ({k}={v:?}, {}); using {v:?}",
                    loc.at(),
                    o.join(", ")
                ));
            }
            (k, v.to_string())
        })
    };
    let required = level_keys(keys::REQUIRED_TOPOLOGY_KEYS, "required");
    let preferred = level_keys(keys::PREFERRED_TOPOLOGY_KEYS, "preferred");
    let preemptible: Vec<PreemptibleMark> = preemptible_marks(&pod.meta)
        .into_iter()
        .filter(|mark| match &mark.value {
            Ok(_) => true,
            Err(message) => {
                cx.errors
                    .push(loc.error(Some(&object), &mark.field, message.clone()));
                false
            }
        })
        .collect();
    let key = JobKey {
        namespace: pod.namespace.clone(),
        group: group.is_some(),
        name: group.unwrap_or_else(|| pod.name.clone()),
    };
    (
        key,
        Member {
            loc,
            upstream_group,
            pod,
            queue,
            subgroup,
            rank,
            required,
            preferred,
            preemptible,
        },
    )
}

/// The largest GPU device memory of each node and of the cluster, for
/// nominal GPU-memory shares.
pub(crate) struct GpuMemory {
    by_node: BTreeMap<String, u64>,
    cluster: u64,
}

impl GpuMemory {
    pub(crate) fn of(nodes: &[(Loc, Node)]) -> GpuMemory {
        let largest = |n: &Node| n.gpus.iter().map(|g| g.memory_bytes).max().unwrap_or(0);
        let by_node: BTreeMap<String, u64> = nodes
            .iter()
            .map(|(_, n)| (n.name.clone(), largest(n)))
            .collect();
        let cluster = by_node.values().copied().max().unwrap_or(0);
        GpuMemory { by_node, cluster }
    }

    /// Sets `requests.gpu` of every pod with a GPU-memory share to its nominal
    /// share (docs/gpu-sharing-requests.md): measured against the largest GPU
    /// device of the pod's node when it is bound, else of the whole snapshot;
    /// one GPU, with a warning, when that memory is unknown. Needs every node,
    /// so it runs once all documents are read. Pods that are not used (finished,
    /// or pending for another scheduler) are left alone.
    pub(crate) fn set_shares(
        &self,
        pods: &mut [(Loc, PodInfo)],
        opts: &LoadOptions,
        warnings: &mut Vec<String>,
    ) {
        let (by_node, cluster) = (&self.by_node, self.cluster);
        for (loc, pod) in pods.iter_mut() {
            let Some(GpuShare::Memory { key, bytes }) = pod.gpu_share else {
                continue;
            };
            let ignored = pod.scheduler != opts.scheduler_name && pod.node_name.is_none();
            if pod.terminal || ignored {
                continue;
            }
            let device = match &pod.node_name {
                Some(node) => by_node.get(node.as_str()).copied().unwrap_or(0),
                None => cluster,
            };
            if device == 0 {
                let why = match &pod.node_name {
                    None => format!(
                        "no node reports its GPU memory (node label {})",
                        keys::NODE_GPU_MEMORY_MIB
                    ),
                    Some(node) if by_node.contains_key(node.as_str()) => format!(
                        "its node {node} does not report its GPU memory (node label {})",
                        keys::NODE_GPU_MEMORY_MIB
                    ),
                    Some(node) => format!("its node {node} is not in the snapshot"),
                };
                let value = pod.meta.annotations.get(key).map_or("", String::as_str);
                warnings.push(format!(
                "{}: Pod {}: annotation {key}={value:?}: {why}; the pod's nominal GPU share is taken as 1 GPU",
                loc.at(),
                pod.key()
            ));
            }
            pod.requests.gpu = nominal_gpu_share(bytes, device);
        }
    }
}
