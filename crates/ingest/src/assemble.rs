//! Turning read objects into a snapshot: pods into jobs and external pods,
//! queues into a tree, the Topology document and node labels into the
//! topology.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use trainyard_crd::gpu::{GpuShare, nominal_gpu_share};
use trainyard_crd::keys::{self, KeyPlace};
use trainyard_crd::names::dns1123_subdomain_problem;
use trainyard_crd::preemption::{PreemptibleMark, default_preemptible, preemptible_marks};
use trainyard_crd::{ConstraintField, ObjectMeta, PodGroup, Queue, TopologyConstraintSpec};
use trainyard_model::{
    ExternalPod, Job, Node, Nomination, PlacementConstraints, QueueError, QueueSpec, QueueTree,
    Snapshot, SubGroup, Task, TaskState, Timestamp, TopologyConstraint,
};

use crate::k8s::PodInfo;
use crate::read::{Loc, Reader};
use crate::topology::{self, ClusterTopology};
use crate::{LoadError, LoadErrors, LoadOptions, Loaded};

/// Priority classes every cluster has.
const BUILTIN_PRIORITY_CLASSES: &[(&str, i32)] = &[
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

/// At most this many names are listed in one message.
const LIST_MAX: usize = 5;

fn list_names(names: &[String]) -> String {
    let mut s = names
        .iter()
        .take(LIST_MAX)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > LIST_MAX {
        s.push_str(&format!(" and {} more", names.len() - LIST_MAX));
    }
    s
}

/// A key and the value found under it.
type KeyValue<'m> = (&'static str, &'m str);

/// The first present value among `keys` (with its key and where it is
/// read from) and every other present value (key, value) that differs
/// from it.
fn first_of<'m>(
    meta: &'m ObjectMeta,
    keys: &[(&'static str, KeyPlace)],
) -> Option<(&'static str, KeyPlace, &'m str, Vec<KeyValue<'m>>)> {
    let mut found = keys
        .iter()
        .filter_map(|(k, place)| meta.lookup(k, *place).map(|v| (*k, *place, v)));
    let (k, place, v) = found.next()?;
    let others = found
        .filter(|(_, _, o)| *o != v)
        .map(|(k, _, o)| (k, o))
        .collect();
    Some((k, place, v, others))
}

/// Where the value of `key` looked up as `place` was found:
/// `metadata.labels.<key>` or `metadata.annotations.<key>`.
pub(crate) fn meta_field(meta: &ObjectMeta, key: &str, place: KeyPlace) -> String {
    let label = match place {
        KeyPlace::Label => true,
        KeyPlace::Annotation => false,
        KeyPlace::LabelOrAnnotation => meta.lookup(key, KeyPlace::Label).is_some(),
    };
    if label {
        format!("metadata.labels.{key}")
    } else {
        format!("metadata.annotations.{key}")
    }
}

/// Keys of a pod that are read "label, then annotation" (among others).
const POD_KEYS: &[&[(&str, KeyPlace)]] = &[
    keys::POD_GROUP_KEYS,
    keys::QUEUE_KEYS,
    &[(keys::SUB_GROUP, KeyPlace::LabelOrAnnotation)],
    keys::PREEMPTIBLE_KEYS,
];

/// For each of `key_lists`' keys read "label, then annotation" that is set
/// to different non-empty values as a label and as an annotation: a
/// message saying the label wins.
fn label_annotation_conflicts(meta: &ObjectMeta, key_lists: &[&[(&str, KeyPlace)]]) -> Vec<String> {
    key_lists
        .iter()
        .flat_map(|list| list.iter())
        .filter(|(_, place)| *place == KeyPlace::LabelOrAnnotation)
        .filter_map(|(key, _)| {
            let label = meta.lookup(key, KeyPlace::Label)?;
            let annotation = meta.lookup(key, KeyPlace::Annotation)?;
            (label != annotation).then(|| {
                format!(
                    "label {key}={label:?} and annotation {key}={annotation:?} differ; using the label's {label:?}"
                )
            })
        })
        .collect()
}

pub(crate) struct Member {
    loc: Loc,
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
    let Reader {
        mut nodes,
        mut pods,
        priority_classes,
        never_classes,
        queues,
        pod_groups,
        topology: topology_doc,
        mut errors,
        mut warnings,
        ..
    } = reader;
    let topology = topology::build(&nodes, topology_doc.as_ref(), &mut errors, &mut warnings);
    let mut cx = Ctx::new(opts, &nodes, priority_classes, never_classes, topology);
    cx.errors = errors;
    cx.warnings = warnings;

    // Queues.
    let specs = QueueSpecs::of(&queues, &mut cx.errors);

    GpuMemory::of(&nodes).set_shares(&mut pods, opts, &mut cx.warnings);

    // Pods: ours, external, or ignored.
    let mut external = Vec::new();
    let mut foreign_pending = Vec::new();
    let mut drafts: BTreeMap<JobKey, JobDraft> = BTreeMap::new();
    for (loc, pod) in pods {
        if pod.terminal {
            continue;
        }
        if pod.scheduler != opts.scheduler_name {
            match &pod.node_name {
                Some(node) => external.push(ExternalPod {
                    name: pod.key(),
                    node: node.clone(),
                    requests: pod.requests.clone(),
                    gpus: pod.gpus.clone(),
                }),
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
            })
            .members
            .push(member);
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

    // Queue tree, with the implicit default queue.
    let tree = specs
        .tree(default_used, opts)
        .map_err(|e| cx.errors.extend(e))
        .ok();

    if !cx.errors.is_empty() {
        return Err(LoadErrors(cx.errors));
    }
    // Without errors the tree was built.
    let tree = tree.unwrap_or_default();
    for job in &mut jobs {
        reject_if_bad_queue(&tree, job);
    }

    nodes.sort_by(|a, b| a.1.name.cmp(&b.1.name));
    jobs.sort_by(|a, b| a.id.cmp(&b.id));
    external.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Loaded {
        snapshot: Snapshot {
            nodes: nodes.into_iter().map(|(_, n)| Arc::new(n)).collect(),
            queues: Arc::new(tree),
            jobs: jobs.into_iter().map(Arc::new).collect(),
            external: external.into_iter().map(Arc::new).collect(),
            topology: cx.topology.topology.clone(),
        },
        warnings: cx.warnings,
    })
}

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
    /// The job a pod of ours joins: its group's (the first group key it
    /// carries), else its own.
    pub fn of(pod: &PodInfo) -> JobKey {
        match first_of(&pod.meta, keys::POD_GROUP_KEYS) {
            Some((_, _, v, _)) => JobKey {
                namespace: pod.namespace.clone(),
                group: true,
                name: v.to_string(),
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
    let group = first_of(&pod.meta, keys::POD_GROUP_KEYS).map(|(k, _, v, others)| {
        if !others.is_empty() {
            let o: Vec<String> = others.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
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

/// The Queues read, as specs for the tree: a queue whose document is
/// invalid is a placeholder (its name and parent), so its children are
/// still checked without cascading errors.
pub(crate) struct QueueSpecs {
    specs: Vec<QueueSpec>,
    locs: BTreeMap<String, Loc>,
    failed: BTreeSet<String>,
}

impl QueueSpecs {
    pub(crate) fn of(queues: &[(Loc, Queue)], errors: &mut Vec<LoadError>) -> QueueSpecs {
        let mut out = QueueSpecs {
            specs: Vec::new(),
            locs: BTreeMap::new(),
            failed: BTreeSet::new(),
        };
        for (loc, q) in queues {
            out.locs.insert(q.metadata.name.clone(), loc.clone());
            match q.to_spec() {
                Ok(s) => out.specs.push(s),
                Err(errs) => {
                    let mut placeholder = QueueSpec::new(q.metadata.name.clone());
                    placeholder.parent = q.spec.parent.clone();
                    out.specs.push(placeholder);
                    out.failed.insert(q.metadata.name.clone());
                    errors.extend(errs.0.into_iter().map(|e| loc.api_error(e)));
                }
            }
        }
        out
    }

    /// The tree, with the implicit default queue when `default_used` and
    /// no Queue defines it; or its problems, each at its Queue.
    pub(crate) fn tree(
        mut self,
        default_used: bool,
        opts: &LoadOptions,
    ) -> Result<QueueTree, Vec<LoadError>> {
        if default_used && !self.locs.contains_key(&opts.default_queue) {
            self.specs.push(QueueSpec::new(opts.default_queue.clone()));
        }
        let errs = match QueueTree::build(self.specs) {
            Ok(t) => return Ok(t),
            Err(errs) => errs,
        };
        let mut out = Vec::new();
        for e in errs {
            if let QueueError::QuotaAboveParent { parent, .. } = &e
                && self.failed.contains(parent)
            {
                // The parent is a placeholder; its own errors are reported.
                continue;
            }
            let (name, field) = match &e {
                QueueError::Duplicate { name } => (name.clone(), String::new()),
                QueueError::UnknownParent { queue, .. } => {
                    (queue.clone(), "spec.parent".to_string())
                }
                QueueError::Cycle { queues } => (
                    queues.first().cloned().unwrap_or_default(),
                    "spec.parent".to_string(),
                ),
                QueueError::QuotaAboveParent {
                    parent, resource, ..
                } => (parent.clone(), format!("spec.quota.{resource}")),
                QueueError::QuotaAboveLimit {
                    queue, resource, ..
                } => (queue.clone(), format!("spec.quota.{resource}")),
                QueueError::EmptyName => (String::new(), "metadata.name".to_string()),
            };
            let object = format!("Queue {name}");
            out.push(match self.locs.get(&name) {
                Some(loc) => loc.error(Some(&object), &field, e.to_string()),
                None => LoadError {
                    source_name: String::new(),
                    document: None,
                    object: Some(object),
                    field: (!field.is_empty()).then_some(field),
                    message: e.to_string(),
                },
            });
        }
        Err(out)
    }
}

/// The queue tree of `queues` (see [`QueueSpecs`]).
pub(crate) fn queue_tree(
    queues: &[(Loc, Queue)],
    default_used: bool,
    opts: &LoadOptions,
) -> Result<QueueTree, Vec<LoadError>> {
    let mut errors = Vec::new();
    let specs = QueueSpecs::of(queues, &mut errors);
    match specs.tree(default_used, opts) {
        Ok(t) if errors.is_empty() => Ok(t),
        Ok(_) => Err(errors),
        Err(e) => {
            errors.extend(e);
            Err(errors)
        }
    }
}

/// Marks `job` rejected when its queue does not exist or is not a leaf.
pub(crate) fn reject_if_bad_queue(tree: &QueueTree, job: &mut Job) {
    match tree.get(&job.queue) {
        None => job.rejected = Some(format!("queue {:?} does not exist", job.queue)),
        Some(id) if !tree.is_leaf(id) => {
            let children: Vec<&str> = tree.children(id).iter().map(|c| tree.name(*c)).collect();
            job.rejected = Some(format!(
                "queue {:?} is not a leaf queue (children: {}); submit jobs to a leaf queue",
                job.queue,
                children.join(", ")
            ));
        }
        Some(_) => {}
    }
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

pub(crate) fn build_job(cx: &mut Ctx, draft: JobDraft, pg: Option<&(Loc, PodGroup)>) -> Job {
    let JobDraft {
        namespace,
        group,
        members,
    } = draft;
    // Invariant: a draft is created together with its first member, so
    // `members[0]` exists.
    let name = group.clone().unwrap_or_else(|| members[0].pod.name.clone());
    let id = format!("{namespace}/{name}");
    let group_object = format!("PodGroup {id}");
    // The location errors about the whole job point at: its PodGroup, else its first pod.
    let (job_loc, job_object) = match pg {
        Some((loc, _)) => (loc.clone(), group_object.clone()),
        None => (
            members[0].loc.clone(),
            format!("Pod {}", members[0].pod.key()),
        ),
    };

    // Queue.
    let mut named: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for m in &members {
        if let Some((_, q)) = &m.queue {
            named.entry(q.as_str()).or_default().push(m.pod.key());
        }
    }
    let explicit = match named.len() {
        0 => None,
        1 => named.keys().next().map(|q| q.to_string()),
        _ => {
            let parts: Vec<String> = named
                .iter()
                .map(|(q, pods)| format!("{q:?} ({})", list_names(pods)))
                .collect();
            cx.errors.push(job_loc.error(
                Some(&job_object),
                "",
                format!(
                    "pods of group {name:?} name different queues: {}; expected one queue per group",
                    parts.join(", ")
                ),
            ));
            named.keys().next().map(|q| q.to_string())
        }
    };
    let pg_queue = pg.and_then(|(_, g)| g.spec.queue.clone());
    if let (Some(e), Some(p), Some((pg_loc, _))) = (&explicit, &pg_queue, pg)
        && e != p
    {
        cx.warnings.push(format!(
            "{}: {group_object}: its pods name queue {e:?} but its spec.queue is {p:?}; using {e:?}",
            pg_loc.at()
        ));
    }
    let queue = explicit
        .or(pg_queue)
        .unwrap_or_else(|| cx.opts.default_queue.clone());

    // Sub-groups.
    let subgroups: Vec<SubGroup> = pg
        .map(|(loc, g)| {
            g.spec
                .sub_groups
                .iter()
                .enumerate()
                .map(|(i, s)| SubGroup {
                    name: s.name.clone(),
                    min_member: s.min_member,
                    topology: group_constraint(cx, loc, g, Some(i), &s.topology),
                })
                .collect()
        })
        .unwrap_or_default();
    let topology = job_constraint(cx, pg, &members);
    for m in &members {
        let Some(sg) = &m.subgroup else { continue };
        if subgroups.iter().any(|s| &s.name == sg) {
            continue;
        }
        let why = match (&group, pg) {
            (None, _) => "the pod belongs to no group".to_string(),
            (Some(_), None) => format!("no PodGroup document {id} exists to define sub-groups"),
            (Some(_), Some(_)) if subgroups.is_empty() => {
                format!("{group_object} defines no sub-groups")
            }
            (Some(_), Some(_)) => format!(
                "{group_object} defines only {}",
                subgroups
                    .iter()
                    .map(|s| format!("{:?}", s.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        cx.errors.push(m.loc.error(
            Some(&format!("Pod {}", m.pod.key())),
            &meta_field(&m.pod.meta, keys::SUB_GROUP, KeyPlace::LabelOrAnnotation),
            format!("unknown sub-group {sg:?}: {why}"),
        ));
    }

    // Gang size.
    let min_member = match (pg, &group) {
        (Some((_, g)), _) => g.spec.min_member,
        (None, Some(_)) => {
            let n = u32::try_from(members.len()).unwrap_or(u32::MAX);
            let pods: Vec<String> = members.iter().map(|m| m.pod.key()).collect();
            cx.warnings.push(format!(
                "{}: Pod {}: {group_object} is named by pods ({}) but no PodGroup document defines it; using minMember {n} (all its pods)",
                members[0].loc.at(),
                members[0].pod.key(),
                list_names(&pods)
            ));
            n
        }
        (None, None) => 1,
    };

    // Priority.
    let mut priority = pg.and_then(|(_, g)| g.spec.priority);
    if priority.is_none()
        && let Some((loc, g)) = pg
        && let Some(class) = &g.spec.priority_class_name
    {
        priority = cx.resolve(class, loc, group_object.clone());
    }
    let priority = match priority {
        Some(p) => p,
        None => {
            let mut best: Option<i32> = None;
            for m in &members {
                let p = match (m.pod.priority, &m.pod.priority_class) {
                    (Some(p), _) => Some(p),
                    (None, Some(class)) => {
                        cx.resolve(class, &m.loc, format!("Pod {}", m.pod.key()))
                    }
                    (None, None) => None,
                }
                .unwrap_or(0);
                best = Some(best.map_or(p, |b| b.max(p)));
            }
            best.unwrap_or(0)
        }
    };

    // `preemptionPolicy: Never` on the PodGroup's class, a pod's class or a
    // pod: the gang never evicts anyone (a gang cannot evict for some pods
    // and not others).
    let never_class = |c: &Option<String>| c.as_ref().is_some_and(|c| cx.never_classes.contains(c));
    let preempts = !(pg.is_some_and(|(_, g)| never_class(&g.spec.priority_class_name))
        || members
            .iter()
            .any(|m| m.pod.never_preempts || never_class(&m.pod.priority_class)));

    let preemptible = job_preemptible(
        cx,
        pg,
        &members,
        priority,
        group.is_some(),
        (&job_loc, &job_object),
    );

    // Submit time.
    // A bad timestamp was reported when the PodGroup was read.
    let pg_created = pg.and_then(|(_, g)| g.metadata.creation_time().ok().flatten());
    let submit_time = pg_created
        .or_else(|| members.iter().filter_map(|m| m.pod.created).min())
        .unwrap_or(Timestamp(0));

    // Tasks.
    let mut tasks: Vec<Task> = members
        .into_iter()
        .map(|m| {
            let bound = m.pod.node_name.is_some();
            let state = match m.pod.node_name.clone() {
                Some(node) => TaskState::Bound {
                    node,
                    gpus: m.pod.gpus.clone(),
                },
                None => TaskState::Pending,
            };
            // Only a pending pod has a nomination (see `PodInfo`); one naming a
            // node that is not in the snapshot is dropped.
            let nomination = m.pod.nomination.clone().and_then(|(node, since, gpus)| {
                if cx.node_names.contains(&node) {
                    return Some(Nomination { node, since, gpus });
                }
                cx.warnings.push(format!(
                    "{}: Pod {}: status.nominatedNodeName {node:?} is not a node in the snapshot; nomination dropped",
                    m.loc.at(),
                    m.pod.key()
                ));
                None
            });
            Task {
                name: m.pod.key(),
                subgroup: m.subgroup,
                requests: m.pod.requests,
                constraints: cx.intern(m.pod.constraints),
                state,
                started: m.pod.started.filter(|_| bound),
                terminating: m.pod.terminating,
                nomination,
                rank: m.rank,
            }
        })
        .collect();
    tasks.sort_by(|a, b| a.name.cmp(&b.name));

    Job {
        id,
        queue,
        priority,
        submit_time,
        min_member,
        subgroups,
        topology,
        preemptible,
        preempts,
        tasks,
        rejected: None,
    }
}

/// Whether the job may be evicted, from the first source that says so:
/// the PodGroup's `spec.preemptible`; then, per key of
/// [`keys::PREEMPTIBLE_KEYS`], the PodGroup's label or annotation and the
/// pods' (every pod that carries the key must agree); else the default by
/// `priority`. A later source that disagrees with the one used gives a
/// warning. Bad values were reported when the objects were read.
fn job_preemptible(
    cx: &mut Ctx,
    pg: Option<&(Loc, PodGroup)>,
    members: &[Member],
    priority: i32,
    has_group: bool,
    (job_loc, job_object): (&Loc, &str),
) -> bool {
    // (how the source is described, its value), in precedence order.
    let mut sources: Vec<(String, bool)> = Vec::new();
    if let Some((loc, g)) = pg {
        if let Some(v) = g.spec.preemptible {
            sources.push((format!("spec.preemptible={v}"), v));
        }
        for conflict in label_annotation_conflicts(&g.metadata, &[keys::PREEMPTIBLE_KEYS]) {
            cx.warnings
                .push(format!("{}: {}: {conflict}", loc.at(), g.object()));
        }
    }
    let group_marks = pg
        .map(|(_, g)| preemptible_marks(&g.metadata))
        .unwrap_or_default();
    for (key, _) in keys::PREEMPTIBLE_KEYS {
        if let Some(mark) = group_marks.iter().find(|m| m.key == *key)
            && let Ok(v) = mark.value
        {
            sources.push((format!("{key}={:?} on the PodGroup", mark.text), v));
        }
        let mut first: Option<(&Member, &PreemptibleMark, bool)> = None;
        for m in members {
            let Some(mark) = m.preemptible.iter().find(|x| x.key == *key) else {
                continue;
            };
            let Ok(v) = mark.value else { continue };
            match first {
                None => first = Some((m, mark, v)),
                Some((f, fmark, fv)) if fv != v => cx.errors.push(m.loc.error(
                    Some(&format!("Pod {}", m.pod.key())),
                    &mark.field,
                    format!(
                        "{:?} differs from {key}={:?} on Pod {}; all pods of a gang must agree",
                        mark.text,
                        fmark.text,
                        f.pod.key()
                    ),
                )),
                Some(_) => {}
            }
        }
        if let Some((_, mark, v)) = first {
            let on = if has_group { " on its pods" } else { "" };
            sources.push((format!("{key}={:?}{on}", mark.text), v));
        }
    }
    let Some((used, value)) = sources.first() else {
        return default_preemptible(priority);
    };
    let others: Vec<&str> = sources[1..]
        .iter()
        .filter(|(_, v)| v != value)
        .map(|(what, _)| what.as_str())
        .collect();
    if !others.is_empty() {
        cx.warnings.push(format!(
            "{}: {job_object}: preemptibility sources disagree ({used}, {}); using {value}",
            job_loc.at(),
            others.join(", ")
        ));
    }
    *value
}

/// A PodGroup's (or one of its sub-groups') topology constraint with its
/// levels resolved against the cluster's topology. Problems are reported at
/// the field that names them.
fn group_constraint(
    cx: &mut Ctx,
    loc: &Loc,
    g: &PodGroup,
    sub_group: Option<usize>,
    c: &TopologyConstraintSpec,
) -> TopologyConstraint {
    let object = g.object();
    let level = |cx: &mut Ctx, value: &Option<String>, field| {
        let value = value.as_deref().filter(|v| !v.is_empty())?;
        match cx.topology.resolve(value) {
            Ok(name) => name,
            Err(message) => {
                cx.errors.push(loc.error(
                    Some(&object),
                    &g.topology_field(sub_group, field),
                    message,
                ));
                None
            }
        }
    };
    let required = level(cx, &c.required, ConstraintField::Required);
    let preferred = level(cx, &c.preferred, ConstraintField::Preferred);
    // maxLeaves 0 was reported when the PodGroup was read.
    let max_leaves = c.max_leaves.filter(|n| *n > 0);
    if max_leaves.is_some()
        && let Err(message) = cx.topology.check_max_leaves()
    {
        cx.errors.push(loc.error(
            Some(&object),
            &g.topology_field(sub_group, ConstraintField::MaxLeaves),
            message,
        ));
    }
    let out = TopologyConstraint {
        required,
        preferred,
        max_leaves,
    };
    warn_preferred_wider(cx, loc, &object, &out);
    out
}

fn warn_preferred_wider(cx: &mut Ctx, loc: &Loc, object: &str, c: &TopologyConstraint) {
    if let (Some(r), Some(p)) = (&c.required, &c.preferred)
        && cx.topology.wider(p, r)
    {
        cx.warnings.push(format!(
            "{}: {object}: preferred level {p:?} is wider than required level {r:?}; the preference has no effect",
            loc.at()
        ));
    }
}

/// The level the pods' annotations (Kueue, KAI) name for one field: the
/// member it is first found on, with its key and value. Every pod that
/// carries one must name the same; a pod that differs is an error.
fn annotated_level<'m>(
    cx: &mut Ctx,
    members: &'m [Member],
    pick: impl Fn(&Member) -> &Option<(&'static str, String)>,
) -> Option<(&'m Member, &'static str, &'m str)> {
    let mut first: Option<(&Member, &'static str, &str)> = None;
    for m in members {
        let Some((key, value)) = pick(m) else {
            continue;
        };
        match first {
            None => first = Some((m, key, value)),
            Some((f, fkey, fvalue)) if fvalue != value => cx.errors.push(m.loc.error(
                Some(&format!("Pod {}", m.pod.key())),
                &meta_field(&m.pod.meta, key, KeyPlace::Annotation),
                format!(
                    "{value:?} differs from {fkey}={fvalue:?} on Pod {}; all pods of a gang must name the same topology level",
                    f.pod.key()
                ),
            )),
            Some(_) => {}
        }
    }
    first
}

/// The whole gang's topology constraint: the PodGroup's `topology` (or
/// KAI `topologyConstraint`), else what its pods' annotations say.
fn job_constraint(
    cx: &mut Ctx,
    pg: Option<&(Loc, PodGroup)>,
    members: &[Member],
) -> TopologyConstraint {
    let mut out = match pg {
        Some((loc, g)) => group_constraint(cx, loc, g, None, &g.spec.topology),
        None => TopologyConstraint::default(),
    };
    // The first pod whose annotation was used, for messages.
    let mut annotated_by: Option<&Member> = None;
    for field in [ConstraintField::Required, ConstraintField::Preferred] {
        let annotated = annotated_level(cx, members, |m| match field {
            ConstraintField::Required => &m.required,
            _ => &m.preferred,
        });
        let Some((m, key, value)) = annotated else {
            continue;
        };
        let from_group = pg.and_then(|(loc, g)| {
            let v = match field {
                ConstraintField::Required => g.spec.topology.required.as_deref(),
                _ => g.spec.topology.preferred.as_deref(),
            };
            v.filter(|v| !v.is_empty()).map(|v| (loc, g, v))
        });
        if let Some((loc, g, group)) = from_group {
            if group != value {
                cx.warnings.push(format!(
                    "{}: {}: its pods' annotation {key}={value:?} differs from {}={group:?}; using {group:?}",
                    loc.at(),
                    g.object(),
                    g.topology_field(None, field)
                ));
            }
            continue;
        }
        let resolved = match cx.topology.resolve(value) {
            Ok(name) => name,
            Err(message) => {
                cx.errors.push(m.loc.error(
                    Some(&format!("Pod {}", m.pod.key())),
                    &meta_field(&m.pod.meta, key, KeyPlace::Annotation),
                    message,
                ));
                None
            }
        };
        match field {
            ConstraintField::Required => out.required = resolved,
            _ => out.preferred = resolved,
        }
        annotated_by = annotated_by.or(Some(m));
    }
    // Both from the PodGroup were checked by `group_constraint`.
    if let Some(m) = annotated_by {
        let (loc, object) = match pg {
            Some((loc, g)) => (loc, g.object()),
            None => (&m.loc, format!("Pod {}", m.pod.key())),
        };
        warn_preferred_wider(cx, loc, &object, &out);
    }
    if let Some((loc, g)) = pg
        && let Some(name) = &g.topology_name
        && !out.is_empty()
        && cx.topology.topology.is_some()
    {
        let what = match &cx.topology.document {
            Some(d) if d == name => None,
            Some(d) => Some(format!("the snapshot's Topology is {d:?}; using it")),
            None => {
                Some("there is no Topology document; using the levels from node labels".to_string())
            }
        };
        if let Some(what) = what {
            cx.warnings.push(format!(
                "{}: {}: spec.topologyConstraint.topology names Topology {name:?}, but {what}",
                loc.at(),
                g.object()
            ));
        }
    }
    out
}
