//! The shell's side of the machine's commands: each [`Command`] carried
//! out against the API server, the store and the metrics, and what came
//! of it handed back as [`Input`]s. Nothing here decides.

use std::sync::Arc;

use kube::Client;
use kube::core::ApiResource;
use trainyard_model::Timestamp;

use crate::machine::{Command, Input, JournalOp, Rule, Service, StatusKind};
use crate::{admission, checkpoint, conn, events, journal, metrics, persist, report, write};

/// What the shell holds to carry out commands.
pub(crate) struct Shell {
    pub client: Client,
    pub conn: Arc<conn::Conn>,
    pub events: events::EventSink,
    pub writer: write::Writer,
    pub journal: Option<journal::Journal>,
    pub persist: Option<persist::Persist>,
    pub metrics: Arc<metrics::Metrics>,
    pub kinds: Vec<ApiResource>,
    pub streams: crate::machine::Streams,
    pub concurrency: usize,
    /// Where the checkpoint lives (namespace, ConfigMap name).
    pub checkpoint_at: (String, String),
    pub checkpoint_task: Option<tokio::task::JoinHandle<Result<(), String>>>,
    /// Where each cycle is published for the API.
    pub view: Option<Arc<crate::view::LiveView>>,
}

impl Shell {
    /// Hands `input` to the machine and carries out what it asks, feeding
    /// the answers back until nothing is left.
    pub async fn drive(&mut self, machine: &mut Service, input: Input, now: Timestamp) {
        let mut inputs = vec![input];
        while let Some(input) = inputs.pop() {
            for command in machine.handle(input, now) {
                if let (Command::Observe(o), Some(view)) = (&command, &self.view) {
                    self.publish(view, o, machine);
                }
                if let Some(answer) = self.carry_out(command).await {
                    inputs.push(answer);
                }
            }
        }
        self.metrics
            .writes_in_flight
            .set(self.writer.in_flight() as i64);
    }

    async fn carry_out(&mut self, command: Command) -> Option<Input> {
        match command {
            Command::Unit(unit) => {
                self.writer.send_unit(unit);
                None
            }
            Command::Evict {
                rule,
                eviction,
                intent,
            } => {
                let ok = self.evict(rule, &eviction).await;
                Some(Input::RuleEvicted {
                    rule,
                    job: eviction.job,
                    intent,
                    ok,
                })
            }
            Command::Report { changes, now } => {
                let failed =
                    report::write(&self.conn, &self.events, changes, now, self.concurrency).await;
                Some(Input::Reported { failed })
            }
            Command::CreateQueue { name } => {
                let stream = self.streams.queue?;
                write::create_queue(&self.conn, &self.kinds[stream], &name).await;
                None
            }
            Command::Statuses { kind, changes } => {
                let stream = match kind {
                    StatusKind::Queue => self.streams.queue,
                    StatusKind::PodGroup => self.streams.group,
                    StatusKind::UpstreamPodGroup => self.streams.upstream_group,
                }?;
                let ar = &self.kinds[stream];
                let keys = write::statuses(&self.conn, ar, changes, self.concurrency).await;
                (!keys.is_empty()).then_some(Input::StatusFailed { kind, keys })
            }
            Command::Ungate { pod, gated } => {
                let failed = match admission::ungate(&self.conn, &pod.0, &pod.1, &gated).await {
                    Ok(()) => None,
                    Err(e) => {
                        tracing::warn!("ungate {}/{}: {}", pod.0, pod.1, crate::conn::plain(&e));
                        Some(gated)
                    }
                };
                Some(Input::Ungated { pod, failed })
            }
            Command::Event(record) => {
                self.events.record(record);
                None
            }
            Command::Journal(op) => {
                if let Some(j) = &self.journal {
                    match op {
                        JournalOp::Write(id, rec) => {
                            if let Err(e) = j.write(id, rec).await {
                                tracing::error!("bind journal: intent {id} not written: {e}");
                            }
                        }
                        JournalOp::Close(id) => j.close(id),
                    }
                }
                None
            }
            Command::Usage {
                closed,
                finished,
                leader,
            } => {
                self.usage(closed, finished, leader);
                None
            }
            Command::ReadCheckpoint => {
                let (ns, name) = &self.checkpoint_at;
                Some(Input::CheckpointRead(
                    checkpoint::read(&self.client, ns, name).await,
                ))
            }
            Command::WriteCheckpoint(ck) => {
                let (conn, (ns, name)) = (self.conn.clone(), self.checkpoint_at.clone());
                self.checkpoint_task = Some(tokio::spawn(async move {
                    checkpoint::write(&conn, &ns, &name, &ck).await
                }));
                None
            }
            Command::Observe(o) => {
                self.observe(&o);
                None
            }
            Command::Leading(leading) => {
                self.metrics.leader.set(i64::from(leading));
                if !leading {
                    self.metrics.clear_cycle_gauges();
                    // A follower writes no checkpoint (the fence would
                    // refuse it anyway).
                    if let Some(task) = self.checkpoint_task.take() {
                        task.abort();
                    }
                }
                None
            }
        }
    }

    /// A cycle's snapshot, decisions and config, for the API's readers.
    fn publish(
        &self,
        view: &crate::view::LiveView,
        o: &crate::machine::Observed,
        machine: &Service,
    ) {
        view.publish(crate::view::CycleView {
            number: machine.progress().cycles,
            now: o.now,
            snapshot: o.snapshot.clone(),
            decisions: Arc::clone(&o.decisions),
            config: Arc::new(machine.config().clone()),
            writes_in_flight: self.writer.in_flight(),
        });
    }

    /// Closed usage buckets and finished jobs' records to the store (and,
    /// from the leader, the buckets to the metrics).
    fn usage(
        &self,
        closed: Vec<trainyard_cluster::usage::ClosedBucket>,
        finished: Vec<trainyard_cluster::usage::JobUsage>,
        leader: bool,
    ) {
        if leader {
            self.metrics.record_usage(&closed);
        }
        if let Some(p) = &self.persist {
            p.closed(closed);
            p.jobs(finished);
        }
    }

    /// A cycle's metrics: its counts and gauges, and its phases' times.
    fn observe(&self, o: &crate::machine::Observed) {
        self.metrics.cycles.inc();
        self.metrics.observe_cycle(&o.snapshot, &o.decisions, o.now);
        self.metrics.observe_invalid_queues(&o.invalid_queues);
        for (phase, ns) in &o.phases {
            self.metrics
                .cycle_duration
                .get_or_create(&metrics::PhaseLabels { phase })
                .observe(*ns as f64 / 1e9);
        }
    }

    /// Evicts a pod a rule chose, with its Event, counted in
    /// `trainyard_evictions_total`; whether it was evicted.
    async fn evict(&self, rule: Rule, e: &crate::repair::RepairEviction) -> bool {
        let (kind, reason) = rule.labels();
        let at = report::rfc3339(crate::wall_clock());
        let result =
            write::evict_with_event(&self.conn, &self.events, &e.task, reason, &e.message, &at)
                .await;
        let outcome = match &result {
            Ok(()) => "evicted".to_string(),
            Err(err) => metrics::reason_of(err),
        };
        self.metrics
            .evictions
            .get_or_create(&metrics::EvictionLabels {
                kind,
                reason: outcome,
            })
            .inc();
        // Evictions by the service's own rules are said at the default
        // level, as the core's reclaims and preemptions are.
        match &result {
            Ok(()) => tracing::info!("evicted {} of {} ({reason}): {}", e.task, e.job, e.message),
            Err(err) => tracing::warn!(
                "evict {} of {} ({reason}): {}",
                e.task,
                e.job,
                crate::conn::plain(err)
            ),
        }
        result.is_ok()
    }
}
