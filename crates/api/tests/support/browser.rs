//! The dashboard in headless Chromium, for the browser tests
//! (`crates/api/tests/ui_browser.rs`) and the browser benchmark
//! (`crates/api/examples/ui_bench.rs`): `tests/ui/driver.py` (Playwright)
//! run as a child process, given one JSON command per line and answering
//! one JSON line each. Every answer is awaited with a timeout, so a hung
//! page fails with the command that hung.
//!
//! Chromium is the `trainyard-chromium` wrapper of
//! `scripts/install-browser.sh`; when it or Playwright is missing,
//! [`Browser::start`] says why: the tests skip (printing `SKIPPED:` and the
//! reason) or, with `TRAINYARD_REQUIRE_TOOLS=1`, fail.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// The driver script, from the repository root.
pub fn driver_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/ui/driver.py")
}

/// A page of the dashboard in headless Chromium, driven by
/// `tests/ui/driver.py`.
pub struct Browser {
    child: Child,
    stdin: ChildStdin,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    /// Chromium's version, as the driver reported it.
    pub chromium: String,
    /// How long one command may take before the test fails.
    pub timeout: Duration,
}

/// Why the browser cannot be had (Playwright or Chromium missing).
#[derive(Debug)]
pub struct Missing(pub String);

impl Browser {
    /// Starts the driver on `base` (`http://127.0.0.1:PORT`), with a
    /// 1400×900 viewport; `insecure_tls` accepts the test certificates.
    pub async fn start(base: &str, insecure_tls: bool) -> Result<Browser, Missing> {
        Self::start_with(base, insecure_tls, (1400, 900)).await
    }

    /// As [`Browser::start`] with a viewport of `(width, height)`.
    pub async fn start_with(
        base: &str,
        insecure_tls: bool,
        (width, height): (u32, u32),
    ) -> Result<Browser, Missing> {
        let mut cmd = Command::new("python3");
        cmd.arg(driver_script()).arg(base).args([
            "--width",
            &width.to_string(),
            "--height",
            &height.to_string(),
        ]);
        if insecure_tls {
            cmd.arg("--ignore-https-errors");
        }
        // The user bin dir, where install-browser.sh puts the wrapper.
        if let Some(home) = std::env::var_os("HOME") {
            let mut path: Vec<PathBuf> = std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect())
                .unwrap_or_default();
            path.push(PathBuf::from(home).join(".local/bin"));
            if let Ok(joined) = std::env::join_paths(path) {
                cmd.env("PATH", joined);
            }
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Missing(format!("python3 cannot run: {e}")))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut b = Browser {
            child,
            stdin,
            lines,
            chromium: String::new(),
            timeout: Duration::from_secs(60),
        };
        // The first line: ready, or why not.
        match b.answer("start").await {
            Ok(v) => {
                b.chromium = v["chromium"].as_str().unwrap_or_default().to_string();
                Ok(b)
            }
            Err(e) => {
                let _ = b.child.kill();
                let _ = b.child.wait();
                Err(Missing(e))
            }
        }
    }

    async fn answer(&mut self, what: &str) -> Result<Value, String> {
        let line = tokio::time::timeout(self.timeout, self.lines.recv())
            .await
            .map_err(|_| {
                format!(
                    "the browser driver gave no answer to {what} within {:?}",
                    self.timeout
                )
            })?
            .ok_or_else(|| format!("the browser driver ended before answering {what}"))?;
        let v: Value = serde_json::from_str(&line)
            .map_err(|e| format!("the browser driver answered {what} with {line:?}: {e}"))?;
        match v.get("error") {
            Some(e) => Err(e.as_str().map_or_else(|| e.to_string(), String::from)),
            None => Ok(v["ok"].clone()),
        }
    }

    /// Sends `command`; its answer, or the driver's error.
    pub async fn try_cmd(&mut self, command: Value) -> Result<Value, String> {
        let line = command.to_string();
        writeln!(self.stdin, "{line}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("the browser driver is gone ({e}) before {line}"))?;
        self.answer(&line).await
    }

    /// Sends `command`; its answer (panics with the driver's error).
    pub async fn cmd(&mut self, command: Value) -> Value {
        let line = command.to_string();
        match self.try_cmd(command).await {
            Ok(v) => v,
            Err(e) => panic!("browser: {line}: {e}"),
        }
    }

    /// Shows `hash` (`#/jobs?state=pending`) rendered from cycle
    /// `min_cycle` or later; the page's state (view, cycle, error, …).
    pub async fn goto(&mut self, hash: &str, min_cycle: u64) -> Value {
        self.cmd(json!({"goto": hash, "min_cycle": min_cycle}))
            .await
    }

    /// What view `what` shows: `{"page": .., "data": ..}`.
    pub async fn read(&mut self, what: &str) -> Value {
        self.cmd(json!({"read": what})).await
    }

    /// Writes a PNG of the viewport to `path`.
    pub async fn screenshot(&mut self, path: &Path) -> Value {
        self.cmd(json!({"screenshot": path.to_string_lossy()}))
            .await
    }

    /// Ends the driver and its browser.
    pub async fn quit(mut self) {
        let _ = self.try_cmd(json!({"quit": true})).await;
        let _ = tokio::task::spawn_blocking(move || {
            let _ = self.child.wait();
        })
        .await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // A test that panics leaves no browser behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The browser on `base`, or `None` after printing why it is skipped;
/// with `TRAINYARD_REQUIRE_TOOLS=1` a missing browser fails the test.
pub async fn browser_or_skip(base: &str, insecure_tls: bool, test: &str) -> Option<Browser> {
    match Browser::start(base, insecure_tls).await {
        Ok(b) => Some(b),
        Err(Missing(reason)) => {
            assert!(
                std::env::var("TRAINYARD_REQUIRE_TOOLS").as_deref() != Ok("1"),
                "TRAINYARD_REQUIRE_TOOLS=1 but the browser cannot be had: {reason}"
            );
            eprintln!("SKIPPED: {test}: {reason}");
            None
        }
    }
}
