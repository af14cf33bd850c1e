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
pub mod conn;
pub mod decision_log;
pub mod events;
pub mod group_status;
pub mod grouper;
pub mod http;
pub mod infer;
pub mod journal;
pub mod leader;
pub mod metrics;
pub mod pdb;
pub mod persist;
pub mod queue_status;
pub mod reload;
pub mod repair;
pub mod report;
pub mod settings;
#[cfg(test)]
mod testkit;
pub mod walltime;
pub mod watch;
pub mod world;
pub mod write;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kube::Client;
use tokio::sync::{mpsc, watch as signal};
use tokio::time::Instant;
use trainyard_ingest::LoadOptions;
use trainyard_model::Timestamp;

pub use settings::{ServiceSettings, Settings, SettingsError};
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

/// The service could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("no cluster configuration (KUBECONFIG, ~/.kube/config or in-cluster): {0}")]
    Config(#[source] kube::config::InferConfigError),
    #[error("building the client: {0}")]
    Client(#[source] kube::Error),
    #[error("discovering the API server's kinds: {0}")]
    Discovery(#[source] kube::Error),
    #[error("serving /metrics, /healthz and /readyz on {address} (service.httpAddress): {source}")]
    Http {
        address: String,
        #[source]
        source: std::io::Error,
    },
}

/// A client from `KUBECONFIG` (or `~/.kube/config`), else the in-cluster
/// service account, without kube's default retry layer: that layer
/// retries a 429 up to 15 times with backoff, and an eviction refused by
/// a PodDisruptionBudget answers 429. For the service a refusal is a
/// reason (the next cycle decides again), not something to wait on inside
/// a cycle.
///
/// Every request is counted and timed in `metrics`
/// ([`api_metrics::ApiMetricsLayer`]).
pub async fn connect(metrics: std::sync::Arc<metrics::Metrics>) -> Result<Client, ServeError> {
    let mut config = kube::Config::infer().await.map_err(ServeError::Config)?;
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
        },
    )
    .await
}

/// Runs the service: watches, and while this replica leads, cycles and
/// writes; serves `/metrics`, `/healthz`, `/readyz`; takes reloaded
/// settings. On shutdown: no new cycle, the writes already handed over get
/// `drain` to land, then the lease is released.
pub async fn run_with(
    client: Client,
    mut settings: Settings,
    options: Options,
) -> Result<(), ServeError> {
    let Options {
        mut shutdown,
        progress,
        mut reload,
        metrics,
        drain,
        own,
    } = options;
    let kinds = watch::served_kinds(&client)
        .await
        .map_err(ServeError::Discovery)?;
    tracing::info!(
        kinds = ?kinds.iter().map(|k| format!("{}/{}", k.api_version, k.kind)).collect::<Vec<_>>(),
        "watching"
    );
    let (tx, mut rx) = mpsc::channel(4096);
    let mut watchers = Vec::new();
    for (i, ar) in kinds.iter().enumerate() {
        watchers.push(tokio::spawn(watch::run(
            client.clone(),
            ar.clone(),
            i,
            tx.clone(),
        )));
    }
    drop(tx);
    let service = settings.service.clone();
    let health = std::sync::Arc::new(http::Health::new(
        Duration::from_millis(service.cycle_period_millis.saturating_mul(10))
            .max(Duration::from_secs(30)),
    ));
    let usage_source = http::UsageSource::default();
    let http_task = if service.http_address.is_empty() {
        None
    } else {
        let listener =
            http::bind(&service.http_address)
                .await
                .map_err(|source| ServeError::Http {
                    address: service.http_address.clone(),
                    source,
                })?;
        tracing::info!(address = %service.http_address, "serving /metrics, /healthz, /readyz, /usage");
        Some(tokio::spawn(http::serve(
            listener,
            health.clone(),
            metrics.clone(),
            usage_source.clone(),
        )))
    };
    // Leader election: the fence opens only while this replica holds the
    // lease; without election it is open for good.
    let (role_tx, mut role) = signal::channel(leader::Role::Unknown);
    let (elector_stop, elector_stop_rx) = signal::channel(false);
    let le = service.leader_election.clone();
    let (fence, elector) = if le.enabled {
        let fence = std::sync::Arc::new(conn::Fence::closed());
        let identity = le.identity.clone();
        tracing::info!(identity = %identity, lease = %format!("{}/{}", le.lease_namespace, le.lease_name), "leader election on");
        let task = tokio::spawn(leader::run(
            client.clone(),
            le.clone(),
            identity,
            fence.clone(),
            role_tx,
            elector_stop_rx,
        ));
        (fence, Some(task))
    } else {
        role_tx.send_replace(leader::Role::Leader);
        (std::sync::Arc::new(conn::Fence::open()), None)
    };
    let mut leading = *role.borrow() == leader::Role::Leader;
    health.set_role(*role.borrow());
    metrics.leader.set(i64::from(leading));
    let service = &service;
    let opts = LoadOptions {
        default_queue: service.default_queue.clone(),
        scheduler_name: service.scheduler_name.clone(),
    };
    let mut world = World::new(opts).inferring(grouper::enabled(service, &kinds));
    // Usage is always tracked: the accounting (metrics, `trainyard usage`
    // on the store) needs it, and the time-decayed fair share reads its
    // decayed totals. Without `fairShare.usageHalfLifeSeconds` the core
    // ignores them and the history decays by the accounting's default
    // half-life (its window and compaction only). Rebuilt from the store
    // when there is one (docs/persistence.md).
    let mut persist = None;
    // The bind journal's intents left open by the last run: resolved at
    // the first cycle as leader ([`journal`]).
    let mut open_intents = std::collections::BTreeMap::new();
    {
        let hl = settings
            .scheduler
            .fair_share
            .usage_half_life_seconds
            .unwrap_or(persist::ACCOUNTING_HALF_LIFE_S);
        let fresh = || trainyard_cluster::usage::UsageHistory::new(hl);
        let history = if service.store.path.is_empty() {
            fresh()
        } else {
            match persist::Persist::start(&service.store, hl) {
                Ok(persist::Started {
                    persist: p,
                    history,
                    recovery,
                    intents,
                }) => {
                    open_intents = intents;
                    if let trainyard_store::Recovery::Rebuilt { moved_to, reason } = &recovery {
                        tracing::error!(moved_to = %moved_to.display(), "{reason}; a new store was started");
                        metrics.store_rebuilt.inc();
                        // Before the first cycle, once: where the operator
                        // looks first (`kubectl describe pod`).
                        reload::own_event(
                            &client,
                            &own,
                            "StoreRebuilt",
                            &format!(
                                "{reason}; moved aside to {}, a new store was started (usage history lost)",
                                moved_to.display()
                            ),
                        )
                        .await;
                    }
                    let _ = usage_source.set(p.reports());
                    persist = Some(p);
                    history
                }
                Err(e) => {
                    tracing::error!("{e}; the usage history starts empty and is not kept");
                    fresh()
                }
            }
        };
        world.state.track_usage(history);
    }
    // How far this replica's own history reached when it started: a
    // checkpoint newer than that is resumed from when it leads (what it
    // recorded since, as a standby, lacks the time before it started).
    let history_known_at_start = world.state.usage_history().and_then(|h| h.known_until_s());
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
    let journal = persist
        .as_ref()
        .map(|p| p.journal(open_intents.keys().next_back().copied().unwrap_or(0)));
    let mut writer = write::Writer::spawn(
        conn.clone(),
        events.clone(),
        service.bind_concurrency,
        service.nominate_before_bind,
        journal.clone(),
    );
    let mut period = Duration::from_millis(service.cycle_period_millis);
    let mut debounce = Duration::from_millis(service.debounce_millis);
    let mut timeout_ms =
        i64::try_from(service.assume_timeout_seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
    let mut live = service.clone();
    let mut next = Instant::now() + period;
    let mut done = Progress {
        leader: leading,
        ..Progress::default()
    };
    progress.send_replace(done);
    let mut reporter = report::Reporter::default();
    let mut decision_log = decision_log::DecisionLog::default();
    let mut queue_statuses = queue_status::StatusCache::default();
    let mut repair = repair::Repair::default();
    let mut expiry = walltime::Expiry::default();
    let mut grouper = grouper::Grouper::new(service, &kinds);
    // Trainyard's own Queues get status; the peers' kinds are theirs.
    let queue_stream = kinds
        .iter()
        .position(|k| k.group == "trainyard.io" && k.kind == "Queue");
    let group_stream = kinds
        .iter()
        .position(|k| k.group == "trainyard.io" && k.kind == "PodGroup");
    let pod_stream = kinds
        .iter()
        .position(|k| k.group.is_empty() && k.kind == "Pod");
    let mut group_pods = group_status::GroupPods::default();
    let mut gated = admission::GatedPods::default();
    let pdb_stream = kinds
        .iter()
        .position(|k| k.group == "policy" && k.kind == "PodDisruptionBudget");
    let mut pdbs = pdb::Pdbs::default();
    let mut group_statuses = queue_status::StatusCache::default();
    // The checkpoint: read once on becoming leader, written every
    // `checkpointSeconds` while leading ([`checkpoint`]).
    let mut resumed = false;
    let mut last_checkpoint: Option<Timestamp> = None;
    let mut checkpoint_task: Option<tokio::task::JoinHandle<Result<(), String>>> = None;
    let ck_namespace = if service.leader_election.lease_namespace.is_empty() {
        "default".to_string()
    } else {
        service.leader_election.lease_namespace.clone()
    };
    loop {
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
                let was = leading;
                leading = now_role == leader::Role::Leader;
                metrics.leader.set(i64::from(leading));
                done.leader = leading;
                if was && !leading {
                    metrics.clear_cycle_gauges();
                    resumed = false;
                    last_checkpoint = None;
                    // A follower writes no checkpoint (the fence would
                    // refuse it anyway).
                    if let Some(task) = checkpoint_task.take() {
                        task.abort();
                    }
                    // A standby cannot tell the leader's evictions from
                    // runs that ended: it measures again when it leads.
                    world.state.track_runtimes(None);
                    done.runtimes = world.state.runtimes_kept() as u64;
                }
                progress.send_replace(done);
                if leading && !was {
                    // What this replica remembers writing may have been
                    // changed by another leader since: write it all again.
                    reporter = report::Reporter::default();
                    queue_statuses = queue_status::StatusCache::default();
                    group_statuses = queue_status::StatusCache::default();
                    repair = repair::Repair::default();
                    expiry = walltime::Expiry::default();
                    next = Instant::now();
                }
            }
            Some(new) = async {
                match reload.as_mut() {
                    Some(r) => r.changed().await.ok().map(|()| r.borrow_and_update().clone()),
                    None => std::future::pending().await,
                }
            } => {
                // What the environment filled in at start (identity, lease
                // namespace) stays, unless the file now names them.
                let mut new = new;
                let (le, was) = (&mut new.service.leader_election, &live.leader_election);
                if le.identity.is_empty() {
                    le.identity = was.identity.clone();
                }
                if le.lease_namespace.is_empty() {
                    le.lease_namespace = was.lease_namespace.clone();
                }
                for field in reload::needs_restart(&live, &new.service) {
                    tracing::warn!("reloaded settings: service.{field} changed; it takes effect at the next start");
                }
                settings.scheduler = new.scheduler;
                live = reload::apply(&live, &new.service);
                period = Duration::from_millis(live.cycle_period_millis);
                debounce = Duration::from_millis(live.debounce_millis);
                timeout_ms = i64::try_from(live.assume_timeout_seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
                next = Instant::now() + debounce;
                tracing::info!("settings reloaded");
            }
            event = rx.recv() => match event {
                Some(e) => {
                    if let Some(p) = pod_stream {
                        match &e {
                            WorldEvent::ListStart { stream } if *stream == p => {
                                group_pods.list_start();
                                gated.list_start();
                            }
                            WorldEvent::ListDone { stream } if *stream == p => {
                                group_pods.list_done();
                                gated.list_done();
                            }
                            WorldEvent::Applied { stream, object } if *stream == p => {
                                group_pods.applied(object);
                                gated.applied(object, &service.scheduler_name);
                            }
                            WorldEvent::Deleted { stream, object } if *stream == p => {
                                group_pods.deleted(object);
                                gated.deleted(object);
                            }
                            _ => {}
                        }
                    }
                    if let Some(p) = pdb_stream {
                        match &e {
                            WorldEvent::ListStart { stream } if *stream == p => pdbs.list_start(),
                            WorldEvent::ListDone { stream } if *stream == p => pdbs.list_done(),
                            WorldEvent::Applied { stream, object } if *stream == p => pdbs.applied(object),
                            WorldEvent::Deleted { stream, object } if *stream == p => pdbs.deleted(object),
                            _ => {}
                        }
                    }
                    if world.handle(e) {
                        next = next.min(Instant::now() + debounce);
                    }
                }
                None => break,
            },
            Some(o) = writer.outcome() => {
                observe_outcome(&metrics, &world, &o);
                match (&o.write, &o.error) {
                    (_, Some(_)) => {
                        // The world will not show it: decide again, soon.
                        world.state.forget_write(&o.write);
                        done.written.failed += 1;
                        next = next.min(Instant::now() + debounce);
                    }
                    (trainyard_cluster::Write::Bind(_), None) => done.written.binds += 1,
                    (trainyard_cluster::Write::Evict(_), None) => done.written.evictions += 1,
                    (trainyard_cluster::Write::Nominate(_), None) => done.written.nominations += 1,
                    (trainyard_cluster::Write::Withdraw(_), None) => done.written.withdrawals += 1,
                }
                metrics.writes_in_flight.set(writer.in_flight() as i64);
                done.events = events.counts();
                progress.send_replace(done);
            }
            () = tokio::time::sleep_until(next) => {
                health.beat();
                let synced = world.synced(kinds.len());
                health.set_synced(synced);
                if synced && leading {
                    let started = Instant::now();
                    let now = wall_clock();
                    let first_cycle = !resumed;
                    if !resumed {
                        resumed = true;
                        if live.store.checkpoint_seconds > 0 {
                            done.resumed = checkpoint::resume((&client, &ck_namespace, &live.store.checkpoint_name), &mut world, journal.as_ref(), &mut open_intents, history_known_at_start, settings.scheduler.reservations.estimate().map(|e| e.samples)).await;
                        }
                    }
                    if let Some(j) = &journal
                        && !open_intents.is_empty()
                    {
                        let intents = std::mem::take(&mut open_intents);
                        done.recovered = journal::recover(intents, &mut world.state, &mut writer, j, (&conn, &events), now).await;
                        metrics.writes_in_flight.set(writer.in_flight() as i64);
                    }
                    let grouped = grouper.cycle(&conn, &events, &world, now).await;
                    done.groups_created += grouped.created;
                    done.written.failed += grouped.failed;
                    done.reports += grouped.told;
                    // Unconfirmed assumptions are forgotten after the
                    // timeout, counted from the writes that are still queued
                    // or in flight (theirs are not yet due).
                    let due = Timestamp(now.0.saturating_sub(timeout_ms));
                    let due = writer.oldest_in_flight().map_or(due, |t| due.min(t));
                    world.state.forget_assumed(due);
                    // Jobs a PodDisruptionBudget protects now are no victims.
                    let t = Instant::now();
                    // Usage held since the last cycle (this cycle's binds
                    // count from the next), into the snapshot; buckets that
                    // closed go to the store's thread.
                    // The decayed totals only when the core reads them,
                    // recomputed after the cycle when due (but in the first
                    // cycle as leader, which has none yet).
                    world.state.publish_usage(settings.scheduler.fair_share.usage_half_life_seconds.is_some());
                    // Observed runtimes for the reservations' estimate (as the settings say now).
                    world.state.track_runtimes(settings.scheduler.reservations.estimate().map(|e| e.samples));
                    record_usage(&mut world, persist.as_ref(), Some(&metrics), now, &mut done);
                    if first_cycle {
                        world.state.recalc_usage(now);
                    }
                    let (snapshot, protected) = pdbs.protect(world.state.snapshot());
                    done.protected = protected.len() as u64;
                    phase(&metrics, "snapshot", t);
                    let t = Instant::now();
                    let decisions = trainyard_sched::schedule(&snapshot, &settings.scheduler, now);
                    phase(&metrics, "schedule", t);
                    let t = Instant::now();
                    world.state.assume(&decisions, now);
                    let reasons = reporter.changes(&snapshot, &decisions);
                    let writes = world.state.take_writes();
                    let queued = writes.len();
                    writer.send(now, writes);
                    metrics.writes_in_flight.set(writer.in_flight() as i64);
                    phase(&metrics, "assume", t);
                    let t = Instant::now();
                    decision_log.log(&snapshot, &decisions);
                    let at = report::rfc3339(now);
                    // Pods of each group by place, once per cycle (repair, PodGroup status).
                    let counts = group_pods.counts();
                    let finishing = |id: &str| counts.get(id).is_some_and(|c| c.succeeded + c.failed > 0);
                    for e in repair.check(&snapshot, now, live.gang_repair_seconds, live.assume_timeout_seconds, finishing) {
                        if evict_by_rule(&conn, &events, &metrics, ("incomplete_gang", "IncompleteGang"), &e, &at).await {
                            // A broken run is no observed runtime.
                            world.state.mark_evicted(&e.job);
                            done.repairs += 1;
                        } else {
                            done.written.failed += 1;
                        }
                    }
                    if live.enforce_walltime {
                        for e in expiry.check(&snapshot, now, live.assume_timeout_seconds) {
                            if evict_by_rule(&conn, &events, &metrics, ("walltime", "WalltimeExceeded"), &e, &at).await {
                                // Cut at its walltime: no observed runtime.
                                world.state.mark_evicted(&e.job);
                                done.walltime_evictions += 1;
                            } else {
                                done.written.failed += 1;
                            }
                        }
                    } else {
                        for n in expiry.notices(&snapshot, now) {
                            events.record(events::Record {
                                task: n.task,
                                type_: "Warning",
                                reason: "WalltimePassed",
                                message: n.message,
                                at: at.clone(),
                            });
                            done.walltime_notices += 1;
                        }
                    }
                    done.cycles += 1;
                    done.reports += reasons.len() as u64;
                    done.written.failed +=
                        report::write(&conn, &events, reasons, now, live.bind_concurrency).await;
                    if let Some(stream) = queue_stream {
                        let all = queue_status::statuses(&snapshot, &decisions);
                        let changes = queue_statuses
                            .changes(all, &at, |name| world.holds(stream, "Queue", "", name));
                        done.queue_statuses += changes.len() as u64;
                        let ar = &kinds[stream];
                        for name in write::statuses(&conn, ar, changes, service.bind_concurrency).await {
                            queue_statuses.forget(&name);
                            done.written.failed += 1;
                        }
                    }
                    if let Some(stream) = group_stream {
                        let all = group_status::statuses(&snapshot, &decisions, &counts);
                        let changes = group_statuses.changes(all, &at, |key| {
                            key.split_once('/').is_some_and(|(ns, name)| world.holds(stream, "PodGroup", ns, name))
                        });
                        done.group_statuses += changes.len() as u64;
                        let ar = &kinds[stream];
                        for key in write::statuses(&conn, ar, changes, service.bind_concurrency).await {
                            group_statuses.forget(&key);
                            done.written.failed += 1;
                        }
                    }
                    if live.admission_gating {
                        for (job, pods) in admission::admit(&snapshot, &decisions, &gated) {
                            tracing::info!("admitting {job}: its queue has room");
                            for (ns, name) in pods {
                                let Some(g) = gated.pods.remove(&(ns.clone(), name.clone())) else {
                                    continue;
                                };
                                match admission::ungate(&conn, &ns, &name, &g).await {
                                    Ok(()) => done.admitted += 1,
                                    Err(e) => {
                                        tracing::warn!("ungate {ns}/{name}: {e}");
                                        done.written.failed += 1;
                                        // Tried again next cycle (a watch event
                                        // with other gates replaces it).
                                        gated.pods.insert((ns, name), g);
                                    }
                                }
                            }
                        }
                    }
                    phase(&metrics, "write", t);
                    phase(&metrics, "total", started);
                    // After the cycle: what costs every queue rather than
                    // what changed. The decayed totals (for the next cycle)
                    // when due, and the checkpoint, written by a task of
                    // its own (one at a time; the next waits its turn).
                    world.state.recalc_usage(now);
                    if let Some(task) = checkpoint_task.take_if(|t| t.is_finished()) {
                        match task.await {
                            Ok(Ok(())) => done.checkpoints += 1,
                            Ok(Err(e)) => tracing::warn!("checkpoint not written: {e}"),
                            Err(e) => tracing::warn!("checkpoint task failed: {e}"),
                        }
                    }
                    let every_ms = i64::try_from(live.store.checkpoint_seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
                    let due = every_ms > 0 && checkpoint_task.is_none() && last_checkpoint.is_none_or(|t| now.0 - t.0 >= every_ms);
                    // Read before the usage history is borrowed; only the
                    // leaf queues that still exist (a deleted queue's
                    // would be carried from leader to leader).
                    let mut runtimes = if due { world.state.runtimes_recent().unwrap_or_default() } else { Default::default() };
                    runtimes.retain(|q, _| snapshot.queues.get(q).is_some_and(|id| snapshot.queues.is_leaf(id)));
                    if due
                        && let Some(h) = world.state.usage_history()
                    {
                        let intents = journal.as_ref().map(|j| j.open_intents()).unwrap_or_default();
                        let ck = checkpoint::Checkpoint::take(h, now, &intents, runtimes);
                        let (conn, namespace, name) = (conn.clone(), ck_namespace.clone(), live.store.checkpoint_name.clone());
                        checkpoint_task = Some(tokio::spawn(async move {
                            checkpoint::write(&conn, &namespace, &name, &ck).await
                        }));
                        // Tried again one interval later, not every cycle.
                        last_checkpoint = Some(now);
                    }
                    metrics.cycles.inc();
                    metrics.observe_cycle(&snapshot, &decisions, now);
                    let ev = events.counts();
                    metrics.events_dropped.inc_by(ev.dropped.saturating_sub(done.events.dropped));
                    done.pending = decisions.pending.len() as u64;
                    done.events = ev;
                    if queued > 0 {
                        tracing::info!(writes = queued, in_flight = writer.in_flight(), pending = done.pending, "cycle {}", done.cycles);
                    }
                    progress.send_replace(done);
                } else if synced {
                    // A standby records usage too, from the bound pods it
                    // watches: its store's accounting (buckets, job
                    // records) has no hole when it takes over. Metrics stay
                    // the leader's (a sum over replicas would count twice).
                    record_usage(&mut world, persist.as_ref(), None, wall_clock(), &mut done);
                    progress.send_replace(done);
                }
                next = Instant::now() + period;
            }
        }
    }
    // Stopping: no new cycle; what was handed to the writer gets `drain`
    // to land; then the lease is released (after the last write, so no
    // other replica writes while this one still does).
    let deadline = Instant::now() + drain;
    while writer.in_flight() > 0 {
        match tokio::time::timeout_at(deadline, writer.outcome()).await {
            Ok(Some(o)) => observe_outcome(&metrics, &world, &o),
            Ok(None) => break,
            Err(_) => {
                tracing::warn!(
                    abandoned = writer.in_flight(),
                    "stopping: writes still in flight after {} s are abandoned",
                    drain.as_secs()
                );
                break;
            }
        }
    }
    // A checkpoint on its way lands within the same deadline.
    if let Some(task) = checkpoint_task
        && tokio::time::timeout_at(deadline, task).await.is_err()
    {
        tracing::warn!("stopping: the checkpoint still being written is abandoned");
    }
    // Gone before the store's thread is joined: it holds the journal's
    // sender (intents of writes abandoned above stay open for the next
    // start).
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

/// Evicts a pod a rule of the service chose ([`repair`], [`walltime`])
/// with its Event (`kind.1`), counted in `trainyard_evictions_total` under
/// `kind.0`; whether it was evicted.
async fn evict_by_rule(
    conn: &conn::Conn,
    events: &events::EventSink,
    metrics: &metrics::Metrics,
    (kind, reason): (&'static str, &'static str),
    e: &repair::RepairEviction,
    at: &str,
) -> bool {
    let result = write::evict_with_event(conn, events, &e.task, reason, &e.message, at).await;
    let outcome = match &result {
        Ok(()) => "evicted".to_string(),
        Err(err) => metrics::reason_of(err),
    };
    metrics
        .evictions
        .get_or_create(&metrics::EvictionLabels {
            kind,
            reason: outcome,
        })
        .inc();
    if let Err(err) = &result {
        tracing::warn!("evict {} of {} ({reason}): {err}", e.task, e.job);
    }
    result.is_ok()
}

/// Tells the usage history what the jobs that changed hold at `now`; the
/// buckets that closed go to the store (and, for the leader, to the
/// `metrics`), the finished jobs' records to the store.
fn record_usage(
    world: &mut World,
    persist: Option<&persist::Persist>,
    metrics: Option<&metrics::Metrics>,
    now: Timestamp,
    done: &mut Progress,
) {
    world.state.record_usage(now);
    done.usage_samples += 1;
    if let Some(h) = world.state.usage_history() {
        let closed = h.take_closed();
        if let Some(m) = metrics {
            m.record_usage(&closed);
        }
        if let Some(p) = persist {
            p.closed(closed);
        }
    }
    done.runtimes = world.state.runtimes_kept() as u64;
    let finished = world.state.take_finished_jobs();
    done.accounted += finished.len() as u64;
    if let Some(p) = persist {
        p.jobs(finished);
    }
}

/// Records the duration of a cycle's phase since `since`.
fn phase(metrics: &metrics::Metrics, name: &'static str, since: Instant) {
    metrics
        .cycle_duration
        .get_or_create(&metrics::PhaseLabels { phase: name })
        .observe(since.elapsed().as_secs_f64());
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
