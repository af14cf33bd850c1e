//! Leader election on a `coordination.k8s.io/v1` Lease, with fencing.
//!
//! Every replica watches and keeps its world current; only the holder of
//! the lease runs cycles and writes. The elector, every `retryPeriod`:
//! reads the Lease; if it is free (no holder), its holder is this replica,
//! or the holder has not renewed it for `leaseDuration` *as observed here*
//! (the time this replica last saw the Lease change, by its monotonic
//! clock, as client-go does, so clocks that disagree do not matter), it
//! writes itself as holder with the Lease's `resourceVersion` (optimistic
//! concurrency: of two replicas taking a free Lease, one gets a 409).
//!
//! Fencing: a successful renewal started at `t` opens the [`Fence`] until
//! `t + renewDeadline`. `renewDeadline < leaseDuration`, and another
//! replica takes the Lease only after observing it unchanged for
//! `leaseDuration`, which starts no earlier than the write at `t` landed;
//! so this replica's writes stop (the fence is checked before every
//! request, [`Conn::client`](crate::conn::Conn::client)) before anyone else
//! can hold the Lease, even when the elector itself is stuck or the API
//! cannot be reached. A request already sent when the fence closes may
//! still land; the API's own checks (a bind of a bound pod is a 409) keep
//! it from doing harm twice.
//!
//! On shutdown the leader releases the Lease (clears its holder) so a
//! standby takes over at once instead of after `leaseDuration`.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::{Duration, Instant};

use crate::conn::Fence;
use crate::settings::LeaderElection;

/// This replica's part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not known yet (the first attempt has not answered).
    Unknown,
    /// Holds the Lease: runs cycles and writes.
    Leader,
    /// Another replica holds it: keeps its caches warm, writes nothing.
    Standby,
}

/// What the elector last saw of the Lease: its resourceVersion and when
/// it was first seen so (this replica's monotonic clock, in ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub version: String,
    pub since_ms: i64,
}

/// The Lease as an attempt reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseView {
    pub version: String,
    /// Empty: free.
    pub holder: String,
    pub duration_seconds: Option<u64>,
}

/// What one attempt does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// No Lease: create it, held by this replica.
    Create,
    /// Write this replica as holder (conditional on the version read):
    /// `taking` when another held it (or nobody).
    Hold { taking: bool },
    /// Another replica holds it and renewed it within its duration.
    Standby,
}

/// Decides one attempt on the Lease read (`None`: none exists) at
/// `now_ms` (monotonic): a holder other than `identity` keeps it until
/// this replica has seen the Lease unchanged for its duration. Pure: the
/// elector and the deterministic simulation share it.
pub fn decide(
    lease: Option<&LeaseView>,
    identity: &str,
    observed: &mut Option<Observed>,
    default_duration_s: u64,
    now_ms: i64,
) -> Attempt {
    let Some(lease) = lease else {
        return Attempt::Create;
    };
    if observed.as_ref().is_none_or(|o| o.version != lease.version) {
        *observed = Some(Observed {
            version: lease.version.clone(),
            since_ms: now_ms,
        });
    }
    let duration_ms = i64::try_from(
        lease
            .duration_seconds
            .unwrap_or(default_duration_s)
            .saturating_mul(1000),
    )
    .unwrap_or(i64::MAX);
    let since = observed.as_ref().map_or(now_ms, |o| o.since_ms);
    if !lease.holder.is_empty() && lease.holder != identity && now_ms - since < duration_ms {
        return Attempt::Standby;
    }
    Attempt::Hold {
        taking: lease.holder != identity,
    }
}

fn now_micro() -> MicroTime {
    let ms = crate::wall_clock().0;
    MicroTime(
        k8s_openapi::jiff::Timestamp::from_millisecond(ms)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

/// Milliseconds since `epoch` by the monotonic clock.
fn mono_ms(epoch: Instant) -> i64 {
    i64::try_from(Instant::now().saturating_duration_since(epoch).as_millis()).unwrap_or(i64::MAX)
}

/// One attempt to take or keep the Lease: whether this replica holds it.
async fn attempt(
    api: &Api<Lease>,
    s: &LeaderElection,
    identity: &str,
    (observed, epoch): (&mut Option<Observed>, Instant),
) -> Result<bool, kube::Error> {
    let current = api.get_opt(&s.lease_name).await?;
    let view = current.as_ref().map(|l| {
        let spec = l.spec.clone().unwrap_or_default();
        LeaseView {
            version: l.metadata.resource_version.clone().unwrap_or_default(),
            holder: spec.holder_identity.unwrap_or_default(),
            duration_seconds: spec
                .lease_duration_seconds
                .map(|d| u64::try_from(d).unwrap_or(0)),
        }
    });
    let decided = decide(
        view.as_ref(),
        identity,
        observed,
        s.lease_duration_seconds,
        mono_ms(epoch),
    );
    let taking = match (decided, current) {
        (Attempt::Standby, _) => return Ok(false),
        (Attempt::Create, _) | (_, None) => {
            let lease: Lease = Lease {
                metadata: kube::api::ObjectMeta {
                    name: Some(s.lease_name.clone()),
                    namespace: Some(s.lease_namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(identity.to_string()),
                    lease_duration_seconds: Some(s.lease_duration_seconds as i32),
                    acquire_time: Some(now_micro()),
                    renew_time: Some(now_micro()),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        }
        (Attempt::Hold { taking }, Some(lease)) => (taking, lease),
    };
    let (taking, mut lease) = taking;
    let mut spec = lease.spec.clone().unwrap_or_default();
    spec.holder_identity = Some(identity.to_string());
    spec.lease_duration_seconds = Some(s.lease_duration_seconds as i32);
    spec.renew_time = Some(now_micro());
    if taking {
        spec.acquire_time = Some(now_micro());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    lease.spec = Some(spec);
    match api
        .replace(&s.lease_name, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Clears the holder of the Lease if it is `identity`.
async fn release(api: &Api<Lease>, s: &LeaderElection, identity: &str) -> Result<(), kube::Error> {
    let Some(mut lease) = api.get_opt(&s.lease_name).await? else {
        return Ok(());
    };
    let mut spec = lease.spec.clone().unwrap_or_default();
    if spec.holder_identity.as_deref() != Some(identity) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.renew_time = Some(now_micro());
    lease.spec = Some(spec);
    api.replace(&s.lease_name, &PostParams::default(), &lease)
        .await
        .map(|_| ())
}

/// Runs the election until `shutdown` turns true, opening and closing
/// `fence` and publishing this replica's [`Role`].
pub async fn run(
    client: Client,
    s: LeaderElection,
    identity: String,
    fence: Arc<Fence>,
    role: watch::Sender<Role>,
    mut shutdown: watch::Receiver<bool>,
) {
    let api: Api<Lease> = Api::namespaced(client, &s.lease_namespace);
    let renew = Duration::from_secs(s.renew_deadline_seconds);
    let retry = Duration::from_secs(s.retry_period_seconds);
    let mut observed = None;
    let mut held_since: Option<Instant> = None;
    let epoch = Instant::now();
    loop {
        let start = Instant::now();
        let result =
            tokio::time::timeout(renew, attempt(&api, &s, &identity, (&mut observed, epoch))).await;
        let next = match result {
            Ok(Ok(true)) => {
                fence.open_until(start + renew);
                held_since = Some(start);
                Role::Leader
            }
            Ok(Ok(false)) => {
                fence.close();
                held_since = None;
                Role::Standby
            }
            failed => {
                let why = match failed {
                    Ok(Err(e)) => crate::conn::plain(&e),
                    _ => format!(
                        "no answer within the renew deadline ({} s)",
                        renew.as_secs()
                    ),
                };
                tracing::warn!(lease = %s.lease_name, "leader election: {why}");
                // The fence closes by itself at the deadline of the last
                // renewal; the role follows it.
                match held_since {
                    Some(t) if start.saturating_duration_since(t) < renew => Role::Leader,
                    Some(_) => {
                        fence.close();
                        held_since = None;
                        Role::Standby
                    }
                    None => Role::Standby,
                }
            }
        };
        let was = *role.borrow();
        if was != next {
            tracing::info!(identity = %identity, lease = %s.lease_name, "leader election: {was:?} -> {next:?}");
            role.send_replace(next);
        }
        tokio::select! {
            () = tokio::time::sleep_until(start + retry) => {}
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    break;
                }
            }
        }
    }
    fence.close();
    if *role.borrow() == Role::Leader {
        match tokio::time::timeout(renew, release(&api, &s, &identity)).await {
            Ok(Ok(())) => tracing::info!(lease = %s.lease_name, "released the lease"),
            Ok(Err(e)) => tracing::warn!(
                lease = %s.lease_name,
                "releasing the lease: {}",
                crate::conn::plain(&e)
            ),
            Err(_) => tracing::warn!(lease = %s.lease_name, "releasing the lease: no answer"),
        }
    }
    role.send_replace(Role::Standby);
}
