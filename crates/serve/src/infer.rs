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
/// `trainyard.io/default-queue` label, else none.
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
            namespace
                .and_then(|n| label(n, keys::NAMESPACE_DEFAULT_QUEUE))
                .filter(|v| !v.is_empty())
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
mod tests {
    use trainyard_crd::names::dns1123_subdomain_problem;

    use super::*;

    fn owned(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
        json!([{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
                "controller": true, "blockOwnerDeletion": true}])
    }

    fn pod(name: &str, owner: Value, labels: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "ml", "uid": format!("u-{name}"),
                            "labels": labels, "ownerReferences": owner},
               "spec": {"schedulerName": "trainyard", "priorityClassName": "train",
                        "containers": [{"name": "c"}]}})
    }

    fn object(api_version: &str, kind: &str, name: &str, uid: &str, spec: Value) -> Value {
        json!({"apiVersion": api_version, "kind": kind,
               "metadata": {"name": name, "namespace": "ml", "uid": uid}, "spec": spec})
    }

    fn with_owner(mut o: Value, owner: &Value) -> Value {
        let r = OwnerRef::to(owner);
        o["metadata"]["ownerReferences"] = owned(&r.api_version, &r.kind, &r.name, &r.uid);
        o
    }

    fn namespace(queue: Option<&str>) -> Value {
        let labels = queue.map_or(json!({}), |q| json!({keys::NAMESPACE_DEFAULT_QUEUE: q}));
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": labels}})
    }

    fn pytorchjob(spec: Value) -> Value {
        object(
            "kubeflow.org/v1",
            "PyTorchJob",
            "bert",
            "5f0c1d2e-aaaa-4bbb-8ccc-0123456789ab",
            spec,
        )
    }

    fn pytorch_pod(job: &Value, role: &str, index: u32) -> Value {
        let r = OwnerRef::to(job);
        pod(
            &format!("bert-{role}-{index}"),
            owned(&r.api_version, &r.kind, &r.name, &r.uid),
            json!({"training.kubeflow.org/job-name": "bert",
                   "training.kubeflow.org/replica-type": role,
                   "training.kubeflow.org/replica-index": index.to_string()}),
        )
    }

    #[test]
    fn a_pytorchjob_is_one_gang_of_all_its_replicas_owned_by_the_job() {
        let job = pytorchjob(json!({"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {}}, "Worker": {"replicas": 3, "template": {}}}}));
        let p = pytorch_pod(&job, "worker", 2);
        let owner = workload_owner(&p).expect("grouped");
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("PyTorchJob", "bert")
        );
        let g = group_for(
            &p,
            std::slice::from_ref(&job),
            Some(&namespace(Some("team"))),
        )
        .expect("group");
        assert_eq!(g.name, "pytorchjob-bert-5f0c1d2e");
        assert_eq!(g.min_member, 4);
        assert_eq!(g.queue.as_deref(), Some("team"));
        assert_eq!(g.priority_class_name.as_deref(), Some("train"));
        assert_eq!(g.owner, OwnerRef::to(&job));
        let pg = g.pod_group(None);
        assert_eq!(
            pg["spec"],
            json!({"minMember": 4, "queue": "team", "priorityClassName": "train"})
        );
        assert_eq!(
            pg["metadata"]["ownerReferences"],
            json!([{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "bert",
                    "uid": "5f0c1d2e-aaaa-4bbb-8ccc-0123456789ab",
                    "controller": true, "blockOwnerDeletion": false}])
        );
        // Every pod of the job computes the same group.
        let master = pytorch_pod(&job, "master", 0);
        assert_eq!(
            group_for(&master, &[job], Some(&namespace(Some("team")))),
            Ok(g)
        );
    }

    #[test]
    fn owners_active_deadlines_become_the_walltime() {
        let job = pytorchjob(json!({"pytorchReplicaSpecs": {"Worker": {"replicas": 2}},
                                    "runPolicy": {"activeDeadlineSeconds": 7200}}));
        let p = pytorch_pod(&job, "worker", 0);
        let g = group_for(&p, std::slice::from_ref(&job), None).expect("group");
        assert_eq!(g.walltime_seconds, Some(7200));
        assert_eq!(g.pod_group(Some("q"))["spec"]["walltime"], json!(7200));
        // A batch Job's own, and the tightest of a chain.
        let batch = object(
            "batch/v1",
            "Job",
            "eval",
            "9a9a9a9a-aaaa-4bbb-8ccc-0123456789ab",
            json!({"activeDeadlineSeconds": 600}),
        );
        let r = OwnerRef::to(&batch);
        let bp = pod(
            "eval-0",
            owned(&r.api_version, &r.kind, &r.name, &r.uid),
            json!({}),
        );
        let g = group_for(&bp, std::slice::from_ref(&batch), None).expect("group");
        assert_eq!(g.walltime_seconds, Some(600));
        // None set, or not a positive number: no walltime, no field.
        let plain = pytorchjob(json!({"pytorchReplicaSpecs": {"Worker": {"replicas": 2}},
                                      "runPolicy": {"activeDeadlineSeconds": -1}}));
        let g = group_for(&p, &[plain], None).expect("group");
        assert_eq!(g.walltime_seconds, None);
        assert!(g.pod_group(None)["spec"].get("walltime").is_none());
    }

    #[test]
    fn pytorchjob_elastic_and_scheduling_policy_minimums() {
        let specs = json!({"Worker": {"replicas": 8}});
        let elastic = pytorchjob(json!({"pytorchReplicaSpecs": specs,
                                        "elasticPolicy": {"minReplicas": 2, "maxReplicas": 8}}));
        let p = pytorch_pod(&elastic, "worker", 0);
        assert_eq!(group_for(&p, &[elastic], None).map(|g| g.min_member), Ok(2));
        let both = pytorchjob(json!({"pytorchReplicaSpecs": specs,
                                     "elasticPolicy": {"minReplicas": 2},
                                     "runPolicy": {"schedulingPolicy": {"minAvailable": 6}}}));
        assert_eq!(group_for(&p, &[both], None).map(|g| g.min_member), Ok(6));
        let bad = pytorchjob(json!({"pytorchReplicaSpecs": {"Worker": {"replicas": "many"}}}));
        let e = group_for(&p, &[bad], None).expect_err("bad replicas");
        assert!(
            e.contains("spec.pytorchReplicaSpecs.Worker.replicas"),
            "{e}"
        );
    }

    #[test]
    fn tfjob_and_mpijob() {
        let tf = object(
            "kubeflow.org/v1",
            "TFJob",
            "mnist",
            "t1",
            json!({"tfReplicaSpecs": {
            "Chief": {"replicas": 1}, "PS": {"replicas": 2}, "Worker": {"replicas": 4}}}),
        );
        let p = pod(
            "mnist-worker-0",
            owned("kubeflow.org/v1", "TFJob", "mnist", "t1"),
            json!({}),
        );
        assert!(workload_owner(&p).is_some());
        assert_eq!(
            group_for(&p, &[tf], None).map(|g| (g.name, g.min_member)),
            Ok(("tfjob-mnist-t1".to_string(), 7))
        );

        // mpi-operator v2: workers are owned by the MPIJob, the launcher by
        // a batch Job the MPIJob owns. Both join the MPIJob's group.
        let mpi = object(
            "kubeflow.org/v2beta1",
            "MPIJob",
            "allreduce",
            "m1",
            json!({"mpiReplicaSpecs": {
            "Launcher": {"replicas": 1}, "Worker": {"replicas": 4}}}),
        );
        let launcher_job = with_owner(
            object("batch/v1", "Job", "allreduce-launcher", "j1", json!({})),
            &mpi,
        );
        let launcher = pod(
            "allreduce-launcher-x",
            owned("batch/v1", "Job", "allreduce-launcher", "j1"),
            json!({}),
        );
        let worker = pod(
            "allreduce-worker-0",
            owned("kubeflow.org/v2beta1", "MPIJob", "allreduce", "m1"),
            json!({}),
        );
        let a = group_for(&launcher, &[launcher_job, mpi.clone()], None).expect("launcher");
        let b = group_for(&worker, std::slice::from_ref(&mpi), None).expect("worker");
        assert_eq!((a.name.as_str(), a.min_member), ("mpijob-allreduce-m1", 5));
        assert_eq!(a, b);
        assert_eq!(a.owner.kind, "MPIJob");
        // The launcher created after the workers are ready is not waited for.
        let mut delayed = mpi;
        delayed["spec"]["launcherCreationPolicy"] = json!("WaitForWorkersReady");
        assert_eq!(
            group_for(&worker, &[delayed], None).map(|g| g.min_member),
            Ok(4)
        );
    }

    #[test]
    fn batch_jobs_indexed_and_not() {
        let job = |spec: Value| object("batch/v1", "Job", "sweep", "b1", spec);
        let p = pod(
            "sweep-0",
            owned("batch/v1", "Job", "sweep", "b1"),
            json!({}),
        );
        assert!(workload_owner(&p).is_some());
        let min = |j: Value| group_for(&p, &[j], None).map(|g| g.min_member);
        assert_eq!(
            min(job(
                json!({"completionMode": "Indexed", "parallelism": 4, "completions": 8})
            )),
            Ok(4)
        );
        assert_eq!(
            min(job(
                json!({"completionMode": "Indexed", "parallelism": 4, "completions": 2})
            )),
            Ok(2)
        );
        assert_eq!(min(job(json!({"parallelism": 4, "completions": 8}))), Ok(1));
        assert_eq!(
            min(job(
                json!({"completionMode": "Indexed", "parallelism": 0, "completions": 8})
            )),
            Ok(1)
        );
        let mut annotated = job(json!({"parallelism": 4}));
        annotated["metadata"]["annotations"] = json!({KAI_BATCH_MIN_MEMBER: "3"});
        assert_eq!(min(annotated), Ok(3));
        // A Job of a CronJob: the Job is the topmost workload Trainyard
        // knows, so each run is its own group.
        let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob",
                          "metadata": {"name": "nightly", "namespace": "ml", "uid": "c1"}});
        let run = with_owner(
            job(json!({"completionMode": "Indexed", "parallelism": 2, "completions": 2})),
            &cron,
        );
        let g = group_for(&p, &[run, cron], None).expect("group");
        assert_eq!(
            (g.name.as_str(), g.min_member, g.owner.kind.as_str()),
            ("job-sweep-b1", 2, "Job")
        );
    }

    fn jobset(spec: Value) -> Value {
        object("jobset.x-k8s.io/v1alpha2", "JobSet", "llm", "js-1", spec)
    }

    #[test]
    fn jobset_and_trainjob() {
        let js = jobset(json!({"replicatedJobs": [
            {"name": "driver", "replicas": 1, "template": {"spec": {"parallelism": 1, "completions": 1}}},
            {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 4,
                                                                     "completionMode": "Indexed"}}}]}));
        let child = with_owner(
            object("batch/v1", "Job", "llm-workers-1", "j2", json!({})),
            &js,
        );
        let p = pod(
            "llm-workers-1-0-x",
            owned("batch/v1", "Job", "llm-workers-1", "j2"),
            json!({"jobset.sigs.k8s.io/jobset-name": "llm", keys::QUEUE: "research"}),
        );
        let g = group_for(
            &p,
            &[child.clone(), js.clone()],
            Some(&namespace(Some("team"))),
        )
        .expect("group");
        assert_eq!((g.name.as_str(), g.min_member), ("jobset-llm-js1", 9));
        assert_eq!(
            g.queue.as_deref(),
            Some("research"),
            "the pod's queue first"
        );
        assert_eq!(g.owner.kind, "JobSet");

        let mut in_order = js.clone();
        in_order["spec"]["startupPolicy"] = json!({"startupPolicyOrder": "InOrder"});
        assert_eq!(
            group_for(&p, &[child.clone(), in_order], None).map(|g| g.min_member),
            Ok(1)
        );

        // TrainJob → JobSet → Job → Pod: the JobSet's rule, the TrainJob's group.
        let tj = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                        "metadata": {"name": "llm", "namespace": "ml", "uid": "tj-9",
                                     "labels": {keys::QUEUE: "owners"}}});
        let js = with_owner(js, &tj);
        let child = with_owner(child, &js);
        let mut p = p;
        p["metadata"]["labels"] = json!({});
        let g = group_for(&p, &[child.clone(), js, tj.clone()], None).expect("group");
        assert_eq!((g.name.as_str(), g.min_member), ("trainjob-llm-tj9", 9));
        assert_eq!(g.owner, OwnerRef::to(&tj));
        assert_eq!(g.queue.as_deref(), Some("owners"), "an owner's label");
        let e = group_for(&p, &[child, tj], None).expect_err("no JobSet");
        assert!(e.contains("TrainJob llm: no JobSet"), "{e}");
    }

    #[test]
    fn ray_cluster_and_ray_job() {
        let spec = json!({"headGroupSpec": {}, "workerGroupSpecs": [
            {"groupName": "gpu", "replicas": 4, "minReplicas": 2, "numOfHosts": 2},
            {"groupName": "cpu", "replicas": 3},
            {"groupName": "idle", "replicas": 0, "minReplicas": 0}]});
        let rc = object("ray.io/v1", "RayCluster", "rc", "r1", spec.clone());
        let p = pod(
            "rc-gpu-worker-x",
            owned("ray.io/v1", "RayCluster", "rc", "r1"),
            json!({"ray.io/cluster": "rc", "ray.io/node-type": "worker"}),
        );
        assert!(workload_owner(&p).is_some());
        assert_eq!(
            group_for(&p, std::slice::from_ref(&rc), None).map(|g| (g.name, g.min_member)),
            Ok(("raycluster-rc-r1".to_string(), 1 + 4 + 3))
        );
        let rj = object(
            "ray.io/v1",
            "RayJob",
            "rj",
            "rj-1",
            json!({"rayClusterSpec": {"workerGroupSpecs": []}}),
        );
        let rc = with_owner(rc, &rj);
        let g = group_for(&p, &[rc, rj.clone()], None).expect("group");
        assert_eq!((g.name.as_str(), g.min_member), ("rayjob-rj-rj1", 8));
        // The submitter's Job: no RayCluster in its chain, the RayJob's spec counts.
        let submitter = with_owner(object("batch/v1", "Job", "rj-submit", "s1", json!({})), &rj);
        let sp = pod(
            "rj-submit-x",
            owned("batch/v1", "Job", "rj-submit", "s1"),
            json!({}),
        );
        assert_eq!(
            group_for(&sp, &[submitter, rj], None).map(|g| (g.name, g.min_member)),
            Ok(("rayjob-rj-rj1".to_string(), 1))
        );
    }

    #[test]
    fn leaderworkerset_groups_are_gangs_of_size() {
        let lws = object(
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            "vllm",
            "l1",
            json!({"replicas": 2, "leaderWorkerTemplate": {"size": 4}}),
        );
        let leader_sts = with_owner(
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
                                           "metadata": {"name": "vllm", "namespace": "ml", "uid": "s0"}}),
            &lws,
        );
        let labels = |g: u32, w: u32| {
            json!({LWS_NAME: "vllm", LWS_GROUP_INDEX: g.to_string(),
                                             "leaderworkerset.sigs.k8s.io/worker-index": w.to_string()})
        };
        let leader = pod(
            "vllm-1",
            owned("apps/v1", "StatefulSet", "vllm", "s0"),
            labels(1, 0),
        );
        assert!(workload_owner(&leader).is_some());
        let g = group_for(&leader, &[leader_sts.clone(), lws.clone()], None).expect("leader");
        assert_eq!(
            (g.name.as_str(), g.min_member),
            ("leaderworkerset-vllm-l1-group-1", 4)
        );
        // A worker: its StatefulSet is owned by the leader pod.
        let leader_pod = with_owner(leader.clone(), &leader_sts);
        let worker_sts = with_owner(
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
                                           "metadata": {"name": "vllm-1", "namespace": "ml", "uid": "s1"}}),
            &leader_pod,
        );
        let worker = pod(
            "vllm-1-3",
            owned("apps/v1", "StatefulSet", "vllm-1", "s1"),
            labels(1, 3),
        );
        let w = group_for(
            &worker,
            &[worker_sts, leader_pod, leader_sts, lws.clone()],
            None,
        )
        .expect("worker");
        assert_eq!(w.name, g.name);
        let mut ready = lws;
        ready["spec"]["startupPolicy"] = json!("LeaderReady");
        assert_eq!(
            group_for(&leader, &[ready], None).map(|g| g.min_member),
            Ok(1)
        );
        // A plain StatefulSet's pods are not grouped.
        let plain = pod(
            "web-0",
            owned("apps/v1", "StatefulSet", "web", "s9"),
            json!({}),
        );
        assert_eq!(workload_owner(&plain), None);
    }

    #[test]
    fn what_is_not_grouped() {
        // A group key of its own, any of the accepted ones.
        for (k, place) in keys::POD_GROUP_KEYS {
            let mut p = pod(
                "x",
                owned("kubeflow.org/v1", "PyTorchJob", "bert", "u"),
                json!({}),
            );
            let at = if *place == KeyPlace::Annotation {
                "annotations"
            } else {
                "labels"
            };
            p["metadata"][at] = json!({*k: "mine"});
            assert_eq!(workload_owner(&p), None, "{k}");
        }
        // No owner; an owner that is not the controller; a ReplicaSet.
        assert_eq!(workload_owner(&pod("x", json!([]), json!({}))), None);
        let mut not_controller = owned("batch/v1", "Job", "j", "u");
        not_controller[0]["controller"] = json!(false);
        assert_eq!(workload_owner(&pod("x", not_controller, json!({}))), None);
        assert_eq!(
            workload_owner(&pod(
                "x",
                owned("apps/v1", "ReplicaSet", "r", "u"),
                json!({})
            )),
            None
        );
        // A chain with nothing known in it.
        let e = group_for(&pod("x", json!([]), json!({})), &[], None).expect_err("nothing");
        assert!(e.contains("no owner is a workload"), "{e}");
    }

    #[test]
    fn queue_precedence_and_names() {
        let job = pytorchjob(json!({"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}));
        let mut p = pytorch_pod(&job, "worker", 0);
        let q = |p: &Value, job: &Value, ns: Option<&Value>| {
            group_for(p, std::slice::from_ref(job), ns)
                .expect("g")
                .queue
        };
        assert_eq!(q(&p, &job, None), None);
        assert_eq!(q(&p, &job, Some(&namespace(None))), None);
        assert_eq!(
            q(&p, &job, Some(&namespace(Some("ns-q")))).as_deref(),
            Some("ns-q")
        );
        let mut labelled = job.clone();
        labelled["metadata"]["labels"] = json!({keys::KAI_QUEUE: "kai-q"});
        assert_eq!(
            q(&p, &labelled, Some(&namespace(Some("ns-q")))).as_deref(),
            Some("kai-q")
        );
        p["metadata"]["labels"][keys::QUEUE] = json!("pod-q");
        assert_eq!(q(&p, &labelled, None).as_deref(), Some("pod-q"));
        // No queue: the PodGroup takes the caller's.
        let g = group_for(&pytorch_pod(&job, "worker", 0), &[job], None).expect("g");
        assert_eq!(g.pod_group(Some("default"))["spec"]["queue"], "default");
        assert!(g.pod_group(None)["spec"].get("queue").is_none());

        // Names are DNS-1123 subdomains, also from long owner names.
        let long = OwnerRef {
            api_version: "kubeflow.org/v1".into(),
            kind: "PyTorchJob".into(),
            name: format!("{}-", "a".repeat(260)),
            uid: "ABCDEF12-3456".into(),
        };
        for suffix in ["", "-group-12"] {
            let n = group_name(&long, suffix);
            assert_eq!(dns1123_subdomain_problem(&n), None, "{n}");
            assert!(n.ends_with(&format!("-abcdef12{suffix}")), "{n}");
        }
    }
}
