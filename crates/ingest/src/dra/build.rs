//! The snapshot's [`Dra`] from the DRA objects and the pods: devices per
//! node (newest complete generation of each pool, DeviceTaintRules
//! applied), claims (and the claims templates will make for pods),
//! selector sets, and what each pod of ours claims.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use trainyard_model::dra::{
    Claim, ClaimNeed, ClaimSpec, DeviceRequest, Dra, NodeDevices, PodClaim, SelectorSet, SubRequest,
};

use super::{ClaimSource, ClaimSpecDraft, DeviceClass, DraObjects, index_sets, need, pod_claim};
use crate::LoadOptions;
use crate::k8s::PodInfo;
use crate::meta::list_names;
use trainyard_model::ResourceName;

/// What one pod of ours claims, resolved against the claims and templates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodClaims {
    /// One per `spec.resourceClaims` entry that needs a claim, in order.
    pub claims: Vec<PodClaim>,
    /// What each of those means for placement, same order.
    pub needs: Vec<ClaimNeed>,
    /// Why the pod cannot be placed yet: a claim or template it names
    /// does not exist (one message each).
    pub blocked: Vec<String>,
    /// Whole GPUs its claims ask of a class serving `nvidia.com/gpu`
    /// (claims it alone holds): counted as GPUs of the pod
    /// (`PlacementConstraints::claimed_gpus`).
    pub gpus: u32,
}

/// The result of [`build`].
#[derive(Clone, Debug, Default)]
pub struct DraBuilt {
    pub dra: Dra,
    /// By pod key (`namespace/name`): every non-finished pod of ours
    /// with `spec.resourceClaims`.
    pub pods: BTreeMap<String, PodClaims>,
    /// DeviceClasses by name (the core does not need them).
    pub classes: BTreeMap<String, DeviceClass>,
    pub warnings: Vec<String>,
}

/// One pod's claims, resolved to claim keys.
struct Resolved {
    pod: String,
    /// Trainyard's pod (planned claims are made for ours only).
    ours: bool,
    /// (name in the pod, claim key).
    claims: Vec<(String, String)>,
    blocked: Vec<String>,
    /// The key of its extended-resource claim, when it exists.
    extended: Option<String>,
}

/// The one construction of the DRA part of a snapshot, for files and live
/// watches alike: deterministic in its inputs, whatever their order.
///
/// `node_has(node, resource)`: whether the node's allocatable has the
/// resource already (from a device plugin), so DRA devices do not serve
/// it there (KEP-5004).
pub fn build<'a>(
    objects: &DraObjects,
    pods: impl IntoIterator<Item = &'a PodInfo>,
    opts: &LoadOptions,
    node_has: &dyn Fn(&str, &str) -> bool,
) -> DraBuilt {
    build_with(
        objects,
        pods,
        opts,
        node_has,
        &mut trainyard_dra::MatchCache::default(),
    )
}

/// [`build`], with the selector matches of earlier builds kept in `cache`
/// (the live state rebuilds on every change of a DRA object or a pod
/// with claims, and evaluates only new selector sets and changed nodes).
pub fn build_with<'a>(
    objects: &DraObjects,
    pods: impl IntoIterator<Item = &'a PodInfo>,
    opts: &LoadOptions,
    node_has: &dyn Fn(&str, &str) -> bool,
    cache: &mut trainyard_dra::MatchCache,
) -> DraBuilt {
    let mut warnings = Vec::new();
    let nodes = node_devices(objects, &mut warnings);

    let mut pods: Vec<&PodInfo> = pods
        .into_iter()
        .filter(|p| !p.terminal && !p.dra.is_empty())
        .collect();
    pods.sort_by_key(|p| p.key());
    let mut resolved: Vec<Resolved> = Vec::new();
    // Planned claim key → template key.
    let mut planned: BTreeMap<String, String> = BTreeMap::new();
    // Claim key → the pods that name it.
    let mut users: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for pod in pods {
        let pod_key = pod.key();
        let ours = pod.scheduler == opts.scheduler_name;
        let ns = &pod.namespace;
        let mut claims = Vec::new();
        let mut blocked = Vec::new();
        for rc in &pod.dra.claims {
            let key = match &rc.source {
                ClaimSource::Claim(name) => {
                    let key = format!("{ns}/{name}");
                    if !objects.claims.contains_key(&key) {
                        blocked.push(format!("waiting for ResourceClaim {key} to be created"));
                        continue;
                    }
                    key
                }
                ClaimSource::Template(template) => match pod.dra.statuses.get(&rc.name) {
                    // No claim was needed: the entry is ignored.
                    Some(None) => continue,
                    Some(Some(made)) if objects.claims.contains_key(&format!("{ns}/{made}")) => {
                        format!("{ns}/{made}")
                    }
                    _ => {
                        let template_key = format!("{ns}/{template}");
                        if !objects.templates.contains_key(&template_key) {
                            blocked.push(format!(
                                "waiting for ResourceClaimTemplate {template_key} to be created"
                            ));
                            continue;
                        }
                        if !ours {
                            continue;
                        }
                        let key = format!("{ns}/{}-{}", pod.name, rc.name);
                        // A real claim of that name wins over the plan.
                        if !objects.claims.contains_key(&key) {
                            if !opts.planned_claims {
                                blocked.push(format!(
                                    "waiting for ResourceClaim {key} to be created from template {template_key}"
                                ));
                                continue;
                            }
                            planned.insert(key.clone(), template_key);
                        }
                        key
                    }
                },
            };
            users
                .entry(key.clone())
                .or_default()
                .insert(pod_key.clone());
            claims.push((rc.name.clone(), key));
        }
        let extended = pod
            .dra
            .extended
            .as_ref()
            .map(|name| format!("{ns}/{name}"))
            .filter(|key| objects.claims.contains_key(key));
        resolved.push(Resolved {
            pod: pod_key,
            ours,
            claims,
            blocked,
            extended,
        });
    }

    // Selector sets of every claim of the snapshot, sorted by value.
    let classes = &objects.classes;
    let used_templates: BTreeSet<&String> = planned.values().collect();
    let drafts = objects.claims.values().map(|(_, c)| &c.spec).chain(
        used_templates
            .iter()
            .filter_map(|t| objects.templates.get(*t).map(|(_, t)| &t.spec)),
    );
    let mut all_sets = Vec::new();
    // Classes that publish an extended resource (KEP-5004): their own
    // selectors, to count their devices per node.
    for (name, (_, class)) in classes {
        if class.extended_resource_name.is_some() {
            all_sets.push(selector_set(classes, name, &[]));
        }
    }
    for d in drafts {
        for r in &d.requests {
            for s in &r.alternatives {
                all_sets.push(selector_set(classes, &s.class, &s.selectors));
            }
        }
    }
    let selectors = index_sets(all_sets);

    let mut claims: BTreeMap<String, Arc<Claim>> = BTreeMap::new();
    for (key, (_, c)) in &objects.claims {
        let claim = Claim {
            key: key.clone(),
            uid: c.uid.clone(),
            spec: Arc::new(resolve(&c.spec, classes, &selectors)),
            allocation: c.allocation.clone(),
            reserved_for: c.reserved_for.clone(),
            planned_from: None,
        };
        claims.insert(key.clone(), Arc::new(claim));
    }
    let template_specs: BTreeMap<&String, Arc<ClaimSpec>> = used_templates
        .iter()
        .filter_map(|t| {
            let (_, tpl) = objects.templates.get(*t)?;
            Some((*t, Arc::new(resolve(&tpl.spec, classes, &selectors))))
        })
        .collect();
    for (key, template) in &planned {
        let Some(spec) = template_specs.get(template) else {
            continue;
        };
        let claim = Claim {
            key: key.clone(),
            uid: String::new(),
            spec: Arc::clone(spec),
            allocation: None,
            reserved_for: Vec::new(),
            planned_from: Some(template.clone()),
        };
        claims.insert(key.clone(), Arc::new(claim));
    }

    // Classes whose devices are GPUs to the core: those serving
    // `nvidia.com/gpu` (their devices are the nodes' GPU slots).
    let gpu_classes: Vec<&str> = if opts.extended_resources {
        classes
            .iter()
            .filter(|(_, (_, c))| {
                c.extended_resource_name
                    .as_deref()
                    .is_some_and(|r| ResourceName::parse(r) == ResourceName::Gpu)
            })
            .map(|(n, _)| n.as_str())
            .collect()
    } else {
        Vec::new()
    };
    let mut by_pod = BTreeMap::new();
    for Resolved {
        pod: pod_key,
        ours,
        claims: named,
        blocked,
        extended,
    } in resolved
    {
        if !ours {
            continue;
        }
        let mut out = PodClaims {
            blocked,
            ..PodClaims::default()
        };
        for (name, key) in named {
            let Some(claim) = claims.get(&key) else {
                continue;
            };
            let alone = users.get(&key).is_none_or(|u| u.len() == 1);
            let own = claim.allocation.is_none()
                && alone
                && claim.reserved_for.iter().all(|r| *r == pod_key);
            if alone {
                for class in &gpu_classes {
                    out.gpus = out.gpus.saturating_add(claim.spec.whole_devices(class));
                }
            }
            out.needs.push(need(&claim.spec, own, &key));
            out.claims.push(pod_claim(&name, &key));
        }
        // The claim of its DRA-backed extended resources: held as it is
        // (named "" in the pod: it is not in `spec.resourceClaims`).
        if let Some(key) = extended {
            out.needs.push(ClaimNeed::Extended(key.clone()));
            out.claims.push(pod_claim("", &key));
        }
        by_pod.insert(pod_key, out);
    }

    let matches = cache.matches(&nodes, &selectors, |c| classes.contains_key(c));
    let backed = if opts.extended_resources {
        backed_resources(classes, &selectors, &matches, node_has)
    } else {
        BTreeMap::new()
    };
    DraBuilt {
        dra: Dra {
            nodes,
            claims,
            selectors,
            matches,
            backed,
        },
        pods: by_pod,
        classes: classes
            .iter()
            .map(|(k, (_, c))| (k.clone(), c.clone()))
            .collect(),
        warnings,
    }
}

/// The selector set of a request of class `class` with its own
/// `expressions`: the class's first (none when the class is unknown; the
/// core reports it).
fn selector_set(
    classes: &BTreeMap<String, (crate::Loc, DeviceClass)>,
    class: &str,
    expressions: &[String],
) -> SelectorSet {
    let mut all: Vec<String> = classes
        .get(class)
        .map(|(_, c)| c.selectors.clone())
        .unwrap_or_default();
    all.extend(expressions.iter().cloned());
    SelectorSet {
        class: class.to_string(),
        expressions: all,
    }
}

/// Per node, the extended resources its DRA devices serve (KEP-5004):
/// for each class with `extendedResourceName`, its devices on nodes whose
/// allocatable (`node_resources`) does not have the resource already
/// (a device plugin serves it there).
fn backed_resources(
    classes: &BTreeMap<String, (crate::Loc, DeviceClass)>,
    sets: &[SelectorSet],
    matches: &[Arc<trainyard_model::dra::SelectorMatches>],
    node_resources: &dyn Fn(&str, &str) -> bool,
) -> BTreeMap<String, Vec<trainyard_model::dra::Backed>> {
    let mut out: BTreeMap<String, Vec<trainyard_model::dra::Backed>> = BTreeMap::new();
    for (name, (_, class)) in classes {
        let Some(resource) = &class.extended_resource_name else {
            continue;
        };
        let set = selector_set(classes, name, &[]);
        let Ok(at) = sets.binary_search(&set) else {
            continue;
        };
        let Some(m) = matches.get(at) else { continue };
        for (node, mask) in &m.by_node {
            if node_resources(node, resource) {
                continue;
            }
            out.entry(node.clone())
                .or_default()
                .push(trainyard_model::dra::Backed {
                    resource: resource.clone(),
                    class: name.clone(),
                    selector: at as u32,
                    devices: u64::from(mask.count()),
                });
        }
    }
    out
}

/// A claim spec with its selector sets resolved to indices of `sets`
/// (which hold every set of every draft resolved).
fn resolve(
    draft: &ClaimSpecDraft,
    classes: &BTreeMap<String, (crate::Loc, DeviceClass)>,
    sets: &[SelectorSet],
) -> ClaimSpec {
    let requests = draft
        .requests
        .iter()
        .map(|r| DeviceRequest {
            name: r.name.clone(),
            alternatives: r
                .alternatives
                .iter()
                .map(|s| {
                    let set = selector_set(classes, &s.class, &s.selectors);
                    // Invariant: `sets` was built from these same drafts;
                    // fewer than 2^32 sets (each is a request's).
                    let selector = sets.binary_search(&set).unwrap_or(0) as u32;
                    SubRequest {
                        name: s.name.clone(),
                        class: s.class.clone(),
                        selector,
                        mode: s.mode,
                        admin_access: s.admin_access,
                        tolerations: s.tolerations.clone(),
                        capacity: s.capacity.clone(),
                    }
                })
                .collect(),
        })
        .collect();
    ClaimSpec {
        requests,
        constraints: draft.constraints.clone(),
    }
}

/// Devices per node: of each pool, the slices of its newest generation,
/// when all of them are published and no device name repeats (as the
/// upstream allocator gathers pools; an incomplete or invalid pool is left
/// out with a warning); then the DeviceTaintRules' taints.
fn node_devices(
    objects: &DraObjects,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, Arc<NodeDevices>> {
    let mut pools: BTreeMap<(&str, &str), Vec<(&crate::Loc, &super::Slice)>> = BTreeMap::new();
    for (loc, s) in objects.slices.values() {
        pools
            .entry((&s.driver, &s.pool))
            .or_default()
            .push((loc, s));
    }
    let mut nodes: BTreeMap<String, NodeDevices> = BTreeMap::new();
    for ((driver, pool), slices) in pools {
        let Some(generation) = slices.iter().map(|(_, s)| s.generation).max() else {
            continue;
        };
        let (locs, current): (Vec<&crate::Loc>, Vec<&super::Slice>) = slices
            .into_iter()
            .filter(|(_, s)| s.generation == generation)
            .unzip();
        // Messages point at the pool's first slice (by name).
        let at = locs
            .first()
            .map(|l| format!("{}: ", l.at()))
            .unwrap_or_default();
        let names: Vec<String> = current.iter().map(|s| s.name.clone()).collect();
        let want = current.first().map_or(0, |s| s.slice_count);
        if current.len() as i64 != want {
            warnings.push(format!(
                "{at}ResourceSlice pool {driver}/{pool} (generation {generation}) has {} of its {want} slice(s) ({}): the pool is being updated; its devices are not used until every slice is published",
                current.len(),
                list_names(&names)
            ));
            continue;
        }
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        let mut invalid = None;
        for s in &current {
            for d in &s.devices {
                if let Some(first) = seen.insert(&d.name, &s.name) {
                    invalid.get_or_insert(format!(
                        "device {} is published twice (ResourceSlices {first} and {})",
                        d.name, s.name
                    ));
                }
            }
        }
        if let Some(why) = invalid {
            warnings.push(format!(
                "{at}ResourceSlice pool {driver}/{pool} (generation {generation}) is invalid: {why}; its devices are not used"
            ));
            continue;
        }
        let sets: Vec<_> = current
            .iter()
            .flat_map(|s| s.counter_sets.iter().cloned())
            .collect();
        let mut pool_nodes = BTreeSet::new();
        for s in &current {
            if let Some(n) = &s.node {
                pool_nodes.insert(n.clone());
                let nd = nodes.entry(n.clone()).or_default();
                nd.devices.extend(s.devices.iter().cloned());
            }
        }
        for n in pool_nodes {
            let nd = nodes.entry(n).or_default();
            nd.counter_sets.extend(sets.iter().cloned());
        }
    }
    for (_, rule) in objects.taint_rules.values() {
        let Some(sel) = &rule.selector else { continue };
        for nd in nodes.values_mut() {
            for d in nd.devices.iter_mut().filter(|d| sel.matches(d)) {
                d.taints.push(rule.taint.clone());
            }
        }
    }
    // One `Arc` per distinct driver, pool and device name: the core's
    // allocation results share them rather than touch one per device.
    let mut names: BTreeSet<Arc<str>> = BTreeSet::new();
    let mut intern = |v: &mut Arc<str>| match names.get(&**v) {
        Some(x) => *v = Arc::clone(x),
        None => {
            names.insert(Arc::clone(v));
        }
    };
    nodes
        .into_iter()
        .map(|(n, mut nd)| {
            for d in &mut nd.devices {
                intern(&mut d.driver);
                intern(&mut d.pool);
                intern(&mut d.name);
            }
            nd.devices
                .sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
            nd.counter_sets
                .sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
            (n, Arc::new(nd))
        })
        .collect()
}
