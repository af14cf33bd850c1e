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
            "{}: spec.topology.railOptimized.nodesPerGroup: expected at least 1",
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
        err.contains("w.yaml: spec.jobs[0].duration: expected a non-negative duration"),
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
