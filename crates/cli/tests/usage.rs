//! `trainyard usage` on a store written as the service writes it.

use std::path::{Path, PathBuf};
use std::process::Command;

use trainyard_cluster::usage::ClosedBucket;
use trainyard_model::{Resources, Usage};
use trainyard_store::{Backend, Records};

fn trainyard(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .args(args)
        // Tables as for a pipe, whatever the terminal running the tests.
        .env_remove("COLUMNS")
        .env_remove("TRAINYARD_SERVER")
        .output()
        .expect("binary runs")
}

/// A store holding, for a day and an hour from the epoch: `ml` (namespace
/// `alice`) 8 GPUs all day, then `ml` (`bob`) 2 GPUs for the hour after it,
/// and `infra` (`alice`) 4 CPUs and 16 GiB all day.
fn store(dir: &Path, backend: Backend) -> PathBuf {
    let path = dir.join(format!("state.{}", backend.name()));
    let mut s = trainyard_store::open(&path, backend).expect("opens");
    let bucket = |queue: &str, user: &str, start_s: i64, width_s: u32, r: Resources| ClosedBucket {
        queue: queue.into(),
        user: user.into(),
        start_s,
        width_s,
        used: Usage::of(&r, u64::from(width_s)),
    };
    let closed = vec![
        bucket("ml", "alice", 0, 86_400, Resources::zero().with_gpus(8)),
        bucket("ml", "bob", 86_400, 3600, Resources::zero().with_gpus(2)),
        bucket(
            "infra",
            "alice",
            0,
            86_400,
            Resources::new(4000, 16 << 30, 0),
        ),
    ];
    s.apply(&trainyard_serve::persist::batch_of(&closed))
        .expect("commits");
    // Jobs as the service records them when they stop holding anything:
    // alice/train ran 8 GPUs for the day, bob/eval 2 GPUs for the hour.
    let job = |job: &str, queue: &str, start_ms: i64, end_ms: i64, r: Resources| {
        trainyard_serve::persist::job_record(&trainyard_cluster::usage::JobUsage {
            job: job.into(),
            queue: queue.into(),
            user: job.split('/').next().unwrap_or_default().into(),
            start_ms,
            end_ms,
            used: Usage::of(&r, u64::try_from((end_ms - start_ms) / 1000).unwrap_or(0)),
        })
    };
    let mut batch = trainyard_store::Batch::default();
    batch
        .job(
            &job(
                "alice/train",
                "ml",
                0,
                86_400_000,
                Resources::zero().with_gpus(8),
            ),
            0,
        )
        .expect("a job")
        .job(
            &job(
                "bob/eval",
                "ml",
                86_400_000,
                90_000_000,
                Resources::zero().with_gpus(2),
            ),
            0,
        )
        .expect("a job");
    s.apply(&batch).expect("commits");
    path
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trainyard-usage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn stdout(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8")
}

#[test]
fn usage_reports_hours_per_queue_and_namespace_as_csv_table_and_json() {
    let dir = scratch("report");
    for backend in [Backend::Redb, Backend::Sled] {
        let p = store(&dir, backend);
        let p = p.to_str().expect("utf-8 path");
        // The last 12 hours of the day and the hour after it.
        let base = [
            "usage",
            "--store",
            p,
            "--backend",
            backend.name(),
            "--since",
            "13h",
            "--until",
            "90000",
        ];
        let csv = stdout(&trainyard(
            &[&base[..], &["--by", "both", "--output", "csv"]].concat(),
        ));
        expect_test::expect![[r#"
            queue,namespace,gpu_hours,cpu_core_hours,memory_gib_hours
            infra,alice,0.000,48.000,192.000
            ml,alice,96.000,0.000,0.000
            ml,bob,2.000,0.000,0.000
        "#]]
        .assert_eq(&csv);
        let table = stdout(&trainyard(&[&base[..], &["--by", "queue"]].concat()));
        expect_test::expect![[r#"
            usage from 1970-01-01T12:00:00Z to 1970-01-02T01:00:00Z
             QUEUE  GPU-HOURS  CPU CORE-HOURS  MEMORY GIB-HOURS
             infra      0.000          48.000           192.000
             ml        98.000           0.000             0.000
             TOTAL     98.000          48.000           192.000
        "#]]
        .assert_eq(&table);
        let json = stdout(&trainyard(
            &[&base[..], &["--by", "namespace", "--output", "json"]].concat(),
        ));
        let v: serde_json::Value = serde_json::from_str(&json).expect("json");
        assert_eq!(v["from"], "1970-01-01T12:00:00Z");
        assert_eq!(v["rows"][0]["namespace"], "alice");
        assert_eq!(v["rows"][0]["gpu_milli_seconds"], 8000u64 * 43_200);
        assert_eq!(v["rows"][1]["namespace"], "bob");
        // Per job: each job's share of the window.
        let jobs = stdout(&trainyard(
            &[&base[..], &["--by", "job", "--output", "csv"]].concat(),
        ));
        expect_test::expect![[r#"
            queue,namespace,job,start,end,gpu_hours,cpu_core_hours,memory_gib_hours
            ml,alice,alice/train,1970-01-01T00:00:00Z,1970-01-02T00:00:00Z,96.000,0.000,0.000
            ml,bob,bob/eval,1970-01-02T00:00:00Z,1970-01-02T01:00:00Z,2.000,0.000,0.000
        "#]]
        .assert_eq(&jobs);
        let table = stdout(&trainyard(&[&base[..], &["--by", "job"]].concat()));
        assert!(table.contains(" TOTAL "), "{table}");
        assert!(table.contains("98.000"), "{table}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn usage_fails_clearly_on_a_missing_store_and_a_bad_duration() {
    let dir = scratch("bad");
    let missing = dir.join("none.redb");
    let out = trainyard(&["usage", "--store", missing.to_str().expect("utf-8")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "no such file or directory; expected the scheduler's store (service.store.path)"
        ),
        "{err}"
    );
    assert!(!missing.exists(), "a missing store must not be created");
    let p = store(&dir, Backend::Redb);
    let out = trainyard(&[
        "usage",
        "--store",
        p.to_str().expect("utf-8"),
        "--since",
        "a week",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("error: --since \"a week\": "), "{err}");
    let out = trainyard(&[
        "usage",
        "--store",
        p.to_str().expect("utf-8"),
        "--until",
        "yesterday",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--until \"yesterday\": expected RFC 3339 time or Unix seconds"),
        "{err}"
    );
    // A file that is no store is named, and left as it was.
    let junk = dir.join("junk.redb");
    std::fs::write(&junk, b"not a store").expect("writes");
    let out = trainyard(&["usage", "--store", junk.to_str().expect("utf-8")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("junk.redb"), "{err}");
    assert_eq!(std::fs::read(&junk).expect("still there"), b"not a store");
    // A server that does not answer, a scheme not spoken, neither source.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a port")
        .local_addr()
        .expect("its address")
        .port();
    let url = format!("http://127.0.0.1:{closed}");
    let out = trainyard(&["usage", "--server", &url]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "--server {url}: cannot connect to 127.0.0.1:{closed}"
        )),
        "{err}"
    );
    let out = trainyard(&["usage", "--server", "https://sched:8080"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("https:// is not supported"), "{err}");
    let out = trainyard(&["usage"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: trainyard usage needs where the usage history is:\n  --server URL"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
