//! The generated CustomResourceDefinitions: the committed files are the
//! generator's output, the schemas are structural (as kube-apiserver
//! requires), the CEL rules compile and say what they mean, and objects the
//! API would hold are read by the same reader as files.

use std::path::PathBuf;

use serde_json::{Value, json};
use trainyard_crd::{
    PodGroup, PodGroupResource, PodGroupSpec, Queue, QueueResource, QueueSpecDoc, crd_yaml, crds,
};

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds")
}

#[test]
fn committed_crds_are_the_generators_output() {
    let dir = deploy_dir();
    let mut stale = Vec::new();
    for crd in crds() {
        let name = trainyard_crd::resources::file_name(&crd);
        let want = crd_yaml(&crd).expect("a CRD renders as YAML");
        let path = dir.join(&name);
        match std::fs::read_to_string(&path) {
            Ok(got) if got == want => {}
            Ok(_) => stale.push(format!("{} differs", path.display())),
            Err(e) => stale.push(format!("{}: {e}", path.display())),
        }
    }
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let expected: Vec<String> = crds()
        .iter()
        .map(trainyard_crd::resources::file_name)
        .collect();
    for f in files {
        if !expected.contains(&f) {
            stale.push(format!("{}/{f} is not generated", dir.display()));
        }
    }
    assert!(
        stale.is_empty(),
        "deploy/crds is stale:\n  {}\nregenerate with: cargo run --bin trainyard -- crds --out-dir deploy/crds",
        stale.join("\n  ")
    );
}

/// Every rule kube-apiserver applies to a CRD's schema before it accepts it
/// ("structural schema"), checked at `path`; problems are collected.
fn check_structural(schema: &Value, path: &str, in_junctor: bool, problems: &mut Vec<String>) {
    let Some(obj) = schema.as_object() else {
        problems.push(format!("{path}: not an object"));
        return;
    };
    let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&json!(true));
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    if in_junctor {
        for forbidden in [
            "type",
            "description",
            "default",
            "nullable",
            "additionalProperties",
        ] {
            if obj.contains_key(forbidden) {
                problems.push(format!("{path}: {forbidden} inside anyOf/allOf/oneOf/not"));
            }
        }
    } else if !obj.contains_key("type") && !int_or_string && !preserve {
        problems.push(format!("{path}: no type"));
    }
    if obj.contains_key("$ref") {
        problems.push(format!("{path}: $ref (must be inlined)"));
    }
    if obj.contains_key("properties") && obj.contains_key("additionalProperties") {
        problems.push(format!("{path}: both properties and additionalProperties"));
    }
    if obj.get("additionalProperties") == Some(&json!(false)) {
        problems.push(format!("{path}: additionalProperties: false"));
    }
    if obj.get("uniqueItems") == Some(&json!(true)) {
        problems.push(format!("{path}: uniqueItems: true"));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            check_structural(v, &format!("{path}.{k}"), false, problems);
        }
    }
    if let Some(ap) = obj.get("additionalProperties")
        && ap.is_object()
    {
        check_structural(ap, &format!("{path}[*]"), false, problems);
    }
    if let Some(items) = obj.get("items") {
        check_structural(items, &format!("{path}[]"), false, problems);
    }
    for junctor in ["anyOf", "allOf", "oneOf"] {
        if let Some(list) = obj.get(junctor).and_then(Value::as_array) {
            for (i, v) in list.iter().enumerate() {
                check_structural(v, &format!("{path}.{junctor}[{i}]"), true, problems);
            }
        }
    }
}

fn schema_of(crd_name: &str) -> Value {
    let crd = crds()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(crd_name))
        .expect("the CRD exists");
    let v = serde_json::to_value(&crd.spec.versions[0]).expect("serializes");
    v["schema"]["openAPIV3Schema"].clone()
}

#[test]
fn schemas_are_structural() {
    let mut problems = Vec::new();
    for crd in crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        for v in &crd.spec.versions {
            let schema = serde_json::to_value(&v.schema).expect("serializes");
            check_structural(
                &schema["openAPIV3Schema"],
                &format!("{name}/{}", v.name),
                false,
                &mut problems,
            );
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn printer_columns_name_the_fields_users_look_at() {
    let cols = |name: &str| -> Vec<(String, String)> {
        let crd = crds()
            .into_iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .expect("the CRD exists");
        crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name, c.json_path))
            .collect()
    };
    expect_test::expect![[r#"
        [
            (
                "Parent",
                ".spec.parent",
            ),
            (
                "Weight",
                ".spec.overQuotaWeight",
            ),
            (
                "Quota GPUs",
                ".spec.quota.nvidia\\.com/gpu",
            ),
            (
                "Limit GPUs",
                ".spec.limit.nvidia\\.com/gpu",
            ),
            (
                "Allocated GPUs",
                ".status.allocated.nvidia\\.com/gpu",
            ),
            (
                "Requested GPUs",
                ".status.requested.nvidia\\.com/gpu",
            ),
            (
                "Fair share GPUs",
                ".status.fairShare.nvidia\\.com/gpu",
            ),
            (
                "Pending",
                ".status.pendingJobs",
            ),
            (
                "Running",
                ".status.runningJobs",
            ),
            (
                "Ready",
                ".status.conditions[?(@.type==\"Ready\")].status",
            ),
            (
                "Reason",
                ".status.conditions[?(@.type==\"Ready\")].reason",
            ),
            (
                "Age",
                ".metadata.creationTimestamp",
            ),
        ]
    "#]]
    .assert_debug_eq(&cols("queues.trainyard.io"));
    expect_test::expect![[r#"
        [
            (
                "Queue",
                ".spec.queue",
            ),
            (
                "Min member",
                ".spec.minMember",
            ),
            (
                "Phase",
                ".status.phase",
            ),
            (
                "Scheduled",
                ".status.scheduled",
            ),
            (
                "Reason",
                ".status.conditions[?(@.type==\"Scheduled\")].reason",
            ),
            (
                "Running",
                ".status.running",
            ),
            (
                "Age",
                ".metadata.creationTimestamp",
            ),
        ]
    "#]]
    .assert_debug_eq(&cols("podgroups.trainyard.io"));
}

/// The messages of the CEL rules of `crd_name` that fail on `object`.
fn cel_failures(crd_name: &str, object: &Value) -> Vec<String> {
    let schema = schema_of(crd_name);
    let compiled = kube_cel::compile_schema(&schema);
    assert!(
        !compiled.has_errors(),
        "CEL rules of {crd_name} do not compile: {:?}",
        compiled.compilation_errors()
    );
    match kube_cel::Validator::new().validate_compiled(&compiled, object, None) {
        Ok(()) => Vec::new(),
        Err(errors) => errors
            .into_vec()
            .into_iter()
            .map(|e| e.to_string())
            .collect(),
    }
}

#[test]
fn queue_limit_must_cover_quota() {
    let queue = |quota: Value, limit: Value| {
        json!({
            "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": "a"},
            "spec": {"quota": quota, "limit": limit}
        })
    };
    let ok = [
        queue(json!({"nvidia.com/gpu": 8}), json!({"nvidia.com/gpu": 16})),
        queue(json!({"nvidia.com/gpu": 8}), json!({"nvidia.com/gpu": "8"})),
        queue(json!({"memory": "64Gi"}), json!({"memory": "128Gi"})),
        queue(json!({"cpu": "500m"}), json!({"cpu": 1})),
        queue(
            json!({"nvidia.com/gpu": 8}),
            json!({"nvidia.com/gpu": "unlimited"}),
        ),
        queue(json!({"nvidia.com/gpu": 8}), json!({"cpu": 4})),
        queue(json!({}), json!({})),
    ];
    for q in &ok {
        assert_eq!(
            cel_failures("queues.trainyard.io", q),
            Vec::<String>::new(),
            "{q}"
        );
    }
    let bad = queue(
        json!({"nvidia.com/gpu": 8, "memory": "1Ti"}),
        json!({"nvidia.com/gpu": 4, "memory": "512Gi"}),
    );
    let failures = cel_failures("queues.trainyard.io", &bad);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].contains("each limit must be at least the quota"),
        "{failures:?}"
    );
}

/// The CEL messages for one bad Queue spec, and what the reader says of
/// the same spec (its messages without the object and field).
fn cel_and_reader(spec: Value) -> (Vec<String>, Vec<String>) {
    let object = json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
        "metadata": {"name": "a"}, "spec": spec
    });
    let cel = cel_failures("queues.trainyard.io", &object);
    let reader = match Queue::from_value(&object).and_then(|q| q.to_spec()) {
        Ok(_) => Vec::new(),
        Err(e) => e.0.into_iter().map(|e| e.message).collect(),
    };
    (cel, reader)
}

#[test]
fn bad_quantities_get_the_readers_words_from_the_api_server() {
    for (spec, want) in [
        (
            json!({"quota": {"nvidia.com/gpu": "8 GPUs"}}),
            "invalid quantity \"8 GPUs\"; expected a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent (e.g. 1e3), such as \"500m\", \"8\" or \"64Gi\"",
        ),
        (
            json!({"quota": {"nvidia.com/gpu": -1}}),
            "quantity \"-1\" is negative; expected an amount of zero or more",
        ),
        (
            json!({"quota": {"memory": "-2Gi"}}),
            "quantity \"-2Gi\" is negative; expected an amount of zero or more",
        ),
        (
            json!({"limit": {"cpu": "lots"}}),
            "invalid quantity \"lots\"; expected a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent (e.g. 1e3), such as \"500m\", \"8\" or \"64Gi\", or \"unlimited\"",
        ),
        (
            json!({"limit": {"nvidia.com/gpu": -4}}),
            "quantity \"-4\" is negative; expected an amount of zero or more, or \"unlimited\"",
        ),
    ] {
        let (cel, reader) = cel_and_reader(spec.clone());
        assert_eq!(cel.len(), 1, "{spec}: {cel:?}");
        assert!(cel[0].ends_with(want), "{spec}: {cel:?}");
        assert_eq!(reader, [want], "{spec}: the reader's words");
    }
}

#[test]
fn good_quantities_pass_the_rules() {
    for spec in [
        json!({"quota": {"nvidia.com/gpu": 8, "cpu": "500m", "memory": "64Gi", "x/y": "1e3", "z/w": 0}}),
        json!({"quota": {"nvidia.com/gpu": "0.5", "cpu": ".5", "memory": "+1Ki"}}),
        json!({"limit": {"nvidia.com/gpu": "unlimited", "cpu": 0, "memory": "1Ti"}}),
        json!({"quota": {"nvidia.com/gpu": "-0"}}),
    ] {
        assert_eq!(
            cel_and_reader(spec.clone()).0,
            Vec::<String>::new(),
            "{spec}"
        );
    }
}

#[test]
fn a_limit_below_its_quota_names_both_numbers() {
    let (cel, reader) = cel_and_reader(json!({
        "quota": {"nvidia.com/gpu": 8, "memory": "1Ti", "cpu": 4},
        "limit": {"nvidia.com/gpu": 16, "memory": "512Gi"}
    }));
    expect_test::expect![[r#"
        [
            "spec.limit: quota 1Ti memory is above its own limit 512Gi; each limit must be at least the quota of the same resource (or \"unlimited\")",
        ]
    "#]]
    .assert_debug_eq(&cel);
    assert!(
        reader.is_empty(),
        "the reader checks this on the tree: {reader:?}"
    );
    // Two resources below their quotas: one rule, one message, naming one
    // of them (CEL does not order a map's keys).
    let (cel, _) = cel_and_reader(json!({
        "quota": {"nvidia.com/gpu": 8, "memory": "1Ti"},
        "limit": {"nvidia.com/gpu": 4, "memory": "512Gi"}
    }));
    assert_eq!(cel.len(), 1, "{cel:?}");
    assert!(
        cel[0].contains("quota 8 nvidia.com/gpu is above its own limit 4")
            || cel[0].contains("quota 1Ti memory is above its own limit 512Gi"),
        "{cel:?}"
    );
    // Mixed forms compare as quantities.
    let (cel, _) = cel_and_reader(json!({
        "quota": {"nvidia.com/gpu": "8"}, "limit": {"nvidia.com/gpu": 4}
    }));
    assert_eq!(cel.len(), 1, "{cel:?}");
    assert!(
        cel[0].contains("quota 8 nvidia.com/gpu is above its own limit 4"),
        "{cel:?}"
    );
    let (cel, _) = cel_and_reader(json!({
        "quota": {"nvidia.com/gpu": 8}, "limit": {"nvidia.com/gpu": "8000m"}
    }));
    assert_eq!(cel, Vec::<String>::new());
    // A bad value is told once, by its own rule.
    let (cel, _) = cel_and_reader(json!({
        "quota": {"nvidia.com/gpu": "x"}, "limit": {"nvidia.com/gpu": 4}
    }));
    assert_eq!(cel.len(), 1, "{cel:?}");
    assert!(cel[0].contains("invalid quantity \"x\""), "{cel:?}");
}

#[test]
fn quota_and_limit_values_carry_no_pattern() {
    // A pattern's failure is told as the regular expression itself; the
    // rules above say it in words instead.
    let schema = schema_of("queues.trainyard.io");
    for field in ["quota", "limit"] {
        let value = &schema["properties"]["spec"]["properties"][field]["additionalProperties"];
        assert!(value.get("pattern").is_none(), "{field}: {value}");
        assert_eq!(value["maxLength"], 64, "{field}: {value}");
        // kube-apiserver refuses `2.5` by type before any rule runs; what
        // `kubectl explain` shows says to quote it.
        let description = value["description"].as_str().unwrap_or_default();
        assert!(
            description.contains("Quote a number with a fraction (\"2.5\")"),
            "{field}: {description}"
        );
    }
}

#[test]
fn objects_of_the_api_types_are_read_by_the_file_reader() {
    let spec: QueueSpecDoc = serde_json::from_value(json!({
        "parent": "research",
        "overQuotaWeight": 2,
        "quota": {"nvidia.com/gpu": 16, "memory": "2Ti"},
        "limit": {"nvidia.com/gpu": 32, "cpu": "unlimited"},
        "minRuntime": "30m"
    }))
    .expect("a spec");
    let object = serde_json::to_value(QueueResource::new("nlp", spec)).expect("serializes");
    let read = Queue::from_value(&object).expect("the reader takes the API object");
    let model = read.to_spec().expect("valid");
    assert_eq!(model.name, "nlp");
    assert_eq!(model.parent.as_deref(), Some("research"));
    assert_eq!(model.min_runtime_seconds, Some(1800));

    let spec: PodGroupSpec = serde_json::from_value(json!({
        "queue": "nlp", "minMember": 4,
        "subGroups": [{"name": "workers", "minMember": 3}],
        "topology": {"required": "leaf"}
    }))
    .expect("a spec");
    let mut pg = PodGroupResource::new("train", spec);
    pg.metadata.namespace = Some("ml".into());
    let object = serde_json::to_value(&pg).expect("serializes");
    let read = PodGroup::from_value(&object).expect("the reader takes the API object");
    read.validate().expect("valid");
    assert_eq!(read.spec.min_member, 4);
    assert_eq!(read.object(), "PodGroup ml/train");
}

/// Kubernetes versions the CRDs are checked against.
const KUBERNETES_VERSIONS: &[&str] = &["1.35.0", "1.36.0", "1.37.0"];

#[test]
fn committed_crds_pass_kubernetes_validate_strict() {
    let probe = std::process::Command::new("kubernetes-validate")
        .arg("--version")
        .output();
    if probe.is_err() {
        let reason =
            "kubernetes-validate not found on PATH (install it with scripts/install-test-tools.sh)";
        assert!(
            std::env::var_os("TRAINYARD_REQUIRE_TOOLS").is_none(),
            "TRAINYARD_REQUIRE_TOOLS is set but {reason}"
        );
        println!("SKIPPED: {reason}");
        return;
    }
    let files: Vec<PathBuf> = crds()
        .iter()
        .map(|c| deploy_dir().join(trainyard_crd::resources::file_name(c)))
        .collect();
    for version in KUBERNETES_VERSIONS {
        let out = std::process::Command::new("kubernetes-validate")
            .args(["--strict", "--kubernetes-version", version])
            .args(&files)
            .output()
            .expect("kubernetes-validate runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "Kubernetes {version}:\n{text}");
        assert_eq!(
            text.matches("passed for resource").count(),
            files.len(),
            "Kubernetes {version}: expected every CRD to pass:\n{text}"
        );
    }
}
