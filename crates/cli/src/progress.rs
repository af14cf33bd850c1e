//! Progress for long runs. On a terminal, indicatif bars; when stderr is
//! not a terminal (redirected to a file, CI logs) bars draw nothing, so
//! plain lines are printed instead, at most one per interval.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Seconds between progress lines when stderr is not a terminal.
pub const DEFAULT_INTERVAL_SECS: u64 = 10;

/// Overrides the interval (seconds; `0`: every progress report). For
/// scripts and tests.
pub const INTERVAL_ENV: &str = "TRAINYARD_PROGRESS_SECS";

/// Plain progress lines on stderr, or nothing when stderr is a terminal
/// (the bars show progress there).
pub struct Lines {
    every: Option<Duration>,
    last: Mutex<Instant>,
}

impl Lines {
    /// Lines every [`DEFAULT_INTERVAL_SECS`] (or [`INTERVAL_ENV`]) when
    /// stderr is not a terminal.
    pub fn for_stderr() -> Self {
        let every = (!std::io::stderr().is_terminal()).then(|| {
            let secs = std::env::var(INTERVAL_ENV)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(DEFAULT_INTERVAL_SECS);
            Duration::from_secs(secs)
        });
        Lines {
            every,
            last: Mutex::new(Instant::now()),
        }
    }

    /// Prints `line()` if an interval has passed since the last line (or
    /// the start).
    pub fn tick(&self, line: impl FnOnce() -> String) {
        let Some(every) = self.every else { return };
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        if last.elapsed() >= every {
            *last = Instant::now();
            eprintln!("{}", line());
        }
    }
}
