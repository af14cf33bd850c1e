//! What `trainyard schedule` prints for people and for programs: tables
//! that fit the terminal (or, into a pipe, whole cells without padding
//! every row to the longest reason), and JSON that says its units.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `trainyard schedule examples/snapshot.yaml` at a fixed time, with
/// `COLUMNS` set to `columns` (or unset), stdout a pipe.
fn schedule(columns: Option<&str>, extra: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trainyard"));
    cmd.args([
        "schedule",
        "examples/snapshot.yaml",
        "--now",
        "2026-11-22T10:00:00Z",
    ])
    .args(extra)
    .current_dir(repo());
    match columns {
        Some(c) => cmd.env("COLUMNS", c),
        None => cmd.env_remove("COLUMNS"),
    };
    let out = cmd.output().expect("binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The section of `text` that starts with `title`.
fn section<'a>(text: &'a str, title: &str) -> &'a str {
    text.split("\n\n")
        .find(|s| s.trim_start().starts_with(title))
        .unwrap_or_else(|| panic!("no {title} section in\n{text}"))
}

/// The reason the example gives the waiting 70b gang, in words.
const REASON: &str = "waiting for 8 evicted pod(s) to terminate; room reserved on gpu-node-00, gpu-node-01, gpu-node-02, gpu-node-03, gpu-node-04, gpu-node-05, gpu-node-06, gpu-node-07, gpu-node-16, gpu-node-17, gpu-node-18, gpu-node-19, gpu-node-22, gpu-node-23, gpu-node-24, gpu-node-25";

#[test]
fn into_a_pipe_cells_are_whole_and_rows_are_not_padded_to_the_longest_reason() {
    let text = schedule(None, &[]);
    for line in text.lines() {
        assert_eq!(line, line.trim_end(), "a line ends in blanks: {line:?}");
    }
    // The long reason is on one line, whole.
    let pending = section(&text, "PENDING:");
    assert!(
        pending
            .lines()
            .any(|l| l.contains("llm/pretrain-70b") && l.ends_with(REASON)),
        "{pending}"
    );
    // Its length pads neither the other pending rows nor other tables.
    let short = pending
        .lines()
        .find(|l| l.contains("vision/segformer-2"))
        .expect("segformer-2 pending");
    assert!(short.len() < 200, "{short:?}");
    for title in ["BINDS:", "NOMINATED", "FAIR SHARE"] {
        let longest = section(&text, title).lines().map(str::len).max();
        assert!(longest < Some(110), "{title}: {longest:?}");
    }
}

#[test]
fn with_a_width_long_reasons_wrap_inside_their_column() {
    let text = schedule(Some("100"), &[]);
    for line in text.lines() {
        assert!(
            line.chars().count() <= 100,
            "wider than 100 columns: {line:?}"
        );
        assert_eq!(line, line.trim_end(), "a line ends in blanks: {line:?}");
    }
    // Every word of the reason is still there, in order, over several lines.
    let pending = section(&text, "PENDING:");
    let start = pending
        .lines()
        .position(|l| l.contains("llm/pretrain-70b"))
        .expect("the 70b gang's row");
    let words: Vec<&str> = pending
        .lines()
        .skip(start)
        .take_while(|l| !l.contains("llm/sft-llama"))
        .flat_map(str::split_whitespace)
        .filter(|w| *w != "llm/pretrain-70b" && *w != "research/llm")
        .collect();
    assert_eq!(words.join(" "), REASON);
    assert!(
        pending
            .lines()
            .skip(start)
            .take_while(|l| !l.contains("llm/sft-llama"))
            .count()
            > 2,
        "{pending}"
    );
}

#[test]
fn schedule_json_says_its_units_and_keeps_its_fields() {
    let v: serde_json::Value =
        serde_json::from_str(&schedule(None, &["--output", "json"])).expect("JSON");
    expect_test::expect![[r#"
        {
          "gpus": "device indices on the node (binds, nominations)",
          "reservations.start": "milliseconds since 1970-01-01T00:00:00Z",
          "reservations.startsInSeconds": "seconds",
          "resources": {
            "cpu": "millicores (1000 = one core)",
            "memory": "bytes",
            "nvidia.com/gpu": "milli-GPU (1000 = one GPU)",
            "other": "count"
          }
        }"#]]
    .assert_eq(&serde_json::to_string_pretty(&v["units"]).expect("units"));
    // The numbers are what the units say: the `applied` queue's quota of
    // 64 GPUs, 760 cores and 7Ti.
    let applied = &v["queues"][0];
    assert_eq!(applied["queue"], "applied");
    assert_eq!(applied["quota"]["nvidia.com/gpu"], 64_000);
    assert_eq!(applied["quota"]["cpu"], 760_000);
    assert_eq!(applied["quota"]["memory"], 7_u64 << 40);
    // Every field consumers read is still there, under its old name.
    for field in [
        "binds",
        "evictions",
        "nominations",
        "pending",
        "queues",
        "warnings",
        "stats",
    ] {
        assert!(v.get(field).is_some(), "{field} missing");
    }
}

/// `trainyard schedule` shows consolidation's moves: scenario 89's
/// snapshot (a gang moved whole) with consolidation on, into a pipe.
#[test]
fn schedule_shows_the_moves_consolidation_makes() {
    let scenario = std::fs::read_to_string(
        repo().join("tests/scenarios/89-consolidation-moves-a-gang-whole.yaml"),
    )
    .expect("scenario 89");
    let snapshot: String = scenario
        .split("snapshot: |\n")
        .nth(1)
        .and_then(|s| s.split("\nexpect:").next())
        .expect("a snapshot block")
        .lines()
        .map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l)))
        .collect();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let snap = dir.path().join("snapshot.yaml");
    let config = dir.path().join("config.yaml");
    std::fs::write(&snap, snapshot).expect("written");
    std::fs::write(&config, "consolidation: {enabled: true}\n").expect("written");
    let out = Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args(["schedule", "--now", "2026-11-22T10:00:00Z", "--config"])
        .arg(&config)
        .arg(&snap)
        .env_remove("COLUMNS")
        .output()
        .expect("binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    expect_test::expect![[r#"
        MOVES (consolidation; the replacements' room is held): 2 pod(s) of 1 job(s)
         JOB      POD        FROM  TO  GPUS  FOR
         ml/eval  ml/eval-0  n1    n3  6,7   ml/train
         ml/eval  ml/eval-1  n2    n4  0,1   ml/train"#]]
    .assert_eq(section(&text, "MOVES"));
}

/// A Kubernetes 1.37 dump (`kubectl get ... -o yaml`) is read as it is:
/// the Job's upstream PodGroup is one gang, bound whole; pods whose
/// PodGroup is not created yet wait for it, saying so.
#[test]
fn schedule_reads_a_kubernetes_1_37_dump_as_it_is() {
    let out = Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args([
            "schedule",
            "examples/kubernetes-1.37-dump.yaml",
            "--now",
            "2026-11-22T10:00:00Z",
        ])
        .current_dir(repo())
        .env_remove("COLUMNS")
        .output()
        .expect("binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    expect_test::expect![[r#"
        BINDS: 2 pod(s) of 1 job(s) on 2 node(s) considered
         JOB                              POD                  NODE   GPUS
         ml/pretrain-5d8f7-workers-6c4b9  ml/pretrain-0-x7k2p  gpu-a  0,1,2,3,4,5,6,7
         ml/pretrain-5d8f7-workers-6c4b9  ml/pretrain-1-m4q9z  gpu-b  0,1,2,3,4,5,6,7"#]]
    .assert_eq(section(&text, "BINDS"));
    expect_test::expect![[r#"
        PENDING: 1 job(s)
         JOB                          QUEUE    REASON
         ml/eval-1a2b3-workers-4c5d6  default  waiting for PodGroup ml/eval-1a2b3-workers-4c5d6 to be created (its pods name it by spec.schedulingGroup.podGroupName)"#]].assert_eq(section(&text, "PENDING"));
}
