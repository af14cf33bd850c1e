//! The PodGroup reader's tests.
use super::*;
use serde_json::json;

fn parse(v: serde_json::Value) -> Result<PodGroup, ApiErrors> {
    let pg = PodGroup::from_value(&v)?;
    pg.validate()?;
    let problems = pg.upstream_problems();
    if !problems.is_empty() {
        return Err(ApiErrors(problems));
    }
    Ok(pg)
}

#[test]
fn ours_with_defaults_and_subgroups() {
    let pg = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "train-1", "namespace": "ml"},
        "spec": {"queue": "nlp", "minMember": 9, "priority": 5,
                 "subGroups": [{"name": "ps", "minMember": 1}, {"name": "workers", "minMember": 8}]}
    }))
    .unwrap();
    assert_eq!(pg.object(), "PodGroup ml/train-1");
    assert_eq!(pg.spec.min_member, 9);
    assert_eq!(
        pg.spec.sub_groups[1],
        SubGroupSpec {
            name: "workers".into(),
            min_member: 8,
            topology: TopologyConstraintSpec::default(),
        }
    );
    let pg = parse(json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": "x"}})).unwrap();
    assert_eq!(pg.spec, PodGroupSpec::default());
    assert_eq!(pg.namespace(), "default");
}

#[test]
fn null_spec_means_defaults_and_type_errors_name_no_rust_types() {
    let pg = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "x", "namespace": "ml"}, "spec": null
    }))
    .unwrap();
    assert_eq!(pg.spec, PodGroupSpec::default());
    let text = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "x"}, "spec": "big"
    }))
    .unwrap_err()
    .to_string();
    assert_eq!(
        text,
        "PodGroup default/x: spec: expected a mapping, found \"big\""
    );
    let text = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "x"}, "spec": {"subGroups": [null]}
    }))
    .unwrap_err()
    .to_string();
    assert_eq!(
        text,
        "PodGroup default/x: spec.subGroups[0]: expected a mapping, found null"
    );
}

#[test]
fn foreign_groups_are_lenient() {
    let pg = parse(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "v", "namespace": "ml"},
        "spec": {"minMember": 4, "queue": "research", "priorityClassName": "high",
                 "minResources": {"cpu": "4"}, "minTaskMember": {"w": 4}},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    assert_eq!(pg.spec.min_member, 4);
    assert_eq!(pg.spec.queue.as_deref(), Some("research"));
    assert_eq!(pg.spec.priority_class_name.as_deref(), Some("high"));
    let pg = parse(json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "c"}, "spec": {"minMember": 3, "scheduleTimeoutSeconds": 10, "queue": "ignored"}
    }))
    .unwrap();
    assert_eq!(pg.spec.min_member, 3);
    assert_eq!(pg.spec.queue, None);
}

#[test]
fn min_member_states_the_range_that_holds() {
    for (v, found) in [
        (json!(0), "0"),
        (json!(-1), "-1"),
        (json!(3_000_000_000u64), "3000000000"),
        (json!("two"), "\"two\""),
        (json!(1.5), "1.5"),
    ] {
        let text = parse(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ml"},
            "spec": {"minMember": v, "queue": "Bad_Queue"}
        }))
        .unwrap_err()
        .to_string();
        assert!(
            text.starts_with(&format!(
                "PodGroup ml/g: spec.minMember: expected a whole number from 1 to 2147483647, found {found}"
            )),
            "{text}"
        );
        // The other fields are still checked.
        assert!(text.contains("spec.queue"), "{text}");
    }
}

#[test]
fn bad_input() {
    let text = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"minMember": 0, "subGroups": [{"name": "a"}, {"name": "a"}, {"name": ""}]}
    }))
    .unwrap_err()
    .to_string();
    assert_eq!(
        text,
        "PodGroup ml/g: spec.minMember: expected a whole number from 1 to 2147483647, found 0\n\
         PodGroup ml/g: spec.subGroups[1].name: sub-group \"a\" is defined more than once; expected unique names\n\
         PodGroup ml/g: spec.subGroups[2].name: must not be empty"
    );
    let text = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g"}, "spec": {"minMembers": 2}
    }))
    .unwrap_err()
    .to_string();
    assert!(
        text.starts_with("PodGroup default/g: spec.minMembers: unknown field `minMembers`"),
        "{text}"
    );
    let text = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g"}, "spec": {"minMember": -1}
    }))
    .unwrap_err()
    .to_string();
    assert!(
        text.starts_with(
            "PodGroup default/g: spec.minMember: expected a whole number from 1 to 2147483647, found -1"
        ),
        "{text}"
    );
    let text = parse(
        json!({"apiVersion": "example.com/v1", "kind": "PodGroup", "metadata": {"name": "g"}}),
    )
    .unwrap_err()
    .to_string();
    assert!(
        text.contains(
            "apiVersion: expected \"trainyard.io/v1alpha1\" or \"scheduling.volcano.sh/v1beta1\""
        ),
        "{text}"
    );
}

#[test]
fn topology_constraints_on_the_group_and_its_sub_groups() {
    let pg = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"minMember": 4,
                 "topology": {"required": "spineBlock", "preferred": "leaf", "maxLeaves": 2},
                 "subGroups": [{"name": "w", "minMember": 4, "topology": {"required": "nvlink"}},
                               {"name": "ps", "topology": null}]}
    }))
    .unwrap();
    assert_eq!(
        pg.spec.topology,
        TopologyConstraintSpec {
            required: Some("spineBlock".into()),
            preferred: Some("leaf".into()),
            max_leaves: Some(2),
        }
    );
    assert_eq!(
        pg.spec.sub_groups[0].topology.required.as_deref(),
        Some("nvlink")
    );
    assert!(pg.spec.sub_groups[1].topology.is_empty());
    assert_eq!(
        pg.topology_field(Some(0), ConstraintField::MaxLeaves),
        "spec.subGroups[0].topology.maxLeaves"
    );
}

#[test]
fn kai_groups_carry_their_topology_constraint() {
    let pg = parse(json!({
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
        "metadata": {"name": "k", "namespace": "ml"},
        "spec": {"minMember": 2, "queue": "research", "priorityClassName": "train",
                 "topologyConstraint": {"topology": "cluster-topology",
                                        "requiredTopologyLevel": "cloud/block",
                                        "preferredTopologyLevel": ""},
                 "subGroups": [{"name": "w", "minMember": 2, "parent": "x"}]}
    }))
    .unwrap();
    assert_eq!(pg.spec.queue.as_deref(), Some("research"));
    assert_eq!(pg.spec.priority_class_name.as_deref(), Some("train"));
    assert_eq!(pg.spec.topology.required.as_deref(), Some("cloud/block"));
    assert_eq!(pg.spec.topology.preferred, None);
    assert_eq!(pg.topology_name.as_deref(), Some("cluster-topology"));
    assert!(pg.spec.sub_groups.is_empty());
    assert_eq!(
        pg.topology_field(None, ConstraintField::Required),
        "spec.topologyConstraint.requiredTopologyLevel"
    );
    // Volcano groups have no such field; it is ignored there.
    let pg = parse(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "v"},
        "spec": {"topologyConstraint": {"requiredTopologyLevel": "rack"}}
    }))
    .unwrap();
    assert!(pg.spec.topology.is_empty());
}

#[test]
fn bad_topology_constraints() {
    let text = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml"},
        "spec": {"topology": {"required": "", "maxLeaves": 0},
                 "subGroups": [{"name": "w", "topology": {"maxLeaves": 0}}]}
    }))
    .unwrap_err()
    .to_string();
    assert_eq!(
        text,
        "PodGroup ml/g: spec.topology.required: must not be empty; expected a topology level name or a node label key\n\
         PodGroup ml/g: spec.topology.maxLeaves: must be at least 1, found 0\n\
         PodGroup ml/g: spec.subGroups[0].topology.maxLeaves: must be at least 1, found 0"
    );
    let text = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g"}, "spec": {"topology": {"requiredLevel": "leaf"}}
    }))
    .unwrap_err()
    .to_string();
    assert!(
        text.starts_with(
            "PodGroup default/g: spec.topology.requiredLevel: unknown field `requiredLevel`"
        ),
        "{text}"
    );
    let text = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g"}, "spec": {"topology": {"maxLeaves": -1}}
    }))
    .unwrap_err()
    .to_string();
    assert_eq!(
        text,
        "PodGroup default/g: spec.topology.maxLeaves: expected a whole number from 0 to 4294967295, found -1"
    );
}

#[test]
fn preemptible_field_and_keys() {
    let pg = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml"}, "spec": {"preemptible": false}
    }))
    .unwrap();
    assert_eq!(pg.spec.preemptible, Some(false));
    let pg = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml"}, "spec": {"preemptible": null}
    }))
    .unwrap();
    assert_eq!(pg.spec.preemptible, None);
    // Foreign groups have no such field; their keys are still read.
    let pg = parse(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "v", "annotations": {"volcano.sh/preemptable": "true"}},
        "spec": {"preemptible": false}
    }))
    .unwrap();
    assert_eq!(pg.spec.preemptible, None);
    assert_eq!(
        crate::preemption::preemptible_marks(&pg.metadata)[0].value,
        Ok(true)
    );
}

#[test]
fn bad_preemptible_values_name_the_field() {
    let text = parse(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml"}, "spec": {"preemptible": "no"}
    }))
    .unwrap_err()
    .to_string();
    assert_eq!(
        text,
        "PodGroup ml/g: spec.preemptible: expected true or false, found \"no\""
    );
    let text = parse(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ml",
                     "labels": {"trainyard.io/preemptible": "yes"},
                     "annotations": {"volcano.sh/preemptable": "True"}}
    }))
    .unwrap_err()
    .to_string();
    assert_eq!(
        text,
        "PodGroup ml/g: metadata.labels.trainyard.io/preemptible: invalid value \"yes\"; expected \"true\" or \"false\"\n\
         PodGroup ml/g: metadata.annotations.volcano.sh/preemptable: invalid value \"True\"; expected \"true\" or \"false\""
    );
}

mod upstream_groups {
    use k8s_openapi::api::scheduling::v1beta1 as k8s;
    use serde_json::json;

    use super::super::upstream::{Upstream, Workload};
    use super::*;

    /// A v1beta1 PodGroup as the Kubernetes types write it, read back by
    /// Trainyard: what it says survives the trip.
    #[test]
    fn v1beta1_typed_object_round_trips_into_the_gang() {
        let typed = k8s::PodGroup {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("train".into()),
                namespace: Some("ml".into()),
                ..Default::default()
            },
            spec: k8s::PodGroupSpec {
                scheduling_policy: k8s::PodGroupSchedulingPolicy {
                    gang: Some(k8s::GangSchedulingPolicy { min_count: 4 }),
                    basic: None,
                },
                scheduling_constraints: Some(k8s::PodGroupSchedulingConstraints {
                    topology: Some(vec![k8s::TopologyConstraint {
                        key: "example.com/rack".into(),
                    }]),
                }),
                priority_class_name: Some("high".into()),
                priority: Some(1000),
                disruption_mode: Some(k8s::DisruptionMode {
                    all: Some(k8s::AllDisruptionMode(json!({}))),
                    single: None,
                }),
                preemption_policy: Some("Never".into()),
                workload_ref: Some(k8s::WorkloadReference {
                    workload_name: "train".into(),
                    template_name: "workers".into(),
                }),
                ..Default::default()
            },
            status: None,
        };
        let mut v = serde_json::to_value(&typed).unwrap();
        v["apiVersion"] = json!("scheduling.k8s.io/v1beta1");
        v["kind"] = json!("PodGroup");
        let pg = parse(v).unwrap();
        assert_eq!(pg.object(), "PodGroup ml/train");
        assert_eq!(pg.spec.min_member, 4);
        assert_eq!(
            pg.spec.topology.required.as_deref(),
            Some("example.com/rack")
        );
        assert_eq!(pg.spec.priority_class_name.as_deref(), Some("high"));
        assert_eq!(pg.spec.priority, Some(1000));
        assert_eq!(pg.spec.queue, None);
        assert_eq!(
            pg.upstream,
            Some(Upstream {
                basic: false,
                evict_whole: true,
                never_preempts: true,
                workload: Some(("train".into(), "workers".into())),
                problems: Vec::new(),
            })
        );
        assert_eq!(
            pg.topology_field(None, ConstraintField::Required),
            "spec.schedulingConstraints.topology[0].key"
        );
    }

    /// A v1alpha2 PodGroup (Kubernetes 1.36; its types are not built in):
    /// `disruptionMode` is a string, the template reference has another
    /// shape, and `preemptionPolicy` does not exist.
    #[test]
    fn v1alpha2_object_as_kubernetes_1_36_serves_it() {
        let pg = parse(json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "generation": 1},
            "spec": {
                "schedulingPolicy": {"basic": {}},
                "disruptionMode": "PodGroup",
                "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}},
                "resourceClaims": [{"name": "shared", "resourceClaimName": "c"}]
            },
            "status": {"conditions": []}
        }))
        .unwrap();
        assert_eq!(pg.spec.min_member, 1);
        let u = pg.upstream.unwrap();
        assert!(u.basic && u.evict_whole && !u.never_preempts);
        assert_eq!(u.workload, Some(("w".into(), "t".into())));
        // The same object serialized again reads the same.
    }

    #[test]
    fn bad_upstream_values_name_their_fields() {
        let err = parse(json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ml"},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 0}},
                "schedulingConstraints": {"topology": [{"key": ""}]},
                "disruptionMode": "PodGroup",
                "preemptionPolicy": "Sometimes"
            }
        }))
        .unwrap_err();
        expect_test::expect![[r#"
            PodGroup ml/g: spec.schedulingPolicy.gang.minCount: expected a whole number from 1 to 2147483647, found 0
            PodGroup ml/g: spec.schedulingConstraints.topology[0].key: must not be empty; expected a node label key
            PodGroup ml/g: spec.disruptionMode: expected an object with one of single or all, such as {all: {}}
            PodGroup ml/g: spec.preemptionPolicy: expected "Never" or "PreemptLowerPriority", found "Sometimes""#]]
        .assert_eq(&err.to_string());
        let err = parse(json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}, "disruptionMode": "All"}
        }))
        .unwrap_err();
        expect_test::expect![[r#"
            PodGroup ml/g: spec.schedulingPolicy: sets both basic and gang; expected exactly one
            PodGroup ml/g: spec.disruptionMode: expected "Pod" or "PodGroup", found "All""#]]
        .assert_eq(&err.to_string());
        let err = parse(json!({
            "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ml"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": "two"}}}
        }))
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("spec.schedulingPolicy.gang.minCount"),
            "{err}"
        );
    }

    #[test]
    fn workloads_of_both_versions_are_read_and_checked() {
        let typed = k8s::Workload {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("job-1".into()),
                namespace: Some("ml".into()),
                ..Default::default()
            },
            spec: k8s::WorkloadSpec {
                pod_group_templates: Some(vec![k8s::PodGroupTemplate {
                    name: "workers".into(),
                    scheduling_policy: k8s::PodGroupSchedulingPolicy {
                        gang: Some(k8s::GangSchedulingPolicy { min_count: 8 }),
                        basic: None,
                    },
                    ..Default::default()
                }]),
                ..Default::default()
            },
        };
        let mut v = serde_json::to_value(&typed).unwrap();
        v["apiVersion"] = json!("scheduling.k8s.io/v1beta1");
        v["kind"] = json!("Workload");
        let w = Workload::from_value(&v).unwrap();
        assert_eq!(w.object(), "Workload ml/job-1");
        assert_eq!(w.templates, vec!["workers".to_string()]);
        let err = Workload::from_value(&json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ml"},
            "spec": {"podGroupTemplates": [
                {"name": "a", "schedulingPolicy": {"gang": {"minCount": 2}}},
                {"name": "a", "schedulingPolicy": {}},
                {"name": "B_", "schedulingPolicy": {"basic": {}}}
            ]}
        }))
        .unwrap_err();
        expect_test::expect![[r#"
            Workload ml/w: spec.podGroupTemplates[1].name: template "a" is defined more than once; expected unique names
            Workload ml/w: spec.podGroupTemplates[1].schedulingPolicy: sets neither basic nor gang; expected exactly one
            Workload ml/w: spec.podGroupTemplates[2].name: "B_" is not a valid DNS-1123 label; expected at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"#]]
        .assert_eq(&err.to_string());
    }
}
