//! Who holds each GPU device as a cycle starts, read from the cycle's own
//! set-up (the one accounting of bound pods: known device indices first,
//! the lowest free devices for the others), and which free devices a
//! pending job's pods could use. For people looking at the cluster (the
//! dashboard's GPU map); the cycle itself never calls it.

use super::*;

/// One node's devices, in `Node::gpus` order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeHoldings {
    pub node: String,
    pub devices: Vec<DeviceHolders>,
}

/// One device: Trainyard's pods on it (job id, pod name, milli-GPU), in
/// job and pod order, and what pods outside Trainyard hold of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceHolders {
    /// Its index on the node (`GpuDevice::index`).
    pub index: u32,
    pub holders: Vec<(String, String, u16)>,
    /// Milli-GPU held by pods outside Trainyard.
    pub outside: u16,
    /// Milli-GPU free.
    pub free: u16,
}

/// Every node (by name) and its devices as the cycle at `now` would
/// account them.
pub fn holdings(snapshot: &Snapshot, config: &Config, now: Timestamp) -> Vec<NodeHoldings> {
    let cycle = Cycle::new(snapshot, config, now);
    let nodes = &cycle.world.nodes;
    let mut out: Vec<NodeHoldings> = nodes
        .iter()
        .enumerate()
        .map(|(n, node)| NodeHoldings {
            node: node.name.clone(),
            devices: node
                .gpus
                .iter()
                .enumerate()
                .map(|(j, d)| DeviceHolders {
                    index: d.index,
                    // One state per node of the cycle, in its order.
                    free: cycle.ledger.state.nodes()[n].device_free(j),
                    ..DeviceHolders::default()
                })
                .collect(),
        })
        .collect();
    for (j, placed) in cycle.ledger.bound_at.iter().enumerate() {
        let job = cycle.ledger.jobs[j].job;
        for (t, n, slots) in placed {
            let task = &job.tasks[*t];
            let ask = GpuAsk::of(&task.requests, &task.constraints).unwrap_or(GpuAsk::None);
            for &s in slots {
                let Some(dev) = nodes[*n].gpus.get(s) else {
                    continue;
                };
                let milli = ask.milli_on(dev).unwrap_or(1000);
                // `out` has every node of the cycle and each its devices.
                out[*n].devices[s]
                    .holders
                    .push((job.id.clone(), task.name.clone(), milli));
            }
        }
    }
    for node in &mut out {
        for d in &mut node.devices {
            let ours: u32 = d.holders.iter().map(|h| u32::from(h.2)).sum();
            let used = 1000u32.saturating_sub(u32::from(d.free));
            // At most 1000: `used` is.
            d.outside = used.saturating_sub(ours) as u16;
        }
    }
    out
}

/// Where job `id`'s pending pods could go now: per node (by name) whose
/// filters its first pending pod passes and which has room for it, the
/// device indices free enough for one such pod. `None` when the job is
/// not in the snapshot or has no pending pod.
pub fn free_devices_for(
    snapshot: &Snapshot,
    config: &Config,
    now: Timestamp,
    id: &str,
) -> Option<Vec<(String, Vec<u32>)>> {
    let job = snapshot.jobs.iter().find(|j| j.id == id)?;
    let task = job.tasks.iter().find(|t| t.is_pending())?;
    let cycle = Cycle::new(snapshot, config, now);
    let pod = PodView::of_task(task);
    let mut out = Vec::new();
    for (n, node) in cycle.world.nodes.iter().enumerate() {
        if cycle
            .world
            .predicates
            .iter()
            .try_for_each(|p| p.filter(&task.constraints, node))
            .is_err()
        {
            continue;
        }
        let state = &cycle.ledger.state.nodes()[n];
        if state.fit(node, &pod).is_err() {
            continue;
        }
        let devices: Vec<u32> = node
            .gpus
            .iter()
            .enumerate()
            .filter(|&(j, d)| match pod.ask {
                GpuAsk::None => false,
                GpuAsk::Whole(_) => state.device_free(j) >= 1000,
                ask => ask.milli_on(d).is_some_and(|m| m <= state.device_free(j)),
            })
            .map(|(_, d)| d.index)
            .collect();
        out.push((node.name.clone(), devices));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainyard_model::{QueueSpec, TaskState};

    const GI: u64 = 1 << 30;

    fn snapshot(jobs: Vec<Job>) -> Snapshot {
        let nodes = (1..=2)
            .map(|i| Node::new(format!("n{i}"), 64_000, 512 * GI, 4))
            .collect();
        Snapshot::new(
            nodes,
            QueueTree::build(vec![QueueSpec::new("q")]).unwrap(),
            jobs,
        )
    }

    fn gang(id: &str, pods: usize, gpus: u64, on: Option<&str>) -> Job {
        let r = Resources::new(1000, GI, 0).with_gpus(gpus);
        let mut j = Job::gang(id, "q", vec![r; pods]);
        if let Some(node) = on {
            for (i, t) in j.tasks.iter_mut().enumerate() {
                t.state = TaskState::Bound {
                    node: node.into(),
                    gpus: (i == 0).then(|| vec![2]),
                };
            }
        }
        j
    }

    #[test]
    fn bound_pods_hold_their_devices_and_the_rest_is_free() {
        let s = snapshot(vec![gang("ml/run", 2, 1, Some("n1"))]);
        let h = holdings(&s, &Config::default(), Timestamp(0));
        let n1 = &h[0];
        assert_eq!(n1.node, "n1");
        // Pod 0 on device 2 by its indices, pod 1 on the lowest free.
        assert_eq!(n1.devices[2].holders[0].0, "ml/run");
        assert_eq!(n1.devices[2].holders[0].2, 1000);
        assert_eq!(n1.devices[0].holders.len(), 1);
        assert_eq!((n1.devices[0].free, n1.devices[0].outside), (0, 0));
        assert!(n1.devices[1].holders.is_empty());
        assert_eq!(n1.devices[1].free, 1000);
        assert!(h[1].devices.iter().all(|d| d.holders.is_empty()));
    }

    #[test]
    fn a_pending_job_sees_the_free_devices_of_nodes_it_fits() {
        let s = snapshot(vec![
            gang("ml/run", 3, 1, Some("n1")),
            gang("ml/wait", 1, 2, None),
        ]);
        let fit = free_devices_for(&s, &Config::default(), Timestamp(0), "ml/wait");
        // n1 has one free device, too few for two GPUs.
        assert_eq!(fit, Some(vec![("n2".to_string(), vec![0, 1, 2, 3])]));
        assert_eq!(
            free_devices_for(&s, &Config::default(), Timestamp(0), "ml/run"),
            None
        );
    }
}
