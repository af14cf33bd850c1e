//! Fault injection: latency, random 429/500 answers (seeded), forced 410s on the
//! next lists/watches, dropping open watches and pausing the whole server.
//! Set from the library handle or `PUT /testapi/faults` with this JSON:
//! `{"latencyMs": 0, "rate429": 0.0, "rate500": 0.0, "force410": 0, "paused": false}`.

use serde_json::{Value, json};

/// The faults in force.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// Added latency per request, in milliseconds.
    pub latency_ms: u64,
    /// Fraction (0..=1) of requests answered 429 TooManyRequests.
    pub rate_429: f64,
    /// Fraction (0..=1) of requests answered 500 InternalError.
    pub rate_500: f64,
    /// The next this-many list or watch requests fail with 410 Expired.
    pub force_410: u32,
    /// Requests wait until this is false.
    pub paused: bool,
}

impl Faults {
    /// JSON form.
    pub fn to_json(&self) -> Value {
        json!({"latencyMs": self.latency_ms, "rate429": self.rate_429, "rate500": self.rate_500, "force410": self.force_410, "paused": self.paused})
    }

    /// Reads the JSON form; absent keys keep their current values.
    pub fn merge_json(&mut self, v: &Value) {
        if let Some(x) = v["latencyMs"].as_u64() {
            self.latency_ms = x;
        }
        if let Some(x) = v["rate429"].as_f64() {
            self.rate_429 = x.clamp(0.0, 1.0);
        }
        if let Some(x) = v["rate500"].as_f64() {
            self.rate_500 = x.clamp(0.0, 1.0);
        }
        if let Some(x) = v["force410"].as_u64() {
            self.force_410 = u32::try_from(x).unwrap_or(u32::MAX);
        }
        if let Some(x) = v["paused"].as_bool() {
            self.paused = x;
        }
    }
}
