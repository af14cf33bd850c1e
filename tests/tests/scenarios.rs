//! Runs every scenario in `tests/scenarios/*.yaml` through one harness and
//! reports all failures together.

use std::path::Path;

#[test]
fn scenarios() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/scenarios exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut failures = Vec::new();
    for f in &files {
        let name = f
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        let text = std::fs::read_to_string(f).expect("scenario readable");
        if let Err(errs) = trainyard_tests::run_scenario(&name, &text) {
            failures.push(format!("{name}:\n  - {}", errs.join("\n  - ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} scenarios failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    assert!(
        files.len() >= 15,
        "expected at least 15 scenarios, found {}",
        files.len()
    );
    eprintln!("{} scenarios passed", files.len());
}

#[test]
fn harness_catches_wrong_expectations() {
    // A scenario whose expectation is wrong must fail: the harness can fail.
    let text = r#"
description: wrong on purpose
snapshot: |
  apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status: {allocatable: {cpu: "8", memory: 32Gi, pods: "110"}}
  ---
  apiVersion: v1
  kind: Pod
  metadata: {name: p, namespace: ns}
  spec:
    schedulerName: trainyard
    containers: [{name: c, resources: {requests: {cpu: "1"}}}]
expect:
  binds: [{pod: ns/p, node: n2}]
  pending: [{job: ns/other}]
"#;
    let errs = trainyard_tests::run_scenario("wrong.yaml", text).unwrap_err();
    assert!(
        errs.iter()
            .any(|e| e.contains("ns/p bound to n1, expected n2")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("expected ns/other to be pending")),
        "{errs:?}"
    );
}
