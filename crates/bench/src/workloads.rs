//! Seeded synthetic inputs shared by the wall-clock benchmarks
//! (`trainyard-bench`) and the instruction-count benchmarks
//! (`benches/`). Same arguments, same input, byte for byte.

use std::fmt::Write as _;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trainyard_model::topology::generate::{RailOptimized, rail_optimized};
use trainyard_model::topology::{NodeInput, Topology};
use trainyard_model::{
    ExternalPod, Job, Limits, Node, QueueSpec, QueueTree, ResourceName, Resources, Snapshot,
    TaskState, Timestamp,
};

/// One gibibyte, in bytes.
pub const GI: u64 = 1 << 30;

/// The seed of the allocate-cycle input.
pub const ALLOCATE_SEED: u64 = 7;

/// Pending gangs per node in the allocate-cycle input: 2,000 gangs on
/// 5,000 nodes (about 4 pending pods per node), kept for every size so a
/// series grows work and cluster together.
pub const GANGS_PER_NODE: (usize, usize) = (2, 5);

/// The number of pending gangs the allocate-cycle input has for `nodes`.
pub fn gangs_for(nodes: usize) -> usize {
    (nodes * GANGS_PER_NODE.0 / GANGS_PER_NODE.1).max(1)
}

/// `n` nodes of 192 cores, 2 TiB and 8 GPUs, named `{prefix}{i:05}`.
pub fn gpu_nodes(prefix: &str, n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| Node::new(format!("{prefix}{i:05}"), 192_000, 2048 * GI, 8))
        .collect()
}

/// A 3-level queue tree of 1,110 queues (10 × 10 × 10 leaves, with quotas,
/// limits, weights and priorities), each leaf's demand, and the capacity.
pub fn fairshare_tree(seed: u64) -> (QueueTree, Vec<Resources>, Resources) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut specs = Vec::new();
    for a in 0..10 {
        let top = format!("org{a}");
        specs.push(
            QueueSpec::new(&top)
                .quota(Resources::new(0, 0, 0).with_gpus(400))
                .weight(rng.random_range(1..4)),
        );
        for b in 0..10 {
            let mid = format!("{top}-t{b}");
            specs.push(
                QueueSpec::new(&mid)
                    .parent(&top)
                    .quota(Resources::zero().with_gpus(40))
                    .priority(rng.random_range(0..2)),
            );
            for c in 0..10 {
                let mut leaf = QueueSpec::new(format!("{mid}-q{c}"))
                    .parent(&mid)
                    .quota(Resources::zero().with_gpus(4))
                    .weight(rng.random_range(0..4));
                if rng.random_bool(0.3) {
                    leaf = leaf.limit(
                        Limits::unlimited().cap(ResourceName::Gpu, rng.random_range(8..64) * 1000),
                    );
                }
                specs.push(leaf);
            }
        }
    }
    // Invariant: the names above are unique and every parent precedes its children.
    let tree = QueueTree::build(specs).expect("generated tree is valid");
    let mut demand = vec![Resources::zero(); tree.len()];
    for q in tree.ids() {
        if tree.is_leaf(q) {
            let g = rng.random_range(0..48u64);
            demand[q.0] = Resources::new(g * 12_000, g * 100 * GI, g * 1000);
        }
    }
    (
        tree,
        demand,
        Resources::new(40_000 * 12_000, 40_000 * 100 * GI, 40_000 * 1000),
    )
}

/// The allocate-cycle input: `nodes` empty nodes × 8 GPUs and `gangs`
/// pending gangs (60% of 1–4 pods, 30% of 8–16, 10% of 32–64; 1, 2 or 4
/// GPUs per pod; priorities 0–2) spread over four leaf queues, whose
/// quotas are the same fractions of the cluster at every size (at 5,000
/// nodes: research 16,000 GPUs of which llm 12,000 and vision 4,000, prod
/// 16,000, dev none).
pub fn allocate_cluster(seed: u64, nodes: usize, gangs: usize) -> Snapshot {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let gpus = nodes as u64 * 8;
    let nodes = gpu_nodes("node-", nodes);
    let queues = vec![
        QueueSpec::new("research").quota(Resources::zero().with_gpus(gpus * 2 / 5)),
        QueueSpec::new("llm")
            .parent("research")
            .quota(Resources::zero().with_gpus(gpus * 3 / 10))
            .weight(2),
        QueueSpec::new("vision")
            .parent("research")
            .quota(Resources::zero().with_gpus(gpus / 10)),
        QueueSpec::new("prod")
            .quota(Resources::zero().with_gpus(gpus * 2 / 5))
            .priority(1),
        QueueSpec::new("dev"),
    ];
    let leaves = ["llm", "vision", "prod", "dev"];
    let jobs: Vec<Job> = (0..gangs)
        .map(|i| {
            let r: f64 = rng.random();
            let pods = if r < 0.6 {
                rng.random_range(1..=4)
            } else if r < 0.9 {
                rng.random_range(8..=16)
            } else {
                rng.random_range(32..=64)
            };
            let gpus = [1u64, 1, 1, 2, 2, 4][rng.random_range(0..6)];
            let req = Resources::new(gpus * 12_000, gpus * 100 * GI, 0).with_gpus(gpus);
            let mut job = Job::gang(
                format!("ns/job-{i:06}"),
                leaves[i % leaves.len()],
                vec![req; pods],
            );
            job.priority = rng.random_range(0..3);
            job.submit_time = Timestamp(i as i64 * 1000);
            job
        })
        .collect();
    Snapshot::new(
        nodes,
        // Invariant: five fixed, valid queue specs.
        QueueTree::build(queues).expect("generated tree is valid"),
        jobs,
    )
}

/// A rail-optimized fabric of `nodes` nodes × 8 GPUs (32 nodes per leaf
/// group, 8 groups per spine block), 60% loaded (40% of nodes full, 20%
/// with a random 4-GPU window taken, 40% free), with no job; and a gang of
/// `pods` ranked pods × 8 GPUs to place on it.
pub fn rail_fabric(seed: u64, nodes: usize, pods: usize) -> (Snapshot, Job) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nodes = gpu_nodes("n", nodes);
    let topo = rail_topology(&nodes);
    let mut external = Vec::new();
    for n in &nodes {
        let r: f64 = rng.random();
        let devs: Vec<u32> = if r < 0.4 {
            (0..8).collect()
        } else if r < 0.6 {
            let w = rng.random_range(0..2u32) * 4;
            (w..w + 4).collect()
        } else {
            continue;
        };
        external.push(ExternalPod {
            name: format!("load/{}", n.name),
            node: n.name.clone(),
            requests: Resources::new(8_000 * devs.len() as u64, 100 * GI, 0)
                .with_gpus(devs.len() as u64),
            gpus: Some(devs),
            ..Default::default()
        });
    }
    let mut gang = Job::gang(
        format!("ml/llm-{}", pods * 8),
        "q",
        vec![Resources::new(96_000, 1000 * GI, 0).with_gpus(8); pods],
    );
    for (i, t) in gang.tasks.iter_mut().enumerate() {
        t.rank = Some(i as u32);
    }
    let base = Snapshot::new(
        nodes,
        // Invariant: one queue.
        QueueTree::build(vec![QueueSpec::new("q")]).expect("valid tree"),
        Vec::new(),
    )
    .with_external(external)
    .with_topology(Some(Arc::new(topo)));
    (base, gang)
}

/// The rail-optimized topology of `nodes` (32 nodes per leaf group, 8
/// groups per spine block).
pub fn rail_topology<N: std::borrow::Borrow<Node>>(nodes: &[N]) -> Topology {
    let names: Vec<&str> = nodes.iter().map(|n| n.borrow().name.as_str()).collect();
    let spec = rail_optimized(
        &names,
        &RailOptimized {
            nodes_per_group: 32,
            groups_per_block: 8,
            ..RailOptimized::default()
        },
    );
    let inputs: Vec<NodeInput> = nodes.iter().map(|n| n.borrow().topology_input()).collect();
    // Invariant: the generator's output for these nodes is a valid topology.
    Topology::build(&spec, &inputs)
        .expect("generated topology is valid")
        .expect("a topology spec with levels")
}

/// Fills node `n` with running single-pod jobs: one of three splits of its
/// 8 GPUs (1–4 GPUs each, picked by `rng`), each job bound to its own
/// devices. `job(rng, i, k)` makes job number `i` (its position in `jobs`)
/// of `k` GPUs: its id, queue, priority and times.
fn fill_node(
    rng: &mut ChaCha8Rng,
    n: &Node,
    jobs: &mut Vec<Job>,
    mut job: impl FnMut(&mut ChaCha8Rng, usize, u32) -> Job,
) {
    let splits: [&[u32]; 3] = [&[1, 1, 2, 2, 2], &[1, 1, 1, 1, 4], &[1, 1, 1, 2, 3]];
    let split = splits[rng.random_range(0..splits.len())];
    let mut next = 0u32;
    for &k in split {
        let mut j = job(rng, jobs.len(), k);
        j.tasks[0].state = TaskState::Bound {
            node: n.name.clone(),
            gpus: Some((next..next + k).collect()),
        };
        next += k;
        jobs.push(j);
    }
}

/// A full cluster of `nodes` nodes × 8 GPUs, every node running 5 jobs of
/// team `a` (1–4 GPUs each, priorities 0–2, started over 10 hours), and a
/// pending 64-GPU gang (8 pods × 8 GPUs) of team `b`; both teams' quota is
/// half the cluster. Returns the snapshot and the time to schedule at.
pub fn reclaim_cluster(seed: u64, nodes: usize) -> (Snapshot, Timestamp) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let nodes = gpu_nodes("n", nodes);
    let mut jobs = Vec::with_capacity(nodes.len() * 5 + 1);
    for n in &nodes {
        fill_node(&mut rng, n, &mut jobs, |rng, i, k| {
            let mut job = Job::gang(
                format!("a/j{i:06}"),
                "a",
                vec![Resources::new(8_000 * k as u64, 64 * GI, 0).with_gpus(k as u64)],
            );
            job.priority = rng.random_range(0..3);
            job.submit_time = Timestamp(0);
            job.tasks[0].started = Some(Timestamp(rng.random_range(0..36_000_000)));
            job
        });
    }
    let mut gang = Job::gang(
        "b/llm-64",
        "b",
        vec![Resources::new(96_000, 1000 * GI, 0).with_gpus(8); 8],
    );
    gang.submit_time = Timestamp(36_000_000);
    jobs.push(gang);
    let half = nodes.len() as u64 * 4;
    let snap = Snapshot::new(
        nodes,
        // Invariant: two fixed, valid queue specs.
        QueueTree::build(vec![
            QueueSpec::new("a").quota(Resources::zero().with_gpus(half)),
            QueueSpec::new("b").quota(Resources::zero().with_gpus(half)),
        ])
        .expect("valid tree"),
        jobs,
    );
    (snap, Timestamp(36_000_000))
}

/// The reservations input: `nodes` nodes × 8 GPUs, 98% of them full of
/// running jobs (1–4 GPUs each, priorities 0–2, walltimes of 1–24 hours,
/// started within them over the last 10 hours), and the pending gangs of
/// [`allocate_cluster`] (walltimes of 1–24 hours), which fill the free
/// nodes, plus `large` pending 64-GPU gangs (8 pods × 8 GPUs) submitted
/// after them, which then do not fit: with reservations on, they are the
/// starving gangs that reserve.
/// Returns the snapshot and the time to schedule at.
pub fn reservation_cluster(seed: u64, nodes: usize, large: usize) -> (Snapshot, Timestamp) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let now = Timestamp(36_000_000);
    let base = allocate_cluster(seed, nodes, gangs_for(nodes));
    let full = nodes * 98 / 100;
    let leaves = ["llm", "vision", "prod", "dev"];
    let mut jobs = Vec::with_capacity(full * 5 + base.jobs.len() + large);
    for n in base.nodes.iter().take(full) {
        fill_node(&mut rng, n, &mut jobs, |rng, i, k| {
            let mut job = Job::gang(
                format!("run/j{i:06}"),
                leaves[i % leaves.len()],
                vec![Resources::new(8_000 * k as u64, 64 * GI, 0).with_gpus(k as u64)],
            );
            job.priority = rng.random_range(0..3);
            let wall: u64 = rng.random_range(3600..=86_400);
            job.walltime_seconds = Some(wall);
            // Started within its walltime: none has overrun.
            let ran = rng.random_range(0..(wall as i64 * 1000).min(now.0));
            job.tasks[0].started = Some(Timestamp(now.0 - ran));
            job
        });
    }
    for i in 0..large {
        let mut gang = Job::gang(
            format!("big/llm-{i:03}"),
            leaves[i % leaves.len()],
            vec![Resources::new(96_000, 1000 * GI, 0).with_gpus(8); 8],
        );
        gang.walltime_seconds = Some(86_400);
        gang.submit_time = Timestamp(now.0 - 1000);
        jobs.push(gang);
    }
    for j in base.jobs.iter() {
        let mut j = (**j).clone();
        j.walltime_seconds = Some(rng.random_range(3600..=86_400));
        j.submit_time = Timestamp(j.submit_time.0 + 1000);
        jobs.push(j);
    }
    let snap = Snapshot::new(
        base.nodes.iter().map(|n| (**n).clone()).collect(),
        (*base.queues).clone(),
        jobs,
    );
    (snap, now)
}

/// [`reservation_cluster`]'s snapshot with no running job declaring a
/// walltime: instead each leaf queue has 100 observed runtimes of 1–24
/// hours, so the reservations project the running jobs' ends by the
/// runtime estimate (`reservations.runtimeEstimate`).
pub fn estimated_ends(snap: &Snapshot, seed: u64) -> Snapshot {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = snap.clone();
    for j in &mut out.jobs {
        if j.tasks.iter().any(|t| !t.is_pending()) {
            Arc::make_mut(j).walltime_seconds = None;
        }
    }
    let mut runtimes = std::collections::BTreeMap::new();
    for q in ["llm", "vision", "prod", "dev"] {
        let ms: Vec<i64> = (0..100)
            .map(|_| rng.random_range(3_600_000..=86_400_000))
            .collect();
        runtimes.insert(q.to_string(), ms.into());
    }
    out.runtimes = Arc::new(runtimes);
    out
}

/// A `kubectl get -o yaml`-shaped dump (one `List`, as kubectl prints it,
/// with the fields a real dump carries: labels, annotations, managed
/// fields left out, conditions, capacity and allocatable, images) of
/// `nodes` GPU nodes and `pods_per_node` pods per node (bound, 1 GPU
/// each, owned by Jobs), plus two queues.
pub fn cluster_dump_yaml(nodes: usize, pods_per_node: usize) -> String {
    let mut s = String::with_capacity(nodes * (3000 + pods_per_node * 2200));
    s.push_str("apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n");
    for q in ["team-a", "team-b"] {
        let _ = write!(
            s,
            "- apiVersion: trainyard.io/v1alpha1\n  kind: Queue\n  metadata:\n    name: {q}\n  spec:\n    quota:\n      nvidia.com/gpu: {}\n",
            nodes * 4
        );
    }
    for i in 0..nodes {
        let _ = write!(
            s,
            r#"- apiVersion: v1
  kind: Node
  metadata:
    annotations:
      node.alpha.kubernetes.io/ttl: "0"
      volumes.kubernetes.io/controller-managed-attach-detach: "true"
    creationTimestamp: "2026-11-01T10:00:00Z"
    labels:
      beta.kubernetes.io/arch: amd64
      beta.kubernetes.io/os: linux
      kubernetes.io/arch: amd64
      kubernetes.io/hostname: gpu-{i:05}
      kubernetes.io/os: linux
      node.kubernetes.io/instance-type: p5.48xlarge
      nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
      nvidia.com/gpu.memory: "81559"
      topology.kubernetes.io/zone: zone-{z}
    name: gpu-{i:05}
    resourceVersion: "{rv}"
    uid: 6f1c0000-0000-4000-8000-{i:012}
  spec:
    podCIDR: 10.{a}.{b}.0/24
    providerID: aws:///zone-{z}/i-{i:017}
  status:
    addresses:
    - address: 10.1.{a}.{b}
      type: InternalIP
    - address: gpu-{i:05}
      type: Hostname
    allocatable:
      cpu: 191450m
      ephemeral-storage: "28310005508"
      hugepages-1Gi: "0"
      hugepages-2Mi: "0"
      memory: 2055978848Ki
      nvidia.com/gpu: "8"
      pods: "110"
    capacity:
      cpu: "192"
      ephemeral-storage: 30715672Ki
      hugepages-1Gi: "0"
      hugepages-2Mi: "0"
      memory: 2097152000Ki
      nvidia.com/gpu: "8"
      pods: "110"
    conditions:
    - lastHeartbeatTime: "2026-11-24T10:00:00Z"
      lastTransitionTime: "2026-11-01T10:00:00Z"
      message: kubelet has sufficient memory available
      reason: KubeletHasSufficientMemory
      status: "False"
      type: MemoryPressure
    - lastHeartbeatTime: "2026-11-24T10:00:00Z"
      lastTransitionTime: "2026-11-01T10:00:00Z"
      message: kubelet is posting ready status
      reason: KubeletReady
      status: "True"
      type: Ready
    nodeInfo:
      architecture: amd64
      containerRuntimeVersion: containerd://1.7.22
      kernelVersion: 6.1.0-27-cloud-amd64
      kubeletVersion: v1.35.0
      operatingSystem: linux
      osImage: Debian GNU/Linux 12 (bookworm)
"#,
            z = i % 3,
            rv = 1000 + i,
            a = i / 256 % 256,
            b = i % 256,
        );
        for k in 0..pods_per_node {
            let q = if (i + k) % 2 == 0 { "team-a" } else { "team-b" };
            let _ = write!(
                s,
                r#"- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "2026-11-20T08:00:00Z"
    generateName: train-{i:05}-{k}-
    labels:
      batch.kubernetes.io/job-name: train-{i:05}-{k}
      job-name: train-{i:05}-{k}
      trainyard.io/queue: {q}
    name: train-{i:05}-{k}-x7k2p
    namespace: ml-{ns}
    ownerReferences:
    - apiVersion: batch/v1
      blockOwnerDeletion: true
      controller: true
      kind: Job
      name: train-{i:05}-{k}
      uid: 9a2c0000-0000-4000-8000-{u:012}
    resourceVersion: "{rv}"
    uid: 7b3d0000-0000-4000-8000-{u:012}
  spec:
    containers:
    - command:
      - python
      - train.py
      - --epochs=10
      env:
      - name: NCCL_DEBUG
        value: INFO
      image: registry.example.com/ml/train:v1.4.2
      imagePullPolicy: IfNotPresent
      name: trainer
      resources:
        limits:
          nvidia.com/gpu: "1"
        requests:
          cpu: "16"
          memory: 128Gi
          nvidia.com/gpu: "1"
      terminationMessagePath: /dev/termination-log
      terminationMessagePolicy: File
    dnsPolicy: ClusterFirst
    nodeName: gpu-{i:05}
    priority: 0
    restartPolicy: Never
    schedulerName: trainyard
    securityContext: {{}}
    serviceAccountName: default
    terminationGracePeriodSeconds: 30
    tolerations:
    - effect: NoExecute
      key: node.kubernetes.io/not-ready
      operator: Exists
      tolerationSeconds: 300
  status:
    conditions:
    - lastTransitionTime: "2026-11-20T08:00:05Z"
      status: "True"
      type: PodScheduled
    - lastTransitionTime: "2026-11-20T08:00:40Z"
      status: "True"
      type: Ready
    hostIP: 10.1.{a}.{b}
    phase: Running
    podIP: 10.{a}.{b}.{k}
    qosClass: Burstable
    startTime: "2026-11-20T08:00:05Z"
"#,
                ns = (i + k) % 16,
                u = i * pods_per_node + k,
                rv = 2_000_000 + i * pods_per_node + k,
                a = i / 256 % 256,
                b = i % 256,
            );
        }
    }
    s
}

/// The allocate-cycle input ([`allocate_cluster`]) with the GPUs published
/// through DRA instead of a device plugin: each node has no
/// `nvidia.com/gpu` allocatable and a ResourceSlice of 8 GPUs (product,
/// PCIe root, index) and one of 8 NICs (rail, PCIe root), and the GPU
/// DeviceClass names `nvidia.com/gpu` as its extended resource (KEP-5004),
/// so the same pods are allocated DRA devices. The objects are the
/// simulator's DRA node pools' ([`trainyard_sim::dra::publish`]), through
/// the one conversion (`trainyard_ingest::dra::build`, which evaluates the
/// classes' CEL selectors).
pub fn dra_cluster(seed: u64, nodes: usize, gangs: usize) -> Snapshot {
    let base = allocate_cluster(seed, nodes, gangs);
    let how = trainyard_sim::dra::DraPublish {
        nics: 8,
        ..Default::default()
    };
    let published = trainyard_sim::dra::publish(&base.nodes, &|_| Some(how.clone()));
    let mut snap = base;
    snap.nodes = published.nodes;
    snap.dra = Arc::new(published.dra);
    snap
}

/// A cluster whose free GPUs are all scattered: `nodes` nodes × 8 GPUs,
/// each running one movable 4-GPU job (a pod with a controller, started
/// 10 hours ago, priority 0), and `gangs` pending 8-GPU pods that fit the
/// free GPUs in total many times but no node. One queue without quota.
/// Returns the snapshot and the time to schedule at.
pub fn scattered_cluster(nodes: usize, gangs: usize) -> (Snapshot, Timestamp) {
    let now = Timestamp(36_000_000);
    let ns = gpu_nodes("gpu-", nodes);
    let mut jobs = Vec::with_capacity(nodes + gangs);
    for (i, n) in ns.iter().enumerate() {
        let mut j = Job::gang(
            format!("run/r{i:06}"),
            "team",
            vec![Resources::new(16_000, 128 * GI, 0).with_gpus(4)],
        );
        let t = &mut j.tasks[0];
        t.state = TaskState::Bound {
            node: n.name.clone(),
            gpus: Some(vec![0, 1, 2, 3]),
        };
        t.started = Some(Timestamp(0));
        t.controller = Some(format!("ReplicaSet/r{i:06}"));
        jobs.push(j);
    }
    for i in 0..gangs {
        let mut j = Job::gang(
            format!("big/g{i:04}"),
            "team",
            vec![Resources::new(32_000, 256 * GI, 0).with_gpus(8)],
        );
        j.submit_time = Timestamp(now.0 - 1000 - i as i64);
        jobs.push(j);
    }
    let tree = QueueTree::build(vec![QueueSpec::new("team")]).expect("one queue is a valid tree");
    (Snapshot::new(ns, tree, jobs), now)
}
