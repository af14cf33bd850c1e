//! The API exposed with security on: the service against the test API
//! server with RBAC, the API on a TLS loopback listener that requires
//! bearer tokens, checked by the test API server's TokenReview and
//! SubjectAccessReview (through the scheduler's ServiceAccount, bound to
//! `system:auth-delegator` as the chart binds it). Called with our tonic
//! client and with Python `grpcio` (skipped with the reason when it cannot
//! be imported, a failure under `TRAINYARD_REQUIRE_TOOLS`).
//!
//! Users: `alice` may get and list pods in namespace `a` only; `auditor`
//! may list pods cluster-wide.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::watch;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Request};
use trainyard_api::auth::kubernetes::{CacheTtl, KubeAuthorizer};
use trainyard_api::pb;
use trainyard_api::pb::scheduler_client::SchedulerClient;
use trainyard_api::server::{Listen, Security};
use trainyard_api::tls::TlsFiles;
use trainyard_serve::view::LiveView;
use trainyard_testapi::{ADMIN_TOKEN, Config, TestApiServer, UserInfo};

fn client(server: &TestApiServer, token: &str) -> kube::Client {
    let mut kc = kube::Config::new(server.url().parse().expect("url"));
    kc.default_retry = false;
    kc.auth_info.token = Some(token.to_string().into());
    kube::Client::try_from(kc).expect("client")
}

/// Creates `v` through the in-process handle (as admin).
fn create(server: &TestApiServer, v: Value) {
    server.create(v).expect("created");
}

async fn node(client: &kube::Client, name: &str, gpus: u32) {
    let api: Api<Node> = Api::all(client.clone());
    let n: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("node");
    api.create(&PostParams::default(), &n)
        .await
        .expect("node created");
    let g = gpus.to_string();
    let r = json!({"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": g});
    let status = json!({"status": {"allocatable": r, "capacity": r,
        "conditions": [{"type": "Ready", "status": "True"}]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("node status");
}

async fn pod(client: &kube::Client, ns: &str, name: &str, gpus: u32) {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let g = gpus.to_string();
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                 "resources": {"requests": {"nvidia.com/gpu": g}, "limits": {"nvidia.com/gpu": g}}}]}
    }))
    .expect("pod");
    api.create(&PostParams::default(), &p)
        .await
        .expect("pod created");
}

/// A CA and a certificate for `localhost` and 127.0.0.1 it signed,
/// written to `dir`: (ca.pem, the listener's files).
fn certificates(dir: &std::path::Path) -> (PathBuf, TlsFiles) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "trainyard test CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("CA key")).expect("CA");
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .expect("params")
        .signed_by(&key, &ca)
        .expect("certificate");
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("written");
        p
    };
    let files = TlsFiles {
        cert: write("tls.crt", cert.pem()),
        key: write("tls.key", key.serialize_pem()),
    };
    (write("ca.crt", ca.pem()), files)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `m` with `authorization: Bearer token` metadata.
fn as_user<T>(m: T, token: &str) -> Request<T> {
    let mut r = Request::new(m);
    let v = format!("Bearer {token}").parse().expect("metadata value");
    r.metadata_mut().insert("authorization", v);
    r
}

/// Sets up the cluster: namespaces, the scheduler's ServiceAccount
/// bound to `system:auth-delegator`, alice's Role in `a`, the auditor's
/// ClusterRole, a node and pods in `a` and `b`.
async fn cluster(server: &TestApiServer, admin: &kube::Client) {
    for ns in ["a", "b", "trainyard-system"] {
        create(
            server,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
    }
    let rbac = "rbac.authorization.k8s.io/v1";
    let role_ref = |kind: &str, name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name});
    create(
        server,
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "trainyard-scheduler", "namespace": "trainyard-system"}}),
    );
    create(
        server,
        json!({"apiVersion": rbac, "kind": "ClusterRoleBinding",
        "metadata": {"name": "trainyard-api-auth-delegator"},
        "roleRef": role_ref("ClusterRole", "system:auth-delegator"),
        "subjects": [{"kind": "ServiceAccount", "name": "trainyard-scheduler", "namespace": "trainyard-system"}]}),
    );
    create(
        server,
        json!({"apiVersion": rbac, "kind": "Role",
        "metadata": {"name": "pod-reader", "namespace": "a"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}),
    );
    create(
        server,
        json!({"apiVersion": rbac, "kind": "RoleBinding",
        "metadata": {"name": "alice-reads-pods", "namespace": "a"},
        "roleRef": role_ref("Role", "pod-reader"),
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}),
    );
    create(
        server,
        json!({"apiVersion": rbac, "kind": "ClusterRole",
        "metadata": {"name": "pod-lister"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}),
    );
    create(
        server,
        json!({"apiVersion": rbac, "kind": "ClusterRoleBinding",
        "metadata": {"name": "auditor-lists-pods"},
        "roleRef": role_ref("ClusterRole", "pod-lister"),
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "auditor"}]}),
    );
    node(admin, "n1", 8).await;
    pod(admin, "a", "train", 2).await;
    pod(admin, "b", "secret", 2).await;
    pod(admin, "b", "wait", 6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exposed_api_authenticates_and_authorizes_every_call() {
    let server = TestApiServer::start(Config {
        manual_clock: true,
        rbac: true,
        ..Config::default()
    })
    .await
    .expect("server starts");
    let admin = client(&server, ADMIN_TOKEN);
    cluster(&server, &admin).await;
    let alice = server.user_token(UserInfo::new("alice", &["team-a"]));
    let auditor = server.user_token(UserInfo::new("auditor", &[]));
    let scheduler_sa = server
        .service_account_token("trainyard-system", "trainyard-scheduler")
        .expect("a ServiceAccount token");

    let mut settings = trainyard_serve::Settings::default();
    settings.service.cycle_period_millis = 50;
    settings.service.debounce_millis = 10;
    settings.service.http_address = String::new();
    settings.service.leader_election.enabled = false;
    let view = Arc::new(LiveView::new("trainyard", "default"));
    let dir = tempfile::tempdir().expect("a scratch dir");
    let (ca, files) = certificates(dir.path());
    let port = free_port();
    let (stop, shutdown) = watch::channel(false);
    let (progress, _p) = watch::channel(trainyard_serve::Progress::default());
    let authorizer = KubeAuthorizer::new(client(&server, &scheduler_sa), CacheTtl::default());
    let listen = Listen {
        socket: None,
        tcp: Some(format!("127.0.0.1:{port}").parse().expect("address")),
        security: Security {
            tls: Some(files),
            insecure: false,
            require_auth: true,
            authorizer: Some(Arc::new(authorizer)),
        },
    };
    let api = trainyard_api::server::serve(view.clone(), &listen, shutdown.clone())
        .await
        .expect("the API starts");
    let service = tokio::spawn(trainyard_serve::run_with(
        admin.clone(),
        settings,
        trainyard_serve::Options {
            shutdown,
            progress,
            reload: None,
            metrics: Arc::new(trainyard_serve::metrics::Metrics::new()),
            drain: Duration::from_secs(2),
            own: Default::default(),
            view: Some(view.clone()),
        },
    ));
    // A cycle with a/train and b/secret bound and b/wait waiting.
    let mut latest = view.latest();
    let settled = latest.wait_for(|c| {
        c.as_ref().is_some_and(|c| {
            let bound = |id: &str| {
                c.snapshot
                    .jobs
                    .iter()
                    .any(|j| j.id == id && j.tasks.iter().all(|t| !t.is_pending()))
            };
            bound("a/train") && bound("b/secret") && c.decisions.pending.len() == 1
        })
    });
    tokio::time::timeout(Duration::from_secs(30), settled)
        .await
        .expect("a settled cycle within 30 s")
        .expect("the view goes on");

    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(std::fs::read(&ca).expect("CA")))
        .domain_name("localhost");
    let channel: Channel = Endpoint::from_shared(format!("https://127.0.0.1:{port}"))
        .expect("endpoint")
        .tls_config(tls)
        .expect("TLS config")
        .connect()
        .await
        .expect("connects over TLS");
    tonic_calls(SchedulerClient::new(channel), &alice, &auditor).await;
    python_client(port, &ca, &alice, &auditor).await;

    stop.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), service).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), api).await;
}

/// Every security case with our tonic client.
async fn tonic_calls(mut rpc: SchedulerClient<Channel>, alice: &str, auditor: &str) {
    // No token, a wrong token: UNAUTHENTICATED.
    let e = rpc
        .list_queues(pb::ListQueuesRequest {})
        .await
        .expect_err("no token");
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    assert!(e.message().contains("bearer token"), "{}", e.message());
    let e = rpc
        .list_queues(as_user(pb::ListQueuesRequest {}, "not-a-token"))
        .await
        .expect_err("a wrong token");
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");

    // Any authenticated user sees every queue's totals (b's jobs counted).
    let queues = rpc
        .list_queues(as_user(pb::ListQueuesRequest {}, alice))
        .await
        .expect("queues for alice")
        .into_inner();
    let q = queues
        .queues
        .iter()
        .find(|q| q.path == "default")
        .expect("the default queue");
    let gpu = q
        .resources
        .iter()
        .find(|r| r.resource == "nvidia.com/gpu")
        .expect("a GPU row");
    assert_eq!(gpu.allocated, 4000, "a's and b's GPUs: {q:?}");

    // Alice explains in a, not in b (whether or not the job exists).
    let explain = |ns: &str, name: &str| pb::ExplainJobRequest {
        namespace: ns.into(),
        name: name.into(),
    };
    rpc.explain_job(as_user(explain("a", "train"), alice))
        .await
        .expect("alice explains her job");
    for name in ["wait", "no-such-job"] {
        let e = rpc
            .explain_job(as_user(explain("b", name), alice))
            .await
            .expect_err("not alice's namespace");
        assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
        assert!(
            e.message().contains("`get pods` in namespace \"b\""),
            "{}",
            e.message()
        );
    }
    let resize = pb::WhatIfRequest {
        job: Some(pb::what_if_request::Job::Resize(pb::Resize {
            namespace: "b".into(),
            name: "wait".into(),
            gpus_per_pod: 2,
            ..Default::default()
        })),
    };
    let e = rpc
        .what_if(as_user(resize, alice))
        .await
        .expect_err("a what-if in b");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");

    // ListJobs: alice sees a's jobs only; asking for b is refused.
    let names = |r: pb::ListJobsResponse| -> Vec<String> {
        r.jobs
            .iter()
            .map(|j| format!("{}/{}", j.namespace, j.name))
            .collect()
    };
    let jobs = rpc
        .list_jobs(as_user(pb::ListJobsRequest::default(), alice))
        .await
        .expect("alice's jobs")
        .into_inner();
    assert_eq!(names(jobs), ["a/train"]);
    let in_b = pb::ListJobsRequest {
        namespace: "b".into(),
        ..Default::default()
    };
    let e = rpc
        .list_jobs(as_user(in_b, alice))
        .await
        .expect_err("b's jobs");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(
        e.message().contains("`list pods` in namespace \"b\""),
        "{}",
        e.message()
    );
    let jobs = rpc
        .list_jobs(as_user(pb::ListJobsRequest::default(), auditor))
        .await
        .expect("the auditor's jobs")
        .into_inner();
    assert_eq!(names(jobs), ["a/train", "b/secret", "b/wait"]);

    // WatchDecisions: b's pending reason reaches the auditor, not alice.
    for (token, sees_b) in [(alice, false), (auditor, true)] {
        let mut stream = rpc
            .watch_decisions(as_user(pb::WatchDecisionsRequest { latest: true }, token))
            .await
            .expect("a stream")
            .into_inner();
        let first = stream
            .message()
            .await
            .expect("no stream error")
            .expect("a first message");
        let b_reasons = first.reasons.iter().any(|r| r.job == "b/wait");
        assert_eq!(b_reasons, sees_b, "{first:?}");
        assert_eq!(first.pending, 1, "the count is the cycle's");
    }

    // GetSnapshot: cluster-wide `list pods` only.
    let e = rpc
        .get_snapshot(as_user(pb::GetSnapshotRequest {}, alice))
        .await
        .expect_err("alice's snapshot");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(
        e.message().contains("`list pods` in every namespace"),
        "{}",
        e.message()
    );
    let snap = rpc
        .get_snapshot(as_user(pb::GetSnapshotRequest {}, auditor))
        .await
        .expect("the auditor's snapshot")
        .into_inner();
    assert!(snap.objects_yaml.contains("secret"));
}

/// Python `grpcio` over TLS with tokens as call credentials.
async fn python_client(port: u16, ca: &std::path::Path, alice: &str, auditor: &str) {
    let probe = std::process::Command::new("python3")
        .args(["-c", "import grpc, grpc_reflection"])
        .output();
    let missing = match &probe {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => Some(format!("python3 cannot run: {e}")),
    };
    if let Some(reason) = missing {
        assert!(
            std::env::var_os("TRAINYARD_REQUIRE_TOOLS").is_none(),
            "TRAINYARD_REQUIRE_TOOLS is set but Python grpcio cannot be imported: {reason}"
        );
        eprintln!(
            "SKIPPED: the Python grpcio security part (scripts/install-test-tools.sh installs grpcio and grpcio-reflection): {reason}"
        );
        return;
    }
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpc_secure_client.py");
    let args = [
        format!("127.0.0.1:{port}"),
        ca.display().to_string(),
        alice.to_string(),
        auditor.to_string(),
    ];
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(script)
            .args(args)
            .output()
    })
    .await
    .expect("joined")
    .expect("python3 runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the Python client failed:\n{said}");
    for line in [
        "health without a token: SERVING",
        "no token: UNAUTHENTICATED",
        "wrong token: UNAUTHENTICATED",
        "alice explains b/wait: PERMISSION_DENIED",
        "alice's jobs: a/train",
        "alice's snapshot: PERMISSION_DENIED",
        "auditor's snapshot: ok",
    ] {
        assert!(said.contains(line), "missing {line:?} in:\n{said}");
    }
}
