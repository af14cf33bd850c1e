//! What the remote-verb tests share: running the real binary in a clean
//! environment, and output with its timing-dependent parts replaced.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// What a run of the binary said.
pub struct Said {
    pub ok: bool,
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `trainyard` (or `program`) with `args`, in a clean environment:
/// no TRAINYARD_SERVER, no kubeconfig, a scratch HOME.
pub async fn run_program(program: PathBuf, args: Vec<String>, env: Vec<(String, String)>) -> Said {
    tokio::task::spawn_blocking(move || {
        let home = tempfile::tempdir().expect("a scratch home");
        let mut c = Command::new(&program);
        c.args(&args)
            .env_remove("TRAINYARD_SERVER")
            .env_remove("TRAINYARD_TOKEN")
            .env_remove("KUBECONFIG")
            .env_remove("COLUMNS")
            .env("HOME", home.path());
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().expect("the binary runs");
        Said {
            ok: out.status.success(),
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .expect("joined")
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_trainyard"))
}

/// `text` with what depends on timing replaced: the cycle's number
/// (`cycle N`), its time (`TIME`), ages (`AGE`: the service's clock is
/// the wall clock).
pub fn stable(text: &str) -> String {
    let cycle = regex::Regex::new(r"(cycle |Cycle: +)\d+").expect("regex");
    let time = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ").expect("regex");
    let age = regex::Regex::new(r"  \d+[smhdy](\d+[smh])?  ").expect("regex");
    let text = cycle.replace_all(text, "${1}N");
    let text = time.replace_all(&text, "TIME");
    age.replace_all(&text, "  AGE  ").into_owned()
}
