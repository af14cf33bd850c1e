//! `trainyard serve`: the scheduler service on a cluster (docs/serve.md).

use std::path::PathBuf;

use anyhow::{Context, Result};

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Settings file (YAML): `scheduler:` (as for `trainyard schedule --config`) and
    /// `service:` (cyclePeriodMillis, debounceMillis, bindConcurrency, assumeTimeoutSeconds,
    /// gangRepairSeconds, admissionGating, clientQps, clientBurst, schedulerName,
    /// defaultQueue, inferPodGroups, httpAddress, leaderElection; see docs/serve.md and
    /// docs/operations.md). Defaults when absent. Read again when it changes (a ConfigMap
    /// update): valid changes apply, invalid ones are refused and the running settings stay.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How often the settings file is checked for changes (seconds).
    #[arg(long, default_value_t = 5, value_name = "SECONDS")]
    pub reload_seconds: u64,
    /// On SIGTERM or Ctrl-C: how long the binds and evictions already decided may take to
    /// land before they are abandoned (seconds); then the lease is released.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub drain_seconds: u64,
    /// Leader election on a Lease (default: on, or as the settings file says). With
    /// --leader-elect=false this replica leads alone and writes without a lease: for a
    /// single replica or tests only; two replicas without it both bind and evict.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub leader_elect: Option<bool>,
    /// The kubeconfig file to connect with (as kubectl's --kubeconfig). Default: KUBECONFIG
    /// (a list of files, merged), else ~/.kube/config, else the in-cluster service account.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (as kubectl's --context). Default: its current-context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Where /metrics, /healthz, /readyz and /usage are served, host:port; overrides
    /// service.httpAddress. Default 127.0.0.1:8080 (this machine only); 0.0.0.0:8080 for
    /// every interface (what Prometheus and the kubelet's probes need in a pod: the Helm
    /// chart and deploy/manifests set it); "" for none.
    #[arg(long, value_name = "ADDR", value_parser = http_address)]
    pub http_address: Option<String>,
    /// The gRPC API (trainyard.v1alpha1.Scheduler, health, reflection; docs/grpc.md) on this
    /// Unix socket (mode 0600); "" for none. Default /tmp/trainyard-api.sock, skipped with a
    /// warning when another scheduler serves there.
    #[arg(long, value_name = "PATH", value_parser = any_path)]
    pub api_socket: Option<PathBuf>,
    /// The gRPC API on this TCP address, host:port; "" for none. Default 127.0.0.1:50051
    /// (this machine only, skipped with a warning when taken). On an address that is not
    /// loopback (0.0.0.0:50051 in a pod) every call needs a Kubernetes bearer token, checked
    /// with TokenReview and SubjectAccessReview, and TLS is required (--api-tls-cert,
    /// --api-tls-key) unless --api-insecure; see docs/grpc.md.
    #[arg(long, value_name = "ADDR", value_parser = http_address)]
    pub api_listen: Option<String>,
    /// TLS certificate chain (PEM) of the --api-listen listener; read again when it changes.
    #[arg(long, value_name = "FILE", requires = "api_tls_key")]
    pub api_tls_cert: Option<PathBuf>,
    /// TLS private key (PEM: PKCS#8, PKCS#1 or SEC1) of the --api-listen listener.
    #[arg(long, value_name = "FILE", requires = "api_tls_cert")]
    pub api_tls_key: Option<PathBuf>,
    /// Serve --api-listen on a non-loopback address without TLS (behind a service mesh or
    /// proxy that encrypts). Bearer tokens are still required, and cross the network in
    /// clear text.
    #[arg(long)]
    pub api_insecure: bool,
    /// Require bearer tokens on a loopback --api-listen too (by default loopback, like the
    /// socket, is trusted: anyone who can reach it already runs on this machine or in this
    /// pod).
    #[arg(long)]
    pub api_require_auth: bool,
}

/// Where the gRPC API listens by default.
const API_SOCKET: &str = "/tmp/trainyard-api.sock";
const API_LISTEN: &str = "127.0.0.1:50051";

/// Serves the gRPC API over `view` where `args` say, until `stop`: a
/// listener given on the command line must start; a default one that
/// cannot (another scheduler on this machine has it) is skipped, said.
async fn start_api(
    args: &ServeArgs,
    client: &trainyard_api::auth::kubernetes::Client,
    view: &std::sync::Arc<trainyard_serve::view::LiveView>,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Result<Vec<tokio::task::JoinHandle<()>>> {
    use trainyard_api::auth::kubernetes::{CacheTtl, KubeAuthorizer};
    use trainyard_api::server::{Listen, Security, serve};
    let tls = match (&args.api_tls_cert, &args.api_tls_key) {
        (Some(cert), Some(key)) => Some(trainyard_api::tls::TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
        }),
        _ => None,
    };
    if tls.is_some() && args.api_listen.as_deref() == Some("") {
        anyhow::bail!("--api-tls-cert and --api-tls-key secure --api-listen, which is \"\" (off)");
    }
    let security = Security {
        tls,
        insecure: args.api_insecure,
        require_auth: args.api_require_auth,
        authorizer: Some(std::sync::Arc::new(KubeAuthorizer::new(
            client.clone(),
            CacheTtl::default(),
        ))),
    };
    let socket = match &args.api_socket {
        Some(p) if p.as_os_str().is_empty() => None,
        Some(p) => Some((p.clone(), true)),
        None => Some((PathBuf::from(API_SOCKET), false)),
    };
    let tcp = match args.api_listen.as_deref() {
        Some("") => None,
        Some(a) => Some((a.parse().context("--api-listen")?, true)),
        None => Some((
            API_LISTEN.parse().context("the default API address")?,
            false,
        )),
    };
    let mut tasks = Vec::new();
    let listens = [
        socket.map(|(p, given)| {
            (
                Listen {
                    socket: Some(p),
                    ..Listen::default()
                },
                given,
            )
        }),
        tcp.map(|(a, given)| {
            (
                Listen {
                    socket: None,
                    tcp: Some(a),
                    security: security.clone(),
                },
                given,
            )
        }),
    ];
    for (listen, given) in listens.into_iter().flatten() {
        match serve(view.clone(), &listen, stop.clone()).await {
            Ok(task) => tasks.push(task),
            Err(e) if !given => tracing::warn!("{e}; the API is not served there"),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(tasks)
}

/// `--http-address`: host:port, or empty for none.
/// A path, or "" (clap's own path parser refuses an empty value).
fn any_path(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

fn http_address(s: &str) -> Result<String, String> {
    if s.is_empty() || s.parse::<std::net::SocketAddr>().is_ok() {
        Ok(s.to_string())
    } else {
        Err(
            "expected host:port: 127.0.0.1:8080 (this machine only), 0.0.0.0:8080 (every interface), or \"\" for none"
                .into(),
        )
    }
}

pub fn run(args: ServeArgs) -> Result<()> {
    let (settings, text) = match &args.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("{}: cannot read", p.display()))?;
            (
                trainyard_serve::Settings::parse(&text, &p.display().to_string())?,
                text,
            )
        }
        None => (trainyard_serve::Settings::default(), String::new()),
    };
    let (pod, namespace) = pod_env();
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "trainyard".into());
    let suffix = format!("{:08x}", std::process::id() ^ (trainyard_seed() as u32));
    // What the environment and the command line decide, over the file's
    // settings at start and at every reload (else each reload would read
    // as a change needing a restart).
    let (leader_elect, http) = (args.leader_elect, args.http_address.clone());
    let (pod_name, pod_namespace) = (pod.clone(), namespace.clone());
    let finish = move |s: trainyard_serve::Settings| {
        let mut s = s.with_environment(&pod_name, &pod_namespace, &host, &suffix);
        if let Some(on) = leader_elect {
            s.service.leader_election.enabled = on;
        }
        if let Some(address) = &http {
            s.service.http_address = address.clone();
        }
        s
    };
    let settings = finish(settings);
    let cluster = trainyard_serve::connect::ClusterOptions {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let metrics = std::sync::Arc::new(trainyard_serve::metrics::Metrics::new());
        let client = trainyard_serve::connect(&cluster, metrics.clone()).await?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let (progress_tx, _progress) =
            tokio::sync::watch::channel(trainyard_serve::Progress::default());
        tokio::spawn(async move {
            wait_for_stop_signal().await;
            tracing::info!("stopping: no new cycles; finishing the writes in flight");
            stop_tx.send_replace(true);
        });
        let reload = args.config.clone().map(|path| {
            let (tx, mut file) = tokio::sync::watch::channel(settings.clone());
            let own = trainyard_serve::reload::Own {
                namespace: namespace.clone(),
                pod: pod.clone(),
            };
            tokio::spawn(trainyard_serve::reload::watch_file(
                path,
                text,
                std::time::Duration::from_secs(args.reload_seconds.max(1)),
                tx,
                metrics.clone(),
                Some((client.clone(), own)),
            ));
            let (tx, rx) = tokio::sync::watch::channel(settings.clone());
            tokio::spawn(async move {
                while file.changed().await.is_ok() {
                    let s = finish(file.borrow_and_update().clone());
                    if tx.send(s).is_err() {
                        return;
                    }
                }
            });
            rx
        });
        let view = std::sync::Arc::new(trainyard_serve::view::LiveView::new(
            &settings.service.scheduler_name,
            &settings.service.default_queue,
        ));
        // The API serves through the drain, and stops after the service.
        let (api_stop, api_stop_rx) = tokio::sync::watch::channel(false);
        let api = start_api(&args, &client, &view, &api_stop_rx).await?;
        trainyard_serve::run_with(
            client,
            settings,
            trainyard_serve::Options {
                shutdown: stop_rx,
                progress: progress_tx,
                reload,
                metrics,
                drain: std::time::Duration::from_secs(args.drain_seconds),
                own: trainyard_serve::reload::Own {
                    namespace: namespace.clone(),
                    pod: pod.clone(),
                },
                view: Some(view),
            },
        )
        .await?;
        api_stop.send_replace(true);
        for task in api {
            let _ = task.await;
        }
        Ok(())
    })
}

/// Where this replica runs: its pod's name and namespace (the chart sets
/// both from the downward API), empty when not in a pod.
fn pod_env() -> (String, String) {
    (
        std::env::var("POD_NAME").unwrap_or_default(),
        std::env::var("POD_NAMESPACE").unwrap_or_default(),
    )
}

/// Some bits that differ between processes started at once (the time).
fn trainyard_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// SIGTERM (what the kubelet sends) or Ctrl-C.
async fn wait_for_stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
