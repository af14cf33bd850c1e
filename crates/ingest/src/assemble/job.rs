//! A job from its members and PodGroup: queue, sub-groups, gang size,
//! priority, preemptibility, topology constraints and tasks.

use super::*;

pub(crate) fn build_job(cx: &mut Ctx, draft: JobDraft, pg: Option<&(Loc, PodGroup)>) -> Job {
    let JobDraft {
        namespace,
        group,
        members,
        strangers,
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

    // Kubernetes' own PodGroup: named by the pods' spec, or the group
    // object is one.
    let upstream = pg.and_then(|(_, g)| g.upstream.as_ref());
    if let Some((loc, g)) = pg {
        for e in g.upstream_problems() {
            cx.errors
                .push(loc.error(Some(&e.object), &e.field, e.message));
        }
    }
    let named_upstream = members.iter().any(|m| m.upstream_group);
    let missing_upstream = named_upstream && pg.is_none();

    // Gang size.
    let min_member = match (pg, &group) {
        (Some((_, g)), _) => g.spec.min_member,
        // It waits for its group (below); all its pods meanwhile.
        (None, Some(_)) if missing_upstream => u32::try_from(members.len()).unwrap_or(u32::MAX),
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
    let mismatch = (upstream.is_some() || named_upstream)
        .then(|| group_mismatch(cx, &id, &members, &strangers))
        .flatten();
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
        || upstream.is_some_and(|u| u.never_preempts)
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
    let walltime_seconds = job_walltime(pg, &members);
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
            let pod_key = m.pod.key();
            let pc = cx.pod_claims.get(&pod_key).cloned();
            let mut constraints = m.pod.constraints;
            let mut claims = Vec::new();
            let mut requests = m.pod.requests;
            if let Some(pc) = pc {
                // A claim or template that does not exist yet keeps the
                // pod pending until it does.
                constraints.waiting.extend(pc.blocked);
                constraints.claims = pc.needs;
                claims = pc.claims;
                // GPUs asked through claims are the pod's GPUs (quotas,
                // placement), unless it asks `nvidia.com/gpu` itself too:
                // those are then served by a claim of their own.
                if pc.gpus > 0 && requests.gpu == 0 {
                    requests.gpu = u64::from(pc.gpus).saturating_mul(trainyard_model::resources::MILLI_PER_GPU);
                    constraints.claimed_gpus = pc.gpus;
                }
            }
            Task {
                claims,
                name: pod_key,
                key: TaskKey {
                    namespace: m.pod.namespace.clone(),
                    name: m.pod.name.clone(),
                    uid: m.pod.meta.uid.clone(),
                },
                subgroup: m.subgroup,
                requests,
                constraints: cx.intern(constraints),
                state,
                started: m.pod.started.filter(|_| bound),
                terminating: m.pod.terminating,
                grace_seconds: m.pod.grace_seconds,
                nomination,
                rank: m.rank,
                controller: m
                    .pod
                    .meta
                    .owner_references
                    .iter()
                    .find(|o| o.controller == Some(true))
                    .map(|o| format!("{}/{}", o.kind, o.name)),
                labels: m.pod.meta.labels,
            }
        })
        .collect();
    tasks.sort_by(|a, b| a.name.cmp(&b.name));

    let group_problem = match (missing_upstream, mismatch) {
        (_, Some(message)) => Some(GroupProblem::Mismatch { message }),
        (true, None) => Some(GroupProblem::Missing { group: id.clone() }),
        (false, None) => None,
    };
    Job {
        moved_at: None,
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
        preemption_delay_seconds: pg
            .and_then(|(_, g)| g.spec.preemption_delay.as_ref())
            .and_then(|d| d.seconds().ok()),
        walltime_seconds,
        rejected: None,
        group_problem,
        evict_whole: upstream.is_some_and(|u| u.evict_whole),
    }
}

/// Why the pods of a Kubernetes PodGroup cannot be scheduled together, as
/// kube-scheduler refuses them (`SchedulerError`): pods of other
/// schedulers name the group, or its pods have different priorities.
fn group_mismatch(
    cx: &mut Ctx,
    id: &str,
    members: &[Member],
    strangers: &[(String, String)],
) -> Option<String> {
    if !strangers.is_empty() {
        let mut by: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        by.entry(cx.opts.scheduler_name.as_str())
            .or_default()
            .extend(members.iter().map(|m| m.pod.key()));
        for (pod, scheduler) in strangers {
            by.entry(scheduler.as_str()).or_default().push(pod.clone());
        }
        let parts: Vec<String> = by
            .iter()
            .map(|(s, pods)| format!("{s} ({})", list_names(pods)))
            .collect();
        return Some(format!(
            "pods of PodGroup {id} name different schedulers: {}; a PodGroup's pods must share one schedulerName",
            parts.join(", ")
        ));
    }
    let mut by: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for m in members {
        let p = match (m.pod.priority, &m.pod.priority_class) {
            (Some(p), _) => Some(p),
            (None, Some(class)) => cx.priority_classes.get(class).copied(),
            (None, None) => None,
        }
        .unwrap_or(0);
        by.entry(p).or_default().push(m.pod.key());
    }
    (by.len() > 1).then(|| {
        let parts: Vec<String> = by
            .iter()
            .rev()
            .map(|(p, pods)| format!("{p} ({})", list_names(pods)))
            .collect();
        format!(
            "pods of PodGroup {id} have different priorities: {}; a PodGroup's pods must share one priority",
            parts.join(", ")
        )
    })
}

/// The job's declared walltime: the shortest of its PodGroup's
/// `spec.walltime` and its pods' `activeDeadlineSeconds` (the kubelet ends
/// each pod at its own, whatever the PodGroup says, and the gang lives as
/// long as its shortest). Bad values were reported when the objects were
/// read.
fn job_walltime(pg: Option<&(Loc, PodGroup)>, members: &[Member]) -> Option<u64> {
    let group = pg
        .and_then(|(_, g)| g.spec.walltime.as_ref())
        .and_then(|d| d.positive_seconds().ok());
    members
        .iter()
        .filter_map(|m| m.pod.active_deadline_seconds)
        .chain(group)
        .min()
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
pub(crate) fn group_constraint(
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
