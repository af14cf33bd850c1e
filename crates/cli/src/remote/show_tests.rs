//! The tables and text of [`super`] on answers made here (the live ones
//! are in tests/remote_verbs.rs).

use expect_test::expect;
use trainyard_api::pb;

use super::*;

#[test]
fn quantities_as_kubectl_shows_them() {
    let q: Vec<String> = [
        ("mGPU", 4000),
        ("mGPU", 500),
        ("m", 64_000),
        ("m", 1500),
        ("By", 512 << 30),
        ("By", 1536 << 20),
        ("By", 1000),
        ("By", 0),
        ("1", 7),
    ]
    .iter()
    .map(|(u, v)| quantity(u, *v))
    .collect();
    assert_eq!(
        q,
        [
            "4", "0.5", "64", "1500m", "512Gi", "1536Mi", "1000", "0", "7"
        ]
    );
    assert_eq!(usage_hours("mGPU", "36000000"), "10.0");
    assert_eq!(
        usage_hours("By", &((3u128 << 30) * 1800).to_string()),
        "1.5"
    );
    assert_eq!(usage_hours("mGPU", "not a number"), "not a number");
}

#[test]
fn ages_as_kubectl_shows_them() {
    let a: Vec<String> = [
        0, 119, 125, 600, 10_799, 10_800, 12_600, 90_000, 180_000, 864_000, 70_000_000,
    ]
    .iter()
    .map(|s| age(*s))
    .collect();
    assert_eq!(
        a,
        [
            "0s", "119s", "2m5s", "10m", "179m", "3h", "3h30m", "25h", "2d2h", "10d", "2y"
        ]
    );
}

fn resource(
    name: &str,
    unit: &str,
    quota: u64,
    limit: Option<u64>,
    allocated: u64,
) -> pb::QueueResource {
    pb::QueueResource {
        resource: name.into(),
        unit: unit.into(),
        quota,
        limit: Some(pb::Limit {
            unlimited: limit.is_none(),
            value: limit.unwrap_or(0),
        }),
        fair_share: quota,
        allocated,
        demand: allocated,
        pending_demand: 0,
        decayed_usage: (u128::from(allocated) * 7200).to_string(),
    }
}

#[test]
fn queue_tree_one_row_per_resource() {
    let q = |name: &str, path: &str, depth: u32, resources: Vec<pb::QueueResource>| pb::Queue {
        name: name.into(),
        path: path.into(),
        depth,
        leaf: depth > 0,
        weight: 1 + depth,
        resources,
        running_jobs: depth,
        ..Default::default()
    };
    let resp = pb::ListQueuesResponse {
        cycle: None,
        queues: vec![
            q(
                "org",
                "org",
                0,
                vec![
                    resource("memory", "By", 1 << 40, None, 256 << 30),
                    resource("nvidia.com/gpu", "mGPU", 64_000, Some(96_000), 16_500),
                    resource("cpu", "m", 512_000, None, 48_000),
                ],
            ),
            q(
                "team",
                "org/team",
                1,
                vec![resource("nvidia.com/gpu", "mGPU", 8000, None, 8000)],
            ),
            q("idle", "org/idle", 1, vec![]),
        ],
    };
    expect![[r#"
        QUEUE   WEIGHT  RUNNING  PENDING  RESOURCE        QUOTA  LIMIT  FAIR SHARE  ALLOCATED  PENDING DEMAND  USAGE (H)
        org          1        0        0  nvidia.com/gpu     64     96          64       16.5               0       33.0
                                          cpu               512      -         512         48               0       96.0
                                          memory            1Ti      -         1Ti      256Gi               0      512.0
          team       2        1        0  nvidia.com/gpu      8      -           8          8               0       16.0
          idle       2        1        0  -                   -      -           -          -               -          -
    "#]]
    .assert_eq(&queues(&resp, None));
}

#[test]
fn jobs_and_whatif_read_as_sentences() {
    let resp = pb::ListJobsResponse {
        cycle: None,
        jobs: vec![pb::Job {
            name: "llm".into(),
            namespace: "ml".into(),
            queue: "org/team".into(),
            state: pb::JobState::Partial as i32,
            pods_bound: 2,
            pods: 4,
            gpu_milli: 32_000,
            gpu_milli_bound: 16_000,
            reason: "Unschedulable".into(),
            age_seconds: 4000,
            ..Default::default()
        }],
    };
    expect![[r#"
        NAME  QUEUE     STATE    PODS  GPUS   AGE  REASON
        llm   org/team  Partial  2/4   16/32  66m  Unschedulable
    "#]]
    .assert_eq(&jobs(&resp, false, None));
    let w = pb::WhatIfResponse {
        job: "ml/big".into(),
        fits: true,
        nominations: vec![pb::Placement {
            pod: "ml/big-0".into(),
            node: "n1".into(),
            gpus: vec![0, 1],
        }],
        evictions: vec![pb::Victim {
            job: "ml/small".into(),
            pod: "ml/small-0".into(),
            node: "n1".into(),
            kind: "preempt".into(),
            message: "lower priority".into(),
        }],
        displaced: vec!["ml/other".into()],
        ..Default::default()
    };
    expect![[r#"
        ml/big would start once 1 pod(s) are evicted.

        Nominated (once the evicted pods are gone):
          POD       NODE  GPUS
          ml/big-0  n1    0,1

        Evictions:
          JOB       POD         NODE  KIND     WHY
          ml/small  ml/small-0  n1    preempt  lower priority

        Other jobs placed differently: ml/other

        (computed on a copy of the latest cycle; nothing was changed)
    "#]]
    .assert_eq(&whatif(&w));
}
