//! Test helpers shared by the service's unit tests: a node and pods as
//! YAML, and one core cycle on a snapshot read from YAML.

use trainyard_ingest::{LoadOptions, Source};
use trainyard_model::Snapshot;
use trainyard_sched::Decisions;

/// One node with 8 CPUs, 64 GiB and 8 GPUs.
pub const NODE: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '8', memory: 64Gi, pods: '110', nvidia.com/gpu: '8'}}\n";

/// A pending pod of Trainyard's in namespace `ml` asking for `gpus` GPUs,
/// as a YAML document (with its leading `---`).
pub fn pod(name: &str, gpus: u32) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml}}\nspec: {{schedulerName: trainyard, containers: [{{name: c, resources: {{requests: {{nvidia.com/gpu: '{gpus}'}}}}}}]}}\n"
    )
}

/// The snapshot `text` reads as, and the core's decisions on it with the
/// default config at a fixed time.
pub fn decide(text: &str) -> (Snapshot, Decisions) {
    let loaded = trainyard_ingest::load(&[Source::new("t.yaml", text)], &LoadOptions::default())
        .expect("loads");
    let d = trainyard_sched::schedule(
        &loaded.snapshot,
        &Default::default(),
        trainyard_model::Timestamp::from_secs(1_800_000_000),
    );
    (loaded.snapshot, d)
}
