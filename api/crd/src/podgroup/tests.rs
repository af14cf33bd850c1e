//! The PodGroup reader's tests.
use super::*;
use serde_json::json;

fn parse(v: serde_json::Value) -> Result<PodGroup, ApiErrors> {
    let pg = PodGroup::from_value(&v)?;
    pg.validate()?;
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
