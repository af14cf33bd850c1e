//! A pod's rules about other pods, converted: inter-pod affinity and
//! anti-affinity, topology spread constraints and host ports
//! (`trainyard_model::PodRules`), validated as the Kubernetes API does,
//! each error naming its field.

use trainyard_model::{
    HostPort, LabelSelector, NamespaceFilter, PodAffinityTerm, SpreadConstraint as ModelSpread,
    WeightedPodAffinityTerm, WhenUnsatisfiable as ModelWhen, podrules::NAMESPACE_NAME_LABEL,
};

use super::pod::{check_requirement, requirement};
use super::*;

/// What the rules need to know about the pod they belong to.
pub(super) struct Owner<'a> {
    pub namespace: &'a str,
    pub labels: &'a BTreeMap<String, String>,
}

/// The pod's inter-pod rules. Namespace selectors other than `{}` and
/// those on [`NAMESPACE_NAME_LABEL`] need Namespace objects, which the
/// loader does not read: they go to `unsupported`.
pub(super) fn pod_rules(
    spec_affinity: Option<&Affinity>,
    spread: &[SpreadConstraint],
    containers: &[(&str, &[Container])],
    owner: &Owner,
    unsupported: &mut Vec<String>,
    errors: &mut Vec<FieldError>,
) -> PodRules {
    let mut rules = PodRules::default();
    if let Some(aff) = spec_affinity {
        for (what, pa, required, preferred) in [
            (
                "podAffinity",
                &aff.pod_affinity,
                &mut rules.affinity,
                &mut rules.preferred_affinity,
            ),
            (
                "podAntiAffinity",
                &aff.pod_anti_affinity,
                &mut rules.anti_affinity,
                &mut rules.preferred_anti_affinity,
            ),
        ] {
            let Some(pa) = pa else { continue };
            let base = format!("spec.affinity.{what}");
            for (i, t) in pa
                .required_during_scheduling_ignored_during_execution
                .iter()
                .enumerate()
            {
                let path = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
                required.push(term(t, &path, owner, unsupported, errors));
            }
            for (i, w) in pa
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .enumerate()
            {
                let path = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
                let weight = match w.weight {
                    Some(v) if (1..=100).contains(&v) => v as u32,
                    other => {
                        let found = other.map_or("nothing".to_string(), |v| v.to_string());
                        errors.push((
                            format!("{path}.weight"),
                            format!("must be between 1 and 100, found {found}"),
                        ));
                        1
                    }
                };
                let Some(t) = &w.pod_affinity_term else {
                    errors.push((
                        format!("{path}.podAffinityTerm"),
                        "missing; a preferred term needs its podAffinityTerm".to_string(),
                    ));
                    continue;
                };
                let term = term(
                    t,
                    &format!("{path}.podAffinityTerm"),
                    owner,
                    unsupported,
                    errors,
                );
                preferred.push(WeightedPodAffinityTerm { weight, term });
            }
        }
    }
    for (i, c) in spread.iter().enumerate() {
        let path = format!("spec.topologySpreadConstraints[{i}]");
        rules
            .spread
            .push(spread_constraint(c, &path, owner, errors));
    }
    for (list, cs) in containers {
        for (i, c) in cs.iter().enumerate() {
            for (j, p) in c.ports.iter().enumerate() {
                let path = format!("spec.{list}[{i}].ports[{j}]");
                let port = match p.host_port {
                    None | Some(0) => continue,
                    Some(h) => match u16::try_from(h) {
                        Ok(h) => h,
                        Err(_) => {
                            errors.push((
                                format!("{path}.hostPort"),
                                format!("{h} is not a port; expected 1–65535"),
                            ));
                            continue;
                        }
                    },
                };
                let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".to_string());
                if !matches!(protocol.as_str(), "TCP" | "UDP" | "SCTP") {
                    errors.push((
                        format!("{path}.protocol"),
                        format!("unknown protocol {protocol:?}; expected TCP, UDP or SCTP"),
                    ));
                    continue;
                }
                let ip = p
                    .host_ip
                    .clone()
                    .filter(|ip| !ip.is_empty())
                    .unwrap_or_else(|| "0.0.0.0".to_string());
                rules.host_ports.push(HostPort { port, protocol, ip });
            }
        }
    }
    rules.host_ports.sort();
    rules.host_ports.dedup();
    rules
}

/// A label selector; Kubernetes allows only `In`, `NotIn`, `Exists` and
/// `DoesNotExist` in pod label selectors.
fn selector(s: &K8sLabelSelector, path: &str, errors: &mut Vec<FieldError>) -> LabelSelector {
    let mut out = LabelSelector {
        match_labels: s.match_labels.clone(),
        match_expressions: Vec::new(),
    };
    for (j, r) in s.match_expressions.iter().enumerate() {
        let at = format!("{path}.matchExpressions[{j}]");
        let op = r.operator.0;
        if matches!(op, LabelSelectorOperator::Gt | LabelSelectorOperator::Lt) {
            errors.push((
                format!("{at}.operator"),
                format!(
                    "operator {op:?} is not valid in a label selector; expected In, NotIn, Exists or DoesNotExist"
                ),
            ));
            continue;
        }
        check_requirement(r, &at, false, errors);
        out.match_expressions.push(requirement(r));
    }
    out
}

/// `matchLabelKeys` (`In` the pod's own value) and `mismatchLabelKeys`
/// (`NotIn`), merged into the selector as kube-apiserver does; keys the
/// pod has no label for are skipped.
fn merge_label_keys(
    sel: &mut LabelSelector,
    owner: &Owner,
    keys: &[String],
    op: LabelSelectorOperator,
) {
    for k in keys {
        if let Some(v) = owner.labels.get(k) {
            sel.match_expressions.push(NodeSelectorRequirement {
                key: k.clone(),
                operator: op,
                values: vec![v.clone()],
            });
        }
    }
}

fn term(
    t: &K8sPodAffinityTerm,
    path: &str,
    owner: &Owner,
    unsupported: &mut Vec<String>,
    errors: &mut Vec<FieldError>,
) -> PodAffinityTerm {
    if t.topology_key.is_empty() {
        errors.push((
            format!("{path}.topologyKey"),
            "missing; expected a node label key such as kubernetes.io/hostname or topology.kubernetes.io/zone".to_string(),
        ));
    }
    let mut sel = t
        .label_selector
        .as_ref()
        .map(|s| selector(s, &format!("{path}.labelSelector"), errors));
    if let Some(sel) = &mut sel {
        merge_label_keys(sel, owner, &t.match_label_keys, LabelSelectorOperator::In);
        merge_label_keys(
            sel,
            owner,
            &t.mismatch_label_keys,
            LabelSelectorOperator::NotIn,
        );
    }
    let mut names = t.namespaces.clone();
    let mut ns = NamespaceFilter::default();
    match &t.namespace_selector {
        None => {
            if names.is_empty() {
                names.push(owner.namespace.to_string());
            }
        }
        Some(s) => {
            let s = selector(s, &format!("{path}.namespaceSelector"), errors);
            if s.match_labels.is_empty() && s.match_expressions.is_empty() {
                ns.all = true;
            } else if s.match_labels.keys().all(|k| k == NAMESPACE_NAME_LABEL)
                && s.match_expressions
                    .iter()
                    .all(|r| r.key == NAMESPACE_NAME_LABEL)
            {
                ns.selector = Some(s);
            } else {
                unsupported.push(format!(
                    "{path}.namespaceSelector on namespace labels other than {NAMESPACE_NAME_LABEL} (Namespace objects are not read)"
                ));
            }
        }
    }
    names.sort();
    names.dedup();
    ns.names = names;
    PodAffinityTerm {
        selector: sel,
        namespaces: ns,
        topology_key: t.topology_key.clone(),
    }
}

fn spread_constraint(
    c: &SpreadConstraint,
    path: &str,
    owner: &Owner,
    errors: &mut Vec<FieldError>,
) -> ModelSpread {
    let max_skew = match c.max_skew {
        Some(v) if v >= 1 => u32::try_from(v).unwrap_or(u32::MAX),
        Some(v) => {
            errors.push((
                format!("{path}.maxSkew"),
                format!("must be at least 1, found {v}"),
            ));
            1
        }
        None => {
            errors.push((
                format!("{path}.maxSkew"),
                "missing; expected the largest allowed difference in matching pods between domains, at least 1".to_string(),
            ));
            1
        }
    };
    if c.topology_key.is_empty() {
        errors.push((
            format!("{path}.topologyKey"),
            "missing; expected a node label key such as topology.kubernetes.io/zone".to_string(),
        ));
    }
    let when = match c.when_unsatisfiable() {
        WhenUnsatisfiable::DoNotSchedule => ModelWhen::DoNotSchedule,
        WhenUnsatisfiable::ScheduleAnyway => ModelWhen::ScheduleAnyway,
    };
    let min_domains = match c.min_domains {
        None => None,
        Some(v) if v < 1 => {
            errors.push((
                format!("{path}.minDomains"),
                format!("must be at least 1, found {v}"),
            ));
            None
        }
        Some(_) if when == ModelWhen::ScheduleAnyway => {
            errors.push((
                format!("{path}.minDomains"),
                "may only be set with whenUnsatisfiable: DoNotSchedule".to_string(),
            ));
            None
        }
        Some(v) => Some(u32::try_from(v).unwrap_or(u32::MAX)),
    };
    let mut sel = c
        .label_selector
        .as_ref()
        .map(|s| selector(s, &format!("{path}.labelSelector"), errors));
    if let Some(sel) = &mut sel {
        merge_label_keys(sel, owner, &c.match_label_keys, LabelSelectorOperator::In);
    }
    ModelSpread {
        max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable: when,
        selector: sel,
        min_domains,
        node_affinity_policy: c
            .node_affinity_policy
            .as_ref()
            .map_or(InclusionPolicy::Honor, |p| p.0),
        node_taints_policy: c
            .node_taints_policy
            .as_ref()
            .map_or(InclusionPolicy::Ignore, |p| p.0),
    }
}
