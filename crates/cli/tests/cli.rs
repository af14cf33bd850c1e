//! Runs the real `trainyard` binary.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn trainyard(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("binary runs")
}

#[test]
fn example_snapshot_schedules_and_prints_json() {
    let out = trainyard(&[
        "schedule",
        "examples/snapshot.yaml",
        "--now",
        "2026-11-22T10:00:00Z",
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    let binds = v["binds"].as_array().expect("binds");
    assert!(!binds.is_empty());
    // The 128-GPU gang cannot fit and says why, in structured form.
    let big = v["pending"]
        .as_array()
        .expect("pending")
        .iter()
        .find(|p| p["job"] == "llm/pretrain-70b")
        .expect("pretrain-70b pending");
    assert_eq!(big["reason"]["kind"], "unschedulable");
    assert_eq!(big["reason"]["podsNeeded"], 16);
    // Every queue of the tree is in the fair-share table.
    let queues: Vec<&str> = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    assert_eq!(
        queues,
        [
            "applied",
            "applied/speech",
            "default",
            "research",
            "research/llm",
            "research/vision"
        ]
    );
}

#[test]
fn table_output_has_the_three_sections() {
    let out = trainyard(&[
        "schedule",
        "examples/snapshot.yaml",
        "--now",
        "2026-11-22T10:00:00Z",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for section in ["BINDS:", "PENDING:", "FAIR SHARE"] {
        assert!(text.contains(section), "missing {section} in\n{text}");
    }
    assert!(
        text.contains("pod dev/ray-head uses unsupported feature(s): podAntiAffinity (required)"),
        "{text}"
    );
}

#[test]
fn bad_file_names_file_object_and_field() {
    let dir = std::env::temp_dir().join(format!("trainyard-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 12x}}\n",
    )
    .unwrap();
    let out = trainyard(&["schedule", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("bad.yaml"), "{err}");
    assert!(err.contains("Node n1"), "{err}");
    assert!(err.contains("status.allocatable.cpu"), "{err}");
    let missing = trainyard(&["schedule", "does/not/exist.yaml"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("does/not/exist.yaml: cannot read"));
    let cfg = dir.join("cfg.yaml");
    std::fs::write(
        &cfg,
        "scoring: {gpu: {strategy: pack, weight: 1}, cpuMemory: {strategy: spread, weight: 1}}\n",
    )
    .unwrap();
    let out = trainyard(&[
        "schedule",
        "examples/snapshot.yaml",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cfg.yaml: field scoring.gpu.strategy: unknown variant `pack`"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn help_teaches() {
    let out = trainyard(&["schedule", "--help"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("kubectl get nodes,pods -A -o yaml"), "{text}");
    assert!(text.contains("--output"), "{text}");
}
