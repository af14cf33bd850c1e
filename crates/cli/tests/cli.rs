//! Runs the real `trainyard` binary.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn trainyard(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args(args)
        // Tables as for a pipe, whatever the terminal running the tests.
        .env_remove("COLUMNS")
        .current_dir(repo())
        .output()
        .expect("binary runs")
}

/// `trainyard schedule FILE --now 2026-11-22T10:00:00Z --output json`,
/// which must succeed, parsed.
fn schedule_json(file: &str) -> serde_json::Value {
    let out = trainyard(&[
        "schedule",
        file,
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
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

fn trainyard_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(repo())
        .output()
        .expect("binary runs")
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trainyard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// Exit code 1, nothing on stdout, and exactly `want` on stderr (one
/// `error: ` line, then any further problems).
fn fails_with(out: &std::process::Output, want: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err, format!("error: {want}\n"));
    assert!(out.stdout.is_empty());
}

#[test]
fn example_snapshot_schedules_and_prints_json() {
    let v = schedule_json("examples/snapshot.yaml");
    let binds = v["binds"].as_array().expect("binds");
    assert!(!binds.is_empty());
    // The 128-GPU gang (priority 90) preempts the priority-0 pretrain-7b
    // of its own queue and waits for it, in structured form.
    let big = v["pending"]
        .as_array()
        .expect("pending")
        .iter()
        .find(|p| p["job"] == "llm/pretrain-70b")
        .expect("pretrain-70b pending");
    assert_eq!(big["reason"]["kind"], "waitingForVictims");
    assert_eq!(big["reason"]["victims"], 8);
    assert_eq!(big["reason"]["nodes"].as_array().map(Vec::len), Some(16));
    let evictions = v["evictions"].as_array().expect("evictions");
    assert_eq!(evictions.len(), 8);
    assert!(evictions.iter().all(|e| e["job"] == "llm/pretrain-7b"));
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
    // Its required anti-affinity (against app=ray pods, of which there are
    // none) is honoured, not refused: the head binds.
    let binds = text.split("PENDING:").next().unwrap_or("");
    assert!(binds.contains(" dev/ray-head "), "{text}");
}

#[test]
fn table_output_shows_reservations() {
    let out = trainyard(&[
        "schedule",
        "examples/reservation.yaml",
        "--now",
        "2026-11-22T10:00:00Z",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let section = text
        .split("\n\n")
        .find(|s| s.starts_with("RESERVATIONS"))
        .unwrap_or_else(|| panic!("no RESERVATIONS section in\n{text}"));
    expect_test::expect![[r#"
        RESERVATIONS (nodes held for starving gangs; only jobs ending before START may use them): 1
         JOB     QUEUE   START      IN     NODES                    WHERE    BACKFILLED
         ml/llm  team-a  11:20 UTC  1h20m  n0,n1,n2,... (8 in all)  cluster           1"#]]
    .assert_eq(section);
}

/// `--output json` carries the reservations and the reserved gang's
/// structured reason, as a script reading them would need.
#[test]
fn json_output_shows_reservations() {
    let v = schedule_json("examples/reservation.yaml");
    let reservations = v["reservations"].as_array().expect("reservations");
    assert_eq!(reservations.len(), 1, "{v}");
    let r = &reservations[0];
    assert_eq!(r["job"], "ml/llm");
    assert_eq!(r["queue"], "team-a");
    // 11:20 UTC on 2026-11-22, 80 minutes after --now.
    assert_eq!(r["start"], 1_795_346_400_000_i64);
    assert_eq!(r["startsInSeconds"], 4800);
    assert_eq!(r["nodes"].as_array().map(Vec::len), Some(8));
    assert_eq!(r["backfilled"], 1);
    let llm = v["pending"]
        .as_array()
        .expect("pending")
        .iter()
        .find(|p| p["job"] == "ml/llm")
        .expect("ml/llm pending");
    assert_eq!(llm["reason"]["kind"], "reserved");
    assert_eq!(llm["reason"]["start"], r["start"]);
    assert_eq!(llm["reason"]["nodes"], r["nodes"]);
    assert_eq!(
        llm["message"],
        "reserved 8 nodes from 11:20 UTC; 1 job backfilled ahead of it"
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
        err.contains("cfg.yaml: document 1: scoring.gpu.strategy: unknown variant `pack`"),
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

#[test]
fn simulate_writes_outputs_and_compares_policies() {
    let dir = std::env::temp_dir().join(format!("trainyard-sim-test-{}", std::process::id()));
    let out = trainyard(&[
        "simulate",
        "--cluster",
        "examples/sim/cluster.yaml",
        "--queues",
        "examples/sim/queues.yaml",
        "--workload",
        "examples/sim/workload.yaml",
        "--until",
        "12h",
        "--policy",
        "examples/sim/binpack.yaml",
        "--policy",
        "examples/sim/spread.yaml",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("binpack") && table.contains("spread") && table.contains("GPU allocation"),
        "{table}"
    );
    for f in [
        "binpack/jobs.csv",
        "binpack/queues.csv",
        "binpack/summary.json",
        "binpack/timing.json",
        "spread/summary.json",
        "comparison.json",
        "report.html",
    ] {
        assert!(dir.join(f).exists(), "missing {f}");
    }
    let cmp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("comparison.json")).unwrap())
            .unwrap();
    assert_eq!(cmp.as_array().unwrap().len(), 2);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn simulate_compares_topology_aware_and_blind() {
    let dir = std::env::temp_dir().join(format!("trainyard-sim-topo-{}", std::process::id()));
    let out = trainyard(&[
        "simulate",
        "--cluster",
        "examples/sim/rail-cluster.yaml",
        "--workload",
        "examples/sim/rail-workload.yaml",
        "--until",
        "4h",
        "--policy",
        "examples/sim/topology-aware.yaml",
        "--policy",
        "examples/sim/topology-blind.yaml",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let header = table.lines().next().unwrap();
    assert!(
        header.contains("topology-aware") && header.contains("topology-blind"),
        "{table}"
    );
    for row in [
        "gangs (2+ pods)",
        "gangs in one leaf",
        "spine crossings/gang",
        "rail-aligned gangs",
        "in tightest domain",
        "slowdown mean",
        "largest 1-leaf gang",
    ] {
        let line = table
            .lines()
            .find(|l| l.trim_start().starts_with(row))
            .unwrap_or_else(|| panic!("no row {row:?}:\n{table}"));
        // A value for each policy.
        assert!(line[row.len()..].split_whitespace().count() >= 2, "{line}");
    }
    let jobs = std::fs::read_to_string(dir.join("topology-aware/jobs.csv")).unwrap();
    assert!(
        jobs.lines().next().unwrap().ends_with(
            ",nodes,leaves,spine_crossings,hops,rail_aligned,level,in_tightest,slowdown_s"
        ),
        "{jobs}"
    );
    let cmp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("comparison.json")).unwrap())
            .unwrap();
    for run in cmp.as_array().unwrap() {
        assert_eq!(run["topology"]["leafDomains"], 8, "{run}");
        assert!(run["topology"]["gangs"].as_u64().unwrap() > 0, "{run}");
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Topology fragmentation"));
    std::fs::remove_dir_all(&dir).ok();

    // The slowdown flag: checked, and only with a topology.
    let out = trainyard(&[
        "simulate",
        "--cluster",
        "examples/sim/cluster.yaml",
        "--workload",
        "examples/sim/workload.yaml",
        "--slowdown-per-spine-crossing",
        "0.5",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "--slowdown-per-spine-crossing: examples/sim/cluster.yaml has no network topology"
        ),
        "{err}"
    );
    let out = trainyard(&[
        "simulate",
        "--cluster",
        "examples/sim/rail-cluster.yaml",
        "--workload",
        "examples/sim/rail-workload.yaml",
        "--slowdown-per-spine-crossing",
        "-1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "--slowdown-per-spine-crossing \"-1\": expected a non-negative number like 0.25, got -1"
        ),
        "{err}"
    );
    // A bad topology in the cluster file names file and field.
    let bad = std::env::temp_dir().join(format!("trainyard-bad-topo-{}.yaml", std::process::id()));
    std::fs::write(
        &bad,
        std::fs::read_to_string(repo().join("examples/sim/rail-cluster.yaml"))
            .unwrap()
            .replace("nodesPerGroup: 16", "nodesPerGroup: 0"),
    )
    .unwrap();
    let out = trainyard(&[
        "simulate",
        "--cluster",
        bad.to_str().unwrap(),
        "--workload",
        "examples/sim/rail-workload.yaml",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}: document 1: ClusterSpec h100-rail-128: spec.topology.railOptimized.nodesPerGroup: expected a whole number from 1 to 4294967295, found 0",
            bad.display()
        )),
        "{err}"
    );
    std::fs::remove_file(&bad).ok();
}

#[test]
fn simulate_compares_reclaim_on_and_off() {
    let dir = std::env::temp_dir().join(format!("trainyard-sim-reclaim-{}", std::process::id()));
    let out = trainyard(&[
        "simulate",
        "--cluster",
        "examples/sim/teams-cluster.yaml",
        "--queues",
        "examples/sim/teams-queues.yaml",
        "--workload",
        "examples/sim/teams-workload.yaml",
        "--policy",
        "examples/sim/reclaim-on.yaml",
        "--policy",
        "examples/sim/reclaim-off.yaml",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8(out.stdout).unwrap();
    let header = table.lines().next().unwrap();
    assert!(
        header.contains("reclaim-on") && header.contains("reclaim-off"),
        "{table}"
    );
    let cell = |row: &str| -> Vec<String> {
        let line = table
            .lines()
            .find(|l| l.trim_start().starts_with(row))
            .unwrap_or_else(|| panic!("no row {row:?}:\n{table}"));
        line[line.find(row).unwrap() + row.len()..]
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    for row in [
        "reclaims (jobs)",
        "preemptions (jobs)",
        "evicted pods",
        "lost GPU-hours",
        "starved episodes",
        "to fair share mean",
        "to fair share p95",
        "starved at end",
    ] {
        assert_eq!(cell(row).len(), 2, "{row}: {table}");
    }
    assert_ne!(cell("evicted pods")[0], "0", "{table}");
    assert_eq!(cell("evicted pods")[1], "0", "{table}");
    assert!(table.contains("TO FAIR SHARE"), "{table}");
    let jobs = std::fs::read_to_string(dir.join("reclaim-on/jobs.csv")).unwrap();
    assert!(
        jobs.lines()
            .next()
            .unwrap()
            .contains(",restarts,evicted_pods,lost_gpu_hours,pending_reason"),
        "{jobs}"
    );
    let cmp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("comparison.json")).unwrap())
            .unwrap();
    let on = &cmp[0]["preemption"];
    assert!(on["reclaims"].as_u64().unwrap() > 0, "{on}");
    assert!(on["lostGpuHours"].as_f64().unwrap() > 0.0, "{on}");
    assert_eq!(on["graceSeconds"], 30.0);
    assert_eq!(on["lostWork"], "checkpoint");
    assert_eq!(cmp[1]["preemption"]["evictedPods"], 0);
    assert!(
        cmp[0]["perQueue"]["team-b"]["timeToFairShareSeconds"]["count"]
            .as_u64()
            .unwrap()
            > 0
    );
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Evicted pods, cumulative"));
    assert!(html.contains("Jain&#39;s fairness index"));
    // The flags override the workload's settings.
    let out = trainyard(&[
        "simulate",
        "--cluster",
        "examples/sim/teams-cluster.yaml",
        "--queues",
        "examples/sim/teams-queues.yaml",
        "--workload",
        "examples/sim/teams-workload.yaml",
        "--until",
        "12h",
        "--eviction-grace",
        "2m",
        "--lost-work",
        "restart",
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["preemption"]["graceSeconds"], 120.0);
    assert_eq!(v[0]["preemption"]["lostWork"], "restart");
    std::fs::remove_dir_all(&dir).ok();

    // Bad values name the flag.
    for (flag, value, want) in [
        (
            "--lost-work",
            "resume",
            "--lost-work \"resume\": expected \"restart\" or \"checkpoint:<interval>\" (e.g. \"checkpoint:30m\"), got \"resume\"",
        ),
        (
            "--lost-work",
            "checkpoint:0",
            "--lost-work \"checkpoint:0\": expected a positive checkpoint interval, got 0",
        ),
        (
            "--eviction-grace",
            "-5s",
            "--eviction-grace \"-5s\": expected a non-negative duration, got \"-5s\"",
        ),
    ] {
        let out = trainyard(&[
            "simulate",
            "--cluster",
            "examples/sim/teams-cluster.yaml",
            "--workload",
            "examples/sim/teams-workload.yaml",
            flag,
            value,
        ]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{err}");
    }
}

#[test]
fn simulate_bad_inputs_fail_clearly() {
    let dir = std::env::temp_dir().join(format!("trainyard-sim-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let w = dir.join("w.yaml");
    std::fs::write(&w, "kind: Workload\nspec:\n  jobs:\n  - {name: a, queue: q, submit: 0, duration: -5m, tasks: [{count: 1, requests: {nvidia.com/gpu: 1}}]}\n").unwrap();
    let out = trainyard(&[
        "simulate",
        "--cluster",
        "examples/sim/cluster.yaml",
        "--workload",
        w.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "w.yaml: document 1: Workload: spec.jobs[0].duration: expected a non-negative duration"
        ),
        "{err}"
    );
    // Unknown queue and a job larger than the cluster: counted as rejected, not a crash.
    std::fs::write(&w, "kind: Workload\nspec:\n  jobs:\n  - {name: a, queue: nope, submit: 0, duration: 1m, tasks: [{count: 1, requests: {nvidia.com/gpu: 1}}]}\n  - {name: b, queue: llm, submit: 0, duration: 1m, tasks: [{count: 80, requests: {nvidia.com/gpu: 8}}]}\n").unwrap();
    let out = trainyard(&[
        "simulate",
        "--cluster",
        "examples/sim/cluster.yaml",
        "--queues",
        "examples/sim/queues.yaml",
        "--workload",
        w.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["rejected"], 2);
    // A malformed trace row is counted and reported, not fatal.
    let t = dir.join("t.csv");
    std::fs::write(&t, "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\np1,1000,1024,1,1000,,LS,Succeeded,0,100,10\np2,oops,1024,1,1000,,LS,Succeeded,0,100,10\n").unwrap();
    let out = trainyard(&[
        "simulate",
        "--cluster",
        "examples/sim/cluster.yaml",
        "--trace",
        t.to_str().unwrap(),
        "--queue-rule",
        "single:q",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("2 rows") && err.contains("1 imported") && err.contains("malformed"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn simulate_fgd_prints_the_table_and_writes_outputs() {
    let dir = std::env::temp_dir().join(format!("trainyard-fgd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = trainyard(&[
        "simulate",
        "fgd",
        "--nodes",
        "examples/fgd/nodes.csv",
        "--workload",
        "examples/fgd/pods.csv",
        "--policy",
        "fgd,bestFit",
        "--policy",
        "random",
        "--seeds",
        "1..3",
        "--output",
        "json",
        "--out",
        dir.to_str().expect("utf-8 temp dir"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON output");
    let cells = v["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 3);
    for c in cells {
        assert_eq!(c["perSeed"].as_array().map(Vec::len), Some(3));
        let m = c["unallocatedAt100"]["mean"].as_f64().expect("a mean");
        assert!((0.0..=100.0).contains(&m), "{m}");
    }
    for f in [
        "results.md",
        "runs.csv",
        "curves.csv",
        "summary.json",
        "report.html",
    ] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        assert!(!text.is_empty(), "{f} written");
    }
    let runs = std::fs::read_to_string(dir.join("runs.csv")).unwrap_or_default();
    assert_eq!(runs.lines().count(), 1 + 9);
    // Same seeds, same results.
    let again = trainyard(&[
        "simulate",
        "fgd",
        "--nodes",
        "examples/fgd/nodes.csv",
        "--workload",
        "examples/fgd/pods.csv",
        "--policy",
        "fgd,bestFit,random",
        "--seeds",
        "1,2,3",
        "--output",
        "json",
    ]);
    assert_eq!(out.stdout, again.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn simulate_fgd_bad_inputs_fail_clearly() {
    let base = [
        "simulate",
        "fgd",
        "--nodes",
        "examples/fgd/nodes.csv",
        "--workload",
    ];
    let cases: [(&[&str], &str); 4] = [
        (
            &["examples/fgd/pods.csv", "--seeds", "9..1"],
            "--seeds \"9..1\"",
        ),
        (
            &["examples/fgd/pods.csv", "--policy", "tetris"],
            "--policy \"tetris\": expected one of",
        ),
        (&["examples/fgd/missing.csv"], "missing.csv: cannot read"),
        (
            &["examples/fgd/nodes.csv"],
            "examples/fgd/nodes.csv:1: header is",
        ),
    ];
    for (extra, want) in cases {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        let out = trainyard(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn empty_inputs_fail_clearly() {
    let dir = scratch("empty");
    let empty = dir.join("empty.yaml");
    std::fs::write(&empty, "# nothing yet\n").unwrap();
    let e = path(&empty);
    fails_with(
        &trainyard(&["schedule", e]),
        &format!(
            "{e}: is empty; expected Kubernetes objects (Node, Pod, List, as `kubectl get nodes,pods -A -o yaml` prints them) and Trainyard Queue/PodGroup documents"
        ),
    );
    // stdin is closed here: `-` reads nothing.
    fails_with(
        &trainyard(&["schedule", "-"]),
        "<stdin>: is empty; expected Kubernetes objects (Node, Pod, List, as `kubectl get nodes,pods -A -o yaml` prints them) and Trainyard Queue/PodGroup documents",
    );
    fails_with(
        &trainyard(&[
            "simulate",
            "--cluster",
            e,
            "--workload",
            "examples/sim/workload.yaml",
        ]),
        &format!(
            "{e}: is empty; expected a ClusterSpec document (apiVersion: trainyard.io/v1alpha1, kind: ClusterSpec)"
        ),
    );
    fails_with(
        &trainyard(&[
            "simulate",
            "--cluster",
            "examples/sim/cluster.yaml",
            "--workload",
            e,
        ]),
        &format!(
            "{e}: is empty; expected a Workload or WorkloadGenerator document (apiVersion: trainyard.io/v1alpha1)"
        ),
    );
    fails_with(
        &trainyard(&[
            "simulate",
            "--cluster",
            "examples/sim/cluster.yaml",
            "--workload",
            "examples/sim/workload.yaml",
            "--queues",
            e,
        ]),
        &format!(
            "{e}: is empty; expected Queue documents (apiVersion: trainyard.io/v1alpha1, kind: Queue), or leave out --queues to create one top-level queue per queue the workload names"
        ),
    );
    // A queue file that defines other queues than the workload names: a
    // warning at load, naming the file and the queues.
    let q = dir.join("queues.yaml");
    std::fs::write(
        &q,
        "apiVersion: trainyard.io/v1alpha1\nkind: Queue\nmetadata: {name: other}\nspec: {}\n",
    )
    .unwrap();
    let w = dir.join("w.yaml");
    std::fs::write(&w, "kind: Workload\nspec:\n  jobs:\n  - {name: a, queue: llm, submit: 0, duration: 1m, tasks: [{count: 1, requests: {cpu: 1}}]}\n  - {name: b, queue: llm, submit: 0, duration: 1m, tasks: [{count: 1, requests: {cpu: 1}}]}\n  - {name: c, queue: other, submit: 0, duration: 1m, tasks: [{count: 1, requests: {cpu: 1}}]}\n").unwrap();
    let out = trainyard(&[
        "simulate",
        "--cluster",
        "examples/sim/cluster.yaml",
        "--workload",
        path(&w),
        "--queues",
        path(&q),
        "-o",
        "json",
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err,
        format!(
            "warning: {}: 2 of 3 job(s) name a queue it does not define as a leaf queue, and will be rejected: llm (2 job(s))\n",
            path(&q)
        )
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn simulator_input_errors_name_file_document_and_field() {
    let dir = scratch("sim-errors");
    let c = dir.join("c.yaml");
    // A node count that would exhaust memory, and a second type error.
    std::fs::write(&c, "kind: ClusterSpec\nspec:\n  nodePools:\n  - {name: g, count: 10000000, cpu: \"8\", memory: 64Gi, gpu: {count: many}}\n").unwrap();
    let cp = path(&c);
    let run = |cluster: &str| {
        trainyard(&[
            "simulate",
            "--cluster",
            cluster,
            "--workload",
            "examples/sim/workload.yaml",
        ])
    };
    fails_with(
        &run(cp),
        &format!(
            "{cp}: document 1: ClusterSpec: spec.nodePools[0].count: expected a whole number from 1 to 100000, found 10000000\n{cp}: document 1: ClusterSpec: spec.nodePools[0].gpu.count: expected a whole number from 0 to 64, found \"many\""
        ),
    );
    // YAML syntax errors name the file, not `<input>`.
    std::fs::write(&c, "kind: ClusterSpec\nspec: {nodePools: [\n").unwrap();
    fails_with(
        &run(cp),
        &format!("{cp}: invalid YAML: unclosed bracket '[' at line 2, column 19"),
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn config_rejects_yaml_1_1_booleans_like_every_other_input() {
    let dir = scratch("cfg-bool");
    let cfg = dir.join("cfg.yaml");
    std::fs::write(&cfg, "preemption: {reclaim: no}\n").unwrap();
    let c = path(&cfg);
    fails_with(
        &trainyard(&["schedule", "examples/snapshot.yaml", "--config", c]),
        &format!("{c}: document 1: preemption.reclaim: expected true or false, found \"no\""),
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// openb trace CSV with `rows` after the header, CRLF line ends.
fn trace(dir: &Path, rows: &[&str]) -> PathBuf {
    let t = dir.join("t.csv");
    let mut text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\r\n".to_string();
    for r in rows {
        text.push_str(r);
        text.push_str("\r\n");
    }
    std::fs::write(&t, text).unwrap();
    t
}

#[test]
fn trace_qos_mappings_name_their_flags_and_crlf_lines_count_right() {
    let dir = scratch("qos");
    let t = trace(
        &dir,
        &[
            "p1,1000,1024,1,1000,,LS,Succeeded,0,100,10",
            "p2,oops,1024,1,1000,,LS,Succeeded,0,100,10",
            "p3,1000,1024,1,1000,,Spot,Succeeded,0,100,10",
        ],
    );
    let tp = path(&t);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "simulate",
            "--cluster",
            "examples/sim/cluster.yaml",
            "--trace",
            tp,
            "-o",
            "json",
        ];
        args.extend_from_slice(extra);
        trainyard(&args)
    };
    fails_with(
        &run(&[]),
        &format!(
            "{tp}:4: qos `Spot` is not in the queue mapping `qos:BE=dev,Burstable=research,Guaranteed=prod,LS=prod`, which has no `default` entry; add `Spot=<queue>` or `default=<queue>` to it (--queue-rule qos:<qos>=<queue>,...)"
        ),
    );
    fails_with(
        &run(&["--queue-rule", "hash:a,b"]),
        &format!(
            "{tp}:4: qos `Spot` is not in the priority mapping `BE=100,Burstable=500,Guaranteed=800,LS=1000`, which has no `default` entry; add `Spot=<priority>` or `default=<priority>` to it (--qos-priority <qos>=<priority>,...)"
        ),
    );
    let out = run(&[
        "--queue-rule",
        "hash:a,b",
        "--qos-priority",
        "LS=1000,default=0",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The malformed row is on line 3 of the CRLF file.
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err,
        format!(
            "{tp}: 3 rows: 2 imported, 1 skipped\n        1  malformed row: cpu_milli is not a non-negative integer (first at line 3)\n"
        )
    );
    fails_with(
        &run(&["--qos-priority", "LS=high"]),
        "--qos-priority \"LS=high\": entry `LS=high`: expected a whole number from -2147483648 to 2147483647, found `high`; expected `<qos>=<priority>,...` such as `LS=1000,BE=100,default=0`",
    );
    let help = String::from_utf8(trainyard(&["simulate", "--help"]).stdout).unwrap();
    assert!(help.contains("--qos-priority <MAP>"), "{help}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn simulate_help_describes_its_own_json() {
    for args in [
        &["simulate", "--help"][..],
        &["simulate", "fgd", "--help"][..],
    ] {
        let help = String::from_utf8(trainyard(args).stdout).unwrap();
        assert!(!help.contains("binds"), "{args:?}: {help}");
        assert!(help.contains("summary.json"), "{args:?}: {help}");
    }
}

#[test]
fn warnings_print_once_grouped_and_without_colour() {
    let dir = scratch("warnings");
    let snap = dir.join("gang.yaml");
    let mut text = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: \"8\", memory: 64Gi, pods: \"110\"}}\n".to_string();
    for i in 0..2000 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: big-{i}, namespace: ml, labels: {{trainyard.io/pod-group: big}}}}\nspec:\n  schedulerName: trainyard\n  affinity: {{nodeAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, preference: {{matchExpressions: [{{key: a, operator: Exists}}]}}}}]}}}}\n  containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]\n"
        ));
    }
    std::fs::write(&snap, text).unwrap();
    let out = trainyard(&["schedule", path(&snap), "--now", "0"]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr, "", "warnings only in the report");
    assert!(!stdout.contains('\u{1b}'));
    let warnings = &stdout[stdout.find("WARNINGS").expect("a warnings section")..];
    assert_eq!(
        warnings,
        format!(
            "WARNINGS: 2001 (2 kinds; --output json lists each)\n  {0}: document 2: Pod ml/big-0: ignored: preferred node affinity (and 1999 more like it)\n  {0}: document 2: Pod ml/big-0: PodGroup ml/big is named by pods (ml/big-0, ml/big-1, ml/big-2, ml/big-3, ml/big-4 and 1995 more) but no PodGroup document defines it; using minMember 2000 (all its pods)\n",
            path(&snap)
        )
    );
    // Log lines on a redirected stderr carry no colour codes.
    let out = trainyard(&["-v", "schedule", path(&snap), "--now", "0", "-o", "json"]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn redirected_runs_print_progress_lines() {
    // stderr is a pipe here, so bars are not drawn; lines are (the
    // interval set to 0: every progress report).
    let out = trainyard_env(
        &[
            "simulate",
            "--cluster",
            "examples/sim/cluster.yaml",
            "--queues",
            "examples/sim/queues.yaml",
            "--workload",
            "examples/sim/workload.yaml",
            "--until",
            "2d",
            "-o",
            "json",
        ],
        &[("TRAINYARD_PROGRESS_SECS", "0")],
    );
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert!(!lines.is_empty(), "no progress lines");
    for l in &lines {
        assert!(
            l.starts_with("progress: default: ")
                && l.contains(" jobs finished (")
                && l.contains("simulated day"),
            "{l}"
        );
    }
    let fgd = trainyard_env(
        &[
            "simulate",
            "fgd",
            "--nodes",
            "examples/fgd/nodes.csv",
            "--workload",
            "examples/fgd/pods.csv",
            "--policy",
            "fgd",
            "--seeds",
            "1..2",
            "--threads",
            "1",
            "-o",
            "json",
        ],
        &[("TRAINYARD_PROGRESS_SECS", "0")],
    );
    assert!(fgd.status.success());
    let err = String::from_utf8(fgd.stderr).unwrap();
    let progress: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("progress: "))
        .map(|l| l.rsplit_once(", ").map_or(l, |(head, _secs)| head))
        .collect();
    assert_eq!(
        progress,
        [
            "progress: fgd: 1/2 runs (50%)",
            "progress: fgd: 2/2 runs (100%)"
        ],
        "{err}"
    );
    // With the default interval (10 s) a short run prints none.
    let quiet = trainyard(&[
        "simulate",
        "--cluster",
        "examples/sim/cluster.yaml",
        "--workload",
        "examples/sim/workload.yaml",
        "--until",
        "1h",
        "-o",
        "json",
    ]);
    assert_eq!(String::from_utf8_lossy(&quiet.stderr), "");
}

#[test]
fn crds_prints_the_committed_files_and_writes_them() {
    let out = trainyard(&["crds"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    let mut committed = String::new();
    for f in [
        "queues.trainyard.io.yaml",
        "podgroups.trainyard.io.yaml",
        "topologies.trainyard.io.yaml",
    ] {
        committed.push_str("---\n");
        committed.push_str(
            &std::fs::read_to_string(repo().join("deploy/crds").join(f)).expect("committed CRD"),
        );
    }
    assert_eq!(printed, committed);

    let dir = scratch("crds");
    let out = trainyard(&["crds", "--out-dir", path(&dir)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut written: Vec<String> = std::fs::read_dir(&dir)
        .expect("written")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(
        written,
        [
            "podgroups.trainyard.io.yaml",
            "queues.trainyard.io.yaml",
            "topologies.trainyard.io.yaml"
        ]
    );

    let out = trainyard(&["crds", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(3));
}

#[test]
fn serve_elects_a_leader_unless_told_not_to() {
    let help = trainyard(&["serve", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("--leader-elect[=<BOOL>]"), "{text}");
    assert!(text.contains("default: on"), "{text}");
    // A usage error: clap's exit code 2, naming the flag and the values.
    let out = trainyard(&["serve", "--leader-elect=maybe"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("invalid value 'maybe' for '--leader-elect[=<BOOL>]'")
            && err.contains("[possible values: true, false]"),
        "{err}"
    );
}
