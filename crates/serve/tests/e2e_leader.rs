//! Two replicas with leader election on a Lease, against the test API
//! server: exactly one writes; the standby takes over when the leader is
//! killed (no release) and when the leader is cut off from the API (its
//! requests fail: it steps down); no gang is lost or bound twice; a
//! replica that steps down keeps no observed runtimes. Outcomes are read
//! from the API objects.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;
use trainyard_serve::Progress;
use trainyard_testapi::TestApiServer;

/// A client layer that fails every request while `cut` is set: the
/// replica's network is partitioned from the API server.
#[derive(Clone)]
struct Partition(Arc<AtomicBool>);

#[derive(Clone)]
struct Partitioned<S> {
    inner: S,
    cut: Arc<AtomicBool>,
}

impl<S> tower_layer::Layer<S> for Partition {
    type Service = Partitioned<S>;
    fn layer(&self, inner: S) -> Partitioned<S> {
        Partitioned {
            inner,
            cut: self.0.clone(),
        }
    }
}

impl<S, B> tower_service::Service<http::Request<B>> for Partitioned<S>
where
    S: tower_service::Service<http::Request<B>>,
    S::Future: Send + 'static,
    S::Error: From<std::io::Error>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if self.cut.load(Ordering::SeqCst) {
            let e = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "partitioned");
            return Box::pin(async move { Err(S::Error::from(e)) });
        }
        Box::pin(self.inner.call(req))
    }
}

struct Replica {
    progress: watch::Receiver<Progress>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    cut: Arc<AtomicBool>,
}

fn replica(server: &TestApiServer, identity: &str) -> Replica {
    let cut = Arc::new(AtomicBool::new(false));
    let config = kube::Config::new(server.url().parse().expect("url"));
    let client: Client = kube::client::ClientBuilder::try_from(config)
        .expect("builder")
        .with_layer(&Partition(cut.clone()))
        .build();
    let Spawned {
        progress,
        stop,
        task,
    } = spawn_service(
        client,
        leader_settings(identity),
        Arc::new(trainyard_serve::metrics::Metrics::new()),
        Default::default(),
    );
    Replica {
        progress,
        stop,
        task,
        cut,
    }
}

async fn holder(client: &Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    leases
        .get_opt("trainyard")
        .await
        .expect("lease")
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

/// Waits until one of `replicas` leads; returns its index.
async fn leader_of(replicas: &mut [&mut Replica]) -> usize {
    let wait = async {
        loop {
            if let Some(i) = replicas.iter().position(|r| r.progress.borrow().leader) {
                return i;
            }
            let changes = replicas
                .iter_mut()
                .map(|r| Box::pin(r.progress.changed()))
                .collect::<Vec<_>>();
            let _ = futures::future::select_all(changes).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .expect("a leader within 30 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_writes_and_the_standby_takes_over_when_it_dies_or_is_cut_off() {
    if skip_on_cluster(
        "the leader election test",
        "killing and partitioning replicas",
    ) {
        return;
    }
    let (server, client) = server().await;
    cluster(&client).await;
    let mut a = replica(&server, "replica-a");
    let mut b = replica(&server, "replica-b");
    let first = leader_of(&mut [&mut a, &mut b]).await;
    let (mut leader, mut standby) = if first == 0 { (a, b) } else { (b, a) };

    // Exactly one writes.
    gang(&client, "one", "team", 2, 2).await;
    until(&mut leader.progress, "the leader's binds", |p| {
        p.written.binds == 2
    })
    .await;
    let later = leader.progress.borrow().cycles + 3;
    let quiet = until(&mut leader.progress, "three more cycles", |p| {
        p.cycles >= later
    })
    .await;
    let s = *standby.progress.borrow();
    assert!(!s.leader, "{s:?}");
    assert_eq!(
        (s.cycles, s.written.binds, s.written.failed),
        (0, 0, 0),
        "the standby wrote: {s:?}"
    );
    let holder_now = holder(&client).await.expect("a holder");
    assert!(
        holder_now == "replica-a" || holder_now == "replica-b",
        "{holder_now}"
    );
    assert_eq!(quiet.written.failed, 0, "{quiet:?}");

    // The leader dies without releasing the lease: the standby takes over
    // once the lease is unrenewed for its duration (3 s), then schedules.
    leader.task.abort();
    let killed = std::time::Instant::now();
    gang(&client, "two", "team", 2, 2).await;
    until(&mut standby.progress, "the standby leads", |p| p.leader).await;
    // Within the lease (3 s), a retry period (1 s), and slack for a
    // loaded machine.
    let took = killed.elapsed();
    assert!(took < Duration::from_secs(7), "the standby took {took:?}");
    until(&mut standby.progress, "the new leader's binds", |p| {
        p.written.binds == 2
    })
    .await;
    let (old, new) = (leader, standby);
    drop(old);
    let mut leader = new;
    // A job ends on its own under the new leader: it keeps its runtime
    // for the reservations' estimate.
    gang(&client, "brief", "team", 1, 1).await;
    let bound = until(&mut leader.progress, "brief bound", |p| {
        p.written.binds == 3
    })
    .await;
    // Seen running by a usage sample, then gone.
    pod_ends_on_its_own(&server, &mut leader.progress, bound, "brief-0", 1).await;

    // A third replica joins as standby; the leader is then cut off from
    // the API: it steps down (its fence closes) and the standby leads.
    let mut standby = replica(&server, "replica-c");
    until(&mut standby.progress, "the standby's first view", |p| {
        !p.leader
    })
    .await;
    leader.cut.store(true, Ordering::SeqCst);
    let stepped_down = until(&mut leader.progress, "the cut-off leader steps down", |p| {
        !p.leader
    })
    .await;
    // A standby cannot tell the leader's evictions from runs that ended.
    assert_eq!(stepped_down.runtimes, 0, "{stepped_down:?}");
    gang(&client, "three", "team", 2, 2).await;
    until(&mut standby.progress, "the standby leads", |p| p.leader).await;
    until(&mut standby.progress, "its binds", |p| p.written.binds == 2).await;
    assert_eq!(holder(&client).await.as_deref(), Some("replica-c"));
    let cut_off = *leader.progress.borrow();
    assert!(!cut_off.leader, "{cut_off:?}");

    // Every gang whole, each pod bound once (a second bind is a 409 and
    // would leave two nodes' worth of devices in use).
    let placed = placements(&client).await;
    let mut names: Vec<&str> = placed.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        ["one-0", "one-1", "three-0", "three-1", "two-0", "two-1"]
    );
    devices_distinct(&placed);

    // A clean stop of the leader releases the lease at once.
    standby.stop.send_replace(true);
    let _ = standby.task.await;
    assert_eq!(holder(&client).await, None, "released");
    leader.stop.send_replace(true);
}
