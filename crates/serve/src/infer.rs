//! PodGroups inferred from owners, the pure part: which pods are grouped
//! by their owner, and the group (name, `minMember`, queue, priority class,
//! owner reference) of a pod given its owner chain and its Namespace.
//!
//! A pod of ours that names no group (`keys::POD_GROUP_KEYS`) but whose
//! controller is a workload Trainyard knows (a batch `Job`, a Kubeflow
//! `PyTorchJob`/`TFJob`/`MPIJob`, a `RayCluster`, or the `StatefulSet` of a
//! `LeaderWorkerSet`) joins the group of the topmost known workload above
//! it: `JobSet` → `Job` → Pod, `TrainJob` → `JobSet` → `Job` → Pod,
//! `RayJob` → `RayCluster` → Pod, `LeaderWorkerSet` → `StatefulSet` →
//! (leader Pod → `StatefulSet` →) Pod. [`crate::grouper`] fetches the chain
//! and writes the group. Rules follow KAI-Scheduler's podgrouper where it
//! makes sense; docs/serve.md, "PodGroups from owners", compares them.
//!
//! JSON in, plain data out; no I/O.

use serde_json::{Value, json};
use trainyard_crd::keys::{self, KeyPlace};

/// An owner reference (of a pod, or of the PodGroup to its workload).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

impl OwnerRef {
    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    fn of(owner: &Value) -> OwnerRef {
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        OwnerRef {
            api_version: s(&owner["apiVersion"]),
            kind: s(&owner["kind"]),
            name: s(&owner["name"]),
            uid: s(&owner["uid"]),
        }
    }

    /// The reference of an object (its `apiVersion`, `kind` and metadata).
    pub fn to(object: &Value) -> OwnerRef {
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        OwnerRef {
            api_version: s(&object["apiVersion"]),
            kind: s(&object["kind"]),
            name: s(&object["metadata"]["name"]),
            uid: s(&object["metadata"]["uid"]),
        }
    }
}

/// The group inferred for a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InferredGroup {
    /// The PodGroup's name (DNS-1123 subdomain, deterministic).
    pub name: String,
    pub namespace: String,
    pub min_member: u32,
    /// `None`: neither the pod, its owners nor its Namespace names one.
    pub queue: Option<String>,
    /// The pod's `spec.priorityClassName`.
    pub priority_class_name: Option<String>,
    /// The shortest active deadline of its owners (seconds): a batch
    /// Job's or a RayJob's `spec.activeDeadlineSeconds`, a Kubeflow job's
    /// `spec.runPolicy.activeDeadlineSeconds`; the PodGroup's walltime.
    pub walltime_seconds: Option<u64>,
    /// The workload the group belongs to (the topmost known owner): the
    /// PodGroup's controller owner reference, so it is garbage-collected
    /// with the workload.
    pub owner: OwnerRef,
}

impl InferredGroup {
    /// The `trainyard.io/v1alpha1` PodGroup, with `queue` when the group
    /// names none itself.
    pub fn pod_group(&self, queue: Option<&str>) -> Value {
        let mut spec = json!({"minMember": self.min_member});
        if let Some(q) = self.queue.as_deref().or(queue) {
            spec["queue"] = q.into();
        }
        if let Some(p) = &self.priority_class_name {
            spec["priorityClassName"] = p.as_str().into();
        }
        if let Some(w) = self.walltime_seconds {
            spec["walltime"] = w.into();
        }
        json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
            "metadata": {
                "name": self.name, "namespace": self.namespace,
                "labels": {INFERRED_FROM: self.owner.kind.to_lowercase()},
                "ownerReferences": [{
                    "apiVersion": self.owner.api_version, "kind": self.owner.kind,
                    "name": self.owner.name, "uid": self.owner.uid,
                    "controller": true, "blockOwnerDeletion": false
                }]
            },
            "spec": spec
        })
    }
}

/// Label on a PodGroup Trainyard inferred: the owner's kind, lowercase.
pub const INFERRED_FROM: &str = "trainyard.io/inferred-from";

/// KAI-Scheduler: annotation on a batch Job overriding its `minMember`.
const KAI_BATCH_MIN_MEMBER: &str = "kai.scheduler/batch-min-member";
/// LeaderWorkerSet: pod label with the index of the pod's group.
const LWS_GROUP_INDEX: &str = "leaderworkerset.sigs.k8s.io/group-index";
/// LeaderWorkerSet: pod label with the LeaderWorkerSet's name.
const LWS_NAME: &str = "leaderworkerset.sigs.k8s.io/name";

/// The workloads a group is inferred for, by (API group, kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    Job,
    JobSet,
    TrainJob,
    PyTorchJob,
    TfJob,
    MpiJob,
    RayCluster,
    RayJob,
    LeaderWorkerSet,
}

impl Workload {
    fn of(api_version: &str, kind: &str) -> Option<Workload> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        Some(match (group, kind) {
            ("batch", "Job") => Workload::Job,
            ("jobset.x-k8s.io", "JobSet") => Workload::JobSet,
            ("trainer.kubeflow.org", "TrainJob") => Workload::TrainJob,
            ("kubeflow.org", "PyTorchJob") => Workload::PyTorchJob,
            ("kubeflow.org", "TFJob") => Workload::TfJob,
            ("kubeflow.org", "MPIJob") => Workload::MpiJob,
            ("ray.io", "RayCluster") => Workload::RayCluster,
            ("ray.io", "RayJob") => Workload::RayJob,
            ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") => Workload::LeaderWorkerSet,
            _ => return None,
        })
    }

    fn of_object(o: &Value) -> Option<Workload> {
        Workload::of(
            o["apiVersion"].as_str().unwrap_or(""),
            o["kind"].as_str().unwrap_or(""),
        )
    }
}

/// Whether `owner` is of a kind whose group Trainyard infers (the top of
/// a chain: Job, JobSet, TrainJob, the Kubeflow jobs, Ray, LeaderWorkerSet).
pub fn is_workload(owner: &OwnerRef) -> bool {
    Workload::of(&owner.api_version, &owner.kind).is_some()
}

/// The controller owner reference of `object`, if any.
pub fn controller_of(object: &Value) -> Option<OwnerRef> {
    object["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|o| o["controller"].as_bool() == Some(true))
        .map(OwnerRef::of)
}

fn label<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    object["metadata"]["labels"][key].as_str()
}

fn lookup<'v>(object: &'v Value, key: &str, place: KeyPlace) -> Option<&'v str> {
    let annotation = || object["metadata"]["annotations"][key].as_str();
    match place {
        KeyPlace::Label => label(object, key),
        KeyPlace::Annotation => annotation(),
        KeyPlace::LabelOrAnnotation => label(object, key).or_else(annotation),
    }
}

/// Whether the pod names a group itself (any of `keys::POD_GROUP_KEYS`).
pub fn names_a_group(pod: &Value) -> bool {
    keys::POD_GROUP_KEYS
        .iter()
        .any(|(k, place)| lookup(pod, k, *place).is_some_and(|v| !v.is_empty()))
}

/// The owner to infer the group of `pod` from: its controller, when the pod
/// names no group and the controller is a batch `Job`, a Kubeflow
/// `PyTorchJob`/`TFJob`/`MPIJob`, a `RayCluster`, or a `StatefulSet` of a
/// `LeaderWorkerSet` (the pod carries `leaderworkerset.sigs.k8s.io/name`).
/// Whether the pod is Trainyard's and pending is the caller's business.
pub fn workload_owner(pod: &Value) -> Option<OwnerRef> {
    if names_a_group(pod) {
        return None;
    }
    let owner = controller_of(pod)?;
    let direct = match Workload::of(&owner.api_version, &owner.kind) {
        Some(w) => matches!(
            w,
            Workload::Job
                | Workload::PyTorchJob
                | Workload::TfJob
                | Workload::MpiJob
                | Workload::RayCluster
        ),
        None => {
            owner.group() == "apps" && owner.kind == "StatefulSet" && label(pod, LWS_NAME).is_some()
        }
    };
    direct.then_some(owner)
}

/// A whole number field (`absent` when missing; an error names `what` when
/// it is not a non-negative integer).
fn count(v: &Value, absent: u64, what: &str) -> Result<u64, String> {
    match v {
        Value::Null => Ok(absent),
        _ => v
            .as_u64()
            .ok_or_else(|| format!("{what} is {v}, not a non-negative whole number")),
    }
}

fn object_name(o: &Value) -> String {
    format!(
        "{} {}",
        o["kind"].as_str().unwrap_or("?"),
        o["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// A batch Job's minimum: Indexed, min(parallelism, completions); else 1
/// (its pods are interchangeable, each can start alone). KAI's
/// `kai.scheduler/batch-min-member` annotation overrides.
fn job_min(job: &Value) -> Result<u64, String> {
    let what = object_name(job);
    if let Some(v) = job["metadata"]["annotations"][KAI_BATCH_MIN_MEMBER].as_str() {
        return v.parse().map_err(|_| {
            format!("{what}: annotation {KAI_BATCH_MIN_MEMBER}={v:?} is not a whole number")
        });
    }
    let spec = &job["spec"];
    if spec["completionMode"].as_str() != Some("Indexed") {
        return Ok(1);
    }
    let p = count(
        &spec["parallelism"],
        1,
        &format!("{what}: spec.parallelism"),
    )?;
    let c = count(
        &spec["completions"],
        p,
        &format!("{what}: spec.completions"),
    )?;
    Ok(p.min(c))
}

/// A JobSet's minimum: Σ replicatedJobs replicas × min(parallelism,
/// completions); with `startupPolicy.startupPolicyOrder: InOrder` only the
/// first replicated job (the later ones are created after it is ready, so
/// waiting for them would never end).
fn jobset_min(jobset: &Value) -> Result<u64, String> {
    let what = object_name(jobset);
    let jobs = jobset["spec"]["replicatedJobs"]
        .as_array()
        .filter(|j| !j.is_empty())
        .ok_or_else(|| format!("{what}: no spec.replicatedJobs"))?;
    let in_order =
        jobset["spec"]["startupPolicy"]["startupPolicyOrder"].as_str() == Some("InOrder");
    let mut total = 0u64;
    for (i, rj) in jobs.iter().enumerate() {
        let at = format!("{what}: spec.replicatedJobs[{i}]");
        let replicas = count(&rj["replicas"], 1, &format!("{at}.replicas"))?;
        let spec = &rj["template"]["spec"];
        let p = count(
            &spec["parallelism"],
            1,
            &format!("{at}.template.spec.parallelism"),
        )?;
        let c = count(
            &spec["completions"],
            p,
            &format!("{at}.template.spec.completions"),
        )?;
        total = total.saturating_add(replicas.saturating_mul(p.min(c)));
        if in_order {
            break;
        }
    }
    Ok(total)
}

/// A Kubeflow training job's minimum: `runPolicy.schedulingPolicy.minAvailable`,
/// else (PyTorchJob) `elasticPolicy.minReplicas`, else the sum of its replica
/// specs' replicas (1 when absent); an MPIJob whose launcher waits for the
/// workers (`launcherCreationPolicy: WaitForWorkersReady`) counts only them.
fn kubeflow_min(job: &Value, kind: Workload) -> Result<u64, String> {
    let what = object_name(job);
    let spec = &job["spec"];
    let min_available = &spec["runPolicy"]["schedulingPolicy"]["minAvailable"];
    if !min_available.is_null() {
        return count(
            min_available,
            1,
            &format!("{what}: spec.runPolicy.schedulingPolicy.minAvailable"),
        );
    }
    if kind == Workload::PyTorchJob && !spec["elasticPolicy"]["minReplicas"].is_null() {
        return count(
            &spec["elasticPolicy"]["minReplicas"],
            1,
            &format!("{what}: spec.elasticPolicy.minReplicas"),
        );
    }
    let field = match kind {
        Workload::PyTorchJob => "pytorchReplicaSpecs",
        Workload::TfJob => "tfReplicaSpecs",
        _ => "mpiReplicaSpecs",
    };
    let specs = spec[field]
        .as_object()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("{what}: no spec.{field}"))?;
    let launcher_waits = kind == Workload::MpiJob
        && spec["launcherCreationPolicy"].as_str() == Some("WaitForWorkersReady");
    let mut total = 0u64;
    for (name, replica) in specs {
        if launcher_waits && name == "Launcher" {
            continue;
        }
        total = total.saturating_add(count(
            &replica["replicas"],
            1,
            &format!("{what}: spec.{field}.{name}.replicas"),
        )?);
    }
    Ok(total)
}

/// A Ray cluster's minimum from its spec: the head plus, per worker group,
/// `minReplicas` (else `replicas`) × `numOfHosts` (as KAI counts it).
fn ray_min(spec: &Value, what: &str) -> Result<u64, String> {
    let mut total = 1u64;
    let groups = spec["workerGroupSpecs"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    for (i, g) in groups.iter().enumerate() {
        let at = format!("{what}: workerGroupSpecs[{i}]");
        let min = count(&g["minReplicas"], 0, &format!("{at}.minReplicas"))?;
        let replicas = count(&g["replicas"], 0, &format!("{at}.replicas"))?;
        let hosts = count(&g["numOfHosts"], 1, &format!("{at}.numOfHosts"))?;
        let n = if min > 0 { min } else { replicas };
        total = total.saturating_add(n.saturating_mul(hosts));
    }
    Ok(total)
}

/// A LeaderWorkerSet group's minimum: `leaderWorkerTemplate.size` (leader
/// and workers); with `startupPolicy: LeaderReady` the workers are created
/// only once the leader runs, so the minimum is the leader alone.
fn lws_min(lws: &Value) -> Result<u64, String> {
    let what = object_name(lws);
    if lws["spec"]["startupPolicy"].as_str() == Some("LeaderReady") {
        return Ok(1);
    }
    count(
        &lws["spec"]["leaderWorkerTemplate"]["size"],
        1,
        &format!("{what}: spec.leaderWorkerTemplate.size"),
    )
}

/// Longest PodGroup name (a DNS-1123 subdomain).
const MAX_NAME: usize = 253;

/// `<kind>-<owner name>-<first 8 of its UID>[<suffix>]`: deterministic, and
/// a workload deleted and created again under the same name gets a new
/// group even while the old one waits for the garbage collector.
fn group_name(owner: &OwnerRef, suffix: &str) -> String {
    let kind = owner.kind.to_lowercase();
    let uid: String = owner
        .uid
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect::<String>()
        .to_lowercase();
    let tail = if uid.is_empty() {
        suffix.to_string()
    } else {
        format!("-{uid}{suffix}")
    };
    let room = MAX_NAME.saturating_sub(kind.len() + 1 + tail.len());
    let name: String = owner.name.chars().take(room).collect();
    let name = name.trim_end_matches(['-', '.']);
    format!("{kind}-{name}{tail}")
}

/// An owner's active deadline (seconds), where its kind keeps one; values
/// that are not a positive whole number are not deadlines (an API server
/// refuses them).
fn owner_deadline(owner: &Value) -> Option<u64> {
    let spec = &owner["spec"];
    let v = match Workload::of_object(owner) {
        Some(Workload::Job | Workload::RayJob) => &spec["activeDeadlineSeconds"],
        Some(Workload::PyTorchJob | Workload::TfJob | Workload::MpiJob) => {
            &spec["runPolicy"]["activeDeadlineSeconds"]
        }
        _ => return None,
    };
    v.as_u64().filter(|s| *s > 0)
}

fn queue_label(object: &Value) -> Option<&str> {
    [keys::QUEUE, keys::KAI_QUEUE]
        .into_iter()
        .find_map(|k| label(object, k).filter(|v| !v.is_empty()))
}

/// The group of `pod`, given its owners from its controller (first) to the
/// top (last) and its Namespace. The rule is the topmost owner Trainyard
/// knows ([`Workload`]); it owns the group. The queue is the pod's
/// (`keys::QUEUE_KEYS`), else the nearest owner's `trainyard.io/queue` or
/// `kai.scheduler/queue` label, else the Namespace's
/// `trainyard.io/default-queue` label or Volcano's
/// `scheduling.volcano.sh/queue-name` annotation, else none.
pub fn group_for(
    pod: &Value,
    owner_chain: &[Value],
    namespace: Option<&Value>,
) -> Result<InferredGroup, String> {
    let pod_name = pod["metadata"]["name"].as_str().unwrap_or("?");
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or("default");
    let (top, kind) = owner_chain
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, o)| Workload::of_object(o).map(|w| (i, w)))
        .ok_or_else(|| format!("Pod {ns}/{pod_name}: no owner is a workload Trainyard groups"))?;
    let workload = &owner_chain[top];
    let below = &owner_chain[..top];
    let find = |w: Workload| {
        below
            .iter()
            .rev()
            .find(|o| Workload::of_object(o) == Some(w))
    };
    let owner = OwnerRef::to(workload);
    let mut suffix = String::new();
    let min = match kind {
        Workload::Job => job_min(workload)?,
        Workload::JobSet => jobset_min(workload)?,
        Workload::TrainJob => match find(Workload::JobSet) {
            Some(jobset) => jobset_min(jobset)?,
            None => {
                return Err(format!(
                    "{}: no JobSet of it owns the pod",
                    object_name(workload)
                ));
            }
        },
        Workload::PyTorchJob | Workload::TfJob | Workload::MpiJob => kubeflow_min(workload, kind)?,
        Workload::RayCluster => ray_min(&workload["spec"], &object_name(workload))?,
        Workload::RayJob => match find(Workload::RayCluster) {
            Some(cluster) => ray_min(&cluster["spec"], &object_name(cluster))?,
            None => ray_min(
                &workload["spec"]["rayClusterSpec"],
                &format!("{}: spec.rayClusterSpec", object_name(workload)),
            )?,
        },
        Workload::LeaderWorkerSet => {
            let index = label(pod, LWS_GROUP_INDEX).ok_or_else(|| {
                format!("Pod {ns}/{pod_name}: no label {LWS_GROUP_INDEX} (the LeaderWorkerSet group it belongs to)")
            })?;
            if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "Pod {ns}/{pod_name}: label {LWS_GROUP_INDEX}={index:?} is not a whole number"
                ));
            }
            suffix = format!("-group-{index}");
            lws_min(workload)?
        }
    };
    let queue = keys::QUEUE_KEYS
        .iter()
        .find_map(|(k, place)| lookup(pod, k, *place).filter(|v| !v.is_empty()))
        .or_else(|| owner_chain.iter().find_map(queue_label))
        .or_else(|| {
            // Trainyard's label, then Volcano's annotation
            // (`scheduling.volcano.sh/queue-name` on the Namespace).
            let n = namespace?;
            keys::NAMESPACE_QUEUE_KEYS
                .iter()
                .find_map(|(k, place)| lookup(n, k, *place).filter(|v| !v.is_empty()))
        })
        .map(str::to_string);
    Ok(InferredGroup {
        name: group_name(&owner, &suffix),
        namespace: ns.to_string(),
        // The CRD's minimum is 1 (a Job scaled to 0 still has the pod
        // that asks).
        min_member: u32::try_from(min.max(1)).unwrap_or(u32::MAX),
        queue,
        priority_class_name: pod["spec"]["priorityClassName"]
            .as_str()
            .filter(|p| !p.is_empty())
            .map(str::to_string),
        // The tightest deadline of any owner (a JobSet's Jobs carry theirs).
        walltime_seconds: owner_chain.iter().filter_map(owner_deadline).min(),
        owner,
    })
}

#[cfg(test)]
mod tests;
