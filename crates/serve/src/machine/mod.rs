//! The service's decisions as a pure state machine (sans-IO): events in,
//! commands out.
//!
//! [`Service::handle`] takes one [`Input`] (a watch event, a write's
//! outcome, a tick, a role change, reloaded settings, an answer to a
//! read it asked for) with the time, and returns the [`Command`]s to carry
//! out, in order. [`Service::wake_at`] says when it wants the next tick.
//! Every rule lives here: when to cycle, what assumptions to forget, what
//! to write and in which units, what the journal opens, closes, completes
//! or drops, what a standby may do (nothing but record usage). No clock,
//! no task, no socket, no file: the shell (`crate::run_with`) moves
//! inputs in and commands out, and the deterministic simulation
//! (`trainyard-dst`) drives the same machine against a simulated world.

mod cycle;
#[cfg(test)]
mod dra_tests;
#[cfg(test)]
mod moves_tests;
mod recover;
pub mod room;
#[cfg(test)]
mod tests;
pub mod units;
mod upstream;
#[cfg(test)]
mod upstream_tests;

use std::collections::BTreeMap;

use trainyard_cluster::Write;
use trainyard_cluster::usage::ClosedBucket;
use trainyard_model::{TaskKey, Timestamp};
use trainyard_store::JournalRecord;

use crate::admission::Gated;
use crate::leader::Role;
use crate::repair::RepairEviction;
use crate::settings::{ServiceSettings, Settings};
use crate::upstream_status::UpstreamVersion;
use crate::world::{World, WorldEvent};
use crate::{
    Progress, admission, decision_log, group_status, pdb, queue_status, repair, report, walltime,
};

pub use units::Unit;

/// Which watched stream (by index) carries which of the kinds the machine
/// reads beyond the world state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Streams {
    /// How many streams there are (no cycle before each listed once).
    pub count: usize,
    pub pod: Option<usize>,
    pub queue: Option<usize>,
    pub group: Option<usize>,
    pub pdb: Option<usize>,
    /// The upstream `scheduling.k8s.io` PodGroup and Workload, and the
    /// version they are watched in ([`crate::watch::upstream_version`]).
    pub upstream_group: Option<usize>,
    pub upstream_workload: Option<usize>,
    pub upstream: Option<UpstreamVersion>,
}

impl Streams {
    /// The streams of `kinds`, each `(group, kind)` in stream order (no
    /// upstream kinds: their version is unknown).
    pub fn of<'a>(kinds: impl IntoIterator<Item = (&'a str, &'a str)>) -> Streams {
        Streams::of_versioned(kinds.into_iter().map(|(g, k)| (g, "", k)))
    }

    /// The streams of `kinds`, each `(group, version, kind)` in stream
    /// order.
    pub fn of_versioned<'a>(
        kinds: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Streams {
        let mut s = Streams::default();
        for (i, (group, version, kind)) in kinds.into_iter().enumerate() {
            s.count = i + 1;
            let upstream = (group == crate::upstream_status::GROUP)
                .then(|| UpstreamVersion::parse(version))
                .flatten();
            match (group, kind) {
                ("", "Pod") => s.pod = Some(i),
                ("trainyard.io", "Queue") => s.queue = Some(i),
                ("trainyard.io", "PodGroup") => s.group = Some(i),
                ("policy", "PodDisruptionBudget") => s.pdb = Some(i),
                (_, "PodGroup") if upstream.is_some() => {
                    s.upstream_group = Some(i);
                    s.upstream = upstream;
                }
                (_, "Workload") if upstream.is_some() => s.upstream_workload = Some(i),
                _ => {}
            }
        }
        s
    }
}

/// Which rule asked for an eviction outside the core's decisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A gang below its minimum past `gangRepairSeconds` ([`repair`]).
    Repair,
    /// A job past its walltime, with `enforceWalltime` ([`walltime`]).
    Walltime,
    /// The journal rolls back a gang bound in part when the last run
    /// stopped.
    Journal,
}

impl Rule {
    /// The metrics' kind and the Event's reason.
    pub fn labels(self) -> (&'static str, &'static str) {
        match self {
            Rule::Repair | Rule::Journal => ("incomplete_gang", "IncompleteGang"),
            Rule::Walltime => ("walltime", "WalltimeExceeded"),
        }
    }
}

/// Trainyard's kinds whose status the machine writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusKind {
    Queue,
    PodGroup,
    /// The upstream `scheduling.k8s.io` PodGroup ([`crate::upstream_status`]).
    UpstreamPodGroup,
}

/// A change to the bind journal in the store.
#[derive(Clone, Debug, PartialEq)]
pub enum JournalOp {
    /// Commit intent `id` as `rec` durably before the next command.
    Write(u64, JournalRecord),
    /// Remove intent `id`.
    Close(u64),
}

/// Why a write failed: a short reason (as `trainyard_api_*` and the
/// metrics name it: `conflict`, `not_found`, `server_error`, `transport`,
/// `fenced`, ...) and the error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub reason: String,
    pub message: String,
    /// The write may have taken effect though it failed: no answer (a
    /// timeout, a connection lost after the request was sent) or a 504
    /// (the server gave up waiting for its store, which may still
    /// commit). Other errors are refusals.
    pub uncertain: bool,
}

impl Failure {
    /// Whether the write may have taken effect ([`Failure::uncertain`]).
    pub fn uncertain(&self) -> bool {
        self.uncertain
    }

    /// For a bind refused because the pod is bound already: the node it
    /// is bound to (kube-apiserver's `pod X is already assigned to node
    /// "Y"`).
    pub fn assigned_to(&self) -> Option<&str> {
        let rest = self
            .message
            .split("is already assigned to node \"")
            .nth(1)?;
        rest.split('"').next()
    }
}

/// What the machine is told.
#[derive(Clone, Debug)]
pub enum Input {
    /// Time passed: a cycle (or a standby's usage sample) runs when due.
    Tick,
    /// One event of a watched stream.
    Watch(WorldEvent),
    /// A write of unit `unit` is done (`error`: why it failed).
    Written {
        unit: u64,
        write: Write,
        error: Option<Failure>,
    },
    /// A rule's eviction is done (or not).
    RuleEvicted {
        rule: Rule,
        job: String,
        intent: Option<u64>,
        ok: bool,
    },
    /// Pending pods' conditions: how many writes failed.
    Reported { failed: u64 },
    /// Status writes of `kind` that failed, by key.
    StatusFailed { kind: StatusKind, keys: Vec<String> },
    /// A gated pod's gate removal: `Some(gated)` when it failed (tried
    /// again next cycle).
    Ungated {
        pod: (String, String),
        failed: Option<Gated>,
    },
    /// The groups the shell inferred and created before a cycle.
    Grouped(crate::grouper::Grouped),
    /// The answer to [`Command::ReadCheckpoint`].
    CheckpointRead(Result<Option<crate::checkpoint::Checkpoint>, String>),
    /// The answer to [`Command::WriteCheckpoint`].
    CheckpointWritten(Result<(), String>),
    /// The elector's view changed.
    Role(Role),
    /// The settings file was read again.
    Reload(Box<Settings>),
}

/// A cycle's results, for the metrics.
#[derive(Clone, Debug)]
pub struct Observed {
    pub snapshot: std::sync::Arc<trainyard_model::Snapshot>,
    /// Shared with the API's view (`crate::view`) without a copy.
    pub decisions: std::sync::Arc<trainyard_sched::Decisions>,
    pub now: Timestamp,
    /// Phases of the cycle and their durations by the machine's
    /// stopwatch, in nanoseconds.
    pub phases: Vec<(&'static str, u64)>,
    /// Queues left out of the tree, with the reason.
    pub invalid_queues: BTreeMap<String, String>,
}

/// What the machine asks the shell to do, in order.
#[derive(Clone, Debug)]
pub enum Command {
    /// Write a unit (the writer: binds, evictions, nominations).
    Unit(Unit),
    /// Evict a pod a rule chose, with its Event.
    Evict {
        rule: Rule,
        eviction: RepairEviction,
        intent: Option<u64>,
    },
    /// Write each pending pod's `PodScheduled=False` condition and its
    /// `FailedScheduling` Event.
    Report {
        changes: Vec<(TaskKey, String)>,
        now: Timestamp,
    },
    /// Create Trainyard's Queue of this name (the default queue), with
    /// no quota and no limit.
    CreateQueue { name: String },
    /// Write these statuses (merge patch of the status subresource).
    Statuses {
        kind: StatusKind,
        changes: Vec<(String, serde_json::Value)>,
    },
    /// Remove a pod's admission gate.
    Ungate { pod: (String, String), gated: Gated },
    /// Record an Event.
    Event(crate::events::Record),
    /// Change the bind journal.
    Journal(JournalOp),
    /// Closed usage buckets and finished jobs' records, for the store (and,
    /// `leader`, the metrics).
    Usage {
        closed: Vec<ClosedBucket>,
        finished: Vec<trainyard_cluster::usage::JobUsage>,
        leader: bool,
    },
    /// Read the checkpoint; answer with [`Input::CheckpointRead`].
    ReadCheckpoint,
    /// Write the checkpoint; answer with [`Input::CheckpointWritten`].
    WriteCheckpoint(Box<crate::checkpoint::Checkpoint>),
    /// A cycle ran: its results, for the metrics.
    Observe(Box<Observed>),
    /// This replica leads now, or no longer.
    Leading(bool),
}

/// Nanoseconds by some monotonic clock, for phase durations only (the
/// simulation's returns 0).
pub type Stopwatch = Box<dyn FnMut() -> u64 + Send>;

/// The service's state: the world and everything it remembers across
/// cycles.
pub struct Service {
    pub world: World,
    settings: Settings,
    /// The service settings as reloaded (what applies live).
    live: ServiceSettings,
    streams: Streams,
    leading: bool,
    /// The checkpoint was read (or asked) since this replica leads.
    resumed: bool,
    /// The first cycle as leader has not run yet.
    fresh: bool,
    /// A checkpoint read was asked and not answered.
    reading_checkpoint: bool,
    /// How far this replica's history reached when it started.
    history_known_at_start: Option<i64>,
    /// The journal's intents the last run left open, resolved at the first
    /// cycle as leader.
    open_intents: BTreeMap<u64, JournalRecord>,
    units: units::Units,
    /// Intents being rolled back: evictions left, all done so far.
    rollbacks: BTreeMap<u64, (usize, bool)>,
    next_cycle: Timestamp,
    last_checkpoint: Option<Timestamp>,
    checkpoint_busy: bool,
    /// Moves decided since the last checkpoint was written.
    moves_unsaved: bool,
    reporter: report::Reporter,
    decision_log: decision_log::DecisionLog,
    queue_statuses: queue_status::StatusCache,
    group_statuses: queue_status::StatusCache,
    repair: repair::Repair,
    expiry: walltime::Expiry,
    group_pods: group_status::GroupPods,
    /// Trainyard's last eviction of each group's pods (what its status
    /// says took them once they are gone).
    evicted: BTreeMap<String, group_status::Evicted>,
    /// The upstream PodGroups, their pods, the conditions written and
    /// Trainyard's evictions of them ([`crate::upstream_status`]).
    upstream: crate::upstream_status::Upstream,
    /// Queues left out of the tree, with the reason (as last logged).
    invalid_queues: BTreeMap<String, String>,
    /// Whether this term as leader has asked for the default queue.
    default_queue_asked: bool,
    gated: admission::GatedPods,
    pdbs: pdb::Pdbs,
    /// Consolidation's moves still waiting for their replacement pods.
    moves: trainyard_cluster::Moves,
    stopwatch: Stopwatch,
    done: Progress,
}

/// How a [`Service`] starts.
pub struct Start {
    pub settings: Settings,
    pub streams: Streams,
    /// Whether pods wait for groups inferred from their owners.
    pub infer: bool,
    /// The usage history (rebuilt from the store, or fresh).
    pub history: trainyard_cluster::usage::UsageHistory,
    /// The journal's intents left open by the last run (`None`: no store,
    /// no journal).
    pub journal: Option<BTreeMap<u64, JournalRecord>>,
    pub stopwatch: Stopwatch,
    /// When the first cycle may run.
    pub now: Timestamp,
}

impl Service {
    pub fn new(start: Start) -> Service {
        let Start {
            settings,
            streams,
            infer,
            history,
            journal,
            stopwatch,
            now,
        } = start;
        let service = &settings.service;
        let opts = trainyard_ingest::LoadOptions {
            default_queue: service.default_queue.clone(),
            scheduler_name: service.scheduler_name.clone(),
            // The allocation is written into the claim: a pod waits until
            // the claim controller made the claims of its templates.
            planned_claims: false,
            // DeviceClasses' `extendedResourceName` serve their resource
            // from DRA devices (KEP-5004): the service creates the claim
            // of such a pod before its bind (`crate::extended`).
            extended_resources: true,
        };
        let mut world = World::new(opts).inferring(infer);
        world.state.track_usage(history);
        let history_known_at_start = world.state.usage_history().and_then(|h| h.known_until_s());
        let last = journal
            .as_ref()
            .and_then(|j| j.keys().next_back().copied())
            .unwrap_or(0);
        let elected = service.leader_election.enabled;
        Service {
            world,
            live: service.clone(),
            streams,
            leading: !elected,
            resumed: false,
            fresh: true,
            reading_checkpoint: false,
            history_known_at_start,
            units: units::Units::new(journal.is_some(), last),
            open_intents: journal.unwrap_or_default(),
            rollbacks: BTreeMap::new(),
            next_cycle: Timestamp(now.0.saturating_add(period_ms(service))),
            last_checkpoint: None,
            checkpoint_busy: false,
            moves_unsaved: false,
            reporter: report::Reporter::default(),
            decision_log: decision_log::DecisionLog::default(),
            queue_statuses: queue_status::StatusCache::default(),
            group_statuses: queue_status::StatusCache::default(),
            repair: repair::Repair::default(),
            expiry: walltime::Expiry::default(),
            group_pods: group_status::GroupPods::default(),
            evicted: BTreeMap::new(),
            upstream: crate::upstream_status::Upstream::default(),
            invalid_queues: BTreeMap::new(),
            default_queue_asked: false,
            gated: admission::GatedPods::default(),
            pdbs: pdb::Pdbs::default(),
            moves: trainyard_cluster::Moves::default(),
            stopwatch,
            done: Progress {
                leader: !elected,
                ..Progress::default()
            },
            settings,
        }
    }

    /// What the machine has done so far.
    pub fn progress(&self) -> Progress {
        self.done
    }

    /// The scheduler configuration in force (as last reloaded).
    pub fn config(&self) -> &trainyard_sched::Config {
        &self.settings.scheduler
    }

    /// Whether this replica leads.
    pub fn leading(&self) -> bool {
        self.leading
    }

    /// The journal's intents open now (for the checkpoint and tests).
    pub fn open_intents(&self) -> Vec<JournalRecord> {
        self.units.intents.values().cloned().collect()
    }

    /// When the machine wants the next [`Input::Tick`].
    pub fn wake_at(&self) -> Timestamp {
        self.next_cycle
    }

    /// Whether a tick at `now` would run a leader's cycle (the shell runs
    /// the group inference first, [`crate::grouper`]).
    pub fn cycle_due(&self, now: Timestamp) -> bool {
        now >= self.next_cycle && self.leading && self.synced() && !self.reading_checkpoint
    }

    fn synced(&self) -> bool {
        self.world.synced(self.streams.count)
    }

    /// Asks for a cycle within the debounce period.
    fn soon(&mut self, now: Timestamp) {
        let at = Timestamp(now.0.saturating_add(ms(self.live.debounce_millis)));
        self.next_cycle = self.next_cycle.min(at);
    }

    /// Handles one input at `now`; the commands to carry out, in order.
    pub fn handle(&mut self, input: Input, now: Timestamp) -> Vec<Command> {
        // A clock that jumped back would put the next cycle far away.
        let cap = Timestamp(now.0.saturating_add(period_ms(&self.live)));
        self.next_cycle = self.next_cycle.min(cap);
        let mut out = Vec::new();
        match input {
            Input::Tick => self.tick(now, &mut out),
            Input::Watch(e) => self.watch(e, now),
            Input::Written { unit, write, error } => {
                self.written(unit, &write, error, now, &mut out)
            }
            Input::RuleEvicted {
                rule,
                job,
                intent,
                ok,
            } => self.rule_evicted(rule, &job, intent, ok, &mut out),
            Input::Reported { failed } => self.done.written.failed += failed,
            Input::StatusFailed { kind, keys } => {
                for k in &keys {
                    match kind {
                        StatusKind::Queue => self.queue_statuses.forget(k),
                        StatusKind::PodGroup => self.group_statuses.forget(k),
                        StatusKind::UpstreamPodGroup => self.upstream.cache.forget(k),
                    }
                }
                self.done.written.failed += keys.len() as u64;
            }
            Input::Ungated { pod, failed } => match failed {
                None => self.done.admitted += 1,
                Some(g) => {
                    self.done.written.failed += 1;
                    self.gated.pods.insert(pod, g);
                }
            },
            Input::Grouped(g) => {
                self.done.groups_created += g.created;
                self.done.written.failed += g.failed;
                self.done.reports += g.told;
            }
            Input::CheckpointRead(ck) => {
                self.reading_checkpoint = false;
                self.resume(ck, &mut out);
                self.next_cycle = now;
            }
            Input::CheckpointWritten(r) => {
                self.checkpoint_busy = false;
                match r {
                    Ok(()) => self.done.checkpoints += 1,
                    Err(e) => tracing::warn!("checkpoint not written: {e}"),
                }
            }
            Input::Role(role) => self.role(role, now, &mut out),
            Input::Reload(s) => self.reload(*s, now),
        }
        out
    }

    fn watch(&mut self, e: WorldEvent, now: Timestamp) {
        if let Some(p) = self.streams.pod {
            match &e {
                WorldEvent::ListStart { stream } if *stream == p => {
                    self.group_pods.list_start();
                    self.gated.list_start();
                }
                WorldEvent::ListDone { stream } if *stream == p => {
                    self.group_pods.list_done();
                    self.gated.list_done();
                }
                WorldEvent::Applied { stream, object } if *stream == p => {
                    self.group_pods.applied(object);
                    self.gated.applied(object, &self.live.scheduler_name);
                }
                WorldEvent::Deleted { stream, object } if *stream == p => {
                    self.group_pods.deleted(object);
                    self.gated.deleted(object);
                }
                _ => {}
            }
        }
        if let Some(p) = self.streams.pdb {
            match &e {
                WorldEvent::ListStart { stream } if *stream == p => self.pdbs.list_start(),
                WorldEvent::ListDone { stream } if *stream == p => self.pdbs.list_done(),
                WorldEvent::Applied { stream, object } if *stream == p => self.pdbs.applied(object),
                WorldEvent::Deleted { stream, object } if *stream == p => self.pdbs.deleted(object),
                _ => {}
            }
        }
        self.watch_upstream(&e);
        if self.world.handle(e) {
            self.soon(now);
        }
    }

    fn written(
        &mut self,
        unit: u64,
        write: &Write,
        error: Option<Failure>,
        now: Timestamp,
        out: &mut Vec<Command>,
    ) {
        let landed = match (&error, write) {
            (None, _) => true,
            // Our own bind, landed before (its answer was lost, and this
            // is a retry): it holds the node it names.
            (Some(f), Write::Bind(b)) => f.assigned_to() == Some(b.node.as_str()),
            _ => false,
        };
        if landed {
            // Accepted by the API: assumed until the watch shows it or the
            // pod is gone, whatever its age (kube-scheduler does not expire
            // an assumed pod whose binding finished).
            self.world.state.write_landed(write);
        }
        match (write, &error) {
            (_, Some(f)) if landed || f.uncertain() => {
                // It may have taken effect: kept as assumed (from now, so
                // the watch has the assume timeout to show it), never
                // handed to another pod on the strength of a lost answer.
                if !landed {
                    self.world.state.write_uncertain(write, now);
                }
                self.done.written.failed += 1;
            }
            (_, Some(_)) => {
                // Refused: the world will not show it; decide again, soon.
                self.world.state.forget_write(write);
                self.done.written.failed += 1;
                self.soon(now);
            }
            (Write::Bind(_), None) => self.done.written.binds += 1,
            (Write::Evict(_), None) => self.done.written.evictions += 1,
            (Write::Nominate(_), None) => self.done.written.nominations += 1,
            (Write::Withdraw(_), None) => self.done.written.withdrawals += 1,
            (Write::Claim(_), None) => self.done.written.claims += 1,
        }
        if let Some(intent) = self.units.done(unit) {
            out.push(Command::Journal(JournalOp::Close(intent)));
        }
    }

    fn rule_evicted(
        &mut self,
        rule: Rule,
        job: &str,
        intent: Option<u64>,
        ok: bool,
        out: &mut Vec<Command>,
    ) {
        if ok {
            match rule {
                Rule::Repair => self.done.repairs += 1,
                Rule::Walltime => self.done.walltime_evictions += 1,
                Rule::Journal => {}
            }
            if rule != Rule::Journal {
                // A broken or cut run is no observed runtime.
                self.world.state.mark_evicted(job);
            }
        } else {
            self.done.written.failed += 1;
        }
        let Some(id) = intent else { return };
        let Some((left, all)) = self.rollbacks.get_mut(&id) else {
            return;
        };
        *left = left.saturating_sub(1);
        *all &= ok;
        if *left == 0 {
            let all = *all;
            self.rollbacks.remove(&id);
            if all {
                out.push(Command::Journal(JournalOp::Close(id)));
            }
            // Else the intent stays for the next start; the repair timer
            // is the backstop.
        }
    }

    fn role(&mut self, role: Role, now: Timestamp, out: &mut Vec<Command>) {
        let was = self.leading;
        self.leading = role == Role::Leader;
        self.done.leader = self.leading;
        if was && !self.leading {
            self.resumed = false;
            self.last_checkpoint = None;
            // A standby cannot tell the leader's evictions from runs that
            // ended: it measures again when it leads.
            self.world.state.track_runtimes(None);
            self.done.runtimes = self.world.state.runtimes_kept() as u64;
        }
        if self.leading && !was {
            // What this replica remembers writing may have been changed by
            // another leader since: write it all again.
            self.reporter = report::Reporter::default();
            self.queue_statuses = queue_status::StatusCache::default();
            self.group_statuses = queue_status::StatusCache::default();
            self.upstream.cache = crate::upstream_status::UpstreamCache::default();
            self.default_queue_asked = false;
            self.repair = repair::Repair::default();
            self.expiry = walltime::Expiry::default();
            self.fresh = true;
            self.next_cycle = now;
        }
        if was != self.leading {
            out.push(Command::Leading(self.leading));
        }
    }

    fn reload(&mut self, mut new: Settings, now: Timestamp) {
        // What the environment filled in at start (identity, lease
        // namespace) stays, unless the file now names them.
        let (le, was) = (&mut new.service.leader_election, &self.live.leader_election);
        if le.identity.is_empty() {
            le.identity = was.identity.clone();
        }
        if le.lease_namespace.is_empty() {
            le.lease_namespace = was.lease_namespace.clone();
        }
        for field in crate::reload::needs_restart(&self.live, &new.service) {
            tracing::warn!(
                "reloaded settings: service.{field} changed; it takes effect at the next start"
            );
        }
        self.settings.scheduler = new.scheduler;
        self.live = crate::reload::apply(&self.live, &new.service);
        self.next_cycle = Timestamp(now.0.saturating_add(ms(self.live.debounce_millis)));
        tracing::info!("settings reloaded");
    }

    /// Resumes from the checkpoint read (the first cycle as leader).
    fn resume(
        &mut self,
        ck: Result<Option<crate::checkpoint::Checkpoint>, String>,
        out: &mut Vec<Command>,
    ) {
        let ck = match ck {
            Ok(Some(ck)) => ck,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("{e}; the usage history goes on from this replica's own store");
                return;
            }
        };
        let window = self
            .settings
            .scheduler
            .reservations
            .estimate()
            .map(|e| e.samples);
        if !ck.moves.is_empty() {
            tracing::info!(
                plans = ck.moves.open(),
                "consolidation's open moves restored from the checkpoint"
            );
            self.moves.merge(ck.moves.clone());
        }
        let taken =
            crate::checkpoint::apply(&ck, &mut self.world, self.history_known_at_start, window);
        self.done.resumed = taken;
        if !taken || !self.units.journal {
            return;
        }
        for rec in ck.intents() {
            if self
                .open_intents
                .values()
                .any(|o| o.gang == rec.gang && o.opened_s == rec.opened_s)
            {
                continue;
            }
            let id = self.units.intent_id();
            out.push(Command::Journal(JournalOp::Write(id, rec.clone())));
            self.open_intents.insert(id, rec);
        }
    }
}

fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn period_ms(s: &ServiceSettings) -> i64 {
    ms(s.cycle_period_millis)
}
