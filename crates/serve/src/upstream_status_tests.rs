use serde_json::json;
use trainyard_model::TaskKey;

use super::*;
use crate::queue_status::apply_merge_patch;

const V1B1: UpstreamVersion = UpstreamVersion::V1Beta1;
const V1A2: UpstreamVersion = UpstreamVersion::V1Alpha2;

fn pod(name: &str, scheduler: &str, node: Option<&str>, phase: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": "ml"},
           "spec": {"schedulerName": scheduler, "nodeName": node,
                    "schedulingGroup": {"podGroupName": "train"}},
           "status": {"phase": phase}})
}

fn members(bound: u32, live: &[&str]) -> Members {
    Members {
        ours: bound.max(1),
        bound,
        live: live
            .iter()
            .map(|p| ("ml".to_string(), p.to_string()))
            .collect(),
        ..Members::default()
    }
}

fn line(c: &Option<Value>) -> String {
    match c {
        None => "as it was".into(),
        Some(c) => format!(
            "{}={} {}: {}",
            c["type"].as_str().unwrap_or(""),
            c["status"].as_str().unwrap_or(""),
            c["reason"].as_str().unwrap_or(""),
            c["message"].as_str().unwrap_or("")
        ),
    }
}

fn group<'a>(
    min: u32,
    m: &'a Members,
    pending: Option<(&'a str, &'a str)>,
    before: &'a [Value],
) -> Group<'a> {
    Group {
        min,
        members: m,
        pending,
        disrupted: None,
        before,
    }
}

#[test]
fn versions_parse_and_name_their_condition() {
    assert_eq!(UpstreamVersion::parse("v1beta1"), Some(V1B1));
    assert_eq!(UpstreamVersion::parse("v1alpha2"), Some(V1A2));
    assert_eq!(UpstreamVersion::parse("v1alpha1"), None);
    assert_eq!(V1B1.scheduled_type(), "PodGroupInitiallyScheduled");
    assert_eq!(V1A2.scheduled_type(), "PodGroupScheduled");
    assert!(V1B1.sticky() && !V1A2.sticky());
}

#[test]
fn pods_are_counted_by_group_and_scheduler_and_a_relist_drops_the_missed() {
    let mut p = UpstreamPods::default();
    p.list_start();
    p.applied(&pod("a", "trainyard", Some("n1"), "Running"), "trainyard");
    p.applied(&pod("b", "trainyard", None, "Pending"), "trainyard");
    p.applied(&pod("c", "trainyard", Some("n1"), "Succeeded"), "trainyard");
    let mut gone = pod("d", "trainyard", Some("n2"), "Running");
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into();
    p.applied(&gone, "trainyard");
    // No scheduler name: kube-scheduler's.
    let mut theirs = pod("e", "", None, "Pending");
    theirs["spec"]
        .as_object_mut()
        .map(|s| s.remove("schedulerName"));
    p.applied(&theirs, "trainyard");
    // A pod of no upstream group is not counted.
    p.applied(
        &json!({"metadata": {"name": "x", "namespace": "ml"}, "spec": {}}),
        "trainyard",
    );
    p.list_done();
    let all = p.members();
    let m = &all["ml/train"];
    assert_eq!((m.ours, m.others), (4, 1));
    assert_eq!((m.bound, m.terminating, m.succeeded), (1, 1, 1));
    assert_eq!(
        m.live.iter().map(|k| k.1.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(all.len(), 1);

    p.list_start();
    p.applied(&pod("a", "trainyard", Some("n1"), "Running"), "trainyard");
    p.list_done();
    assert_eq!(p.members()["ml/train"].ours, 1, "b, c, d, e gone");
    p.deleted(&pod("a", "trainyard", None, ""));
    assert!(p.members().is_empty());
}

#[test]
fn a_group_is_ours_when_our_pods_name_it_or_only_its_job_does() {
    let ours = Members {
        ours: 2,
        others: 1,
        ..Members::default()
    };
    let theirs = Members {
        others: 3,
        ..Members::default()
    };
    // Mixed pods (they disagree on schedulerName): Trainyard says why.
    assert!(is_ours(Some(&ours), false));
    // kube-scheduler's alone: never, even when a job of that id exists.
    assert!(!is_ours(Some(&theirs), false));
    assert!(!is_ours(Some(&theirs), true));
    // No pod names it, but the snapshot has its job.
    assert!(is_ours(None, true));
    assert!(!is_ours(None, false));
}

#[test]
fn the_group_is_scheduled_once_its_minimum_is_bound() {
    let none: &[Value] = &[];
    let two = members(2, &["a", "b"]);
    let one = Members {
        succeeded: 1,
        ..members(1, &["a"])
    };
    let zero = members(0, &[]);
    let waiting = Some((
        "Unschedulable",
        "gang needs 4 GPUs; largest free node has 2",
    ));
    let lines: Vec<String> = [
        (V1B1, group(2, &two, None, none)),
        (V1A2, group(2, &one, None, none)),
        (V1B1, group(2, &zero, waiting, none)),
        (
            V1A2,
            group(
                2,
                &zero,
                Some(("QueueAtLimit", "queue ml at its limit")),
                none,
            ),
        ),
        (
            V1B1,
            group(
                2,
                &zero,
                Some((
                    "SchedulerError",
                    "pods disagree on schedulerName: trainyard (a), default-scheduler (b)",
                )),
                none,
            ),
        ),
        // Bound this cycle, the watch has not shown it yet.
        (V1B1, group(2, &zero, None, none)),
    ]
    .iter()
    .map(|(v, g)| line(&wanted(*v, g).scheduled))
    .collect();
    expect_test::expect![[r#"
        [
            "PodGroupInitiallyScheduled=True Scheduled: 2 pods bound of minCount 2",
            "PodGroupScheduled=True Scheduled: 2 pods bound of minCount 2",
            "PodGroupInitiallyScheduled=False Unschedulable: gang needs 4 GPUs; largest free node has 2",
            "PodGroupScheduled=False Unschedulable: queue ml at its limit",
            "PodGroupInitiallyScheduled=False SchedulerError: pods disagree on schedulerName: trainyard (a), default-scheduler (b)",
            "as it was",
        ]
    "#]]
    .assert_debug_eq(&lines);
}

#[test]
fn v1beta1_never_goes_back_to_false_and_v1alpha2_follows_the_group() {
    let zero = members(0, &[]);
    let waiting = Some(("Unschedulable", "no room"));
    let was_b = [condition(
        "PodGroupInitiallyScheduled",
        true,
        "Scheduled",
        "x",
    )];
    let was_a = [condition("PodGroupScheduled", true, "Scheduled", "x")];
    assert_eq!(
        wanted(V1B1, &group(2, &zero, waiting, &was_b)).scheduled,
        None
    );
    assert_eq!(
        line(&wanted(V1A2, &group(2, &zero, waiting, &was_a)).scheduled),
        "PodGroupScheduled=False Unschedulable: no room"
    );
    // A True read back from the API after a restart counts too.
    let shown = GroupSeen {
        generation: Some(1),
        min_count: 2,
        conditions: vec![
            json!({"type": "PodGroupInitiallyScheduled", "status": "True",
            "reason": "Scheduled", "message": "by the last leader",
            "lastTransitionTime": "t0", "observedGeneration": 1}),
        ],
    };
    let cache = UpstreamCache::default();
    let before = cache.before(V1B1, "ml/train", &shown.conditions);
    assert_eq!(
        wanted(V1B1, &group(2, &zero, waiting, &before)).scheduled,
        None
    );
}

fn eviction(pod: &str, kind: EvictionKind) -> Eviction {
    Eviction {
        job: "ml/train".into(),
        task: TaskKey {
            namespace: "ml".into(),
            name: pod.into(),
            uid: format!("u-{pod}"),
        },
        node: "n1".into(),
        kind,
        preemptor: "team-b/llm".into(),
        message: "reclaimed for team-b/llm: ml above fair share (nvidia.com/gpu 8/4)".into(),
    }
}

#[test]
fn an_eviction_sets_disruption_target_until_other_pods_are_bound() {
    let groups = BTreeMap::from([("ml/train".to_string(), GroupSeen::default())]);
    let mut disrupted = BTreeMap::new();
    let evictions = [
        eviction("a", EvictionKind::Reclaim),
        eviction("b", EvictionKind::Reclaim),
        // Another job's eviction is not this group's.
        Eviction {
            job: "ml/other".into(),
            ..eviction("z", EvictionKind::Preempt)
        },
    ];
    note_evictions(&mut disrupted, &evictions, &groups, 5);
    assert_eq!(disrupted.len(), 1);
    let d = &disrupted["ml/train"];
    let none: &[Value] = &[];
    let states = [
        // The cycle of the eviction: the pods are still bound.
        members(2, &["a", "b"]),
        // Terminating, then gone, then one new pod bound.
        members(0, &[]),
        members(1, &["c"]),
        // The minimum bound again with new pods.
        members(2, &["c", "d"]),
    ];
    let lines: Vec<String> = states
        .iter()
        .map(|m| {
            let g = Group {
                disrupted: Some(d),
                ..group(2, m, None, none)
            };
            line(&wanted(V1A2, &g).disruption)
        })
        .collect();
    expect_test::expect![[r#"
        [
            "DisruptionTarget=True PreemptionByScheduler: Trainyard reclaimed 2 of the group's pods for team-b/llm: reclaimed for team-b/llm: ml above fair share (nvidia.com/gpu 8/4)",
            "DisruptionTarget=True PreemptionByScheduler: Trainyard reclaimed 2 of the group's pods for team-b/llm: reclaimed for team-b/llm: ml above fair share (nvidia.com/gpu 8/4)",
            "DisruptionTarget=True PreemptionByScheduler: Trainyard reclaimed 2 of the group's pods for team-b/llm: reclaimed for team-b/llm: ml above fair share (nvidia.com/gpu 8/4)",
            "DisruptionTarget=False Scheduled: the group's minimum (2) is bound again since Trainyard evicted it",
        ]
    "#]]
    .assert_debug_eq(&lines);

    // After a restart (no memory of the pods): cleared once the minimum
    // is bound and none terminates; untouched when it never was True.
    let shown = [condition(
        DISRUPTION_TARGET,
        true,
        "PreemptionByScheduler",
        "x",
    )];
    let back = members(2, &["c", "d"]);
    let mut leaving = members(2, &["c", "d"]);
    leaving.terminating = 1;
    assert_eq!(
        line(&wanted(V1B1, &group(2, &back, None, &shown)).disruption),
        "DisruptionTarget=False Scheduled: the group's minimum (2) is bound again since Trainyard evicted it"
    );
    assert_eq!(
        wanted(V1B1, &group(2, &leaving, None, &shown)).disruption,
        None
    );
    assert_eq!(wanted(V1B1, &group(2, &back, None, none)).disruption, None);
}

#[test]
fn the_patch_keeps_other_conditions_times_and_fields() {
    let seen = GroupSeen {
        generation: Some(3),
        min_count: 2,
        conditions: vec![
            json!({"type": "example.com/Ready", "status": "True", "reason": "X",
                   "message": "another writer's", "lastTransitionTime": "t0"}),
            json!({"type": "PodGroupInitiallyScheduled", "status": "False",
                   "reason": "Unschedulable", "message": "no room",
                   "lastTransitionTime": "t1", "observedGeneration": 2}),
        ],
    };
    let mut api = json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c"}],
                         "conditions": seen.conditions.clone()});
    let mut cache = UpstreamCache::default();
    // Still waiting, message changed: the time stays, the generation is
    // this one.
    let w = Wanted {
        scheduled: Some(condition(
            "PodGroupInitiallyScheduled",
            false,
            "Unschedulable",
            "still no room",
        )),
        disruption: None,
    };
    let patch = cache
        .change(V1B1, "ml/train", w.clone(), &seen, "t2")
        .expect("a change");
    assert_eq!(
        patch.as_object().map(|o| o.len()),
        Some(1),
        "conditions only"
    );
    let list = &patch["conditions"];
    assert_eq!(list[0]["type"], "example.com/Ready", "kept, in its place");
    assert_eq!(list[1]["message"], "still no room");
    assert_eq!(list[1]["lastTransitionTime"], "t1");
    assert_eq!(list[1]["observedGeneration"], 3);
    apply_merge_patch(&mut api, &patch);
    assert_eq!(api["resourceClaimStatuses"][0]["name"], "gpu", "untouched");
    // Written: the same again is not written.
    assert_eq!(cache.change(V1B1, "ml/train", w, &seen, "t3"), None);

    // Scheduled: a new time; DisruptionTarget appended.
    let w = Wanted {
        scheduled: Some(condition(
            "PodGroupInitiallyScheduled",
            true,
            "Scheduled",
            "2 pods bound of minCount 2",
        )),
        disruption: Some(condition(DISRUPTION_TARGET, false, "Scheduled", "again")),
    };
    let patch = cache
        .change(V1B1, "ml/train", w.clone(), &seen, "t4")
        .expect("a change");
    let types: Vec<&str> = patch["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(
        types,
        [
            "example.com/Ready",
            "PodGroupInitiallyScheduled",
            "DisruptionTarget"
        ]
    );
    assert_eq!(patch["conditions"][1]["lastTransitionTime"], "t4");
    apply_merge_patch(&mut api, &patch);

    // A restart: the API shows it, nothing is written.
    let shown = GroupSeen {
        conditions: api["conditions"].as_array().cloned().unwrap_or_default(),
        ..seen.clone()
    };
    let mut fresh = UpstreamCache::default();
    assert_eq!(
        fresh.change(V1B1, "ml/train", w.clone(), &shown, "t5"),
        None
    );
    // A failed write is forgotten and compared with the API again.
    cache.forget("ml/train");
    assert_eq!(cache.change(V1B1, "ml/train", w, &shown, "t6"), None);
}

#[test]
fn the_last_written_conditions_survive_a_lagging_watch() {
    // DisruptionTarget written last cycle, not shown yet: a change of the
    // scheduled condition does not drop it.
    let seen = GroupSeen {
        generation: Some(1),
        min_count: 1,
        conditions: vec![],
    };
    let mut cache = UpstreamCache::default();
    let first = Wanted {
        scheduled: None,
        disruption: Some(condition(
            DISRUPTION_TARGET,
            true,
            "PreemptionByScheduler",
            "m",
        )),
    };
    assert!(cache.change(V1A2, "ml/g", first, &seen, "t1").is_some());
    let second = Wanted {
        scheduled: Some(condition("PodGroupScheduled", false, "Unschedulable", "w")),
        disruption: None,
    };
    let patch = cache
        .change(V1A2, "ml/g", second, &seen, "t2")
        .expect("a change");
    let types: Vec<&str> = patch["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(types, ["DisruptionTarget", "PodGroupScheduled"]);
    assert_eq!(patch["conditions"][0]["lastTransitionTime"], "t1");
}

#[test]
fn a_group_object_gives_its_minimum_and_generation() {
    let gang = json!({"metadata": {"name": "g", "namespace": "ml", "generation": 4},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 8}}},
        "status": {"conditions": [{"type": "PodGroupScheduled", "status": "True"}]}});
    let basic = json!({"metadata": {"name": "b", "namespace": "ml"},
        "spec": {"schedulingPolicy": {"basic": {}}}});
    let g = GroupSeen::of(&gang);
    assert_eq!(
        (g.generation, g.min_count, g.conditions.len()),
        (Some(4), 8, 1)
    );
    assert_eq!(GroupSeen::of(&basic).min_count, 1);
    let mut all = UpstreamGroups::default();
    all.list_start();
    all.applied(&gang);
    all.applied(&basic);
    all.list_done();
    all.list_start();
    all.applied(&gang);
    all.list_done();
    assert_eq!(all.groups.keys().collect::<Vec<_>>(), ["ml/g"]);
    all.deleted(&gang);
    assert!(all.groups.is_empty());
}
