//! Helpers shared by the integration tests: an in-process server, scratch
//! directories, and a kubectl runner that skips (or fails under
//! `TRAINYARD_REQUIRE_TOOLS=1`) when kubectl is missing.
#![allow(dead_code)]

pub mod dra;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use trainyard_testapi::{Config, TestApiServer};

static N: AtomicUsize = AtomicUsize::new(0);

/// A fresh scratch directory under the system temp dir.
pub fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "trainyard-testapi-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// A server with a manual clock (nothing moves until the test advances it).
pub async fn manual_server() -> TestApiServer {
    TestApiServer::start(Config {
        manual_clock: true,
        bookmark_interval: Duration::from_millis(200),
        ..Config::default()
    })
    .await
    .expect("server starts")
}

/// The path of a fixture file.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Finds kubectl on PATH or where `scripts/install-test-tools.sh` puts it.
pub fn find_kubectl() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".local/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

/// kubectl, or `None` after printing SKIPPED (panics instead under TRAINYARD_REQUIRE_TOOLS=1).
pub fn kubectl_or_skip(test: &str) -> Option<PathBuf> {
    match find_kubectl() {
        Some(p) => Some(p),
        None => {
            if std::env::var("TRAINYARD_REQUIRE_TOOLS").as_deref() == Ok("1") {
                panic!(
                    "{test}: kubectl not found and TRAINYARD_REQUIRE_TOOLS=1 (run scripts/install-test-tools.sh)"
                );
            }
            let msg =
                format!("SKIPPED: kubectl not found ({test}; run scripts/install-test-tools.sh)");
            println!("{msg}");
            // Straight to the stderr handle, past the test harness's capture, so a skip is never silent.
            let _ = writeln!(std::io::stderr(), "{msg}");
            None
        }
    }
}

/// Runs kubectl against one server with its own kubeconfig and discovery cache.
pub struct Kubectl {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
    pub dir: PathBuf,
}

/// What a kubectl run printed.
#[derive(Debug)]
pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Kubectl {
    pub fn new(bin: PathBuf, server: &TestApiServer, tag: &str) -> Self {
        let dir = scratch(tag);
        let kubeconfig = dir.join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        Kubectl {
            bin,
            kubeconfig,
            dir,
        }
    }

    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.bin);
        // A fresh discovery cache per call: CRDs applied by one call are seen by the next.
        let cache = scratch("cache");
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(cache)
            .args(args);
        c.stdin(Stdio::null()).kill_on_drop(true);
        c
    }

    /// Runs to completion (30 s deadline).
    pub async fn run(&self, args: &[&str]) -> Out {
        let fut = self.command(args).output();
        let out = tokio::time::timeout(Duration::from_secs(30), fut)
            .await
            .expect("kubectl finished in time")
            .expect("kubectl runs");
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into(),
            stderr: String::from_utf8_lossy(&out.stderr).into(),
        }
    }

    /// Runs and asserts success.
    pub async fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args).await;
        assert!(
            o.ok,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            o.stdout, o.stderr
        );
        o.stdout
    }
}
