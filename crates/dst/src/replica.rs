//! One scheduler process in the simulation: the real state machine
//! (`trainyard_serve::machine::Service`), what its shell would hold (the
//! requests queued and in flight, the store's journal, its watch
//! position, its elector), and what survives a crash (the store).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use trainyard_cluster::Write;
use trainyard_cluster::usage::UsageHistory;
use trainyard_model::Timestamp;
use trainyard_serve::Settings;
use trainyard_serve::leader::{Observed, Role};
use trainyard_serve::machine::{Rule, Service, Start, Streams};
use trainyard_serve::repair::RepairEviction;
use trainyard_store::JournalRecord;

/// A request the shell sends.
#[derive(Clone, Debug)]
pub enum Request {
    /// A write of a unit.
    Write { unit: u64, write: Write },
    /// A rule's eviction.
    Rule {
        rule: Rule,
        eviction: RepairEviction,
        intent: Option<u64>,
    },
}

impl Request {
    /// The pod written: `(namespace, name, uid)`.
    pub fn pod(&self) -> (String, String, String) {
        let t = match self {
            Request::Write { write, .. } => write.task(),
            Request::Rule { eviction, .. } => &eviction.task,
        };
        let ns = if t.namespace.is_empty() {
            "default"
        } else {
            &t.namespace
        };
        (ns.to_string(), t.name.clone(), t.uid.clone())
    }
}

/// A request with what the replica knew when it decided it.
#[derive(Clone, Debug)]
pub struct Sent {
    pub id: u64,
    pub request: Request,
    /// The revision its watch had delivered when the machine decided it.
    pub decided_rv: u64,
    /// The replica's clock when the machine decided it (ms).
    pub decided_ms: i64,
}

/// The elector's state (leader election on).
#[derive(Clone, Debug)]
pub struct Elector {
    pub observed: Option<Observed>,
    /// Writes pass until then (ms, simulation time).
    pub fence_until: i64,
    pub held_since: Option<i64>,
    pub role: Role,
}

pub struct Replica {
    pub identity: String,
    pub settings: Settings,
    pub up: bool,
    /// Bumped at each crash: answers to an older process are lost.
    pub epoch: u64,
    pub machine: Option<Service>,
    /// The store's bind journal (`None`: no store). Survives crashes.
    pub journal: Option<BTreeMap<u64, JournalRecord>>,
    /// The watch: the last revision delivered.
    pub seen: u64,
    pub needs_list: bool,
    /// A dropped watch reconnects then (ms).
    pub reconnect_at: i64,
    /// Requests not sent yet, and those in flight by pod.
    pub queue: VecDeque<Sent>,
    pub in_flight: usize,
    pub busy: BTreeMap<(String, String), usize>,
    /// Its clock's offset from the simulation's (ms).
    pub offset: i64,
    pub elector: Option<Elector>,
    /// Pods whose bind this process was told landed (uid).
    pub acked: BTreeSet<String>,
    /// The tick it waits for (simulation time, ms).
    pub tick_at: Option<i64>,
    /// The API serves `scheduling.k8s.io/v1beta1` PodGroups (the upstream
    /// gangs dimension): the process watches them, as its discovery
    /// would pick v1beta1.
    pub upstream: bool,
}

impl Replica {
    pub fn new(identity: String, settings: Settings, store: bool) -> Replica {
        let elector = settings.service.leader_election.enabled.then_some(Elector {
            observed: None,
            fence_until: i64::MIN,
            held_since: None,
            role: Role::Unknown,
        });
        Replica {
            identity,
            settings,
            up: false,
            epoch: 0,
            machine: None,
            journal: store.then(BTreeMap::new),
            seen: 0,
            needs_list: true,
            reconnect_at: 0,
            queue: VecDeque::new(),
            in_flight: 0,
            busy: BTreeMap::new(),
            offset: 0,
            elector,
            acked: BTreeSet::new(),
            tick_at: None,
            upstream: false,
        }
    }

    /// The replica's clock at simulation time `now`.
    pub fn clock(&self, now: i64) -> Timestamp {
        Timestamp(now + self.offset)
    }

    /// Starts the process: a fresh machine over what the store kept.
    pub fn start(&mut self, now: i64) {
        // Discovery (the shell's `watch::served_kinds`): the served kinds,
        // then the upstream PodGroup in the version
        // `watch::upstream_version` picks.
        let served: &[&str] = if self.upstream { &["v1beta1"] } else { &[] };
        let upstream = trainyard_serve::watch::upstream_version(served);
        let streams = Streams::of_versioned(
            crate::api::streams(upstream.is_some())
                .iter()
                .map(|s| (s.2, s.1, s.3)),
        );
        let hl = self
            .settings
            .scheduler
            .fair_share
            .usage_half_life_seconds
            .unwrap_or(trainyard_serve::persist::ACCOUNTING_HALF_LIFE_S);
        self.machine = Some(Service::new(Start {
            settings: self.settings.clone(),
            streams,
            // Group inference fetches owners (the shell's part): the
            // simulated pods name their groups.
            infer: false,
            history: UsageHistory::new(hl),
            journal: self.journal.clone(),
            stopwatch: Box::new(|| 0),
            now: self.clock(now),
        }));
        self.up = true;
        self.needs_list = true;
        self.reconnect_at = now;
        self.seen = 0;
        self.acked.clear();
        self.tick_at = None;
        if let Some(e) = &mut self.elector {
            *e = Elector {
                observed: None,
                fence_until: i64::MIN,
                held_since: None,
                role: Role::Unknown,
            };
        }
    }

    /// The process dies: what was not committed to the store is lost;
    /// requests already sent still reach the server, their answers do
    /// not reach anyone.
    pub fn crash(&mut self) {
        self.up = false;
        self.epoch += 1;
        self.machine = None;
        self.queue.clear();
        self.in_flight = 0;
        self.busy.clear();
        self.tick_at = None;
    }

    /// Whether the fence lets a write through at `now`.
    pub fn fence_open(&self, now: i64) -> bool {
        self.elector.as_ref().is_none_or(|e| now < e.fence_until)
    }
}
