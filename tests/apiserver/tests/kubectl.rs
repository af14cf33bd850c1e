//! kubectl against an in-process server: apply, get (tables and printer columns),
//! watch, describe, label, annotate, delete; the kinds stored without
//! controllers (a Job, the apps kinds, storage) and their tables.

mod common;

use std::time::Duration;

use common::{Kubectl, fixture, kubectl_or_skip, manual_server};
use tokio::io::{AsyncBufReadExt, BufReader};

fn f(name: &str) -> String {
    fixture(name).display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_crd_objects_printer_columns_and_validation() {
    let Some(bin) = kubectl_or_skip("kubectl_apply_crd_objects_printer_columns_and_validation")
    else {
        return;
    };
    let server = manual_server().await;
    let k = Kubectl::new(bin, &server, "crd");
    let out = k.ok(&["apply", "-f", &f("widget-crd.yaml")]).await;
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/widgets.testapi.trainyard.io created"
        ),
        "{out}"
    );
    k.ok(&[
        "wait",
        "--for",
        "condition=Established",
        "crd/widgets.testapi.trainyard.io",
        "--timeout=10s",
    ])
    .await;
    let out = k.ok(&["apply", "-f", &f("widgets.yaml")]).await;
    assert!(
        out.contains("widget.testapi.trainyard.io/alpha created")
            && out.contains("widget.testapi.trainyard.io/beta created"),
        "{out}"
    );

    let table = k.ok(&["get", "widgets"]).await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "SIZE", "WEIGHT", "PHASE", "AGE"],
        "{table}"
    );
    let beta = table
        .lines()
        .find(|l| l.starts_with("beta"))
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>();
    assert_eq!(&beta[..3], ["beta", "large", "70"], "{table}");
    // Short name and category resolve through discovery.
    assert!(
        k.ok(&["get", "wg", "alpha", "-o", "name"])
            .await
            .contains("widget.testapi.trainyard.io/alpha")
    );
    assert!(k.ok(&["get", "trainyard"]).await.contains("alpha"));
    // Defaulting from the schema.
    assert_eq!(
        k.ok(&["get", "widget", "alpha", "-o", "jsonpath={.spec.mode}"])
            .await,
        "fast"
    );

    // Schema validation: 422 naming the field.
    let bad = k.run(&["apply", "-f", &f("bad-widget.yaml")]).await;
    assert!(!bad.ok, "invalid widget accepted: {bad:?}");
    assert!(
        bad.stderr.contains("spec.weight") && bad.stderr.contains("greater than or equal to 0"),
        "{}",
        bad.stderr
    );

    // CEL rules (x-kubernetes-validations), including a transition rule.
    let heavy = k.dir.join("heavy.yaml");
    std::fs::write(&heavy, "apiVersion: testapi.trainyard.io/v1\nkind: Widget\nmetadata:\n  name: heavy\nspec:\n  size: small\n  weight: 70\n").expect("write");
    let cel = k.run(&["apply", "-f", &heavy.display().to_string()]).await;
    assert!(
        !cel.ok && cel.stderr.contains("small widgets weigh at most 50"),
        "{cel:?}"
    );
    let resize = k
        .run(&[
            "patch",
            "widget",
            "alpha",
            "--type=merge",
            "-p",
            r#"{"spec":{"size":"large"}}"#,
        ])
        .await;
    assert!(
        !resize.ok && resize.stderr.contains("size is immutable"),
        "{resize:?}"
    );

    // Re-apply with a change: client-side apply computes a merge patch for custom resources.
    let changed = std::fs::read_to_string(fixture("widgets.yaml"))
        .expect("fixture")
        .replace("weight: 5", "weight: 9");
    let path = k.dir.join("widgets-changed.yaml");
    std::fs::write(&path, changed).expect("write");
    let out = k.ok(&["apply", "-f", &path.display().to_string()]).await;
    assert!(
        out.contains("alpha configured") && out.contains("beta unchanged"),
        "{out}"
    );
    assert_eq!(
        k.ok(&["get", "widget", "alpha", "-o", "jsonpath={.spec.weight}"])
            .await,
        "9"
    );

    // label / annotate (merge patches on custom resources).
    k.ok(&["label", "widget", "alpha", "team=gpu"]).await;
    k.ok(&["annotate", "widget", "alpha", "note=hello"]).await;
    assert!(
        k.ok(&["get", "widgets", "-l", "team=gpu", "-o", "name"])
            .await
            .trim()
            .ends_with("widget.testapi.trainyard.io/alpha")
    );
    assert_eq!(
        k.ok(&[
            "get",
            "widget",
            "alpha",
            "-o",
            "jsonpath={.metadata.annotations.note}"
        ])
        .await,
        "hello"
    );

    let out = k.ok(&["delete", "widget", "beta"]).await;
    assert!(out.contains("\"beta\" deleted"), "{out}");
    let rest = k.ok(&["get", "widgets", "-o", "name"]).await;
    assert_eq!(rest.trim(), "widget.testapi.trainyard.io/alpha");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_pods_watch_sees_bind_and_describe_shows_events() {
    let Some(bin) = kubectl_or_skip("kubectl_get_pods_watch_sees_bind_and_describe_shows_events")
    else {
        return;
    };
    let server = manual_server().await;
    let k = Kubectl::new(bin, &server, "watch");
    k.ok(&["apply", "-f", &f("node.yaml")]).await;
    k.ok(&["apply", "-f", &f("pod.yaml")]).await;
    let nodes = k.ok(&["get", "nodes"]).await;
    assert!(nodes.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()[..3] == ["node-a", "Ready", "worker"]), "{nodes}");

    let mut child = k
        .command(&["get", "pods", "-w", "-o", "wide"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl -w");
    let stdout = child.stdout.take().expect("piped");
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("header in time")
        .expect("read");
    assert!(first.unwrap_or_default().starts_with("NAME"));
    let row = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("row in time")
        .expect("read")
        .unwrap_or_default();
    assert!(
        row.starts_with("web") && row.contains("Pending") && row.contains("<none>"),
        "{row}"
    );

    // Bind through the binding subresource, as a scheduler does.
    let body = serde_json::json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web"}, "target": {"kind": "Node", "name": "node-a"}});
    let bound = server.shared().clone();
    {
        let mut st = bound.lock();
        let def = st.registry.by_key("/pods").cloned().expect("pods served");
        trainyard_testapi::eviction::binding(&mut st, &def, "default", "web", &body).expect("bind");
    }
    let seen = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("node-a") {
                return l;
            }
        }
        String::new()
    })
    .await
    .expect("watch shows the bind in time");
    assert!(
        seen.starts_with("web") && seen.contains("Pending"),
        "{seen}"
    );
    // The kubelet starts it once the clock moves.
    server.advance(1);
    let running = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("Running") {
                return l;
            }
        }
        String::new()
    })
    .await
    .expect("watch shows Running in time");
    assert!(
        running.contains("1/1") && running.contains("node-a"),
        "{running}"
    );
    child.kill().await.expect("kill kubectl -w");

    // Events about the pod show in describe (field selector on involvedObject.*).
    server
        .create(serde_json::json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "apiVersion": "v1",
                "uid": server.get("v1", "Pod", "default", "web").expect("pod")["metadata"]["uid"]},
            "reason": "Scheduled", "message": "Successfully assigned default/web to node-a", "type": "Normal",
            "source": {"component": "trainyard"}}))
        .expect("event");
    server
        .create(serde_json::json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "other.1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "other", "namespace": "default"}, "reason": "Elsewhere", "message": "not this pod", "type": "Warning"}))
        .expect("event");
    let d = k.ok(&["describe", "pod", "web"]).await;
    assert!(
        d.contains("Node:") && d.contains("node-a/192.0.2.10"),
        "{d}"
    );
    assert!(d.contains("Status:       Running"), "{d}");
    assert!(
        d.contains("Successfully assigned default/web to node-a") && !d.contains("not this pod"),
        "{d}"
    );

    // label / annotate are strategic merge patches on pods.
    k.ok(&["label", "pod", "web", "tier=gpu"]).await;
    k.ok(&["annotate", "pod", "web", "owner=me"]).await;
    let labels = k
        .ok(&["get", "pods", "-l", "tier in (gpu),app", "--show-labels"])
        .await;
    assert!(labels.contains("app=web,tier=gpu"), "{labels}");
    let by_field = k
        .ok(&[
            "get",
            "pods",
            "--field-selector",
            "spec.nodeName=node-a,status.phase=Running",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(by_field.trim(), "pod/web");

    // Graceful delete: kubectl waits until the kubelet has removed the pod.
    let out = k.ok(&["delete", "pod", "web", "--wait=false"]).await;
    assert!(out.contains("\"web\" deleted"), "{out}");
    let terminating = k.ok(&["get", "pod", "web"]).await;
    assert!(terminating.contains("Terminating"), "{terminating}");
    server.tick();
    let gone = k.run(&["get", "pod", "web"]).await;
    assert!(
        !gone.ok && gone.stderr.contains("pods \"web\" not found"),
        "{gone:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_drives_control_endpoints_and_sees_faults() {
    let Some(bin) = kubectl_or_skip("kubectl_drives_control_endpoints_and_sees_faults") else {
        return;
    };
    let server = manual_server().await;
    let k = Kubectl::new(bin, &server, "faults");
    let faults = k.ok(&["get", "--raw", "/testapi/faults"]).await;
    let v: serde_json::Value = serde_json::from_str(&faults).expect("faults json");
    assert_eq!(v["rate500"], 0.0);
    let body = k.dir.join("faults.json");
    std::fs::write(&body, r#"{"rate500": 1.0}"#).expect("write");
    k.ok(&[
        "create",
        "--raw",
        "/testapi/faults",
        "-f",
        &body.display().to_string(),
    ])
    .await;
    let failed = k.run(&["get", "namespaces"]).await;
    assert!(
        !failed.ok && failed.stderr.contains("InternalError"),
        "{failed:?}"
    );
    assert_eq!(server.faults().rate_500, 1.0);
    std::fs::write(&body, r#"{"rate500": 0.0}"#).expect("write");
    k.ok(&[
        "create",
        "--raw",
        "/testapi/faults",
        "-f",
        &body.display().to_string(),
    ])
    .await;
    let ns = k.ok(&["get", "namespaces", "-o", "name"]).await;
    assert_eq!(ns.lines().count(), 4, "{ns}");
    // kubectl's typed generators send protobuf bodies, which the server refuses (415).
    let proto = k.run(&["create", "namespace", "typed"]).await;
    assert!(
        !proto.ok && proto.stderr.contains("accepts only JSON bodies"),
        "{proto:?}"
    );

    // The kubelet through the control endpoint: bind, advance, Running.
    k.ok(&["apply", "-f", &f("node.yaml")]).await;
    k.ok(&["apply", "-f", &f("pod.yaml")]).await;
    let binding = k.dir.join("binding.json");
    std::fs::write(&binding, r#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"web"},"target":{"kind":"Node","name":"node-a"}}"#).expect("write");
    k.ok(&[
        "create",
        "--raw",
        "/api/v1/namespaces/default/pods/web/binding",
        "-f",
        &binding.display().to_string(),
    ])
    .await;
    let again = k
        .run(&[
            "create",
            "--raw",
            "/api/v1/namespaces/default/pods/web/binding",
            "-f",
            &binding.display().to_string(),
        ])
        .await;
    assert!(
        !again.ok && again.stderr.contains("already assigned"),
        "{again:?}"
    );
    assert_eq!(
        k.ok(&["get", "pod", "web", "-o", "jsonpath={.status.phase}"])
            .await,
        "Pending"
    );
    std::fs::write(&body, "{}").expect("write");
    k.ok(&[
        "create",
        "--raw",
        "/testapi/advance?seconds=1",
        "-f",
        &body.display().to_string(),
    ])
    .await;
    assert_eq!(
        k.ok(&["get", "pod", "web", "-o", "jsonpath={.status.phase}"])
            .await,
        "Running"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_writes_a_kubeconfig_kubectl_can_use() {
    let Some(bin) = kubectl_or_skip("binary_writes_a_kubeconfig_kubectl_can_use") else {
        return;
    };
    let dir = common::scratch("binary");
    let kubeconfig = dir.join("kubeconfig");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("free port")
        .local_addr()
        .expect("addr")
        .port();
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_trainyard-testapi"))
        .args([
            "--port",
            &port.to_string(),
            "--kubeconfig",
            &kubeconfig.display().to_string(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("server binary");
    let mut lines = BufReader::new(server.stdout.take().expect("stdout")).lines();
    let url = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("url in time")
        .expect("read")
        .unwrap_or_default();
    assert_eq!(url, format!("http://127.0.0.1:{port}"));
    let text = std::fs::read_to_string(&kubeconfig).expect("kubeconfig written");
    assert!(
        text.contains(&format!("server: http://127.0.0.1:{port}")),
        "{text}"
    );
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(bin)
            .args([
                "--kubeconfig",
                &kubeconfig.display().to_string(),
                "--cache-dir",
                &dir.join("cache").display().to_string(),
                "get",
                "namespaces",
            ])
            .output(),
    )
    .await
    .expect("kubectl in time")
    .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("kube-system") && stdout.contains("Active"),
        "{stdout}"
    );
    server.kill().await.expect("stop server");
}

fn header(table: &str) -> Vec<&str> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

fn row<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_default()
        .split_whitespace()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_a_job_and_storage_kinds_and_shows_their_tables() {
    let Some(bin) =
        kubectl_or_skip("kubectl_creates_a_job_and_storage_kinds_and_shows_their_tables")
    else {
        return;
    };
    let server = manual_server().await;
    let k = Kubectl::new(bin, &server, "served-kinds");
    let out = k.ok(&["create", "-f", &f("workloads.yaml")]).await;
    for made in [
        "job.batch/pi created",
        "replicaset.apps/web created",
        "statefulset.apps/db created",
        "replicationcontroller/legacy created",
        "storageclass.storage.k8s.io/fast created",
        "persistentvolume/pv-a created",
        "persistentvolumeclaim/scratch created",
    ] {
        assert!(out.contains(made), "{made}: {out}");
    }

    let jobs = k.ok(&["get", "jobs"]).await;
    assert_eq!(
        header(&jobs),
        ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
        "{jobs}"
    );
    assert_eq!(row(&jobs, "pi")[..3], ["pi", "Running", "0/2"], "{jobs}");
    let wide = k.ok(&["get", "job", "pi", "-o", "wide"]).await;
    assert!(
        wide.contains("perl:5.34") && wide.contains("batch.kubernetes.io/controller-uid="),
        "{wide}"
    );
    // No Job controller: no pods, however long the clock runs.
    server.advance(600);
    let pods = k.run(&["get", "pods"]).await;
    assert!(
        pods.ok && pods.stdout.is_empty() && pods.stderr.contains("No resources found"),
        "{pods:?}"
    );
    let waited = k
        .run(&["wait", "--for=condition=complete", "job/pi", "--timeout=1s"])
        .await;
    assert!(
        !waited.ok && waited.stderr.contains("timed out"),
        "{waited:?}"
    );

    let rs = k.ok(&["get", "rs"]).await;
    assert_eq!(
        header(&rs),
        ["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        "{rs}"
    );
    assert_eq!(row(&rs, "web")[..4], ["web", "3", "0", "0"], "{rs}");
    let sts = k.ok(&["get", "sts"]).await;
    assert_eq!(header(&sts), ["NAME", "READY", "AGE"], "{sts}");
    assert_eq!(row(&sts, "db")[..2], ["db", "0/2"], "{sts}");
    let rc = k.ok(&["get", "rc"]).await;
    assert_eq!(row(&rc, "legacy")[..4], ["legacy", "1", "0", "0"], "{rc}");
    let all = k.ok(&["get", "all"]).await;
    for name in [
        "job.batch/pi",
        "replicaset.apps/web",
        "statefulset.apps/db",
        "replicationcontroller/legacy",
    ] {
        assert!(all.contains(name), "{name}: {all}");
    }

    let pv = k.ok(&["get", "pv"]).await;
    assert_eq!(
        header(&pv),
        [
            "NAME",
            "CAPACITY",
            "ACCESS",
            "MODES",
            "RECLAIM",
            "POLICY",
            "STATUS",
            "CLAIM",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "REASON",
            "AGE"
        ],
        "{pv}"
    );
    assert_eq!(
        row(&pv, "pv-a")[..7],
        [
            "pv-a", "10Gi", "RWO,ROX", "Retain", "Pending", "fast", "<unset>"
        ],
        "{pv}"
    );
    let pvc = k.ok(&["get", "pvc"]).await;
    assert_eq!(
        header(&pvc),
        [
            "NAME",
            "STATUS",
            "VOLUME",
            "CAPACITY",
            "ACCESS",
            "MODES",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "AGE"
        ],
        "{pvc}"
    );
    assert_eq!(
        row(&pvc, "scratch")[..4],
        ["scratch", "Pending", "fast", "<unset>"],
        "{pvc}"
    );
    let sc = k.ok(&["get", "sc"]).await;
    assert_eq!(
        row(&sc, "fast")[..6],
        [
            "fast",
            "(default)",
            "csi.example.com",
            "Delete",
            "WaitForFirstConsumer",
            "true"
        ],
        "{sc}"
    );

    // Discovery names every kind, with kube-apiserver's short names.
    let resources = k.ok(&["api-resources", "--no-headers"]).await;
    for want in [
        ["jobs", "batch/v1", "true", "Job"].as_slice(),
        &["replicasets", "rs", "apps/v1", "true", "ReplicaSet"],
        &["statefulsets", "sts", "apps/v1", "true", "StatefulSet"],
        &[
            "replicationcontrollers",
            "rc",
            "v1",
            "true",
            "ReplicationController",
        ],
        &["persistentvolumes", "pv", "v1", "false", "PersistentVolume"],
        &[
            "persistentvolumeclaims",
            "pvc",
            "v1",
            "true",
            "PersistentVolumeClaim",
        ],
        &[
            "storageclasses",
            "sc",
            "storage.k8s.io/v1",
            "false",
            "StorageClass",
        ],
        &["csinodes", "storage.k8s.io/v1", "false", "CSINode"],
        &["csidrivers", "storage.k8s.io/v1", "false", "CSIDriver"],
        &[
            "csistoragecapacities",
            "storage.k8s.io/v1",
            "true",
            "CSIStorageCapacity",
        ],
        &[
            "volumeattachments",
            "storage.k8s.io/v1",
            "false",
            "VolumeAttachment",
        ],
        &["events", "ev", "events.k8s.io/v1", "true", "Event"],
    ] {
        assert!(
            resources
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == want),
            "{want:?}: {resources}"
        );
    }

    let out = k.ok(&["delete", "job", "pi"]).await;
    assert!(out.contains("job.batch \"pi\" deleted"), "{out}");
}
