//! kubectl against `scheduling.k8s.io` Workloads and PodGroups: `kubectl
//! apply -f` of a Workload and a PodGroup, `kubectl get` by the fully
//! qualified `podgroups.v1beta1.scheduling.k8s.io`, a status condition
//! written with `kubectl patch --subresource=status` and read back with
//! `-o jsonpath`, and `kubectl get` at v1alpha2 on a server serving only it.
//! The kube-rs view is in `workload_apis.rs`.

mod common;

use std::time::Duration;

use common::{Kubectl, fixture, kubectl_or_skip, manual_server};
use trainyard_testapi::{Config, TestApiServer, WorkloadApis};

const CONDITION: &str = r#"{"status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": "all 4 pods placed", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_gets_and_reads_pod_group_conditions() {
    let Some(bin) = kubectl_or_skip("kubectl_applies_gets_and_reads_pod_group_conditions") else {
        return;
    };
    let server = manual_server().await;
    let k = Kubectl::new(bin, &server, "workloads");
    let out = k
        .ok(&[
            "apply",
            "-f",
            &fixture("workload.yaml").display().to_string(),
        ])
        .await;
    for made in [
        "workload.scheduling.k8s.io/train created",
        "podgroup.scheduling.k8s.io/train-0 created",
    ] {
        assert!(out.contains(made), "{made}: {out}");
    }
    let table = k.ok(&["get", "podgroups.v1beta1.scheduling.k8s.io"]).await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "AGE"], "{table}");
    assert!(table.lines().any(|l| l.starts_with("train-0 ")), "{table}");
    let table = k.ok(&["get", "workloads.scheduling.k8s.io"]).await;
    assert!(table.lines().any(|l| l.starts_with("train ")), "{table}");
    // Applying again changes nothing.
    let again = k
        .ok(&[
            "apply",
            "-f",
            &fixture("workload.yaml").display().to_string(),
        ])
        .await;
    assert!(
        again.contains("podgroup.scheduling.k8s.io/train-0 unchanged"),
        "{again}"
    );

    k.ok(&[
        "patch",
        "podgroup",
        "train-0",
        "--subresource=status",
        "--type=merge",
        "-p",
        CONDITION,
    ])
    .await;
    let types = k
        .ok(&[
            "get",
            "podgroup",
            "train-0",
            "-o",
            "jsonpath={.status.conditions[*].type}={.status.conditions[*].status}",
        ])
        .await;
    assert_eq!(types, "PodGroupInitiallyScheduled=True");
    let conditions = k
        .ok(&[
            "get",
            "podgroup",
            "train-0",
            "-o",
            "jsonpath={.status.conditions}",
        ])
        .await;
    let parsed: serde_json::Value = serde_json::from_str(&conditions).expect("conditions are JSON");
    assert_eq!(parsed[0]["message"], "all 4 pods placed");

    // A bad condition is refused with the field named.
    let bad = k
        .run(&[
            "patch",
            "podgroup",
            "train-0",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status": {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "Yes", "reason": "Scheduled", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}"#,
        ])
        .await;
    assert!(!bad.ok);
    assert!(
        bad.stderr.contains("status.conditions[0].status"),
        "{}",
        bad.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_finds_pod_groups_at_the_only_version_served() {
    let Some(bin) = kubectl_or_skip("kubectl_finds_pod_groups_at_the_only_version_served") else {
        return;
    };
    let server = TestApiServer::start(Config {
        manual_clock: true,
        bookmark_interval: Duration::from_millis(200),
        workload_apis: WorkloadApis::V1ALPHA2,
        ..Config::default()
    })
    .await
    .expect("server");
    server
        .create(
            serde_json::json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {"schedulingPolicy": {"basic": {}}}}),
        )
        .expect("alpha group");
    let k = Kubectl::new(bin, &server, "workloads-alpha");
    let av = k
        .ok(&["get", "podgroups", "g", "-o", "jsonpath={.apiVersion}"])
        .await;
    assert_eq!(av, "scheduling.k8s.io/v1alpha2");
    let missing = k.run(&["get", "podgroups.v1beta1.scheduling.k8s.io"]).await;
    assert!(!missing.ok, "v1beta1 is not served: {}", missing.stdout);
    let resources = k
        .ok(&[
            "api-resources",
            "--api-group=scheduling.k8s.io",
            "-o",
            "name",
        ])
        .await;
    let mut names: Vec<&str> = resources.lines().collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "podgroups.scheduling.k8s.io",
            "priorityclasses.scheduling.k8s.io",
            "workloads.scheduling.k8s.io"
        ]
    );
}
