//! Trainyard's scheduler service (`trainyard serve`): the I/O edge around
//! the pure core.
//!
//! One watcher per kind ([`watch`]) feeds [`world::World`], which reads
//! every object with the same reader as a file's into the one incremental
//! `ClusterState`. A cycle runs every `cyclePeriodMillis`, and
//! `debounceMillis` after a change: it forgets assumptions the world never
//! confirmed (older than `assumeTimeoutSeconds`), takes the snapshot, calls
//! `trainyard_sched::schedule` (the function the simulator runs), assumes
//! its decisions so the next cycle does not place a pod twice, and writes
//! them ([`write`]): binds, evictions, nominations. No cycle runs before
//! every watcher finished its first list.
//!
//! Each pending pod is told why it waits ([`report`]): a
//! `PodScheduled=False` condition and a `FailedScheduling` Event with the
//! core's message, written only when the message changes.
//!
//! Binds record a `Scheduled` Event, evictions a `Reclaimed` or
//! `Preempted` one with the core's message.
//!
//! Trainyard's Queues get their status and conditions ([`queue_status`]),
//! PodGroups theirs ([`group_status`]), when they changed.
//!
//! Around the core: a failed write's assumption is forgotten at once and
//! gangs left incomplete are repaired ([`repair`]); jobs a
//! PodDisruptionBudget protects are no victims ([`pdb`]); gated jobs are
//! admitted when their queue has room ([`admission`]); pods of a Job,
//! JobSet, PyTorchJob, ... that name no group get one inferred from their
//! owner ([`grouper`], [`infer`]); writes keep to the client's QPS and
//! burst ([`conn`]).
//!
//! Operating it: leader election on a Lease, with every write fenced
//! ([`leader`], [`conn`]); Prometheus metrics ([`metrics`],
//! [`api_metrics`]) and probes ([`http`]); settings reloaded from their
//! file ([`reload`]); on shutdown, the writes in flight drain before the
//! lease is released. The usage history and its accounting are kept in a
//! store on the leader's disk ([`persist`]).

pub mod admission;
pub mod api_metrics;
pub mod checkpoint;
pub mod claims;
pub mod conn;
pub mod connect;
pub mod decision_log;
pub mod events;
pub mod extended;
pub mod group_status;
pub mod grouper;
pub mod http;
pub mod infer;
pub mod journal;
pub mod leader;
pub mod machine;
pub mod metrics;
pub mod pdb;
pub mod persist;
pub mod queue_status;
pub mod relist;
pub mod reload;
pub mod repair;
pub mod report;
pub mod settings;
mod shell;
#[cfg(test)]
mod testkit;
pub mod upstream_status;
pub mod view;
pub mod walltime;
pub mod watch;
pub mod world;
pub mod write;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kube::Client;
use tokio::sync::{mpsc, watch as signal};
use tokio::time::Instant;
use trainyard_model::Timestamp;

pub use settings::{ServiceSettings, Settings, SettingsError, SettingsErrors};
pub use world::{World, WorldEvent};
pub use write::{GPU_DEVICES_ANNOTATION, Written};

/// What the service has done so far (for tests, metrics and logs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Cycles run.
    pub cycles: u64,
    /// Writes done and failed, summed over cycles.
    pub written: Written,
    /// Pending jobs after the last cycle.
    pub pending: u64,
    /// Running jobs that a PodDisruptionBudget kept from being victims in
    /// the last cycle ([`pdb`]).
    pub protected: u64,
    /// Queue statuses written (only when changed), summed over cycles.
    pub queue_statuses: u64,
    /// Pending pods told why they wait (a condition and an Event each),
    /// summed over cycles: only when the reason changed.
    pub reports: u64,
    /// PodGroup statuses written (only when changed), summed over cycles.
    pub group_statuses: u64,
    /// Upstream `scheduling.k8s.io` PodGroup statuses written (only when
    /// changed), summed over cycles ([`upstream_status`]).
    pub upstream_statuses: u64,
    /// Pods whose admission gate was removed ([`admission`]).
    pub admitted: u64,
    /// Bound members of incomplete gangs evicted ([`repair`]).
    pub repairs: u64,
    /// PodGroups inferred from owners and created ([`grouper`]) (pods that
    /// get none are told why, counted in `reports`).
    pub groups_created: u64,
    /// Events written, failed and dropped ([`events`]).
    pub events: events::EventCounts,
    /// Whether this replica leads (always, without leader election).
    pub leader: bool,
    /// What this start did with the bind journal's open intents.
    pub recovered: journal::Recovered,
    /// Usage samples taken (each leading cycle, and each period of a
    /// standby, which records usage too).
    pub usage_samples: u64,
    /// Pods evicted because their job ran past its walltime
    /// ([`walltime`]).
    pub walltime_evictions: u64,
    /// Pods told, with enforcement off, that their job ran past its
    /// walltime and runs on (a `WalltimePassed` Event each, once).
    pub walltime_notices: u64,
    /// Checkpoints written to the API server ([`checkpoint`]).
    pub checkpoints: u64,
    /// Jobs that stopped holding anything, with their accounting records
    /// (handed to the store when there is one).
    pub accounted: u64,
    /// Observed runtimes kept for the reservations' runtime estimate
    /// (`reservations.runtimeEstimate`), over all queues, after the last
    /// usage sample: only a leader keeps them.
    pub runtimes: u64,
    /// Whether this replica's usage history resumed from a checkpoint
    /// when it last became leader.
    pub resumed: bool,
}

/// The service could not start. Each says its cause once, in its own
/// message (no `source()`: printed with its chain, kube's errors repeat
/// their causes).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Where the cluster is could not be found or read
    /// ([`connect::kube_config`]).
    #[error("{0}")]
    Config(String),
    #[error("building the client: {}", conn::plain(.0))]
    Client(kube::Error),
    #[error("discovering the API server's kinds: {}", conn::plain(.0))]
    Discovery(kube::Error),
    #[error(
        "serving /metrics, /healthz, /readyz and /usage on {address} (service.httpAddress, --http-address): {error}"
    )]
    Http {
        address: String,
        error: std::io::Error,
    },
}

/// A client for the cluster `cluster` names ([`connect::kube_config`]:
/// `--kubeconfig`, else `KUBECONFIG`, else `~/.kube/config`, else the
/// in-cluster service account; `--context`), without kube's default retry layer: that layer
/// retries a 429 up to 15 times with backoff, and an eviction refused by
/// a PodDisruptionBudget answers 429. For the service a refusal is a
/// reason (the next cycle decides again), not something to wait on inside
/// a cycle.
///
/// Every request is counted and timed in `metrics`
/// ([`api_metrics::ApiMetricsLayer`]).
pub async fn connect(
    cluster: &connect::ClusterOptions,
    metrics: std::sync::Arc<metrics::Metrics>,
) -> Result<Client, ServeError> {
    let mut config = connect::kube_config(cluster)
        .await
        .map_err(ServeError::Config)?;
    config.default_retry = false;
    client_for(config, metrics)
}

/// A client for `config` whose requests are counted in `metrics`.
pub fn client_for(
    config: kube::Config,
    metrics: std::sync::Arc<metrics::Metrics>,
) -> Result<Client, ServeError> {
    Ok(kube::client::ClientBuilder::try_from(config)
        .map_err(ServeError::Client)?
        .with_layer(&api_metrics::ApiMetricsLayer(metrics))
        .build())
}

/// How [`run_with`] is driven and observed.
pub struct Options {
    /// Stop when it turns true (or its sender is gone).
    pub shutdown: signal::Receiver<bool>,
    /// [`Progress`] after every cycle and write.
    pub progress: signal::Sender<Progress>,
    /// Settings read again (a changed config file, [`reload`]); `None`:
    /// never.
    pub reload: Option<signal::Receiver<Settings>>,
    /// Where the service's metrics go (also served on `/metrics`).
    pub metrics: std::sync::Arc<metrics::Metrics>,
    /// After `shutdown`, how long writes already handed over may take.
    pub drain: Duration,
    /// This replica's pod, for Events about the scheduler itself (empty:
    /// none are written).
    pub own: reload::Own,
    /// Where each cycle, the watched objects and readiness are published
    /// for the API ([`view`]); `None`: nowhere.
    pub view: Option<std::sync::Arc<view::LiveView>>,
}

pub(crate) fn wall_clock() -> Timestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    Timestamp(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// Runs the service until `shutdown` turns true (or its sender is gone),
/// publishing [`Progress`] after every cycle ([`run_with`] with no reload
/// and metrics of its own).
pub async fn run(
    client: Client,
    settings: Settings,
    shutdown: signal::Receiver<bool>,
    progress: signal::Sender<Progress>,
) -> Result<(), ServeError> {
    run_with(
        client,
        settings,
        Options {
            shutdown,
            progress,
            reload: None,
            metrics: std::sync::Arc::new(metrics::Metrics::new()),
            drain: Duration::from_secs(10),
            own: reload::Own::default(),
            view: None,
        },
    )
    .await
}

/// Runs the service: watches, and while this replica leads, cycles and
/// writes; serves `/metrics`, `/healthz`, `/readyz`; takes reloaded
/// settings. On shutdown: no new cycle, the writes already handed over get
/// `drain` to land, then the lease is released.
///
/// This is the shell around the pure [`machine::Service`]: it turns watch
/// events, write outcomes, role changes, reloads and the clock into the
/// machine's inputs, and carries out its commands ([`shell`]).
pub async fn run_with(
    client: Client,
    settings: Settings,
    options: Options,
) -> Result<(), ServeError> {
    let Options {
        mut shutdown,
        progress,
        mut reload,
        metrics,
        drain,
        own,
        view,
    } = options;
    let kinds = watch::served_kinds(&client)
        .await
        .map_err(ServeError::Discovery)?;
    tracing::info!(
        kinds = ?kinds.iter().map(|k| format!("{}/{}", k.api_version, k.kind)).collect::<Vec<_>>(),
        "watching"
    );
    let (mut rx, watchers) = start_watchers(&client, &kinds);
    let service = settings.service.clone();
    let health = std::sync::Arc::new(http::Health::new(
        Duration::from_millis(service.cycle_period_millis.saturating_mul(10))
            .max(Duration::from_secs(30)),
    ));
    // `/usage` questions come to the loop, which adds what the store does
    // not hold yet (the period still open, the running jobs).
    let (usage_tx, mut usage_rx) = mpsc::channel::<http::UsageAsk>(16);
    let usage_source = (!service.store.path.is_empty()).then_some(usage_tx);
    let http_task = start_http(&service, &health, &metrics, &usage_source).await?;
    let (fence, elector, mut role, elector_stop) =
        start_election(&client, &service.leader_election);
    health.set_role(*role.borrow());
    metrics
        .leader
        .set(i64::from(*role.borrow() == leader::Role::Leader));
    let (history, persist, open_intents) = start_store(&settings, &client, &own, &metrics).await;
    let mut grouper = grouper::Grouper::new(&service, &kinds);
    let (mut shell, mut machine, events_task) = assemble(
        &client,
        settings,
        kinds,
        fence,
        (history, persist, open_intents),
        &metrics,
    );
    if let Some(v) = &view {
        v.set_usage_source(usage_source.clone());
    }
    shell.view = view.clone();
    let (conn, events, streams) = (shell.conn.clone(), shell.events.clone(), shell.streams);
    let publish = |machine: &machine::Service, events: &events::EventSink| {
        let mut done = machine.progress();
        done.events = events.counts();
        if let Some(v) = &view {
            v.set_readiness(view::Readiness {
                synced: machine.world.synced(streams.count),
                leader: done.leader,
            });
        }
        progress.send_replace(done);
    };
    publish(&machine, &events);
    let mut dropped = 0;
    loop {
        let wake = machine.wake_at();
        let wait = Duration::from_millis(u64::try_from(wake.0 - wall_clock().0).unwrap_or(0));
        tokio::select! {
            biased;
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
            changed = role.changed(), if elector.is_some() => {
                if changed.is_err() {
                    continue;
                }
                let now_role = *role.borrow();
                health.set_role(now_role);
                shell.drive(&mut machine, machine::Input::Role(now_role), wall_clock()).await;
            }
            Some(new) = async {
                match reload.as_mut() {
                    Some(r) => r.changed().await.ok().map(|()| r.borrow_and_update().clone()),
                    None => std::future::pending().await,
                }
            } => {
                shell.drive(&mut machine, machine::Input::Reload(Box::new(new)), wall_clock()).await;
            }
            event = rx.recv() => match event {
                Some(e) => {
                    if let Some(v) = &view {
                        v.watched(&e);
                    }
                    shell.drive(&mut machine, machine::Input::Watch(e), wall_clock()).await
                }
                None => break,
            },
            Some(o) = shell.writer.outcome() => {
                observe_outcome(&metrics, &machine.world, &o);
                let input = machine::Input::Written {
                    unit: o.unit,
                    write: o.write,
                    error: o.error,
                };
                shell.drive(&mut machine, input, wall_clock()).await;
            }
            Some(ask) = usage_rx.recv() => {
                let now = wall_clock();
                match &shell.persist {
                    Some(p) => {
                        let (buckets, running) = machine.world.state.live_usage(now);
                        let live = persist::Live { buckets, running };
                        p.report((ask.from_s, ask.to_s, ask.by), live, ask.reply);
                    }
                    None => {
                        let _ = ask.reply.send(Err(
                            "the store could not be opened at start (the scheduler's log says why)"
                                .into(),
                        ));
                    }
                }
                continue;
            }
            Some(result) = async {
                match shell.checkpoint_task.as_mut() {
                    Some(t) => Some(t.await),
                    None => std::future::pending().await,
                }
            } => {
                shell.checkpoint_task = None;
                let result = result.unwrap_or_else(|e| Err(format!("checkpoint task failed: {e}")));
                shell.drive(&mut machine, machine::Input::CheckpointWritten(result), wall_clock()).await;
            }
            () = tokio::time::sleep(wait) => {
                health.beat();
                health.set_synced(machine.world.synced(streams.count));
                let now = wall_clock();
                if machine.cycle_due(now) {
                    let grouped = grouper.cycle(&conn, &events, &machine.world, now).await;
                    shell.drive(&mut machine, machine::Input::Grouped(grouped), now).await;
                }
                shell.drive(&mut machine, machine::Input::Tick, now).await;
                let ev = events.counts();
                metrics.events_dropped.inc_by(ev.dropped.saturating_sub(dropped));
                dropped = ev.dropped;
            }
        }
        publish(&machine, &events);
    }
    // Stopping: no new cycle; what was handed to the writer gets `drain`
    // to land; then the lease is released (after the last write, so no
    // other replica writes while this one still does).
    let deadline = Instant::now() + drain;
    drain_writes(&mut shell, &mut machine, deadline, drain).await;
    publish(&machine, &events);
    // A checkpoint on its way lands within the same deadline.
    if let Some(task) = shell.checkpoint_task.take()
        && tokio::time::timeout_at(deadline, task).await.is_err()
    {
        tracing::warn!("stopping: the checkpoint still being written is abandoned");
    }
    // Gone before the store's thread is joined: they hold the journal's
    // sender (intents of writes abandoned above stay open for the next
    // start).
    let shell::Shell {
        writer,
        journal,
        persist,
        ..
    } = shell;
    writer.stop().await;
    drop(journal);
    // The usage history handed to the store is written before the end.
    // Joined off the runtime's threads: the last commit may take a moment.
    if let Some(p) = persist
        && tokio::task::spawn_blocking(move || p.close())
            .await
            .is_err()
    {
        tracing::error!("the store's thread could not be joined");
    }
    for w in watchers {
        w.abort();
    }
    events_task.abort();
    elector_stop.send_replace(true);
    if let Some(task) = elector {
        let _ = task.await;
    }
    metrics.leader.set(0);
    if let Some(task) = http_task {
        task.abort();
    }
    tracing::info!("stopped");
    Ok(())
}

/// The shell (connection, Event sink, writer, store) and the machine it
/// drives, over the world's `kinds`; and the Event sink's task.
fn assemble(
    client: &Client,
    settings: Settings,
    kinds: Vec<kube::core::ApiResource>,
    fence: std::sync::Arc<conn::Fence>,
    (history, persist, open_intents): (
        trainyard_cluster::usage::UsageHistory,
        Option<persist::Persist>,
        std::collections::BTreeMap<u64, trainyard_store::JournalRecord>,
    ),
    metrics: &std::sync::Arc<metrics::Metrics>,
) -> (shell::Shell, machine::Service, tokio::task::JoinHandle<()>) {
    let service = settings.service.clone();
    let conn = std::sync::Arc::new(conn::Conn::new(
        client.clone(),
        service.client_qps,
        service.client_burst,
        fence,
    ));
    // Events are written by a task of their own, binds and evictions by
    // another: no cycle waits for them.
    let (events, events_task) =
        events::EventSink::spawn(conn.clone(), service.event_queue, service.bind_concurrency);
    let journal = persist.as_ref().map(|p| p.journal());
    let writer = write::Writer::spawn(
        conn.clone(),
        events.clone(),
        service.bind_concurrency,
        service.nominate_before_bind,
        journal.clone(),
    );
    let streams = machine::Streams::of_versioned(
        kinds
            .iter()
            .map(|k| (k.group.as_str(), k.version.as_str(), k.kind.as_str())),
    );
    let clock = std::time::Instant::now();
    let machine = machine::Service::new(machine::Start {
        streams,
        infer: grouper::enabled(&service, &kinds),
        history,
        journal: persist.as_ref().map(|_| open_intents),
        stopwatch: Box::new(move || u64::try_from(clock.elapsed().as_nanos()).unwrap_or(u64::MAX)),
        now: wall_clock(),
        settings,
    });
    let ck_namespace = if service.leader_election.lease_namespace.is_empty() {
        "default".to_string()
    } else {
        service.leader_election.lease_namespace.clone()
    };
    let shell = shell::Shell {
        client: client.clone(),
        conn: conn.clone(),
        events: events.clone(),
        writer,
        journal,
        persist,
        metrics: metrics.clone(),
        streams,
        kinds,
        concurrency: service.bind_concurrency,
        checkpoint_at: (ck_namespace, service.store.checkpoint_name.clone()),
        checkpoint_task: None,
        view: None,
    };
    (shell, machine, events_task)
}

/// One watcher per served kind, all on one channel (stream `i` is
/// `kinds[i]`).
fn start_watchers(
    client: &Client,
    kinds: &[kube::core::ApiResource],
) -> (mpsc::Receiver<WorldEvent>, Vec<tokio::task::JoinHandle<()>>) {
    let (tx, rx) = mpsc::channel(4096);
    let watchers = kinds
        .iter()
        .enumerate()
        .map(|(i, ar)| tokio::spawn(watch::run(client.clone(), ar.clone(), i, tx.clone())))
        .collect();
    (rx, watchers)
}

/// `/metrics`, `/healthz`, `/readyz` and `/usage` on `httpAddress` (none
/// when it is empty).
async fn start_http(
    service: &ServiceSettings,
    health: &std::sync::Arc<http::Health>,
    metrics: &std::sync::Arc<metrics::Metrics>,
    usage_source: &http::UsageSource,
) -> Result<Option<tokio::task::JoinHandle<()>>, ServeError> {
    if service.http_address.is_empty() {
        return Ok(None);
    }
    let listener = http::bind(&service.http_address)
        .await
        .map_err(|error| ServeError::Http {
            address: service.http_address.clone(),
            error,
        })?;
    tracing::info!(address = %service.http_address, "serving /metrics, /healthz, /readyz, /usage");
    Ok(Some(tokio::spawn(http::serve(
        listener,
        health.clone(),
        metrics.clone(),
        usage_source.clone(),
    ))))
}

/// Leader election: the fence (open only while this replica holds the
/// Lease; without election, open for good), the elector's task, the role
/// it publishes and the switch that stops it.
fn start_election(
    client: &Client,
    le: &settings::LeaderElection,
) -> (
    std::sync::Arc<conn::Fence>,
    Option<tokio::task::JoinHandle<()>>,
    signal::Receiver<leader::Role>,
    signal::Sender<bool>,
) {
    let (role_tx, role) = signal::channel(leader::Role::Unknown);
    let (stop, stop_rx) = signal::channel(false);
    if !le.enabled {
        tracing::warn!(
            "leader election off (service.leaderElection.enabled: false): run one replica only"
        );
        role_tx.send_replace(leader::Role::Leader);
        return (std::sync::Arc::new(conn::Fence::open()), None, role, stop);
    }
    let fence = std::sync::Arc::new(conn::Fence::closed());
    tracing::info!(identity = %le.identity, lease = %format!("{}/{}", le.lease_namespace, le.lease_name), "leader election on");
    let task = tokio::spawn(leader::run(
        client.clone(),
        le.clone(),
        le.identity.clone(),
        fence.clone(),
        role_tx,
        stop_rx,
    ));
    (fence, Some(task), role, stop)
}

/// Stopping: what was handed to the writer gets until `deadline` to land;
/// only the journal's closes among the machine's answers are carried out.
async fn drain_writes(
    shell: &mut shell::Shell,
    machine: &mut machine::Service,
    deadline: Instant,
    drain: Duration,
) {
    while shell.writer.in_flight() > 0 {
        match tokio::time::timeout_at(deadline, shell.writer.outcome()).await {
            Ok(Some(o)) => {
                observe_outcome(&shell.metrics, &machine.world, &o);
                let input = machine::Input::Written {
                    unit: o.unit,
                    write: o.write,
                    error: o.error,
                };
                for c in machine.handle(input, wall_clock()) {
                    if let (machine::Command::Journal(machine::JournalOp::Close(id)), Some(j)) =
                        (c, &shell.journal)
                    {
                        j.close(id);
                    }
                }
            }
            Ok(None) => break,
            Err(_) => {
                tracing::warn!(
                    abandoned = shell.writer.in_flight(),
                    "stopping: writes still in flight after {} s are abandoned",
                    drain.as_secs()
                );
                break;
            }
        }
    }
}

/// The usage history (rebuilt from the store, else fresh), the store,
/// and the bind journal's intents the last run left open.
async fn start_store(
    settings: &Settings,
    client: &Client,
    own: &reload::Own,
    metrics: &metrics::Metrics,
) -> (
    trainyard_cluster::usage::UsageHistory,
    Option<persist::Persist>,
    std::collections::BTreeMap<u64, trainyard_store::JournalRecord>,
) {
    // Usage is always tracked: the accounting (metrics, `trainyard usage`
    // on the store) needs it, and the time-decayed fair share reads its
    // decayed totals. Without `fairShare.usageHalfLifeSeconds` the core
    // ignores them and the history decays by the accounting's default
    // half-life (its window and compaction only). Rebuilt from the store
    // when there is one (docs/persistence.md).
    let hl = settings
        .scheduler
        .fair_share
        .usage_half_life_seconds
        .unwrap_or(persist::ACCOUNTING_HALF_LIFE_S);
    let fresh = || trainyard_cluster::usage::UsageHistory::new(hl);
    let store = &settings.service.store;
    if store.path.is_empty() {
        return (fresh(), None, Default::default());
    }
    match persist::Persist::start(store, hl) {
        Ok(persist::Started {
            persist: p,
            history,
            recovery,
            intents,
        }) => {
            if let trainyard_store::Recovery::Rebuilt { moved_to, reason } = &recovery {
                tracing::error!(moved_to = %moved_to.display(), "{reason}; a new store was started");
                metrics.store_rebuilt.inc();
                // Before the first cycle, once: where the operator looks
                // first (`kubectl describe pod`).
                reload::own_event(
                    client,
                    own,
                    "StoreRebuilt",
                    &format!(
                        "{reason}; moved aside to {}, a new store was started (usage history lost)",
                        moved_to.display()
                    ),
                )
                .await;
            }
            (history, Some(p), intents)
        }
        Err(e) => {
            tracing::error!("{e}; the usage history starts empty and is not kept");
            (fresh(), None, Default::default())
        }
    }
}

/// Counts one write done: binds (and their latency from the job's
/// submission), bind failures by reason, evictions by kind and outcome,
/// nominations and their withdrawals.
fn observe_outcome(metrics: &metrics::Metrics, world: &World, o: &write::Outcome) {
    use trainyard_cluster::Write;
    let reason = o.error.as_ref().map(|e| e.reason.clone());
    match (&o.write, reason) {
        (Write::Bind(b), None) => {
            metrics.binds.inc();
            if let Some(job) = world.state.job(&b.job) {
                let ms = (wall_clock().0 - job.submit_time.0).max(0);
                metrics.scheduling_latency.observe(ms as f64 / 1000.0);
            }
        }
        (Write::Bind(_), Some(reason)) => {
            metrics
                .bind_failures
                .get_or_create(&metrics::ReasonLabels { reason })
                .inc();
        }
        (Write::Evict(e), reason) => {
            let kind = match e.kind {
                trainyard_sched::decisions::EvictionKind::Reclaim => "reclaim",
                trainyard_sched::decisions::EvictionKind::Preempt => "preempt",
                trainyard_sched::decisions::EvictionKind::Consolidate => "consolidate",
            };
            let reason = reason.unwrap_or_else(|| "evicted".into());
            metrics
                .evictions
                .get_or_create(&metrics::EvictionLabels { kind, reason })
                .inc();
        }
        (Write::Nominate(_), None) => {
            metrics.nominations.inc();
        }
        (Write::Withdraw(_), None) => {
            metrics.nomination_withdrawals.inc();
        }
        (Write::Claim(_), None) => {}
        (Write::Claim(_), Some(reason)) => {
            metrics
                .bind_failures
                .get_or_create(&metrics::ReasonLabels {
                    reason: format!("claim_{reason}"),
                })
                .inc();
        }
        (w @ (Write::Nominate(_) | Write::Withdraw(_)), Some(reason)) => {
            let what = if matches!(w, Write::Nominate(_)) {
                "nomination"
            } else {
                "withdrawal"
            };
            metrics
                .bind_failures
                .get_or_create(&metrics::ReasonLabels {
                    reason: format!("{what}_{reason}"),
                })
                .inc();
        }
    }
}
