//! Writing one unit ([`crate::machine::Unit`]): the journal's intent, the
//! DRA claim writes (a claim for a pod's extended resources created,
//! allocated and recorded in the pod, [`crate::extended`]), nominations,
//! then the binds and other writes.

use std::collections::{BTreeMap, BTreeSet};

use tokio::sync::{Semaphore, mpsc};
use trainyard_cluster::{ClaimWrite, Write};
use trainyard_model::TaskKey;

use super::{Failure, Outcome, bind, evict, nominate_preemptor, set_nomination, withdraw};
use crate::conn::Conn;
use crate::events::EventSink;
use crate::journal::Journal;
use crate::machine::Unit;
use crate::machine::units::{ClaimSeen, ExtendedClaim};

/// A failed request as the machine is told it.
fn failure(e: &kube::Error) -> Failure {
    let reason = crate::metrics::reason_of(e);
    let uncertain = match e {
        kube::Error::Api(s) => s.code == 504,
        _ => reason == "transport",
    };
    Failure {
        reason,
        message: crate::conn::plain(e),
        uncertain,
    }
}

/// A claim written: the resourceVersion it left, and the claim created
/// for it (extended resources), if any.
struct Written {
    rv: String,
    made: Option<crate::extended::Made>,
}

/// One claim write's fate.
type ClaimResult = Result<Written, Failure>;

/// Writes the unit's claims, all at once.
async fn write_claims(
    conn: &Conn,
    permits: &Semaphore,
    claims: &[ClaimWrite],
    seen: &BTreeMap<String, ClaimSeen>,
    extended: &BTreeMap<String, ExtendedClaim>,
    when: &str,
) -> Vec<ClaimResult> {
    let writes = claims.iter().map(|c| async move {
        let _permit = permits.acquire().await;
        if c.creates() {
            let Some(e) = extended.get(&c.claim) else {
                return Err(Failure {
                    reason: "not_found".into(),
                    message: format!(
                        "no DeviceClass serves {} for the claim of {}",
                        c.extended.join(", "),
                        c.claim
                    ),
                    uncertain: false,
                });
            };
            return match crate::extended::write(conn, c, e, when).await {
                Ok(made) => Ok(Written {
                    rv: made.rv.clone(),
                    made: Some(made),
                }),
                Err(err) => {
                    tracing::warn!(
                        "create the ResourceClaim of the extended resources of {} on {}: {}",
                        c.pods.first().map(|p| p.to_string()).unwrap_or_default(),
                        c.node,
                        crate::conn::plain(&err)
                    );
                    Err(failure(&err))
                }
            };
        }
        let Some(s) = seen.get(&c.claim) else {
            return Err(Failure {
                reason: "not_found".into(),
                message: format!("ResourceClaim {} is not in the watched world", c.claim),
                uncertain: false,
            });
        };
        crate::claims::write(conn, c, s, when)
            .await
            .map(|rv| Written { rv, made: None })
            .map_err(|e| {
                tracing::warn!(
                    "allocate ResourceClaim {} for {} on {}: {}",
                    c.claim,
                    c.job,
                    c.node,
                    crate::conn::plain(&e)
                );
                failure(&e)
            })
    });
    futures::future::join_all(writes).await
}

/// Releases claim `c`, written over `seen` to `w`; whether it was. A
/// claim created for extended resources is deleted.
async fn release(
    conn: &Conn,
    permits: &Semaphore,
    c: &ClaimWrite,
    seen: Option<&ClaimSeen>,
    w: &Written,
    why: &str,
) -> bool {
    let _permit = permits.acquire().await;
    let done = match (&w.made, seen) {
        (Some(m), _) => crate::extended::delete(conn, &m.write.claim, &m.seen).await,
        (None, Some(seen)) => crate::claims::release(conn, c, seen, &w.rv).await,
        (None, None) => return false,
    };
    match done {
        Ok(()) => {
            let name = w.made.as_ref().map_or(&c.claim, |m| &m.write.claim);
            tracing::info!("released ResourceClaim {name} of {}: {why}", c.job);
            true
        }
        Err(e) => {
            // It stays allocated for pods that wait: the next cycle finds
            // it so and places them on its node (or the claim controller
            // releases it once they are gone).
            tracing::warn!(
                "release ResourceClaim {} of {}: {}",
                c.claim,
                c.job,
                crate::conn::plain(&e)
            );
            false
        }
    }
}

/// Writes one unit: its intent into the bind journal first (when the
/// machine opened one: committed durably before any write), its DRA
/// claims (all at once; the unit's binds only when every one of them was
/// written), nominations if asked (all at once; a failed nomination is
/// logged, the bind goes ahead), then its writes, each request holding
/// one of `permits`. Claims written whose pods are then not bound are
/// released.
pub(super) async fn write_unit(
    conn: &Conn,
    events: &EventSink,
    permits: &Semaphore,
    journal: Option<&Journal>,
    unit: Unit,
    out: &mpsc::UnboundedSender<Outcome>,
) {
    let Unit {
        id: unit_id,
        at,
        nominate_first,
        open,
        writes,
        claims: seen,
        extended,
    } = unit;
    let when = crate::report::rfc3339(at);
    let when = when.as_str();
    // The receiver is gone only when the service stops.
    let send = |write: Write, error: Option<Failure>| {
        let _ = out.send(Outcome {
            unit: unit_id,
            at,
            write,
            error,
        });
    };
    if let (Some((id, rec)), Some(j)) = (open, journal) {
        let gang = rec.gang.clone();
        if let Err(e) = j.write(id, rec).await {
            // Bound anyway: the repair timer still guards the gang.
            tracing::error!("bind journal: gang {gang} bound without an intent: {e}");
        }
    }
    let (claims, mut writes): (Vec<Write>, Vec<Write>) = writes
        .into_iter()
        .partition(|w| matches!(w, Write::Claim(_)));
    let claims: Vec<ClaimWrite> = claims
        .into_iter()
        .filter_map(|w| match w {
            Write::Claim(c) => Some(c),
            _ => None,
        })
        .collect();
    let mut results = write_claims(conn, permits, &claims, &seen, &extended, when).await;
    if let Some(f) = results.iter().find_map(|r| r.as_ref().err()).cloned() {
        // The gang is decided again as a whole, with a fresh view: its
        // binds are not made, and what it wrote is released.
        let why = format!("another claim of its gang was not written ({})", f.message);
        for (c, r) in claims.iter().zip(results.iter_mut()) {
            if let Ok(w) = r
                && release(conn, permits, c, seen.get(&c.claim), w, &why).await
            {
                *r = Err(released(&why));
            }
        }
        let (binds, rest): (Vec<Write>, Vec<Write>) = writes
            .into_iter()
            .partition(|w| matches!(w, Write::Bind(_)));
        for b in binds {
            send(
                b,
                Some(Failure {
                    reason: format!("claim_{}", f.reason),
                    message: format!("not bound: {why}"),
                    uncertain: false,
                }),
            );
        }
        writes = rest;
    }
    let binding = writes.iter().any(|w| matches!(w, Write::Bind(_)));
    if nominate_first && binding {
        let nominations = writes.iter().filter_map(|w| match w {
            Write::Bind(b) => Some(async move {
                let _permit = permits.acquire().await;
                if let Err(e) = set_nomination(conn, &b.task, Some(&b.node.to_string())).await {
                    tracing::warn!(
                        "nominate {} on {} before its bind: {}",
                        b.task,
                        b.node,
                        crate::conn::plain(&e)
                    );
                }
            }),
            _ => None,
        });
        futures::future::join_all(nominations).await;
    }
    let requests = writes.into_iter().map(|w| async move {
        let _permit = permits.acquire().await;
        let (result, text) = match &w {
            Write::Bind(b) => {
                let result = bind(conn, events, b, when).await;
                if result.is_err() && nominate_first {
                    // As kube-scheduler clears a pod's nomination when its
                    // binding fails: the node named before the bind is not
                    // where the pod is going.
                    if let Err(e) = set_nomination(conn, &b.task, None).await {
                        tracing::warn!(
                            "clear the nomination of {} after its bind failed: {}",
                            b.task,
                            crate::conn::plain(&e)
                        );
                    }
                }
                (result, format!("bind {} to {}", b.task, b.node))
            }
            Write::Evict(e) => (
                evict(conn, events, e, when).await,
                format!("evict {}", e.task),
            ),
            Write::Nominate(n) => (
                nominate_preemptor(conn, n, when).await,
                format!("nominate {} on {}", n.task, n.node),
            ),
            Write::Withdraw(w) => (
                withdraw(conn, &w.task).await,
                format!("withdraw the nomination of {} on {}", w.task, w.node),
            ),
            // Claims were split off above.
            Write::Claim(c) => (Ok(()), format!("claim {}", c.claim)),
        };
        let error = result.err().map(|e| {
            tracing::warn!("{text}: {}", crate::conn::plain(&e));
            failure(&e)
        });
        // A bind surely not made (refused, not lost, not ours already).
        let unbound = match (&w, &error) {
            (Write::Bind(b), Some(f)) => {
                (!f.uncertain() && f.assigned_to() != Some(b.node.as_str())).then(|| b.task.clone())
            }
            _ => None,
        };
        send(w, error);
        unbound
    });
    let unbound: BTreeSet<TaskKey> = futures::future::join_all(requests)
        .await
        .into_iter()
        .flatten()
        .collect();
    // A claim written for pods none of which was bound is released.
    let why = "none of its pods was bound";
    for (c, r) in claims.iter().zip(results.iter_mut()) {
        if let Ok(w) = r
            && c.pods.iter().all(|p| unbound.contains(p))
            && release(conn, permits, c, seen.get(&c.claim), w, why).await
        {
            *r = Err(released(why));
        }
    }
    for (c, r) in claims.into_iter().zip(results) {
        send(Write::Claim(c), r.err());
    }
}

/// The failure a released claim write is reported with: it did not
/// stand, so its assumption goes.
fn released(why: &str) -> Failure {
    Failure {
        reason: "released".into(),
        message: format!("released: {why}"),
        uncertain: false,
    }
}
