//! The API exposed with security on: the service against the test API
//! server with RBAC, the API on a TLS loopback listener that requires
//! bearer tokens, checked by the test API server's TokenReview and
//! SubjectAccessReview (through the scheduler's ServiceAccount, bound to
//! `system:auth-delegator` as the chart binds it). Called with our tonic
//! client and with Python `grpcio` (skipped with the reason when it cannot
//! be imported, a failure under `TRAINYARD_REQUIRE_TOOLS`).
//!
//! The cluster, the users and the secured service are `support::secure`'s
//! (shared with the verbs' TLS test): `alice` may get and list pods in
//! namespace `a` only; `auditor` may list pods cluster-wide.

mod support;

use std::time::Duration;

use support::secure::{SecureRunning, secure_cluster, start_secure_service};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Request};
use trainyard_api::pb;
use trainyard_api::pb::scheduler_client::SchedulerClient;

/// `m` with `authorization: Bearer token` metadata.
fn as_user<T>(m: T, token: &str) -> Request<T> {
    let mut r = Request::new(m);
    let v = format!("Bearer {token}").parse().expect("metadata value");
    r.metadata_mut().insert("authorization", v);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exposed_api_authenticates_and_authorizes_every_call() {
    let cluster = secure_cluster().await;
    let SecureRunning {
        running,
        certificates,
        certificates_dir: _certificates_dir,
    } = start_secure_service(&cluster).await;
    let port = running.port;

    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(
            std::fs::read(&certificates.ca).expect("CA"),
        ))
        .domain_name("localhost");
    let channel: Channel = Endpoint::from_shared(format!("https://127.0.0.1:{port}"))
        .expect("endpoint")
        .tls_config(tls)
        .expect("TLS config")
        .connect()
        .await
        .expect("connects over TLS");
    tonic_calls(
        SchedulerClient::new(channel),
        &cluster.alice,
        &cluster.auditor,
    )
    .await;
    python_client(port, &certificates.ca, &cluster.alice, &cluster.auditor).await;

    tokio::time::timeout(Duration::from_secs(20), running.stop())
        .await
        .expect("stops");
}

/// The test certificates of `support/tls/` are fixed files (the verbs'
/// test, in `crates/cli`, has no rcgen to make them): made here with
/// rcgen, valid until 4096 (its default). With
/// `TRAINYARD_WRITE_TEST_CERTS=1` this writes new ones; otherwise it
/// checks that the key is one and the others are PEM certificates.
#[test]
fn test_certificates() {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    use support::secure::{CA_PEM, OTHER_CA_PEM, TLS_CRT, TLS_KEY};
    let ca_named = |name: &str| {
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, name);
        CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("CA key")).expect("CA")
    };
    if std::env::var_os("TRAINYARD_WRITE_TEST_CERTS").is_some() {
        let ca = ca_named("trainyard test CA");
        let other = ca_named("trainyard other test CA");
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("params")
            .signed_by(&key, &ca)
            .expect("certificate");
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/tls");
        for (name, text) in [
            ("ca.pem", ca.pem()),
            ("other-ca.pem", other.pem()),
            ("tls.crt", cert.pem()),
            ("tls.key", key.serialize_pem()),
        ] {
            std::fs::write(dir.join(name), text).expect("written");
        }
        return;
    }
    KeyPair::from_pem(TLS_KEY).expect("tls.key is a PEM key");
    for (name, pem) in [
        ("ca.pem", CA_PEM),
        ("other-ca.pem", OTHER_CA_PEM),
        ("tls.crt", TLS_CRT),
    ] {
        assert!(
            pem.starts_with("-----BEGIN CERTIFICATE-----")
                && pem.trim_end().ends_with("-----END CERTIFICATE-----"),
            "{name} is not a PEM certificate"
        );
    }
    assert_ne!(CA_PEM, OTHER_CA_PEM);
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
