//! The service's connection for writes: the client and a token bucket
//! that holds its requests to `clientQps` per second with bursts of
//! `clientBurst` (client-go's QPS and Burst), so a large cycle (thousands
//! of binds) does not flood the API server. Every write request (bind,
//! eviction, status, Event, annotation, gate) takes one token; the
//! watches do not (they are long-lived and few).
//!
//! The bucket counts in thousandths of a token, in whole numbers.
//!
//! It is also where writes are *fenced* ([`Fence`]): with leader election,
//! a replica whose lease is not (or no longer surely) its own gets
//! [`Fenced`] instead of a client, for every write, at once.

use std::sync::{Arc, Mutex};

use kube::Client;
use tokio::time::{Duration, Instant};

/// A failed request in words a person reads: the API's own message with
/// its code and reason (`404 NotFound: replicasets.apps "web-7d9" not
/// found`), never the client library's debug dump of the Status; other
/// errors (transport, decoding) by their own description.
pub fn plain(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => {
            let reason = if s.reason.is_empty() {
                "Error"
            } else {
                s.reason.as_str()
            };
            format!("{} {reason}: {}", s.code, s.message)
        }
        other => other.to_string(),
    }
}

/// Milli-tokens per token.
const MILLI: u64 = 1000;

/// A token bucket: `qps` tokens per second, at most `burst` saved.
#[derive(Debug)]
pub struct Limiter {
    qps: u64,
    burst: u64,
    /// (milli-tokens available, when last refilled).
    state: Mutex<(u64, Instant)>,
}

impl Limiter {
    /// `qps` ≥ 1 and `burst` ≥ 1 (the settings check them); the bucket
    /// starts full.
    pub fn new(qps: u32, burst: u32) -> Limiter {
        let burst = u64::from(burst.max(1));
        Limiter {
            qps: u64::from(qps.max(1)),
            burst,
            state: Mutex::new((burst * MILLI, Instant::now())),
        }
    }

    /// How long to wait before a token is free at `now`, taking it if it
    /// is free now (`Duration::ZERO`).
    fn try_take(&self, now: Instant) -> Duration {
        // A poisoned lock only means another request panicked mid-update;
        // the counts are still whole numbers, so go on with them.
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(s.1).as_micros();
        let refill =
            u64::try_from(elapsed.saturating_mul(u128::from(self.qps)) / 1000).unwrap_or(u64::MAX);
        s.0 = s.0.saturating_add(refill).min(self.burst * MILLI);
        s.1 = now;
        if s.0 >= MILLI {
            s.0 -= MILLI;
            return Duration::ZERO;
        }
        let missing = MILLI - s.0;
        // missing milli-tokens at qps tokens/s = missing / qps ms.
        Duration::from_micros((missing * 1000).div_ceil(self.qps))
    }

    /// Waits for a token and takes it.
    pub async fn take(&self) {
        loop {
            let wait = self.try_take(Instant::now());
            if wait.is_zero() {
                return;
            }
            tokio::time::sleep(wait).await;
        }
    }
}

/// A write refused because this replica may not write: it does not hold
/// the leader lease, or can no longer be sure it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("fenced: this replica is not the leader")]
pub struct Fenced;

/// Until when this replica may write: the leader election sets it after
/// each renewal (to the renewal's start plus the renew deadline, which is
/// shorter than the lease), and clears it when the lease is lost. Checked
/// by the monotonic clock before every write, so writes stop at the
/// deadline even when the renewing task is stuck.
#[derive(Debug, Default)]
pub struct Fence {
    until: Mutex<Option<Instant>>,
}

impl Fence {
    /// A fence that is open for good (no leader election).
    pub fn open() -> Fence {
        Fence {
            until: Mutex::new(Some(
                Instant::now() + Duration::from_secs(100 * 365 * 86_400),
            )),
        }
    }

    /// A fence that is closed until [`Fence::open_until`].
    pub fn closed() -> Fence {
        Fence::default()
    }

    /// Writes are allowed until `t`.
    pub fn open_until(&self, t: Instant) {
        *self.until.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
    }

    /// No more writes.
    pub fn close(&self) {
        *self.until.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Whether a write may start now.
    pub fn is_open(&self) -> bool {
        self.until
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|t| Instant::now() < t)
    }
}

/// The client, its limiter and its fence.
pub struct Conn {
    client: Client,
    limiter: Limiter,
    fence: Arc<Fence>,
}

impl Conn {
    /// Writes through `client`, at most `qps` per second with bursts of
    /// `burst`, while `fence` is open.
    pub fn new(client: Client, qps: u32, burst: u32, fence: Arc<Fence>) -> Conn {
        Conn {
            client,
            limiter: Limiter::new(qps, burst),
            fence,
        }
    }

    /// The client for one request, once a token was taken and if the
    /// fence is open (checked after the wait for the token).
    pub async fn client(&self) -> Result<&Client, kube::Error> {
        self.limiter.take().await;
        if !self.fence.is_open() {
            return Err(kube::Error::Service(Box::new(Fenced)));
        }
        Ok(&self.client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_failure_reads_as_the_api_said_it_not_as_a_debug_dump() {
        let status =
            kube::core::Status::failure("replicasets.apps \"web-7d9\" not found", "NotFound")
                .with_code(404);
        let e = kube::Error::Api(Box::new(status));
        assert!(
            e.to_string().contains("Status {"),
            "kube's own Display: {e}"
        );
        assert_eq!(
            plain(&e),
            "404 NotFound: replicasets.apps \"web-7d9\" not found"
        );
    }

    #[test]
    fn a_fence_opens_until_a_time_and_closes() {
        let f = Fence::closed();
        assert!(!f.is_open());
        f.open_until(Instant::now() + Duration::from_secs(60));
        assert!(f.is_open());
        f.open_until(Instant::now());
        assert!(!f.is_open(), "the deadline passed");
        f.open_until(Instant::now() + Duration::from_secs(60));
        f.close();
        assert!(!f.is_open());
        assert!(Fence::open().is_open());
    }

    #[test]
    fn a_burst_then_qps() {
        let l = Limiter::new(10, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(l.try_take(t0), Duration::ZERO);
        }
        // Empty: one token takes 100 ms at 10/s.
        assert_eq!(l.try_take(t0), Duration::from_millis(100));
        assert_eq!(
            l.try_take(t0 + Duration::from_millis(40)),
            Duration::from_millis(60)
        );
        assert_eq!(l.try_take(t0 + Duration::from_millis(100)), Duration::ZERO);
        // A long pause refills no more than the burst.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(l.try_take(later), Duration::ZERO);
        }
        assert!(l.try_take(later) > Duration::ZERO);
    }
}
