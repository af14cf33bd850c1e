//! `trainyard-testapi --port N [--kubeconfig FILE] [--rbac] [--workload-apis v1alpha2,v1beta1|none]`: serves the test API server.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// An in-memory Kubernetes API server for tests (plain HTTP on 127.0.0.1).
#[derive(Parser, Debug)]
#[command(name = "trainyard-testapi", version)]
struct Args {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Write a kubeconfig pointing at the server here.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// History events retained before watches/lists get 410 Expired.
    #[arg(long, default_value_t = 10_000)]
    window: usize,
    /// Use a manual clock, moved by POST /testapi/advance?seconds=N.
    #[arg(long)]
    manual_clock: bool,
    /// Seconds from binding until the simulated kubelet runs a pod.
    #[arg(long, default_value_t = 0)]
    start_delay: i64,
    /// Require bearer tokens and authorize requests with RBAC. The kubeconfig then
    /// uses the admin token over HTTPS; mint others with
    /// POST /testapi/tokens?serviceaccount=NS/NAME.
    #[arg(long)]
    rbac: bool,
    /// The scheduling.k8s.io Workload/PodGroup versions served: `none`, or a
    /// comma-separated list of `v1alpha2` and `v1beta1`.
    #[arg(long, default_value = "v1alpha2,v1beta1")]
    workload_apis: trainyard_testapi::WorkloadApis,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let mut config = trainyard_testapi::Config {
        port: args.port,
        window: args.window,
        manual_clock: args.manual_clock,
        rbac: args.rbac,
        workload_apis: args.workload_apis,
        ..Default::default()
    };
    config.kubelet.start_delay = args.start_delay;
    let server = trainyard_testapi::TestApiServer::start(config)
        .await
        .context("starting the server")?;
    if let Some(p) = &args.kubeconfig {
        server
            .write_kubeconfig(p)
            .with_context(|| format!("writing {}", p.display()))?;
        tracing::info!(path = %p.display(), "kubeconfig written");
    }
    println!("{}", server.url());
    tokio::signal::ctrl_c()
        .await
        .context("waiting for ctrl-c")?;
    Ok(())
}
