use super::*;
use crate::result::{ClusterSample, JobRecord, QueueSample};
use trainyard_model::Resources;

/// A small synthetic run: `queues` leaf queues sharing `cap` GPUs over
/// `hours`, with samples every 5 minutes.
fn synthetic(policy: &str, skew: u64, hours: i64) -> SimOutput {
    let start = Timestamp(1_700_000_000_000);
    let end = Timestamp(start.0 + hours * 3_600_000);
    let queues = [
        "research/vision",
        "research/nlp",
        "prod/<serving> & \"batch\"",
    ];
    let cap = 64_000u64;
    let mut jobs = Vec::new();
    // Deterministic pseudo-random numbers.
    let mut r = 12_345u64 + skew;
    let mut next = || {
        r = r
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (r >> 33) % 1_000_000
    };
    for k in 0..120 {
        let q = queues[k % 3];
        let submit = Timestamp(start.0 + (k as i64) * hours * 3_600_000 / 130);
        let wait_ms = (next() as i64 * (1 + (k % 3) as i64 * skew as i64)) % 20_000_000;
        let run_ms = 600_000 + next() as i64 * 7;
        let st = Timestamp(submit.0 + wait_ms);
        let (start_t, end_t, state) = if k % 17 == 5 {
            (None, None, JobState::Pending)
        } else if k == 7 {
            (None, None, JobState::Rejected)
        } else if st.0 + run_ms < end.0 {
            (
                Some(st),
                Some(Timestamp(st.0 + run_ms)),
                JobState::Completed,
            )
        } else if st.0 < end.0 {
            (Some(st), None, JobState::Running)
        } else {
            (None, None, JobState::Pending)
        };
        jobs.push(JobRecord {
            id: format!("ns/job-{k}"),
            queue: q.to_string(),
            priority: 0,
            gpu_milli: 8000,
            tasks: 1,
            submit,
            start: start_t,
            end: end_t,
            state,
            pending_reason: None,
            restarts: 0,
            min_gpu_milli: 0,
            evicted_pods: 0,
            lost: Default::default(),
            topology: None,
            reserved_start: None,
        });
    }
    let mut qs = Vec::new();
    let mut cl = Vec::new();
    let steps = hours * 12;
    for i in 0..=steps {
        let t = Timestamp(start.0 + i * 300_000);
        let phase = i as f64 / steps as f64;
        let mut total = 0;
        for (qi, q) in queues.iter().enumerate() {
            let wave = ((phase * 6.0 + qi as f64 * 2.0).sin() + 1.0) / 2.0;
            let alloc = ((wave * 28.0) as u64 + skew * qi as u64).min(40) * 1000;
            total += alloc;
            qs.push(QueueSample {
                time: t,
                queue: q.to_string(),
                name: q.to_string(),
                is_leaf: true,
                demand: Resources::new(0, 0, alloc + 8000),
                fair_share: Resources::new(0, 0, cap / 3),
                allocated: Resources::new(0, 0, alloc),
            });
        }
        qs.push(QueueSample {
            time: t,
            queue: "research".into(),
            name: "research".into(),
            is_leaf: false,
            demand: Resources::zero(),
            fair_share: Resources::zero(),
            allocated: Resources::zero(),
        });
        let capacity = if (30..40).contains(&i) {
            cap - 8000
        } else {
            cap
        };
        cl.push(ClusterSample {
            time: t,
            gpu_capacity: capacity,
            gpu_allocated: total.min(capacity),
            running_jobs: 10,
            pending_jobs: ((phase * 9.0).sin().abs() * 20.0) as u32 + skew as u32,
            largest_free_leaf_gpus: None,
            scattered: false,
        });
    }
    SimOutput {
        policy: policy.to_string(),
        jobs,
        queues: qs,
        cluster: cl,
        cycles: steps as u64 + 1,
        events: 240,
        start_time: start,
        end_time: end,
        topology: None,
        evictions: vec![],
        eviction_model: Default::default(),
        dra_claims: 0,
    }
}

fn render(outs: &[SimOutput], title: &str) -> String {
    let sums: Vec<Summary> = outs.iter().map(SimOutput::summary).collect();
    let runs: Vec<(&SimOutput, &Summary)> = outs.iter().zip(&sums).collect();
    report_html(&runs, title)
}

fn assert_clean(html: &str) {
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.ends_with("</html>\n"));
    assert!(!html.contains("NaN"), "NaN in output");
    assert!(!html.contains("inf"), "inf in output");
    assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
}

#[test]
fn one_svg_per_plot() {
    let one = render(&[synthetic("drf", 0, 30)], "one");
    assert_clean(&one);
    // Cluster + 3 leaf queues + 1 CDF + pending + Jain; no evictions.
    assert_eq!(one.matches("<svg").count(), 7);
    assert!(one.contains("No pods were evicted."));
    let two = render(&[synthetic("drf", 0, 30), synthetic("fifo", 3, 30)], "two");
    assert_clean(&two);
    // Cluster + 3 leaf queues + 2 CDFs + pending + Jain.
    assert_eq!(two.matches("<svg").count(), 8);
    // With evictions, their chart.
    let mut evicting = synthetic("drf", 0, 30);
    evicting.evictions.push(crate::result::EvictionSample {
        time: Timestamp(evicting.start_time.0 + 3_600_000),
        reclaim_pods: 4,
        preempt_pods: 1,
        reclaim_jobs: 2,
        preempt_jobs: 1,
        ..Default::default()
    });
    let three = render(&[evicting, synthetic("fifo", 3, 30)], "three");
    assert_clean(&three);
    assert_eq!(three.matches("<svg").count(), 9);
    assert!(three.contains("Evicted pods, cumulative"));
}

#[test]
fn escapes_text() {
    let html = render(&[synthetic("<b>drf</b>", 0, 2)], "A & B <script>");
    assert!(html.contains("<title>A &amp; B &lt;script&gt;</title>"));
    assert!(!html.contains("<script>"));
    assert!(!html.contains("<b>drf"));
    assert!(html.contains("prod/&lt;serving&gt; &amp; &quot;batch&quot;"));
    assert!(!html.contains("<serving>"));
    assert_clean(&html);
}

#[test]
fn deterministic() {
    let a = render(&[synthetic("drf", 0, 30), synthetic("fifo", 2, 30)], "t");
    let b = render(&[synthetic("drf", 0, 30), synthetic("fifo", 2, 30)], "t");
    assert_eq!(a, b);
}

#[test]
fn empty_inputs() {
    let html = report_html(&[], "nothing");
    assert_clean(&html);
    assert_eq!(html.matches("<svg").count(), 0);

    let empty = SimOutput {
        policy: "drf".into(),
        jobs: vec![],
        queues: vec![],
        cluster: vec![],
        cycles: 0,
        events: 0,
        start_time: Timestamp(0),
        end_time: Timestamp(0),
        topology: None,
        evictions: vec![],
        eviction_model: Default::default(),
        dra_claims: 0,
    };
    let html = render(std::slice::from_ref(&empty), "empty");
    assert_clean(&html);
    // Cluster, one CDF, pending, Jain; no queues.
    assert_eq!(html.matches("<svg").count(), 4);
    assert!(html.contains("no data"));

    let mut one_point = empty.clone();
    one_point.cluster.push(ClusterSample {
        time: Timestamp(0),
        gpu_capacity: 0,
        gpu_allocated: 0,
        running_jobs: 0,
        pending_jobs: 0,
        largest_free_leaf_gpus: None,
        scattered: false,
    });
    let html = render(&[one_point, empty], "single sample");
    assert_clean(&html);
}

#[test]
fn long_series_are_downsampled() {
    let start = Timestamp(0);
    let mut o = SimOutput {
        policy: "drf".into(),
        jobs: vec![],
        queues: vec![],
        cluster: vec![],
        cycles: 0,
        events: 0,
        start_time: start,
        end_time: Timestamp(100_000 * 1000),
        topology: None,
        evictions: vec![],
        eviction_model: Default::default(),
        dra_claims: 0,
    };
    for i in 0..100_000i64 {
        o.cluster.push(ClusterSample {
            time: Timestamp(i * 1000),
            gpu_capacity: 8000,
            gpu_allocated: if i == 54_321 {
                8000
            } else {
                (i % 7) as u64 * 1000
            },
            running_jobs: 0,
            pending_jobs: 0,
            largest_free_leaf_gpus: None,
            scattered: false,
        });
    }
    let html = render(&[o], "long");
    assert_clean(&html);
    let longest = html
        .split("<path d=\"")
        .skip(1)
        .map(|p| p.split('"').next().unwrap().matches('H').count())
        .max()
        .unwrap();
    assert!(longest <= MAX_POINTS + 1, "{longest}");
    assert!(longest > 500, "{longest}");
}

#[test]
fn helpers() {
    assert_eq!(nice_step(100.0, 5), 20.0);
    assert_eq!(nice_step(0.9, 5), 0.2);
    assert_eq!(linear_ticks(0.0, 1.0, 0.2).len(), 6);
    assert_eq!(num(20_000.0, 0), "20k");
    assert_eq!(num(0.30000000000000004, 1), "0.3");
    assert_eq!(esc("a<'&'>\""), "a&lt;&#39;&amp;&#39;&gt;&quot;");
    assert_eq!(ellipsize("abcdefgh", 5), "abcd…");
    let pts: Vec<(f64, f64)> = (0..5000).map(|i| (i as f64, (i % 5) as f64)).collect();
    let d = downsample(&pts, |x| x / 5000.0 * 100.0, 0.0, 100.0);
    assert!(d.len() <= MAX_POINTS + 1);
    assert!(d.iter().all(|p| p.1 == 4.0 || p == pts.last().unwrap()));
}
