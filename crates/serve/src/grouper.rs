//! PodGroups inferred from owners, the I/O part (the rules are
//! [`crate::infer`]'s).
//!
//! Each cycle, for the pods the world holds back ([`World::held`]): fetch
//! each pod's owner chain (controller references, through the dynamic
//! API, each owner once per cycle) and read its Namespace from the watch
//! ([`World::namespaces`]), compute the group,
//! create the `trainyard.io/v1alpha1` PodGroup with a controller owner
//! reference to the workload (409 AlreadyExists: it is there), and, once
//! the watch has shown the PodGroup, merge-patch the pod's
//! `trainyard.io/pod-group` annotation so the next pod event brings it in
//! as a member. Patching only after the PodGroup is in the world means no
//! cycle sees the group's pods without its `minMember`.
//!
//! A pod whose group cannot be computed (an owner that cannot be read, a
//! bad spec, no queue anywhere) is told why: a `FailedScheduling` Event
//! and `PodScheduled=False`, once per message (logged then too); it is
//! tried again every cycle. Failed writes are logged and retried.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use trainyard_crd::keys;
use trainyard_model::{TaskKey, Timestamp};

use crate::conn::Conn;
use crate::infer::{self, InferredGroup, OwnerRef};
use crate::settings::ServiceSettings;
use crate::world::{Key, World};

/// Owner chains deeper than this are cut (a cycle of references, or a
/// tower of operators).
const MAX_DEPTH: usize = 8;

/// The grouper's memory between cycles.
pub struct Grouper {
    on: bool,
    default_queue: String,
    concurrency: usize,
    /// The stream and resource of Trainyard's PodGroup (none: not served).
    pod_groups: Option<(usize, ApiResource)>,
    /// The group of each held pod (by key and UID), once computed.
    groups: BTreeMap<(Key, String), InferredGroup>,
    /// PodGroups created (or found there), by namespace and name.
    created: BTreeSet<(String, String)>,
    /// Pods whose annotation was written (the watch has yet to show it).
    patched: BTreeSet<(Key, String)>,
    /// The message last told to each held pod.
    told: BTreeMap<(Key, String), String>,
    warned: bool,
}

/// What one cycle of the grouper did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grouped {
    /// PodGroups created.
    pub created: u64,
    /// Pods given their group's annotation.
    pub patched: u64,
    /// Pods told why they have no group.
    pub told: u64,
    /// Writes that failed (logged).
    pub failed: u64,
}

fn uid_of(pod: &Value) -> String {
    pod["metadata"]["uid"].as_str().unwrap_or("").to_string()
}

/// The plural of a kind the grouper may meet on an owner chain.
fn plural(kind: &str) -> String {
    match kind {
        "TFJob" => "tfjobs".into(),
        "MPIJob" => "mpijobs".into(),
        _ => format!("{}s", kind.to_lowercase()),
    }
}

fn resource(owner: &OwnerRef) -> ApiResource {
    let (group, version) = owner
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", owner.api_version.as_str()));
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, &owner.kind),
        &plural(&owner.kind),
    )
}

/// An owner as a pod's (or an owner's) reference names it: its namespace
/// and reference.
type OwnerKey = (String, OwnerRef);

/// What a fetch of each owner gave.
type Fetched = BTreeMap<OwnerKey, Result<Value, String>>;

/// Fetches one owner as JSON (with its `apiVersion` and `kind`); an object
/// of that name with another UID is an error (the owner was replaced).
async fn fetch_owner(conn: &Conn, (namespace, owner): &OwnerKey) -> Result<Value, String> {
    let what = format!("owner {} {namespace}/{}", owner.kind, owner.name);
    let client = conn.client().await.map_err(|e| format!("{what}: {e}"))?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource(owner));
    let o = api
        .get(&owner.name)
        .await
        .map_err(|e| format!("{what}: {}", crate::conn::plain(&e)))?;
    let mut v = serde_json::to_value(o).map_err(|e| format!("{what}: {e}"))?;
    v["apiVersion"] = owner.api_version.clone().into();
    v["kind"] = owner.kind.clone().into();
    let uid = v["metadata"]["uid"].as_str().unwrap_or("");
    if !owner.uid.is_empty() && uid != owner.uid {
        return Err(format!(
            "{what} has UID {uid}, not {} (replaced)",
            owner.uid
        ));
    }
    Ok(v)
}

/// Fetches `starts` and the controllers above them, a level at a time
/// (each level `concurrency` at once), each owner once.
async fn fetch_owners(conn: &Conn, concurrency: usize, starts: BTreeSet<OwnerKey>) -> Fetched {
    let mut fetched = Fetched::new();
    let mut frontier = starts;
    for _ in 0..MAX_DEPTH {
        if frontier.is_empty() {
            break;
        }
        let got: Vec<(OwnerKey, Result<Value, String>)> = futures::stream::iter(frontier)
            .map(|k| async move {
                let r = fetch_owner(conn, &k).await;
                (k, r)
            })
            .buffer_unordered(concurrency)
            .collect()
            .await;
        let mut next = BTreeSet::new();
        for (k, r) in got {
            if let Some(up) = r.as_ref().ok().and_then(infer::controller_of) {
                next.insert((k.0.clone(), up));
            }
            fetched.insert(k, r);
        }
        next.retain(|k| !fetched.contains_key(k));
        frontier = next;
    }
    fetched
}

/// The owners from `start` up, nearest first, from what was fetched. A
/// failed fetch above the first workload Trainyard groups ends the chain
/// there (an operator's kind the service may not read); below it, the
/// chain is an error. Pure.
fn chain_of(start: &OwnerKey, fetched: &Fetched) -> Result<Vec<Value>, String> {
    let mut chain: Vec<Value> = Vec::new();
    let mut at = Some(start.clone());
    while let Some(key) = at.take() {
        if chain.len() >= MAX_DEPTH {
            break;
        }
        let known = chain.iter().any(|o| infer::is_workload(&OwnerRef::to(o)));
        match fetched.get(&key) {
            Some(Ok(v)) => {
                at = infer::controller_of(v).map(|up| (key.0.clone(), up));
                chain.push(v.clone());
            }
            Some(Err(e)) if known => {
                tracing::debug!("{e}; the owner chain ends below it");
                break;
            }
            Some(Err(e)) => return Err(e.clone()),
            None => break,
        }
    }
    Ok(chain)
}

/// The message for a pod whose group has no queue.
fn no_queue(g: &InferredGroup) -> String {
    format!(
        "no queue for PodGroup {} inferred from {} {}: label the pod or the {} with {}=<queue>, or the Namespace {} with {}=<queue>",
        g.name,
        g.owner.kind,
        g.owner.name,
        g.owner.kind,
        keys::QUEUE,
        g.namespace,
        keys::NAMESPACE_DEFAULT_QUEUE
    )
}

fn pod_group_stream(kinds: &[ApiResource]) -> Option<usize> {
    kinds
        .iter()
        .position(|k| k.group == "trainyard.io" && k.kind == "PodGroup")
}

/// Whether pods are held for inferred groups: `service.inferPodGroups`,
/// and the server serves Trainyard's PodGroup (without it, no group could
/// be created, and such pods are one-pod jobs as before; logged).
pub fn enabled(service: &ServiceSettings, kinds: &[ApiResource]) -> bool {
    let served = pod_group_stream(kinds).is_some();
    if service.infer_pod_groups && !served {
        tracing::warn!(
            "service.inferPodGroups is on, but the server does not serve trainyard.io/v1alpha1 PodGroups: pods of Jobs, PyTorchJobs, ... without a PodGroup are one-pod jobs"
        );
    }
    service.infer_pod_groups && served
}

impl Grouper {
    /// A grouper for `service` given the served kinds.
    pub fn new(service: &ServiceSettings, kinds: &[ApiResource]) -> Grouper {
        let pod_groups = pod_group_stream(kinds).map(|i| (i, kinds[i].clone()));
        Grouper {
            on: service.infer_pod_groups,
            default_queue: service.default_queue.clone(),
            concurrency: service.bind_concurrency.max(1),
            pod_groups,
            groups: BTreeMap::new(),
            created: BTreeSet::new(),
            patched: BTreeSet::new(),
            told: BTreeMap::new(),
            warned: false,
        }
    }

    /// One cycle: groups for the pods `world` holds.
    pub async fn cycle(
        &mut self,
        conn: &Conn,
        events: &crate::events::EventSink,
        world: &World,
        now: Timestamp,
    ) -> Grouped {
        let mut out = Grouped::default();
        let held: BTreeMap<(Key, String), &Value> = world
            .held
            .iter()
            .map(|(k, (_, pod))| ((k.clone(), uid_of(pod)), pod))
            .collect();
        self.groups.retain(|k, _| held.contains_key(k));
        self.patched.retain(|k| held.contains_key(k));
        self.told.retain(|k, _| held.contains_key(k));
        if !self.on || held.is_empty() {
            return out;
        }
        let Some((stream, ar)) = self.pod_groups.clone() else {
            if !self.warned {
                tracing::warn!(
                    "pods wait for PodGroups inferred from their owners, but the server does not serve trainyard.io/v1alpha1 PodGroups; install the CRD or set service.inferPodGroups: false"
                );
                self.warned = true;
            }
            return out;
        };

        // Owner chains (each owner fetched once), for the
        // pods without a group yet.
        let todo: Vec<(&(Key, String), &Value)> = held
            .iter()
            .filter(|(k, _)| !self.groups.contains_key(*k))
            .map(|(k, p)| (k, *p))
            .collect();
        let mut owners: BTreeSet<OwnerKey> = BTreeSet::new();
        for ((key, _), pod) in &todo {
            if let Some(o) = infer::workload_owner(pod) {
                owners.insert((key.1.clone(), o));
            }
        }
        let fetched = fetch_owners(conn, self.concurrency, owners.clone()).await;
        let chains: BTreeMap<OwnerKey, Result<Vec<Value>, String>> = owners
            .into_iter()
            .map(|k| {
                let chain = chain_of(&k, &fetched);
                (k, chain)
            })
            .collect();
        let mut tell: Vec<((Key, String), String)> = Vec::new();
        for (k, pod) in todo {
            let Some(owner) = infer::workload_owner(pod) else {
                continue;
            };
            let ns = k.0.1.clone();
            match chains.get(&(ns.clone(), owner)) {
                Some(Ok(chain)) => {
                    // Without its Namespace (not watched yet) the queue
                    // could be wrong: next cycle.
                    let Some(space) = world.namespaces.get(&ns) else {
                        continue;
                    };
                    match infer::group_for(pod, chain, Some(space)) {
                        Ok(g) => {
                            self.groups.insert(k.clone(), g);
                        }
                        Err(message) => {
                            tell.push((k.clone(), format!("no PodGroup inferred: {message}")))
                        }
                    }
                }
                // Told (and logged) once; fetched again next cycle.
                Some(Err(e)) => tell.push((k.clone(), format!("no PodGroup inferred: {e}"))),
                None => {}
            }
        }

        // A PodGroup created once and deleted since (by hand) is created
        // again: remember only the groups of pods still held.
        let wanted: BTreeSet<(String, String)> = self
            .groups
            .values()
            .map(|g| (g.namespace.clone(), g.name.clone()))
            .collect();
        self.created.retain(|k| wanted.contains(k));

        // PodGroups to create, pods to annotate.
        let mut create: BTreeMap<(String, String), Value> = BTreeMap::new();
        let mut annotate: Vec<((Key, String), String)> = Vec::new();
        let fallback = (!self.default_queue.is_empty()).then_some(self.default_queue.as_str());
        let mut unqueued: Vec<(Key, String)> = Vec::new();
        for (k, g) in &self.groups {
            if g.queue.is_none() && fallback.is_none() {
                tell.push((k.clone(), no_queue(g)));
                // Computed again next cycle: a label may have come.
                unqueued.push(k.clone());
                continue;
            }
            if world.holds(stream, "PodGroup", &g.namespace, &g.name) {
                if !self.patched.contains(k) {
                    annotate.push((k.clone(), g.name.clone()));
                }
            } else if !self
                .created
                .contains(&(g.namespace.clone(), g.name.clone()))
            {
                create
                    .entry((g.namespace.clone(), g.name.clone()))
                    .or_insert_with(|| g.pod_group(fallback));
            }
        }

        for k in unqueued {
            self.groups.remove(&k);
        }
        let results: Vec<((String, String), Result<bool, kube::Error>)> =
            futures::stream::iter(create)
                .map(|((ns, name), object)| {
                    let ar = &ar;
                    async move {
                        let create = async {
                            let client = conn.client().await?;
                            let api: Api<DynamicObject> =
                                Api::namespaced_with(client.clone(), &ns, ar);
                            let o = serde_json::from_value::<DynamicObject>(object)
                                .map_err(kube::Error::SerdeError)?;
                            match api.create(&PostParams::default(), &o).await {
                                Ok(_) => Ok(true),
                                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                                Err(e) => Err(e),
                            }
                        };
                        let r = create.await;
                        ((ns, name), r)
                    }
                })
                .buffer_unordered(self.concurrency)
                .collect()
                .await;
        for ((ns, name), r) in results {
            match r {
                Ok(new) => {
                    if new {
                        tracing::info!("PodGroup {ns}/{name} created");
                        out.created += 1;
                    }
                    self.created.insert((ns, name));
                }
                Err(e) => {
                    tracing::warn!("creating PodGroup {ns}/{name}: {}", crate::conn::plain(&e));
                    out.failed += 1;
                }
            }
        }

        let results: Vec<((Key, String), Result<(), kube::Error>)> =
            futures::stream::iter(annotate)
                .map(|(k, group)| async move {
                    let mut patch = json!({"metadata": {"annotations": {keys::POD_GROUP: group}}});
                    if !k.1.is_empty() {
                        // The pod we grouped, not a namesake created since.
                        patch["metadata"]["uid"] = k.1.clone().into();
                    }
                    let r = match conn.client().await {
                        Ok(client) => Api::<Pod>::namespaced(client.clone(), &k.0.1)
                            .patch(&k.0.2, &PatchParams::default(), &Patch::Merge(patch))
                            .await
                            .map(|_| ()),
                        Err(e) => Err(e),
                    };
                    (k, r)
                })
                .buffer_unordered(self.concurrency)
                .collect()
                .await;
        for (k, r) in results {
            match r {
                Ok(()) => {
                    out.patched += 1;
                    self.patched.insert(k);
                }
                Err(e) => {
                    tracing::warn!(
                        "pod {}/{}: annotating its group: {}",
                        k.0.1,
                        k.0.2,
                        crate::conn::plain(&e)
                    );
                    out.failed += 1;
                }
            }
        }

        // Tell, once per message.
        let mut fresh: Vec<(TaskKey, String)> = Vec::new();
        for (k, m) in tell {
            if self.told.get(&k) == Some(&m) {
                continue;
            }
            self.told.insert(k.clone(), m.clone());
            let ((_, namespace, name), uid) = k;
            tracing::warn!("pod {namespace}/{name}: {m}");
            fresh.push((
                TaskKey {
                    namespace,
                    name,
                    uid,
                },
                m,
            ));
        }
        let tell = fresh;
        out.told = tell.len() as u64;
        out.failed += crate::report::write(conn, events, tell, now, self.concurrency).await;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(api_version: &str, kind: &str) -> OwnerRef {
        OwnerRef {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "x".into(),
            uid: "u".into(),
        }
    }

    #[test]
    fn owners_are_found_by_group_version_and_plural() {
        for (api_version, kind, group, version, plural) in [
            ("batch/v1", "Job", "batch", "v1", "jobs"),
            (
                "jobset.x-k8s.io/v1alpha2",
                "JobSet",
                "jobset.x-k8s.io",
                "v1alpha2",
                "jobsets",
            ),
            ("kubeflow.org/v1", "TFJob", "kubeflow.org", "v1", "tfjobs"),
            (
                "kubeflow.org/v2beta1",
                "MPIJob",
                "kubeflow.org",
                "v2beta1",
                "mpijobs",
            ),
            (
                "kubeflow.org/v1",
                "PyTorchJob",
                "kubeflow.org",
                "v1",
                "pytorchjobs",
            ),
            ("apps/v1", "StatefulSet", "apps", "v1", "statefulsets"),
            ("v1", "Pod", "", "v1", "pods"),
            ("ray.io/v1", "RayCluster", "ray.io", "v1", "rayclusters"),
            (
                "leaderworkerset.x-k8s.io/v1",
                "LeaderWorkerSet",
                "leaderworkerset.x-k8s.io",
                "v1",
                "leaderworkersets",
            ),
        ] {
            let ar = resource(&owner(api_version, kind));
            assert_eq!(
                (
                    ar.group.as_str(),
                    ar.version.as_str(),
                    ar.plural.as_str(),
                    ar.api_version.as_str()
                ),
                (group, version, plural, api_version),
                "{kind}"
            );
        }
    }

    fn object(api_version: &str, kind: &str, name: &str, controller: Option<&OwnerRef>) -> Value {
        let refs: Vec<Value> = controller
            .map(|o| {
                json!({"apiVersion": o.api_version, "kind": o.kind, "name": o.name,
                            "uid": o.uid, "controller": true})
            })
            .into_iter()
            .collect();
        json!({"apiVersion": api_version, "kind": kind,
               "metadata": {"name": name, "namespace": "ml", "uid": "u", "ownerReferences": refs}})
    }

    #[test]
    fn chains_are_assembled_from_owners_fetched_once() {
        let workflow = OwnerRef {
            name: "wf".into(),
            ..owner("argoproj.io/v1alpha1", "Workflow")
        };
        let jobset = OwnerRef {
            name: "js".into(),
            ..owner("jobset.x-k8s.io/v1alpha2", "JobSet")
        };
        let job = OwnerRef {
            name: "js-w-0".into(),
            ..owner("batch/v1", "Job")
        };
        let ns = |o: &OwnerRef| ("ml".to_string(), o.clone());
        let mut fetched = Fetched::new();
        fetched.insert(
            ns(&job),
            Ok(object("batch/v1", "Job", "js-w-0", Some(&jobset))),
        );
        fetched.insert(
            ns(&jobset),
            Ok(object(
                "jobset.x-k8s.io/v1alpha2",
                "JobSet",
                "js",
                Some(&workflow),
            )),
        );
        // Above the JobSet, a kind the service may not read: the chain
        // ends at the JobSet.
        fetched.insert(ns(&workflow), Err("owner Workflow ml/wf: forbidden".into()));
        let chain = chain_of(&ns(&job), &fetched).expect("a chain");
        let kinds: Vec<&str> = chain
            .iter()
            .map(|o| o["kind"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(kinds, ["Job", "JobSet"]);
        // Below the first workload (a StatefulSet is none), an error.
        let lws = OwnerRef {
            name: "vllm".into(),
            ..owner("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
        };
        let sts = OwnerRef {
            name: "vllm".into(),
            ..owner("apps/v1", "StatefulSet")
        };
        fetched.insert(
            ns(&sts),
            Ok(object("apps/v1", "StatefulSet", "vllm", Some(&lws))),
        );
        fetched.insert(
            ns(&lws),
            Err("owner LeaderWorkerSet ml/vllm: not found".into()),
        );
        assert_eq!(
            chain_of(&ns(&sts), &fetched),
            Err("owner LeaderWorkerSet ml/vllm: not found".to_string())
        );
        // A loop of references ends at the depth limit.
        let a = OwnerRef {
            name: "a".into(),
            ..owner("batch/v1", "Job")
        };
        let mut looped = Fetched::new();
        looped.insert(ns(&a), Ok(object("batch/v1", "Job", "a", Some(&a))));
        assert_eq!(chain_of(&ns(&a), &looped).map(|c| c.len()), Ok(MAX_DEPTH));
    }

    #[test]
    fn the_no_queue_message_names_the_labels() {
        let g = InferredGroup {
            name: "pytorchjob-bert-5f0c1d2e".into(),
            namespace: "ml".into(),
            min_member: 4,
            queue: None,
            priority_class_name: None,
            walltime_seconds: None,
            owner: OwnerRef {
                name: "bert".into(),
                ..owner("kubeflow.org/v1", "PyTorchJob")
            },
        };
        assert_eq!(
            no_queue(&g),
            "no queue for PodGroup pytorchjob-bert-5f0c1d2e inferred from PyTorchJob bert: label the pod or the PyTorchJob with trainyard.io/queue=<queue>, or the Namespace ml with trainyard.io/default-queue=<queue>"
        );
    }
}
