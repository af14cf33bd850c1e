//! The API exposed with security on, shared by the API's security test
//! (`crates/api/tests/security.rs`) and the verbs' over TLS
//! (`crates/cli/tests/remote_verbs.rs`): the test API server with RBAC,
//! the scheduler's ServiceAccount bound to `system:auth-delegator` (as
//! the chart binds it), users with tokens and Roles, and the service with
//! its API on a TLS loopback listener that requires bearer tokens,
//! checked by the test API server's TokenReview and SubjectAccessReview
//! through that ServiceAccount.
//!
//! Users: `alice` may get and list pods in namespace `a` only; `auditor`
//! may list pods cluster-wide. Jobs: `a/train` (2 GPUs) and `b/secret`
//! (2 GPUs) bound, `b/wait` (6 GPUs) waiting, on one node of 8 GPUs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use trainyard_api::auth::kubernetes::{CacheTtl, KubeAuthorizer};
use trainyard_api::server::Security;
use trainyard_api::tls::TlsFiles;
use trainyard_serve::view::CycleView;
use trainyard_testapi::{ADMIN_TOKEN, Config, TestApiServer, UserInfo};

use super::{Running, cycle_until, node, pod_in, start_service_with};

/// The test CA (PEM), which signed [`TLS_CRT`].
pub const CA_PEM: &str = include_str!("tls/ca.pem");
/// The API's certificate, for `localhost` and 127.0.0.1, signed by [`CA_PEM`].
pub const TLS_CRT: &str = include_str!("tls/tls.crt");
/// Its key.
pub const TLS_KEY: &str = include_str!("tls/tls.key");
/// Another CA, which signed nothing here (a client trusting only it
/// refuses the API's certificate).
pub const OTHER_CA_PEM: &str = include_str!("tls/other-ca.pem");

/// The certificates written to a directory.
pub struct Certificates {
    /// [`CA_PEM`].
    pub ca: PathBuf,
    /// [`OTHER_CA_PEM`].
    pub other_ca: PathBuf,
    /// The listener's certificate and key.
    pub files: TlsFiles,
}

/// Writes the test certificates (`support/tls/`, made with rcgen and
/// valid until 4096: see `security.rs`' `test_certificates`) to `dir`.
pub fn certificates(dir: &Path) -> Certificates {
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).expect("written");
        p
    };
    Certificates {
        ca: write("ca.pem", CA_PEM),
        other_ca: write("other-ca.pem", OTHER_CA_PEM),
        files: TlsFiles {
            cert: write("tls.crt", TLS_CRT),
            key: write("tls.key", TLS_KEY),
        },
    }
}

/// A kube client of `server` with `token`, no retries.
pub fn client(server: &TestApiServer, token: &str) -> kube::Client {
    let mut kc = kube::Config::new(server.url().parse().expect("url"));
    kc.default_retry = false;
    kc.auth_info.token = Some(token.to_string().into());
    kube::Client::try_from(kc).expect("client")
}

/// The secured cluster and who may use it.
pub struct SecureCluster {
    pub server: TestApiServer,
    /// The admin's client (the service runs with it).
    pub admin: kube::Client,
    /// Tokens: alice (namespace `a`), the auditor (lists everywhere), the
    /// scheduler's ServiceAccount (TokenReview, SubjectAccessReview).
    pub alice: String,
    pub auditor: String,
    pub scheduler: String,
}

/// The test API server with RBAC: namespaces `a`, `b` and
/// `trainyard-system`, the scheduler's ServiceAccount bound to
/// `system:auth-delegator`, alice's Role in `a`, the auditor's
/// ClusterRole, a node and the pods of the module docs.
pub async fn secure_cluster() -> SecureCluster {
    let server = TestApiServer::start(Config {
        manual_clock: true,
        rbac: true,
        ..Config::default()
    })
    .await
    .expect("server starts");
    let admin = client(&server, ADMIN_TOKEN);
    let create = |v: Value| {
        server.create(v).expect("created");
    };
    for ns in ["a", "b", "trainyard-system"] {
        create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
    }
    let rbac = "rbac.authorization.k8s.io/v1";
    let role_ref = |kind: &str, name: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name});
    let user = |name: &str| json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}]);
    create(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "trainyard-scheduler", "namespace": "trainyard-system"}}));
    create(json!({"apiVersion": rbac, "kind": "ClusterRoleBinding",
        "metadata": {"name": "trainyard-api-auth-delegator"},
        "roleRef": role_ref("ClusterRole", "system:auth-delegator"),
        "subjects": [{"kind": "ServiceAccount", "name": "trainyard-scheduler", "namespace": "trainyard-system"}]}));
    create(json!({"apiVersion": rbac, "kind": "Role",
        "metadata": {"name": "pod-reader", "namespace": "a"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}));
    create(json!({"apiVersion": rbac, "kind": "RoleBinding",
        "metadata": {"name": "alice-reads-pods", "namespace": "a"},
        "roleRef": role_ref("Role", "pod-reader"),
        "subjects": user("alice")}));
    create(json!({"apiVersion": rbac, "kind": "ClusterRole",
        "metadata": {"name": "pod-lister"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}));
    create(json!({"apiVersion": rbac, "kind": "ClusterRoleBinding",
        "metadata": {"name": "auditor-lists-pods"},
        "roleRef": role_ref("ClusterRole", "pod-lister"),
        "subjects": user("auditor")}));
    node(&admin, "n1", 8).await;
    pod_in(&admin, "a", "train", 2).await;
    pod_in(&admin, "b", "secret", 2).await;
    pod_in(&admin, "b", "wait", 6).await;
    let alice = server.user_token(UserInfo::new("alice", &["team-a"]));
    let auditor = server.user_token(UserInfo::new("auditor", &[]));
    let scheduler = server
        .service_account_token("trainyard-system", "trainyard-scheduler")
        .expect("a ServiceAccount token");
    SecureCluster {
        server,
        admin,
        alice,
        auditor,
        scheduler,
    }
}

/// The secured service and where its pieces are.
pub struct SecureRunning {
    pub running: Running,
    pub certificates: Certificates,
    /// Where the certificates are (as long as the service runs).
    pub certificates_dir: tempfile::TempDir,
}

/// The service over `cluster` (as the admin), its API only on a TLS
/// loopback port (the test certificates) that requires tokens, checked
/// through the scheduler's ServiceAccount; returns once a cycle has
/// `a/train` and `b/secret` bound and `b/wait` waiting.
pub async fn start_secure_service(cluster: &SecureCluster) -> SecureRunning {
    let certificates_dir = tempfile::tempdir().expect("a scratch dir");
    let certificates = certificates(certificates_dir.path());
    let authorizer = KubeAuthorizer::new(
        client(&cluster.server, &cluster.scheduler),
        CacheTtl::default(),
    );
    let security = Security {
        tls: Some(certificates.files.clone()),
        insecure: false,
        require_auth: true,
        authorizer: Some(Arc::new(authorizer)),
    };
    let running = start_service_with(&cluster.admin, false, security).await;
    settled(&running).await;
    SecureRunning {
        running,
        certificates,
        certificates_dir,
    }
}

/// A cycle with `a/train` and `b/secret` bound and `b/wait` waiting.
pub async fn settled(running: &Running) -> Arc<CycleView> {
    cycle_until(
        &running.view,
        "a/train and b/secret bound, b/wait waiting",
        |c| {
            let bound = |id: &str| {
                c.snapshot
                    .jobs
                    .iter()
                    .any(|j| j.id == id && j.tasks.iter().all(|t| !t.is_pending()))
            };
            bound("a/train") && bound("b/secret") && c.decisions.pending.len() == 1
        },
    )
    .await
}
