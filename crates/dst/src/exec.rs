//! Requests at the simulated API server, and the elector's attempts on
//! the Lease (the service's own pure rule, `leader::decide`).

use rand::Rng;
use serde_json::{Value, json};
use trainyard_cluster::Write;
use trainyard_serve::GPU_DEVICES_ANNOTATION;
use trainyard_serve::leader::{Attempt, LeaseView, Role};
use trainyard_serve::machine::Input;

use crate::replica::{Request, Sent};
use crate::sim::{Ev, Sim};

const LEASES: &str = "coordination.k8s.io/leases";

impl Sim {
    /// A request reaches the server: refused (an injected 500 or 429), or
    /// carried out; its answer travels back, or is lost (the caller sees a
    /// timeout) though the request took effect.
    pub(crate) fn arrive(&mut self, r: usize, epoch: u64, sent: Sent) {
        let quiet = self.quiet();
        let back = self.faults.latency(&mut self.rng, quiet);
        if !quiet && self.rng.random_range(0..1000) < self.faults.error_permille {
            let code = if self.rng.random_bool(0.5) {
                "500 InternalError"
            } else {
                "429 TooManyRequests"
            };
            let what = describe(&sent.request);
            self.note(format!("replica {r}: {what}: {code} (injected)"));
            self.at(
                self.now + back,
                Ev::Answer(r, epoch, sent, Err(code.into())),
            );
            return;
        }
        let result = self.carry_out(r, epoch, &sent);
        if !quiet && self.rng.random_range(0..1000) < self.faults.lost_permille {
            self.note(format!(
                "replica {r}: answer lost for {}",
                describe(&sent.request)
            ));
            let t = self.now + self.faults.timeout_ms;
            self.at(
                t,
                Ev::Answer(r, epoch, sent, Err("timeout: no answer".into())),
            );
            return;
        }
        self.at(self.now + back, Ev::Answer(r, epoch, sent, result));
    }

    fn carry_out(&mut self, r: usize, epoch: u64, sent: &Sent) -> Result<(), String> {
        let (ns, name, uid) = sent.request.pod();
        let result = match &sent.request {
            Request::Write { write, .. } => match write {
                Write::Bind(b) => {
                    let notes = if b.gpus.is_empty() {
                        Value::Null
                    } else {
                        let d: Vec<String> = b.gpus.iter().map(u32::to_string).collect();
                        json!({GPU_DEVICES_ANNOTATION: d.join(",")})
                    };
                    let node = b.node.to_string();
                    let result = self.api.bind(&ns, &name, &uid, &node, notes);
                    if result.is_ok() {
                        self.checks
                            .on_bind(r, sent, &node, &self.api, &mut self.trace);
                        if let Some(pod) = self.api.get("/pods", &ns, &name) {
                            self.checks.on_replacement_bound(&pod, &node, self.now);
                        }
                    }
                    result
                }
                Write::Evict(e) => {
                    let before = self.api.get("/pods", &ns, &name);
                    let result = self.api.evict(&ns, &name, &uid);
                    if result.is_ok() {
                        let reason = match e.kind {
                            trainyard_sched::decisions::EvictionKind::Reclaim => "Reclaimed",
                            trainyard_sched::decisions::EvictionKind::Preempt => "Preempted",
                            trainyard_sched::decisions::EvictionKind::Consolidate => "Consolidated",
                        };
                        self.checks.on_evict(
                            &name,
                            &e.message,
                            e.preemptor.as_str(),
                            &mut self.trace,
                        );
                        self.api.event(&ns, &name, reason, &e.message);
                        if let Some(pod) = &before {
                            self.checks.on_upstream_evict(&self.api, pod, self.now);
                        }
                        if e.kind == trainyard_sched::decisions::EvictionKind::Consolidate {
                            self.checks.on_consolidate(
                                (r, epoch),
                                sent,
                                e,
                                before.as_ref(),
                                self.now,
                                &mut self.trace,
                            );
                        }
                    }
                    result
                }
                Write::Nominate(n) => {
                    self.api
                        .nominate(&ns, &name, &uid, Some(&n.node.to_string()))
                }
                Write::Withdraw(_) => self.api.nominate(&ns, &name, &uid, None),
                // The simulated world publishes no DRA devices, so the
                // core decides no claim.
                Write::Claim(c) => Err(format!("no DRA in the simulation: claim {}", c.claim)),
            },
            Request::Rule { rule, eviction, .. } => {
                let result = self.api.evict(&ns, &name, &uid);
                if result.is_ok() {
                    let reason = rule.labels().1;
                    self.checks
                        .on_evict(&name, &eviction.message, reason, &mut self.trace);
                    self.api.event(&ns, &name, reason, &eviction.message);
                }
                result
            }
        };
        let what = describe(&sent.request);
        match &result {
            Ok(()) => self.note(format!("replica {r}: {what}: ok")),
            Err(e) => self.note(format!("replica {r}: {what}: {e}")),
        }
        result
    }

    /// One attempt of replica `r`'s elector (every `retryPeriod`).
    pub(crate) fn elect(&mut self, r: usize) {
        let le = self.replicas[r].settings.service.leader_election.clone();
        self.at(
            self.now + le.retry_period_seconds as i64 * 1000,
            Ev::Elect(r),
        );
        let rep = &self.replicas[r];
        if !rep.up || rep.elector.is_none() {
            return;
        }
        let start = self.now;
        let renew_ms = le.renew_deadline_seconds as i64 * 1000;
        let failed = !self.quiet() && self.rng.random_range(0..1000) < self.faults.error_permille;
        let held = if failed { None } else { Some(self.attempt(r)) };
        let identity = self.replicas[r].identity.clone();
        let Some(e) = self.replicas[r].elector.as_mut() else {
            return;
        };
        let next = match held {
            Some(true) => {
                e.fence_until = start + renew_ms;
                e.held_since = Some(start);
                Role::Leader
            }
            Some(false) => {
                e.fence_until = i64::MIN;
                e.held_since = None;
                Role::Standby
            }
            // No answer: the role follows the fence, which closes at the
            // deadline of the last renewal.
            None => match e.held_since {
                Some(t) if start - t < renew_ms => Role::Leader,
                _ => {
                    e.fence_until = i64::MIN;
                    e.held_since = None;
                    Role::Standby
                }
            },
        };
        if e.role != next {
            e.role = next;
            self.note(format!(
                "replica {r} ({identity}): {}",
                if next == Role::Leader {
                    "leads"
                } else {
                    "stands by"
                }
            ));
            self.input(r, Input::Role(next));
        }
    }

    /// Reads the Lease and takes, keeps or leaves it; whether this replica
    /// holds it.
    fn attempt(&mut self, r: usize) -> bool {
        let le = self.replicas[r].settings.service.leader_election.clone();
        let ns = "default";
        let current = self.api.get(LEASES, ns, &le.lease_name);
        let view = current.as_ref().map(|l| LeaseView {
            version: l["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            holder: l["spec"]["holderIdentity"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            duration_seconds: l["spec"]["leaseDurationSeconds"].as_u64(),
        });
        let identity = self.replicas[r].identity.clone();
        let now = self.now;
        let Some(e) = self.replicas[r].elector.as_mut() else {
            return false;
        };
        let decided = trainyard_serve::leader::decide(
            view.as_ref(),
            &identity,
            &mut e.observed,
            le.lease_duration_seconds,
            now,
        );
        // As the elector writes it: the renew time changes at every attempt
        // (a write that changes nothing keeps the resourceVersion).
        let at = micro_time(now);
        let spec = json!({"holderIdentity": identity, "leaseDurationSeconds": le.lease_duration_seconds,
            "acquireTime": at, "renewTime": at});
        match (decided, current) {
            (Attempt::Standby, _) => false,
            (Attempt::Create, _) | (_, None) => {
                let lease =
                    json!({"metadata": {"name": le.lease_name, "namespace": ns}, "spec": spec});
                self.api.create(LEASES, Some(ns), lease).is_ok()
            }
            (Attempt::Hold { .. }, Some(mut lease)) => {
                lease["spec"]["holderIdentity"] = json!(identity);
                lease["spec"]["renewTime"] = json!(at);
                lease["spec"]["leaseDurationSeconds"] = json!(le.lease_duration_seconds);
                // Conditional on the version read: of two takers, one wins.
                self.api.update(LEASES, lease, false).is_ok()
            }
        }
    }
}

/// RFC 3339 with microseconds, as a Lease's times are written.
fn micro_time(ms: i64) -> String {
    let secs = trainyard_testapi::time::format_rfc3339(ms.div_euclid(1000));
    format!(
        "{}.{:06}Z",
        secs.trim_end_matches('Z'),
        ms.rem_euclid(1000) * 1000
    )
}

/// A request, for the trace.
pub fn describe(r: &Request) -> String {
    match r {
        Request::Write { write, .. } => match write {
            Write::Bind(b) => format!("bind {} to {} GPUs {:?}", b.task.name, b.node, b.gpus),
            Write::Evict(e) => {
                let kind = match e.kind {
                    trainyard_sched::decisions::EvictionKind::Consolidate => " (consolidation)",
                    _ => "",
                };
                format!("evict {} for {}{kind}", e.task.name, e.preemptor)
            }
            Write::Nominate(n) => format!("nominate {} on {}", n.task.name, n.node),
            Write::Withdraw(w) => format!("withdraw {}", w.task.name),
            Write::Claim(c) => format!("allocate claim {}", c.claim),
        },
        Request::Rule { rule, eviction, .. } => {
            format!("evict {} ({})", eviction.task.name, rule.labels().1)
        }
    }
}
