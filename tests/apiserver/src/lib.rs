//! `trainyard-testapi`: an in-memory Kubernetes API server for tests.
//!
//! Real clients — `kubectl` and kube-rs — talk to it on 127.0.0.1, over plain HTTP
//! or TLS on the same port (see [`TLS_CERT_PEM`]). It serves discovery, the built-in
//! kinds the scheduler uses (Pods, Nodes, Namespaces, Events, ConfigMaps,
//! PriorityClasses, PodDisruptionBudgets, Leases, CustomResourceDefinitions), the
//! kinds an installation brings (ServiceAccounts, Services, Secrets, Deployments,
//! ClusterRoles, ClusterRoleBindings, Roles, RoleBindings; see [`kinds`]), the
//! workload and storage kinds a client-go program's informers list (Jobs,
//! ReplicaSets, StatefulSets, ReplicationControllers, see [`workloads`];
//! PersistentVolumes, PersistentVolumeClaims and the `storage.k8s.io` kinds, see
//! [`storage`]), `events.k8s.io/v1` Events (the core Events, see [`events`]) and
//! custom resources declared by CRD objects applied to it, with kube-apiserver's
//! semantics where tests lean on them:
//!
//! * one global resourceVersion; lists return the collection revision; watches replay
//!   history after a revision, send bookmarks, and get `410 Expired` below the
//!   compaction window ([`Config::window`] retained events);
//! * label and field selectors, `limit`/`continue` pagination (a list at
//!   `resourceVersion=0` comes whole in one page, as from kube-apiserver's watch
//!   cache), `resourceVersionMatch`;
//! * optimistic concurrency (409 on stale `resourceVersion`), graceful pod deletion,
//!   finalizers, merge / strategic-merge / JSON patches, status subresources;
//! * `pods/binding`, `pods/eviction` checked against PodDisruptionBudgets (429);
//! * `pods/portforward` over WebSocket (`v4.channel.k8s.io`, what kube-rs
//!   speaks; not kubectl's SPDY) to the pod's `status.podIP` (see [`portforward`]);
//! * CRD `openAPIV3Schema` validation with defaulting and pruning (422 naming the
//!   field), CEL `x-kubernetes-validations` (via `kube-cel`), printer columns and
//!   `meta.k8s.io/v1` Table output for `kubectl get`;
//! * opt-in ([`Config::rbac`], `--rbac`) bearer-token authentication (401) and RBAC
//!   authorization over the stored roles and bindings (403 with kube-apiserver's
//!   message), `SelfSubjectAccessReview`, `SubjectAccessReview`, `TokenReview` and
//!   ServiceAccount `TokenRequest`s; see
//!   [`auth`] and [`rbac`];
//! * a simulated kubelet (see [`kubelet`]) on a real or manual clock that, like a
//!   real one, admits only the pods that fit their node (`Failed` with
//!   `OutOf<resource>` otherwise), and fault injection (see [`faults`]).
//!
//! * `scheduling.k8s.io` Workloads and PodGroups at `v1alpha2` and `v1beta1`
//!   (which of them: [`Config::workload_apis`]), with their validation and the
//!   PodGroup `status` subresource, and pods' `spec.schedulingGroup`; see
//!   [`scheduling`].
//!
//! * Dynamic Resource Allocation (`resource.k8s.io/v1`, `v1alpha3` DeviceTaintRules)
//!   with the claim status rules, the `resourceclaims/binding` authorization and a
//!   stand-in for kube-controller-manager's resource claim controller; see [`dra`].
//!
//! Not implemented: controllers other than the resource claim controller (a Job's or Deployment's pods are never created, a
//! claim is never bound to a volume, a namespace gets no `default` ServiceAccount),
//! aggregated ClusterRoles, RBAC escalation checks, impersonation, admission
//! webhooks, protobuf request bodies (415, except the body of `kubectl auth
//! can-i`), aggregated discovery (the legacy documents are served and clients fall
//! back to them), full server-side apply (an apply patch is a merge patch without
//! managed fields or conflicts), garbage collection of owned objects, `dryRun`.
//! `docs/testing-against-kubernetes.md` has the full table.
//!
//! Namespaced objects need their namespace to exist (404 otherwise), as in a real
//! cluster; `default`, `kube-system`, `kube-public` and `kube-node-lease` exist at start.
//!
//! Control endpoints (not part of the Kubernetes API, never authenticated):
//! `GET/PUT /testapi/faults`, `POST /testapi/drop-watches`,
//! `POST /testapi/advance?seconds=N`, `POST /testapi/tick`, `POST /testapi/compact`,
//! `POST /testapi/tokens?serviceaccount=NS/NAME` (or `?user=NAME&groups=G1,G2`):
//! `{"token": ..., "user": {...}}`.

pub mod auth;
pub mod discovery;
pub mod dra;
pub mod error;
pub mod events;
pub mod eviction;
pub mod faults;
pub mod http;
pub mod jsonpath;
pub mod kinds;
pub mod kubelet;
pub mod patch;
pub mod portforward;
pub mod protobuf;
pub mod quantity;
pub mod rbac;
pub mod registry;
pub mod routes;
pub mod scheduling;
pub mod selector;
pub mod state;
pub mod storage;
pub mod store;
pub mod table;
pub mod time;
pub mod validation;
pub mod watch;
pub mod workloads;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use auth::{ADMIN_TOKEN, UserInfo};
pub use error::ApiError;
pub use faults::Faults;
pub use kubelet::KubeletConfig;
pub use scheduling::WorkloadApis;

/// Errors starting or driving the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding the port or writing the kubeconfig failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// An API operation failed.
    #[error("api: {0}")]
    Api(#[from] ApiError),
    /// The object names no kind the server serves.
    #[error("no resource serves apiVersion {0} kind {1}")]
    UnknownKind(String, String),
}

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// History events retained; watches/lists from older revisions get 410.
    pub window: usize,
    /// `true`: the clock stands still until [`TestApiServer::advance`]; `false`: wall clock
    /// with the kubelet stepping every [`Config::kubelet_period`].
    pub manual_clock: bool,
    /// Kubelet settings.
    pub kubelet: KubeletConfig,
    /// How often a real-clock kubelet steps.
    pub kubelet_period: Duration,
    /// How often watches with `allowWatchBookmarks` get a bookmark.
    pub bookmark_interval: Duration,
    /// Seed for names, uids and fault rolls.
    pub seed: u64,
    /// Authentication and RBAC authorization (off: every request is allowed and
    /// needs no credentials). On: every API request needs a bearer token
    /// (401 otherwise) and is authorized against the stored RBAC objects (403);
    /// the bootstrap roles (`cluster-admin`, `system:discovery`, ...) are stored at
    /// start, and the kubeconfig the server writes uses the admin token over TLS.
    pub rbac: bool,
    /// Static bearer tokens and the users they authenticate (with `rbac`).
    pub tokens: Vec<(String, UserInfo)>,
    /// Which `scheduling.k8s.io` Workload/PodGroup versions are served
    /// (`v1alpha2`, `v1beta1`, both — the default — or neither); PriorityClasses
    /// (`scheduling.k8s.io/v1`) are served in every case. See [`scheduling`].
    pub workload_apis: WorkloadApis,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 0,
            window: 10_000,
            manual_clock: false,
            kubelet: KubeletConfig::default(),
            kubelet_period: Duration::from_millis(100),
            bookmark_interval: Duration::from_secs(5),
            seed: 1,
            rbac: false,
            tokens: Vec::new(),
            workload_apis: WorkloadApis::default(),
        }
    }
}

/// State shared by connections, watches and the handle.
pub struct Shared {
    state: Mutex<state::State>,
    /// Bumped to end every open watch.
    pub drop_watches: tokio::sync::watch::Sender<u64>,
    /// `true` holds every API request.
    pub paused: tokio::sync::watch::Sender<bool>,
    /// How many requests the pause holds now.
    pub held: tokio::sync::watch::Sender<usize>,
    /// Bookmark period.
    pub bookmark_interval: Duration,
}

impl Shared {
    /// Locks the state. A poisoned lock (a panic while holding it) is recovered:
    /// every write leaves the store consistent before it can panic.
    pub fn lock(&self) -> MutexGuard<'_, state::State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves a manual clock and runs the kubelet. Returns how many objects changed.
    pub fn advance(&self, secs: i64) -> usize {
        let mut st = self.lock();
        st.clock.advance(secs);
        kubelet::step(&mut st)
    }

    /// Runs one kubelet step without moving the clock.
    pub fn tick(&self) -> usize {
        kubelet::step(&mut self.lock())
    }
}

/// A running server. Dropping it stops serving.
pub struct TestApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
    rbac: bool,
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.shared.drop_watches.send_modify(|g| *g += 1);
    }
}

impl TestApiServer {
    /// Binds 127.0.0.1:`port` and serves on the current tokio runtime.
    pub async fn start(config: Config) -> Result<Self, Error> {
        let listener = TcpListener::bind(("127.0.0.1", config.port)).await?;
        let addr = listener.local_addr()?;
        let clock = if config.manual_clock {
            time::Clock::Manual(time::wall_now())
        } else {
            time::Clock::Real
        };
        let mut st = state::State::new(config.window, clock, config.kubelet.clone(), config.seed);
        st.auth = auth::AuthState::new(config.rbac, &config.tokens);
        st.registry.serve_workload_apis(config.workload_apis);
        if config.rbac {
            rbac::seed_default_policy(&mut st);
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(st),
            drop_watches: tokio::sync::watch::channel(0).0,
            paused: tokio::sync::watch::channel(false).0,
            held: tokio::sync::watch::channel(0).0,
            bookmark_interval: config.bookmark_interval,
        });
        let mut tasks = vec![tokio::spawn(http::serve(listener, shared.clone()))];
        if !config.manual_clock {
            let s = shared.clone();
            let period = config.kubelet_period;
            tasks.push(tokio::spawn(async move {
                let mut iv = tokio::time::interval(period);
                loop {
                    iv.tick().await;
                    s.tick();
                }
            }));
        }
        tracing::info!(%addr, "test API server listening");
        Ok(TestApiServer {
            shared,
            addr,
            tasks,
            rbac: config.rbac,
        })
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The shared state (for advanced control).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// `https://127.0.0.1:PORT`: the same port over TLS (certificate [`TLS_CERT_PEM`]).
    pub fn https_url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// A kubeconfig pointing at this server: plain HTTP without credentials when
    /// RBAC is off; with [`Config::rbac`], HTTPS (kubectl sends tokens only over
    /// TLS) with the admin token [`ADMIN_TOKEN`].
    pub fn kubeconfig(&self) -> String {
        if self.rbac {
            self.kubeconfig_with_token(ADMIN_TOKEN)
        } else {
            kubeconfig_for(&self.url())
        }
    }

    /// A kubeconfig for `token` over HTTPS (for kubectl or any client).
    pub fn kubeconfig_with_token(&self, token: &str) -> String {
        kubeconfig_with_token(&self.https_url(), token)
    }

    /// Whether authentication and RBAC are on.
    pub fn rbac(&self) -> bool {
        self.rbac
    }

    /// Mints a bearer token for the ServiceAccount `namespace/name`
    /// (`system:serviceaccount:NS:NAME`); it stops working when the
    /// ServiceAccount is deleted.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> Result<String, Error> {
        Ok(auth::mint_service_account_token(&mut self.shared.lock(), namespace, name)?.0)
    }

    /// Mints a bearer token for `user`.
    pub fn user_token(&self, user: UserInfo) -> String {
        auth::mint_user_token(&mut self.shared.lock(), user)
    }

    /// Writes [`TestApiServer::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), Error> {
        std::fs::write(path, self.kubeconfig())?;
        Ok(())
    }

    /// Moves a manual clock by `secs` and runs the kubelet.
    pub fn advance(&self, secs: i64) -> usize {
        self.shared.advance(secs)
    }

    /// Runs one kubelet step.
    pub fn tick(&self) -> usize {
        self.shared.tick()
    }

    /// The faults in force.
    pub fn faults(&self) -> Faults {
        self.shared.lock().faults.clone()
    }

    /// Replaces the faults in force.
    pub fn set_faults(&self, f: Faults) {
        let paused = f.paused;
        self.shared.lock().faults = f;
        self.shared.paused.send_replace(paused);
    }

    /// Ends every open watch stream.
    pub fn drop_watches(&self) {
        self.shared.drop_watches.send_modify(|g| *g += 1);
    }

    /// Makes the next `n` list/watch requests fail with 410.
    pub fn force_410(&self, n: u32) {
        self.shared.lock().faults.force_410 = n;
    }

    /// Holds (or releases) every API request.
    pub fn pause(&self, paused: bool) {
        self.shared.lock().faults.paused = paused;
        self.shared.paused.send_replace(paused);
    }

    /// Waits until the pause holds at least `n` requests (each has reached
    /// the server and waits for [`TestApiServer::pause`]`(false)`).
    pub async fn held(&self, n: usize) {
        let mut rx = self.shared.held.subscribe();
        // The sender lives as long as the server.
        let _ = rx.wait_for(|&h| h >= n).await;
    }

    /// Forgets all history: every watch/list from an older revision gets 410.
    pub fn compact(&self) {
        self.shared.lock().store.compact_all();
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().store.rv()
    }

    /// Creates an object of any served kind (namespace from its metadata).
    pub fn create(&self, obj: Value) -> Result<Value, Error> {
        let mut st = self.shared.lock();
        let av = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        let (def, version) = st.def_for(&av, &kind).ok_or(Error::UnknownKind(av, kind))?;
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .map(String::from)
            .or_else(|| def.namespaced.then(|| "default".to_string()));
        Ok(st.create(
            &def,
            &version,
            ns.as_deref(),
            obj,
            &state::WriteOpts::default(),
        )?)
    }

    /// Deletes an object of any served kind, as `DELETE` with default
    /// options would (graceful for bound pods).
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value, Error> {
        let mut st = self.shared.lock();
        let (def, _) = st
            .def_for(api_version, kind)
            .ok_or_else(|| Error::UnknownKind(api_version.into(), kind.into()))?;
        Ok(st.delete(&def, namespace, name, None, None, None)?)
    }

    /// Reads an object (`None` if absent), as `api_version` presents it.
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let st = self.shared.lock();
        let (def, version) = st.def_for(api_version, kind)?;
        let obj = st.store.get(&def.key(), namespace, name).cloned()?;
        Some(state::State::present(&def, &version, obj))
    }
}

/// The server's self-signed TLS certificate (PEM; SANs `127.0.0.1`, `localhost`).
pub const TLS_CERT_PEM: &str = include_str!("tls/cert.pem");
/// The same certificate, DER.
pub const TLS_CERT_DER: &[u8] = include_bytes!("tls/cert.der");

/// A kubeconfig for a server at `url` that authenticates with `token` and trusts
/// the server's certificate. kubectl needs `https://` ([`TestApiServer::https_url`])
/// to send the token; kube-rs sends it over `http://` too.
pub fn kubeconfig_with_token(url: &str, token: &str) -> String {
    let ca = kinds::base64_encode(TLS_CERT_PEM.as_bytes());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testapi\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\ncontexts:\n- name: testapi\n  context:\n    cluster: testapi\n    user: testapi\n    namespace: default\ncurrent-context: testapi\nusers:\n- name: testapi\n  user:\n    token: {token}\n"
    )
}

/// A kubeconfig for a server at `url`.
pub fn kubeconfig_for(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testapi\n  cluster:\n    server: {url}\ncontexts:\n- name: testapi\n  context:\n    cluster: testapi\n    user: testapi\n    namespace: default\ncurrent-context: testapi\nusers:\n- name: testapi\n  user: {{}}\n"
    )
}
