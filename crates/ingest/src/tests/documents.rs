use super::*;

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
    // The claim does not exist: the pod waits for it.
    assert_eq!(c.waiting, ["waiting for ResourceClaim ml/c to be created"]);
    assert!(c.unsupported.is_empty());
    // Rules between pods are kept for the core (tests/pod_rules.rs).
    let r = &c.pod_rules;
    assert_eq!(
        (
            r.anti_affinity.len(),
            r.preferred_affinity.len(),
            r.spread.len(),
            r.host_ports.len()
        ),
        (1, 1, 2, 1)
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
        w.contains("cluster.yaml: document 1: Pod ml/p: ignored: preferred node affinity\n")
            || w.ends_with("cluster.yaml: document 1: Pod ml/p: ignored: preferred node affinity"),
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
fn a_pod_s_controller_is_read_from_its_owner_references() {
    let text = [
        pod(
            "owned",
            "  ownerReferences:\n  - {apiVersion: batch/v1, kind: Job, name: train, uid: u1, controller: true}\n",
            "  containers: [{name: c}]\n",
        ),
        pod(
            "referenced",
            "  ownerReferences:\n  - {apiVersion: v1, kind: ConfigMap, name: notes, uid: u2}\n",
            "  containers: [{name: c}]\n",
        ),
        pod("bare", "", "  containers: [{name: c}]\n"),
    ]
    .join("---\n");
    let loaded = load_one(&text).expect("loads");
    assert_eq!(
        task(&loaded, "ml/owned").controller.as_deref(),
        Some("Job/train")
    );
    assert_eq!(
        task(&loaded, "ml/referenced").controller,
        None,
        "not a controller"
    );
    assert_eq!(task(&loaded, "ml/bare").controller, None);
}

#[test]
fn volcano_pods_name_their_queue_with_either_of_volcanos_keys() {
    // Volcano's key for pods without a Volcano Job (an annotation), and the
    // key its Job controller writes (a label and an annotation).
    let text = format!(
        "apiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {{name: nlp}}\n---\napiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {{name: cv}}\n---\n{}\n---\n{}\n---\n{}\n",
        pod(
            "bare",
            "  annotations: {scheduling.volcano.sh/queue-name: nlp}\n",
            "  containers: []\n"
        ),
        pod(
            "both",
            "  annotations: {scheduling.volcano.sh/queue-name: nlp, volcano.sh/queue-name: cv}\n",
            "  containers: []\n"
        ),
        pod(
            "labelled",
            "  labels: {scheduling.volcano.sh/queue-name: nlp}\n",
            "  containers: []\n"
        ),
    );
    let loaded = load_one(&text).unwrap();
    let queue_of = |name: &str| {
        let job = loaded
            .snapshot
            .jobs
            .iter()
            .find(|j| j.id.as_str() == format!("ml/{name}"))
            .unwrap_or_else(|| panic!("job ml/{name}"));
        (job.queue.clone(), job.rejected.clone())
    };
    assert_eq!(queue_of("bare"), ("nlp".to_string(), None));
    // The Job controller's key first, as the two name one queue in Volcano.
    assert_eq!(queue_of("both"), ("cv".to_string(), None));
    // Volcano reads it as an annotation only: a label is not read, and the
    // pod goes to the default queue (which no Queue defines here).
    assert_eq!(queue_of("labelled").0, "default");
    let w = loaded.warnings.join("\n");
    assert!(
        w.contains("Pod ml/both: queue names disagree (volcano.sh/queue-name=\"cv\", scheduling.volcano.sh/queue-name=\"nlp\"); using \"cv\""),
        "{w}"
    );
}
