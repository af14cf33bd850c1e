use super::*;

// --- Reclaim and preemption fields (docs/preemption-api.md) ---------------

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
    expect![[r#"
        cluster.yaml: document 3: PodGroup ml/g: metadata.labels.trainyard.io/preemptible: invalid value "0"; expected "true" or "false"
        cluster.yaml: document 6: PodGroup ml/s: spec.preemptible: expected true or false, found "no"
        cluster.yaml: document 1: Pod ml/a: metadata.annotations.trainyard.io/preemptible: invalid value "yes"; expected "true" or "false"
        cluster.yaml: document 2: Pod ml/b: metadata.labels.volcano.sh/preemptable: invalid value "True"; expected "true" or "false"
        cluster.yaml: document 5: Pod ml/g-1: metadata.labels.trainyard.io/preemptible: "false" differs from trainyard.io/preemptible="true" on Pod ml/g-0; all pods of a gang must agree"#]].assert_eq(&errors_of(&text));
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
    expect![[r#"
        cluster.yaml: document 1: Pod ml/a: status.startTime: invalid timestamp "2026-11-22 09:00" (expected ':' at position 17); expected RFC 3339 such as "2024-01-01T00:00:00Z"
        cluster.yaml: document 2: Pod ml/b: status.conditions[1].lastTransitionTime: invalid timestamp "yesterday" (year is not a number); expected RFC 3339 such as "2024-01-01T00:00:00Z"
        cluster.yaml: document 3: Pod ml/c: metadata.deletionTimestamp: invalid timestamp "now" (too short); expected RFC 3339 such as "2024-01-01T00:00:00Z"
        cluster.yaml: document 4: Pod ml/d: metadata.annotations.trainyard.io/nominated-at: invalid timestamp "2026-13-01T00:00:00Z" (month out of range); expected RFC 3339 such as "2024-01-01T00:00:00Z"
        cluster.yaml: document 5: Pod ml/e: status.startTime: expected a string, found 5"#]].assert_eq(&errors_of(&text));
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
    expect![[r#"cluster.yaml: document 3: Queue z: spec.minRuntime: expected a duration such as 90 (seconds), "30m" or "2h", found a sequence"#]].assert_eq(&errors_of(&text));
    // Values: the queue is left out with its reason, the rest loads.
    let w = warnings_of(
        &[
            queue("x", "{minRuntime: -30m}"),
            queue("y", "{minRuntime: 1w}"),
        ]
        .join("---\n"),
    )
    .join("\n");
    expect![[r#"
        cluster.yaml: document 1: Queue x: spec.minRuntime: duration "-30m" is negative; expected zero or more; the queue is left out, its jobs wait
        cluster.yaml: document 2: Queue y: spec.minRuntime: invalid duration "1w": unknown unit "w"; expected ms, s, m, h or d; the queue is left out, its jobs wait"#]].assert_eq(&w);
}

/// Walltime: the shortest of a PodGroup's `spec.walltime` and the
/// `activeDeadlineSeconds` of the job's pods (the kubelet ends a pod at its
/// own deadline whatever the PodGroup says); queues carry their default
/// and maximum as written (the core inherits them); bad values are named.
#[test]
fn walltime_is_the_shortest_of_the_podgroup_and_the_pods_deadlines() {
    let text = [
        "apiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {name: team}\nspec: {defaultWalltime: 4h, maxWalltime: \"86400\"}\n".to_string(),
        "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec: {minMember: 2, walltime: 90m}\n".to_string(),
        plain_pod("g-0", "  labels: {trainyard.io/pod-group: g}\n", "  activeDeadlineSeconds: 60\n"),
        plain_pod("g-1", "  labels: {trainyard.io/pod-group: g}\n", ""),
        plain_pod("p-0", "  labels: {trainyard.io/pod-group: p}\n", "  activeDeadlineSeconds: 7200\n"),
        plain_pod("p-1", "  labels: {trainyard.io/pod-group: p}\n", "  activeDeadlineSeconds: 3600\n"),
        "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {name: h, namespace: ml}\nspec: {minMember: 1, walltime: 90m}\n".to_string(),
        plain_pod("h-0", "  labels: {trainyard.io/pod-group: h}\n", "  activeDeadlineSeconds: 7200\n"),
        plain_pod("plain", "", ""),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    assert_eq!(job(&loaded, "ml/g").walltime_seconds, Some(60));
    assert_eq!(job(&loaded, "ml/h").walltime_seconds, Some(5400));
    assert_eq!(job(&loaded, "ml/p").walltime_seconds, Some(3600));
    assert_eq!(job(&loaded, "ml/plain").walltime_seconds, None);
    let q = &loaded.snapshot.queues;
    let team = q.spec(q.get("team").unwrap());
    assert_eq!(
        (team.default_walltime_seconds, team.max_walltime_seconds),
        (Some(14_400), Some(86_400))
    );

    let text = [
        "apiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {name: q}\nspec: {maxWalltime: 0}\n".to_string(),
        "apiVersion: trainyard.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec: {walltime: 0s}\n".to_string(),
        plain_pod("bad", "", "  activeDeadlineSeconds: -5\n"),
    ]
    .join("---\n");
    expect![[r#"
        cluster.yaml: document 2: PodGroup ml/g: spec.walltime: "0s": expected a duration above zero
        cluster.yaml: document 3: Pod ml/bad: spec.activeDeadlineSeconds: -5: expected a positive number of seconds"#]].assert_eq(&errors_of(&text));
}

/// A pod's `terminationGracePeriodSeconds` is how long it may take to go
/// once evicted (the core waits that long for a preemptor's room); unset,
/// the core assumes Kubernetes' default; negative is named.
#[test]
fn termination_grace_is_read_and_a_negative_one_is_named() {
    let text = [
        plain_pod("slow", "", "  terminationGracePeriodSeconds: 600\n"),
        plain_pod("quick", "", "  terminationGracePeriodSeconds: 0\n"),
        plain_pod("plain", "", ""),
    ]
    .join("---\n");
    let loaded = load_one(&text).unwrap();
    let grace = |id: &str| job(&loaded, id).tasks[0].grace_seconds;
    assert_eq!(
        (grace("ml/slow"), grace("ml/quick"), grace("ml/plain")),
        (Some(600), Some(0), None)
    );
    expect![[r#"
        cluster.yaml: document 1: Pod ml/bad: spec.terminationGracePeriodSeconds: -1: expected a number of seconds, zero or more"#]]
    .assert_eq(&errors_of(&plain_pod("bad", "", "  terminationGracePeriodSeconds: -1\n")));
}
