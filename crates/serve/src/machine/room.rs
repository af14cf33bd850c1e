//! Whether planned binds still fit the world as it is now: the bind
//! journal completes a gang only onto room that is still there.

use std::collections::BTreeMap;

use trainyard_model::{Resources, Snapshot, TaskState};
use trainyard_sched::decisions::Bind;

/// Milli-GPU held per device of one pod: a whole-GPU pod holds 1000 of
/// each device it names, a shared one its fraction of its one device.
fn per_device(requests: &Resources, devices: usize) -> u64 {
    let gpu = requests.get(&trainyard_model::ResourceName::Gpu);
    if devices == 0 {
        return 0;
    }
    if gpu >= 1000 { 1000 } else { gpu }
}

/// What is held on each node: its resources, and each device's milli-GPU.
#[derive(Default)]
struct Held {
    resources: Resources,
    devices: BTreeMap<u32, u64>,
}

impl Held {
    fn take(&mut self, requests: &Resources, gpus: Option<&[u32]>) {
        self.resources.add(requests);
        let gpus = gpus.unwrap_or(&[]);
        let each = per_device(requests, gpus.len());
        for d in gpus {
            *self.devices.entry(*d).or_default() += each;
        }
    }
}

/// `Ok` when every one of `binds` fits on its node, in order, over what
/// the snapshot's bound pods (of jobs, terminating or not, and external
/// pods) hold; else why not, for people.
pub fn fits(snapshot: &Snapshot, binds: &[Bind]) -> Result<(), String> {
    let mut held: BTreeMap<&str, Held> = BTreeMap::new();
    for job in &snapshot.jobs {
        for t in &job.tasks {
            if let TaskState::Bound { node, gpus } = &t.state {
                held.entry(node.as_str())
                    .or_default()
                    .take(&t.requests, gpus.as_deref());
            }
        }
    }
    for p in &snapshot.external {
        held.entry(p.node.as_str())
            .or_default()
            .take(&p.requests, p.gpus.as_deref());
    }
    let task_of = |b: &Bind| {
        snapshot
            .jobs
            .iter()
            .filter(|j| j.id == b.job)
            .flat_map(|j| j.tasks.iter())
            .find(|t| t.key == b.task)
    };
    for b in binds {
        let node_name = b.node.to_string();
        let Some(node) = snapshot.nodes.iter().find(|n| n.name == node_name) else {
            return Err(format!("node {node_name} is gone"));
        };
        let Some(task) = task_of(b) else {
            return Err(format!("pod {} is gone", b.task));
        };
        claims_ready(snapshot, task, &node_name)?;
        let requests = task.requests.clone();
        let h = held.entry(node.name.as_str()).or_default();
        let mut after = h.resources.clone();
        after.add(&requests);
        if let Some(r) = after.first_excess(&node.allocatable) {
            return Err(format!(
                "node {node_name} has no room left for {} ({} taken since)",
                b.task,
                r.as_str()
            ));
        }
        let each = per_device(&requests, b.gpus.len());
        if let Some(d) = b
            .gpus
            .iter()
            .find(|d| h.devices.get(d).copied().unwrap_or(0) + each > 1000)
        {
            return Err(format!(
                "GPU {d} of node {node_name} planned for {} is taken",
                b.task
            ));
        }
        h.take(&requests, Some(&b.gpus));
    }
    Ok(())
}

/// `Ok` when every DRA claim of `task` is allocated for `node` and
/// reserved for the pod: a pod is never bound before its claims are
/// (the claim writes of a gang cut off by a stop may not have landed).
fn claims_ready(
    snapshot: &Snapshot,
    task: &trainyard_model::Task,
    node: &str,
) -> Result<(), String> {
    let pod = format!("{}/{}", task.key.namespace, task.key.name);
    for pc in &task.claims {
        let ready = snapshot.dra.claims.get(&pc.claim).is_some_and(|c| {
            c.allocation
                .as_ref()
                .is_some_and(|a| a.node.as_deref().is_none_or(|n| n == node))
                && c.reserved_for.contains(&pod)
        });
        if !ready {
            return Err(format!(
                "ResourceClaim {} of {} is not allocated on {node} for it",
                pc.claim, task.key
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use trainyard_model::{Job, Node, Resources, TaskKey};

    use super::*;

    fn key(name: &str) -> TaskKey {
        TaskKey {
            namespace: "ml".into(),
            name: name.into(),
            uid: format!("u-{name}"),
        }
    }

    /// Gang `ml/g` of two 4-GPU pods, the first bound to n1 devices 0–3;
    /// and, when `other`, a 4-GPU pod bound to n1 devices 4–7 since.
    fn world(other: bool) -> Snapshot {
        let mut g = Job::gang("ml/g", "q", vec![Resources::zero().with_gpus(4); 2]);
        for (i, t) in g.tasks.iter_mut().enumerate() {
            t.key = key(&format!("g-{i}"));
        }
        g.tasks[0].state = TaskState::Bound {
            node: "n1".into(),
            gpus: Some(vec![0, 1, 2, 3]),
        };
        let mut jobs = vec![g];
        if other {
            let mut o = Job::gang("ml/o", "q", vec![Resources::zero().with_gpus(4)]);
            o.tasks[0].key = key("o");
            o.tasks[0].state = TaskState::Bound {
                node: "n1".into(),
                gpus: Some(vec![4, 5, 6, 7]),
            };
            jobs.push(o);
        }
        let nodes = vec![Node::new("n1", 64_000, 512 << 30, 8)];
        Snapshot::new(nodes, Default::default(), jobs)
    }

    fn planned() -> Vec<Bind> {
        vec![Bind {
            job: "ml/g".into(),
            task: key("g-1"),
            node: "n1".into(),
            gpus: vec![4, 5, 6, 7],
        }]
    }

    #[test]
    fn planned_room_still_free_fits() {
        assert_eq!(fits(&world(false), &planned()), Ok(()));
    }

    #[test]
    fn a_pod_whose_claim_is_not_written_is_not_completed() {
        use std::sync::Arc;
        use trainyard_model::dra::{Claim, ClaimAllocation, PodClaim};
        let w = world(false);
        let claim = |allocated: bool| Claim {
            key: "ml/g-1-gpu".into(),
            uid: String::new(),
            spec: Arc::default(),
            allocation: allocated.then(|| ClaimAllocation {
                node: Some("n1".into()),
                devices: Vec::new(),
            }),
            reserved_for: if allocated {
                vec!["ml/g-1".into()]
            } else {
                Vec::new()
            },
            planned_from: None,
        };
        let mut snap = w.clone();
        {
            let job = Arc::make_mut(&mut snap.jobs[0]);
            job.tasks[1].claims = vec![PodClaim {
                name: "gpu".into(),
                claim: "ml/g-1-gpu".into(),
            }];
        }
        let with = |c: Claim| {
            let mut s = snap.clone();
            Arc::make_mut(&mut s.dra)
                .claims
                .insert(c.key.clone(), Arc::new(c));
            s
        };
        let why = fits(&with(claim(false)), &planned()).expect_err("not written");
        expect_test::expect!["ResourceClaim ml/g-1-gpu of ml/g-1 is not allocated on n1 for it"]
            .assert_eq(&why);
        assert_eq!(fits(&with(claim(true)), &planned()), Ok(()));
    }

    #[test]
    fn planned_room_taken_since_does_not() {
        let why = fits(&world(true), &planned()).expect_err("taken");
        expect_test::expect!["node n1 has no room left for ml/g-1 (nvidia.com/gpu taken since)"]
            .assert_eq(&why);
    }
}
