//! Where the scheduler's API is, and a channel to it: `--server ADDR`,
//! else `TRAINYARD_SERVER`, else the local socket `trainyard serve`
//! makes by default when it exists, else a port-forward to the
//! scheduler's pod through the kubeconfig's cluster (as kubectl plugins
//! reach in-cluster services). TLS is rustls; the caller's Kubernetes
//! token goes as `authorization: Bearer` metadata over TLS.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use tonic::transport::{Channel, Endpoint};

use super::ConnectArgs;
use super::tls;

/// The socket `trainyard serve` listens on by default (`--api-socket`).
pub const DEFAULT_SOCKET: &str = "/tmp/trainyard-api.sock";
/// The port the API listens on in the scheduler's pod (`--api-listen`).
pub const POD_PORT: u16 = 50051;
/// The labels the Helm chart and deploy/manifests put on the scheduler's pods.
pub const POD_SELECTOR: &str =
    "app.kubernetes.io/part-of=trainyard,app.kubernetes.io/component=scheduler";
/// The Lease replicas elect their leader on (the chart's `leaderElection.leaseName`).
pub const LEASE: &str = "trainyard";

/// Where the API is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    Unix(PathBuf),
    Http {
        host: String,
        port: u16,
    },
    Https {
        host: String,
        port: u16,
    },
    /// Through the kubeconfig's cluster to this pod's port.
    PortForward {
        namespace: String,
        pod: String,
    },
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Unix(p) => write!(f, "unix://{}", p.display()),
            Address::Http { host, port } => write!(f, "http://{}", authority(host, *port)),
            Address::Https { host, port } => write!(f, "https://{}", authority(host, *port)),
            Address::PortForward { namespace, pod } => {
                write!(f, "pod {namespace}/{pod} port {POD_PORT} (port-forward)")
            }
        }
    }
}

/// `unix:///path`, `http://host:port`, `https://host:port`; a bare
/// `host:port` is `http`, a bare absolute path a socket.
pub fn parse_address(s: &str) -> Result<Address> {
    const EXPECTED: &str = "expected unix:///path/to/socket, http://host:port or https://host:port";
    if let Some(path) = s.strip_prefix("unix://") {
        if path.is_empty() {
            bail!("\"{s}\": no socket path; {EXPECTED}");
        }
        return Ok(Address::Unix(PathBuf::from(path)));
    }
    if s.starts_with('/') {
        return Ok(Address::Unix(PathBuf::from(s)));
    }
    let (tls, rest) = if let Some(r) = s.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = s.strip_prefix("http://") {
        (false, r)
    } else if s.contains("://") {
        bail!("\"{s}\": unknown scheme; {EXPECTED}");
    } else {
        (false, s)
    };
    let rest = rest.trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !h.ends_with(':') => {
            let port = p
                .parse::<u16>()
                .map_err(|_| anyhow!("\"{s}\": port \"{p}\" is not a number; {EXPECTED}"))?;
            (h.trim_start_matches('[').trim_end_matches(']'), port)
        }
        _ if !rest.is_empty() && !rest.contains(':') => (rest, if tls { 443 } else { 80 }),
        _ => bail!("\"{s}\": {EXPECTED}"),
    };
    let host = host.to_string();
    Ok(if tls {
        Address::Https { host, port }
    } else {
        Address::Http { host, port }
    })
}

/// Where to connect, as the module docs say; `None` asks the kubeconfig.
pub fn configured_address(args: &ConnectArgs) -> Result<Option<Address>> {
    if let Some(s) = &args.server {
        return parse_address(s).map(Some).context("--server");
    }
    if let Some(s) = std::env::var("TRAINYARD_SERVER")
        .ok()
        .filter(|s| !s.is_empty())
    {
        return parse_address(&s).map(Some).context("TRAINYARD_SERVER");
    }
    let socket = PathBuf::from(DEFAULT_SOCKET);
    if socket.exists() && args.kubeconfig.is_none() && args.context.is_none() {
        return Ok(Some(Address::Unix(socket)));
    }
    Ok(None)
}

/// A connected channel, and where it goes (for messages).
pub struct Connected {
    pub channel: Channel,
    pub address: Address,
    /// Sent as `authorization: Bearer` on every call.
    pub token: Option<String>,
}

/// Connects as [`configured_address`] and the kubeconfig say.
pub async fn connect(args: &ConnectArgs) -> Result<Connected> {
    let address = match configured_address(args)? {
        Some(a) => a,
        None => return port_forward(args).await,
    };
    let token = token(args, &address).await?;
    let channel = match &address {
        Address::Unix(path) => {
            let path = path.clone();
            endpoint("http://localhost")?
                .connect_with_connector(tower::service_fn(move |_| {
                    let path = path.clone();
                    async move {
                        let s = tokio::net::UnixStream::connect(path).await?;
                        Ok::<_, std::io::Error>(TokioIo::new(s))
                    }
                }))
                .await
        }
        Address::Http { host, port } => {
            endpoint(&format!("http://{}", authority(host, *port)))?
                .connect()
                .await
        }
        Address::Https { host, port } => {
            let config = Arc::new(tls::client_config(args)?);
            let (host, port) = (host.clone(), *port);
            // `http` here: the connector below does TLS itself (tonic's
            // own would need its TLS features).
            let channel = endpoint(&format!("http://{}", authority(&host, port)))?
                .connect_with_connector(tower::service_fn(move |_| {
                    tls::connect(config.clone(), host.clone(), port)
                }))
                .await;
            // A certificate refused is not "cannot reach".
            if let Err(e) = &channel
                && let Some(r) = tls::rustls_error(e)
            {
                return Err(tls::handshake_failed(r, &address, args));
            }
            channel
        }
        // Only `port_forward` makes this address.
        Address::PortForward { .. } => return port_forward(args).await,
    };
    let channel = channel.map_err(|e| unreachable(&address, &e))?;
    Ok(Connected {
        channel,
        address,
        token,
    })
}

fn authority(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn endpoint(uri: &str) -> Result<Endpoint> {
    Ok(Endpoint::from_shared(uri.to_string())
        .with_context(|| format!("{uri}: not a valid address"))?
        .connect_timeout(Duration::from_secs(10)))
}

/// "cannot reach the scheduler at ADDR: why (what to do)".
pub fn unreachable(address: &Address, e: &(dyn std::error::Error + 'static)) -> anyhow::Error {
    anyhow!(
        "cannot reach the scheduler at {address}: {} (is `trainyard serve` running? pass --server or set TRAINYARD_SERVER)",
        super::status::innermost(e)
    )
}

/// The bearer token: `--token`, else `TRAINYARD_TOKEN`, else (over TLS
/// only) the kubeconfig user's token.
async fn token(args: &ConnectArgs, address: &Address) -> Result<Option<String>> {
    if let Some(t) = &args.token {
        return Ok(Some(t.clone()));
    }
    if let Some(t) = std::env::var("TRAINYARD_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        return Ok(Some(t));
    }
    if !matches!(address, Address::Https { .. }) {
        return Ok(None);
    }
    // No kubeconfig is not an error here (the server says whether it
    // wants a token), unless one was named: then its token was meant.
    let config = match trainyard_serve::connect::kube_config(&args.cluster()).await {
        Ok(c) => c,
        Err(e) if args.kubeconfig.is_some() || args.context.is_some() => {
            bail!("the token for {address} from the kubeconfig: {e}")
        }
        Err(_) => return Ok(None),
    };
    kubeconfig_token(&config)
}

fn kubeconfig_token(config: &kube::Config) -> Result<Option<String>> {
    use kube::config::AuthInfo;
    let AuthInfo {
        token, token_file, ..
    } = &config.auth_info;
    if let Some(t) = token {
        use secrecy::ExposeSecret;
        return Ok(Some(t.expose_secret().to_string()));
    }
    let Some(f) = token_file else {
        return Ok(None);
    };
    let t = std::fs::read_to_string(f)
        .with_context(|| format!("the kubeconfig user's tokenFile {f}"))?;
    Ok(Some(t.trim().to_string()))
}

/// A port-forward to the scheduler's pod (the leader when the Lease
/// names one of the pods, else the first ready pod by name) in
/// `--scheduler-namespace`, through the kubeconfig's cluster.
async fn port_forward(args: &ConnectArgs) -> Result<Connected> {
    let mut config = trainyard_serve::connect::kube_config(&args.cluster())
        .await
        .map_err(|e| {
            anyhow!(
                "no scheduler to ask: no --server, TRAINYARD_SERVER is not set, {DEFAULT_SOCKET} does not exist, and the cluster cannot be reached through a kubeconfig: {e}"
            )
        })?;
    config.default_retry = false;
    let client = kube::Client::try_from(config).context("the kubeconfig's cluster")?;
    let ns = args.scheduler_namespace.clone();
    let pod = scheduler_pod(&client, &ns).await?;
    let address = Address::PortForward {
        namespace: ns.clone(),
        pod: pod.clone(),
    };
    let pods: Api<Pod> = Api::namespaced(client, &ns);
    let channel = endpoint("http://localhost")?
        .connect_with_connector(tower::service_fn(move |_| {
            let (pods, pod) = (pods.clone(), pod.clone());
            async move {
                let mut pf = pods
                    .portforward(&pod, &[POD_PORT])
                    .await
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                let stream = pf.take_stream(POD_PORT).ok_or_else(|| {
                    std::io::Error::other("the port-forward gave no stream for the port")
                })?;
                Ok::<_, std::io::Error>(TokioIo::new(stream))
            }
        }))
        .await
        .map_err(|e| unreachable(&address, &e))?;
    Ok(Connected {
        channel,
        address,
        token: None,
    })
}

/// The pod to forward to: the Lease's holder if it is one of the
/// scheduler's pods, else the first running one by name.
async fn scheduler_pod(client: &kube::Client, ns: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let list = pods
        .list(&ListParams::default().labels(POD_SELECTOR))
        .await
        .map_err(|e| {
            anyhow!(
                "listing the scheduler's pods in namespace {ns} ({POD_SELECTOR}): {e}; pass --scheduler-namespace, or --server ADDR"
            )
        })?;
    let mut running: Vec<String> = list
        .items
        .iter()
        .filter(|p| {
            p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                && p.metadata.deletion_timestamp.is_none()
        })
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    running.sort();
    if running.is_empty() {
        bail!(
            "no running scheduler pod in namespace {ns} (labels {POD_SELECTOR}); is Trainyard installed there? pass --scheduler-namespace NS, or --server ADDR"
        );
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let holder = leases
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec.and_then(|s| s.holder_identity));
    Ok(match holder {
        Some(h) if running.contains(&h) => h,
        _ => running.swap_remove(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let ok = |s: &str| {
            parse_address(s)
                .map(|a| a.to_string())
                .unwrap_or_else(|e| format!("{e:#}"))
        };
        assert_eq!(ok("unix:///tmp/a.sock"), "unix:///tmp/a.sock");
        assert_eq!(ok("/tmp/a.sock"), "unix:///tmp/a.sock");
        assert_eq!(ok("http://127.0.0.1:50051"), "http://127.0.0.1:50051");
        assert_eq!(ok("127.0.0.1:50051"), "http://127.0.0.1:50051");
        assert_eq!(
            ok("https://sched.example:8443/"),
            "https://sched.example:8443"
        );
        assert_eq!(ok("https://sched.example"), "https://sched.example:443");
        assert_eq!(ok("http://[::1]:50051"), "http://[::1]:50051");
        assert_eq!(
            ok("grpc://x:1"),
            "\"grpc://x:1\": unknown scheme; expected unix:///path/to/socket, http://host:port or https://host:port"
        );
        assert_eq!(
            ok("http://x:port"),
            "\"http://x:port\": port \"port\" is not a number; expected unix:///path/to/socket, http://host:port or https://host:port"
        );
    }
}
