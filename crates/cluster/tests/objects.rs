//! Objects applied one by one, in any order and with churn, give the
//! snapshot a whole-file load of the same objects gives: the incremental
//! path and the loader share one interpretation.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use trainyard_cluster::{Change, ClusterState, ObjectChange};
use trainyard_ingest::{LoadOptions, Source};
use trainyard_model::Snapshot;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every bundled snapshot: the example and each scenario's `snapshot`.
fn inputs() -> Vec<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Scenario {
        snapshot: String,
    }
    let mut out = vec![(
        "examples/snapshot.yaml".to_string(),
        std::fs::read_to_string(root().join("examples/snapshot.yaml")).expect("example exists"),
    )];
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("tests/scenarios"))
        .expect("tests/scenarios exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("scenario readable");
        let s: Scenario = serde_saphyr::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not a scenario: {e}", f.display()));
        out.push((f.display().to_string(), s.snapshot));
    }
    assert!(out.len() > 40, "expected the example and the scenarios");
    out
}

/// The changes that build the objects of `text`.
fn changes(name: &str, text: &str) -> Vec<ObjectChange> {
    let objects = trainyard_ingest::read(&[Source::new(name, text)]);
    let mut out = Vec::new();
    for (loc, n) in objects.nodes {
        out.push(ObjectChange::Node(loc, Box::new(n)));
    }
    for (name, value) in &objects.priority_classes {
        out.push(ObjectChange::PriorityClass {
            name: name.clone(),
            value: *value,
            never: objects.never_classes.contains(name),
        });
    }
    for (loc, q) in objects.queues {
        out.push(ObjectChange::Queue(loc, Box::new(q)));
    }
    for (loc, g) in objects.pod_groups {
        out.push(ObjectChange::PodGroup(loc, Box::new(g)));
    }
    for (loc, p) in objects.pods {
        out.push(ObjectChange::Pod(loc, Box::new(p)));
    }
    if objects.topology.is_some() {
        out.push(ObjectChange::Topology(objects.topology.map(Box::new)));
    }
    out
}

fn same(name: &str, want: &Snapshot, got: &Snapshot) -> Result<(), String> {
    let names = |s: &Snapshot| s.nodes.iter().map(|n| (**n).clone()).collect::<Vec<_>>();
    if names(want) != names(got) {
        return Err(format!("{name}: nodes differ"));
    }
    for (w, g) in want.jobs.iter().zip(&got.jobs) {
        if w != g {
            return Err(format!(
                "{name}: job {} differs:\n load: {w:?}\n incremental: {g:?}",
                w.id
            ));
        }
    }
    if want.jobs.len() != got.jobs.len() {
        let ids = |s: &Snapshot| s.jobs.iter().map(|j| j.id.clone()).collect::<Vec<_>>();
        return Err(format!("{name}: jobs {:?} vs {:?}", ids(want), ids(got)));
    }
    if want.external != got.external {
        return Err(format!("{name}: external pods differ"));
    }
    if want.queues != got.queues {
        return Err(format!("{name}: queue trees differ"));
    }
    if want.topology.is_some() != got.topology.is_some() {
        return Err(format!("{name}: topology present in one only"));
    }
    Ok(())
}

fn delete_of(c: &ObjectChange) -> Option<ObjectChange> {
    Some(match c {
        ObjectChange::Pod(_, p) => ObjectChange::PodGone {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
        },
        ObjectChange::PodGroup(_, g) => ObjectChange::PodGroupGone {
            namespace: g.namespace().to_string(),
            name: g.metadata.name.clone(),
        },
        ObjectChange::Node(_, n) => ObjectChange::NodeGone(n.name.clone()),
        ObjectChange::Queue(_, q) => ObjectChange::QueueGone(q.metadata.name.clone()),
        _ => return None,
    })
}

#[test]
fn objects_in_any_order_give_the_loaded_snapshot() {
    let mut checked = 0;
    for (name, text) in inputs() {
        let opts = LoadOptions::default();
        let Ok(loaded) = trainyard_ingest::load(&[Source::new(&name, &text)], &opts) else {
            continue; // scenarios of bad input: nothing to compare
        };
        let all = changes(&name, &text);
        let mut runner = TestRunner::new_with_rng(
            RunnerConfig {
                cases: 16,
                failure_persistence: None,
                ..RunnerConfig::default()
            },
            proptest::test_runner::TestRng::deterministic_rng(
                proptest::test_runner::RngAlgorithm::ChaCha,
            ),
        );
        // A permutation, and which changes are first deleted again and
        // re-applied after a snapshot was taken in between.
        let strategy = (
            Just(all.clone()).prop_shuffle(),
            prop::collection::vec(any::<bool>(), all.len()),
        );
        let result = runner.run(&strategy, |(order, churn)| {
            let mut s = ClusterState::for_objects(opts.clone());
            for (c, again) in order.iter().zip(&churn) {
                s.apply(Change::Object(c.clone()));
                if *again && let Some(d) = delete_of(c) {
                    s.apply(Change::Object(d));
                    s.snapshot();
                    s.apply(Change::Object(c.clone()));
                }
            }
            let got = s.snapshot();
            prop_assert!(
                s.problems().errors.is_empty(),
                "{name}: {:?}",
                s.problems().errors
            );
            same(&name, &loaded.snapshot, &got).map_err(TestCaseError::fail)?;
            Ok(())
        });
        if let Err(e) = result {
            panic!("{e}");
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} inputs loaded");
}
