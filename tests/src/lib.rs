//! The scenario harness: a scenario file is one YAML document
//!
//! ```yaml
//! description: what the scenario shows
//! now: 2026-11-22T10:00:00Z        # optional, default 1970-01-01T00:00:00Z
//! config: { ... }                   # optional scheduler config (same as --config)
//! snapshot: |                       # the input, exactly as `trainyard schedule` reads it
//!   apiVersion: v1
//!   kind: Node
//!   ...
//! expect:
//!   binds:                          # exactly these pods are bound (all of them)
//!   - {pod: ns/name, node: n1, gpus: [0, 1]}   # node and gpus optional
//!   pending:                        # exactly these jobs are pending (all of them)
//!   - {job: ns/name, message: "exact text"}    # or `contains: "part"`, `kind: unschedulable`
//!   fairShare:                      # fair share per queue name and resource (quantities)
//!     team-a: {nvidia.com/gpu: 8, cpu: "12"}
//!   allocated: { ... }              # same shape, allocation after the cycle
//!   evictions:                      # exactly these pods are evicted (default: none)
//!   - {pod: ns/name, message: "exact text"}    # or `contains:`; node optional
//!   nominations:                    # exactly these pods are nominated (optional)
//!   - {pod: ns/name, node: n1, gpus: [0]}
//!   moves:                          # exactly these jobs are moved by consolidation (optional)
//!   - {job: ns/name, for: ns/gang, to: [n2], message: "exact text"}   # to, message optional
//!   reservations:                   # exactly these reservations (optional)
//!   - {job: ns/name, start: 2026-11-22T11:00:00Z, nodes: [n1, n2], domain: leaf l0, backfilled: 1}
//!   loadError: "text"               # instead of the above: loading must fail with this text
//! ```
//!
//! Every scenario in `tests/scenarios/` runs through [`run_scenario`].

use std::collections::BTreeMap;

use serde::Deserialize;
use trainyard_ingest::{LoadOptions, Source};
use trainyard_model::{ResourceName, Resources, Timestamp};
use trainyard_sched::{Config, Decisions};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub description: String,
    #[serde(default)]
    pub now: Option<String>,
    #[serde(default)]
    pub config: Option<serde_json::Value>,
    pub snapshot: String,
    pub expect: Expect,
    /// Later cycles: objects changed after the first, each cycle with its
    /// own expectations. A scenario with steps runs object by object
    /// through the world state, as the live service does.
    #[serde(default)]
    pub then: Vec<Step>,
}

/// One later cycle of a scenario.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// What changed, in words.
    pub description: String,
    /// Objects created or replaced (YAML documents).
    #[serde(default)]
    pub apply: String,
    /// Objects deleted, as `Kind namespace/name` (`Kind name` when
    /// cluster-scoped).
    #[serde(default)]
    pub delete: Vec<String>,
    pub expect: Expect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    #[serde(default)]
    pub binds: Option<Vec<ExpectBind>>,
    #[serde(default)]
    pub pending: Option<Vec<ExpectPending>>,
    #[serde(default)]
    pub fair_share: BTreeMap<String, BTreeMap<String, serde_json::Value>>,
    #[serde(default)]
    pub allocated: BTreeMap<String, BTreeMap<String, serde_json::Value>>,
    #[serde(default)]
    pub load_error: Option<String>,
    /// Checked always: a scenario that lists none expects none.
    #[serde(default)]
    pub evictions: Vec<ExpectEviction>,
    #[serde(default)]
    pub nominations: Option<Vec<ExpectBind>>,
    #[serde(default)]
    pub reservations: Option<Vec<ExpectReservation>>,
    /// Jobs moved by consolidation (`Decisions::moves`): when given,
    /// exactly these.
    #[serde(default)]
    pub moves: Option<Vec<ExpectMove>>,
    /// DRA claims the binds need (`Decisions::claims`): when given, exactly
    /// these, each checked in the fields it sets.
    #[serde(default)]
    pub claims: Option<Vec<ExpectClaim>>,
}

/// A claim decision: `devices` are device names in allocation order, or
/// `[]` for a claim allocated before that the pods only join.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectClaim {
    pub claim: String,
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub devices: Option<Vec<String>>,
    /// `request` of each device, same order.
    #[serde(default)]
    pub requests: Option<Vec<String>>,
    #[serde(default)]
    pub pods: Option<Vec<String>>,
    /// The extended resources of a pod's KEP-5004 claim.
    #[serde(default)]
    pub extended: Option<Vec<String>>,
}

/// The claims expectation checked against the decisions.
fn check_claims(d: &Decisions, want: &[ExpectClaim], errors: &mut Vec<String>) {
    let mut got: BTreeMap<&str, &trainyard_sched::ClaimDecision> =
        d.claims.iter().map(|c| (c.claim.as_str(), c)).collect();
    for w in want {
        let Some(c) = got.remove(w.claim.as_str()) else {
            errors.push(format!(
                "expected claim {} to be decided; it was not",
                w.claim
            ));
            continue;
        };
        if let Some(n) = &w.node
            && *n != c.node
        {
            errors.push(format!("claim {} on {}, expected {n}", w.claim, c.node));
        }
        let devices: Vec<&str> = c.allocation.iter().flatten().map(|a| &*a.device).collect();
        if let Some(want) = &w.devices
            && *want != devices
        {
            errors.push(format!(
                "claim {} got devices {devices:?}, expected {want:?}",
                w.claim
            ));
        }
        let requests: Vec<&str> = c.allocation.iter().flatten().map(|a| &*a.request).collect();
        if let Some(want) = &w.requests
            && *want != requests
        {
            errors.push(format!(
                "claim {} got requests {requests:?}, expected {want:?}",
                w.claim
            ));
        }
        if let Some(want) = &w.extended
            && *want != c.extended
        {
            errors.push(format!(
                "claim {} serves extended resources {:?}, expected {want:?}",
                w.claim, c.extended
            ));
        }
        let pods: Vec<String> = c.pods.iter().map(|p| p.to_string()).collect();
        if let Some(want) = &w.pods
            && *want != pods
        {
            errors.push(format!(
                "claim {} for pods {pods:?}, expected {want:?}",
                w.claim
            ));
        }
    }
    for (claim, c) in got {
        errors.push(format!("unexpected claim {claim} on {}", c.node));
    }
}

/// A reservation: `domain` and `backfilled` are checked when given.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectReservation {
    pub job: String,
    /// RFC 3339.
    pub start: String,
    pub nodes: Vec<String>,
    #[serde(default)]
    pub domain: Option<String>,
    #[serde(default)]
    pub backfilled: Option<u32>,
}

/// A job moved by consolidation: for which gang, to which nodes (sorted,
/// distinct), with which message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectMove {
    pub job: String,
    #[serde(rename = "for")]
    pub for_job: String,
    #[serde(default)]
    pub to: Option<Vec<String>>,
    #[serde(default)]
    pub message: Option<String>,
}

fn check_moves(d: &Decisions, want: &[ExpectMove], errors: &mut Vec<String>) {
    let mut got: BTreeMap<&str, &trainyard_sched::Move> =
        d.moves.iter().map(|m| (m.job.as_str(), m)).collect();
    for w in want {
        let Some(m) = got.remove(w.job.as_str()) else {
            errors.push(format!("expected {} to be moved; it was not", w.job));
            continue;
        };
        if m.for_job.as_str() != w.for_job {
            errors.push(format!(
                "{} moved for {}, expected for {}",
                w.job, m.for_job, w.for_job
            ));
        }
        if let Some(to) = &w.to {
            let mut nodes: Vec<&str> = m.pods.iter().map(|p| p.to.as_str()).collect();
            nodes.sort_unstable();
            nodes.dedup();
            if nodes != to.iter().map(String::as_str).collect::<Vec<_>>() {
                errors.push(format!("{} moved to {nodes:?}, expected {to:?}", w.job));
            }
        }
        if let Some(msg) = &w.message
            && *msg != m.message
        {
            errors.push(format!(
                "{} move message:\n  got:      {}\n  expected: {msg}",
                w.job, m.message
            ));
        }
    }
    for (job, m) in got {
        errors.push(format!("unexpected move of {job}: {}", m.message));
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectEviction {
    pub pod: String,
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub contains: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectBind {
    pub pod: String,
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub gpus: Option<Vec<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectPending {
    pub job: String,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub contains: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
}

/// Parses a quantity as the snapshot would for resource `name`.
fn amount(name: &ResourceName, v: &serde_json::Value) -> Result<u64, String> {
    let text = match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        other => return Err(format!("quantity expected, got {other}")),
    };
    let q = trainyard_crd::parse_quantity(&text).map_err(|e| e.to_string())?;
    let r = match name {
        ResourceName::Cpu | ResourceName::Gpu => q.to_milli_ceil(),
        _ => q.to_units_ceil(),
    };
    r.map_err(|e| e.to_string())
}

fn check_resources(
    what: &str,
    d: &Decisions,
    want: &BTreeMap<String, BTreeMap<String, serde_json::Value>>,
    pick: impl Fn(&trainyard_sched::QueueReport) -> &Resources,
    errors: &mut Vec<String>,
) {
    for (queue, res) in want {
        let Some(row) = d
            .queues
            .iter()
            .find(|q| q.queue == *queue || q.name == *queue)
        else {
            errors.push(format!("{what}: no queue {queue} in decisions"));
            continue;
        };
        for (rname, v) in res {
            let name = ResourceName::parse(rname);
            match amount(&name, v) {
                Ok(expected) => {
                    let got = pick(row).get(&name);
                    if got != expected {
                        errors.push(format!(
                            "{what} of {queue} {rname}: expected {}, got {}",
                            name.format_amount(expected),
                            name.format_amount(got)
                        ));
                    }
                }
                Err(e) => errors.push(format!("{what} of {queue} {rname}: bad expectation: {e}")),
            }
        }
    }
}

/// Runs one scenario file's text; returns every mismatch.
pub fn run_scenario(name: &str, text: &str) -> Result<(), Vec<String>> {
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| vec![format!("{name}: not valid YAML: {e}")])?;
    let sc: Scenario = serde_path_to_error::deserialize(value)
        .map_err(|e| vec![format!("{name}: field {}: {}", e.path(), e.inner())])?;
    let mut errors = Vec::new();
    let config: Config = match &sc.config {
        Some(v) => serde_path_to_error::deserialize(v.clone())
            .map_err(|e| vec![format!("{name}: config.{}: {}", e.path(), e.inner())])?,
        None => Config::default(),
    };
    let now = match &sc.now {
        Some(t) => {
            trainyard_crd::parse_rfc3339(t).map_err(|e| vec![format!("{name}: now: {e}")])?
        }
        None => Timestamp(0),
    };
    let loaded = trainyard_ingest::load(
        &[Source::new(format!("{name}#snapshot"), sc.snapshot.clone())],
        &LoadOptions::default(),
    );
    let loaded = match (loaded, &sc.expect.load_error) {
        (Err(e), Some(want)) => {
            let got = e.to_string();
            return if got.contains(want.as_str()) {
                Ok(())
            } else {
                Err(vec![format!(
                    "load error {got:?} does not contain {want:?}"
                )])
            };
        }
        (Ok(_), Some(want)) => {
            return Err(vec![format!("expected load error {want:?}, but it loaded")]);
        }
        (Err(e), None) => return Err(vec![format!("snapshot did not load:\n{e}")]),
        (Ok(l), None) => l,
    };
    // Through the one world state, as the CLI, the simulator and the
    // service take their snapshots.
    let mut world = trainyard_cluster::ClusterState::from_snapshot(loaded.snapshot);
    let d = trainyard_sched::schedule(&world.snapshot(), &config, now);

    if !sc.then.is_empty() {
        return run_steps(name, &sc, &config, now);
    }
    errors.extend(check(&sc.expect, &d));
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Every mismatch between `expect` and the decisions `d`.
fn check(expect: &Expect, d: &Decisions) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(binds) = &expect.binds {
        let mut got: BTreeMap<String, &trainyard_sched::Bind> =
            d.binds.iter().map(|b| (b.task.to_string(), b)).collect();
        for want in binds {
            match got.remove(want.pod.as_str()) {
                None => errors.push(format!("expected {} to be bound; it was not", want.pod)),
                Some(b) => {
                    if let Some(n) = &want.node
                        && *n != b.node
                    {
                        errors.push(format!("{} bound to {}, expected {n}", want.pod, b.node));
                    }
                    if let Some(g) = &want.gpus
                        && *g != b.gpus
                    {
                        errors.push(format!(
                            "{} got GPUs {:?}, expected {g:?}",
                            want.pod, b.gpus
                        ));
                    }
                }
            }
        }
        for (pod, b) in got {
            errors.push(format!("unexpected bind {pod} -> {} {:?}", b.node, b.gpus));
        }
    }
    if let Some(pending) = &expect.pending {
        let mut got: BTreeMap<&str, &trainyard_sched::PendingJob> =
            d.pending.iter().map(|p| (p.job.as_str(), p)).collect();
        for want in pending {
            match got.remove(want.job.as_str()) {
                None => errors.push(format!("expected {} to be pending; it was not", want.job)),
                Some(p) => {
                    if let Some(m) = &want.message
                        && *m != p.message
                    {
                        errors.push(format!(
                            "{} pending message:\n  got:      {}\n  expected: {m}",
                            want.job, p.message
                        ));
                    }
                    if let Some(c) = &want.contains
                        && !p.message.contains(c.as_str())
                    {
                        errors.push(format!(
                            "{} pending message {:?} does not contain {c:?}",
                            want.job, p.message
                        ));
                    }
                    if let Some(k) = &want.kind {
                        let kind = serde_json::to_value(&p.reason)
                            .ok()
                            .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(String::from));
                        if kind.as_deref() != Some(k.as_str()) {
                            errors
                                .push(format!("{} pending kind {kind:?}, expected {k}", want.job));
                        }
                    }
                }
            }
        }
        for (job, p) in got {
            errors.push(format!("unexpected pending job {job}: {}", p.message));
        }
    }
    {
        let mut got: BTreeMap<String, &trainyard_sched::Eviction> = d
            .evictions
            .iter()
            .map(|e| (e.task.to_string(), e))
            .collect();
        for want in &expect.evictions {
            match got.remove(want.pod.as_str()) {
                None => errors.push(format!("expected {} to be evicted; it was not", want.pod)),
                Some(e) => {
                    if let Some(n) = &want.node
                        && *n != e.node
                    {
                        errors.push(format!("{} evicted on {}, expected {n}", want.pod, e.node));
                    }
                    if let Some(m) = &want.message
                        && *m != e.message
                    {
                        errors.push(format!(
                            "{} eviction message:\n  got:      {}\n  expected: {m}",
                            want.pod, e.message
                        ));
                    }
                    if let Some(c) = &want.contains
                        && !e.message.contains(c.as_str())
                    {
                        errors.push(format!(
                            "{} eviction message {:?} does not contain {c:?}",
                            want.pod, e.message
                        ));
                    }
                }
            }
        }
        for (pod, e) in got {
            errors.push(format!(
                "unexpected eviction {pod} on {}: {}",
                e.node, e.message
            ));
        }
    }
    if let Some(want) = &expect.claims {
        check_claims(d, want, &mut errors);
    }
    if let Some(want) = &expect.moves {
        check_moves(d, want, &mut errors);
    }
    if let Some(want) = &expect.reservations {
        let mut got: BTreeMap<&str, &trainyard_sched::Reservation> =
            d.reservations.iter().map(|r| (r.job.as_str(), r)).collect();
        for w in want {
            let Some(r) = got.remove(w.job.as_str()) else {
                errors.push(format!(
                    "expected a reservation of {}; there was none",
                    w.job
                ));
                continue;
            };
            match trainyard_crd::parse_rfc3339(&w.start) {
                Ok(t) if t == r.start => {}
                Ok(_) => errors.push(format!(
                    "reservation of {} starts at {} ms, expected {}",
                    w.job, r.start.0, w.start
                )),
                Err(e) => errors.push(format!("reservation of {}: start: {e}", w.job)),
            }
            let nodes: Vec<&str> = r.nodes.iter().map(|n| n.0.as_str()).collect();
            if nodes != w.nodes.iter().map(String::as_str).collect::<Vec<_>>() {
                errors.push(format!(
                    "reservation of {} holds {nodes:?}, expected {:?}",
                    w.job, w.nodes
                ));
            }
            if w.domain.is_some() && w.domain != r.domain {
                errors.push(format!(
                    "reservation of {} in {:?}, expected {:?}",
                    w.job, r.domain, w.domain
                ));
            }
            if let Some(b) = w.backfilled
                && b != r.backfilled
            {
                errors.push(format!(
                    "reservation of {}: {} jobs backfilled, expected {b}",
                    w.job, r.backfilled
                ));
            }
        }
        for (job, r) in got {
            errors.push(format!(
                "unexpected reservation of {job} from {} ms on {:?}",
                r.start.0, r.nodes
            ));
        }
    }
    if let Some(noms) = &expect.nominations {
        let mut got: BTreeMap<String, &trainyard_sched::NominationDecision> = d
            .nominations
            .iter()
            .map(|n| (n.task.to_string(), n))
            .collect();
        for want in noms {
            match got.remove(want.pod.as_str()) {
                None => errors.push(format!("expected {} to be nominated; it was not", want.pod)),
                Some(n) => {
                    if let Some(node) = &want.node
                        && *node != n.node
                    {
                        errors.push(format!(
                            "{} nominated to {}, expected {node}",
                            want.pod, n.node
                        ));
                    }
                    if let Some(g) = &want.gpus
                        && *g != n.gpus
                    {
                        errors.push(format!(
                            "{} nominated GPUs {:?}, expected {g:?}",
                            want.pod, n.gpus
                        ));
                    }
                }
            }
        }
        for (pod, n) in got {
            errors.push(format!("unexpected nomination {pod} -> {}", n.node));
        }
    }
    check_resources(
        "fairShare",
        d,
        &expect.fair_share,
        |q| &q.fair_share,
        &mut errors,
    );
    check_resources(
        "allocated",
        d,
        &expect.allocated,
        |q| &q.allocated,
        &mut errors,
    );
    if expect.binds.is_none()
        && expect.pending.is_none()
        && expect.fair_share.is_empty()
        && expect.allocated.is_empty()
    {
        errors.push("scenario expects nothing".into());
    }
    errors
}

/// A scenario with later steps, object by object through the world state.
fn run_steps(
    name: &str,
    sc: &Scenario,
    config: &Config,
    now: Timestamp,
) -> Result<(), Vec<String>> {
    use trainyard_cluster::{Change, ClusterState, Decoded, ObjectChange};
    let mut world = ClusterState::for_objects(LoadOptions::default());
    let apply = |world: &mut ClusterState, what: &str, text: &str| -> Vec<String> {
        let decoded = Decoded::of(trainyard_ingest::read(&[Source::new(
            what,
            text.to_string(),
        )]));
        let mut errors: Vec<String> = decoded
            .errors
            .iter()
            .map(|e| format!("{what}: {e}"))
            .collect();
        for c in decoded.changes {
            world.apply(Change::Object(c));
        }
        errors.extend(
            world
                .problems()
                .errors
                .iter()
                .map(|e| format!("{what}: {e}")),
        );
        errors
    };
    let mut errors = apply(&mut world, &format!("{name}#snapshot"), &sc.snapshot);
    let d = trainyard_sched::schedule(&world.snapshot(), config, now);
    errors.extend(
        check(&sc.expect, &d)
            .into_iter()
            .map(|e| format!("first cycle: {e}")),
    );
    for (i, step) in sc.then.iter().enumerate() {
        let what = format!("{name}#then[{i}]");
        for object in &step.delete {
            let (kind, rest) = object.split_once(' ').unwrap_or((object.as_str(), ""));
            let (ns, n) = match rest.split_once('/') {
                Some((ns, n)) => (Some(ns), n),
                None => (None, rest),
            };
            match ObjectChange::gone(kind, ns, n) {
                Some(c) => {
                    world.apply(Change::Object(c));
                }
                None => errors.push(format!("{what}: cannot delete {object:?}")),
            }
        }
        if !step.apply.is_empty() {
            errors.extend(apply(&mut world, &what, &step.apply));
        }
        let d = trainyard_sched::schedule(&world.snapshot(), config, now);
        errors.extend(
            check(&step.expect, &d)
                .into_iter()
                .map(|e| format!("then[{i}] ({}): {e}", step.description)),
        );
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}
