use std::sync::Arc;

use trainyard_model::{
    LabelSelectorOperator, ResourceName, TaintEffect, TaskState, Timestamp, TolerationOperator,
    TopologyConstraint,
};

use super::*;

fn load_one(text: &str) -> Result<Loaded, LoadErrors> {
    load(
        &[Source::new("cluster.yaml", text)],
        &LoadOptions::default(),
    )
}

fn errors_of(text: &str) -> String {
    match load_one(text) {
        Ok(l) => panic!("expected errors, got {:?}", l.warnings),
        Err(e) => e.to_string(),
    }
}

/// What `kubectl get nodes,pods -A -o yaml` prints, abridged.
const KUBECTL_LIST: &str = r#"
apiVersion: v1
items:
- apiVersion: v1
  kind: Node
  metadata:
    annotations:
      node.alpha.kubernetes.io/ttl: "0"
    creationTimestamp: "2025-06-01T10:00:00Z"
    labels:
      kubernetes.io/hostname: gpu-a1
      nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
      nvidia.com/gpu.memory: "81559"
      topology.kubernetes.io/zone: us-east-1a
    name: gpu-a1
    resourceVersion: "123456"
    uid: 6d3c1f2e-0000-4000-8000-000000000001
  spec:
    podCIDR: 10.0.1.0/24
    providerID: aws:///us-east-1a/i-0abc
    taints:
    - effect: NoSchedule
      key: nvidia.com/gpu
      value: present
    - effect: PreferNoSchedule
      key: spot
  status:
    addresses:
    - address: 10.0.1.5
      type: InternalIP
    allocatable:
      cpu: 191500m
      ephemeral-storage: "423797574979"
      hugepages-1Gi: "0"
      hugepages-2Mi: "0"
      memory: 2097152Ki
      nvidia.com/gpu: "8"
      pods: "110"
      rdma/ib: "4"
    capacity:
      cpu: "192"
      memory: 2113536Ki
      nvidia.com/gpu: "8"
    conditions:
    - lastHeartbeatTime: "2026-01-01T00:00:00Z"
      status: "True"
      type: Ready
    nodeInfo:
      kubeletVersion: v1.31.2
- apiVersion: v1
  kind: Pod
  metadata:
    annotations:
      scheduling.k8s.io/group-name: train-1
    creationTimestamp: "2024-01-01T00:00:10Z"
    labels:
      trainyard.io/queue: nlp
    name: train-1-worker-1
    namespace: ml
    uid: 11111111-0000-4000-8000-000000000001
  spec:
    schedulerName: trainyard
    priority: 100
    containers:
    - name: main
      image: nvcr.io/nvidia/pytorch:24.05-py3
      resources:
        limits:
          nvidia.com/gpu: "4"
          memory: 64Gi
        requests:
          cpu: "16"
          memory: 64Gi
      ports:
      - containerPort: 29500
        protocol: TCP
    tolerations:
    - key: nvidia.com/gpu
      operator: Exists
      effect: NoSchedule
    - effect: NoExecute
      key: node.kubernetes.io/not-ready
      operator: Exists
      tolerationSeconds: 300
  status:
    phase: Pending
    qosClass: Burstable
- apiVersion: v1
  kind: Pod
  metadata:
    annotations:
      scheduling.k8s.io/group-name: train-1
    creationTimestamp: "2024-01-01T00:00:05Z"
    labels:
      trainyard.io/queue: nlp
    name: train-1-worker-0
    namespace: ml
  spec:
    schedulerName: trainyard
    priority: 100
    containers:
    - name: main
      resources:
        limits:
          nvidia.com/gpu: "4"
        requests:
          cpu: "16"
    tolerations:
    - key: nvidia.com/gpu
      operator: Exists
      effect: NoSchedule
  status:
    phase: Pending
- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "2025-06-01T10:01:00Z"
    name: dcgm-exporter-x7k2p
    namespace: gpu-operator
    labels:
      app: nvidia-dcgm-exporter
  spec:
    containers:
    - name: exporter
      resources:
        requests:
          cpu: 100m
          memory: 128Mi
    nodeName: gpu-a1
    schedulerName: default-scheduler
  status:
    phase: Running
- apiVersion: v1
  kind: Pod
  metadata:
    name: old-job
    namespace: ml
  spec:
    schedulerName: trainyard
    nodeName: gpu-a1
    containers:
    - name: main
      resources:
        requests:
          nvidia.com/gpu: 8
  status:
    phase: Succeeded
kind: List
metadata:
  resourceVersion: ""
---
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata:
  name: research
spec:
  quota:
    nvidia.com/gpu: 8
    cpu: 128
---
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata:
  name: nlp
spec:
  parent: research
  quota:
    nvidia.com/gpu: 8
    cpu: 64
  limit:
    nvidia.com/gpu: 16
"#;

#[test]
fn kubectl_list_with_gpu_node_and_pods() {
    let loaded = load_one(KUBECTL_LIST).unwrap();
    let s = &loaded.snapshot;
    assert!(
        loaded.warnings.iter().all(|w| !w.contains("error")),
        "{:?}",
        loaded.warnings
    );

    assert_eq!(s.nodes.len(), 1);
    let n = &s.nodes[0];
    assert_eq!(n.name, "gpu-a1");
    assert_eq!(n.allocatable.cpu, 191_500);
    assert_eq!(n.allocatable.memory, 2_097_152 * 1024);
    assert_eq!(n.allocatable.gpu, 8000);
    assert_eq!(n.allocatable.get(&ResourceName::parse("rdma/ib")), 4);
    assert_eq!(
        n.allocatable.get(&ResourceName::parse("ephemeral-storage")),
        423_797_574_979
    );
    assert_eq!(
        n.allocatable.get(&ResourceName::parse("pods")),
        0,
        "pods is max_pods, not a resource"
    );
    assert_eq!(n.max_pods, Some(110));
    assert_eq!(n.gpus.len(), 8);
    assert_eq!(n.gpus[7].index, 7);
    assert_eq!(n.gpus[0].model, "NVIDIA-H100-80GB-HBM3");
    assert_eq!(n.gpus[0].memory_bytes, 81_559 << 20);
    assert_eq!(n.taints.len(), 2);
    assert_eq!(n.taints[0].effect, TaintEffect::NoSchedule);
    assert_eq!(n.taints[0].value, "present");
    assert_eq!(n.taints[1].effect, TaintEffect::PreferNoSchedule);
    assert!(!n.unschedulable);
    assert_eq!(n.labels["topology.kubernetes.io/zone"], "us-east-1a");

    assert_eq!(s.external.len(), 1);
    assert_eq!(s.external[0].name, "gpu-operator/dcgm-exporter-x7k2p");
    assert_eq!(s.external[0].node, "gpu-a1");
    assert_eq!(s.external[0].requests.cpu, 100);
    assert_eq!(s.external[0].requests.memory, 128 << 20);
    assert_eq!(s.external[0].gpus, None);

    assert_eq!(s.jobs.len(), 1, "the Succeeded pod is ignored");
    let j = &s.jobs[0];
    assert_eq!(j.id, "ml/train-1");
    assert_eq!(j.queue, "nlp");
    assert_eq!(j.priority, 100);
    assert_eq!(j.min_member, 2, "no PodGroup document: all pods");
    assert_eq!(j.submit_time, Timestamp(1_704_067_205_000), "earliest pod");
    assert_eq!(j.rejected, None);
    let names: Vec<&str> = j.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["ml/train-1-worker-0", "ml/train-1-worker-1"]);
    assert!(j.tasks.iter().all(|t| t.state == TaskState::Pending));
    assert_eq!(
        j.tasks[0].requests.gpu, 4000,
        "limit without request counts as request"
    );
    assert_eq!(j.tasks[0].requests.cpu, 16_000);
    assert_eq!(j.tasks[1].requests.memory, 64 << 30);
    let tol = &j.tasks[0].constraints.tolerations[0];
    assert_eq!(
        (tol.operator, tol.effect),
        (TolerationOperator::Exists, Some(TaintEffect::NoSchedule))
    );
    assert_eq!(j.tasks[1].constraints.tolerations.len(), 2);
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("PodGroup ml/train-1 is named by pods")
                && w.contains("using minMember 2")),
        "{:?}",
        loaded.warnings
    );

    let nlp = s.queues.get("nlp").unwrap();
    assert_eq!(s.queues.spec(nlp).quota.cpu, 64_000);
    assert_eq!(
        s.queues.spec(nlp).limit.get(&ResourceName::Gpu),
        Some(16_000)
    );
    assert!(
        s.queues.get("default").is_none(),
        "default queue not used, not created"
    );
}

#[test]
fn typed_list_items_inherit_kind() {
    let text = r#"{"apiVersion": "v1", "kind": "NodeList", "items": [
        {"metadata": {"name": "b"}, "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}}},
        {"metadata": {"name": "a"}, "spec": {"unschedulable": true}}
    ]}"#;
    let s = load_one(text).unwrap().snapshot;
    let names: Vec<&str> = s.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(s.nodes[0].unschedulable);
    assert_eq!(s.nodes[1].allocatable.cpu, 4000);
    assert!(s.nodes[1].gpus.is_empty());
}

fn pod(name: &str, extra_meta: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: ml\n{extra_meta}spec:\n  schedulerName: trainyard\n{spec}"
    )
}

#[test]
fn init_containers_sidecars_and_overhead() {
    let text = pod(
        "p",
        "",
        r#"  overhead: {cpu: 250m, memory: 1Mi}
  initContainers:
  - name: fetch
    resources: {requests: {cpu: "8", memory: 1Gi}}
  - name: sidecar
    restartPolicy: Always
    resources: {requests: {cpu: "1"}}
  - name: late-init
    resources: {limits: {cpu: "2", memory: 8Gi}}
  containers:
  - name: a
    resources: {requests: {cpu: "2", memory: 2Gi}}
  - name: b
    resources: {limits: {cpu: "3", nvidia.com/gpu: 1}}
"#,
    );
    let s = load_one(&text).unwrap().snapshot;
    let r = &s.jobs[0].tasks[0].requests;
    // cpu: max(2 + 3 + 1 sidecar = 6, init 8, sidecar 1 + 2 = 3) + 0.25
    assert_eq!(r.cpu, 8_250);
    // memory: max(2Gi, 1Gi, 8Gi) + 1Mi
    assert_eq!(r.memory, (8 << 30) + (1 << 20));
    assert_eq!(r.gpu, 1000);
    let j = &s.jobs[0];
    assert_eq!(
        (j.id.as_str(), j.min_member, j.queue.as_str()),
        ("ml/p", 1, "default")
    );
    assert!(
        s.queues.get("default").is_some(),
        "default queue is implicit"
    );
    assert_eq!(j.rejected, None);
}

#[test]
fn unsupported_and_soft_constraints() {
    let text = pod(
        "p",
        "",
        r#"  containers:
  - name: a
    ports: [{containerPort: 80, hostPort: 8080}]
  resourceClaims: [{name: gpu, resourceClaimName: c}]
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: zone}
  - {maxSkew: 1, topologyKey: host, whenUnsatisfiable: ScheduleAnyway}
  nodeSelector: {pool: train}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: gen, operator: Gt, values: ["8"]}
          matchFields:
          - {key: metadata.name, operator: NotIn, values: [bad-node]}
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 1
        preference: {matchExpressions: [{key: a, operator: Exists}]}
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {topologyKey: host, labelSelector: {matchLabels: {app: x}}}
    podAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - {weight: 1, podAffinityTerm: {topologyKey: host}}
"#,
    );
    let loaded = load_one(&text).unwrap();
    let c = &loaded.snapshot.jobs[0].tasks[0].constraints;
    assert_eq!(
        c.unsupported,
        [
            "podAntiAffinity (required)",
            "topologySpreadConstraints (DoNotSchedule)",
            "hostPort",
            "resourceClaims (dynamic resource allocation)"
        ]
    );
    assert_eq!(c.node_selector["pool"], "train");
    let term = &c.required_affinity[0];
    assert_eq!(
        term.match_expressions[0].operator,
        LabelSelectorOperator::Gt
    );
    assert_eq!(term.match_fields[0].values, ["bad-node"]);
    let w = loaded.warnings.join("\n");
    assert!(
        w.contains("cluster.yaml: document 1: Pod ml/p: ignored: preferred node affinity, podAffinity (preferred), topologySpreadConstraints (ScheduleAnyway)"),
        "{w}"
    );
}

#[test]
fn podgroup_subgroups_priority_and_bound_tasks() {
    let text = format!(
        r#"apiVersion: trainyard.io/v1alpha1
kind: PodGroup
metadata: {{name: g, namespace: ml, creationTimestamp: "2024-01-01T00:00:00Z"}}
spec:
  minMember: 3
  queue: nlp
  priorityClassName: high
  subGroups: [{{name: ps, minMember: 1}}, {{name: workers, minMember: 2}}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: high}}
value: 1000
---
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata: {{name: nlp}}
---
{}
---
{}
---
{}
"#,
        pod(
            "w1",
            "  labels: {trainyard.io/pod-group: g, trainyard.io/sub-group: workers}\n  annotations: {trainyard.io/gpu-indices: \"2,3\"}\n",
            "  nodeName: n1\n  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 2}}}]\n"
        ),
        pod(
            "w0",
            "  labels: {trainyard.io/pod-group: g, trainyard.io/sub-group: workers}\n",
            "  containers: []\n"
        ),
        pod(
            "ps",
            "  annotations: {trainyard.io/pod-group: g, trainyard.io/sub-group: ps}\n",
            "  containers: []\n"
        ),
    );
    let loaded = load_one(&text).unwrap();
    let j = &loaded.snapshot.jobs[0];
    assert_eq!(j.id, "ml/g");
    assert_eq!(j.queue, "nlp");
    assert_eq!(j.min_member, 3);
    assert_eq!(j.priority, 1000);
    assert_eq!(j.submit_time, Timestamp(1_704_067_200_000));
    assert_eq!(j.subgroups.len(), 2);
    let names: Vec<&str> = j.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["ml/ps", "ml/w0", "ml/w1"]);
    assert_eq!(j.tasks[0].subgroup.as_deref(), Some("ps"));
    assert_eq!(
        j.tasks[2].state,
        TaskState::Bound {
            node: "n1".into(),
            gpus: Some(vec![2, 3])
        }
    );
    assert!(
        Arc::ptr_eq(&j.tasks[0].constraints, &j.tasks[2].constraints),
        "constraints are shared"
    );
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn queue_rejections_and_priority_fallbacks() {
    let text = format!(
        r#"apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata: {{name: research}}
---
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata: {{name: nlp}}
spec: {{parent: research}}
---
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata: {{name: cv}}
spec: {{parent: research}}
---
{}
---
{}
---
{}
"#,
        pod(
            "a",
            "  labels: {kai.scheduler/queue: research}\n",
            "  priorityClassName: nope\n  containers: []\n"
        ),
        pod(
            "b",
            "  labels: {volcano.sh/queue-name: missing}\n",
            "  priorityClassName: system-node-critical\n  containers: []\n"
        ),
        pod(
            "c",
            "  labels: {trainyard.io/queue: cv, volcano.sh/queue-name: nlp}\n",
            "  containers: []\n"
        ),
    );
    let loaded = load_one(&text).unwrap();
    let jobs = &loaded.snapshot.jobs;
    assert_eq!(
        jobs[0].rejected.as_deref(),
        Some(
            "queue \"research\" is not a leaf queue (children: cv, nlp); submit jobs to a leaf queue"
        )
    );
    assert_eq!(jobs[0].priority, 0);
    assert_eq!(
        jobs[1].rejected.as_deref(),
        Some("queue \"missing\" does not exist")
    );
    assert_eq!(jobs[1].priority, 2_000_001_000);
    assert_eq!(jobs[2].queue, "cv");
    assert_eq!(jobs[2].rejected, None);
    let w = loaded.warnings.join("\n");
    assert!(w.contains("cluster.yaml: document 4: Pod ml/a: priorityClassName \"nope\" is not defined by any PriorityClass document; treated as unset"), "{w}");
    assert!(w.contains("Pod ml/c: queue names disagree (trainyard.io/queue=\"cv\", volcano.sh/queue-name=\"nlp\"); using \"cv\""), "{w}");
}

#[test]
fn foreign_pods_external_and_ignored() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: v0, namespace: ml, annotations: {trainyard.io/gpu-indices: "0,1"}}
  spec: {schedulerName: volcano, nodeName: n1, containers: [{name: a, resources: {limits: {nvidia.com/gpu: 2}}}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: v1, namespace: ml}
  spec: {schedulerName: volcano, containers: []}
- apiVersion: v1
  kind: Pod
  metadata: {name: v2, namespace: ml}
  spec: {containers: []}
- apiVersion: v1
  kind: Pod
  metadata: {name: done, namespace: ml}
  spec: {nodeName: n1, containers: []}
  status: {phase: Failed}
- apiVersion: v1
  kind: Service
  metadata: {name: s1}
- apiVersion: v1
  kind: Service
  metadata: {name: s2}
"#;
    let loaded = load_one(text).unwrap();
    let s = &loaded.snapshot;
    assert!(s.jobs.is_empty());
    assert_eq!(s.external.len(), 1);
    assert_eq!(s.external[0].gpus, Some(vec![0, 1]));
    assert_eq!(s.external[0].requests.gpu, 2000);
    assert_eq!(
        loaded.warnings,
        [
            "cluster.yaml: document 1: skipped 2 objects of kind Service (not used by Trainyard)",
            "ignored 2 pending pod(s) of other schedulers (schedulerName is not \"trainyard\"): ml/v1, ml/v2",
        ]
    );
}

#[test]
fn missing_kind_and_api_version() {
    let text = "apiVersion: v1\nmetadata: {name: x}\n---\nkind: Pod\nmetadata: {name: y}\n---\n- 1\n---\napiVersion: v1\nkind: 7\n";
    let e = errors_of(text);
    assert_eq!(
        e,
        "cluster.yaml: document 1: object \"x\": kind: missing; expected the object's kind, such as Node, Pod, PriorityClass, Queue, PodGroup, Topology or List\n\
         cluster.yaml: document 2: Pod default/y: apiVersion: missing; expected \"v1\"\n\
         cluster.yaml: document 3: expected a Kubernetes object (a mapping with apiVersion and kind), found a sequence\n\
         cluster.yaml: document 4: kind: expected a string such as \"Pod\", found 7"
    );
}

#[test]
fn bad_quantity_names_field_path() {
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: p, namespace: ml}
  spec:
    schedulerName: trainyard
    containers:
    - name: a
      resources: {requests: {cpu: 12x, memory: "-1Gi"}}
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status: {allocatable: {nvidia.com/gpu: "1.5", cpu: lots}}
"#;
    let e = errors_of(text);
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 4, "{e}");
    assert!(lines[0].starts_with(
        "cluster.yaml: document 1: Pod ml/p: items[0].spec.containers[0].resources.requests.cpu: invalid quantity \"12x\"; expected a number"
    ), "{e}");
    assert_eq!(
        lines[1],
        "cluster.yaml: document 1: Pod ml/p: items[0].spec.containers[0].resources.requests.memory: quantity \"-1Gi\" is negative; expected an amount of zero or more"
    );
    assert!(lines[2].starts_with("cluster.yaml: document 1: Node n1: items[1].status.allocatable.cpu: invalid quantity \"lots\""), "{e}");
    assert_eq!(
        lines[3],
        "cluster.yaml: document 1: Node n1: items[1].status.allocatable.nvidia.com/gpu: quantity \"1.5\" is not a whole number; expected an integer count of GPU devices"
    );
}

#[test]
fn unknown_taint_effect_and_affinity_operator() {
    let text = format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: n1}}\nspec:\n  taints: [{{key: a, effect: NoWay}}]\n---\n{}",
        pod(
            "p",
            "",
            "  containers: []\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchExpressions: [{key: a, operator: Exists}, {key: b, operator: Like, values: [x]}]\n  tolerations: [{key: a, operator: Maybe}]\n"
        )
    );
    let e = errors_of(&text);
    assert_eq!(
        e,
        "cluster.yaml: document 1: Node n1: spec.taints[0].effect: unknown taint effect \"NoWay\"; expected NoSchedule, PreferNoSchedule or NoExecute\n\
         cluster.yaml: document 2: Pod ml/p: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].operator: unknown operator \"Like\"; expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt"
    );
}

#[test]
fn yaml_syntax_error_names_file_and_line() {
    let e = load(
        &[
            Source::new(
                "good.yaml",
                "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {unschedulable: true}\n",
            ),
            Source::new(
                "nodes/bad.yaml",
                "apiVersion: v1\nkind: Node\nmetadata: {name: [unclosed\n",
            ),
        ],
        &LoadOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("nodes/bad.yaml: invalid YAML: "), "{e}");
    assert!(e.contains("line"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn duplicates_name_both_files() {
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n";
    let e = load(
        &[
            Source::new("a.yaml", node),
            Source::new("b.yaml", format!("---\n{node}")),
        ],
        &LoadOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "b.yaml: document 1: Node n1: defined more than once: first in a.yaml: document 1, again in b.yaml: document 1"
    );
}

#[test]
fn group_conflicts_and_bad_subgroups() {
    let text = format!(
        "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: g, namespace: ml}}\nspec: {{subGroups: [{{name: workers}}]}}\n---\n{}\n---\n{}\n---\n{}",
        pod(
            "a",
            "  labels: {trainyard.io/pod-group: g, trainyard.io/queue: q1}\n",
            "  containers: []\n"
        ),
        pod(
            "b",
            "  labels: {trainyard.io/pod-group: g, trainyard.io/queue: q2, trainyard.io/sub-group: ps}\n",
            "  containers: []\n"
        ),
        pod(
            "c",
            "  annotations: {trainyard.io/sub-group: x, trainyard.io/gpu-indices: \"0,zero\"}\n",
            "  containers: []\n"
        ),
    );
    let e = errors_of(&text);
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(
        lines,
        [
            "cluster.yaml: document 4: Pod ml/c: metadata.annotations.trainyard.io/gpu-indices: \"0,zero\" is not a list of GPU indices; expected comma-separated device indices such as \"0,1,2,3\"",
            "cluster.yaml: document 1: PodGroup ml/g: pods of group \"g\" name different queues: \"q1\" (ml/a), \"q2\" (ml/b); expected one queue per group",
            "cluster.yaml: document 3: Pod ml/b: metadata.labels.trainyard.io/sub-group: unknown sub-group \"ps\": PodGroup ml/g defines only \"workers\"",
        ],
        "{e}"
    );
}

#[test]
fn queue_errors_name_queues() {
    let text = r#"
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata: {name: org}
spec: {quota: {nvidia.com/gpu: 4}}
---
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata: {name: a}
spec: {parent: org, quota: {nvidia.com/gpu: 8}}
---
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata: {name: b}
spec: {parent: bad, quota: {cpu: 1}}
---
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata: {name: bad}
spec: {quota: {cpu: 1x}, limits: {}}
"#;
    let e = errors_of(text);
    assert!(
        e.contains("cluster.yaml: document 4: Queue bad: spec.limits: unknown field `limits`"),
        "{e}"
    );
    let e = errors_of(&text.replace(", limits: {}", ""));
    assert_eq!(
        e,
        "cluster.yaml: document 4: Queue bad: spec.quota.cpu: invalid quantity \"1x\"; expected a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent (e.g. 1e3), such as \"500m\", \"8\" or \"64Gi\"\n\
         cluster.yaml: document 1: Queue org: spec.quota.nvidia.com/gpu: children of queue \"org\" (a) have quotas summing to 8 nvidia.com/gpu, above the parent's quota of 4"
    );
}

#[test]
fn bad_timestamp_and_wrong_api_version() {
    let text = format!(
        "{}---\napiVersion: apps/v1\nkind: Pod\nmetadata: {{name: q}}\n",
        pod(
            "p",
            "  creationTimestamp: yesterday\n",
            "  containers: []\n"
        )
    );
    let e = errors_of(&text);
    assert_eq!(
        e,
        "cluster.yaml: document 1: Pod ml/p: metadata.creationTimestamp: invalid timestamp \"yesterday\" (year is not a number); expected RFC 3339 such as \"2024-01-01T00:00:00Z\"\n\
         cluster.yaml: document 2: Pod default/q: apiVersion: expected \"v1\" for kind Pod, found \"apps/v1\""
    );
}

#[test]
fn json_input_and_volcano_podgroup() {
    let text = r#"{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "vg", "namespace": "ml", "creationTimestamp": "2024-01-01T00:00:01Z"},
        "spec": {"minMember": 2, "queue": "vq", "minResources": {"cpu": "1"}}}"#;
    let p = pod(
        "x",
        "  annotations: {scheduling.k8s.io/group-name: vg}\n",
        "  containers: []\n",
    );
    let loaded = load(
        &[Source::new("pg.json", text), Source::new("pods.yaml", p)],
        &LoadOptions {
            default_queue: "dq".into(),
            scheduler_name: "trainyard".into(),
        },
    )
    .unwrap();
    let j = &loaded.snapshot.jobs[0];
    assert_eq!(
        (j.id.as_str(), j.min_member, j.queue.as_str()),
        ("ml/vg", 2, "vq")
    );
    assert_eq!(j.submit_time, Timestamp(1_704_067_201_000));
    assert_eq!(j.rejected.as_deref(), Some("queue \"vq\" does not exist"));
    assert!(loaded.snapshot.queues.get("dq").is_none());
}

fn warnings_of(text: &str) -> Vec<String> {
    match load_one(text) {
        Ok(l) => l.warnings,
        Err(e) => panic!("expected no errors, got:\n{e}"),
    }
}

const PG_HEAD: &str = "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\n";

#[test]
fn podgroup_without_pods_is_warned_about_and_still_checked() {
    let text = format!(
        "{PG_HEAD}metadata: {{name: lonely, namespace: ml}}\nspec: {{queue: nlp}}\n---\n{PG_HEAD}metadata: {{name: used, namespace: ml}}\n---\n{}",
        pod(
            "p",
            "  labels: {trainyard.io/pod-group: used}\n",
            "  containers: []\n"
        )
    );
    assert_eq!(
        warnings_of(&text),
        ["cluster.yaml: document 1: PodGroup ml/lonely has no pods; ignored"]
    );
    // Its fields are checked like those of any other object.
    let bad = format!(
        "{PG_HEAD}metadata: {{name: lonely, namespace: ml, creationTimestamp: yesterday}}\nspec: {{minMember: 0}}\n"
    );
    assert_eq!(
        errors_of(&bad),
        "cluster.yaml: document 1: PodGroup ml/lonely: spec.minMember: expected a whole number from 1 to 2147483647, found 0\n\
         cluster.yaml: document 1: PodGroup ml/lonely: metadata.creationTimestamp: invalid timestamp \"yesterday\" (year is not a number); expected RFC 3339 such as \"2024-01-01T00:00:00Z\""
    );
}

fn bound_gpu_pod(name: &str, indices: &str, gpus: &str) -> String {
    pod(
        name,
        &format!("  annotations: {{trainyard.io/gpu-indices: \"{indices}\"}}\n"),
        &format!(
            "  nodeName: n1\n  containers: [{{name: c, resources: {{limits: {{nvidia.com/gpu: \"{gpus}\"}}}}}}]\n"
        ),
    )
}

fn bound_gpus(loaded: &Loaded, task: &str) -> Option<Vec<u32>> {
    let t = loaded
        .snapshot
        .jobs
        .iter()
        .flat_map(|j| &j.tasks)
        .find(|t| t.name == task)
        .unwrap();
    match &t.state {
        TaskState::Bound { gpus, .. } => gpus.clone(),
        TaskState::Pending => panic!("{task} is pending"),
    }
}

#[test]
fn gpu_indices_must_fit_the_request() {
    let text = [
        bound_gpu_pod("ok", "3, 1", "2"),
        bound_gpu_pod("few", "0,1", "4"),
        bound_gpu_pod("dup", "5,5", "2"),
        bound_gpu_pod("share", "6", "0.5"),
        bound_gpu_pod("share2", "6,7", "0.5"),
        bound_gpu_pod("none", "4", "0"),
        bound_gpu_pod("empty", "", "1"),
        pod(
            "pending",
            "  annotations: {trainyard.io/gpu-indices: \"1,1\"}\n",
            "  containers: []\n",
        ),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    assert_eq!(bound_gpus(&loaded, "ml/ok"), Some(vec![1, 3]));
    assert_eq!(bound_gpus(&loaded, "ml/share"), Some(vec![6]));
    for unknown in ["ml/few", "ml/dup", "ml/share2", "ml/none", "ml/empty"] {
        assert_eq!(bound_gpus(&loaded, unknown), None, "{unknown}");
    }
    let tail = "the pod's devices are taken as unknown and Trainyard assigns them";
    assert_eq!(
        loaded.warnings,
        [
            format!(
                "cluster.yaml: document 2: Pod ml/few: annotation trainyard.io/gpu-indices=\"0,1\" names 2 GPU(s); expected 4 (the pod requests nvidia.com/gpu 4); {tail}"
            ),
            format!(
                "cluster.yaml: document 3: Pod ml/dup: annotation trainyard.io/gpu-indices=\"5,5\" lists GPU 5 twice; expected distinct indices; {tail}"
            ),
            format!(
                "cluster.yaml: document 5: Pod ml/share2: annotation trainyard.io/gpu-indices=\"6,7\" names 2 GPU(s); expected 1 (the pod requests nvidia.com/gpu 0.5, a share of one device); {tail}"
            ),
            format!(
                "cluster.yaml: document 6: Pod ml/none: annotation trainyard.io/gpu-indices=\"4\" names 1 GPU(s); expected none (the pod requests no nvidia.com/gpu); {tail}"
            ),
        ]
    );
}

#[test]
fn bad_spread_mode_and_empty_required_affinity() {
    let text = pod(
        "p",
        "",
        "  containers: []\n  topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotScheduel}]\n---\n",
    ) + &pod(
        "q",
        "",
        "  containers: []\n  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}}}\n",
    );
    assert_eq!(
        errors_of(&text),
        "cluster.yaml: document 1: Pod ml/p: spec.topologySpreadConstraints[0].whenUnsatisfiable: unknown whenUnsatisfiable \"DoNotScheduel\"; expected DoNotSchedule or ScheduleAnyway\n\
         cluster.yaml: document 2: Pod ml/q: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: must not be empty: the Kubernetes API rejects a required node affinity without terms; expected at least one term (or leave out requiredDuringSchedulingIgnoredDuringExecution)"
    );
}

#[test]
fn null_spec_is_empty_and_type_errors_name_no_rust_types() {
    let text = format!(
        "apiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {{name: default}}\nspec:\n---\n{PG_HEAD}metadata: {{name: g, namespace: ml}}\nspec:\n---\n{}",
        pod(
            "p",
            "  labels: {trainyard.io/pod-group: g}\n",
            "  containers: []\n"
        )
    );
    let loaded = load_one(&text).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let j = &loaded.snapshot.jobs[0];
    assert_eq!((j.queue.as_str(), j.min_member), ("default", 1));

    let text = format!(
        "apiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {{name: a}}\nspec: nope\n---\napiVersion: v1\nkind: Node\nmetadata: {{name: n}}\nspec: {{taints: [null]}}\n---\n{}",
        pod("p", "", "  priority: high\n  containers: []\n")
    );
    let e = errors_of(&text);
    assert_eq!(
        e,
        "cluster.yaml: document 1: Queue a: spec: expected a mapping, found \"nope\"\n\
         cluster.yaml: document 2: Node n: spec.taints[0]: expected a mapping, found null\n\
         cluster.yaml: document 3: Pod ml/p: spec.priority: expected a whole number from -2147483648 to 2147483647, found \"high\""
    );
}

#[test]
fn group_queue_and_priority_warnings_name_their_source() {
    let text = format!(
        "{PG_HEAD}metadata: {{name: g, namespace: ml}}\nspec: {{queue: cv, priorityClassName: gold}}\n---\n{}---\n{}---\n{}",
        pod(
            "a",
            "  labels: {trainyard.io/pod-group: g, trainyard.io/queue: nlp}\n",
            "  containers: []\n"
        ),
        pod(
            "b",
            "  labels: {trainyard.io/pod-group: h}\n",
            "  priorityClassName: gold\n  containers: []\n"
        ),
        pod(
            "c",
            "  labels: {trainyard.io/pod-group: h}\n",
            "  containers: []\n"
        ),
    );
    assert_eq!(
        warnings_of(&text),
        [
            "cluster.yaml: document 1: PodGroup ml/g: its pods name queue \"nlp\" but its spec.queue is \"cv\"; using \"nlp\"",
            "cluster.yaml: document 3: Pod ml/b: PodGroup ml/h is named by pods (ml/b, ml/c) but no PodGroup document defines it; using minMember 2 (all its pods)",
            "cluster.yaml: document 1: PodGroup ml/g: priorityClassName \"gold\" is not defined by any PriorityClass document; treated as unset (also used by Pod ml/b)",
        ]
    );
}

#[test]
fn label_and_annotation_disagreeing_on_one_key() {
    let text = pod(
        "p",
        "  labels: {trainyard.io/queue: cv, trainyard.io/pod-group: g}\n  annotations: {trainyard.io/queue: nlp, trainyard.io/pod-group: g}\n",
        "  containers: []\n",
    );
    let loaded = load_one(&text).unwrap();
    assert_eq!(loaded.snapshot.jobs[0].queue, "cv");
    assert_eq!(
        loaded.warnings,
        [
            "cluster.yaml: document 1: Pod ml/p: label trainyard.io/queue=\"cv\" and annotation trainyard.io/queue=\"nlp\" differ; using the label's \"cv\"",
            "cluster.yaml: document 1: Pod ml/p: PodGroup ml/g is named by pods (ml/p) but no PodGroup document defines it; using minMember 1 (all its pods)",
        ]
    );
}

#[test]
fn queue_names_on_pods_are_checked() {
    let text = pod(
        "p",
        "  annotations: {trainyard.io/queue: Team_A}\n",
        "  containers: []\n",
    ) + "---\n"
        + &pod(
            "q",
            "  labels: {kai.scheduler/queue: -x}\n",
            "  containers: []\n",
        );
    assert_eq!(
        errors_of(&text),
        "cluster.yaml: document 1: Pod ml/p: metadata.annotations.trainyard.io/queue: invalid queue name: \"Team_A\" is not a valid DNS-1123 subdomain; expected lowercase letters, digits, '-' and '.', starting and ending with a letter or digit\n\
         cluster.yaml: document 2: Pod ml/q: metadata.labels.kai.scheduler/queue: invalid queue name: \"-x\" is not a valid DNS-1123 subdomain; expected lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
    );
}

#[test]
fn scheduling_gates_runtime_class_and_pvc_volumes() {
    let spec = r#"  runtimeClassName: nvidia
  schedulingGates: [{name: gate-a}, {name: gate-b}]
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data-pvc}}
  - {name: scratch, emptyDir: {}}
  containers: [{name: c, volumeMounts: [{name: data, mountPath: /data}]}]
"#;
    let text = [
        pod("gated", "", spec),
        // Bound: not placed by Trainyard, so no warnings.
        pod(
            "bound",
            "",
            "  nodeName: n1\n  runtimeClassName: nvidia\n  volumes: [{name: data, persistentVolumeClaim: {claimName: c}}]\n  containers: []\n",
        ),
        // Another scheduler's pod: its placement fields are not used.
        "apiVersion: v1\nkind: Pod\nmetadata: {name: ext, namespace: ml}\nspec:\n  nodeName: n1\n  runtimeClassName: kata\n  schedulingGates: [{name: g}]\n  volumes: [{name: v, persistentVolumeClaim: {claimName: c}}]\n".to_string(),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    let gated = loaded
        .snapshot
        .jobs
        .iter()
        .find(|j| j.id == "ml/gated")
        .unwrap();
    assert_eq!(
        gated.tasks[0].constraints.unsupported,
        ["schedulingGates [gate-a, gate-b] (pod is not ready for scheduling)"]
    );
    assert_eq!(
        loaded.warnings,
        [
            "cluster.yaml: document 1: Pod ml/gated: runtimeClassName nvidia ignored: its RuntimeClass node scheduling is not read",
            "cluster.yaml: document 1: Pod ml/gated: volume data uses persistentVolumeClaim data-pvc: PVC volume topology/node affinity is not checked",
        ]
    );
    // Soft fields alone keep the pod placeable.
    let soft = pod(
        "soft",
        "",
        "  runtimeClassName: nvidia\n  volumes: [{name: d, persistentVolumeClaim: {claimName: d}}]\n  containers: []\n",
    );
    let loaded = load_one(&soft).unwrap();
    assert!(
        loaded.snapshot.jobs[0].tasks[0]
            .constraints
            .unsupported
            .is_empty()
    );
    assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);

    let bad = pod(
        "p",
        "",
        "  schedulingGates: [{name: \"\"}]\n  volumes: [{name: d, persistentVolumeClaim: {readOnly: true}}]\n  containers: []\n",
    );
    assert_eq!(
        errors_of(&bad),
        "cluster.yaml: document 1: Pod ml/p: spec.schedulingGates[0].name: missing; expected the gate's name, such as example.com/quota-check\n\
         cluster.yaml: document 1: Pod ml/p: spec.volumes[0].persistentVolumeClaim.claimName: missing; expected the name of a PersistentVolumeClaim in the pod's namespace"
    );
}

#[test]
fn node_gpu_count_is_capped() {
    let node = |name: &str, gpus: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\nstatus: {{allocatable: {{nvidia.com/gpu: \"{gpus}\"}}}}\n"
        )
    };
    let loaded = load_one(&node("max", "1024")).unwrap();
    assert_eq!(loaded.snapshot.nodes[0].gpus.len(), 1024);
    assert_eq!(loaded.snapshot.nodes[0].allocatable.gpu, 1_024_000);

    let text = [
        node("a", "1025"),
        node("b", "4000000000"),
        node("c", "1e30"),
        node("d", "16Ei"),
    ]
    .join("---\n");
    assert_eq!(
        errors_of(&text),
        "cluster.yaml: document 1: Node a: status.allocatable.nvidia.com/gpu: expected at most 1024 GPUs per node, got 1025\n\
         cluster.yaml: document 2: Node b: status.allocatable.nvidia.com/gpu: expected at most 1024 GPUs per node, got 4000000000\n\
         cluster.yaml: document 3: Node c: status.allocatable.nvidia.com/gpu: expected at most 1024 GPUs per node, got 1e30\n\
         cluster.yaml: document 4: Node d: status.allocatable.nvidia.com/gpu: expected at most 1024 GPUs per node, got 16Ei"
    );
}

#[test]
fn node_affinity_requirements_are_validated() {
    let text = pod(
        "p",
        "",
        r#"  containers: []
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - {key: zone, operator: In, values: [a]}
          - {key: zone, operator: In, values: []}
          - {key: pool, operator: NotIn}
          - {key: gpu, operator: Exists, values: [x]}
          - {key: spot, operator: DoesNotExist, values: [y, z]}
        - matchExpressions:
          - {key: gen, operator: Gt, values: []}
          - {key: gen, operator: Lt, values: ["1", "2"]}
          - {key: gen, operator: Gt, values: [eight]}
          - {key: gen, operator: Lt, values: ["9"]}
          matchFields:
          - {key: metadata.name, operator: In, values: [n1]}
          - {key: metadata.labels, operator: In, values: [n1]}
"#,
    );
    let terms = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    let expected = [
        format!(
            "{terms}[0].matchExpressions[1].values: must not be empty for operator In; expected at least one value"
        ),
        format!(
            "{terms}[0].matchExpressions[2].values: must not be empty for operator NotIn; expected at least one value"
        ),
        format!(
            "{terms}[0].matchExpressions[3].values: must be empty for operator Exists, found [\"x\"]; expected no values"
        ),
        format!(
            "{terms}[0].matchExpressions[4].values: must be empty for operator DoesNotExist, found [\"y\", \"z\"]; expected no values"
        ),
        format!(
            "{terms}[1].matchExpressions[0].values: expected exactly one integer value for operator Gt, found 0 value(s) []"
        ),
        format!(
            "{terms}[1].matchExpressions[1].values: expected exactly one integer value for operator Lt, found 2 value(s) [\"1\", \"2\"]"
        ),
        format!(
            "{terms}[1].matchExpressions[2].values[0]: \"eight\" is not an integer; expected one whole number for operator Gt, such as \"8\""
        ),
        format!(
            "{terms}[1].matchFields[1].key: unsupported field selector key \"metadata.labels\"; expected \"metadata.name\", the only node field matchFields may use"
        ),
    ]
    .map(|e| format!("cluster.yaml: document 1: Pod ml/p: {e}"))
    .join("\n");
    assert_eq!(errors_of(&text), expected);
}

// --- GPU-sharing annotations (docs/gpu-sharing-requests.md) ---------------

const GIB: u64 = 1 << 30;

fn gpu_node(name: &str, gpus: u32, product: &str, memory_mib: Option<&str>) -> String {
    let memory = memory_mib
        .map(|m| format!(", nvidia.com/gpu.memory: \"{m}\""))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{nvidia.com/gpu.product: {product}{memory}}}}}\nstatus: {{allocatable: {{nvidia.com/gpu: \"{gpus}\"}}}}\n"
    )
}

/// A Trainyard pod with `annotations` (a YAML flow mapping body) and `spec`.
fn annotated_pod(name: &str, annotations: &str, spec: &str) -> String {
    pod(name, &format!("  annotations: {{{annotations}}}\n"), spec)
}

fn task<'a>(loaded: &'a Loaded, name: &str) -> &'a trainyard_model::Task {
    loaded
        .snapshot
        .jobs
        .iter()
        .flat_map(|j| &j.tasks)
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no task {name}"))
}

#[test]
fn gpu_sharing_annotations_set_requests_and_constraints() {
    const NO_GPU: &str = "  containers: [{name: c}]\n";
    // Pods first, nodes last: nominal shares need every node, in any order.
    let text = [
        annotated_pod("frac", "gpu-fraction: \"0.5\"", NO_GPU),
        annotated_pod("frac-one", "trainyard.io/gpu-fraction: \"1\"", NO_GPU),
        annotated_pod(
            "frac-both",
            "gpu-fraction: \"0.250\", trainyard.io/gpu-fraction: \".25\"",
            NO_GPU,
        ),
        annotated_pod("mem-kai", "gpu-memory: \"20480\"", NO_GPU),
        annotated_pod("mem-quantity", "trainyard.io/gpu-memory: 30Gi", NO_GPU),
        annotated_pod(
            "mem-both",
            "gpu-memory: \"4096\", trainyard.io/gpu-memory: 4Gi",
            NO_GPU,
        ),
        // Bound to the 40Gi node: its share is measured there, not against 80Gi.
        annotated_pod(
            "mem-bound",
            "trainyard.io/gpu-memory: 30Gi, trainyard.io/gpu-indices: \"1\"",
            "  nodeName: a100\n  containers: [{name: c}]\n",
        ),
        annotated_pod(
            "models",
            "trainyard.io/gpu-models: \"NVIDIA-H100-80GB-HBM3, NVIDIA-A100-SXM4-40GB,NVIDIA-H100-80GB-HBM3\"",
            "  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 2}}}]\n",
        ),
        annotated_pod(
            "models-share",
            "trainyard.io/gpu-models: NVIDIA-A100-SXM4-40GB, gpu-fraction: \"0.125\"",
            NO_GPU,
        ),
        annotated_pod(
            "multi",
            "gpu-fraction: \"0.5\", gpu-fraction-num-devices: \"2\"",
            NO_GPU,
        ),
        // Another scheduler's bound pod holds its share on the node.
        "apiVersion: v1\nkind: Pod\nmetadata: {name: kai, namespace: ml, annotations: {gpu-memory: \"10240\"}}\nspec: {schedulerName: kai-scheduler, nodeName: h100, containers: [{name: c}]}\n".to_string(),
        gpu_node("h100", 4, "NVIDIA-H100-80GB-HBM3", Some("81920")),
        gpu_node("a100", 2, "NVIDIA-A100-SXM4-40GB", Some("40960")),
        gpu_node("old", 8, "Tesla-V100", None),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let gpu = |name: &str| task(&loaded, name).requests.gpu;
    let memory = |name: &str| task(&loaded, name).constraints.gpu_memory;

    assert_eq!((gpu("ml/frac"), memory("ml/frac")), (500, None));
    assert_eq!(gpu("ml/frac-one"), 1000, "\"1\" is one whole GPU");
    assert_eq!(gpu("ml/frac-both"), 250);
    // Nominal share against the largest device in the snapshot (80Gi).
    assert_eq!(
        (gpu("ml/mem-kai"), memory("ml/mem-kai")),
        (250, Some(20 * GIB))
    );
    assert_eq!(
        (gpu("ml/mem-quantity"), memory("ml/mem-quantity")),
        (375, Some(30 * GIB))
    );
    assert_eq!(
        (gpu("ml/mem-both"), memory("ml/mem-both")),
        (50, Some(4 * GIB))
    );
    assert_eq!(
        (gpu("ml/mem-bound"), memory("ml/mem-bound")),
        (750, Some(30 * GIB))
    );
    assert_eq!(bound_gpus(&loaded, "ml/mem-bound"), Some(vec![1]));
    let models = task(&loaded, "ml/models");
    assert_eq!(models.requests.gpu, 2000);
    assert_eq!(
        models.constraints.gpu_models,
        ["NVIDIA-A100-SXM4-40GB", "NVIDIA-H100-80GB-HBM3"]
    );
    assert_eq!(models.constraints.gpu_memory, None);
    let share = task(&loaded, "ml/models-share");
    assert_eq!(share.requests.gpu, 125);
    assert_eq!(share.constraints.gpu_models, ["NVIDIA-A100-SXM4-40GB"]);
    assert!(task(&loaded, "ml/frac").constraints.gpu_models.is_empty());
    assert!(task(&loaded, "ml/frac").constraints.unsupported.is_empty());
    assert_eq!(
        task(&loaded, "ml/multi").constraints.unsupported,
        ["gpu-fraction-num-devices=\"2\" (a GPU share spread over several devices)"]
    );
    let ext = &loaded.snapshot.external;
    assert_eq!(ext.len(), 1);
    assert_eq!((ext[0].name.as_str(), ext[0].requests.gpu), ("ml/kai", 125));
}

#[test]
fn gpu_sharing_annotation_errors_name_the_field() {
    let no_gpu = "  containers: [{name: c}]\n";
    let text = [
        annotated_pod("a", "gpu-fraction: \"0.3333\"", no_gpu),
        annotated_pod("b", "trainyard.io/gpu-fraction: \"1.5\"", no_gpu),
        annotated_pod("c", "gpu-fraction: \"0\"", no_gpu),
        annotated_pod("d", "gpu-fraction: NaN", no_gpu),
        annotated_pod("e", "gpu-fraction: \"\"", no_gpu),
        annotated_pod("f", "gpu-memory: 4Gi", no_gpu),
        annotated_pod("g", "trainyard.io/gpu-memory: \"0\"", no_gpu),
        annotated_pod("h", "gpu-fraction: \"0.5\", gpu-memory: \"4096\"", no_gpu),
        annotated_pod(
            "i",
            "gpu-fraction: \"0.5\"",
            "  containers: [{name: c}, {name: d, resources: {limits: {nvidia.com/gpu: 1}}}]\n",
        ),
        annotated_pod(
            "j",
            "gpu-fraction: \"0.25\", trainyard.io/gpu-fraction: \"0.5\"",
            no_gpu,
        ),
        annotated_pod("k", "trainyard.io/gpu-models: \"A100,,H100\"", no_gpu),
        annotated_pod("l", "trainyard.io/gpu-models: NVIDIA A100", no_gpu),
        // Inside a List, the path starts with items[i]; another scheduler's
        // pods are checked too.
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: m, namespace: ml, annotations: {trainyard.io/gpu-memory: 20GB}}\n  spec: {nodeName: n1, containers: [{name: c}]}\n".to_string(),
    ]
    .join("---\n");
    let fraction = "expected a decimal fraction of one GPU, greater than 0 and at most 1, such as \"0.5\" or \"0.125\"";
    let expected = [
        "document 1: Pod ml/a: metadata.annotations.gpu-fraction: \"0.3333\" has more than 3 decimal places; expected a whole number of thousandths of a GPU (milli-GPU), such as \"0.333\" (Trainyard does not round it)".to_string(),
        format!("document 2: Pod ml/b: metadata.annotations.trainyard.io/gpu-fraction: \"1.5\" is more than one GPU; {fraction} (request whole GPUs with the nvidia.com/gpu resource)"),
        format!("document 3: Pod ml/c: metadata.annotations.gpu-fraction: \"0\" is not greater than 0; {fraction}"),
        format!("document 4: Pod ml/d: metadata.annotations.gpu-fraction: \"NaN\" is not a decimal number; {fraction}"),
        format!("document 5: Pod ml/e: metadata.annotations.gpu-fraction: empty; {fraction}"),
        "document 6: Pod ml/f: metadata.annotations.gpu-memory: \"4Gi\" is not a whole number of MiB; expected a whole number of MiB greater than 0, such as \"4096\" (for a quantity such as \"4Gi\", use trainyard.io/gpu-memory)".to_string(),
        "document 7: Pod ml/g: metadata.annotations.trainyard.io/gpu-memory: \"0\" is not greater than 0; expected a memory quantity greater than 0, such as \"20Gi\" or \"4096Mi\"".to_string(),
        "document 8: Pod ml/h: metadata.annotations.gpu-memory: \"4096\" conflicts with gpu-fraction=\"0.5\"; expected either a GPU fraction or a GPU memory amount, not both".to_string(),
        "document 9: Pod ml/i: metadata.annotations.gpu-fraction: a GPU share cannot be combined with the nvidia.com/gpu resource, found spec.containers[1].resources.limits.nvidia.com/gpu=\"1\"; expected either this annotation (a share of one device) or nvidia.com/gpu (whole GPUs), not both".to_string(),
        "document 10: Pod ml/j: metadata.annotations.gpu-fraction: \"0.25\" differs from trainyard.io/gpu-fraction=\"0.5\"; expected the same amount under both keys, or only one of them".to_string(),
        "document 11: Pod ml/k: metadata.annotations.trainyard.io/gpu-models: \"A100,,H100\" has an empty entry; expected comma-separated GPU model names as the node label nvidia.com/gpu.product gives them, such as \"NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3\"".to_string(),
        "document 12: Pod ml/l: metadata.annotations.trainyard.io/gpu-models: \"NVIDIA A100\" is not a valid label value; expected letters, digits, '-', '_' and '.', starting and ending with a letter or digit (GPU models are matched against the node label nvidia.com/gpu.product, such as \"NVIDIA-A100-SXM4-80GB\")".to_string(),
        "document 13: Pod ml/m: items[0].metadata.annotations.trainyard.io/gpu-memory: invalid quantity \"20GB\"; expected a memory quantity greater than 0, such as \"20Gi\" or \"4096Mi\"".to_string(),
    ]
    .map(|e| format!("cluster.yaml: {e}"))
    .join("\n");
    assert_eq!(errors_of(&text), expected);
}

#[test]
fn gpu_memory_share_without_memory_info_counts_one_gpu() {
    let no_gpu = "  containers: [{name: c}]\n";
    let text = [
        gpu_node("n1", 8, "Tesla-V100", None),
        annotated_pod("pending", "gpu-memory: \"4096\"", no_gpu),
        annotated_pod(
            "bound",
            "trainyard.io/gpu-memory: 4Gi",
            "  nodeName: n1\n  containers: [{name: c}]\n",
        ),
        annotated_pod(
            "lost",
            "trainyard.io/gpu-memory: 4Gi",
            "  nodeName: gone\n  containers: [{name: c}]\n",
        ),
        // Not used, so not warned about: finished, or pending for another scheduler.
        annotated_pod(
            "done",
            "gpu-memory: \"4096\"",
            "  containers: [{name: c}]\nstatus: {phase: Succeeded}\n",
        ),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: other, namespace: ml, annotations: {gpu-memory: \"4096\"}}\nspec: {containers: [{name: c}]}\n".to_string(),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    for name in ["ml/pending", "ml/bound", "ml/lost"] {
        let t = task(&loaded, name);
        assert_eq!(t.requests.gpu, 1000, "{name}");
        assert_eq!(t.constraints.gpu_memory, Some(4 * GIB), "{name}");
    }
    let tail = "the pod's nominal GPU share is taken as 1 GPU";
    assert_eq!(
        loaded.warnings,
        [
            format!(
                "cluster.yaml: document 2: Pod ml/pending: annotation gpu-memory=\"4096\": no node reports its GPU memory (node label nvidia.com/gpu.memory); {tail}"
            ),
            format!(
                "cluster.yaml: document 3: Pod ml/bound: annotation trainyard.io/gpu-memory=\"4Gi\": its node n1 does not report its GPU memory (node label nvidia.com/gpu.memory); {tail}"
            ),
            format!(
                "cluster.yaml: document 4: Pod ml/lost: annotation trainyard.io/gpu-memory=\"4Gi\": its node gone is not in the snapshot; {tail}"
            ),
            "ignored 1 pending pod(s) of other schedulers (schedulerName is not \"trainyard\"): ml/other".to_string(),
        ]
    );

    // Any node with memory information gives the nominal share, even one
    // whose devices the pod may not be able to use.
    let with_memory = format!(
        "{text}---\n{}",
        gpu_node("n2", 1, "NVIDIA-L4", Some("23034"))
    );
    let loaded = load_one(&with_memory).unwrap();
    // ceil(4096 × 1000 / 23034) = 178
    assert_eq!(task(&loaded, "ml/pending").requests.gpu, 178);
    assert_eq!(
        task(&loaded, "ml/bound").requests.gpu,
        1000,
        "n1 is still unknown"
    );
}

#[test]
fn gpu_share_indices_must_name_one_device() {
    let text = [
        annotated_pod(
            "f",
            "gpu-fraction: \"0.5\", trainyard.io/gpu-indices: \"0,1\"",
            "  nodeName: n1\n  containers: [{name: c}]\n",
        ),
        annotated_pod(
            "m",
            "gpu-memory: \"4096\", trainyard.io/gpu-indices: \"2\"",
            "  nodeName: n1\n  containers: [{name: c}]\n",
        ),
        gpu_node("n1", 4, "NVIDIA-A10", Some("23028")),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    assert_eq!(bound_gpus(&loaded, "ml/f"), None);
    assert_eq!(bound_gpus(&loaded, "ml/m"), Some(vec![2]));
    assert_eq!(
        loaded.warnings,
        [
            "cluster.yaml: document 1: Pod ml/f: annotation trainyard.io/gpu-indices=\"0,1\" names 2 GPU(s); expected 1 (the pod asks for one device with annotation gpu-fraction=\"0.5\"); the pod's devices are taken as unknown and Trainyard assigns them"
        ]
    );
}

// --- Topology, topology constraints and ranks (docs/topology-api.md) -------

/// A node with `gpus` devices and `labels` (a YAML flow mapping body).
fn topo_node(name: &str, gpus: u32, labels: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{{labels}}}}}\nstatus: {{allocatable: {{cpu: \"64\", nvidia.com/gpu: \"{gpus}\"}}}}\n"
    )
}

/// A pod of group `g` in namespace ml asking for one GPU; `meta` is extra
/// metadata (`labels`/`annotations` lines).
fn gang_pod(name: &str, meta: &str) -> String {
    pod(
        name,
        meta,
        "  containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]\n",
    )
}

/// Two rail-optimized nodes (each NIC on its own rail leaf) and a ToR node
/// labelled onto the same spine; n1 and n2 share an NVLink domain.
const RAIL_TOPOLOGY: &str = r#"apiVersion: trainyard.io/v1alpha1
kind: Topology
metadata: {name: fabric}
spec:
  switches:
  - {name: rail-0, kind: leaf}
  - {name: rail-1, kind: leaf}
  - {name: tor-b, kind: leaf}
  - {name: spine-0, kind: spine, block: b0}
  links:
  - {from: n1/nic0, to: rail-0}
  - {from: n1/nic1, to: rail-1}
  - {from: n2/nic0, to: rail-0}
  - {from: n2/nic1, to: rail-1}
  - {from: rail-0, to: spine-0}
  - {from: rail-1, to: spine-0}
  - {from: tor-b, to: spine-0}
  nodes:
  - node: n1
    gpus: [{index: 0, numa: 0}, {index: 1, numa: 1}]
"#;

fn rail_cluster(extra: &str) -> String {
    [
        RAIL_TOPOLOGY.to_string(),
        topo_node("n1", 2, "topology.trainyard.io/nvlink-domain: rack-a"),
        topo_node("n2", 2, "topology.trainyard.io/nvlink-domain: rack-a"),
        topo_node(
            "n3",
            2,
            "topology.trainyard.io/leaf: tor-b, topology.trainyard.io/gpu-numa: \"1,0\"",
        ),
        extra.to_string(),
    ]
    .iter()
    .filter(|d| !d.is_empty())
    .cloned()
    .collect::<Vec<_>>()
    .join("---\n")
}

#[test]
fn topology_document_with_switches_links_and_node_labels() {
    let loaded = load_one(&rail_cluster("")).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let t = loaded.snapshot.topology.as_ref().expect("a topology");
    assert_eq!(t.level_names(), ["spineBlock", "leaf", "nvlink"]);
    let leaf = &t.levels()[t.level_index("leaf").unwrap()];
    let domains: Vec<(&str, usize)> = leaf
        .domains
        .iter()
        .map(|d| (d.name.as_str(), d.nodes.len()))
        .collect();
    assert_eq!(domains, [("rail-0..rail-1", 2), ("tor-b", 1)]);
    let block = &t.levels()[t.level_index("spineBlock").unwrap()];
    assert_eq!(block.domains.len(), 1);
    assert_eq!(block.domains[0].nodes.len(), 3);
    let (n1, n2, n3) = (
        t.node_id("n1").unwrap(),
        t.node_id("n2").unwrap(),
        t.node_id("n3").unwrap(),
    );
    // Rails: GPU i of n1 and n2 on rail leaf i.
    assert_eq!(t.gpu_leaf(n1, 1), t.gpu_leaf(n2, 1));
    assert_ne!(t.gpu_leaf(n1, 0), t.gpu_leaf(n1, 1));
    // NUMA from the document (n1) and from the gpu-numa label (n3).
    assert_eq!(t.gpu_numa(n1, 1), Some(1));
    assert_eq!(t.gpu_numa(n3, 0), Some(1));
    assert_eq!(
        t.distance(n1, 0, n2, 0),
        trainyard_model::topology::Distance::SameNvlink
    );
    // Names that are not nodes of the snapshot are ignored, with warnings.
    let partial = load_one(&format!("{RAIL_TOPOLOGY}---\n{}", topo_node("n2", 2, ""))).unwrap();
    assert_eq!(
        partial.warnings,
        [
            "cluster.yaml: document 1: Topology fabric: spec.nodes: n1 is not a node of the cluster; ignored",
            "cluster.yaml: document 1: Topology fabric: spec.links[0]: n1 is neither a declared switch nor a node of the cluster; ignored",
            "cluster.yaml: document 1: Topology fabric: spec.links[1]: n1 is neither a declared switch nor a node of the cluster; ignored",
        ]
    );
    // Without a topology, the snapshot has none.
    let plain = load_one(&topo_node("n1", 2, "a: b")).unwrap();
    assert!(plain.snapshot.topology.is_none());
}

/// Label levels: block, then rack (widest first), from node labels.
const TREE_TOPOLOGY: &str = r#"apiVersion: trainyard.io/v1alpha1
kind: Topology
metadata: {name: tree}
spec:
  levels:
  - {name: block, nodeLabel: cloud.example.com/block}
  - {name: rack, nodeLabel: cloud.example.com/rack}
"#;

fn tree_cluster(extra: &[String]) -> String {
    let mut docs = vec![
        TREE_TOPOLOGY.to_string(),
        topo_node(
            "a1",
            4,
            "cloud.example.com/block: b0, cloud.example.com/rack: r1",
        ),
        topo_node(
            "a2",
            4,
            "cloud.example.com/block: b0, cloud.example.com/rack: r2",
        ),
        topo_node(
            "b1",
            4,
            "cloud.example.com/block: b1, cloud.example.com/rack: r1",
        ),
    ];
    docs.extend(extra.iter().cloned());
    docs.join("---\n")
}

#[test]
fn tree_levels_and_podgroup_constraints_by_name_and_label_key() {
    let group = r#"apiVersion: trainyard.io/v1alpha1
kind: PodGroup
metadata: {name: g, namespace: ml}
spec:
  minMember: 2
  topology: {required: cloud.example.com/block, preferred: rack, maxLeaves: 1}
  subGroups:
  - {name: w, minMember: 2, topology: {required: cloud.example.com/rack}}
"#;
    let pods = [
        gang_pod(
            "w0",
            "  labels: {trainyard.io/pod-group: g, trainyard.io/sub-group: w}\n",
        ),
        gang_pod(
            "w1",
            "  labels: {trainyard.io/pod-group: g, trainyard.io/sub-group: w}\n",
        ),
    ];
    let mut docs = vec![group.to_string()];
    docs.extend(pods);
    let loaded = load_one(&tree_cluster(&docs)).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let s = &loaded.snapshot;
    let t = s.topology.as_ref().unwrap();
    assert_eq!(t.level_names(), ["block", "rack"]);
    // Racks are paths below blocks: b0/r1 and b1/r1 are different racks.
    let rack = &t.levels()[t.level_index("rack").unwrap()];
    let names: Vec<&str> = rack.domains.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["b0/r1", "b0/r2", "b1/r1"]);
    let j = &s.jobs[0];
    assert_eq!(
        j.topology,
        TopologyConstraint {
            required: Some("block".into()),
            preferred: Some("rack".into()),
            max_leaves: Some(1),
        }
    );
    assert_eq!(j.subgroups[0].topology.required.as_deref(), Some("rack"));
}

#[test]
fn kai_topology_and_kai_podgroup_constraint() {
    let kai = r#"apiVersion: kai.scheduler/v1alpha1
kind: Topology
metadata: {name: cluster-topology}
spec:
  levels:
  - nodeLabel: cloud.example.com/block
  - nodeLabel: cloud.example.com/rack
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: g, namespace: ml}
spec:
  minMember: 1
  queue: default
  topologyConstraint:
    topology: other-topology
    requiredTopologyLevel: cloud.example.com/block
    preferredTopologyLevel: cloud.example.com/rack
"#;
    let mut docs = vec![kai.to_string()];
    docs.extend(["a1", "b1"].map(|n| {
        topo_node(
            n,
            4,
            "cloud.example.com/block: b0, cloud.example.com/rack: r1",
        )
    }));
    docs.push(gang_pod("p", "  annotations: {pod-group-name: g}\n"));
    let loaded = load_one(&docs.join("---\n")).unwrap();
    let t = loaded.snapshot.topology.as_ref().unwrap();
    assert_eq!(
        t.level_names(),
        ["cloud.example.com/block", "cloud.example.com/rack"]
    );
    let j = &loaded.snapshot.jobs[0];
    assert_eq!(
        j.topology.required.as_deref(),
        Some("cloud.example.com/block")
    );
    assert_eq!(
        j.topology.preferred.as_deref(),
        Some("cloud.example.com/rack")
    );
    assert_eq!(
        loaded.warnings,
        [
            "cluster.yaml: document 2: PodGroup ml/g: spec.topologyConstraint.topology names Topology \"other-topology\", but the snapshot's Topology is \"cluster-topology\"; using it"
        ]
    );
}

#[test]
fn kueue_annotations_name_levels_by_label_key() {
    let ann = |name: &str, level: &str| {
        gang_pod(
            name,
            &format!(
                "  labels: {{trainyard.io/pod-group: g}}\n  annotations: {{kueue.x-k8s.io/podset-required-topology: {level}, kueue.x-k8s.io/podset-preferred-topology: topology.trainyard.io/nvlink-domain}}\n"
            ),
        )
    };
    let loaded = load_one(&rail_cluster(&format!(
        "{}---\n{}",
        ann("a", "topology.trainyard.io/leaf"),
        ann("b", "topology.trainyard.io/leaf")
    )))
    .unwrap();
    let j = &loaded.snapshot.jobs[0];
    assert_eq!(j.topology.required.as_deref(), Some("leaf"));
    assert_eq!(j.topology.preferred.as_deref(), Some("nvlink"));
    assert_eq!(j.topology.max_leaves, None);

    // Pods of one gang must agree.
    let e = errors_of(&rail_cluster(&format!(
        "{}---\n{}",
        ann("a", "topology.trainyard.io/leaf"),
        ann("b", "spineBlock")
    )));
    assert_eq!(
        e,
        "cluster.yaml: document 6: Pod ml/b: metadata.annotations.kueue.x-k8s.io/podset-required-topology: \"spineBlock\" differs from kueue.x-k8s.io/podset-required-topology=\"topology.trainyard.io/leaf\" on Pod ml/a; all pods of a gang must name the same topology level"
    );
}

#[test]
fn ranks_from_each_key() {
    let docs: Vec<String> = [
        ("own", "labels: {trainyard.io/rank: \"7\", training.kubeflow.org/replica-index: \"1\"}"),
        ("own-ann", "annotations: {trainyard.io/rank: \"3\"}"),
        ("kubeflow", "labels: {training.kubeflow.org/replica-index: \"2\"}"),
        (
            "jobset",
            "labels: {jobset.sigs.k8s.io/job-index: \"1\", batch.kubernetes.io/job-completion-index: \"4\"}",
        ),
        ("indexed", "labels: {batch.kubernetes.io/job-completion-index: \"5\"}"),
        ("indexed-ann", "annotations: {batch.kubernetes.io/job-completion-index: \"6\"}"),
        ("none", "labels: {app: x}"),
    ]
    .iter()
    .map(|(n, m)| gang_pod(n, &format!("  {m}\n")))
    .collect();
    let loaded = load_one(&docs.join("---\n")).unwrap();
    let rank = |n: &str| task(&loaded, &format!("ml/{n}")).rank;
    assert_eq!(rank("own"), Some(7));
    assert_eq!(rank("own-ann"), Some(3));
    assert_eq!(rank("kubeflow"), Some(2));
    assert_eq!(rank("jobset"), Some(65_536 + 4));
    assert_eq!(rank("indexed"), Some(5));
    assert_eq!(rank("indexed-ann"), Some(6));
    assert_eq!(rank("none"), None);
}

#[test]
fn topology_bad_input_names_file_object_and_field() {
    // Unknown level, listing the valid ones widest first.
    let group = |topology: &str| {
        format!(
            "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: g, namespace: ml}}\nspec: {{topology: {topology}}}\n---\n{}",
            gang_pod("p", "  labels: {trainyard.io/pod-group: g}\n")
        )
    };
    assert_eq!(
        errors_of(&rail_cluster(&group("{required: rack}"))),
        "cluster.yaml: document 5: PodGroup ml/g: spec.topology.required: unknown topology level \"rack\"; expected one of spineBlock, leaf, nvlink (a level name, or the node label key of a label level)"
    );
    // A constraint without any topology.
    assert_eq!(
        errors_of(&group("{preferred: leaf, maxLeaves: 2}")),
        "cluster.yaml: document 1: PodGroup ml/g: spec.topology.preferred: \"leaf\" names a topology level, but the cluster has no topology (no Topology document and no topology.trainyard.io/ node labels)\n\
         cluster.yaml: document 1: PodGroup ml/g: spec.topology.maxLeaves: maxLeaves needs a topology, but the cluster has no topology (no Topology document and no topology.trainyard.io/ node labels)"
    );
    // maxLeaves 0.
    assert_eq!(
        errors_of(&rail_cluster(&group("{maxLeaves: 0}"))),
        "cluster.yaml: document 5: PodGroup ml/g: spec.topology.maxLeaves: must be at least 1, found 0"
    );
    // A link to a switch nobody declared.
    let dangling =
        RAIL_TOPOLOGY.replace("{from: tor-b, to: spine-0}", "{from: tor-b, to: spine-9}");
    assert_eq!(
        errors_of(&format!("{dangling}---\n{}", topo_node("n1", 2, ""))),
        "cluster.yaml: document 1: Topology fabric: spec.links[6]: tor-b → spine-9: no spine switch named \"spine-9\" is declared"
    );
    // Two Topology documents.
    let e = load(
        &[
            Source::new("a.yaml", RAIL_TOPOLOGY),
            Source::new("b.yaml", format!("---\n{TREE_TOPOLOGY}")),
        ],
        &LoadOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "b.yaml: document 1: Topology tree: a snapshot has at most one Topology document; Topology fabric is already defined in a.yaml: document 1"
    );
    // A rank that is not a whole number.
    assert_eq!(
        errors_of(&gang_pod(
            "p",
            "  labels: {training.kubeflow.org/replica-index: two}\n"
        )),
        "cluster.yaml: document 1: Pod ml/p: metadata.labels.training.kubeflow.org/replica-index: bad rank: \"two\" is not a whole number; expected an index from 0 to 4294967295"
    );
    assert_eq!(
        errors_of(&gang_pod(
            "p",
            "  annotations: {trainyard.io/rank: \"-1\"}\n"
        )),
        "cluster.yaml: document 1: Pod ml/p: metadata.annotations.trainyard.io/rank: bad rank: \"-1\" is not a whole number; expected an index from 0 to 4294967295"
    );
    // A gpu-numa label with the wrong number of entries.
    assert_eq!(
        errors_of(&topo_node(
            "n1",
            4,
            "topology.trainyard.io/leaf: tor-a, topology.trainyard.io/gpu-numa: \"0,1\""
        )),
        "cluster.yaml: document 1: Node n1: metadata.labels.topology.trainyard.io/gpu-numa: \"0,1\": expected 4 comma-separated integers, one per GPU (GPU 0 first)"
    );
    // A strict spec: unknown fields name their path.
    let e = errors_of(&RAIL_TOPOLOGY.replace("kind: spine, block: b0", "kind: spine, blok: b0"));
    assert!(
        e.starts_with(
            "cluster.yaml: document 1: Topology fabric: spec.switches[3].blok: unknown field `blok`"
        ),
        "{e}"
    );
}

#[test]
fn topology_build_errors_point_at_their_source() {
    // A duplicate switch and a bad level, in the document.
    let dup = RAIL_TOPOLOGY.replace(
        "  - {name: tor-b, kind: leaf}\n",
        "  - {name: tor-b, kind: leaf}\n  - {name: rail-0, kind: spine}\n",
    );
    assert_eq!(
        errors_of(&format!("{dup}---\n{}", topo_node("n1", 2, ""))),
        "cluster.yaml: document 1: Topology fabric: spec.switches[3].name: switch \"rail-0\" is declared twice"
    );
    let level = format!(
        "{}  levels:\n  - {{name: leaf, fabric: leaf, nodeLabel: x}}\n---\n{}",
        RAIL_TOPOLOGY,
        topo_node("n1", 2, "")
    );
    assert_eq!(
        errors_of(&level),
        "cluster.yaml: document 1: Topology fabric: spec.levels[0]: level \"leaf\": give exactly one of nodeLabel, fabric (spineBlock, leaf or nvlink) or domains"
    );
    // GPU affinity for a GPU the node does not have.
    let affinity = RAIL_TOPOLOGY.replace("{index: 1, numa: 1}", "{index: 5, numa: 1}");
    assert_eq!(
        errors_of(&format!("{affinity}---\n{}", topo_node("n1", 2, ""))),
        "cluster.yaml: document 1: Topology fabric: spec.nodes[0].gpus: node \"n1\": GPU 5: the node has 2 GPUs (indices 0..2)"
    );
    // A node label linking the node to what the document says is a spine.
    assert_eq!(
        errors_of(&format!(
            "{RAIL_TOPOLOGY}---\n{}",
            topo_node("n9", 2, "topology.trainyard.io/leaf: spine-0")
        )),
        "cluster.yaml: document 2: Node n9: metadata.labels.topology.trainyard.io/leaf: n9 → spine-0: nodes and NICs link to leaf switches, not to spines"
    );
    // Labels only: an NVLink domain across two leaves does not nest.
    let e = errors_of(&format!(
        "{}---\n{}",
        topo_node(
            "n1",
            2,
            "topology.trainyard.io/leaf: l1, topology.trainyard.io/nvlink-domain: d"
        ),
        topo_node(
            "n2",
            2,
            "topology.trainyard.io/leaf: l2, topology.trainyard.io/nvlink-domain: d"
        ),
    ));
    assert_eq!(
        e,
        "cluster.yaml: document 2: Node n2: level \"nvlink\": domain \"d\" is not inside one domain of level \"leaf\" (its nodes \"n1\" and \"n2\" are in different ones); levels must nest (levels from the nodes' topology.trainyard.io/ labels)"
    );
    // Explicit domains that do not nest.
    let nested = "apiVersion: trainyard.io/v1alpha1\nkind: Topology\nmetadata: {name: f}\nspec:\n  levels:\n  - {name: block, domains: [{name: b0, nodes: [a1]}, {name: b1, nodes: [b1]}]}\n  - {name: rack, domains: [{name: r1, nodes: [a1, b1]}]}\n";
    assert_eq!(
        errors_of(&format!(
            "{nested}---\n{}---\n{}",
            topo_node("a1", 1, ""),
            topo_node("b1", 1, "")
        )),
        "cluster.yaml: document 1: Topology f: spec.levels[1]: level \"rack\": domain \"r1\" is not inside one domain of level \"block\" (its nodes \"a1\" and \"b1\" are in different ones); levels must nest"
    );
    // KAI levels naming one label twice.
    let kai = "apiVersion: kai.scheduler/v1alpha1\nkind: Topology\nmetadata: {name: t}\nspec: {levels: [{nodeLabel: rack}, {nodeLabel: rack}]}\n";
    assert_eq!(
        errors_of(kai),
        "cluster.yaml: document 1: Topology t: spec.levels[1]: level \"rack\": two levels have this name"
    );
}

#[test]
fn pod_annotations_versus_the_podgroup_and_bad_ranks() {
    let group = "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec: {topology: {required: leaf}}\n";
    let p = gang_pod(
        "p",
        "  labels: {trainyard.io/pod-group: g}\n  annotations: {kueue.x-k8s.io/podset-required-topology: spineBlock, kai.scheduler/topology-preferred-placement: nvlink}\n",
    );
    let loaded = load_one(&rail_cluster(&format!("{group}---\n{p}"))).unwrap();
    let j = &loaded.snapshot.jobs[0];
    assert_eq!(j.topology.required.as_deref(), Some("leaf"));
    assert_eq!(j.topology.preferred.as_deref(), Some("nvlink"));
    assert_eq!(
        loaded.warnings,
        [
            "cluster.yaml: document 5: PodGroup ml/g: its pods' annotation kueue.x-k8s.io/podset-required-topology=\"spineBlock\" differs from spec.topology.required=\"leaf\"; using \"leaf\""
        ]
    );
    // An annotation naming no level.
    let p = gang_pod(
        "p",
        "  annotations: {kueue.x-k8s.io/podset-preferred-topology: cloud/rack}\n",
    );
    assert_eq!(
        errors_of(&rail_cluster(&p)),
        "cluster.yaml: document 5: Pod ml/p: metadata.annotations.kueue.x-k8s.io/podset-preferred-topology: unknown topology level \"cloud/rack\"; expected one of spineBlock, leaf, nvlink (a level name, or the node label key of a label level)"
    );
    // A PodGroup no pod joins still has its levels checked.
    let lonely = "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {name: lonely, namespace: ml}\nspec: {subGroups: [{name: w, topology: {required: rack}}]}\n";
    assert_eq!(
        errors_of(&rail_cluster(lonely)),
        "cluster.yaml: document 5: PodGroup ml/lonely: spec.subGroups[0].topology.required: unknown topology level \"rack\"; expected one of spineBlock, leaf, nvlink (a level name, or the node label key of a label level)"
    );
    // A preference wider than the requirement does nothing.
    let p = gang_pod(
        "p",
        "  annotations: {kueue.x-k8s.io/podset-required-topology: leaf, kueue.x-k8s.io/podset-preferred-topology: spineBlock}\n",
    );
    assert_eq!(
        load_one(&rail_cluster(&p)).unwrap().warnings,
        [
            "cluster.yaml: document 5: Pod ml/p: preferred level \"spineBlock\" is wider than required level \"leaf\"; the preference has no effect"
        ]
    );
    // JobSet indices that do not combine into a rank.
    assert_eq!(
        errors_of(&gang_pod(
            "p",
            "  labels: {jobset.sigs.k8s.io/job-index: \"1\", batch.kubernetes.io/job-completion-index: \"70000\"}\n"
        )),
        "cluster.yaml: document 1: Pod ml/p: metadata.labels.batch.kubernetes.io/job-completion-index: bad rank: 70000 is too large to combine with jobset.sigs.k8s.io/job-index=1; expected below 65536 (rank = job index × 65536 + completion index)"
    );
    assert_eq!(
        errors_of(&gang_pod(
            "p",
            "  labels: {jobset.sigs.k8s.io/job-index: \"70000\", batch.kubernetes.io/job-completion-index: \"0\"}\n"
        )),
        "cluster.yaml: document 1: Pod ml/p: metadata.labels.jobset.sigs.k8s.io/job-index: bad rank: 70000 is too large; expected below 65536 (rank = job index × 65536 + completion index)"
    );
}

// --- Reclaim and preemption fields (docs/preemption-api.md) ---------------

fn job<'a>(loaded: &'a Loaded, id: &str) -> &'a trainyard_model::Job {
    loaded
        .snapshot
        .jobs
        .iter()
        .find(|j| j.id == id)
        .unwrap_or_else(|| panic!("no job {id}"))
}

/// A pending Trainyard pod with `meta` (YAML lines under `metadata:`) and
/// extra `spec` lines.
fn plain_pod(name: &str, meta: &str, spec: &str) -> String {
    pod(name, meta, &format!("{spec}  containers: [{{name: c}}]\n"))
}

#[test]
fn preemptible_from_each_source() {
    let text = [
        // The PodGroup's spec field, either way and whatever the priority.
        format!("{PG_HEAD}metadata: {{name: spec-no, namespace: ml}}\nspec: {{preemptible: false}}\n"),
        plain_pod("spec-no-0", "  labels: {trainyard.io/pod-group: spec-no}\n", ""),
        format!("{PG_HEAD}metadata: {{name: spec-yes, namespace: ml}}\nspec: {{preemptible: true, priority: 1000}}\n"),
        plain_pod("spec-yes-0", "  labels: {trainyard.io/pod-group: spec-yes}\n", ""),
        // trainyard.io/preemptible on the PodGroup, as a label or an annotation.
        format!("{PG_HEAD}metadata: {{name: pg-label, namespace: ml, labels: {{trainyard.io/preemptible: \"false\"}}}}\n"),
        plain_pod("pg-label-0", "  labels: {trainyard.io/pod-group: pg-label}\n", ""),
        format!("{PG_HEAD}metadata: {{name: pg-annotation, namespace: ml, annotations: {{trainyard.io/preemptible: \"true\"}}}}\nspec: {{priority: 500}}\n"),
        plain_pod("pg-annotation-0", "  labels: {trainyard.io/pod-group: pg-annotation}\n", ""),
        // ... on the pods: a group-less pod, and a gang whose pods agree.
        plain_pod("pod-no", "  annotations: {trainyard.io/preemptible: \"false\"}\n", ""),
        plain_pod(
            "gang-0",
            "  labels: {trainyard.io/pod-group: gang, trainyard.io/preemptible: \"true\"}\n",
            "  priority: 200\n",
        ),
        plain_pod(
            "gang-1",
            "  labels: {trainyard.io/pod-group: gang}\n  annotations: {trainyard.io/preemptible: \"true\"}\n",
            "",
        ),
        // A pod of the gang without the key does not count.
        plain_pod("gang-2", "  labels: {trainyard.io/pod-group: gang}\n", ""),
        // Volcano's key, on a Volcano PodGroup and on a pod.
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: vc, namespace: ml, annotations: {volcano.sh/preemptable: \"false\"}}\n".to_string(),
        plain_pod("vc-0", "  annotations: {scheduling.k8s.io/group-name: vc}\n", ""),
        plain_pod("vc-pod", "  annotations: {volcano.sh/preemptable: \"true\"}\n", "  priority: 125\n"),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    for (id, preemptible) in [
        ("ml/spec-no", false),
        ("ml/spec-yes", true),
        ("ml/pg-label", false),
        ("ml/pg-annotation", true),
        ("ml/pod-no", false),
        ("ml/gang", true),
        ("ml/vc", false),
        ("ml/vc-pod", true),
    ] {
        assert_eq!(job(&loaded, id).preemptible, preemptible, "{id}");
    }
    assert_eq!(job(&loaded, "ml/gang").priority, 200);
    let w = loaded.warnings.join("\n");
    assert!(!w.contains("preemptib"), "{w}");
}

#[test]
fn preemption_policy_never_from_class_or_pod() {
    let class = |name: &str, value: i32, policy: &str| {
        format!(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: {value}\n{policy}"
        )
    };
    let text = [
        class("polite", 50, "preemptionPolicy: Never\n"),
        class("pushy", 50, "preemptionPolicy: PreemptLowerPriority\n"),
        plain_pod("by-class", "", "  priorityClassName: polite\n"),
        plain_pod("by-pod", "", "  preemptionPolicy: Never\n"),
        plain_pod("pushy", "", "  priorityClassName: pushy\n"),
        plain_pod("plain", "", ""),
        // One pod of a gang saying Never is enough.
        format!("{PG_HEAD}metadata: {{name: gang, namespace: ml}}\nspec: {{minMember: 2}}\n"),
        plain_pod("gang-0", "  labels: {trainyard.io/pod-group: gang}\n", ""),
        plain_pod("gang-1", "  labels: {trainyard.io/pod-group: gang}\n", "  preemptionPolicy: Never\n"),
        // The PodGroup's class counts too.
        format!("{PG_HEAD}metadata: {{name: pg-class, namespace: ml}}\nspec: {{priorityClassName: polite}}\n"),
        plain_pod("pg-class-0", "  labels: {trainyard.io/pod-group: pg-class}\n", ""),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    for (id, preempts) in [
        ("ml/by-class", false),
        ("ml/by-pod", false),
        ("ml/pushy", true),
        ("ml/plain", true),
        ("ml/gang", false),
        ("ml/pg-class", false),
    ] {
        assert_eq!(job(&loaded, id).preempts, preempts, "{id}");
    }
    let bad = [
        class("odd", 1, "preemptionPolicy: Sometimes\n"),
        plain_pod("odd-pod", "", "  preemptionPolicy: never\n"),
    ]
    .join("---\n");
    let text = errors_of(&bad);
    assert!(
        text.contains("spec.preemptionPolicy: unknown preemption policy \"never\"; expected PreemptLowerPriority or Never"),
        "{text}"
    );
    assert!(
        text.contains(
            "unknown preemption policy \"Sometimes\"; expected PreemptLowerPriority or Never"
        ),
        "{text}"
    );
}

#[test]
fn preemptible_defaults_by_priority() {
    // KAI-Scheduler's classes: train 50 and build-preemptible 75 are
    // preemptible, build 100 and inference 125 are not.
    let class = |name: &str, value: i32| {
        format!(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: {value}\n"
        )
    };
    let text = [
        class("train", 50),
        class("build-preemptible", 75),
        class("build", 100),
        class("inference", 125),
        plain_pod("none", "", ""),
        plain_pod("p99", "", "  priority: 99\n"),
        plain_pod("p100", "", "  priority: 100\n"),
        plain_pod("train", "", "  priorityClassName: train\n"),
        plain_pod("build-preemptible", "", "  priorityClassName: build-preemptible\n"),
        plain_pod("build", "", "  priorityClassName: build\n"),
        plain_pod("inference", "", "  priorityClassName: inference\n"),
        plain_pod("negative", "", "  priority: -5\n"),
        // The job's resolved priority counts: the PodGroup's, not the pods'.
        format!("{PG_HEAD}metadata: {{name: low, namespace: ml}}\nspec: {{priority: 10}}\n"),
        plain_pod("low-0", "  labels: {trainyard.io/pod-group: low}\n", "  priority: 1000\n"),
        format!("{PG_HEAD}metadata: {{name: high, namespace: ml}}\nspec: {{priorityClassName: inference}}\n"),
        plain_pod("high-0", "  labels: {trainyard.io/pod-group: high}\n", ""),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    for (id, preemptible) in [
        ("ml/none", true),
        ("ml/p99", true),
        ("ml/p100", false),
        ("ml/train", true),
        ("ml/build-preemptible", true),
        ("ml/build", false),
        ("ml/inference", false),
        ("ml/negative", true),
        ("ml/low", true),
        ("ml/high", false),
    ] {
        assert_eq!(job(&loaded, id).preemptible, preemptible, "{id}");
    }
}

#[test]
fn preemptible_precedence_and_disagreement_warnings() {
    let text = [
        // spec.preemptible beats every key.
        format!(
            "{PG_HEAD}metadata: {{name: a, namespace: ml, annotations: {{trainyard.io/preemptible: \"true\", volcano.sh/preemptable: \"false\"}}}}\nspec: {{preemptible: false}}\n"
        ),
        plain_pod("a-0", "  labels: {trainyard.io/pod-group: a, trainyard.io/preemptible: \"true\"}\n", ""),
        // The PodGroup's trainyard.io/preemptible beats the pods'.
        format!("{PG_HEAD}metadata: {{name: b, namespace: ml, labels: {{trainyard.io/preemptible: \"true\"}}}}\nspec: {{priority: 1000}}\n"),
        plain_pod("b-0", "  labels: {trainyard.io/pod-group: b, trainyard.io/preemptible: \"false\"}\n", ""),
        // The pods' trainyard.io/preemptible beats the PodGroup's Volcano key.
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: c, namespace: ml, annotations: {volcano.sh/preemptable: \"true\"}}\n".to_string(),
        plain_pod(
            "c-0",
            "  annotations: {scheduling.k8s.io/group-name: c, trainyard.io/preemptible: \"false\"}\n",
            "",
        ),
        // On one pod: Trainyard's key beats Volcano's; agreeing keys give no warning.
        plain_pod(
            "d",
            "  annotations: {trainyard.io/preemptible: \"true\", volcano.sh/preemptable: \"false\"}\n",
            "  priority: 100\n",
        ),
        plain_pod(
            "e",
            "  annotations: {trainyard.io/preemptible: \"false\", volcano.sh/preemptable: \"false\"}\n",
            "",
        ),
        // Label beats annotation, with the usual warning.
        plain_pod(
            "f",
            "  labels: {trainyard.io/preemptible: \"false\"}\n  annotations: {trainyard.io/preemptible: \"true\"}\n",
            "",
        ),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    for (id, preemptible) in [
        ("ml/a", false),
        ("ml/b", true),
        ("ml/c", false),
        ("ml/d", true),
        ("ml/e", false),
        ("ml/f", false),
    ] {
        assert_eq!(job(&loaded, id).preemptible, preemptible, "{id}");
    }
    assert_eq!(
        loaded.warnings,
        [
            "cluster.yaml: document 9: Pod ml/f: label trainyard.io/preemptible=\"false\" and annotation trainyard.io/preemptible=\"true\" differ; using the label's \"false\"",
            // Jobs of group-less pods come first.
            "cluster.yaml: document 7: Pod ml/d: preemptibility sources disagree (trainyard.io/preemptible=\"true\", volcano.sh/preemptable=\"false\"); using true",
            "cluster.yaml: document 1: PodGroup ml/a: preemptibility sources disagree (spec.preemptible=false, trainyard.io/preemptible=\"true\" on the PodGroup, trainyard.io/preemptible=\"true\" on its pods); using false",
            "cluster.yaml: document 3: PodGroup ml/b: preemptibility sources disagree (trainyard.io/preemptible=\"true\" on the PodGroup, trainyard.io/preemptible=\"false\" on its pods); using true",
            "cluster.yaml: document 5: PodGroup ml/c: preemptibility sources disagree (trainyard.io/preemptible=\"false\" on its pods, volcano.sh/preemptable=\"true\" on the PodGroup); using false",
        ]
    );
}

#[test]
fn bad_preemptible_values_name_file_object_and_key() {
    let text = [
        plain_pod("a", "  annotations: {trainyard.io/preemptible: \"yes\"}\n", ""),
        plain_pod("b", "  labels: {volcano.sh/preemptable: \"True\"}\n", ""),
        format!("{PG_HEAD}metadata: {{name: g, namespace: ml, labels: {{trainyard.io/preemptible: \"0\"}}}}\n"),
        plain_pod("g-0", "  labels: {trainyard.io/pod-group: g, trainyard.io/preemptible: \"true\"}\n", ""),
        plain_pod("g-1", "  labels: {trainyard.io/pod-group: g, trainyard.io/preemptible: \"false\"}\n", ""),
        format!("{PG_HEAD}metadata: {{name: s, namespace: ml}}\nspec: {{preemptible: \"no\"}}\n"),
    ]
    .join("---\n");
    assert_eq!(
        errors_of(&text),
        "cluster.yaml: document 3: PodGroup ml/g: metadata.labels.trainyard.io/preemptible: invalid value \"0\"; expected \"true\" or \"false\"\n\
         cluster.yaml: document 6: PodGroup ml/s: spec.preemptible: expected true or false, found \"no\"\n\
         cluster.yaml: document 1: Pod ml/a: metadata.annotations.trainyard.io/preemptible: invalid value \"yes\"; expected \"true\" or \"false\"\n\
         cluster.yaml: document 2: Pod ml/b: metadata.labels.volcano.sh/preemptable: invalid value \"True\"; expected \"true\" or \"false\"\n\
         cluster.yaml: document 5: Pod ml/g-1: metadata.labels.trainyard.io/preemptible: \"false\" differs from trainyard.io/preemptible=\"true\" on Pod ml/g-0; all pods of a gang must agree"
    );
    // Other schedulers' pods are not checked: the keys are not Trainyard's to read there.
    let external = pod(
        "x",
        "  annotations: {volcano.sh/preemptable: \"True\"}\n",
        "  schedulerName: volcano\n  nodeName: n1\n  containers: []\n",
    )
    .replace("  schedulerName: trainyard\n", "");
    assert!(load_one(&external).is_ok());
}

const NODES_N1_N2: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n2}\n";

#[test]
fn start_time_from_status_or_conditions() {
    let text = [
        NODES_N1_N2.to_string(),
        plain_pod(
            "start",
            "  creationTimestamp: \"2026-11-22T08:00:00Z\"\n",
            "  nodeName: n1\n",
        ) + "status:\n  phase: Running\n  startTime: \"2026-11-22T09:00:00Z\"\n  conditions:\n  - {type: PodScheduled, lastTransitionTime: \"2026-11-22T08:59:00Z\"}\n",
        plain_pod("conditions", "", "  nodeName: n1\n")
            + "status:\n  conditions:\n  - {type: Initialized, lastTransitionTime: \"2026-11-22T07:00:00Z\"}\n  - {type: Ready, status: \"True\", lastTransitionTime: \"2026-11-22T09:10:00+01:00\"}\n  - {type: PodScheduled, status: \"True\", lastTransitionTime: \"2026-11-22T08:30:00Z\"}\n  - {type: ContainersReady}\n",
        plain_pod("ready-only", "", "  nodeName: n1\n")
            + "status:\n  conditions: [{type: Ready, lastTransitionTime: \"2026-11-22T09:30:00Z\"}]\n",
        plain_pod("unknown", "", "  nodeName: n1\n")
            + "status:\n  conditions: [{type: Initialized, lastTransitionTime: \"2026-11-22T07:00:00Z\"}, {type: Ready}]\n",
        // A pending pod has not started, whatever its status says.
        plain_pod("pending", "", "") + "status:\n  startTime: \"2026-11-22T09:00:00Z\"\n",
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    let at = |s: &str| Some(trainyard_crd::parse_rfc3339(s).unwrap());
    assert_eq!(
        task(&loaded, "ml/start").started,
        at("2026-11-22T09:00:00Z")
    );
    assert_eq!(
        task(&loaded, "ml/conditions").started,
        at("2026-11-22T08:10:00Z"),
        "the earliest of Ready and PodScheduled"
    );
    assert_eq!(
        task(&loaded, "ml/ready-only").started,
        at("2026-11-22T09:30:00Z")
    );
    assert_eq!(task(&loaded, "ml/unknown").started, None);
    assert_eq!(task(&loaded, "ml/pending").started, None);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn terminating_pods() {
    let text = [
        NODES_N1_N2.to_string(),
        plain_pod(
            "going",
            "  deletionTimestamp: \"2026-11-22T09:59:00Z\"\n",
            "  nodeName: n1\n",
        ),
        plain_pod(
            "leaving",
            "  deletionTimestamp: \"2026-11-22T09:59:00Z\"\n",
            "",
        ),
        plain_pod("staying", "  deletionTimestamp: null\n", "  nodeName: n2\n"),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    assert!(task(&loaded, "ml/going").terminating);
    assert!(task(&loaded, "ml/leaving").terminating);
    assert!(!task(&loaded, "ml/staying").terminating);
}

#[test]
fn nominations_of_pending_pods() {
    let text = [
        NODES_N1_N2.to_string(),
        plain_pod(
            "annotated",
            "  creationTimestamp: \"2026-11-22T09:00:00Z\"\n  annotations: {trainyard.io/nominated-at: \"2026-11-22T09:58:00Z\", trainyard.io/gpu-indices: \"2,3\"}\n",
            "",
        ) + "status: {nominatedNodeName: n1}\n",
        plain_pod("created", "  creationTimestamp: \"2026-11-22T09:00:00Z\"\n", "")
            + "status: {nominatedNodeName: n2}\n",
        plain_pod("timeless", "", "") + "status: {nominatedNodeName: n2}\n",
        plain_pod("empty", "", "") + "status: {nominatedNodeName: \"\"}\n",
        plain_pod("gone", "", "") + "status: {nominatedNodeName: n9}\n",
        // A bound pod has no nomination.
        plain_pod("bound", "", "  nodeName: n1\n") + "status: {nominatedNodeName: n2}\n",
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    let nomination = |name: &str| {
        task(&loaded, name)
            .nomination
            .as_ref()
            .map(|n| (n.node.as_str(), n.since))
    };
    let at = |s: &str| trainyard_crd::parse_rfc3339(s).unwrap();
    assert_eq!(
        nomination("ml/annotated"),
        Some(("n1", at("2026-11-22T09:58:00Z")))
    );
    assert_eq!(
        nomination("ml/created"),
        Some(("n2", at("2026-11-22T09:00:00Z")))
    );
    assert_eq!(nomination("ml/timeless"), Some(("n2", Timestamp(0))));
    // The devices held for a nominated pod, when it names them.
    let gpus = |name: &str| {
        task(&loaded, name)
            .nomination
            .as_ref()
            .and_then(|n| n.gpus.clone())
    };
    assert_eq!(gpus("ml/annotated"), Some(vec![2, 3]));
    assert_eq!(gpus("ml/created"), None);
    assert_eq!(nomination("ml/empty"), None);
    assert_eq!(nomination("ml/gone"), None);
    assert_eq!(nomination("ml/bound"), None);
    assert_eq!(
        loaded.warnings,
        [
            "cluster.yaml: document 7: Pod ml/gone: status.nominatedNodeName \"n9\" is not a node in the snapshot; nomination dropped"
        ]
    );
}

#[test]
fn bad_times_of_pods_name_file_pod_and_field() {
    let text = [
        plain_pod("a", "", "  nodeName: n1\n") + "status: {startTime: \"2026-11-22 09:00\"}\n",
        plain_pod("b", "", "  nodeName: n1\n")
            + "status:\n  conditions:\n  - {type: Initialized, lastTransitionTime: junk}\n  - {type: PodScheduled, lastTransitionTime: yesterday}\n",
        plain_pod("c", "  deletionTimestamp: now\n", ""),
        plain_pod("d", "  annotations: {trainyard.io/nominated-at: \"2026-13-01T00:00:00Z\"}\n", "")
            + "status: {nominatedNodeName: n1}\n",
        plain_pod("e", "", "") + "status: {startTime: 5}\n",
    ]
    .join("---\n");
    assert_eq!(
        errors_of(&text),
        "cluster.yaml: document 1: Pod ml/a: status.startTime: invalid timestamp \"2026-11-22 09:00\" (expected ':' at position 17); expected RFC 3339 such as \"2024-01-01T00:00:00Z\"\n\
         cluster.yaml: document 2: Pod ml/b: status.conditions[1].lastTransitionTime: invalid timestamp \"yesterday\" (year is not a number); expected RFC 3339 such as \"2024-01-01T00:00:00Z\"\n\
         cluster.yaml: document 3: Pod ml/c: metadata.deletionTimestamp: invalid timestamp \"now\" (too short); expected RFC 3339 such as \"2024-01-01T00:00:00Z\"\n\
         cluster.yaml: document 4: Pod ml/d: metadata.annotations.trainyard.io/nominated-at: invalid timestamp \"2026-13-01T00:00:00Z\" (month out of range); expected RFC 3339 such as \"2024-01-01T00:00:00Z\"\n\
         cluster.yaml: document 5: Pod ml/e: status.startTime: expected a string, found 5"
    );
}

#[test]
fn queue_min_runtime() {
    let queue = |name: &str, spec: &str| {
        format!(
            "apiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {{name: {name}}}\nspec: {spec}\n"
        )
    };
    let text = [
        queue("org", "{minRuntime: 2h}"),
        queue("a", "{parent: org, minRuntime: 600}"),
        queue("b", "{parent: org}"),
        queue("c", "{minRuntime: \"90s\"}"),
    ]
    .join("---\n");
    let s = load_one(&text).unwrap().snapshot;
    let min = |q: &str| s.queues.spec(s.queues.get(q).unwrap()).min_runtime_seconds;
    assert_eq!(min("org"), Some(7200));
    assert_eq!(min("a"), Some(600));
    assert_eq!(min("b"), None, "inherited by the core, not by the loader");
    assert_eq!(min("c"), Some(90));

    let text = [
        queue("x", "{minRuntime: -30m}"),
        queue("y", "{minRuntime: 1w}"),
        queue("z", "{minRuntime: [1h]}"),
    ]
    .join("---\n");
    // Type errors are found when the document is read, values when the
    // queues are assembled.
    assert_eq!(
        errors_of(&text),
        "cluster.yaml: document 3: Queue z: spec.minRuntime: expected a duration such as 90 (seconds), \"30m\" or \"2h\", found a sequence\n\
         cluster.yaml: document 1: Queue x: spec.minRuntime: duration \"-30m\" is negative; expected zero or more\n\
         cluster.yaml: document 2: Queue y: spec.minRuntime: invalid duration \"1w\": unknown unit \"w\"; expected ms, s, m, h or d"
    );
}
