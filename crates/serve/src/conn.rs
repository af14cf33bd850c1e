//! The service's connection for writes: the client and a token bucket
//! that holds its requests to `clientQps` per second with bursts of
//! `clientBurst` (client-go's QPS and Burst), so a large cycle (thousands
//! of binds) does not flood the API server. Every write request (bind,
//! eviction, status, Event, annotation, gate) takes one token; the
//! watches do not (they are long-lived and few).
//!
//! The bucket counts in thousandths of a token, in whole numbers.

use std::sync::Mutex;

use kube::Client;
use tokio::time::{Duration, Instant};

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

/// The client and its limiter.
pub struct Conn {
    client: Client,
    limiter: Limiter,
}

impl Conn {
    pub fn new(client: Client, qps: u32, burst: u32) -> Conn {
        Conn {
            client,
            limiter: Limiter::new(qps, burst),
        }
    }

    /// The client, once a token was taken for one request.
    pub async fn client(&self) -> &Client {
        self.limiter.take().await;
        &self.client
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
