//! Objects applied one by one, in any order and with churn, give the
//! snapshot a whole-file load of the same objects gives: the incremental
//! path and the loader share one interpretation.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use trainyard_cluster::{Change, ClusterState, Decoded, ObjectChange};
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

/// The changes that build the objects of `text`, read as a file.
fn changes(name: &str, text: &str) -> Vec<ObjectChange> {
    let decoded = Decoded::of(trainyard_ingest::read(&[Source::new(name, text)]));
    decoded.changes
}

/// Every object of `text` alone, as JSON, the way an API server lists them.
fn api_objects(name: &str, text: &str) -> Vec<serde_json::Value> {
    let docs = trainyard_ingest::parse_documents(&Source::new(name, text)).expect("parses");
    trainyard_ingest::split_objects(docs)
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
    match c {
        ObjectChange::Pod(_, p) => ObjectChange::gone("Pod", Some(&p.namespace), &p.name),
        ObjectChange::PodGroup(_, g) => {
            ObjectChange::gone("PodGroup", Some(g.namespace()), &g.metadata.name)
        }
        ObjectChange::Node(_, n) => ObjectChange::gone("Node", None, &n.name),
        ObjectChange::Queue(_, q) => ObjectChange::gone("Queue", None, &q.metadata.name),
        _ => None,
    }
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

#[test]
fn objects_read_one_by_one_as_an_api_serves_them_give_the_loaded_snapshot() {
    let mut checked = 0;
    for (name, text) in inputs() {
        let opts = LoadOptions::default();
        let Ok(loaded) = trainyard_ingest::load(&[Source::new(&name, &text)], &opts) else {
            continue; // scenarios of bad input: nothing to compare
        };
        let mut s = ClusterState::for_objects(opts);
        for (i, object) in api_objects(&name, &text).iter().enumerate() {
            let decoded = Decoded::object(object, &format!("{name} object {i}"));
            assert!(decoded.errors.is_empty(), "{name}: {:?}", decoded.errors);
            for c in decoded.changes {
                s.apply(Change::Object(c));
            }
        }
        let got = s.snapshot();
        assert!(
            s.problems().errors.is_empty(),
            "{name}: {:?}",
            s.problems().errors
        );
        if let Err(e) = same(&name, &loaded.snapshot, &got) {
            panic!("{e}");
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} inputs loaded");
}

#[test]
fn one_bad_object_names_itself_and_changes_nothing() {
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"schedulerName": "trainyard", "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "lots"}}}
        ]}
    });
    let decoded = Decoded::object(&pod, "watch pods");
    assert!(decoded.changes.is_empty());
    let messages: Vec<String> = decoded.errors.iter().map(ToString::to_string).collect();
    expect_test::expect![[r#"
        [
            "watch pods: Pod ml/p: spec.containers[0].resources.requests.cpu: invalid quantity \"lots\"; expected a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or exponent (e.g. 1e3), such as \"500m\", \"8\" or \"64Gi\"",
        ]
    "#]]
    .assert_debug_eq(&messages);
}

/// A Kubernetes PodGroup with a bad value is no unreadable object: its
/// job pends naming the field (not "waiting for the group to be
/// created"); fixed, the gang is placed. A pod of another scheduler naming
/// the group refuses it until the pod goes.
#[test]
fn kubernetes_podgroup_problems_and_strangers_follow_the_objects() {
    let base = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '64', memory: 64Gi, pods: '110', nvidia.com/gpu: '8'}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: ml}\nspec: {schedulerName: trainyard, schedulingGroup: {podGroupName: g}, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '1'}}}]}\n";
    let group = |min: i64| {
        format!(
            "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {{name: g, namespace: ml}}\nspec: {{schedulingPolicy: {{gang: {{minCount: {min}}}}}}}\n"
        )
    };
    let mut s = ClusterState::for_objects(LoadOptions::default());
    let apply = |s: &mut ClusterState, text: &str| {
        for c in changes("t.yaml", text) {
            s.apply(Change::Object(c));
        }
    };
    let reason = |s: &mut ClusterState| {
        let d = trainyard_sched::schedule(
            &s.snapshot(),
            &trainyard_sched::Config::default(),
            trainyard_model::Timestamp(0),
        );
        d.pending
            .iter()
            .map(|p| format!("{} {}", p.reason.code(), p.message))
            .collect::<Vec<_>>()
            .join("; ")
            + &format!(" | binds {}", d.binds.len())
    };
    apply(&mut s, base);
    assert_eq!(
        reason(&mut s),
        "WaitingForPodGroup waiting for PodGroup ml/g to be created (its pods name it by spec.schedulingGroup.podGroupName) | binds 0"
    );
    apply(&mut s, &group(0));
    let r = reason(&mut s);
    assert!(
        r.starts_with("Rejected ")
            && r.contains("spec.schedulingPolicy.gang.minCount")
            && r.ends_with("binds 0"),
        "{r}"
    );
    apply(&mut s, &group(1));
    assert_eq!(reason(&mut s), " | binds 1");
    let stranger = "apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: ml}\nspec: {schedulingGroup: {podGroupName: g}, containers: [{name: c}]}\n";
    apply(&mut s, stranger);
    assert_eq!(
        reason(&mut s),
        "SchedulerError pods of PodGroup ml/g name different schedulers: default-scheduler (ml/b), trainyard (ml/a); a PodGroup's pods must share one schedulerName | binds 0"
    );
    s.apply(Change::Object(
        ObjectChange::gone("Pod", Some("ml"), "b").expect("pods can go"),
    ));
    assert_eq!(reason(&mut s), " | binds 1");
}
