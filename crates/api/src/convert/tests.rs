use std::sync::Arc;

use expect_test::expect;
use trainyard_ingest::{LoadOptions, Source};
use trainyard_serve::view::CycleView;

use crate::service;

/// Two nodes of 8 GPUs (one tainted), a team queue with a GPU limit of
/// 10; see [`three_pods`] for the pods.
pub(crate) const CLUSTER: &str = "\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: '8', memory: 64Gi, pods: '110', nvidia.com/gpu: '8'}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
spec: {taints: [{key: dedicated, value: infer, effect: NoSchedule}]}
status: {allocatable: {cpu: '8', memory: 64Gi, pods: '110', nvidia.com/gpu: '8'}}
---
apiVersion: trainyard.io/v1alpha1
kind: Queue
metadata: {name: team}
spec: {quota: {nvidia.com/gpu: 8}, limit: {nvidia.com/gpu: 10}, overQuotaWeight: 2}
";

/// A pending pod of queue `team` asking for `gpus` GPUs, created at
/// `hour` o'clock.
pub(crate) fn pod(name: &str, gpus: u32, hour: u32) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml, labels: {{trainyard.io/queue: team}}, creationTimestamp: '2027-01-15T{hour:02}:00:00Z'}}\nspec: {{schedulerName: trainyard, containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '{gpus}'}}}}}}]}}\n"
    )
}

/// One cycle of the core on `text`, as the service publishes it.
pub(crate) fn cycle_of(text: &str) -> CycleView {
    let loaded = trainyard_ingest::load(&[Source::new("t.yaml", text)], &LoadOptions::default())
        .expect("loads");
    let now = trainyard_model::Timestamp::from_secs(1_800_000_000);
    let config = trainyard_sched::Config::default();
    let d = trainyard_sched::schedule(&loaded.snapshot, &config, now);
    CycleView {
        number: 7,
        now,
        snapshot: Arc::new(loaded.snapshot),
        decisions: Arc::new(d),
        config: Arc::new(config),
        writes_in_flight: 0,
    }
}

/// `small` (4 GPUs, first) runs on n1; `big` (16) fits no node ever;
/// `over` (8) would take the queue past its limit; `wide` (6) finds 4
/// free on n1 and n2 tainted.
pub(crate) fn three_pods() -> CycleView {
    cycle_of(&format!(
        "{CLUSTER}{}{}{}{}",
        pod("small", 4, 7),
        pod("big", 16, 8),
        pod("over", 8, 8),
        pod("wide", 6, 8)
    ))
}

#[test]
fn queues_say_their_units_and_unlimited() {
    let c = three_pods();
    let q = service::list_queues(&c);
    expect![[r#"
        ListQueuesResponse {
            cycle: Some(
                Cycle {
                    number: 7,
                    time_ms: 1800000000000,
                },
            ),
            queues: [
                Queue {
                    name: "team",
                    path: "team",
                    parent: "",
                    depth: 0,
                    leaf: true,
                    weight: 2,
                    priority: 0,
                    resources: [
                        QueueResource {
                            resource: "nvidia.com/gpu",
                            unit: "mGPU",
                            quota: 8000,
                            limit: Some(
                                Limit {
                                    unlimited: false,
                                    value: 10000,
                                },
                            ),
                            fair_share: 10000,
                            allocated: 4000,
                            demand: 10000,
                            pending_demand: 6000,
                            decayed_usage: "0",
                        },
                    ],
                    running_jobs: 1,
                    pending_jobs: 3,
                },
            ],
        }
    "#]]
    .assert_debug_eq(&q);
}

#[test]
fn jobs_with_their_state_reason_and_age() {
    let c = three_pods();
    let jobs = service::list_jobs(&c, &crate::pb::ListJobsRequest::default());
    let lines: Vec<String> = jobs
        .jobs
        .iter()
        .map(|j| {
            format!(
                "{}/{} {} {:?} {}/{} pods {} mGPU ({} bound) {} {}s: {}",
                j.namespace,
                j.name,
                j.queue,
                crate::pb::JobState::try_from(j.state),
                j.pods_bound,
                j.pods,
                j.gpu_milli,
                j.gpu_milli_bound,
                j.reason,
                j.age_seconds,
                j.message
            )
        })
        .collect();
    expect![[r#"
        ml/big team Ok(Pending) 0/1 pods 16000 mGPU (0 bound) ExceedsQueueLimit 0s: gang minimum needs 16 nvidia.com/gpu, above the limit 10 of queue team; it can never run there
        ml/over team Ok(Pending) 0/1 pods 8000 mGPU (0 bound) QueueAtLimit 0s: queue team at limit nvidia.com/gpu 4/10 (gang needs 8 more)
        ml/small team Ok(Running) 1/1 pods 4000 mGPU (4000 bound)  3600s: 
        ml/wide team Ok(Pending) 0/1 pods 6000 mGPU (0 bound) Unschedulable 0s: gang needs 6 × nvidia.com/gpu in 1 pod(s); 0/2 nodes fit: 1 untolerated taint dedicated=infer, 1 insufficient nvidia.com/gpu"#]].assert_eq(&lines.join("\n"));
    // Filters: state, queue (a parent's path matches below it), user.
    let pending = crate::pb::ListJobsRequest {
        state: crate::pb::JobState::Pending as i32,
        ..Default::default()
    };
    assert_eq!(service::list_jobs(&c, &pending).jobs.len(), 3);
    let other = crate::pb::ListJobsRequest {
        queue: "tea".into(),
        ..Default::default()
    };
    assert!(service::list_jobs(&c, &other).jobs.is_empty());
    let user = crate::pb::ListJobsRequest {
        user: "ml".into(),
        queue: "team".into(),
        ..Default::default()
    };
    assert_eq!(service::list_jobs(&c, &user).jobs.len(), 4);
}

#[test]
fn a_bind_and_a_victim_as_messages() {
    let c = three_pods();
    expect![[r#"
        [
            Bind {
                job: "ml/small",
                pod: "ml/small",
                node: "n1",
                gpus: [
                    0,
                    1,
                    2,
                    3,
                ],
            },
        ]
    "#]]
    .assert_debug_eq(
        &c.decisions
            .binds
            .iter()
            .map(super::bind)
            .collect::<Vec<_>>(),
    );
    let e = trainyard_sched::Eviction {
        job: "ml/a".into(),
        task: trainyard_model::TaskKey {
            namespace: "ml".into(),
            name: "a-0".into(),
            uid: String::new(),
        },
        node: "n1".into(),
        kind: trainyard_sched::EvictionKind::Reclaim,
        preemptor: "ml/b".into(),
        message: "reclaimed for ml/b".into(),
    };
    expect![[r#"
        Victim {
            job: "ml/a",
            pod: "ml/a-0",
            node: "n1",
            kind: "reclaim",
            message: "reclaimed for ml/b",
        }
    "#]]
    .assert_debug_eq(&super::victim(&e));
}

#[test]
fn a_watcher_gets_the_reasons_that_changed_and_those_gone() {
    let c = three_pods();
    let mut last = std::collections::BTreeMap::new();
    let first = service::cycle_decisions(&c, &mut last, 0);
    assert_eq!(
        (first.binds.len(), first.reasons.len(), first.pending),
        (1, 3, 3)
    );
    let again = service::cycle_decisions(&c, &mut last, 2);
    assert!(again.reasons.is_empty(), "same reasons: none sent again");
    assert_eq!(again.missed, 2);
    let fewer = cycle_of(&format!("{CLUSTER}{}", pod("small", 4, 7)));
    let gone = service::cycle_decisions(&fewer, &mut last, 0);
    let jobs: Vec<(&str, &str)> = gone
        .reasons
        .iter()
        .map(|r| (r.job.as_str(), r.reason.as_str()))
        .collect();
    assert_eq!(jobs, [("ml/big", ""), ("ml/over", ""), ("ml/wide", "")]);
}
