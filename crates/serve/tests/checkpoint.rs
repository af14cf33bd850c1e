//! A failover loses at most one checkpoint interval of usage history.
//!
//! Two replicas with leader election and stores of their own, against the
//! test API server; `checkpointSeconds: 1`. The leader binds a job holding
//! 8 GPUs and checkpoints its usage history for several intervals, then
//! stops; the standby, whose own store knows nothing, takes over. Its first
//! checkpoint must show the job's GPU time as if nothing had happened: what
//! the old leader's last checkpoint said plus 8 GPUs since then, short by
//! at most one interval's worth, never more than that (no double count).
//! The numbers are read from the ConfigMap the replicas write, the truth
//! from the old leader's checkpoints (8 GPUs held throughout). The
//! observed runtime of a job that ended under the old leader is in its
//! checkpoint, and the new leader has it from its first cycle.

mod common;

use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;
use trainyard_serve::checkpoint::Checkpoint;
use trainyard_serve::{Progress, Settings};

fn settings(identity: &str, store: &std::path::Path) -> Settings {
    let mut s = leader_settings(identity);
    s.service.store.path = store.display().to_string();
    s.service.store.checkpoint_seconds = 1;
    s
}

fn replica(client: &Client, identity: &str, store: &std::path::Path) -> Spawned {
    spawn_service(
        client.clone(),
        settings(identity, store),
        Arc::new(trainyard_serve::metrics::Metrics::new()),
        Default::default(),
    )
}

/// The checkpoint as it is in the API now, and team's GPU usage in it
/// (milli-GPU·seconds).
async fn checkpoint(client: &Client) -> (Checkpoint, u128) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = cms
        .get("trainyard-checkpoint")
        .await
        .expect("the checkpoint");
    let text = cm
        .data
        .and_then(|mut d| d.remove(trainyard_serve::checkpoint::KEY))
        .expect("checkpoint.json");
    let ck = Checkpoint::parse(&text, "the checkpoint").expect("a checkpoint");
    let gpu = ck
        .usage
        .iter()
        .filter(|u| u.queue == "team")
        .map(|u| u.gpu)
        .sum();
    (ck, gpu)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_loses_at_most_one_checkpoint_interval_of_history() {
    if skip_on_cluster("the checkpoint test", "two in-process replicas") {
        return;
    }
    let (env, client) = env().await;
    cluster(&client).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut a = replica(&client, "replica-a", &dir.path().join("a.redb"));
    until(&mut a.progress, "a leads", |p: &Progress| p.leader).await;
    let mut b = replica(&client, "replica-b", &dir.path().join("b.redb"));
    gang(&client, "big", "team", 1, 8).await;
    until(&mut a.progress, "the bind", |p| p.written.binds == 1).await;
    // A job ends on its own under a, after a usage sample saw it run.
    gang(&client, "brief", "team", 1, 1).await;
    let bound = until(&mut a.progress, "brief bound", |p| p.written.binds == 2).await;
    until(&mut a.progress, "two more cycles", |p| {
        p.cycles >= bound.cycles + 2
    })
    .await;
    env.delete("Pod", "ml", "brief-0").await;
    env.tick();
    until(&mut a.progress, "brief's runtime observed", |p| {
        p.runtimes == 1
    })
    .await;
    let start = a.progress.borrow().checkpoints;
    until(&mut a.progress, "four checkpoints after the bind", |p| {
        p.checkpoints >= start + 4
    })
    .await;
    assert!(!b.progress.borrow().leader, "b leads too");
    // a stops (releasing the lease); its last checkpoint is in the API.
    a.stop.send_replace(true);
    a.task.await.expect("a stops");
    let (last_a, used_a) = checkpoint(&client).await;
    assert!(used_a > 0, "a's checkpoint shows no usage: {last_a:?}");
    assert_eq!(
        last_a.runtimes.get("team").map(Vec::len),
        Some(1),
        "{last_a:?}"
    );

    until(&mut b.progress, "b leads and checkpoints", |p| {
        p.leader && p.checkpoints >= 1
    })
    .await;
    assert!(
        b.progress.borrow().resumed,
        "b did not resume from a's checkpoint"
    );
    // No job ended under b: its one runtime is a's, from the checkpoint.
    assert_eq!(b.progress.borrow().runtimes, 1);
    let (first_b, used_b) = checkpoint(&client).await;
    assert!(first_b.taken_at_ms > last_a.taken_at_ms);
    // 8 GPUs held all along: a's total, plus 8 GPUs since a's checkpoint.
    let elapsed_ms = (first_b.taken_at_ms - last_a.taken_at_ms) as u128;
    let expected = used_a + 8_000 * elapsed_ms / 1000;
    // 8 GPUs for one interval (checkpointSeconds: 1).
    let one_interval = 8_000;
    assert!(
        used_b + one_interval >= expected,
        "b's usage {used_b} lost more than one interval of {expected} (a's {used_a} at {}, b's at {})",
        last_a.taken_at_ms,
        first_b.taken_at_ms
    );
    // Nothing counted twice (decay over seconds and bucket rounding: 1%).
    assert!(
        used_b <= expected + expected / 100,
        "b's usage {used_b} is more than {expected}: counted twice"
    );
    b.stop.send_replace(true);
    b.task.await.expect("b stops");
}

/// A standby records usage from the pods it watches: a job that ends while
/// another replica leads is in the standby's own store too, so its
/// accounting has no hole when it takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_keeps_the_accounting_of_what_the_leader_ran() {
    if skip_on_cluster("the standby accounting test", "two in-process replicas") {
        return;
    }
    let (env, client) = env().await;
    cluster(&client).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let b_store = dir.path().join("b.redb");
    let mut a = replica(&client, "replica-a", &dir.path().join("a.redb"));
    until(&mut a.progress, "a leads", |p: &Progress| p.leader).await;
    let mut b = replica(&client, "replica-b", &b_store);
    gang(&client, "done", "team", 2, 4).await;
    until(&mut a.progress, "the binds", |p| p.written.binds == 2).await;
    // Both replicas see the pods bound (through their watches) and record
    // them in the samples after that (a bind counts from the next sample;
    // four, as the replicas' watches may trail the test's).
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "ml");
    for name in ["done-0", "done-1"] {
        let bound = |p: Option<&k8s_openapi::api::core::v1::Pod>| {
            p.and_then(|p| p.spec.as_ref())
                .is_some_and(|s| s.node_name.is_some())
        };
        tokio::time::timeout(
            std::time::Duration::from_secs(30),
            kube::runtime::wait::await_condition(pods.clone(), name, bound),
        )
        .await
        .expect("bound within 30 s")
        .expect("the pod watch");
    }
    for r in [&mut a, &mut b] {
        let s = r.progress.borrow().usage_samples;
        until(&mut r.progress, "four more samples", |p| {
            p.usage_samples >= s + 4
        })
        .await;
    }
    pods.delete_collection(&Default::default(), &Default::default())
        .await
        .expect("pods deleted");
    // The kubelet: the pods stop and are gone.
    env.tick();
    until(&mut a.progress, "a accounts the job", |p| p.accounted == 1).await;
    until(&mut b.progress, "b, a standby, accounts it too", |p| {
        p.accounted == 1
    })
    .await;
    assert!(!b.progress.borrow().leader, "b leads");
    a.stop.send_replace(true);
    b.stop.send_replace(true);
    a.task.await.expect("a stops");
    b.task.await.expect("b stops");
    let store = trainyard_store::open(&b_store, trainyard_store::Backend::Redb).expect("b's store");
    use trainyard_store::Records;
    let jobs = store.jobs(i64::MIN).expect("job records");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(
        (jobs[0].job.as_str(), jobs[0].queue.as_str()),
        ("ml/done", "team")
    );
    assert!(jobs[0].gpu > 0, "{:?}", jobs[0]);
}
