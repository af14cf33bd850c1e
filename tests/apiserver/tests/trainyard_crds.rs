//! Trainyard's own CRDs (`deploy/crds`) with kubectl against the test API
//! server: applied, listed with their printer columns and short names, and
//! bad objects refused with the API server's answer (422 naming the field,
//! CEL message included), while Trainyard's reader names the same object
//! and field.

mod common;

use std::path::Path;

use common::{Kubectl, kubectl_or_skip, manual_server};
use serde_json::json;

fn deploy_crds() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/crds")
        .display()
        .to_string()
}

const QUEUES: &str = r#"
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata: {name: research}
spec:
  quota: {nvidia.com/gpu: 24, cpu: "256"}
  limit: {nvidia.com/gpu: 32, cpu: unlimited}
---
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata: {name: nlp}
spec:
  parent: research
  overQuotaWeight: 2
  quota: {nvidia.com/gpu: 16}
  minRuntime: 30m
---
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: trainyard.io/v1alpha1
kind: PodGroup
metadata: {name: train, namespace: ml}
spec:
  queue: nlp
  minMember: 4
  subGroups: [{name: workers, minMember: 3}]
  topology: {required: leaf}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_trainyard_crds_and_shows_their_columns() {
    let Some(bin) = kubectl_or_skip("kubectl_applies_trainyard_crds_and_shows_their_columns")
    else {
        return;
    };
    let server = manual_server().await;
    let k = Kubectl::new(bin, &server, "trainyard-crds");
    let out = k.ok(&["apply", "-f", &deploy_crds()]).await;
    for crd in [
        "queues.trainyard.io",
        "podgroups.trainyard.io",
        "topologies.trainyard.io",
    ] {
        assert!(out.contains(crd), "{out}");
    }
    let file = k.dir.join("objects.yaml");
    std::fs::write(&file, QUEUES).expect("write");
    k.ok(&["apply", "-f", file.to_str().expect("utf-8")]).await;

    let table = k.ok(&["get", "tyq"]).await;
    let header = table.lines().next().unwrap_or("");
    let columns: Vec<&str> = header
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        columns,
        [
            "NAME",
            "PARENT",
            "WEIGHT",
            "QUOTA GPUS",
            "LIMIT GPUS",
            "ALLOCATED GPUS",
            "REQUESTED GPUS",
            "FAIR SHARE GPUS",
            "PENDING",
            "READY",
            "REASON",
            "AGE"
        ],
        "{table}"
    );
    let nlp = table
        .lines()
        .find(|l| l.starts_with("nlp"))
        .expect("nlp listed");
    let cells: Vec<&str> = nlp.split_whitespace().collect();
    assert_eq!(&cells[..4], ["nlp", "research", "2", "16"], "{table}");
    // The defaults the schema declares are filled in by the server.
    let research = table
        .lines()
        .find(|l| l.starts_with("research"))
        .expect("listed");
    assert!(research.split_whitespace().nth(1) == Some("1"), "{table}");

    // The status columns, once the scheduler has written a status: zeros
    // read as 0; a queue without a GPU limit (unlimited) has an empty cell.
    let status = json!({"status": {
        "allocated": {"nvidia.com/gpu": "0"}, "requested": {"nvidia.com/gpu": "8"},
        "fairShare": {"nvidia.com/gpu": "16"}, "pendingJobs": 1, "runningJobs": 0,
        "conditions": [{"type": "Ready", "status": "True", "reason": "InTree", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    k.ok(&[
        "patch",
        "tyq",
        "nlp",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ])
    .await;
    let table = k.ok(&["get", "tyq"]).await;
    assert_eq!(
        row_cells(&table, "nlp"),
        [
            "nlp", "research", "2", "16", "", "0", "8", "16", "1", "True", "InTree"
        ],
        "{table}"
    );
    assert_eq!(
        row_cells(&table, "research")[..6],
        ["research", "", "1", "24", "32", ""],
        "{table}"
    );

    let wide = k.ok(&["get", "queues.trainyard.io", "-o", "wide"]).await;
    assert!(
        wide.lines().next().unwrap_or("").contains("RUNNING"),
        "{wide}"
    );

    let groups = k.ok(&["get", "typg", "-n", "ml"]).await;
    let header: Vec<&str> = groups
        .lines()
        .next()
        .unwrap_or("")
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "QUEUE",
            "MIN MEMBER",
            "PHASE",
            "SCHEDULED",
            "REASON",
            "AGE"
        ],
        "{groups}"
    );
    assert!(
        groups.contains("train") && groups.contains("nlp"),
        "{groups}"
    );

    // The category lists all three kinds.
    let all = k.ok(&["get", "trainyard", "-A"]).await;
    assert!(all.contains("queue.trainyard.io/nlp"), "{all}");
    assert!(all.contains("podgroup.trainyard.io/train"), "{all}");
}

/// The cells of the row of `name` in a kubectl table, cut at the
/// header's columns (an empty cell is ""), without AGE.
fn row_cells(table: &str, name: &str) -> Vec<String> {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or("");
    // A column starts after two or more spaces (names have single ones).
    let h = header.as_bytes();
    let mut starts: Vec<usize> = vec![0];
    starts.extend((2..h.len()).filter(|&i| h[i] != b' ' && h[i - 1] == b' ' && h[i - 2] == b' '));
    let row = lines
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("{name} not listed: {table}"));
    let ends: Vec<usize> = starts.iter().skip(1).copied().chain([row.len()]).collect();
    let mut out: Vec<String> = starts
        .iter()
        .zip(ends)
        .map(|(&a, b)| {
            row.get(a..b.min(row.len()))
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .collect();
    out.pop(); // AGE
    out
}

/// A bad object: what kubectl prints from the server's 422, and what
/// Trainyard's reader says of the same object.
async fn refused(k: &Kubectl, name: &str, object: serde_json::Value) -> (String, String) {
    let file = k.dir.join(format!("{name}.json"));
    std::fs::write(&file, object.to_string()).expect("write");
    let out = k
        .run(&["create", "-f", file.to_str().expect("utf-8")])
        .await;
    assert!(!out.ok, "{name} was accepted: {}", out.stdout);
    let source = trainyard_ingest::Source::new(format!("{name}.json"), object.to_string());
    // The reader refuses what cannot be read; a Queue whose values are
    // bad is left out with a warning naming the same field.
    let reader = match trainyard_ingest::load(&[source], &Default::default()) {
        Ok(l) if l.warnings.is_empty() => "accepted".to_string(),
        Ok(l) => l.warnings.join("\n"),
        Err(e) => e.to_string(),
    };
    (out.stderr.trim().to_string(), reader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_queues_get_the_api_servers_answer_and_the_readers() {
    let Some(bin) = kubectl_or_skip("bad_queues_get_the_api_servers_answer_and_the_readers") else {
        return;
    };
    let server = manual_server().await;
    let k = Kubectl::new(bin, &server, "trainyard-bad");
    k.ok(&["apply", "-f", &deploy_crds()]).await;
    let queue = |name: &str, spec: serde_json::Value| {
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
               "metadata": {"name": name}, "spec": spec})
    };

    let (api, reader) = refused(
        &k,
        "weight",
        queue("weight", json!({"overQuotaWeight": "heavy"})),
    )
    .await;
    assert!(api.contains("spec.overQuotaWeight"), "{api}");
    assert!(
        reader.contains("Queue weight: spec.overQuotaWeight"),
        "{reader}"
    );

    let (api, reader) = refused(
        &k,
        "quantity",
        queue("quantity", json!({"quota": {"nvidia.com/gpu": "lots"}})),
    )
    .await;
    assert!(api.contains("spec.quota"), "{api}");
    assert!(
        reader.contains("Queue quantity: spec.quota.nvidia.com/gpu"),
        "{reader}"
    );

    // A quantity that is not one: the reader's words, not a pattern.
    let (api, reader) = refused(
        &k,
        "units",
        queue("units", json!({"quota": {"nvidia.com/gpu": "8 GPUs"}})),
    )
    .await;
    let words = "invalid quantity \"8 GPUs\"; expected a number with an optional suffix";
    assert!(api.contains(words), "{api}");
    assert!(!api.contains("should match"), "{api}");
    assert!(reader.contains(words), "{reader}");

    // A negative integer (the pattern of old covered strings only).
    let (api, reader) = refused(
        &k,
        "negative",
        queue("negative", json!({"quota": {"nvidia.com/gpu": -1}})),
    )
    .await;
    let words = "quantity \"-1\" is negative; expected an amount of zero or more";
    assert!(api.contains(words), "{api}");
    assert!(reader.contains(words), "{reader}");

    // A YAML number with a fraction is refused by type before any rule
    // runs (kube-apiserver does the same): the field is named; the schema's
    // description (kubectl explain) says to quote it.
    let file = k.dir.join("fraction.json");
    let fraction = queue("fraction", json!({"quota": {"nvidia.com/gpu": 2.5}}));
    std::fs::write(&file, fraction.to_string()).expect("write");
    let out = k
        .run(&["create", "-f", file.to_str().expect("utf-8")])
        .await;
    assert!(!out.ok, "{}", out.stdout);
    assert!(
        out.stderr.contains("spec.quota.nvidia.com/gpu"),
        "{}",
        out.stderr
    );

    let (api, reader) = refused(
        &k,
        "limit",
        queue(
            "limit",
            json!({"quota": {"nvidia.com/gpu": 8}, "limit": {"nvidia.com/gpu": 4}}),
        ),
    )
    .await;
    assert!(
        api.contains("quota 8 nvidia.com/gpu is above its own limit 4; each limit must be at least the quota of the same resource"),
        "{api}"
    );
    assert!(api.contains("spec.limit"), "{api}");
    assert!(
        reader.contains("quota 8 nvidia.com/gpu is above its own limit 4"),
        "{reader}"
    );

    let pg = json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "zero", "namespace": "default"}, "spec": {"minMember": 0}});
    let file = k.dir.join("zero.json");
    std::fs::write(&file, pg.to_string()).expect("write");
    let out = k
        .run(&["create", "-f", file.to_str().expect("utf-8")])
        .await;
    assert!(!out.ok, "{}", out.stdout);
    assert!(out.stderr.contains("spec.minMember"), "{}", out.stderr);
    let reader = trainyard_crd::PodGroup::from_value(&pg)
        .and_then(|g| g.validate())
        .expect_err("refused");
    assert!(
        reader
            .to_string()
            .contains("PodGroup default/zero: spec.minMember"),
        "{reader}"
    );
}
