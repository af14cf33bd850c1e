//! The scheduling core stays pure: `trainyard-topology`, `trainyard-model`,
//! `trainyard-sched`, `trainyard-crd` and `trainyard-ingest` must not depend, directly or
//! transitively, on async runtimes, Kubernetes clients, storage engines or
//! RPC stacks. Checked on the real dependency graph from `cargo metadata`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

const CORE: &[&str] = &[
    "trainyard-topology",
    "trainyard-model",
    "trainyard-sched",
    "trainyard-crd",
    "trainyard-ingest",
    "trainyard-cluster",
];
const FORBIDDEN: &[&str] = &[
    "tokio",
    "async-std",
    "smol",
    "kube",
    "kube-client",
    "kube-runtime",
    "k8s-openapi",
    "sled",
    "redb",
    "rocksdb",
    "tonic",
    "prost",
    "hyper",
    "reqwest",
    "rayon",
];

#[test]
fn core_crates_have_no_io_dependencies() {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap_or(""),
                p["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    // Normal (non-dev, non-build) edges of the resolved graph.
    let mut edges: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("resolve nodes") {
        let id = node["id"].as_str().unwrap_or("");
        for dep in node["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].is_null());
            if normal {
                edges
                    .entry(id)
                    .or_default()
                    .push(dep["pkg"].as_str().unwrap_or(""));
            }
        }
    }
    let mut violations = Vec::new();
    let mut reached_serde = false;
    for core in CORE {
        let start = names
            .iter()
            .find(|(_, n)| *n == core)
            .map(|(id, _)| *id)
            .unwrap_or_else(|| panic!("{core} not in workspace"));
        let mut seen = BTreeSet::new();
        let mut stack = vec![(start, vec![*core])];
        while let Some((id, path)) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            for &dep in edges.get(id).into_iter().flatten() {
                let name = names.get(dep).copied().unwrap_or("?");
                let mut p = path.clone();
                p.push(name);
                reached_serde |= name == "serde";
                if FORBIDDEN.contains(&name) {
                    violations.push(p.join(" -> "));
                }
                stack.push((dep, p));
            }
        }
    }
    // The walk really follows the graph: serde is reachable from the core.
    assert!(
        reached_serde,
        "dependency walk found nothing; the check is broken"
    );
    assert!(
        violations.is_empty(),
        "core crates depend on I/O crates:\n{}",
        violations.join("\n")
    );
}

#[test]
fn core_sources_do_not_touch_io_or_clock() {
    // The dependency check cannot see std: grep the core's sources for
    // the std APIs that would break purity.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let banned = [
        "std::fs",
        "std::net",
        "std::env",
        "SystemTime",
        "Instant::now",
        "std::process",
        "println!",
        "thread_local!",
        "static mut",
    ];
    let mut hits = Vec::new();
    for dir in [
        "crates/topology/src",
        "crates/model/src",
        "crates/sched/src",
        "api/crd/src",
        "crates/ingest/src",
        "crates/cluster/src",
    ] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("source dir").flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let text = std::fs::read_to_string(&p).expect("readable");
                    for (i, line) in text.lines().enumerate() {
                        if line.trim_start().starts_with("//") {
                            continue;
                        }
                        for b in banned {
                            if line.contains(b) {
                                hits.push(format!("{}:{}: {b}", p.display(), i + 1));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "impure code in the core:\n{}",
        hits.join("\n")
    );
}
