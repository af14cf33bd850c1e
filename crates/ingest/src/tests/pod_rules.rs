//! Rules between pods (inter-pod affinity, spread, host ports), pod-level
//! resources and in-place resize, as the loader converts them.

use super::*;
use trainyard_model::{InclusionPolicy, WhenUnsatisfiable};

#[test]
fn bad_pod_rules_name_their_field() {
    let text = pod(
        "p",
        "  labels: {app: web}\n",
        r#"  containers:
  - name: c
    ports: [{containerPort: 80, hostPort: 70000}, {containerPort: 81, hostPort: 81, protocol: HTTP}]
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchExpressions: [{key: app, operator: Gt, values: ["1"]}, {key: tier, operator: In}]}
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 0
        podAffinityTerm: {labelSelector: {matchLabels: {app: web}}, topologyKey: zone}
      - weight: 5
  topologySpreadConstraints:
  - {maxSkew: -1, topologyKey: zone, labelSelector: {matchLabels: {app: web}}}
  - {maxSkew: 1, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}
  - {topologyKey: zone, minDomains: 0, nodeTaintsPolicy: Sometimes}
"#,
    );
    let e = errors_of(&text);
    expect![[r#"
        cluster.yaml: document 1: Pod ml/p: spec.topologySpreadConstraints[2].nodeTaintsPolicy: unknown policy "Sometimes"; expected Honor or Ignore"#]].assert_eq(&e);
    let text = text.replace(", nodeTaintsPolicy: Sometimes", "");
    let e = errors_of(&text);
    expect![[r#"
        cluster.yaml: document 1: Pod ml/p: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: missing; expected a node label key such as kubernetes.io/hostname or topology.kubernetes.io/zone
        cluster.yaml: document 1: Pod ml/p: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator: operator Gt is not valid in a label selector; expected In, NotIn, Exists or DoesNotExist
        cluster.yaml: document 1: Pod ml/p: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[1].values: must not be empty for operator In; expected at least one value
        cluster.yaml: document 1: Pod ml/p: spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be between 1 and 100, found 0
        cluster.yaml: document 1: Pod ml/p: spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[1].podAffinityTerm: missing; a preferred term needs its podAffinityTerm
        cluster.yaml: document 1: Pod ml/p: spec.topologySpreadConstraints[0].maxSkew: must be at least 1, found -1
        cluster.yaml: document 1: Pod ml/p: spec.topologySpreadConstraints[1].topologyKey: missing; expected a node label key such as topology.kubernetes.io/zone
        cluster.yaml: document 1: Pod ml/p: spec.topologySpreadConstraints[1].minDomains: may only be set with whenUnsatisfiable: DoNotSchedule
        cluster.yaml: document 1: Pod ml/p: spec.topologySpreadConstraints[2].maxSkew: missing; expected the largest allowed difference in matching pods between domains, at least 1
        cluster.yaml: document 1: Pod ml/p: spec.topologySpreadConstraints[2].minDomains: must be at least 1, found 0
        cluster.yaml: document 1: Pod ml/p: spec.containers[0].ports[0].hostPort: 70000 is not a port; expected 1–65535
        cluster.yaml: document 1: Pod ml/p: spec.containers[0].ports[1].protocol: unknown protocol "HTTP"; expected TCP, UDP or SCTP"#]].assert_eq(&e);
}

#[test]
fn rules_are_converted_with_defaults() {
    let text = pod(
        "p",
        "  labels: {app: web, run: r1}\n",
        r#"  containers:
  - name: c
    ports: [{containerPort: 80, hostPort: 8080}, {containerPort: 53, hostPort: 53, protocol: UDP, hostIP: 10.0.0.1}]
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: web}}
        matchLabelKeys: [run, absent]
        topologyKey: topology.kubernetes.io/zone
      - labelSelector: {matchLabels: {app: db}}
        namespaces: [data, ml]
        namespaceSelector: {}
        topologyKey: topology.kubernetes.io/zone
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 30
        podAffinityTerm:
          labelSelector: {matchLabels: {app: web}}
          mismatchLabelKeys: [run]
          namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ml}}
          topologyKey: kubernetes.io/hostname
  topologySpreadConstraints:
  - {maxSkew: 2, topologyKey: zone, labelSelector: {matchLabels: {app: web}}, matchLabelKeys: [run]}
  - {maxSkew: 1, topologyKey: rack, whenUnsatisfiable: ScheduleAnyway, nodeAffinityPolicy: Ignore, nodeTaintsPolicy: Honor}
"#,
    );
    let loaded = load_one(&text).unwrap();
    let t = task(&loaded, "ml/p");
    assert_eq!(t.labels.get("app").map(String::as_str), Some("web"));
    let r = &t.constraints.pod_rules;
    assert!(t.constraints.unsupported.is_empty());
    // The pod's own namespace by default; matchLabelKeys become `In`.
    let a = &r.affinity[0];
    assert_eq!(a.namespaces.names, vec!["ml".to_string()]);
    let sel = a.selector.as_ref().unwrap();
    assert_eq!(sel.match_expressions.len(), 1);
    assert_eq!(sel.match_expressions[0].key, "run");
    assert_eq!(sel.match_expressions[0].operator, LabelSelectorOperator::In);
    // `namespaceSelector: {}` is every namespace.
    assert!(r.affinity[1].namespaces.all);
    assert_eq!(r.affinity[1].namespaces.names, vec!["data", "ml"]);
    let p = &r.preferred_anti_affinity[0];
    assert_eq!(p.weight, 30);
    assert!(p.term.namespaces.matches("ml") && !p.term.namespaces.matches("data"));
    assert_eq!(
        p.term.selector.as_ref().unwrap().match_expressions[0].operator,
        LabelSelectorOperator::NotIn
    );
    let s = &r.spread[0];
    assert_eq!(s.max_skew, 2);
    assert_eq!(s.when_unsatisfiable, WhenUnsatisfiable::DoNotSchedule);
    assert_eq!(s.node_affinity_policy, InclusionPolicy::Honor);
    assert_eq!(s.node_taints_policy, InclusionPolicy::Ignore);
    assert_eq!(s.selector.as_ref().unwrap().match_expressions.len(), 1);
    let s = &r.spread[1];
    assert_eq!(s.when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
    assert_eq!(s.node_affinity_policy, InclusionPolicy::Ignore);
    assert_eq!(s.node_taints_policy, InclusionPolicy::Honor);
    assert!(s.selector.is_none());
    let ports: Vec<String> = r.host_ports.iter().map(|p| format!("{p}")).collect();
    assert_eq!(ports, vec!["53/UDP on 10.0.0.1", "8080/TCP"]);
}

#[test]
fn external_pods_carry_labels_and_binding_rules() {
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: data, labels: {app: db}}
spec:
  nodeName: n1
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {labelSelector: {matchLabels: {app: train}}, topologyKey: kubernetes.io/hostname}
    podAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - {weight: 1, podAffinityTerm: {labelSelector: {}, topologyKey: zone}}
  containers: [{name: c, ports: [{containerPort: 1, hostPort: 9000}]}]
---
apiVersion: v1
kind: Node
metadata: {name: n1}
"#;
    let loaded = load_one(text).unwrap();
    let e = &loaded.snapshot.external[0];
    assert_eq!(e.namespace, "data");
    assert_eq!(e.labels.get("app").map(String::as_str), Some("db"));
    assert_eq!(e.pod_rules.anti_affinity.len(), 1);
    assert_eq!(e.pod_rules.anti_affinity[0].namespaces.names, vec!["data"]);
    assert_eq!(e.pod_rules.host_ports.len(), 1);
    // Preferred terms of another scheduler's pod are not kept.
    assert!(e.pod_rules.preferred_affinity.is_empty());
}

#[test]
fn pod_level_resources_and_resize() {
    let text = format!(
        "{}---\n{}",
        pod(
            "lvl",
            "",
            r#"  overhead: {memory: 1Gi}
  resources: {requests: {cpu: "10"}, limits: {memory: 4Gi}}
  containers:
  - {name: a, resources: {requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}}
  - {name: b, resources: {requests: {cpu: "2", memory: 1Gi}}}
"#
        ),
        r#"apiVersion: v1
kind: Pod
metadata: {name: rs, namespace: ml}
spec:
  schedulerName: trainyard
  nodeName: n1
  containers:
  - {name: a, resources: {requests: {cpu: "4", memory: 1Gi}}}
  - {name: b, resources: {requests: {cpu: "1", memory: 8Gi}}}
status:
  phase: Running
  containerStatuses:
  - {name: a, allocatedResources: {cpu: "2", memory: 3Gi}}
  - {name: b, resources: {requests: {cpu: "6"}}}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "64", memory: 64Gi}}
"#
    );
    let loaded = load_one(&text).unwrap();
    let gi = 1u64 << 30;
    // cpu 10 (pod level, not 3); memory: the pod-level limit 4Gi stands
    // for the request, plus 1Gi overhead.
    let r = &task(&loaded, "ml/lvl").requests;
    assert_eq!((r.cpu, r.memory, r.gpu), (10_000, 5 * gi, 1000));
    // Per container the larger of spec and allocation: a (4, 3Gi), b (6, 8Gi).
    let r = &task(&loaded, "ml/rs").requests;
    assert_eq!((r.cpu, r.memory), (10_000, 11 * gi));
    let infeasible = text.replace(
        "  phase: Running\n",
        "  phase: Running\n  resize: Infeasible\n",
    );
    let loaded = load_one(&infeasible).unwrap();
    // Infeasible: only what was allocated (b's allocation names cpu only).
    let r = &task(&loaded, "ml/rs").requests;
    assert_eq!((r.cpu, r.memory), (8_000, 3 * gi));
    // The same from the condition that replaced `status.resize` (1.33).
    let condition = text.replace(
        "  phase: Running\n",
        "  phase: Running\n  conditions: [{type: PodResizePending, reason: Infeasible}]\n",
    );
    let loaded = load_one(&condition).unwrap();
    let r = &task(&loaded, "ml/rs").requests;
    assert_eq!((r.cpu, r.memory), (8_000, 3 * gi));
}
