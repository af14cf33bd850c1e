//! `trainyard-dst`: deterministic simulation testing of the scheduler
//! service, as FoundationDB and TigerBeetle (its VOPR) practise it.
//!
//! The service's real state machine ([`trainyard_serve::machine`]) runs,
//! single-threaded, against a simulated world: the test API server's
//! rules in-process ([`api`]: resource versions, UID preconditions, a
//! bound pod not bound again, the Eviction API with PodDisruptionBudgets,
//! graceful deletion, the kubelet that admits only what fits), watches
//! that lag, drop and expire (410), requests that are slow, refused or
//! whose answers are lost ([`faults`]), users and another scheduler
//! ([`actors`]), crashes with and without a store, two replicas with
//! leader election, and clocks that jump ([`replica`]). Every choice comes
//! from one seed; the invariants ([`check`]) are read from the API's
//! objects after every step. A failing seed replays exactly.

pub mod actors;
pub mod api;
pub mod check;
pub mod consolidation;
pub mod exec;
pub mod faults;
pub mod policy;
pub mod replica;
pub mod sim;
pub mod status;
pub mod upstream;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trainyard_serve::Settings;

pub use faults::Faults;
use sim::{Ev, START_MS, Sim};

/// What one seed's run came to.
#[derive(Debug)]
pub struct Report {
    pub seed: u64,
    pub faults: Faults,
    /// Empty: every invariant held.
    pub violations: Vec<String>,
    /// The run's events, for people (the failing step last).
    pub trace: Vec<String>,
    pub steps: u64,
    pub cycles: u64,
    pub binds: u64,
    pub evictions: u64,
    pub refused: u64,
    /// Simulated seconds.
    pub seconds: i64,
    /// Time spent in the service's state machine (ns, wall clock).
    pub machine_ns: u128,
    /// Consolidation (runs with the dimension on): what moved.
    pub moves: consolidation::Tally,
    /// Upstream gangs (runs with the dimension on): what was made and
    /// written.
    pub upstream: upstream::Tally,
}

/// The service's settings for replica `i` of a run: the defaults, as the
/// README starts `trainyard serve`, with what the environment fills in
/// (identity, namespace) and the run's `bindConcurrency` and store.
pub fn settings(i: usize, faults: &Faults) -> Settings {
    let mut s = Settings::default();
    let svc = &mut s.service;
    svc.http_address = String::new();
    svc.bind_concurrency = faults.bind_concurrency;
    svc.leader_election.identity = format!("trainyard-{i}");
    svc.leader_election.lease_namespace = "default".into();
    if faults.store {
        svc.store.path = format!("/simulated/replica-{i}");
    }
    // The default queue as an object is a later dimension's (a run
    // named before it keeps its world: the implicit default queue).
    svc.create_default_queue = faults.policy_churn;
    if let Some(c) = &faults.consolidation {
        let sched = &mut s.scheduler;
        sched.consolidation.enabled = true;
        sched.consolidation.no_move_seconds = c.no_move_seconds;
        sched.preemption.nomination_timeout_seconds = c.nomination_timeout_seconds;
    }
    s
}

/// The fault mix seed `seed` draws.
pub fn faults_of(seed: u64) -> Faults {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x005e_ed0f_fa17);
    let mut faults = Faults::draw(&mut rng);
    faults.draw_later(&mut later_stream(seed));
    faults.consolidation = consolidation::Consolidation::draw(&mut consolidation_stream(seed));
    faults.upstream = upstream::UpstreamGangs::draw(&mut upstream_stream(seed));
    faults
}

/// The stream the upstream-gangs dimension and its actors draw from (its
/// own: a run with it off is the run it was before it existed).
pub(crate) fn upstream_stream(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ 0x0005_c4ed_9a9e)
}

/// The stream the consolidation dimension and its actors draw from (its
/// own: a run with it off is the run it was before it existed).
pub(crate) fn consolidation_stream(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ 0xc0_501d_a7e0)
}

/// The stream the later dimensions and their actors draw from.
fn later_stream(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ 0x1a7e_0d1e_5eed)
}

/// Runs seed `seed` for `seconds` of simulated time (the last
/// `faults.quiet_seconds` quiet); `faults`: the seed's own mix unless
/// given.
pub fn run(seed: u64, seconds: i64, faults: Option<Faults>) -> Report {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x005e_ed0f_fa17);
    // Drawn whether or not a mix is given, so that a given mix changes
    // only what it changes and the rest of the run stays the seed's.
    let mut later = later_stream(seed);
    let mut moving = consolidation_stream(seed);
    let mut drawn = Faults::draw(&mut rng);
    drawn.draw_later(&mut later);
    drawn.consolidation = consolidation::Consolidation::draw(&mut moving);
    let mut gangs = upstream_stream(seed);
    drawn.upstream = upstream::UpstreamGangs::draw(&mut gangs);
    let faults = faults.unwrap_or(drawn);
    let mut sim = Sim::new(seed, seconds, faults.clone());
    sim.later_rng = later;
    sim.moving_rng = moving;
    sim.upstream_rng = gangs;
    sim.api.serve_upstream(faults.upstream.is_some());
    sim.checks.consolidation = faults.consolidation.clone();
    sim.checks.watch_lag_ms = faults.watch_lag_ms;
    sim.populate();
    for i in 0..faults.replicas {
        let store = faults.store;
        let mut rep = replica::Replica::new(format!("trainyard-{i}"), settings(i, &faults), store);
        rep.upstream = faults.upstream.is_some();
        sim.replicas.push(rep);
    }
    for r in 0..faults.replicas {
        sim.restart(r);
        let first = START_MS + rng.random_range(0..faults.watch_period_ms);
        sim.at(first, Ev::Watch(r));
        sim.at(START_MS + rng.random_range(0..500), Ev::Elect(r));
        if let Some(every) = faults.crash_every_ms {
            sim.at(START_MS + rng.random_range(every / 4..every), Ev::Crash(r));
        }
        if let Some(every) = faults.clock_jump_every_ms {
            sim.at(
                START_MS + rng.random_range(every / 4..every),
                Ev::ClockJump(r),
            );
        }
        if let Some(every) = faults.drop_watch_every_ms {
            sim.at(
                START_MS + rng.random_range(every / 4..every),
                Ev::DropWatch(r),
            );
        }
    }
    sim.at(START_MS + 1000, Ev::Kubelet);
    sim.at(START_MS + 100, Ev::Actor);
    if faults.policy_churn {
        let first = START_MS + sim.later_rng.random_range(1000..20_000);
        sim.at(first, Ev::Policy);
    }
    let quiet = sim.quiet_from;
    for r in 0..faults.replicas {
        // Every replica is up for the quiet period.
        sim.at(quiet, Ev::Restart(r));
    }
    sim.run();
    Report {
        seed,
        faults,
        violations: std::mem::take(&mut sim.checks.violations),
        trace: std::mem::take(&mut sim.trace),
        steps: sim.steps,
        cycles: sim.checks.cycles,
        binds: sim.checks.binds,
        evictions: sim.checks.evictions,
        refused: sim.checks.refused,
        seconds: (sim.now - START_MS) / 1000,
        machine_ns: sim.machine_ns,
        moves: std::mem::take(&mut sim.checks.tally),
        upstream: std::mem::take(&mut sim.checks.upstream.tally),
    }
}
