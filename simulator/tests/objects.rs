//! A Kubernetes object dump as a workload: an upstream
//! `scheduling.k8s.io/v1beta1` PodGroup gang, a Trainyard PodGroup gang
//! and a group-less pod, replayed on a small cluster.

use trainyard_model::{QueueSpec, QueueTree};
use trainyard_sched::Config;
use trainyard_sim::objects::{is_object_dump, parse_objects};
use trainyard_sim::spec::parse_cluster;
use trainyard_sim::{JobState, SimInput, SimOptions};

const DUMP: &str = r#"
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: upstream
  namespace: ml
  creationTimestamp: "2026-11-22T09:00:00Z"
  annotations: {trainyard.io/duration: 2h}
spec:
  schedulingPolicy: {gang: {minCount: 2}}
---
apiVersion: trainyard.io/v1alpha1
kind: PodGroup
metadata: {name: ours, namespace: ml, creationTimestamp: "2026-11-22T09:10:00Z"}
spec: {minMember: 2}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: upstream-0, namespace: ml}
  spec:
    schedulerName: trainyard
    schedulingGroup: {podGroupName: upstream}
    containers: [{name: c, resources: {requests: {cpu: "4", nvidia.com/gpu: "8"}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: upstream-1, namespace: ml}
  spec:
    schedulerName: trainyard
    schedulingGroup: {podGroupName: upstream}
    containers: [{name: c, resources: {requests: {cpu: "4", nvidia.com/gpu: "8"}}}]
- apiVersion: v1
  kind: Pod
  metadata:
    name: ours-0
    namespace: ml
    labels: {trainyard.io/pod-group: ours}
    annotations: {trainyard.io/duration: 30m}
  spec:
    schedulerName: trainyard
    containers: [{name: c, resources: {requests: {cpu: "4", nvidia.com/gpu: "4"}}}]
- apiVersion: v1
  kind: Pod
  metadata:
    name: ours-1
    namespace: ml
    labels: {trainyard.io/pod-group: ours}
  spec:
    schedulerName: trainyard
    containers: [{name: c, resources: {requests: {cpu: "4", nvidia.com/gpu: "4"}}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: solo, namespace: ml, creationTimestamp: "2026-11-22T09:20:00Z"}
  spec:
    schedulerName: trainyard
    containers: [{name: c, resources: {requests: {cpu: "2", nvidia.com/gpu: "1"}}}]
"#;

const CLUSTER: &str = "kind: ClusterSpec\nspec:\n  nodePools:\n  - {name: n, count: 2, cpu: \"64\", memory: 512Gi, gpu: {count: 8, model: H100}}\n";

#[test]
fn dump_of_upstream_and_trainyard_gangs_replays_them_whole() {
    assert!(is_object_dump(DUMP, "dump.yaml"));
    let w = parse_objects(DUMP, "dump.yaml", Some(3_600_000)).unwrap();
    let ids: Vec<&str> = w.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["ml/upstream", "ml/ours", "ml/solo"]);
    let by_id = |id: &str| w.jobs.iter().find(|j| j.id == id).unwrap();
    // Submit times relative to the earliest; durations from annotations
    // (group's, else the longest pod's), else the default.
    assert_eq!(by_id("ml/upstream").submit.0, 0);
    assert_eq!(by_id("ml/ours").submit.0, 600_000);
    assert_eq!(by_id("ml/solo").submit.0, 1_200_000);
    assert_eq!(by_id("ml/upstream").duration_ms, 7_200_000);
    assert_eq!(by_id("ml/ours").duration_ms, 1_800_000);
    assert_eq!(by_id("ml/solo").duration_ms, 3_600_000);
    assert_eq!(by_id("ml/upstream").min_member, 2);
    assert_eq!(by_id("ml/ours").min_member, 2);

    let cluster = parse_cluster(CLUSTER, "c.yaml").unwrap();
    let queues = QueueTree::build(vec![QueueSpec::new("default")]).unwrap();
    let input = SimInput {
        nodes: &cluster.nodes,
        queues: &queues,
        jobs: &w.jobs,
        faults: &[],
    };
    let out = trainyard_sim::simulate(
        input,
        &Config::default(),
        &SimOptions::default(),
        &mut |_| {},
    );
    let summary = out.summary();
    assert_eq!(summary.jobs, 3);
    assert_eq!(summary.completed, 3);
    assert_eq!(summary.rejected, 0);
    let rec = |id: &str| out.jobs.iter().find(|j| j.id == id).unwrap();
    // The upstream gang (2 × 8 GPUs) fills the cluster: it starts whole at
    // once, and the others wait for it.
    let up = rec("ml/upstream");
    assert_eq!(up.state, JobState::Completed);
    assert_eq!(up.start.map(|t| t.0), Some(0));
    assert_eq!(up.end.map(|t| t.0), Some(7_200_000));
    let ours = rec("ml/ours");
    assert!(ours.start.is_some_and(|s| s.0 >= 7_200_000));
    assert_eq!(
        ours.end.zip(ours.start).map(|(e, s)| e.0 - s.0),
        Some(1_800_000),
        "both pods of the gang start together and run 30m"
    );
}

#[test]
fn missing_duration_names_the_jobs_and_the_way_out() {
    let dump = DUMP.replace("annotations: {trainyard.io/duration: 2h}", "");
    let err = parse_objects(&dump, "dump.yaml", None)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "dump.yaml: 2 job(s) have no run time: ml/solo, ml/upstream; expected the annotation trainyard.io/duration (a duration such as \"2h\") on their PodGroup or pods, or give --default-duration"
    );
}

#[test]
fn missing_group_is_rejected_with_its_reason() {
    let dump = DUMP.replace("podGroupName: upstream", "podGroupName: gone");
    let w = parse_objects(&dump, "dump.yaml", Some(60_000)).unwrap();
    let gone = w.jobs.iter().find(|j| j.id == "ml/gone").unwrap();
    assert!(
        gone.rejected
            .as_deref()
            .is_some_and(|r| r.contains("waiting for PodGroup")),
        "{:?}",
        gone.rejected
    );
}

#[test]
fn workload_documents_are_not_dumps() {
    assert!(!is_object_dump(
        "apiVersion: trainyard.io/v1alpha1\nkind: Workload\nspec: {jobs: []}\n",
        "w.yaml"
    ));
    assert!(!is_object_dump(
        "kind: WorkloadGenerator\nspec: {}\n",
        "w.yaml"
    ));
}
