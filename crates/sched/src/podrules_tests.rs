use super::*;
use crate::state::NodeState;
use trainyard_model::{
    HostPort, LabelSelector, NamespaceFilter, SpreadConstraint, WeightedPodAffinityTerm,
};

fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn term(app: &str, key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        selector: Some(LabelSelector {
            match_labels: labels(&[("app", app)]),
            ..Default::default()
        }),
        namespaces: NamespaceFilter {
            names: vec!["ml".into()],
            ..Default::default()
        },
        topology_key: key.into(),
    }
}

fn spread(app: &str, skew: u32, min_domains: Option<u32>) -> SpreadConstraint {
    SpreadConstraint {
        max_skew: skew,
        topology_key: "zone".into(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        selector: Some(LabelSelector {
            match_labels: labels(&[("app", app)]),
            ..Default::default()
        }),
        min_domains,
        node_affinity_policy: InclusionPolicy::Honor,
        node_taints_policy: InclusionPolicy::Ignore,
    }
}

/// Nodes n0..n3: zones a, a, b and none; n3 has no hostname label.
fn nodes() -> Vec<Node> {
    (0..4)
        .map(|i| {
            let mut n = Node::new(format!("n{i}"), 8000, 1 << 30, 0);
            if i < 3 {
                n.labels.insert(HOSTNAME_LABEL.into(), format!("n{i}"));
                n.labels
                    .insert("zone".into(), if i < 2 { "a" } else { "b" }.into());
            }
            n
        })
        .collect()
}

/// A state with `members[n]` listed on node `n`.
fn state(nodes: &[Node], members: &[&[u32]]) -> ClusterState {
    ClusterState::new(
        nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut s = NodeState::new(n);
                s.members = members.get(i).map(|m| m.to_vec()).unwrap_or_default();
                s
            })
            .collect(),
    )
}

#[test]
fn no_rules_no_index() {
    let owned = nodes();
    let refs: Vec<&Node> = owned.iter().collect();
    let none = PodRules::default();
    let l = labels(&[("app", "x")]);
    let m = Member {
        namespace: "ml",
        labels: &l,
        rules: &none,
    };
    assert!(RuleIndex::new(&refs, vec![m, m]).is_none());
}

#[test]
fn anti_affinity_symmetry_and_hostname_fallback() {
    let owned = nodes();
    let refs: Vec<&Node> = owned.iter().collect();
    let web = labels(&[("app", "web")]);
    let other = labels(&[("app", "other")]);
    let anti = PodRules {
        anti_affinity: vec![term("web", HOSTNAME_LABEL)],
        ..Default::default()
    };
    let none = PodRules::default();
    // 0: a web pod with anti-affinity to web; 1: a plain web pod; 2: other.
    let members = vec![
        Member {
            namespace: "ml",
            labels: &web,
            rules: &anti,
        },
        Member {
            namespace: "ml",
            labels: &web,
            rules: &none,
        },
        Member {
            namespace: "ml",
            labels: &other,
            rules: &none,
        },
    ];
    let ix = RuleIndex::new(&refs, members.clone()).unwrap();
    assert!(ix.affected(0) && ix.affected(1) && !ix.affected(2));
    // Member 0 runs on n3 (no hostname label: its own domain).
    let st = state(&owned, &[&[], &[], &[], &[0]]);
    let c = PlacementConstraints::default();
    let check = PodCheck::new(&ix, members[1], &c, &refs, &st);
    let closed: Vec<bool> = (0..4).map(|n| check.not_closed(n)).collect();
    assert_eq!(closed, [true, true, true, false]);
    let check = PodCheck::new(&ix, members[2], &c, &refs, &st);
    assert!((0..4).all(|n| check.not_closed(n)));
    // Member 0 itself, with member 1 on n0: its own term closes n0 only.
    let st = state(&owned, &[&[1]]);
    let check = PodCheck::new(&ix, members[0], &c, &refs, &st);
    let ok: Vec<bool> = (0..4).map(|n| check.anti_affinity_ok(n)).collect();
    assert_eq!(ok, [false, true, true, true]);
}

#[test]
fn affinity_first_pod_and_zone() {
    let owned = nodes();
    let refs: Vec<&Node> = owned.iter().collect();
    let grp = labels(&[("app", "grp")]);
    let aff = PodRules {
        affinity: vec![term("grp", "zone")],
        ..Default::default()
    };
    let m = Member {
        namespace: "ml",
        labels: &grp,
        rules: &aff,
    };
    let ix = RuleIndex::new(&refs, vec![m, m]).unwrap();
    let c = PlacementConstraints::default();
    // Nobody matches yet and the pod matches itself: anywhere, even n3.
    let check = PodCheck::new(&ix, m, &c, &refs, &state(&owned, &[]));
    assert!((0..4).all(|n| check.affinity_ok(n)));
    // One in zone b: zone b only.
    let check = PodCheck::new(&ix, m, &c, &refs, &state(&owned, &[&[], &[], &[0]]));
    let ok: Vec<bool> = (0..4).map(|n| check.affinity_ok(n)).collect();
    assert_eq!(ok, [false, false, true, false]);
    // A pod that does not match its own term gets no first-pod pass.
    let stranger = labels(&[("app", "x")]);
    let s = Member {
        labels: &stranger,
        ..m
    };
    let check = PodCheck::new(&ix, s, &c, &refs, &state(&owned, &[]));
    assert!((0..4).all(|n| !check.affinity_ok(n)));
}

#[test]
fn spread_skew_min_domains_and_missing_key() {
    let owned = nodes();
    let refs: Vec<&Node> = owned.iter().collect();
    let sp = labels(&[("app", "sp")]);
    let rules = PodRules {
        spread: vec![spread("sp", 1, None)],
        ..Default::default()
    };
    let with_min = PodRules {
        spread: vec![spread("sp", 1, Some(3))],
        ..Default::default()
    };
    let m = Member {
        namespace: "ml",
        labels: &sp,
        rules: &rules,
    };
    let ix = RuleIndex::new(&refs, vec![m, m, m]).unwrap();
    let c = PlacementConstraints::default();
    // One matching pod in zone a: a would reach skew 2, b is fine; n3
    // has no zone label and never qualifies.
    let st = state(&owned, &[&[0]]);
    let check = PodCheck::new(&ix, m, &c, &refs, &st);
    let ok: Vec<bool> = (0..4).map(|n| check.spread_ok(n)).collect();
    assert_eq!(ok, [false, false, true, false]);
    // One in each zone: both fine. With minDomains 3 (two zones exist),
    // the minimum is 0 and neither is.
    let st = state(&owned, &[&[0], &[], &[1]]);
    let check = PodCheck::new(&ix, m, &c, &refs, &st);
    assert!(check.spread_ok(0) && check.spread_ok(2));
    let mm = Member {
        rules: &with_min,
        ..m
    };
    let check = PodCheck::new(&ix, mm, &c, &refs, &st);
    assert!(!check.spread_ok(0) && !check.spread_ok(2));
    // Pods of another namespace do not count.
    let other_ns = Member {
        namespace: "other",
        ..m
    };
    let ix = RuleIndex::new(&refs, vec![other_ns, m]).unwrap();
    let check = PodCheck::new(&ix, m, &c, &refs, &state(&owned, &[&[0]]));
    assert!(check.spread_ok(0));
}

#[test]
fn preferred_terms_and_host_ports() {
    let owned = nodes();
    let refs: Vec<&Node> = owned.iter().collect();
    let ps = labels(&[("app", "ps")]);
    let w = labels(&[("app", "w")]);
    let none = PodRules::default();
    let port = |p| HostPort {
        port: p,
        protocol: "TCP".into(),
        ip: "0.0.0.0".into(),
    };
    let worker = PodRules {
        preferred_affinity: vec![WeightedPodAffinityTerm {
            weight: 50,
            term: term("ps", "zone"),
        }],
        preferred_anti_affinity: vec![WeightedPodAffinityTerm {
            weight: 20,
            term: term("ps", HOSTNAME_LABEL),
        }],
        host_ports: vec![port(80)],
        ..Default::default()
    };
    let proxy = PodRules {
        host_ports: vec![port(80)],
        ..Default::default()
    };
    let members = vec![
        Member {
            namespace: "ml",
            labels: &ps,
            rules: &none,
        },
        Member {
            namespace: "ml",
            labels: &w,
            rules: &worker,
        },
        Member {
            namespace: "ml",
            labels: &w,
            rules: &proxy,
        },
    ];
    let ix = RuleIndex::new(&refs, members.clone()).unwrap();
    // ps on n0 (zone a), a port-80 pod on n1.
    let st = state(&owned, &[&[0], &[2]]);
    let check = PodCheck::new(
        &ix,
        members[1],
        &PlacementConstraints::default(),
        &refs,
        &st,
    );
    let raw: Vec<i64> = (0..4).map(|n| check.affinity_raw(n)).collect();
    assert_eq!(raw, [30, 50, 0, 0]);
    let free: Vec<bool> = (0..4).map(|n| check.ports_free(&st, n)).collect();
    assert_eq!(free, [true, false, true, true]);
}
