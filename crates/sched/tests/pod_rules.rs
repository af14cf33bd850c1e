//! Rules between pods through the one entry point `schedule`: a property
//! recomputes, from the input pods and the output decisions alone, that no
//! placement of the cycle breaks a required anti-affinity term (either
//! way round) or shares a host port, with gangs, elastic pods and
//! preemption in play.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use trainyard_model::{
    ExternalPod, HostPort, Job, LabelSelector, NamespaceFilter, Node, PlacementConstraints,
    PodAffinityTerm, PodRules, QueueSpec, QueueTree, Resources, Snapshot, TaskState, Timestamp,
};
use trainyard_sched::{Config, schedule};

const GI: u64 = 1 << 30;
const APPS: [&str; 3] = ["a", "b", "c"];
const KEYS: [&str; 2] = ["kubernetes.io/hostname", "zone"];

fn labels(app: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_string(), app.to_string())])
}

fn anti(apps: &[&str], key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        selector: Some(LabelSelector {
            match_expressions: vec![trainyard_model::NodeSelectorRequirement {
                key: "app".into(),
                operator: trainyard_model::LabelSelectorOperator::In,
                values: apps.iter().map(|s| s.to_string()).collect(),
            }],
            ..Default::default()
        }),
        namespaces: NamespaceFilter {
            names: vec!["ml".into()],
            ..Default::default()
        },
        topology_key: key.into(),
    }
}

/// One generated pod: app label index, anti-affinity (selected apps as a
/// bit set, key index), host port.
type PodGen = (usize, Option<(u8, usize)>, Option<u16>);

fn rules_of(g: &PodGen) -> PodRules {
    let mut r = PodRules::default();
    if let Some((set, key)) = g.1 {
        let apps: Vec<&str> = (0..3)
            .filter(|i| set & (1 << i) != 0)
            .map(|i| APPS[i])
            .collect();
        if !apps.is_empty() {
            r.anti_affinity.push(anti(&apps, KEYS[key]));
        }
    }
    if let Some(p) = g.2 {
        r.host_ports.push(HostPort {
            port: p,
            protocol: "TCP".into(),
            ip: "0.0.0.0".into(),
        });
    }
    r
}

fn job(id: &str, pods: &[PodGen], priority: i32, min: u32, bound_on: Option<&[usize]>) -> Job {
    let mut j = Job::gang(
        id,
        "q",
        vec![Resources::new(1000, GI, 0).with_gpus(1); pods.len()],
    )
    .with_priority(priority);
    j.min_member = min.min(pods.len() as u32).max(1);
    for (i, (t, g)) in j.tasks.iter_mut().zip(pods).enumerate() {
        t.key.namespace = "ml".into();
        t.labels = labels(APPS[g.0]);
        t.constraints = Arc::new(PlacementConstraints {
            pod_rules: rules_of(g),
            ..Default::default()
        });
        if let Some(nodes) = bound_on {
            t.state = TaskState::Bound {
                node: format!("n{}", nodes[i % nodes.len()]),
                gpus: None,
            };
            t.started = Some(Timestamp(0));
        }
    }
    j
}

/// A placed pod as the check sees it: node index, labels, rules.
struct Placed {
    node: usize,
    labels: BTreeMap<String, String>,
    rules: PodRules,
    new: bool,
}

fn domain(node: usize, key: &str) -> String {
    if key == "zone" {
        format!("z{}", node % 2)
    } else {
        format!("n{node}")
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn placements_never_break_anti_affinity_or_host_ports(
        nodes in 3usize..6,
        running in prop::collection::vec(
            (prop::collection::vec((0usize..3, prop::option::of((0u8..8, 0usize..2)), prop::option::of(80u16..82)), 1..3), 0i32..2, prop::collection::vec(0usize..6, 1..3)),
            0..3),
        pending in prop::collection::vec(
            (prop::collection::vec((0usize..3, prop::option::of((0u8..8, 0usize..2)), prop::option::of(80u16..82)), 1..4), 0i32..3, 1u32..4),
            1..5),
        external in prop::option::of((0usize..3, 0u8..8, 0usize..6)),
    ) {
        let node_list: Vec<Node> = (0..nodes)
            .map(|i| {
                let mut n = Node::new(format!("n{i}"), 16_000, 64 * GI, 4);
                n.labels.insert("zone".into(), format!("z{}", i % 2));
                n.labels.insert("kubernetes.io/hostname".into(), format!("n{i}"));
                n
            })
            .collect();
        let mut jobs = Vec::new();
        for (i, (pods, prio, on)) in running.iter().enumerate() {
            let on: Vec<usize> = on.iter().map(|n| n % nodes).collect();
            jobs.push(job(&format!("run{i}"), pods, *prio, pods.len() as u32, Some(&on)));
        }
        for (i, (pods, prio, min)) in pending.iter().enumerate() {
            jobs.push(job(&format!("new{i}"), pods, *prio, *min, None));
        }
        let ext: Vec<ExternalPod> = external
            .iter()
            .map(|(app, set, n)| ExternalPod {
                name: "other/ext".into(),
                node: format!("n{}", n % nodes),
                requests: Resources::new(1000, GI, 0),
                namespace: "ml".into(),
                labels: labels(APPS[*app]),
                pod_rules: Arc::new(rules_of(&(*app, Some((*set, 0)), None))),
                ..Default::default()
            })
            .collect();
        let tree = QueueTree::build(vec![QueueSpec::new("q")]).unwrap();
        let snap = Snapshot::new(node_list, tree, jobs.clone()).with_external(ext.clone());
        let d = schedule(&snap, &Config::default(), Timestamp(1000));

        // The world after the cycle: running pods not evicted, this
        // cycle's binds and nominations (they bind where nominated).
        let evicted: Vec<String> = d.evictions.iter().map(|e| e.task.to_string()).collect();
        let mut placed: Vec<Placed> = Vec::new();
        for e in &ext {
            placed.push(Placed { node: e.node[1..].parse().unwrap(), labels: e.labels.clone(), rules: (*e.pod_rules).clone(), new: false });
        }
        let by_key: BTreeMap<String, &trainyard_model::Task> = jobs.iter().flat_map(|j| &j.tasks).map(|t| (t.key.to_string(), t)).collect();
        for t in by_key.values() {
            if let TaskState::Bound { node, .. } = &t.state && !evicted.contains(&t.key.to_string()) {
                placed.push(Placed { node: node[1..].parse().unwrap(), labels: t.labels.clone(), rules: t.constraints.pod_rules.clone(), new: false });
            }
        }
        let news = d.binds.iter().map(|b| (&b.task, &b.node)).chain(d.nominations.iter().map(|n| (&n.task, &n.node)));
        for (task, node) in news {
            let t = by_key[&task.to_string()];
            placed.push(Placed { node: node.0[1..].parse().unwrap(), labels: t.labels.clone(), rules: t.constraints.pod_rules.clone(), new: true });
        }
        for (i, p) in placed.iter().enumerate() {
            for (k, q) in placed.iter().enumerate() {
                if i == k || !(p.new || q.new) {
                    continue;
                }
                for t in &p.rules.anti_affinity {
                    prop_assert!(
                        !(t.selects("ml", &q.labels) && domain(p.node, &t.topology_key) == domain(q.node, &t.topology_key)),
                        "anti-affinity broken: {:?} on n{} and {:?} on n{} ({})", p.labels, p.node, q.labels, q.node, t.topology_key
                    );
                }
                if p.node == q.node {
                    for a in &p.rules.host_ports {
                        prop_assert!(!q.rules.host_ports.iter().any(|b| a.conflicts(b)), "host port {a} shared on n{}", p.node);
                    }
                }
            }
        }
    }
}

/// Preemption places the preemptor only where the rules allow: a guard
/// pod's required anti-affinity closes n0 to app=a, so the victim is
/// taken on n1 even though n0 sorts first (and is where the preemptor
/// lands without the guard's rule).
#[test]
fn preemption_respects_anti_affinity_of_a_pod_already_there() {
    let run = |guarded: bool| {
        let nodes: Vec<Node> = (0..2)
            .map(|i| Node::new(format!("n{i}"), 16_000, 64 * GI, 4))
            .collect();
        let mut low = job("low", &[(1, None, None); 4], 0, 1, Some(&[0, 1]));
        for t in &mut low.tasks {
            t.requests = Resources::new(1000, GI, 0).with_gpus(2);
        }
        let mut hi = job("hi", &[(0, None, None)], 50, 1, None);
        hi.tasks[0].requests = Resources::new(1000, GI, 0).with_gpus(2);
        let guard = ExternalPod {
            name: "other/guard".into(),
            node: "n0".into(),
            requests: Resources::new(100, GI, 0),
            namespace: "ml".into(),
            labels: labels("c"),
            pod_rules: Arc::new(if guarded {
                rules_of(&(2, Some((0b001, 0)), None))
            } else {
                PodRules::default()
            }),
            ..Default::default()
        };
        let tree = QueueTree::build(vec![QueueSpec::new("q")]).unwrap();
        let snap = Snapshot::new(nodes, tree, vec![low, hi]).with_external(vec![guard]);
        schedule(&snap, &Config::default(), Timestamp(1000))
    };
    let d = run(true);
    let nominated: Vec<&str> = d.nominations.iter().map(|n| n.node.0.as_str()).collect();
    let evicted: Vec<&str> = d.evictions.iter().map(|e| e.node.0.as_str()).collect();
    assert_eq!((nominated, evicted), (vec!["n1"], vec!["n1"]), "{d:#?}");
    let d = run(false);
    let nominated: Vec<&str> = d.nominations.iter().map(|n| n.node.0.as_str()).collect();
    assert_eq!(nominated, vec!["n0"], "{d:#?}");
}
