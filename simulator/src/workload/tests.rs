use super::*;

const GEN: &str = r#"
apiVersion: trainyard.io/v1alpha1
kind: WorkloadGenerator
spec:
  seed: 7
  templates:
  - {name: dev, queue: a, count: 50, arrival: {poisson: {perHour: 60}}, podRequests: {nvidia.com/gpu: 1}, duration: {exponential: {mean: 10m}}}
  - {name: big, queue: b, count: 5, arrival: {every: 1h}, pods: {choice: [2, 4]}, podRequests: {nvidia.com/gpu: 8}, duration: {logNormal: {median: 1h, sigma: 0.5}}}
"#;

#[test]
fn generator_is_deterministic_and_per_template() {
    let a = parse_workload(GEN, "g.yaml").unwrap();
    let b = parse_workload(GEN, "g.yaml").unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 55);
    let big: Vec<_> = a.iter().filter(|j| j.queue == "b").collect();
    assert_eq!(
        big.iter().map(|j| j.submit.0).collect::<Vec<_>>(),
        [0, 3_600_000, 7_200_000, 10_800_000, 14_400_000]
    );
    assert!(
        big.iter()
            .all(|j| j.task_count() == 2 || j.task_count() == 4)
    );
    // Removing the first template does not change the second's jobs.
    let only_big = GEN.replace("  - {name: dev, queue: a, count: 50, arrival: {poisson: {perHour: 60}}, podRequests: {nvidia.com/gpu: 1}, duration: {exponential: {mean: 10m}}}\n", "");
    let c = parse_workload(&only_big, "g.yaml").unwrap();
    let durations = |v: &[&SimJob]| v.iter().map(|j| j.duration_ms).collect::<Vec<_>>();
    let c_refs: Vec<&SimJob> = c.iter().collect();
    assert_eq!(
        durations(&big),
        durations(&c_refs),
        "streams are keyed by template name"
    );
}

#[test]
fn gang_size_distributions_stay_in_range() {
    let text = GEN.replace(
        "pods: {choice: [2, 4]}",
        "pods: {logNormal: {median: 4, sigma: 1.5, max: 16}}",
    );
    let jobs = parse_workload(&text, "g.yaml").unwrap();
    let sizes: Vec<u32> = jobs
        .iter()
        .filter(|j| j.queue == "b")
        .map(|j| j.task_count())
        .collect();
    assert!(sizes.iter().all(|n| (1..=16).contains(n)), "{sizes:?}");
    let text = GEN.replace("pods: {choice: [2, 4]}", "pods: {exponential: {mean: -1}}");
    let e = parse_workload(&text, "g.yaml").unwrap_err().to_string();
    assert!(
        e.contains("spec.templates[1].pods.exponential.mean: expected a positive number"),
        "{e}"
    );
}

#[test]
fn poisson_rate_is_roughly_right() {
    let a = parse_workload(GEN, "g.yaml").unwrap();
    let last = a
        .iter()
        .filter(|j| j.queue == "a")
        .map(|j| j.submit.0)
        .max()
        .unwrap();
    // 50 arrivals at 60/h: about 50 minutes; allow a wide band.
    assert!((1_200_000..6_000_000).contains(&last), "{last}");
}

#[test]
fn job_list_and_errors() {
    let text = r#"
kind: Workload
spec:
  jobs:
  - {name: a, queue: q, submit: 0, duration: 10s, tasks: [{count: 2, requests: {nvidia.com/gpu: 4}}]}
  - {name: b, queue: q, submit: 5s, duration: 1m, minMember: 1, tasks: [{count: 3, requests: {cpu: 500m}}]}
"#;
    let jobs = parse_workload(text, "w.yaml").unwrap();
    assert_eq!(jobs[0].id, "sim/a");
    assert_eq!(
        (jobs[0].min_member, jobs[0].duration_ms, jobs[0].gpu_milli()),
        (2, 10_000, 8000)
    );
    assert_eq!((jobs[1].submit.0, jobs[1].min_member), (5000, 1));
    let bad = text.replace("duration: 1m", "duration: -1m");
    let e = parse_workload(&bad, "w.yaml").unwrap_err().to_string();
    assert!(
        e.starts_with(
            "w.yaml: document 1: Workload: spec.jobs[1].duration: expected a non-negative duration"
        ),
        "{e}"
    );
    let bad = text.replace("minMember: 1", "minMember: 9");
    assert_eq!(
        parse_workload(&bad, "w.yaml").unwrap_err().to_string(),
        "w.yaml: document 1: Workload: spec.jobs[1].minMember: expected a whole number from 1 to 3 (the job's task count), found 9"
    );
    // Zero is refused while reading, with the range that holds.
    let bad = text.replace("minMember: 1", "minMember: 0");
    assert_eq!(
        parse_workload(&bad, "w.yaml").unwrap_err().to_string(),
        "w.yaml: document 1: Workload: spec.jobs[1].minMember: expected a whole number from 1 to 100000, found 0"
    );
    let bad = text.replace("count: 2", "cnt: 2");
    let e = parse_workload(&bad, "w.yaml").unwrap_err().to_string();
    assert!(
        e.contains("spec.jobs[0].tasks[0]") && e.contains("unknown field `cnt`"),
        "{e}"
    );
}

#[test]
fn every_type_error_is_reported_in_plain_words() {
    let text = "kind: Workload\nmetadata: {name: week}\nspec:\n  jobs:\n  - {name: a, queue: q, submit: 0, duration: 1m, minMember: 0, preemptible: no, priority: high, tasks: [{count: 0, requests: {cpu: 1}}]}\n  - {name: b, queue: q, submit: 0, duration: 1m, tasks: [{count: 1, requests: {cpu: 1}, extra: 1}]}\n  - {name: c, queue: q, submit: 0, duration: 1m, tasks: [{count: 1, requests: {cpu: 1}}], topology: {maxLeaves: 0}}\n";
    assert_eq!(
        parse_workload(text, "w.yaml").unwrap_err().to_string(),
        "w.yaml: document 1: Workload week: spec.jobs[0].minMember: expected a whole number from 1 to 100000, found 0
w.yaml: document 1: Workload week: spec.jobs[0].preemptible: expected true or false, found \"no\"
w.yaml: document 1: Workload week: spec.jobs[0].priority: expected a whole number from -2147483648 to 2147483647, found \"high\"
w.yaml: document 1: Workload week: spec.jobs[0].tasks[0].count: expected a whole number from 1 to 100000, found 0
w.yaml: document 1: Workload week: spec.jobs[1].tasks[0].extra: unknown field `extra`, expected one of `count`, `requests`, `subGroup`, `nodeSelector`
w.yaml: document 1: Workload week: spec.jobs[2].topology.maxLeaves: expected a whole number from 1 to 4294967295, found 0"
    );
}

#[test]
fn kind_mappings_say_what_they_want() {
    let w = "kind: WorkloadGenerator\nspec:\n  seed: 1\n  templates:\n  - {name: t, queue: q, count: 1, arrival: 5, pods: 3, podRequests: {cpu: 1}, duration: 1m}\n  - {name: u, queue: q, count: 1, arrival: {poison: 1}, pods: {fixed: 1, uniform: {min: 1, max: 2}}, podRequests: [], duration: {fixed: 1m}}\n";
    assert_eq!(
        parse_workload(w, "w.yaml").unwrap_err().to_string(),
        "w.yaml: document 1: WorkloadGenerator: spec.templates[0].arrival: expected a mapping with one key naming the kind, found 5
w.yaml: document 1: WorkloadGenerator: spec.templates[0].duration: unknown variant `1m`, expected one of `fixed`, `uniform`, `exponential`, `logNormal`
w.yaml: document 1: WorkloadGenerator: spec.templates[0].pods: expected a mapping with one key naming the kind, found 3
w.yaml: document 1: WorkloadGenerator: spec.templates[1].arrival: unknown variant `poison`, expected one of `poisson`, `every`, `times`
w.yaml: document 1: WorkloadGenerator: spec.templates[1].podRequests: expected a mapping, found a sequence
w.yaml: document 1: WorkloadGenerator: spec.templates[1].pods: expected a mapping with one key naming the kind, found several keys"
    );
}

#[test]
fn generator_sizes_are_bounded() {
    let gen_ = |count: &str, pods: &str| {
        format!(
            "kind: WorkloadGenerator\nspec:\n  seed: 1\n  templates:\n  - {{name: t, queue: q, count: {count}, arrival: {{every: 1s}}, pods: {{fixed: {pods}}}, podRequests: {{cpu: 1}}, duration: {{fixed: 1m}}}}\n"
        )
    };
    assert_eq!(
        parse_workload(&gen_("2000000", "1"), "g.yaml")
            .unwrap_err()
            .to_string(),
        "g.yaml: document 1: WorkloadGenerator: spec.templates[0].count: expected a whole number from 0 to 1000000, found 2000000"
    );
    assert_eq!(
        parse_workload(&gen_("1", "0"), "g.yaml")
            .unwrap_err()
            .to_string(),
        "g.yaml: document 1: WorkloadGenerator: spec.templates[0].pods.fixed: expected a whole number from 1 to 100000, found 0"
    );
    assert_eq!(
        parse_workload(&gen_("1000", "100000"), "g.yaml")
            .unwrap_err()
            .to_string(),
        "g.yaml: document 1: WorkloadGenerator: spec.templates[0].pods: expected at most 10000000 tasks (pods) in the whole workload; the jobs generated up to this template's job 100 have 10100000"
    );
    let two = "kind: WorkloadGenerator\nspec:\n  seed: 1\n  templates:\n  - {name: t, queue: q, count: 600000, arrival: {every: 1s}, podRequests: {cpu: 1}, duration: {fixed: 1m}}\n  - {name: u, queue: q, count: 600000, arrival: {every: 1s}, podRequests: {cpu: 1}, duration: {fixed: 1m}}\n";
    assert_eq!(
        parse_workload(two, "g.yaml").unwrap_err().to_string(),
        "g.yaml: document 1: WorkloadGenerator: spec.templates[1].count: expected at most 1000000 jobs in all templates together; the templates up to this one have 1200000"
    );
}

#[test]
fn empty_workload_says_what_is_expected() {
    assert_eq!(
        parse_workload("", "w.yaml").unwrap_err().to_string(),
        "w.yaml: is empty; expected a Workload or WorkloadGenerator document (apiVersion: trainyard.io/v1alpha1)"
    );
    assert_eq!(
        parse_workload("kind: Workload\nspec: {jobs: [\n", "w.yaml")
            .unwrap_err()
            .to_string(),
        "w.yaml: invalid YAML: unclosed bracket '[' at line 2, column 14"
    );
}
