//! The service and its store (docs/persistence.md): a store that cannot
//! be read is moved aside at start, counted, and reported as a Warning
//! Event on the scheduler's own pod; the new store it starts is read
//! again at the next start without complaint.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams};
use trainyard_serve::metrics::Metrics;
use trainyard_serve::persist::{StoreSettings, UsageBy};
use trainyard_serve::reload::Own;
use trainyard_store::Backend;

/// Runs the service on `store` as pod `ml/trainyard-0` until it has run a
/// cycle that leaves `pending` jobs pending and bound `binds` pods, then
/// stops it; returns its metrics.
async fn run_once(client: &Client, store: &Path, binds: u64) -> Arc<Metrics> {
    let mut settings = fast_settings();
    settings.service.store = StoreSettings {
        path: store.display().to_string(),
        backend: Backend::Redb,
        ..Default::default()
    };
    let metrics = Arc::new(Metrics::new());
    let Spawned {
        mut progress,
        stop,
        task,
    } = spawn_service(
        client.clone(),
        settings,
        metrics.clone(),
        Own {
            namespace: "ml".into(),
            pod: "trainyard-0".into(),
        },
    );
    until(&mut progress, "a cycle with the gang bound", |p| {
        p.cycles > 0 && p.written.binds == binds
    })
    .await;
    stop.send_replace(true);
    task.await.expect("the service stops");
    metrics
}

async fn store_events(client: &Client) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), "ml");
    api.list(&ListParams::default())
        .await
        .expect("events listed")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("StoreRebuilt"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_store_is_moved_aside_counted_and_reported_on_the_scheduler_pod() {
    let (_server, client) = server().await;
    cluster(&client).await;
    gang(&client, "fits", "team", 2, 4).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("state.redb");
    std::fs::write(&path, b"this is not a redb file").expect("written");

    let metrics = run_once(&client, &path, 2).await;
    assert_eq!(metrics.store_rebuilt.get(), 1);
    let events = store_events(&client).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.involved_object.kind.as_deref(), Some("Pod"));
    assert_eq!(e.involved_object.name.as_deref(), Some("trainyard-0"));
    let message = e.message.as_deref().unwrap_or("");
    assert!(message.contains("moved aside to"), "{message}");
    assert!(message.contains("state.redb.broken-"), "{message}");
    // The damaged file is kept, as it was, beside the new store.
    let aside: Vec<_> = std::fs::read_dir(dir.path())
        .expect("listed")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.display().to_string().contains(".broken-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(
        std::fs::read(&aside[0]).expect("kept"),
        b"this is not a redb file"
    );
    trainyard_store::open(&path, Backend::Redb).expect("the new store opens");

    // The next start reads the new store: nothing moved, no new Event.
    let metrics = run_once(&client, &path, 0).await;
    assert_eq!(metrics.store_rebuilt.get(), 0);
    assert_eq!(store_events(&client).await.len(), 1);
}

/// A job that stops holding anything (here: its pods deleted) leaves one
/// accounting record in the store: its job, queue, namespace, start and
/// end, and what it used (`trainyard usage --by job`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_job_leaves_an_accounting_record() {
    let (server, client) = server().await;
    cluster(&client).await;
    gang(&client, "done", "team", 2, 4).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("state.redb");
    let mut settings = fast_settings();
    settings.service.store = StoreSettings {
        path: path.display().to_string(),
        ..Default::default()
    };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().expect("its address").port()
    };
    settings.service.http_address = format!("127.0.0.1:{port}");
    let Spawned {
        mut progress,
        stop,
        task,
    } = spawn_service(
        client.clone(),
        settings,
        Arc::new(Metrics::new()),
        Own::default(),
    );
    let bound = until(&mut progress, "the gang bound", |p| p.written.binds == 2).await;
    // The job's account opens at the first usage sample after the bind;
    // wait for a few more so it is held across several samples.
    until(&mut progress, "samples that count it", |p| {
        p.usage_samples >= bound.usage_samples + 3
    })
    .await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "ml");
    pods.delete_collection(&Default::default(), &ListParams::default())
        .await
        .expect("pods deleted");
    // Kubelet: the pods stop and are gone.
    server.tick();
    until(&mut progress, "the job accounted", |p| p.accounted == 1).await;
    // The running service answers `trainyard usage --server` from the
    // store it holds locked (the record was handed to the store's thread
    // before the question, which that thread answers after it).
    let url = format!("http://127.0.0.1:{port}");
    let asked = trainyard_serve::http::ask_usage(&url, 0, i64::from(i32::MAX), UsageBy::Job)
        .await
        .expect("/usage answers");
    assert!(asked.leading, "one replica without election leads");
    assert_eq!(asked.rows.len(), 1, "{:?}", asked.rows);
    let row = &asked.rows[0];
    assert_eq!(
        (row.job.as_str(), row.queue.as_str(), row.namespace.as_str()),
        ("ml/done", "team", "ml")
    );
    assert!(row.gpu_milli_seconds > 0, "{row:?}");
    let bad = trainyard_serve::http::ask_usage(&url, 9, 5, UsageBy::Queue).await;
    assert_eq!(
        bad.map(|a| a.rows),
        Err("400 Bad Request: /usage: from=9 is after to=5".into())
    );
    stop.send_replace(true);
    task.await.expect("the service stops");
    let store = trainyard_store::open(&path, Backend::Redb).expect("opens");
    use trainyard_store::Records;
    let jobs = store.jobs(i64::MIN).expect("job records");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let j = &jobs[0];
    assert_eq!(
        (j.job.as_str(), j.queue.as_str(), j.user.as_str()),
        ("ml/done", "team", "ml")
    );
    assert!(j.end_s > j.start_s, "{j:?}");
    // 8 GPUs for the time it held them. The record's start is floored and
    // its end rounded up to whole seconds, so the span held is more than
    // `end_s - start_s - 2` seconds and at most `end_s - start_s`.
    let span = u128::try_from(j.end_s - j.start_s).unwrap_or(0);
    assert!(j.gpu <= 8_000 * span, "{j:?}");
    assert!(j.gpu >= 8_000 * span.saturating_sub(2), "{j:?}");
    assert!(j.gpu > 0, "{j:?}");
}
