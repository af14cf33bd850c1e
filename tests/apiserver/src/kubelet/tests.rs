//! The simulated kubelet's steps and its admission, on a manual clock.
use super::*;
use crate::state::WriteOpts;
use crate::time::Clock;

const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

fn state() -> State {
    State::new(10_000, Clock::Manual(T0), KubeletConfig::default(), 7)
}

fn def(st: &State, key: &str) -> ResourceDef {
    st.registry.by_key(key).cloned().expect("served")
}

fn node(st: &mut State, name: &str, allocatable: Value) {
    let d = def(st, "/nodes");
    let n = json!({"metadata": {"name": name}, "status": {"allocatable": allocatable}});
    st.create(&d, "v1", None, n, &WriteOpts::default())
        .expect("node");
}

/// Creates `name` in `default` with one container requesting `requests`
/// (extra fields of `spec` merged in) and binds it to `node`.
fn bound(st: &mut State, name: &str, requests: Value, node: &str) {
    pod_with(
        st,
        name,
        json!({"containers": [{"name": "c", "image": "img",
        "resources": {"requests": requests}}]}),
        node,
    );
}

fn pod_with(st: &mut State, name: &str, spec: Value, node: &str) {
    let d = def(st, "/pods");
    let p = json!({"metadata": {"name": name, "annotations": {RUN_SECONDS: "60"}}, "spec": spec});
    let p = st
        .create(&d, "v1", Some("default"), p, &WriteOpts::default())
        .expect("pod");
    bind(st, &d, &p, node);
}

fn pod(st: &State, name: &str) -> Value {
    st.store
        .get("/pods", "default", name)
        .cloned()
        .expect("pod")
}

fn phase(st: &State, name: &str) -> String {
    pod(st, name)["status"]["phase"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn gpu_node() -> Value {
    json!({"cpu": "8", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"})
}

#[test]
fn of_two_six_gpu_pods_on_an_eight_gpu_node_one_runs_and_one_is_rejected() {
    let mut st = state();
    node(&mut st, "gpu-1", gpu_node());
    bound(&mut st, "b", json!({"nvidia.com/gpu": "6"}), "gpu-1");
    bound(&mut st, "a", json!({"nvidia.com/gpu": "6"}), "gpu-1");
    // Both are judged in one step: same creation second, so by name.
    assert_eq!(step(&mut st), 2);
    assert_eq!(phase(&st, "a"), "Running");
    let b = pod(&st, "b");
    assert_eq!(b["status"]["phase"], "Failed");
    assert_eq!(b["status"]["reason"], "OutOfnvidia.com/gpu");
    assert_eq!(
        b["status"]["message"],
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 6, used: 6, capacity: 8"
    );
    // Left as a kubelet leaves a rejected pod: the scheduler's condition
    // only, a start time, no IP, no container statuses.
    let types: Vec<&Value> = b["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| &c["type"])
        .collect();
    assert_eq!(types, [&json!("PodScheduled")]);
    assert_eq!(b["status"]["startTime"], json!(format_rfc3339(T0)));
    assert_eq!(b["status"]["qosClass"], "BestEffort");
    assert!(b["status"].get("podIP").is_none() && b["status"].get("containerStatuses").is_none());
    // A Warning event with the reason; no Started event for it.
    let events = st.store.list("/events", Some("default"));
    let about_b: Vec<&Value> = events
        .iter()
        .filter(|e| e["involvedObject"]["name"] == "b")
        .collect();
    assert_eq!(about_b.len(), 1);
    assert_eq!(about_b[0]["type"], "Warning");
    assert_eq!(about_b[0]["reason"], "OutOfnvidia.com/gpu");
    // It never runs, however long the kubelet steps.
    st.clock.advance(120);
    step(&mut st);
    assert_eq!(phase(&st, "b"), "Failed");
    assert_eq!(phase(&st, "a"), "Succeeded");
}

#[test]
fn admission_order_is_creation_time_then_name() {
    let mut st = state();
    node(&mut st, "gpu-1", gpu_node());
    bound(&mut st, "z-early", json!({"nvidia.com/gpu": "6"}), "gpu-1");
    st.clock.advance(1);
    // Created later: judged after z-early though its name sorts first.
    // Bound before the step, so both are due in the same one.
    bound(&mut st, "a-late", json!({"nvidia.com/gpu": "6"}), "gpu-1");
    step(&mut st);
    assert_eq!(phase(&st, "z-early"), "Running");
    assert_eq!(phase(&st, "a-late"), "Failed");
}

#[test]
fn cpu_and_memory_overflow_are_out_of_cpu_and_out_of_memory() {
    let mut st = state();
    node(&mut st, "n", gpu_node());
    bound(
        &mut st,
        "big",
        json!({"cpu": "7500m", "memory": "2Gi"}),
        "n",
    );
    step(&mut st);
    assert_eq!(phase(&st, "big"), "Running");
    bound(&mut st, "cpu", json!({"cpu": "1"}), "n");
    bound(
        &mut st,
        "mem",
        json!({"cpu": "100m", "memory": "63Gi"}),
        "n",
    );
    bound(&mut st, "small", json!({"cpu": "0.5"}), "n");
    step(&mut st);
    let cpu = pod(&st, "cpu");
    assert_eq!(cpu["status"]["reason"], "OutOfcpu");
    assert_eq!(
        cpu["status"]["message"],
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000, used: 7500, capacity: 8000"
    );
    let mem = pod(&st, "mem");
    assert_eq!(mem["status"]["reason"], "OutOfmemory");
    assert_eq!(
        mem["status"]["message"],
        format!(
            "Pod was rejected: Node didn't have enough resource: memory, requested: {}, used: {}, capacity: {}",
            63u64 << 30,
            2u64 << 30,
            64u64 << 30
        )
    );
    // 7500m + 500m is exactly the node's 8 cores.
    assert_eq!(phase(&st, "small"), "Running");
}

#[test]
fn a_pod_fits_once_another_has_succeeded() {
    let mut st = state();
    node(&mut st, "gpu-1", gpu_node());
    bound(&mut st, "first", json!({"nvidia.com/gpu": "6"}), "gpu-1");
    step(&mut st);
    assert_eq!(phase(&st, "first"), "Running");
    let second = json!({"metadata": {"name": "second", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "img",
            "resources": {"requests": {"nvidia.com/gpu": "6"}}}]}});
    assert_eq!(
        admission(&st, &second, "gpu-1").map_err(|r| r.reason),
        Err("OutOfnvidia.com/gpu".to_string())
    );
    st.clock.advance(60);
    step(&mut st);
    assert_eq!(phase(&st, "first"), "Succeeded");
    assert_eq!(admission(&st, &second, "gpu-1"), Ok(()));
    bound(&mut st, "second", json!({"nvidia.com/gpu": "6"}), "gpu-1");
    step(&mut st);
    assert_eq!(phase(&st, "second"), "Running");
}

#[test]
fn a_pod_finishing_in_the_same_step_frees_its_room() {
    let mut st = state();
    node(&mut st, "gpu-1", gpu_node());
    bound(&mut st, "first", json!({"nvidia.com/gpu": "8"}), "gpu-1");
    step(&mut st);
    st.clock.advance(60);
    bound(&mut st, "next", json!({"nvidia.com/gpu": "8"}), "gpu-1");
    step(&mut st);
    assert_eq!(phase(&st, "first"), "Succeeded");
    assert_eq!(phase(&st, "next"), "Running");
}

#[test]
fn pods_count_missing_resources_and_requests_add_up_as_kubernetes_does() {
    let mut st = state();
    node(&mut st, "two", json!({"cpu": "4", "pods": "2"}));
    for n in ["p1", "p2", "p3"] {
        bound(&mut st, n, json!({}), "two");
    }
    // A resource the node does not list is allocatable 0 when requested.
    node(
        &mut st,
        "cpu-only",
        json!({"cpu": "4", "memory": "8Gi", "pods": "10"}),
    );
    bound(
        &mut st,
        "wants-gpu",
        json!({"nvidia.com/gpu": "1"}),
        "cpu-only",
    );
    bound(
        &mut st,
        "zero-gpu",
        json!({"nvidia.com/gpu": "0"}),
        "cpu-only",
    );
    step(&mut st);
    assert_eq!(
        (phase(&st, "p1"), phase(&st, "p2")),
        ("Running".into(), "Running".into())
    );
    let p3 = pod(&st, "p3");
    assert_eq!(p3["status"]["reason"], "OutOfpods");
    assert_eq!(
        p3["status"]["message"],
        "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
    );
    let g = pod(&st, "wants-gpu");
    assert_eq!(g["status"]["reason"], "OutOfnvidia.com/gpu");
    assert_eq!(
        g["status"]["message"],
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 0, capacity: 0"
    );
    assert_eq!(phase(&st, "zero-gpu"), "Running");
    // Sum of containers vs. the largest init container (a sidecar adds to
    // both), plus overhead; a limit stands in for a missing request.
    let p = json!({"spec": {
        "containers": [
            {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            {"resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "2"}}},
        ],
        "initContainers": [
            {"restartPolicy": "Always", "resources": {"requests": {"cpu": "250m"}}},
            {"resources": {"requests": {"cpu": "3", "memory": "512Mi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }});
    let r = pod_requests(&p);
    assert_eq!(
        r["cpu"],
        3_250 + 100,
        "init 3 + sidecar 250m beats 1.75, plus overhead"
    );
    assert_eq!(r["memory"], 1_024 * 1_048_576 * 1_000);
    assert_eq!(r["nvidia.com/gpu"], 2_000);
}

#[test]
fn admission_of_a_missing_node_is_invalid_node_info() {
    let st = state();
    let p = json!({"metadata": {"name": "p"}, "spec": {"containers": []}});
    assert_eq!(
        admission(&st, &p, "nowhere").map_err(|r| r.reason),
        Err("InvalidNodeInfo".to_string())
    );
}
