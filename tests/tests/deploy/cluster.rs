//! The plain manifests applied to the test API server, and the scheduler
//! started from them.

use super::*;

/// Applies the plain manifests (the chart with its default values) with
/// kubectl to the test API server and starts the scheduler from them: its
/// settings from the applied ConfigMap, its client as the applied
/// ServiceAccount (the test server honours RBAC when it enforces it), and
/// checks that it binds a pod.
///
/// Skips with the reason while the test server does not serve a kind the
/// manifests hold (it learns Deployments, ServiceAccounts, Services and the
/// RBAC kinds in issue 16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_manifests_apply_to_the_test_api_server_and_the_scheduler_starts_from_them() {
    use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
    use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
    use kube::core::{ApiResource, GroupVersionKind};
    use serde_json::json;

    let test = "rendered_manifests_apply_to_the_test_api_server_and_the_scheduler_starts_from_them";
    let Some(kubectl) = find_kubectl() else {
        skip(&format!(
            "kubectl not found ({test}; install it with scripts/install-test-tools.sh)"
        ));
        return;
    };
    // RBAC on: the scheduler gets only what the rendered ClusterRole and
    // Role grant its ServiceAccount.
    let server = trainyard_testapi::TestApiServer::start(trainyard_testapi::Config {
        rbac: true,
        ..Default::default()
    })
    .await
    .expect("the test API server starts");
    let admin = client_with_token(&server, trainyard_testapi::ADMIN_TOKEN).await;

    // Every kind of the manifests must be served (the CRDs' own kinds come
    // with them).
    let manifests = manifest_objects();
    let discovery = kube::discovery::Discovery::new(admin.clone())
        .run()
        .await
        .expect("discovery");
    let unserved: BTreeSet<String> = manifests
        .iter()
        .filter_map(|o| {
            let api_version = o["apiVersion"].as_str().unwrap_or("");
            let (g, v) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let gvk = GroupVersionKind::gvk(g, v, kind(o));
            discovery
                .resolve_gvk(&gvk)
                .is_none()
                .then(|| format!("{api_version} {}", kind(o)))
        })
        .collect();
    if !unserved.is_empty() {
        // Not a missing tool: the server's own coverage, said every run.
        let reason = format!(
            "the test API server does not serve {} ({test})",
            unserved.into_iter().collect::<Vec<_>>().join(", ")
        );
        println!("SKIPPED: {reason}");
        eprintln!("SKIPPED: {reason}");
        return;
    }

    let dir = Scratch::new("apply");
    let kubeconfig = dir.0.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let file = root().join("deploy/manifests/trainyard.yaml");
    let out = tokio::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.0.join("cache"))
        .args(["apply", "--server-side", "-f"])
        .arg(&file)
        .output()
        .await
        .expect("kubectl runs");
    let applied = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl apply -f {}:\n{applied}{}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    for o in &manifests {
        assert!(
            applied.contains(&format!("/{} serverside-applied", name(o))),
            "kubectl did not apply {} {}:\n{applied}",
            kind(o),
            name(o)
        );
    }

    // The scheduler's settings, as the pod would read them from its volume.
    let namespace = name(one_of(&manifests, "Namespace")).to_string();
    let cm_name = name(one_of(&manifests, "ConfigMap")).to_string();
    let cm = Api::<ConfigMap>::namespaced(admin.clone(), &namespace)
        .get(&cm_name)
        .await
        .expect("the applied ConfigMap");
    let config_text = cm
        .data
        .as_ref()
        .and_then(|d| d.get("config.yaml"))
        .expect("config.yaml in the ConfigMap");
    let settings = trainyard_serve::Settings::parse(config_text, "config.yaml")
        .expect("the applied config is accepted")
        .with_environment("trainyard-0", &namespace, "host", "1");
    assert_eq!(
        settings.service.http_address, "0.0.0.0:8080",
        "deploy/manifests must ask for every interface: the probes and Prometheus come from outside the pod"
    );

    // A node, a queue and a pod for it.
    let nodes: Api<Node> = Api::all(admin.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "gpu-1"}})).expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    nodes
        .patch_status(
            "gpu-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }})),
        )
        .await
        .expect("node status");
    let queues: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("trainyard.io", "v1alpha1", "Queue"),
            "queues",
        ),
    );
    let queue: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
        "metadata": {"name": settings.service.default_queue},
        "spec": {"quota": {"nvidia.com/gpu": 8}}
    }))
    .expect("queue");
    queues
        .create(&PostParams::default(), &queue)
        .await
        .expect("queue");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "train-0"},
        "spec": {"schedulerName": settings.service.scheduler_name,
                 "containers": [{"name": "c", "image": "train:1",
                                 "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");

    // The scheduler, as the applied ServiceAccount, with its token.
    let sa = one_of(&manifests, "ServiceAccount");
    let token = server
        .service_account_token(sa["metadata"]["namespace"].as_str().unwrap_or(""), name(sa))
        .expect("a token for the ServiceAccount");
    let client = client_with_token(&server, &token).await;
    let as_scheduler: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (progress_tx, _progress_rx) = tokio::sync::watch::channel(Default::default());
    let service = tokio::spawn(trainyard_serve::run(client, settings, stop_rx, progress_tx));
    let cond = |p: Option<&Pod>| {
        p.and_then(|p| p.spec.as_ref())
            .is_some_and(|s| s.node_name.is_some())
    };
    let bound = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        kube::runtime::wait::await_condition(pods.clone(), "train-0", cond),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .flatten()
    .and_then(|p| p.spec.and_then(|s| s.node_name));
    // RBAC is in force: what the ClusterRole does not grant is refused.
    let refused = as_scheduler
        .delete("train-0", &Default::default())
        .await
        .expect_err("the scheduler may not delete pods");
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused:?}"
    );
    let _ = stop_tx.send(true);
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(10), service).await;
    assert_eq!(
        bound.as_deref(),
        Some("gpu-1"),
        "the scheduler started from the applied manifests did not bind the pod"
    );

    match stopped {
        Ok(Ok(Ok(()))) => {}
        other => panic!("the scheduler did not stop cleanly: {other:?}"),
    }
}

/// A kube-rs client of the test server with a bearer token (over plain
/// HTTP; kube-rs sends tokens there, kubectl does not).
async fn client_with_token(server: &trainyard_testapi::TestApiServer, token: &str) -> kube::Client {
    let text = trainyard_testapi::kubeconfig_with_token(&server.url(), token);
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).expect("a kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a client config");
    config.default_retry = false;
    kube::Client::try_from(config).expect("a client")
}

/// kubectl on PATH or where `scripts/install-test-tools.sh` puts it.
fn find_kubectl() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".local/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}
