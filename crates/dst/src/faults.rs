//! The fault mix of one run, drawn from its seed: how slow and unreliable
//! the API server is, how far the watches lag and how often they drop,
//! how often a scheduler crashes, whether a store keeps the journal,
//! whether two replicas run, whether clocks jump, and what the other
//! actors do.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// One run's faults and world.
#[derive(Clone, Debug)]
pub struct Faults {
    /// Request latency, each way (ms).
    pub latency_ms: (i64, i64),
    /// Requests refused before they take effect (500 or 429), per mille.
    pub error_permille: u32,
    /// Requests that take effect but whose answer is lost (the caller
    /// sees a timeout after `timeout_ms`), per mille.
    pub lost_permille: u32,
    pub timeout_ms: i64,
    /// How far behind the server each watch delivers (ms).
    pub watch_lag_ms: i64,
    pub watch_period_ms: i64,
    /// Watches drop about this often (ms).
    pub drop_watch_every_ms: Option<i64>,
    /// Events the server keeps for watches (older: 410 Gone).
    pub history_window: usize,
    /// A scheduler crashes about this often (ms).
    pub crash_every_ms: Option<i64>,
    /// Whether the scheduler keeps a store (the bind journal).
    pub store: bool,
    /// Scheduler replicas (each as the README starts one).
    pub replicas: usize,
    /// Replicas' clocks jump about this often (ms).
    pub clock_jump_every_ms: Option<i64>,
    /// Another scheduler binds its pods by `spec.nodeName`.
    pub other_scheduler: bool,
    /// Nodes are added, removed, cordoned and tainted.
    pub node_churn: bool,
    /// Users change policy while jobs run: PodDisruptionBudgets over
    /// gangs, Queue quotas and weights, a Queue deleted and recreated,
    /// a PriorityClass deleted and recreated with another value.
    pub policy_churn: bool,
    /// Nodes at start, and GPUs per node.
    pub nodes: usize,
    pub gpus_per_node: u32,
    /// The last seconds of a run: no faults, no actors (liveness).
    pub quiet_seconds: i64,
    /// `bindConcurrency`.
    pub bind_concurrency: usize,
    /// Consolidation on (a later dimension, its own stream): the
    /// scheduler moves running jobs, the workload makes fragments, and a
    /// ReplicaSet-like controller replaces the pods moved
    /// ([`Consolidation`]).
    pub consolidation: Option<crate::consolidation::Consolidation>,
    /// Upstream gangs on (a later dimension, its own stream): the API
    /// serves `scheduling.k8s.io/v1beta1` PodGroups and some gangs are
    /// made with them ([`crate::upstream::UpstreamGangs`]).
    pub upstream: Option<crate::upstream::UpstreamGangs>,
}

impl Faults {
    /// Draws a mix from `rng`: every dimension varies across seeds.
    pub fn draw(rng: &mut ChaCha8Rng) -> Faults {
        let slow = rng.random_bool(0.25);
        let latency_ms = if slow {
            (150, 400)
        } else {
            (1, rng.random_range(2..60))
        };
        let pick = |rng: &mut ChaCha8Rng, p: f64, lo: i64, hi: i64| {
            let v = rng.random_range(lo..hi);
            rng.random_bool(p).then_some(v)
        };
        Faults {
            latency_ms,
            error_permille: if rng.random_bool(0.5) {
                rng.random_range(0..60)
            } else {
                0
            },
            lost_permille: if rng.random_bool(0.4) {
                rng.random_range(0..30)
            } else {
                0
            },
            timeout_ms: rng.random_range(1000..10_000),
            watch_lag_ms: if rng.random_bool(0.5) {
                rng.random_range(0..5000)
            } else {
                0
            },
            watch_period_ms: rng.random_range(10..200),
            drop_watch_every_ms: pick(rng, 0.5, 5_000, 60_000),
            history_window: rng.random_range(200..5000),
            crash_every_ms: pick(rng, 0.5, 20_000, 180_000),
            store: rng.random_bool(0.5),
            replicas: if rng.random_bool(0.3) { 2 } else { 1 },
            clock_jump_every_ms: pick(rng, 0.2, 30_000, 300_000),
            other_scheduler: rng.random_bool(0.4),
            node_churn: rng.random_bool(0.4),
            policy_churn: false,
            nodes: rng.random_range(2..10),
            gpus_per_node: if rng.random_bool(0.8) { 8 } else { 4 },
            quiet_seconds: 90,
            bind_concurrency: if slow || rng.random_bool(0.3) {
                1
            } else {
                rng.random_range(2..17)
            },
            consolidation: None,
            upstream: None,
        }
    }

    /// Draws the dimensions added after the first campaigns, from a
    /// stream of their own: a seed named in a regression test keeps the
    /// run it was named for whenever the new dimensions are off for it.
    pub fn draw_later(&mut self, rng: &mut ChaCha8Rng) {
        self.policy_churn = rng.random_bool(0.5);
    }

    /// One request's latency one way (ms); none in the quiet period.
    pub fn latency(&self, rng: &mut ChaCha8Rng, quiet: bool) -> i64 {
        if quiet {
            return 1;
        }
        rng.random_range(self.latency_ms.0..=self.latency_ms.1)
    }

    /// A one-line summary, for the failure report and the campaign's
    /// totals.
    pub fn summary(&self) -> String {
        let opt = |o: Option<i64>| o.map_or("never".to_string(), |v| format!("~{} s", v / 1000));
        format!(
            "latency {}-{} ms, errors {}‰, lost answers {}‰, watch lag {} ms, watch drops {}, 410 window {}, crashes {}, store {}, replicas {}, clock jumps {}, other scheduler {}, node churn {}, policy churn {}, {} nodes × {} GPUs, bindConcurrency {}, consolidation {}, upstream gangs {}",
            self.latency_ms.0,
            self.latency_ms.1,
            self.error_permille,
            self.lost_permille,
            self.watch_lag_ms,
            opt(self.drop_watch_every_ms),
            self.history_window,
            opt(self.crash_every_ms),
            self.store,
            self.replicas,
            opt(self.clock_jump_every_ms),
            self.other_scheduler,
            self.node_churn,
            self.policy_churn,
            self.nodes,
            self.gpus_per_node,
            self.bind_concurrency,
            self.consolidation.as_ref().map_or("off".to_string(), |c| format!(
                "on (noMoveSeconds {}, nominationTimeoutSeconds {}, replacements never {}‰, late {}‰)",
                c.no_move_seconds, c.nomination_timeout_seconds, c.never_permille, c.late_permille
            )),
            self.upstream
                .as_ref()
                .map_or("off".to_string(), |u| u.summary()),
        )
    }
}
