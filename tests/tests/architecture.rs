//! The house's rules, checked on the real dependency graph from `cargo
//! metadata` and on the sources:
//!
//! - the pure crates (`trainyard-topology`, `-model`, `-dra`, `-sched`,
//!   `-crd`, `-ingest`, `-cluster`) do not depend, directly or transitively, on
//!   async runtimes, Kubernetes clients, storage engines or RPC stacks,
//!   and the scheduling core (`-topology`, `-model`, `-sched`) and `-dra`
//!   not even on the Kubernetes API's types;
//! - their sources and the simulator's use no file, network, environment,
//!   process or clock API, no `println!` and no global mutable state;
//! - workspace crates depend on each other only as the allow-list says.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Which workspace crate may depend on which (normal dependencies, direct).
/// Anything not listed is forbidden; every workspace crate must be listed.
/// The rule of each crate is in ARCHITECTURE.md's code map.
const ALLOWED: &[(&str, &[&str])] = &[
    ("trainyard-topology", &[]),
    ("trainyard-model", &["trainyard-topology"]),
    // DRA selectors (CEL) evaluated into device masks: the model only.
    ("trainyard-dra", &["trainyard-model"]),
    (
        "trainyard-sched",
        &["trainyard-model", "trainyard-topology"],
    ),
    ("trainyard-crd", &["trainyard-model", "trainyard-topology"]),
    (
        "trainyard-ingest",
        &[
            "trainyard-dra",
            "trainyard-crd",
            "trainyard-model",
            "trainyard-topology",
        ],
    ),
    (
        "trainyard-cluster",
        &[
            "trainyard-dra",
            "trainyard-ingest",
            "trainyard-sched",
            "trainyard-crd",
            "trainyard-model",
            "trainyard-topology",
        ],
    ),
    (
        "trainyard-sim",
        &[
            "trainyard-cluster",
            "trainyard-sched",
            "trainyard-ingest",
            "trainyard-crd",
            "trainyard-model",
            "trainyard-topology",
        ],
    ),
    (
        "trainyard-serve",
        &[
            "trainyard-store",
            "trainyard-cluster",
            "trainyard-ingest",
            "trainyard-sched",
            "trainyard-crd",
            "trainyard-model",
        ],
    ),
    // The gRPC API (I/O edge): reads the service's live view and runs
    // the core on copies; never decides for the service.
    (
        "trainyard-api",
        &[
            "trainyard-serve",
            "trainyard-sim",
            "trainyard-ingest",
            "trainyard-sched",
            "trainyard-model",
        ],
    ),
    // The persisted state: the only crate that knows the on-disk format,
    // with its own record types; it never imports the core.
    ("trainyard-store", &[]),
    // Process-wide settings of the binaries; depends on nothing of ours.
    ("trainyard-runtime", &[]),
    (
        "trainyard-cli",
        &[
            "trainyard-runtime",
            "trainyard-api",
            "trainyard-serve",
            "trainyard-store",
            "trainyard-sim",
            "trainyard-cluster",
            "trainyard-dra",
            "trainyard-ingest",
            "trainyard-sched",
            "trainyard-crd",
            "trainyard-model",
            "trainyard-topology",
        ],
    ),
    (
        "trainyard-bench",
        &[
            "trainyard-runtime",
            "trainyard-api",
            "trainyard-serve",
            "trainyard-store",
            "trainyard-sim",
            "trainyard-cluster",
            "trainyard-dra",
            "trainyard-ingest",
            "trainyard-sched",
            "trainyard-crd",
            "trainyard-model",
            "trainyard-topology",
        ],
    ),
    (
        "trainyard-tests",
        &[
            "trainyard-cluster",
            "trainyard-dra",
            "trainyard-ingest",
            "trainyard-sched",
            "trainyard-crd",
            "trainyard-model",
            "trainyard-topology",
        ],
    ),
    // The test API server: an I/O tool for tests, generic over kinds; it
    // knows nothing of Trainyard (its tests may use anything, as dev-deps).
    ("trainyard-testapi", &[]),
    // The deterministic simulation of the service: its state machine
    // against the test API server's rules, in-process.
    (
        "trainyard-dst",
        &[
            "trainyard-serve",
            "trainyard-testapi",
            "trainyard-cluster",
            "trainyard-sched",
            "trainyard-store",
            "trainyard-crd",
            "trainyard-model",
        ],
    ),
];

const CORE: &[&str] = &[
    "trainyard-topology",
    "trainyard-model",
    "trainyard-dra",
    "trainyard-sched",
    "trainyard-crd",
    "trainyard-ingest",
    "trainyard-cluster",
];
/// I/O: no pure crate may reach these.
const FORBIDDEN: &[&str] = &[
    "tokio",
    "async-std",
    "smol",
    "kube-client",
    "kube-runtime",
    "sled",
    "redb",
    "rocksdb",
    "tonic",
    "prost",
    "hyper",
    "reqwest",
    "rayon",
];
/// The scheduling core proper (model, topology, sched) does not even see
/// the Kubernetes API's types: it knows only the model. Nor does the DRA
/// selector evaluator (`trainyard-dra`): CEL, on model devices. The API crate
/// (`trainyard-crd`) uses them as data (the CustomResource derive, status
/// conditions), without a client, and so may the crates built on it.
const SCHEDULING_CORE: &[&str] = &[
    "trainyard-topology",
    "trainyard-model",
    "trainyard-sched",
    "trainyard-dra",
];
const KUBERNETES_TYPES: &[&str] = &["kube", "kube-core", "kube-derive", "k8s-openapi"];

/// The workspace's resolved graph from `cargo metadata`: package id ->
/// name, and each package's normal (non-dev, non-build) dependencies.
struct Graph {
    json: serde_json::Value,
}

impl Graph {
    fn load() -> Graph {
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
        Graph {
            json: serde_json::from_slice(&out.stdout).expect("metadata is JSON"),
        }
    }

    fn names(&self) -> BTreeMap<&str, &str> {
        self.json["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .map(|p| {
                (
                    p["id"].as_str().unwrap_or(""),
                    p["name"].as_str().unwrap_or(""),
                )
            })
            .collect()
    }

    fn edges(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut edges: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for node in self.json["resolve"]["nodes"]
            .as_array()
            .expect("resolve nodes")
        {
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
        edges
    }
}

#[test]
fn core_crates_have_no_io_dependencies() {
    let graph = Graph::load();
    let names = graph.names();
    let edges = graph.edges();
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
                if FORBIDDEN.contains(&name)
                    || (SCHEDULING_CORE.contains(core) && KUBERNETES_TYPES.contains(&name))
                {
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

/// The lines of the Rust sources under `dir` (recursively) that contain
/// one of `banned`, comments aside, as `path:line: text`; and how many
/// files were read.
fn banned_lines(dir: &std::path::Path, banned: &[&str]) -> (Vec<String>, usize) {
    let mut hits = Vec::new();
    let mut files = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("source dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files += 1;
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
    (hits, files)
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
        "crates/dra/src",
        "crates/sched/src",
        "api/crd/src",
        "crates/ingest/src",
        "crates/cluster/src",
        // The simulator is text in, text out on a virtual clock.
        "simulator/src",
    ] {
        hits.extend(banned_lines(&root.join(dir), &banned).0);
    }
    assert!(
        hits.is_empty(),
        "impure code in the core:\n{}",
        hits.join("\n")
    );
}

/// The service's state machine (`crates/serve/src/machine`) is sans-IO:
/// no async, no client, no clock, no file: the shell and the simulation
/// drive the same code.
#[test]
fn the_service_machine_is_sans_io() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/serve/src/machine");
    let banned = [
        "tokio",
        "kube::",
        "async ",
        ".await",
        "std::fs",
        "std::net",
        "std::env",
        "SystemTime",
        "Instant",
        "std::thread",
        "wall_clock",
        "println!",
    ];
    let (hits, files) = banned_lines(&root, &banned);
    assert!(files >= 4, "the machine's sources were not found");
    assert!(
        hits.is_empty(),
        "I/O in the service's state machine:\n{}",
        hits.join("\n")
    );
}

/// Every edge between workspace crates must be on the allow-list above.
#[test]
fn workspace_crates_depend_only_on_allowed_crates() {
    let graph = Graph::load();
    let names = graph.names();
    let edges = graph.edges();
    let ours = |n: &str| n.starts_with("trainyard-");
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut problems = Vec::new();
    let mut crates = 0;
    for (id, name) in &names {
        if !ours(name) {
            continue;
        }
        crates += 1;
        let Some(ok) = allowed.get(name) else {
            problems.push(format!(
                "{name} is not on the allow-list; add it with the crates it may use"
            ));
            continue;
        };
        for dep in edges.get(id).into_iter().flatten() {
            let dep = names.get(dep).copied().unwrap_or("?");
            if ours(dep) && !ok.contains(&dep) {
                problems.push(format!("{name} -> {dep} is not allowed"));
            }
        }
    }
    assert!(
        crates >= 9,
        "only {crates} workspace crates found; the check is broken"
    );
    assert!(
        problems.is_empty(),
        "forbidden edges:\n{}",
        problems.join("\n")
    );
}
