use super::cluster::node_name;
use super::*;

#[test]
fn durations() {
    let d = |s: &str| parse_duration_ms(&serde_json::Value::String(s.into()));
    assert_eq!(parse_duration_ms(&serde_json::json!(90)), Ok(90_000));
    assert_eq!(d("15m"), Ok(900_000));
    assert_eq!(d("1.5h"), Ok(5_400_000));
    assert_eq!(d("250ms"), Ok(250));
    assert_eq!(d("2d"), Ok(172_800_000));
    assert!(d("-5s").unwrap_err().contains("non-negative"));
    assert!(d("5y").unwrap_err().contains("unknown duration unit"));
    assert!(parse_duration_ms(&serde_json::json!(-3)).is_err());
    assert!(
        d("100000000000d")
            .unwrap_err()
            .contains("at most 100 years")
    );
}

#[test]
fn slowdown_is_exact_and_rounds_down() {
    let p = |v: serde_json::Value| Slowdown::parse(&v);
    assert_eq!(
        p(serde_json::json!(0.25)).unwrap().per_spine_crossing_ppm,
        250_000
    );
    assert_eq!(
        p(serde_json::json!("1.5")).unwrap().per_spine_crossing_ppm,
        1_500_000
    );
    assert_eq!(
        p(serde_json::json!(0.000001))
            .unwrap()
            .per_spine_crossing_ppm,
        1
    );
    assert_eq!(
        p(serde_json::json!(100)).unwrap().per_spine_crossing_ppm,
        100_000_000
    );
    assert!(p(serde_json::json!(100.5)).is_err());
    assert!(p(serde_json::json!("abc")).is_err());
    assert!(p(serde_json::json!(".")).is_err());
    assert!(p(serde_json::json!(true)).is_err());
    assert!(p(serde_json::json!("-0.5")).is_err());
    assert_eq!(
        p(serde_json::json!("2.5e-1"))
            .unwrap()
            .per_spine_crossing_ppm,
        250_000
    );
    assert_eq!(
        p(serde_json::json!("0.2500000"))
            .unwrap()
            .per_spine_crossing_ppm,
        250_000
    );
    assert_eq!(p(serde_json::json!(0)).unwrap(), Slowdown::default());
    assert!(
        p(serde_json::json!(1e300))
            .unwrap_err()
            .contains("at most 100")
    );
    assert!(
        p(serde_json::json!("1e-7"))
            .unwrap_err()
            .contains("six decimal")
    );
    let s = p(serde_json::json!(0.25)).unwrap();
    // 1 h, 3 of 4 hops cross: 3600000 × 250000 × 3 / 4000000 = 675000.
    assert_eq!(s.extra_ms(3_600_000, 3, 4), 675_000);
    // 7 ms × 0.25 × 1/3 = 0.583… ms → 0.
    assert_eq!(s.extra_ms(7, 1, 3), 0);
    // 1001 ms × 0.25 = 250.25 → 250.
    assert_eq!(s.extra_ms(1001, 1, 1), 250);
    assert_eq!(s.extra_ms(3_600_000, 0, 4), 0);
    assert_eq!(s.extra_ms(3_600_000, 0, 0), 0);
    assert_eq!(s.factor_ppm(1, 3), 83_333);
    assert_eq!(Slowdown::default().extra_ms(3_600_000, 4, 4), 0);
    // Bounded like every duration.
    let big = p(serde_json::json!(100)).unwrap();
    assert_eq!(big.extra_ms(MAX_DURATION_MS, 1, 1), MAX_DURATION_MS);
}

#[test]
fn node_names() {
    assert_eq!(node_name("h100-{index:03}", 7).unwrap(), "h100-007");
    assert_eq!(node_name("n{index}", 12).unwrap(), "n12");
    assert!(node_name("fixed", 1).is_err());
}

#[test]
fn cluster_spec_expands_pools() {
    let text = r#"
apiVersion: trainyard.io/v1alpha1
kind: ClusterSpec
metadata: {name: tiny}
spec:
  nodePools:
  - {name: gpu, count: 2, cpu: "96", memory: 1Ti, cpuSockets: 2, gpu: {count: 8, model: H100, memory: 80Gi}}
  - {name: cpu, count: 1, cpu: "64", memory: 256Gi, taints: [{key: k, value: v, effect: NoSchedule}]}
  faults:
  - {at: 1h, node: gpu-001, event: down}
"#;
    let c = parse_cluster(text, "c.yaml").unwrap();
    let names: Vec<_> = c.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["cpu-000", "gpu-000", "gpu-001"]);
    assert_eq!(c.nodes[1].allocatable.gpu, 8000);
    assert_eq!(c.nodes[1].gpus[3].memory_bytes, 80 << 30);
    assert_eq!(c.nodes[1].labels["nvidia.com/gpu.product"], "H100");
    assert_eq!(
        c.faults,
        vec![Fault {
            at: Timestamp(3_600_000),
            node: "gpu-001".into(),
            up: false
        }]
    );
}

#[test]
fn cluster_spec_errors_name_file_and_field() {
    let bad =
        "kind: ClusterSpec\nspec:\n  nodePools:\n  - {name: g, count: 1, cpu: 12x, memory: 1Gi}\n";
    let e = parse_cluster(bad, "c.yaml").unwrap_err().to_string();
    assert!(
        e.starts_with("c.yaml: document 1: ClusterSpec: spec.nodePools[0].cpu: invalid quantity"),
        "{e}"
    );
    let bad = "kind: ClusterSpec\nspec:\n  nodePools:\n  - {name: g, count: 1, cpu: 1, memory: 1Gi, gpus: 8}\n";
    let e = parse_cluster(bad, "c.yaml").unwrap_err().to_string();
    assert_eq!(
        e,
        "c.yaml: document 1: ClusterSpec: spec.nodePools[0].gpus: unknown field `gpus`, expected one of `name`, `count`, `namePattern`, `cpu`, `memory`, `pods`, `cpuSockets`, `gpu`, `labels`, `taints`, `extended`, `dra`"
    );
    let bad = "kind: ClusterSpec\nmetadata: {name: c1}\nspec:\n  nodePools:\n  - {name: g, count: 1, cpu: 1, memory: 1Gi}\n  faults: [{at: 1h, node: nope, event: down}]\n";
    let e = parse_cluster(bad, "c.yaml").unwrap_err().to_string();
    assert_eq!(
        e,
        "c.yaml: document 1: ClusterSpec c1: spec.faults[0].node: no node named \"nope\" in the node pools"
    );
}

#[test]
fn every_type_error_of_a_document_is_reported() {
    let bad = "kind: ClusterSpec\nmetadata: {name: c1}\nspec:\n  nodePools:\n  - {name: g, count: ten, cpu: 1, memory: 1Gi, gpus: 8}\n  - {name: h, count: 0, cpu: 1, memory: 1Gi, gpu: {count: 65}}\n  - {name: i, cpu: 1, memory: 1Gi, labels: [a]}\n  - {name: j, count: 1, cpu: 1, memory: 1Gi}\n  - {name: k, count: -1, cpu: 1, memory: 1Gi}\n  faults: 3\n";
    let e = parse_cluster(bad, "c.yaml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "c.yaml: document 1: ClusterSpec c1: spec.faults: expected a sequence, found 3
c.yaml: document 1: ClusterSpec c1: spec.nodePools[0].count: expected a whole number from 1 to 100000, found \"ten\"
c.yaml: document 1: ClusterSpec c1: spec.nodePools[0].gpus: unknown field `gpus`, expected one of `name`, `count`, `namePattern`, `cpu`, `memory`, `pods`, `cpuSockets`, `gpu`, `labels`, `taints`, `extended`, `dra`
c.yaml: document 1: ClusterSpec c1: spec.nodePools[1].count: expected a whole number from 1 to 100000, found 0
c.yaml: document 1: ClusterSpec c1: spec.nodePools[1].gpu.count: expected a whole number from 0 to 64, found 65
c.yaml: document 1: ClusterSpec c1: spec.nodePools[2].labels: expected a mapping, found a sequence
c.yaml: document 1: ClusterSpec c1: spec.nodePools[4].count: expected a whole number from 1 to 100000, found -1"
    );
    // (A missing field next to a bad one in the same object is not
    // told apart from the removal of the bad one.)
    assert_eq!(e.0.len(), 7);
    assert!(
        e.0.iter()
            .all(|p| p.document == Some(1) && p.object.as_deref() == Some("ClusterSpec c1"))
    );
}

#[test]
fn many_problems_stop_at_the_limit() {
    let mut text = "kind: ClusterSpec\nspec:\n  nodePools:\n".to_string();
    for i in 0..30 {
        text.push_str(&format!(
            "  - {{name: p{i}, count: x, cpu: 1, memory: 1Gi}}\n"
        ));
    }
    let e = parse_cluster(&text, "c.yaml").unwrap_err();
    assert_eq!(e.0.len(), MAX_PROBLEMS_PER_DOCUMENT);
    assert_eq!(
        e.0.last().map(ToString::to_string).unwrap_or_default(),
        "c.yaml: document 1: ClusterSpec: spec.nodePools[19].count: expected a whole number from 1 to 100000, found \"x\" (stopped after 20 problems)"
    );
}

#[test]
fn sizes_are_bounded() {
    let pool = |count: &str| {
        format!(
            "kind: ClusterSpec\nspec:\n  nodePools:\n  - {{name: g, count: {count}, cpu: 1, memory: 1Gi}}\n"
        )
    };
    assert_eq!(
        parse_cluster(&pool("10000000"), "c.yaml")
            .unwrap_err()
            .to_string(),
        "c.yaml: document 1: ClusterSpec: spec.nodePools[0].count: expected a whole number from 1 to 100000, found 10000000"
    );
    assert_eq!(
        parse_cluster(&pool("0"), "c.yaml").unwrap_err().to_string(),
        "c.yaml: document 1: ClusterSpec: spec.nodePools[0].count: expected a whole number from 1 to 100000, found 0"
    );
    let two = "kind: ClusterSpec\nspec:\n  nodePools:\n  - {name: g, count: 60000, cpu: 1, memory: 1Gi}\n  - {name: h, count: 60000, cpu: 1, memory: 1Gi}\n";
    assert_eq!(
        parse_cluster(two, "c.yaml").unwrap_err().to_string(),
        "c.yaml: document 1: ClusterSpec: spec.nodePools: expected at most 100000 nodes in all pools together, found 120000"
    );
    let gpus = "kind: ClusterSpec\nspec:\n  nodePools:\n  - {name: g, count: 1, cpu: 1, memory: 1Gi, gpu: {count: 1000}}\n";
    assert_eq!(
        parse_cluster(gpus, "c.yaml").unwrap_err().to_string(),
        "c.yaml: document 1: ClusterSpec: spec.nodePools[0].gpu.count: expected a whole number from 0 to 64, found 1000"
    );
}

#[test]
fn empty_and_malformed_files_say_so() {
    for empty in ["", "\n", "# only a comment\n", "---\n", "---\n...\n"] {
        assert_eq!(
            parse_cluster(empty, "c.yaml").unwrap_err().to_string(),
            "c.yaml: is empty; expected a ClusterSpec document (apiVersion: trainyard.io/v1alpha1, kind: ClusterSpec)",
            "{empty:?}"
        );
    }
    assert_eq!(
        parse_cluster("spec: [\n", "c.yaml")
            .unwrap_err()
            .to_string(),
        "c.yaml: invalid YAML: unclosed bracket '[' at line 1, column 7"
    );
    let two = "kind: ClusterSpec\nspec: {nodePools: []}\n---\nkind: ClusterSpec\n";
    assert_eq!(
        parse_cluster(two, "c.yaml").unwrap_err().to_string(),
        "c.yaml: document 2: expected one document per file (a ClusterSpec document (apiVersion: trainyard.io/v1alpha1, kind: ClusterSpec)), found a second one"
    );
    assert_eq!(
        parse_cluster("- a\n", "c.yaml").unwrap_err().to_string(),
        "c.yaml: document 1: expected a ClusterSpec document (apiVersion: trainyard.io/v1alpha1, kind: ClusterSpec), found a sequence"
    );
    assert_eq!(
        parse_cluster("kind: Cluster\n", "c.yaml")
            .unwrap_err()
            .to_string(),
        "c.yaml: document 1: kind: expected ClusterSpec, found \"Cluster\""
    );
    assert_eq!(
        parse_cluster("spec: {}\n", "c.yaml")
            .unwrap_err()
            .to_string(),
        "c.yaml: document 1: kind: missing; expected ClusterSpec"
    );
    assert_eq!(
        parse_cluster("apiVersion: v1\nkind: ClusterSpec\n", "c.yaml")
            .unwrap_err()
            .to_string(),
        "c.yaml: document 1: ClusterSpec: apiVersion: expected \"trainyard.io/v1alpha1\", found \"v1\""
    );
}

/// Random trees shaped like the documents (their field names, mixed
/// types): reading never panics or loops, and a failure always says
/// something, with at most the limit of problems.
fn doc_tree() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        (-3i64..200_000).prop_map(serde_json::Value::from),
        "[a-z0-9]{0,3}".prop_map(serde_json::Value::from),
    ];
    let keys = prop_oneof![
        Just("name"),
        Just("count"),
        Just("cpu"),
        Just("memory"),
        Just("gpu"),
        Just("labels"),
        Just("nodePools"),
        Just("faults"),
        Just("topology"),
        Just("jobs"),
        Just("tasks"),
        Just("queue"),
        Just("submit"),
        Just("duration"),
        Just("minMember"),
        Just("requests"),
        Just("templates"),
        Just("seed"),
        Just("arrival"),
        Just("pods"),
        Just("fixed"),
        Just("poisson"),
        Just("x"),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(keys.clone(), inner, 0..6).prop_map(|m| {
                serde_json::Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

proptest::proptest! {
    #[test]
    fn reading_arbitrary_documents_never_panics(spec in doc_tree(), kind in 0usize..3) {
        let kind = ["ClusterSpec", "Workload", "WorkloadGenerator"][kind];
        let text = serde_json::json!({"kind": kind, "spec": spec}).to_string();
        let result = if kind == "ClusterSpec" {
            parse_cluster(&text, "f.yaml").err()
        } else {
            crate::workload::parse_workload(&text, "f.yaml").err()
        };
        if let Some(e) = result {
            proptest::prop_assert!(!e.0.is_empty());
            proptest::prop_assert!(e.0.len() <= MAX_PROBLEMS_PER_DOCUMENT);
            proptest::prop_assert!(e.0.iter().all(|p| p.source_name == "f.yaml" && !p.message.is_empty()));
        }
    }
}

#[test]
fn dra_pools_are_recorded_as_node_labels() {
    use crate::dra::{DraPublish, LABEL_GPU_DRIVER, LABEL_NICS};
    let text = "kind: ClusterSpec
spec:
  nodePools:
  - {name: dra, count: 2, cpu: 96, memory: 1Ti, gpu: {count: 8, model: H100}, dra: {nics: 8, nicDriver: dra.net}}
  - {name: nic, count: 1, cpu: 96, memory: 1Ti, gpu: {count: 8}, dra: {gpus: false, nics: 4, nicDriver: dra.net}}
  - {name: plain, count: 1, cpu: 96, memory: 1Ti, gpu: {count: 8}}
";
    let c = parse_cluster(text, "c.yaml").unwrap();
    let by = |name: &str| {
        c.nodes
            .iter()
            .find(|n| n.name == name)
            .and_then(DraPublish::from_labels)
    };
    assert_eq!(
        by("dra-000"),
        Some(DraPublish {
            nics: 8,
            nic_driver: "dra.net".into(),
            ..DraPublish::default()
        })
    );
    assert_eq!(
        by("nic-000"),
        Some(DraPublish {
            gpus: false,
            nics: 4,
            nic_driver: "dra.net".into(),
            ..DraPublish::default()
        })
    );
    assert_eq!(by("plain-000"), None);
    // The spec keeps the pool's GPUs on its nodes; the engine publishes them.
    let n = &c.nodes[0];
    assert_eq!(
        (n.gpus.len(), n.labels[LABEL_GPU_DRIVER].as_str()),
        (8, "gpu.nvidia.com")
    );
    assert_eq!(n.labels[LABEL_NICS], "8");
}

#[test]
fn dra_pool_errors_name_the_field() {
    let err = |pools: &str, extra: &str| {
        let text = format!(
            "kind: ClusterSpec\nmetadata: {{name: c1}}\nspec:\n  nodePools:\n{pools}{extra}"
        );
        parse_cluster(&text, "c.yaml").unwrap_err().to_string()
    };
    let p = "c.yaml: document 1: ClusterSpec c1: spec.";
    let gpu = "cpu: 1, memory: 1Gi, gpu: {count: 8}";
    assert_eq!(
        err(
            "  - {name: a, count: 1, cpu: 1, memory: 1Gi, dra: {nics: 2}}\n",
            ""
        ),
        format!(
            "{p}nodePools[0].dra.gpus: the pool has no GPUs to publish (gpu.count is 0 or missing); set gpus: false to publish NICs only"
        )
    );
    assert_eq!(
        err(
            &format!("  - {{name: a, count: 1, {gpu}, dra: {{gpus: false}}}}\n"),
            ""
        ),
        format!("{p}nodePools[0].dra: publishes no devices; set gpus: true or nics above 0")
    );
    assert_eq!(
        err(
            &format!("  - {{name: a, count: 1, {gpu}, dra: {{driver: GPU_Driver}}}}\n"),
            ""
        ),
        format!(
            "{p}nodePools[0].dra.driver: expected a driver name such as gpu.nvidia.com (a DNS subdomain: lowercase letters, digits, '-' and '.', at most 63 characters), found \"GPU_Driver\""
        )
    );
    assert_eq!(
        err(
            &format!(
                "  - {{name: a, count: 1, {gpu}, dra: {{nics: 1, nicDriver: gpu.nvidia.com}}}}\n"
            ),
            ""
        ),
        format!(
            "{p}nodePools[0].dra.nicDriver: \"gpu.nvidia.com\" is also the GPU driver; GPUs and NICs need drivers of their own"
        )
    );
    assert_eq!(
        err(
            &format!(
                "  - {{name: a, count: 1, {gpu}, dra: {{}}}}\n  - {{name: b, count: 1, {gpu}, dra: {{driver: gpu.example.com}}}}\n"
            ),
            ""
        ),
        format!(
            "{p}nodePools[1].dra.driver: \"gpu.example.com\" differs from \"gpu.nvidia.com\" of nodePools[0]; all pools publish their devices of one kind with one driver (one DeviceClass)"
        )
    );
    assert_eq!(
        err(
            &format!(
                "  - {{name: a, count: 1, {gpu}, dra: {{}}}}\n  - {{name: b, count: 1, {gpu}, dra: {{gpus: false, nics: 2, nicDriver: gpu.nvidia.com}}}}\n"
            ),
            ""
        ),
        format!(
            "{p}nodePools[1].dra.nicDriver: \"gpu.nvidia.com\" is the GPU driver of nodePools[0]; GPUs and NICs need drivers of their own"
        )
    );
    // Type errors, all at once, with the field path.
    assert_eq!(
        err(&format!("  - {{name: a, count: 1, {gpu}, dra: {{nics: 65, gpus: yes, rails: 8}}}}\n"), ""),
        format!("{p}nodePools[0].dra.gpus: expected true or false, found \"yes\"
{p}nodePools[0].dra.nics: expected a whole number from 0 to 64, found 65
{p}nodePools[0].dra.rails: unknown field `rails`, expected one of `gpus`, `nics`, `driver`, `nicDriver`")
    );
}
