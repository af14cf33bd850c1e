//! DRA claims assumed allocated (and reserved for their pods) from the
//! cycle that decided it until the world shows it.
//!
//! The service writes a claim's `status.allocation` and `reservedFor`
//! before its pods' binds; the watch shows the write some time later. In
//! between, the next cycle must see the devices taken, the very devices
//! written (not others: a bound pod whose claim looks unallocated would be
//! given the first free ones in the accounting, and the written ones would
//! look free). So each assumed claim is laid over the DRA objects before
//! the DRA part of the snapshot is built ([`ClaimsAssumed::lay_over`]),
//! exactly as if the watch had shown it: the claim is allocated on its
//! node and reserved for the pods, and the pods join it. An assumption is
//! dropped when the world shows the claim allocated (assumed allocation)
//! or reserved for the pods (assumed join), or the claim gone; one whose
//! write never landed is forgotten for its age, as pod assumptions are.
//!
//! The claim of a pod's DRA-backed extended resources (KEP-5004) does not
//! exist before the service creates it, and its name is the API's
//! (`generateName`). Its assumption is kept under the decision's key
//! (`<namespace>/<pod>-extended-resources`) and matched against the world
//! by what the claim shows: a claim of the pod's namespace allocated the
//! very devices and reserved for the pod. Until the world shows such a
//! claim, one is laid over the DRA objects under the decision's key; once
//! it shows one, that claim is used; either way the pod is shown naming it
//! in `status.extendedResourceClaimStatus`, so the core holds its devices
//! as they were written. The assumption is dropped when the world shows
//! the pod naming the claim, or the pod is gone.

use std::collections::BTreeMap;

use trainyard_ingest::Loc;
use trainyard_ingest::PodInfo;
use trainyard_ingest::dra::{ClaimSpecDraft, DraObjects, ResourceClaim};
use trainyard_model::dra::{AllocatedDevice, ClaimAllocation};
use trainyard_model::{JobId, NodeName, TaskKey, Timestamp};

/// A DRA claim allocation (or reservation) owed before its pods' binds:
/// `status.allocation` (when `allocation` is set) and the pods appended
/// to `status.reservedFor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimWrite {
    /// The job whose binds need it.
    pub job: JobId,
    /// `namespace/name`.
    pub claim: String,
    pub node: NodeName,
    /// The pods to reserve it for (never empty).
    pub pods: Vec<TaskKey>,
    /// The devices to allocate; `None` when the claim was allocated before
    /// and the pods only join it.
    pub allocation: Option<Vec<AllocatedDevice>>,
    /// The extended resources the claim serves, when it is the claim of a
    /// pod's DRA-backed extended resources (KEP-5004): it does not exist
    /// yet, it is created (`claim` is then the decision's key,
    /// `<namespace>/<pod>-extended-resources`, not the name it gets).
    pub extended: Vec<String>,
}

impl ClaimWrite {
    /// Whether the claim is to be created for a pod's DRA-backed extended
    /// resources.
    pub fn creates(&self) -> bool {
        !self.extended.is_empty()
    }
}

/// One claim write laid over the world until it shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimAssumption {
    pub write: ClaimWrite,
    /// When it was assumed (or, for a write whose answer was lost, when
    /// that was known).
    pub at: Timestamp,
    /// The API accepted the write: kept until the world shows it or the
    /// claim is gone, whatever its age.
    pub landed: bool,
}

impl ClaimAssumption {
    fn pods(&self) -> impl Iterator<Item = String> + '_ {
        self.write
            .pods
            .iter()
            .map(|t| format!("{}/{}", t.namespace, t.name))
    }
}

/// The claims assumed, by claim key, in the order they were assumed.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClaimsAssumed {
    by_claim: BTreeMap<String, Vec<ClaimAssumption>>,
    /// Something was added or dropped since the last build.
    changed: bool,
}

/// What [`ClaimsAssumed::lay_over`] replaced (`None`: it added the
/// claim), to put back.
pub(crate) type Replaced = Vec<(String, Option<ResourceClaim>)>;

/// Pods as the world has them, by namespace and name.
pub(crate) type Pods = BTreeMap<(String, String), (Loc, PodInfo)>;

/// Pods shown otherwise while assumptions are laid over (their
/// extended-resource claim named), by namespace and name.
pub(crate) type PodsShown = BTreeMap<(String, String), PodInfo>;

/// The key of the claim in `objects` that shows the extended-resource
/// claim `write` assumed: of the pod's namespace, allocated those devices
/// and reserved for the pod.
fn shown_extended(objects: &DraObjects, write: &ClaimWrite) -> Option<String> {
    let pod = write.pods.first()?;
    let pod_key = format!("{}/{}", pod.namespace, pod.name);
    let prefix = format!("{}/", pod.namespace);
    let devices = write.allocation.as_ref()?;
    let same = |a: &ClaimAllocation| {
        a.devices.len() == devices.len()
            && devices.iter().all(|d| {
                a.devices
                    .iter()
                    .any(|w| w.driver == d.driver && w.pool == d.pool && w.device == d.device)
            })
    };
    objects
        .claims
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .find(|(_, (_, c))| {
            c.allocation.as_ref().is_some_and(same) && c.reserved_for.contains(&pod_key)
        })
        .map(|(k, _)| k.clone())
}

/// The pod `write` is for, as the world has it (the same uid, not done).
fn pod_of<'a>(pods: &'a Pods, write: &ClaimWrite) -> Option<&'a PodInfo> {
    let t = write.pods.first()?;
    let (_, p) = pods.get(&(t.namespace.clone(), t.name.clone()))?;
    (!p.terminal && (t.uid.is_empty() || p.meta.uid == t.uid)).then_some(p)
}

impl ClaimsAssumed {
    /// Whether something was added or dropped since the last call: the
    /// DRA part must be built again.
    pub(crate) fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    pub(crate) fn add(&mut self, write: ClaimWrite, at: Timestamp) {
        self.changed = true;
        self.by_claim
            .entry(write.claim.clone())
            .or_default()
            .push(ClaimAssumption {
                write,
                at,
                landed: false,
            });
    }

    /// Applies `f` to the assumption of `write`; whether there was one.
    pub(crate) fn update(&mut self, write: &ClaimWrite, f: impl Fn(&mut ClaimAssumption)) -> bool {
        let mut found = false;
        for a in self
            .by_claim
            .get_mut(&write.claim)
            .into_iter()
            .flatten()
            .filter(|a| a.write == *write)
        {
            f(a);
            found = true;
        }
        found
    }

    /// Drops the assumption of `write`; whether there was one.
    pub(crate) fn forget(&mut self, write: &ClaimWrite) -> bool {
        let Some(list) = self.by_claim.get_mut(&write.claim) else {
            return false;
        };
        let before = list.len();
        list.retain(|a| a.write != *write);
        let found = list.len() != before;
        if list.is_empty() {
            self.by_claim.remove(&write.claim);
        }
        self.changed |= found;
        found
    }

    /// Drops the assumptions made before `older_than` whose writes did not
    /// land; returns them.
    pub(crate) fn forget_older(&mut self, older_than: Timestamp) -> Vec<ClaimAssumption> {
        let mut gone = Vec::new();
        for list in self.by_claim.values_mut() {
            let (old, keep): (Vec<_>, Vec<_>) = std::mem::take(list)
                .into_iter()
                .partition(|a| a.at < older_than && !a.landed);
            *list = keep;
            gone.extend(old);
        }
        self.by_claim.retain(|_, l| !l.is_empty());
        self.changed |= !gone.is_empty();
        gone
    }

    /// Every assumption, by claim.
    pub(crate) fn all(&self) -> impl Iterator<Item = &ClaimAssumption> {
        self.by_claim.values().flatten()
    }

    /// Drops what the world's claims show (or made moot: the claim is
    /// gone, or allocated by another hand), then lays the rest over
    /// `objects`' claims; returns the claims replaced, for [`put_back`],
    /// and the pods to show naming their extended-resource claims.
    pub(crate) fn lay_over(
        &mut self,
        objects: &mut DraObjects,
        pods: &Pods,
    ) -> (Replaced, PodsShown) {
        self.by_claim.retain(|key, list| {
            if list.iter().any(|a| a.write.creates()) {
                // Kept until the pod is gone or shown naming the claim.
                list.retain(|a| {
                    let Some(pod) = pod_of(pods, &a.write) else {
                        return false;
                    };
                    let shown = shown_extended(objects, &a.write).is_some_and(|k| {
                        let name = k.split_once('/').map_or(k.as_str(), |(_, n)| n);
                        pod.dra.extended.as_deref() == Some(name)
                    });
                    !shown
                });
                return !list.is_empty();
            }
            let Some((_, world)) = objects.claims.get(key) else {
                return false;
            };
            list.retain(|a| {
                let shown = match &a.write.allocation {
                    Some(_) => world.allocation.is_some(),
                    None => a.pods().all(|p| world.reserved_for.contains(&p)),
                };
                !shown
            });
            !list.is_empty()
        });
        let mut replaced = Vec::new();
        let mut shown = PodsShown::new();
        for (key, list) in &self.by_claim {
            if let Some(a) = list.iter().find(|a| a.write.creates()) {
                let Some(pod) = pod_of(pods, &a.write) else {
                    continue;
                };
                let at = match shown_extended(objects, &a.write) {
                    Some(k) => k,
                    None => {
                        let claim = ResourceClaim {
                            key: key.clone(),
                            uid: String::new(),
                            // Allocated: the core holds its devices and
                            // never reads its requests.
                            spec: ClaimSpecDraft::default(),
                            allocation: a.write.allocation.as_ref().map(|d| ClaimAllocation {
                                node: Some(a.write.node.to_string()),
                                devices: d.clone(),
                            }),
                            reserved_for: a.pods().collect(),
                        };
                        let loc = Loc {
                            source: "assumed".into(),
                            doc: 0,
                            prefix: String::new(),
                        };
                        let old = objects.claims.insert(key.clone(), (loc, claim));
                        replaced.push((key.clone(), old.map(|(_, c)| c)));
                        key.clone()
                    }
                };
                let mut p = pod.clone();
                p.dra.extended = Some(at.split_once('/').map_or(at.as_str(), |(_, n)| n).into());
                shown.insert((p.namespace.clone(), p.name.clone()), p);
                continue;
            }
            let Some((_, world)) = objects.claims.get_mut(key) else {
                continue;
            };
            let original = world.clone();
            for a in list {
                if let Some(devices) = &a.write.allocation {
                    world.allocation = Some(ClaimAllocation {
                        node: Some(a.write.node.to_string()),
                        devices: devices.clone(),
                    });
                }
                for p in a.pods() {
                    if !world.reserved_for.contains(&p) {
                        world.reserved_for.push(p);
                    }
                }
            }
            replaced.push((key.clone(), Some(original)));
        }
        (replaced, shown)
    }
}

/// Puts back the claims [`ClaimsAssumed::lay_over`] replaced (and takes
/// out those it added).
pub(crate) fn put_back(objects: &mut DraObjects, replaced: Replaced) {
    for (key, original) in replaced.into_iter().rev() {
        match original {
            Some(original) => {
                if let Some((_, c)) = objects.claims.get_mut(&key) {
                    *c = original;
                }
            }
            None => {
                objects.claims.remove(&key);
            }
        }
    }
}

impl crate::ClusterState {
    /// The claim writes the applied binds (`applied`, indices into
    /// `d.binds`) need, assumed and owed.
    pub(crate) fn assume_claims(
        &mut self,
        d: &trainyard_sched::Decisions,
        applied: &[usize],
        now: Timestamp,
    ) {
        if d.claims.is_empty() {
            return;
        }
        let bound: Vec<(&TaskKey, &JobId)> = applied
            .iter()
            .filter_map(|&i| d.binds.get(i))
            .map(|b| (&b.task, &b.job))
            .collect();
        let job_of = |t: &TaskKey| bound.iter().find(|(k, _)| *k == t).map(|(_, j)| *j);
        for c in &d.claims {
            // One write per job whose pods use it, in the job's unit, so
            // no pod is bound before the claim it uses is written; the
            // first job's allocates, the others' only join (a claim
            // shared across jobs: their writes race on the claim's
            // version, and the loser's job is decided again).
            let mut by_job: Vec<(&JobId, Vec<TaskKey>)> = Vec::new();
            for p in &c.pods {
                let Some(job) = job_of(p) else { continue };
                match by_job.iter_mut().find(|(j, _)| *j == job) {
                    Some((_, pods)) => pods.push(p.clone()),
                    None => by_job.push((job, vec![p.clone()])),
                }
            }
            for (i, (job, pods)) in by_job.into_iter().enumerate() {
                let write = ClaimWrite {
                    job: job.clone(),
                    claim: c.claim.clone(),
                    node: c.node.clone(),
                    pods,
                    allocation: if i == 0 { c.allocation.clone() } else { None },
                    extended: c.extended.clone(),
                };
                if let Some(a) = self.claims_assumed() {
                    a.add(write.clone(), now);
                }
                self.writes.push(super::Write::Claim(write));
            }
        }
    }

    /// The claims assumed, when the world is fed objects (the DRA part is
    /// built again at the next snapshot when they change).
    pub(crate) fn claims_assumed(&mut self) -> Option<&mut ClaimsAssumed> {
        self.objects.as_mut().map(|o| o.claims_assumed_mut())
    }

    /// Claim allocations and reservations assumed and not yet shown by
    /// the world.
    pub fn assumed_claims(&self) -> Vec<ClaimAssumption> {
        self.objects
            .as_ref()
            .map(|o| o.claims_assumed().all().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
