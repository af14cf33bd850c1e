//! Imports the real openb trace when it is present next to the repository
//! (`../shared/data/openb`, i.e. `/work/shared/data/openb` for a checkout
//! at `/work/main`). Without it each test prints a `SKIPPED` line to the
//! terminal and returns (or fails, with `TRAINYARD_REQUIRE_DATA=1`, as in
//! CI); the sample under `tests/data` covers the importer's logic in unit
//! tests.

mod common;

use std::collections::BTreeMap;

use trainyard_sim::openb::{
    ImportOptions, SKIP_NO_TIME_COLUMNS, SKIP_NOT_SCHEDULED, parse_nodes, parse_pods,
};

/// The text of a trace file, or `None` (skipped visibly) when it is absent.
fn read(name: &str) -> Option<String> {
    common::shared_data(name, &format!("openb/{name}"))
}

/// Data rows, split naively on commas (the trace has no quoting).
fn rows(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').collect())
        .collect()
}

fn num(s: &str) -> u64 {
    s.parse().unwrap_or_else(|_| panic!("not a number: {s:?}"))
}

#[test]
fn default_pod_list_matches_the_readme() {
    let name = "openb_pod_list_default.csv";
    let Some(text) = read(name) else { return };
    let import = parse_pods(&text, name, &ImportOptions::default()).unwrap();
    let r = &import.report;
    println!("{name}: {r}");
    assert_eq!(r.rows, 8152);
    assert_eq!(r.imported + r.skipped.values().sum::<u64>(), r.rows);
    assert_eq!(import.jobs.len() as u64, r.imported);

    // README facts, over all rows (independent of what the importer skips).
    let all = rows(&text);
    assert_eq!(all.len(), 8152);
    let by_num_gpu = |n: &str| all.iter().filter(|r| r[3] == n).count();
    assert_eq!(by_num_gpu("0"), 1088, "CPU-only");
    assert_eq!(
        [
            by_num_gpu("1"),
            by_num_gpu("2"),
            by_num_gpu("4"),
            by_num_gpu("8")
        ],
        [6989, 16, 15, 44]
    );
    let sharing = all
        .iter()
        .filter(|r| r[3] == "1" && num(r[4]) < 1000)
        .count();
    assert_eq!(sharing, 3078);
    let total_milli: u64 = all.iter().map(|r| num(r[3]) * num(r[4])).sum();
    assert_eq!(total_milli, 6_086_800, "6,086.8 GPUs");

    // What the importer does with them: the only unusable rows of
    // `default` are the pods that never ran (empty scheduled_time).
    let pending = all.iter().filter(|r| r[10].is_empty()).count() as u64;
    assert_eq!(pending, 897);
    assert_eq!(
        r.skipped,
        BTreeMap::from([(SKIP_NOT_SCHEDULED.to_string(), pending)])
    );
    assert_eq!(r.imported, 7255);
    let imported_milli: u64 = import.jobs.iter().map(|j| j.gpu_milli()).sum();
    let scheduled_milli: u64 = all
        .iter()
        .filter(|r| !r[10].is_empty())
        .map(|r| num(r[3]) * num(r[4]))
        .sum();
    assert_eq!(imported_milli, scheduled_milli);
    // Pods still running at collection time (deletion_time = end of the
    // trace) are kept.
    let still_running: Vec<&str> = all
        .iter()
        .filter(|r| r[7] == "Running" && r[9] == "12902960")
        .map(|r| r[0])
        .collect();
    assert_eq!(still_running.len(), 34);
    for id in still_running {
        assert!(import.jobs.iter().any(|j| j.id == id), "{id}");
    }
    assert!(
        import
            .jobs
            .windows(2)
            .all(|w| (w[0].submit, &w[0].id) < (w[1].submit, &w[1].id))
    );
}

#[test]
fn every_pod_list_accounts_for_every_row() {
    let Some(dir) = common::shared_path("every_pod_list_accounts_for_every_row", "openb") else {
        return;
    };
    let dir = std::fs::read_dir(&dir).expect("the trace directory is readable");
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("openb_pod_list_") && n.ends_with(".csv"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 17, "{names:?}");
    for name in names {
        let text = read(&name).expect("a listed trace file exists");
        let import = parse_pods(&text, &name, &ImportOptions::default()).unwrap();
        let r = &import.report;
        println!("{name}: {r}");
        assert_eq!(r.rows, rows(&text).len() as u64, "{name}");
        assert_eq!(
            r.imported + r.skipped.values().sum::<u64>(),
            r.rows,
            "{name}"
        );
        if name.contains("multigpu") {
            assert_eq!(r.imported, 0, "{name}");
            assert_eq!(
                r.skipped,
                BTreeMap::from([(SKIP_NO_TIME_COLUMNS.to_string(), r.rows)]),
                "{name}"
            );
        } else {
            let pending = rows(&text).iter().filter(|r| r[10].is_empty()).count() as u64;
            assert_eq!(
                r.skipped,
                BTreeMap::from([(SKIP_NOT_SCHEDULED.to_string(), pending)]),
                "{name}"
            );
        }
    }
}

#[test]
fn node_list_matches_the_readme() {
    let name = "openb_node_list_gpu_node.csv";
    let Some(text) = read(name) else { return };
    let nodes = parse_nodes(&text, name).unwrap();
    assert_eq!(nodes.len(), 1213);
    assert_eq!(nodes.iter().map(|n| n.gpus.len()).sum::<usize>(), 6212);
    assert_eq!(
        nodes.iter().map(|n| n.allocatable.cpu).sum::<u64>(),
        107_018_000,
        "107,018 cores"
    );
    assert_eq!(
        nodes.iter().map(|n| n.allocatable.gpu).sum::<u64>(),
        6_212_000
    );
    // Model × GPUs/node → nodes.
    let mut mix: BTreeMap<(String, usize), usize> = BTreeMap::new();
    for n in &nodes {
        let model = n.labels["nvidia.com/gpu.product"].clone();
        assert!(n.gpus.iter().all(|d| d.model == model));
        *mix.entry((model, n.gpus.len())).or_default() += 1;
    }
    let want: BTreeMap<(String, usize), usize> = [
        ("G2", 8, 549),
        ("T4", 2, 387),
        ("P100", 2, 131),
        ("G3", 8, 39),
        ("V100M16", 4, 28),
        ("V100M32", 8, 21),
        ("V100M16", 1, 19),
        ("T4", 4, 17),
        ("V100M32", 4, 9),
        ("V100M16", 8, 8),
        ("P100", 1, 3),
        ("A10", 1, 2),
    ]
    .into_iter()
    .map(|(m, g, n)| ((m.to_string(), g), n))
    .collect();
    assert_eq!(mix, want);
}
