//! A Kubernetes Pod, converted: effective requests, constraints, what is
//! ignored or unchecked, GPU annotations, times and nominations.

use super::rules;
use super::*;

impl K8sPod {
    /// Converts to the model. Errors are (field, message); warnings are
    /// plain messages about this pod.
    pub(crate) fn convert(self, warnings: &mut Vec<String>) -> Result<PodInfo, Vec<FieldError>> {
        let mut errors: Vec<FieldError> = Vec::new();
        let meta = self.metadata;
        let spec = self.spec;
        if meta.name.is_empty() {
            errors.push((
                "metadata.name".into(),
                "missing; every Pod needs a name".into(),
            ));
        }
        let created = meta.creation_time().unwrap_or_else(|e| {
            errors.push(("metadata.creationTimestamp".into(), e.to_string()));
            None
        });
        // Being deleted: the timestamp is checked, its presence is what counts.
        if let Err(e) = meta.deletion_time() {
            errors.push(("metadata.deletionTimestamp".into(), e.to_string()));
        }
        let terminating = meta.deletion_timestamp.is_some();

        // Effective requests: max(sum of app containers and sidecars,
        // each init container plus the sidecars started before it), each
        // container at the larger of its spec and what the node allocated
        // (in-place resize); pod-level resources override per resource;
        // then overhead.
        let resize = Resize::of(&self.status, &mut errors);
        let mut sum = Resources::zero();
        for (i, c) in spec.containers.iter().enumerate() {
            let r = container_requests(c, &format!("spec.containers[{i}]"), &mut errors);
            sum.add(&resize.apply(&c.name, false, r));
        }
        let mut sidecars = Resources::zero();
        let mut init_max = Resources::zero();
        for (i, c) in spec.init_containers.iter().enumerate() {
            let r = container_requests(c, &format!("spec.initContainers[{i}]"), &mut errors);
            let r = resize.apply(&c.name, true, r);
            if c.restart_policy.as_deref() == Some("Always") {
                sidecars.add(&r);
                max_into(&mut init_max, &sidecars);
            } else {
                let mut with_sidecars = sidecars.clone();
                with_sidecars.add(&r);
                max_into(&mut init_max, &with_sidecars);
            }
        }
        sum.add(&sidecars);
        let mut requests = sum;
        max_into(&mut requests, &init_max);
        if let Some(pod_level) = &spec.resources {
            // A pod-level request (or, without one, its limit) replaces the
            // containers' aggregate for that resource.
            let r = container_requests_of(pod_level, "spec", &mut errors);
            for (name, v) in r.iter() {
                requests.set(&name, v);
            }
        }
        for (name, raw) in &spec.overhead {
            let rn = ResourceName::parse(name);
            match raw.parse().and_then(|q| q.to_resource_units(&rn)) {
                Ok(v) => {
                    let mut o = Resources::zero();
                    o.set(&rn, v);
                    requests.add(&o);
                }
                Err(e) => errors.push((format!("spec.overhead.{name}"), e.to_string())),
            }
        }

        // Placement.
        let mut unsupported = Vec::new();
        let mut ignored = Vec::new();
        let mut required_affinity = Vec::new();
        if let Some(aff) = &spec.affinity
            && let Some(na) = &aff.node_affinity
        {
            if let Some(sel) = &na.required_during_scheduling_ignored_during_execution {
                if sel.node_selector_terms.is_empty() {
                    errors.push((
                            REQUIRED_TERMS.to_string(),
                            "must not be empty: the Kubernetes API rejects a required node affinity without terms; expected at least one term (or leave out requiredDuringSchedulingIgnoredDuringExecution)".to_string(),
                        ));
                }
                for (i, t) in sel.node_selector_terms.iter().enumerate() {
                    let term = format!("{REQUIRED_TERMS}[{i}]");
                    for (j, r) in t.match_expressions.iter().enumerate() {
                        check_requirement(
                            r,
                            &format!("{term}.matchExpressions[{j}]"),
                            false,
                            &mut errors,
                        );
                    }
                    for (j, r) in t.match_fields.iter().enumerate() {
                        check_requirement(
                            r,
                            &format!("{term}.matchFields[{j}]"),
                            true,
                            &mut errors,
                        );
                    }
                }
                required_affinity = sel
                    .node_selector_terms
                    .iter()
                    .map(|t| NodeSelectorTerm {
                        match_expressions: t.match_expressions.iter().map(requirement).collect(),
                        match_fields: t.match_fields.iter().map(requirement).collect(),
                    })
                    .collect();
            }
            if !na
                .preferred_during_scheduling_ignored_during_execution
                .is_empty()
            {
                ignored.push("preferred node affinity".to_string());
            }
        }
        let pod_rules = rules::pod_rules(
            spec.affinity.as_ref(),
            &spec.topology_spread_constraints,
            &[
                ("containers", &spec.containers),
                ("initContainers", &spec.init_containers),
            ],
            &rules::Owner {
                namespace: meta.namespace_or_default(),
                labels: &meta.labels,
            },
            &mut unsupported,
            &mut errors,
        );
        let dra = pod_claims(&spec.resource_claims, &self.status, &mut errors);
        // A gated pod is not ready for scheduling until every gate is removed.
        for (i, g) in spec.scheduling_gates.iter().enumerate() {
            if g.name.is_empty() {
                errors.push((
                    format!("spec.schedulingGates[{i}].name"),
                    "missing; expected the gate's name, such as example.com/quota-check"
                        .to_string(),
                ));
            }
        }
        if !spec.scheduling_gates.is_empty() {
            let names: Vec<&str> = spec
                .scheduling_gates
                .iter()
                .map(|g| g.name.as_str())
                .collect();
            unsupported.push(format!(
                "schedulingGates [{}] (pod is not ready for scheduling)",
                names.join(", ")
            ));
        }
        let mut unchecked = Vec::new();
        if let Some(rc) = spec.runtime_class_name.as_deref().filter(|n| !n.is_empty()) {
            unchecked.push(format!(
                "runtimeClassName {rc} ignored: its RuntimeClass node scheduling is not read"
            ));
        }
        for (i, v) in spec.volumes.iter().enumerate() {
            let Some(pvc) = &v.persistent_volume_claim else {
                continue;
            };
            if pvc.claim_name.is_empty() {
                errors.push((
                    format!("spec.volumes[{i}].persistentVolumeClaim.claimName"),
                    "missing; expected the name of a PersistentVolumeClaim in the pod's namespace"
                        .to_string(),
                ));
                continue;
            }
            unchecked.push(format!(
                "volume {} uses persistentVolumeClaim {}: PVC volume topology/node affinity is not checked",
                v.name, pvc.claim_name
            ));
        }
        // GPU-sharing annotations (docs/gpu-sharing-requests.md), checked
        // against the pod's nvidia.com/gpu requests and limits.
        let mut gpu_resources = Vec::new();
        for (list, containers) in [
            ("containers", &spec.containers),
            ("initContainers", &spec.init_containers),
        ] {
            for (i, c) in containers.iter().enumerate() {
                for (which, map) in [
                    ("requests", &c.resources.requests),
                    ("limits", &c.resources.limits),
                ] {
                    if let Some(v) = map.get(GPU_RESOURCE) {
                        gpu_resources.push((
                            format!("spec.{list}[{i}].resources.{which}.{GPU_RESOURCE}"),
                            v.0.clone(),
                        ));
                    }
                }
            }
        }
        let sharing =
            gpu_sharing_request(&meta.annotations, &gpu_resources).unwrap_or_else(|errs| {
                for e in errs {
                    errors.push((
                        format!("metadata.annotations.{}", e.key),
                        e.problem.to_string(),
                    ));
                }
                GpuSharingRequest::default()
            });
        let mut gpu_memory = None;
        match sharing.share {
            Some(GpuShare::Fraction { milli, .. }) => requests.gpu = milli,
            Some(GpuShare::Memory { bytes, .. }) => gpu_memory = Some(bytes),
            None => {}
        }
        // How a share was asked for, for messages: `gpu-fraction="0.5"`.
        let share_note = sharing.share.map(|s| {
            let value = meta.annotations.get(s.key()).map_or("", String::as_str);
            format!("{}={value:?}", s.key())
        });
        if let Some(n) = &sharing.unsupported_num_devices {
            unsupported.push(format!(
                "{}={n:?} (a GPU share spread over several devices)",
                keys::KAI_GPU_FRACTION_NUM_DEVICES
            ));
        }

        let tolerations = spec
            .tolerations
            .into_iter()
            .map(|t| Toleration {
                key: t.key,
                operator: t.operator.map_or(TolerationOperator::Equal, |o| o.0),
                value: t.value,
                effect: t.effect.and_then(|e| e.0),
            })
            .collect();

        // Device indices: an empty value counts as absent. Only a bound pod
        // holds devices; a list that cannot be right for its request is
        // dropped with a warning (the core then assigns devices itself).
        let phase = self.status.phase.clone().unwrap_or_default();
        let terminal = phase == "Succeeded" || phase == "Failed";
        let node_name = spec.node_name.filter(|n| !n.is_empty());
        let gpus = match meta
            .annotations
            .get(keys::GPU_INDICES)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
        {
            None => None,
            Some(v) => match parse_gpu_indices(v) {
                Err(e) => {
                    errors.push((format!("metadata.annotations.{}", keys::GPU_INDICES), e));
                    None
                }
                Ok(_) if node_name.is_none() || terminal => None,
                Ok(mut idx) => match gpu_indices_problem(&idx, requests.gpu, share_note.as_deref())
                {
                    Some(problem) => {
                        warnings.push(format!(
                            "Pod {}/{}: annotation {}={v:?} {problem}; the pod's devices are taken as unknown and Trainyard assigns them",
                            meta.namespace_or_default(),
                            meta.name,
                            keys::GPU_INDICES
                        ));
                        None
                    }
                    None => {
                        idx.sort_unstable();
                        Some(idx)
                    }
                },
            },
        };
        // Start time and nomination (docs/preemption-api.md), checked on
        // every pod, used for Trainyard's bound and pending pods.
        let status = self.status;
        let mut time = |text: Option<&str>, field: String| {
            text.and_then(|t| match parse_rfc3339(t) {
                Ok(ts) => Some(ts),
                Err(e) => {
                    errors.push((field, e.to_string()));
                    None
                }
            })
        };
        let start_time = time(status.start_time.as_deref(), "status.startTime".into());
        let mut condition_time: Option<Timestamp> = None;
        for (i, c) in status.conditions.iter().enumerate() {
            if !START_CONDITIONS.contains(&c.kind.as_str()) {
                continue;
            }
            let field = format!("status.conditions[{i}].lastTransitionTime");
            if let Some(t) = time(c.last_transition_time.as_deref(), field) {
                condition_time = Some(condition_time.map_or(t, |c| c.min(t)));
            }
        }
        let started = start_time.or(condition_time);
        let nominated_at = time(
            meta.annotations
                .get(keys::NOMINATED_AT)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty()),
            format!("metadata.annotations.{}", keys::NOMINATED_AT),
        );
        // A nominated pod's `trainyard.io/gpu-indices` names the devices
        // held for it (written with the nomination).
        let nominated_gpus = meta
            .annotations
            .get(keys::GPU_INDICES)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .and_then(|v| parse_gpu_indices(v).ok());
        let nomination = status
            .nominated_node_name
            .filter(|n| !n.is_empty() && node_name.is_none() && !terminal)
            .map(|n| {
                (
                    n,
                    nominated_at.or(created).unwrap_or(Timestamp(0)),
                    nominated_gpus,
                )
            });
        let active_deadline_seconds = match spec.active_deadline_seconds {
            None => None,
            Some(s) if s > 0 => Some(s as u64),
            Some(s) => {
                errors.push((
                    "spec.activeDeadlineSeconds".into(),
                    format!("{s}: expected a positive number of seconds"),
                ));
                None
            }
        };
        let grace_seconds = match spec.termination_grace_period_seconds {
            None => None,
            Some(s) if s >= 0 => Some(s as u64),
            Some(s) => {
                errors.push((
                    "spec.terminationGracePeriodSeconds".into(),
                    format!("{s}: expected a number of seconds, zero or more"),
                ));
                None
            }
        };
        let scheduling_group = spec
            .scheduling_group
            .and_then(|g| g.pod_group_name)
            .filter(|n| !n.is_empty());
        if let Some(name) = &scheduling_group
            && let Some(problem) = trainyard_crd::names::dns1123_subdomain_problem(name)
        {
            errors.push((
                "spec.schedulingGroup.podGroupName".into(),
                format!("invalid PodGroup name: {problem}"),
            ));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(PodInfo {
            scheduling_group,
            namespace: meta.namespace_or_default().to_string(),
            name: meta.name.clone(),
            created,
            scheduler: spec
                .scheduler_name
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "default-scheduler".to_string()),
            node_name,
            priority: spec.priority,
            priority_class: spec.priority_class_name.filter(|n| !n.is_empty()),
            never_preempts: spec.preemption_policy.0,
            requests,
            constraints: PlacementConstraints {
                claims: Vec::new(),
                claimed_gpus: 0,
                node_selector: spec.node_selector,
                required_affinity,
                tolerations,
                gpu_models: sharing.models,
                gpu_memory,
                unsupported,
                waiting: Vec::new(),
                pod_rules,
            },
            ignored,
            unchecked,
            terminal,
            gpus,
            gpu_share: sharing.share,
            started,
            active_deadline_seconds,
            grace_seconds,
            terminating,
            nomination,
            meta,
            dra,
        })
    }
}

/// `spec.resourceClaims` and `status.resourceClaimStatuses`: each entry
/// names exactly one of a claim and a template; names are unique.
fn pod_claims(
    claims: &[K8sPodResourceClaim],
    status: &PodStatus,
    errors: &mut Vec<FieldError>,
) -> PodDraRefs {
    let mut out = PodDraRefs::default();
    for (i, c) in claims.iter().enumerate() {
        let path = format!("spec.resourceClaims[{i}]");
        if c.name.is_empty() {
            errors.push((
                format!("{path}.name"),
                "missing; expected the claim's name in the pod".to_string(),
            ));
        } else if out.claims.iter().any(|o| o.name == c.name) {
            errors.push((
                format!("{path}.name"),
                format!("{:?} is used twice; expected unique names", c.name),
            ));
        }
        let nonempty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
        let source = match (
            nonempty(&c.resource_claim_name),
            nonempty(&c.resource_claim_template_name),
        ) {
            (Some(n), None) => ClaimSource::Claim(n),
            (None, Some(t)) => ClaimSource::Template(t),
            (a, _) => {
                let found = if a.is_some() { "both" } else { "neither" };
                errors.push((
                    path,
                    format!(
                        "sets {found} of resourceClaimName and resourceClaimTemplateName; expected exactly one"
                    ),
                ));
                continue;
            }
        };
        out.claims.push(PodResourceClaim {
            name: c.name.clone(),
            source,
        });
    }
    if let Some(e) = &status.extended_resource_claim_status
        && !e.resource_claim_name.is_empty()
    {
        out.extended = Some(e.resource_claim_name.clone());
    }
    for s in &status.resource_claim_statuses {
        out.statuses.insert(
            s.name.clone(),
            s.resource_claim_name.clone().filter(|n| !n.is_empty()),
        );
    }
    out
}

/// Checks one node selector requirement at `path` as the Kubernetes API
/// does: `matchFields` (`field_selector`) only accept the key
/// `metadata.name`; `In`/`NotIn` need values, `Exists`/`DoesNotExist` take
/// none, and `Gt`/`Lt` take exactly one integer.
pub(super) fn check_requirement(
    r: &K8sRequirement,
    path: &str,
    field_selector: bool,
    errors: &mut Vec<FieldError>,
) {
    if field_selector && r.key != "metadata.name" {
        errors.push((
            format!("{path}.key"),
            format!(
                "unsupported field selector key {:?}; expected \"metadata.name\", the only node field matchFields may use",
                r.key
            ),
        ));
    }
    let op = r.operator.0;
    let values = format!("{path}.values");
    match op {
        LabelSelectorOperator::In | LabelSelectorOperator::NotIn => {
            if r.values.is_empty() {
                errors.push((
                    values,
                    format!("must not be empty for operator {op:?}; expected at least one value"),
                ));
            }
        }
        LabelSelectorOperator::Exists | LabelSelectorOperator::DoesNotExist => {
            if !r.values.is_empty() {
                errors.push((
                    values,
                    format!(
                        "must be empty for operator {op:?}, found {:?}; expected no values",
                        r.values
                    ),
                ));
            }
        }
        LabelSelectorOperator::Gt | LabelSelectorOperator::Lt => match r.values.as_slice() {
            [v] => {
                if v.parse::<i64>().is_err() {
                    errors.push((
                        format!("{values}[0]"),
                        format!(
                            "{v:?} is not an integer; expected one whole number for operator {op:?}, such as \"8\""
                        ),
                    ));
                }
            }
            other => errors.push((
                values,
                format!(
                    "expected exactly one integer value for operator {op:?}, found {} value(s) {other:?}",
                    other.len()
                ),
            )),
        },
    }
}

pub(super) fn requirement(r: &K8sRequirement) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: r.key.clone(),
        operator: r.operator.0,
        values: r.values.clone(),
    }
}

/// What the node allocated to each container, when an in-place resize
/// is under way (`status.containerStatuses[].allocatedResources`, else
/// `.resources.requests`). kube-scheduler counts the larger of the spec
/// and the allocation per container, and only the allocation when the
/// resize is `Infeasible`.
struct Resize {
    infeasible: bool,
    /// (init container, name) → allocated requests.
    allocated: BTreeMap<(bool, String), Resources>,
}

impl Resize {
    fn of(status: &PodStatus, errors: &mut Vec<FieldError>) -> Resize {
        let mut allocated = BTreeMap::new();
        for (init, list, statuses) in [
            (false, "containerStatuses", &status.container_statuses),
            (
                true,
                "initContainerStatuses",
                &status.init_container_statuses,
            ),
        ] {
            for (i, cs) in statuses.iter().enumerate() {
                let (map, field) = if !cs.allocated_resources.is_empty() {
                    (&cs.allocated_resources, "allocatedResources")
                } else if let Some(r) = cs.resources.as_ref().filter(|r| !r.requests.is_empty()) {
                    (&r.requests, "resources.requests")
                } else {
                    continue;
                };
                let mut r = Resources::zero();
                for (name, raw) in map {
                    let rn = ResourceName::parse(name);
                    match raw.parse().and_then(|q| q.to_resource_units(&rn)) {
                        Ok(v) => r.set(&rn, v),
                        Err(e) => errors
                            .push((format!("status.{list}[{i}].{field}.{name}"), e.to_string())),
                    }
                }
                allocated.insert((init, cs.name.clone()), r);
            }
        }
        // `status.resize` until Kubernetes 1.32, the `PodResizePending`
        // condition's reason since 1.33.
        let infeasible = status.resize.as_deref() == Some("Infeasible")
            || status
                .conditions
                .iter()
                .any(|c| c.kind == "PodResizePending" && c.reason.as_deref() == Some("Infeasible"));
        Resize {
            infeasible,
            allocated,
        }
    }

    /// The container's requests as kube-scheduler counts them.
    fn apply(&self, name: &str, init: bool, spec: Resources) -> Resources {
        match self.allocated.get(&(init, name.to_string())) {
            None => spec,
            Some(a) if self.infeasible => a.clone(),
            Some(a) => {
                let mut r = spec;
                max_into(&mut r, a);
                r
            }
        }
    }
}
