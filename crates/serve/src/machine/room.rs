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
    let requests_of = |b: &Bind| {
        snapshot
            .jobs
            .iter()
            .filter(|j| j.id == b.job)
            .flat_map(|j| j.tasks.iter())
            .find(|t| t.key == b.task)
            .map(|t| t.requests.clone())
    };
    for b in binds {
        let node_name = b.node.to_string();
        let Some(node) = snapshot.nodes.iter().find(|n| n.name == node_name) else {
            return Err(format!("node {node_name} is gone"));
        };
        let Some(requests) = requests_of(b) else {
            return Err(format!("pod {} is gone", b.task));
        };
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
