use super::*;

#[test]
fn missing_kind_and_api_version() {
    let text = "apiVersion: v1\nmetadata: {name: x}\n---\nkind: Pod\nmetadata: {name: y}\n---\n- 1\n---\napiVersion: v1\nkind: 7\n";
    let e = errors_of(text);
    expect![[r#"
        cluster.yaml: document 1: object "x": kind: missing; expected the object's kind, such as Node, Pod, PriorityClass, Queue, PodGroup, Topology or List
        cluster.yaml: document 2: Pod default/y: apiVersion: missing; expected "v1"
        cluster.yaml: document 3: expected a Kubernetes object (a mapping with apiVersion and kind), found a sequence
        cluster.yaml: document 4: kind: expected a string such as "Pod", found 7"#]].assert_eq(&e);
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
    expect![[r#"cluster.yaml: document 1: Pod ml/p: items[0].spec.containers[0].resources.requests.memory: quantity "-1Gi" is negative; expected an amount of zero or more"#]].assert_eq(lines[1]);
    assert!(lines[2].starts_with("cluster.yaml: document 1: Node n1: items[1].status.allocatable.cpu: invalid quantity \"lots\""), "{e}");
    expect![[r#"cluster.yaml: document 1: Node n1: items[1].status.allocatable.nvidia.com/gpu: quantity "1.5" is not a whole number; expected an integer count of GPU devices"#]].assert_eq(lines[3]);
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
    expect![[r#"
        cluster.yaml: document 1: Node n1: spec.taints[0].effect: unknown taint effect "NoWay"; expected NoSchedule, PreferNoSchedule or NoExecute
        cluster.yaml: document 2: Pod ml/p: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].operator: unknown operator "Like"; expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt"#]].assert_eq(&e);
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
    expect!["b.yaml: document 1: Node n1: defined more than once: first in a.yaml: document 1, again in b.yaml: document 1"].assert_eq(&e);
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
    // Values a schema cannot refuse: each bad Queue is left out with its
    // reason (and those below it), the rest loads; the live rule.
    let e = warnings_of(&text.replace(", limits: {}", "")).join("\n");
    expect![[r#"
        cluster.yaml: document 4: Queue bad: spec.quota.cpu: invalid quantity "1x"; expected a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent (e.g. 1e3), such as "500m", "8" or "64Gi"; the queue is left out, its jobs wait
        cluster.yaml: document 3: Queue b: spec.parent: its parent queue "bad" is excluded (spec.quota.cpu: invalid quantity "1x"; expected a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent (e.g. 1e3), such as "500m", "8" or "64Gi"); the queue is left out, its jobs wait
        cluster.yaml: document 1: Queue org: spec.quota.nvidia.com/gpu: children of queue "org" (a) have quotas summing to 8 nvidia.com/gpu, above the parent's quota of 4; the queue is left out, its jobs wait
        cluster.yaml: document 2: Queue a: spec.parent: its parent queue "org" is excluded (spec.quota.nvidia.com/gpu: children of queue "org" (a) have quotas summing to 8 nvidia.com/gpu, above the parent's quota of 4); the queue is left out, its jobs wait"#]].assert_eq(&e);
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
    expect![[r#"
        cluster.yaml: document 1: Pod ml/p: metadata.creationTimestamp: invalid timestamp "yesterday" (year is not a number); expected RFC 3339 such as "2024-01-01T00:00:00Z"
        cluster.yaml: document 2: Pod default/q: apiVersion: expected "v1" for kind Pod, found "apps/v1""#]].assert_eq(&e);
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
            ..LoadOptions::default()
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
    expect![[r#"
        cluster.yaml: document 1: PodGroup ml/lonely: spec.minMember: expected a whole number from 1 to 2147483647, found 0
        cluster.yaml: document 1: PodGroup ml/lonely: metadata.creationTimestamp: invalid timestamp "yesterday" (year is not a number); expected RFC 3339 such as "2024-01-01T00:00:00Z""#]].assert_eq(&errors_of(&bad));
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
    expect![[r#"
        cluster.yaml: document 1: Pod ml/p: spec.topologySpreadConstraints[0].whenUnsatisfiable: unknown whenUnsatisfiable "DoNotScheduel"; expected DoNotSchedule or ScheduleAnyway
        cluster.yaml: document 2: Pod ml/q: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: must not be empty: the Kubernetes API rejects a required node affinity without terms; expected at least one term (or leave out requiredDuringSchedulingIgnoredDuringExecution)"#]].assert_eq(&errors_of(&text));
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
    expect![[r#"
        cluster.yaml: document 1: Queue a: spec: expected a mapping, found "nope"
        cluster.yaml: document 2: Node n: spec.taints[0]: expected a mapping, found null
        cluster.yaml: document 3: Pod ml/p: spec.priority: expected a whole number from -2147483648 to 2147483647, found "high""#]].assert_eq(&e);
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
    expect![[r#"
        cluster.yaml: document 1: Pod ml/p: metadata.annotations.trainyard.io/queue: invalid queue name: "Team_A" is not a valid DNS-1123 subdomain; expected lowercase letters, digits, '-' and '.', starting and ending with a letter or digit
        cluster.yaml: document 2: Pod ml/q: metadata.labels.kai.scheduler/queue: invalid queue name: "-x" is not a valid DNS-1123 subdomain; expected lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"#]].assert_eq(&errors_of(&text));
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
    expect![[r#"
        cluster.yaml: document 1: Pod ml/p: spec.schedulingGates[0].name: missing; expected the gate's name, such as example.com/quota-check
        cluster.yaml: document 1: Pod ml/p: spec.volumes[0].persistentVolumeClaim.claimName: missing; expected the name of a PersistentVolumeClaim in the pod's namespace"#]].assert_eq(&errors_of(&bad));
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
    expect![[r#"
        cluster.yaml: document 1: Node a: status.allocatable.nvidia.com/gpu: expected at most 1024 GPUs per node, got 1025
        cluster.yaml: document 2: Node b: status.allocatable.nvidia.com/gpu: expected at most 1024 GPUs per node, got 4000000000
        cluster.yaml: document 3: Node c: status.allocatable.nvidia.com/gpu: expected at most 1024 GPUs per node, got 1e30
        cluster.yaml: document 4: Node d: status.allocatable.nvidia.com/gpu: expected at most 1024 GPUs per node, got 16Ei"#]].assert_eq(&errors_of(&text));
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
