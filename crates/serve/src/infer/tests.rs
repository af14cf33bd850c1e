//! Unit tests of the pure PodGroup inference: each known workload's chain,
//! minimums, walltimes, queues and names, and what is not grouped.

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
    // A Namespace Volcano users annotated: its queue, after Trainyard's
    // label.
    let mut volcano = namespace(None);
    volcano["metadata"]["annotations"] = json!({"scheduling.volcano.sh/queue-name": "vc-q"});
    assert_eq!(q(&p, &job, Some(&volcano)).as_deref(), Some("vc-q"));
    volcano["metadata"]["labels"] = json!({keys::NAMESPACE_DEFAULT_QUEUE: "ns-q"});
    assert_eq!(q(&p, &job, Some(&volcano)).as_deref(), Some("ns-q"));
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
