//! The simulation: one seeded RNG, one virtual clock, a queue of timed
//! events, and the world (API server, replicas, actors) they act on.
//! Single-threaded: the same seed replays the same run, byte for byte.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trainyard_serve::machine::{Command, Input, JournalOp};

use crate::api::Api;
use crate::check::Checks;
use crate::faults::Faults;
use crate::replica::{Replica, Request, Sent};

/// A failed request as the shell reports it: the reason the metrics
/// give its error, and the message.
fn failure(message: String) -> trainyard_serve::machine::Failure {
    let reason = match message.split(' ').next().unwrap_or("") {
        "timeout:" => "transport",
        "fenced:" => "fenced",
        "500" | "504" => "server_error",
        "429" => "too_many_requests",
        "409" => "conflict",
        "404" => "not_found",
        "422" => "invalid",
        _ => "other",
    };
    trainyard_serve::machine::Failure {
        uncertain: reason == "transport",
        reason: reason.into(),
        message,
    }
}

/// Simulation time starts here (ms since the epoch: 2027-01-15).
pub const START_MS: i64 = 1_800_000_000_000;

/// What happens at a point of simulation time.
#[derive(Clone, Debug)]
pub enum Ev {
    /// A replica's machine asked to be woken.
    Tick(usize),
    /// A replica's watch delivers what it may see.
    Watch(usize),
    /// A request reaches the API server.
    Arrive(usize, u64, Sent),
    /// Its answer reaches the replica (epoch: the process that sent it).
    Answer(usize, u64, Sent, Result<(), String>),
    /// A replica's elector tries the Lease.
    Elect(usize),
    /// Users and the other actors do something.
    Actor,
    /// The kubelets step.
    Kubelet,
    /// A crash on the replica's own period.
    Crash(usize),
    /// A crash at a point of interest (while a gang's binds are on their
    /// way), once.
    Kill(usize),
    Restart(usize),
    /// The other scheduler binds one pod.
    OtherBinds,
    /// A user changes policy (PDBs, Queues, PriorityClasses).
    Policy,
    /// A replica's clock jumps.
    ClockJump(usize),
    /// A replica's watch connection drops.
    DropWatch(usize),
    /// The ReplicaSet controller creates a replacement pod
    /// (consolidation runs).
    Replace(Box<serde_json::Value>),
    /// A controller creates an upstream PodGroup whose pods came first
    /// (upstream gangs runs).
    UpstreamGroup(Box<serde_json::Value>),
    /// A controller lowers a waiting upstream PodGroup's `minCount`.
    LowerMin(String),
}

pub struct Sim {
    pub rng: ChaCha8Rng,
    /// The later dimensions' own stream (`Faults::draw_later`).
    pub later_rng: ChaCha8Rng,
    /// The consolidation dimension's own stream.
    pub moving_rng: ChaCha8Rng,
    /// The upstream gangs dimension's own stream.
    pub upstream_rng: ChaCha8Rng,
    /// Pods the ReplicaSet controller owns and watches, by name: the
    /// template of their replacement.
    pub owned: BTreeMap<String, serde_json::Value>,
    pub now: i64,
    pub end: i64,
    /// From then on: no faults, no actors, every replica up (liveness).
    pub quiet_from: i64,
    pub api: Api,
    pub replicas: Vec<Replica>,
    pub faults: Faults,
    pub checks: Checks,
    events: BTreeMap<(i64, u64), Ev>,
    seq: u64,
    next_request: u64,
    pub trace: Vec<String>,
    pub steps: u64,
    /// Time spent in the replicas' machines (ns).
    pub machine_ns: u128,
}

impl Sim {
    pub fn new(seed: u64, seconds: i64, faults: Faults) -> Sim {
        let rng = ChaCha8Rng::seed_from_u64(seed);
        let api = Api::new(seed, faults.history_window, START_MS);
        let end = START_MS + seconds * 1000;
        Sim {
            rng,
            later_rng: ChaCha8Rng::seed_from_u64(!seed),
            moving_rng: ChaCha8Rng::seed_from_u64(seed.rotate_left(17)),
            upstream_rng: ChaCha8Rng::seed_from_u64(seed.rotate_left(29)),
            owned: BTreeMap::new(),
            now: START_MS,
            end,
            quiet_from: end - faults.quiet_seconds * 1000,
            api,
            replicas: Vec::new(),
            faults,
            checks: Checks::default(),
            events: BTreeMap::new(),
            seq: 0,
            next_request: 0,
            trace: Vec::new(),
            steps: 0,
            machine_ns: 0,
        }
    }

    pub fn quiet(&self) -> bool {
        self.now >= self.quiet_from
    }

    pub fn at(&mut self, t: i64, ev: Ev) {
        self.seq += 1;
        self.events.insert((t.max(self.now), self.seq), ev);
    }

    pub fn note(&mut self, line: String) {
        self.trace.push(format!(
            "{:>9.3}s {line}",
            (self.now - START_MS) as f64 / 1000.0
        ));
    }

    /// Runs until the end or the first violation.
    pub fn run(&mut self) {
        while let Some(((t, _), ev)) = self.events.pop_first() {
            if t > self.end {
                break;
            }
            self.now = t;
            self.api.at(t);
            self.step(ev);
            self.steps += 1;
            self.checks
                .after_step(&self.api, &self.replicas, self.now, &mut self.trace);
            if !self.checks.violations.is_empty() {
                return;
            }
        }
        self.now = self.end;
        if std::env::var("DST_DEBUG").is_ok() {
            self.debug_views();
        }
        self.checks.at_end(&self.api, &self.replicas, &self.faults);
        if self.faults.policy_churn && self.checks.violations.is_empty() {
            self.checks.statuses_follow_the_pods(&self.api);
        }
    }

    fn step(&mut self, ev: Ev) {
        match ev {
            Ev::Tick(r) => {
                if self.replicas[r].up && self.replicas[r].tick_at == Some(self.now) {
                    self.replicas[r].tick_at = None;
                    self.input(r, Input::Tick);
                }
            }
            Ev::Watch(r) => self.deliver(r),
            Ev::Arrive(r, epoch, sent) => self.arrive(r, epoch, sent),
            Ev::Answer(r, epoch, sent, result) => self.answer(r, epoch, sent, result),
            Ev::Elect(r) => self.elect(r),
            Ev::Actor => self.act(),
            Ev::Policy => self.change_policy(),
            Ev::Kubelet => {
                // The pods hold still for the run's last seconds (later
                // dimensions), for the status check.
                let settling =
                    self.faults.policy_churn && self.now >= self.end - crate::status::SETTLE_MS;
                if !settling {
                    self.api.kubelet();
                    self.pod_gc();
                    self.replicaset_controller();
                }
                self.at(self.now + 1000, Ev::Kubelet);
            }
            Ev::Crash(r) => {
                if self.crash(r)
                    && let Some(every) = self.faults.crash_every_ms
                {
                    let next = self.now + self.rng.random_range(every / 2..every * 3 / 2);
                    self.at(next, Ev::Crash(r));
                }
            }
            Ev::Kill(r) => {
                self.crash(r);
            }
            Ev::OtherBinds => {
                if !self.quiet() {
                    self.other_scheduler();
                }
            }
            Ev::Restart(r) => self.restart(r),
            Ev::Replace(pod) => self.replace(*pod),
            Ev::UpstreamGroup(group) => self.upstream_group_arrives(*group),
            Ev::LowerMin(name) => self.lower_min(&name),
            Ev::ClockJump(r) => {
                if !self.quiet() {
                    let jump = self.rng.random_range(-60_000..=120_000);
                    self.replicas[r].offset += jump;
                    // The service's rules time on the wall clock: a step
                    // back delays them by the step (a known limit).
                    self.checks.clock_stepped_back(-jump);
                    self.note(format!("replica {r}: clock jumps {jump} ms"));
                    self.schedule_tick(r);
                }
            }
            Ev::DropWatch(r) => {
                if !self.quiet() && self.replicas[r].up {
                    let back = self.rng.random_range(200..3000);
                    self.replicas[r].reconnect_at = self.now + back;
                    self.note(format!("replica {r}: watch dropped for {back} ms"));
                }
                if let Some(every) = self.faults.drop_watch_every_ms {
                    let next = self.now + self.rng.random_range(every / 2..every * 3 / 2);
                    self.at(next, Ev::DropWatch(r));
                }
            }
        }
    }

    /// Hands `input` to replica `r`'s machine and carries out its
    /// commands, feeding back the answers the shell gives at once.
    pub fn input(&mut self, r: usize, input: Input) {
        let mut inputs = vec![input];
        while let Some(input) = inputs.pop() {
            let now = self.replicas[r].clock(self.now);
            let Some(m) = self.replicas[r].machine.as_mut() else {
                return;
            };
            let before = m.progress().recovered;
            // CPU of the machine alone, for docs/benchmarks.md (read, never
            // decided on: the run stays deterministic).
            let clock = std::time::Instant::now();
            let commands = m.handle(input, now);
            self.machine_ns += clock.elapsed().as_nanos();
            let after = m.progress().recovered;
            if after != before {
                self.note(format!(
                    "replica {r}: bind journal: {} closed, {} completed, {} rolled back, {} placed again",
                    after.closed - before.closed,
                    after.completed - before.completed,
                    after.rolled_back - before.rolled_back,
                    after.replanned - before.replanned
                ));
            }
            for c in commands {
                if let Some(answer) = self.command(r, c) {
                    inputs.push(answer);
                }
            }
        }
        self.pump(r);
        self.schedule_tick(r);
    }

    fn schedule_tick(&mut self, r: usize) {
        let rep = &self.replicas[r];
        let Some(m) = &rep.machine else { return };
        let at = (m.wake_at().0 - rep.offset).max(self.now);
        if rep.tick_at.is_none_or(|t| t > at) {
            self.replicas[r].tick_at = Some(at);
            self.at(at, Ev::Tick(r));
        }
    }

    /// One command of replica `r`'s machine; the answer a shell gives at
    /// once, if any.
    fn command(&mut self, r: usize, c: Command) -> Option<Input> {
        let rv = self.replicas[r].seen;
        match c {
            Command::Unit(unit) => self.unit(r, unit, rv),
            Command::Evict {
                rule,
                eviction,
                intent,
            } => {
                self.checks.evicting.insert(eviction.job.clone());
                let (q, f) = (self.replicas[r].queue.len(), self.replicas[r].in_flight);
                self.note(format!(
                    "replica {r}: rule {} asks to evict {} (queued {q}, in flight {f})",
                    rule.labels().1,
                    eviction.task.name
                ));
                let request = Request::Rule {
                    rule,
                    eviction,
                    intent,
                };
                self.enqueue(r, request, rv);
            }
            Command::Journal(op) => {
                if let Some(j) = self.replicas[r].journal.as_mut() {
                    match op {
                        JournalOp::Write(id, rec) => {
                            j.insert(id, rec);
                        }
                        JournalOp::Close(id) => {
                            j.remove(&id);
                        }
                    }
                }
            }
            Command::Event(e) => {
                if self.replicas[r].fence_open(self.now) {
                    let ns = if e.task.namespace.is_empty() {
                        "default".to_string()
                    } else {
                        e.task.namespace.clone()
                    };
                    self.api.event(&ns, &e.task.name, e.reason, &e.message);
                }
            }
            Command::CreateQueue { name } => {
                if self.replicas[r].fence_open(self.now) {
                    let q = serde_json::json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
                        "metadata": {"name": name}, "spec": {}});
                    let r = self.api.create("trainyard.io/queues", None, q);
                    self.note(format!(
                        "replica creates Queue {name}: {}",
                        r.err().unwrap_or_else(|| "created".into())
                    ));
                }
            }
            // Pods' conditions, statuses and gates are not modelled: they
            // carry no placement.
            Command::Report { .. } => return Some(Input::Reported { failed: 0 }),
            // Statuses land on the objects with the later dimensions on
            // (a run named before them keeps its world).
            Command::Statuses { kind, changes } => {
                use trainyard_serve::machine::StatusKind;
                let upstream = kind == StatusKind::UpstreamPodGroup;
                // The upstream groups' statuses land whenever the kind is
                // served (the upstream gangs dimension).
                let lands = self.faults.policy_churn || upstream;
                if lands && self.replicas[r].fence_open(self.now) {
                    let resource = match kind {
                        StatusKind::Queue => "trainyard.io/queues",
                        StatusKind::PodGroup => "trainyard.io/podgroups",
                        StatusKind::UpstreamPodGroup => crate::upstream::KEY,
                    };
                    for e in crate::status::write(&mut self.api, resource, &changes) {
                        self.note(format!("replica {r}: status of {resource} {e}"));
                    }
                    if upstream {
                        for (key, patch) in &changes {
                            let conds: Vec<String> = patch["conditions"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(|c| {
                                    format!(
                                        "{}={}/{}",
                                        c["type"].as_str().unwrap_or(""),
                                        c["status"].as_str().unwrap_or(""),
                                        c["reason"].as_str().unwrap_or("")
                                    )
                                })
                                .collect();
                            self.note(format!(
                                "replica {r}: upstream PodGroup {key} status: {}",
                                conds.join(", ")
                            ));
                        }
                        self.checks
                            .on_upstream_statuses(&self.api, &changes, &mut self.trace);
                    }
                }
            }
            Command::Usage { .. } | Command::Leading(_) => {}
            Command::Ungate { pod, .. } => return Some(Input::Ungated { pod, failed: None }),
            Command::ReadCheckpoint => return Some(Input::CheckpointRead(Ok(None))),
            Command::WriteCheckpoint(_) => return Some(Input::CheckpointWritten(Ok(()))),
            Command::Observe(o) => self.observe(r, &o),
        }
        None
    }

    /// A unit: its intent committed to the store before its writes are
    /// queued (as the shell's writer does).
    fn unit(&mut self, r: usize, unit: trainyard_serve::machine::Unit, rv: u64) {
        // A crash point of interest: a gang's binds on their way.
        if unit.open.is_some()
            && self.faults.crash_every_ms.is_some()
            && !self.quiet()
            && self.rng.random_bool(0.1)
        {
            let t = self.now + self.rng.random_range(0..3000);
            self.at(t, Ev::Kill(r));
        }
        for w in &unit.writes {
            if let trainyard_cluster::Write::Evict(e) = w {
                self.checks.evicting.insert(e.job.to_string());
            }
        }
        let rep = &mut self.replicas[r];
        if let (Some((id, rec)), Some(j)) = (unit.open, rep.journal.as_mut()) {
            j.insert(id, rec);
        }
        for write in unit.writes {
            let request = Request::Write {
                unit: unit.id,
                write,
            };
            self.enqueue(r, request, rv);
        }
    }

    /// A cycle ran: its pending reasons kept (for liveness failures), its
    /// decisions traced.
    fn observe(&mut self, r: usize, o: &trainyard_serve::machine::Observed) {
        self.checks.cycles += 1;
        self.checks.reasons = o
            .decisions
            .pending
            .iter()
            .map(|p| (p.job.to_string(), p.message.clone()))
            .collect();
        if std::env::var("DST_DEBUG").is_ok() {
            for j in &o.snapshot.jobs {
                let tasks: Vec<String> = j
                    .tasks
                    .iter()
                    .map(|t| format!("{}:{:?}:{}", t.key.name, t.state, t.terminating))
                    .collect();
                eprintln!(
                    "job {} priority {} preemptible {} min {} tasks {tasks:?}",
                    j.id, j.priority, j.preemptible, j.min_member
                );
            }
        }
        let d = &o.decisions;
        if d.binds.is_empty() && d.evictions.is_empty() {
            return;
        }
        let what: Vec<String> = d
            .binds
            .iter()
            .map(|b| format!("{}→{}{:?}", b.task.name, b.node, b.gpus))
            .chain(
                d.evictions
                    .iter()
                    .map(|e| format!("evict {} for {}", e.task.name, e.preemptor)),
            )
            .collect();
        self.note(format!("replica {r}: cycle decides {}", what.join(", ")));
    }

    fn enqueue(&mut self, r: usize, request: Request, decided_rv: u64) {
        self.next_request += 1;
        let sent = Sent {
            id: self.next_request,
            request,
            decided_rv,
            decided_ms: self.replicas[r].clock(self.now).0,
        };
        self.replicas[r].queue.push_back(sent);
    }

    /// Sends what replica `r` may send: at most `bindConcurrency` in
    /// flight, one pod's requests in order.
    fn pump(&mut self, r: usize) {
        loop {
            let rep = &self.replicas[r];
            if !rep.up || rep.in_flight >= rep.settings.service.bind_concurrency.max(1) {
                return;
            }
            let Some(i) = rep.queue.iter().position(|s| {
                let (ns, name, _) = s.request.pod();
                !rep.busy.contains_key(&(ns, name))
            }) else {
                return;
            };
            let Some(sent) = self.replicas[r].queue.remove(i) else {
                return;
            };
            let (ns, name, _) = sent.request.pod();
            let rep = &mut self.replicas[r];
            rep.in_flight += 1;
            *rep.busy.entry((ns, name)).or_default() += 1;
            let epoch = rep.epoch;
            if !rep.fence_open(self.now) {
                self.at(
                    self.now,
                    Ev::Answer(r, epoch, sent, Err("fenced: not the leader".into())),
                );
                continue;
            }
            self.checks
                .on_send(r, &sent, &self.api, &self.replicas, &mut self.trace);
            let quiet = self.quiet();
            let latency = self.faults.latency(&mut self.rng, quiet);
            self.at(self.now + latency, Ev::Arrive(r, epoch, sent));
        }
    }

    fn answer(&mut self, r: usize, epoch: u64, sent: Sent, result: Result<(), String>) {
        let rep = &mut self.replicas[r];
        if rep.epoch != epoch || !rep.up {
            return;
        }
        rep.in_flight = rep.in_flight.saturating_sub(1);
        let (ns, name, uid) = sent.request.pod();
        if let Some(n) = rep.busy.get_mut(&(ns.clone(), name.clone())) {
            *n -= 1;
            if *n == 0 {
                rep.busy.remove(&(ns, name));
            }
        }
        if result.as_ref().is_err_and(|e| e.starts_with("timeout")) {
            // The service holds what a lost answer may have done for
            // assumeTimeoutSeconds: its gang's repair waits that long more.
            let s = &self.replicas[r].settings.service;
            let hold = s.assume_timeout_seconds as i64 * 1000;
            let job = match &sent.request {
                Request::Write { write, .. } => write.target().0.to_string(),
                Request::Rule { eviction, .. } => eviction.job.clone(),
            };
            self.checks.held.insert(job, hold);
        }
        let rep = &mut self.replicas[r];
        let input = match sent.request {
            Request::Write { unit, write } => {
                if result.is_ok() && matches!(write, trainyard_cluster::Write::Bind(_)) {
                    rep.acked.insert(uid);
                }
                Input::Written {
                    unit,
                    write,
                    error: result.err().map(failure),
                }
            }
            Request::Rule {
                rule,
                eviction,
                intent,
            } => Input::RuleEvicted {
                rule,
                job: eviction.job,
                intent,
                ok: result.is_ok(),
            },
        };
        self.input(r, input);
    }

    /// Replica `r`'s watch delivers the events it may see now: up to the
    /// revision that stood `lag` ago; a relist when it must (first, after
    /// a 410).
    fn deliver(&mut self, r: usize) {
        let period = self.faults.watch_period_ms;
        self.at(self.now + period, Ev::Watch(r));
        let rep = &self.replicas[r];
        if !rep.up || self.now < rep.reconnect_at {
            return;
        }
        let lag = if self.quiet() {
            0
        } else {
            self.faults.watch_lag_ms
        };
        let upto = self.api.revision_at(self.now - lag);
        let events = if rep.needs_list {
            None
        } else {
            self.api.events(rep.seen, upto)
        };
        let (events, seen) = match events {
            Some(e) => (e, upto.max(rep.seen)),
            None => {
                if !rep.needs_list {
                    self.note(format!("replica {r}: watch 410 Gone, relisting"));
                }
                (self.api.relist(), self.api.rv())
            }
        };
        self.replicas[r].needs_list = false;
        self.replicas[r].seen = seen;
        for e in events {
            self.input(r, Input::Watch(e));
        }
    }

    /// Kills replica `r` (SIGKILL) and starts it again 0.5–8 s later;
    /// while it is down, the other scheduler may bind (it does not wait for
    /// us). Whether it was up.
    fn crash(&mut self, r: usize) -> bool {
        if self.quiet() || !self.replicas[r].up {
            return false;
        }
        self.note(format!("replica {r}: crash (SIGKILL)"));
        self.replicas[r].crash();
        let back = self.rng.random_range(500..8000);
        self.at(self.now + back, Ev::Restart(r));
        if self.faults.other_scheduler {
            for _ in 0..self.rng.random_range(0..3) {
                let t = self.now + self.rng.random_range(0..back);
                self.at(t, Ev::OtherBinds);
            }
        }
        true
    }

    /// Each node's GPUs bound, as the API and as each machine sees them
    /// (`DST_DEBUG`).
    fn debug_views(&mut self) {
        let pods = self.api.list("/pods");
        for n in self.api.list("/nodes") {
            let name = n["metadata"]["name"].as_str().unwrap_or("").to_string();
            let api: Vec<String> = pods
                .iter()
                .filter(|p| p["spec"]["nodeName"] == name.as_str())
                .map(|p| {
                    format!(
                        "{}:{}:{}",
                        p["metadata"]["name"],
                        p["status"]["phase"],
                        crate::check::gpus_of(p)
                    )
                })
                .collect();
            eprintln!(
                "node {name} unsched {} api {api:?}",
                n["spec"]["unschedulable"]
            );
            for (i, r) in self.replicas.iter_mut().enumerate() {
                let Some(m) = r.machine.as_mut() else {
                    continue;
                };
                let snap = m.world.state.snapshot();
                let mine: Vec<String> = snap
                    .jobs
                    .iter()
                    .flat_map(|j| j.tasks.iter())
                    .filter(|t| matches!(&t.state, trainyard_model::TaskState::Bound { node, .. } if *node == name))
                    .map(|t| format!("{}{}", t.key.name, if t.terminating { "(term)" } else { "" }))
                    .collect();
                let ext: Vec<String> = snap
                    .external
                    .iter()
                    .filter(|e| e.node == name)
                    .map(|e| e.name.clone())
                    .collect();
                eprintln!("   replica {i}: {mine:?} external {ext:?}");
            }
        }
    }

    pub fn restart(&mut self, r: usize) {
        if self.replicas[r].up {
            return;
        }
        let intents = self.replicas[r].journal.as_ref().map_or(0, |j| j.len());
        self.note(format!(
            "replica {r}: starts (journal intents open: {intents})"
        ));
        self.replicas[r].start(self.now);
        // The watch and the elector run on their own periods (set up
        // once): a started process lists at its watch's next turn.
        self.schedule_tick(r);
    }
}
