//! The verbs that ask the running scheduler (`trainyard queues`, `jobs`,
//! `explain`, `whatif`, `snapshot`, `watch`) through its gRPC API,
//! `trainyard.v1alpha1.Scheduler` (docs/grpc.md, docs/cli.md):
//!
//! - [`connect`]: where the API is and a channel to it; [`tls`]: rustls;
//! - [`status`]: refused calls said for people;
//! - [`output`]: answers as JSON or YAML (the proto3 JSON mapping);
//! - [`show`]: answers as tables and text;
//! - [`verbs`]: each verb's flags and run.

pub mod connect;
pub mod output;
pub mod show;
pub mod status;
pub mod tls;
pub mod usage;
pub mod verbs;

use std::path::PathBuf;

use anyhow::Result;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use trainyard_api::pb::scheduler_client::SchedulerClient;

use connect::Address;

/// Where the scheduler is and who asks (every verb that asks it).
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Connection")]
pub struct ConnectArgs {
    /// The scheduler's API: unix:///path, http://host:port or https://host:port. Default:
    /// TRAINYARD_SERVER, else the local socket /tmp/trainyard-api.sock when it exists, else a
    /// port-forward to the scheduler's pod through the kubeconfig's cluster.
    #[arg(long, value_name = "ADDR")]
    pub server: Option<String>,
    /// The kubeconfig to reach the cluster with (as kubectl's --kubeconfig): for the
    /// port-forward, the default namespace and the token. Default: KUBECONFIG, else
    /// ~/.kube/config.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (as kubectl's --context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Where the scheduler's pods run (for the port-forward).
    #[arg(long, value_name = "NS", default_value = "trainyard-system")]
    pub scheduler_namespace: String,
    /// Bearer token sent to the scheduler (over TLS, as `authorization: Bearer`).
    /// Default: TRAINYARD_TOKEN, else the kubeconfig user's token.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// PEM file of the CA that signed the scheduler's certificate (https://). Default: the
    /// system's roots.
    #[arg(long, value_name = "FILE")]
    pub certificate_authority: Option<PathBuf>,
    /// Do not check the scheduler's certificate (https://): for tests only, as kubectl's flag.
    #[arg(long)]
    pub insecure_skip_tls_verify: bool,
}

impl ConnectArgs {
    pub fn cluster(&self) -> trainyard_serve::connect::ClusterOptions {
        trainyard_serve::connect::ClusterOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
        }
    }
}

/// `-o`: how an answer is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// The answer's message in the proto3 JSON mapping (camelCase fields, enums by name,
    /// 64-bit integers as strings), as grpcurl prints it; every field, even when zero.
    Json,
    /// The same as YAML.
    Yaml,
}

/// Adds the caller's token to every call.
#[derive(Clone)]
pub struct Auth(Option<MetadataValue<Ascii>>);

impl Interceptor for Auth {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            req.metadata_mut().insert("authorization", v.clone());
        }
        Ok(req)
    }
}

/// A client of the scheduler, and where it is.
pub struct Session {
    pub client: SchedulerClient<InterceptedService<Channel, Auth>>,
    pub address: Address,
}

impl Session {
    pub async fn open(args: &ConnectArgs) -> Result<Session> {
        let c = connect::connect(args).await?;
        let auth = match &c.token {
            Some(t) => Some(
                format!("Bearer {t}")
                    .parse::<MetadataValue<Ascii>>()
                    .map_err(|_| {
                        anyhow::anyhow!("the token has characters a header cannot hold")
                    })?,
            ),
            None => None,
        };
        Ok(Session {
            client: SchedulerClient::with_interceptor(c.channel, Auth(auth))
                .max_decoding_message_size(256 << 20),
            address: c.address,
        })
    }

    /// A refused call, said for people.
    pub fn refused(&self, status: &tonic::Status) -> anyhow::Error {
        status::explain(status, &self.address)
    }
}

/// Runs `f` on a runtime of this thread (the verbs ask and print; the
/// port-forward's tasks run while it waits).
pub fn block_on<F: std::future::Future>(f: F) -> Result<F::Output> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(rt.block_on(f))
}
