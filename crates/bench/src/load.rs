//! The `--load` suite: reading a `kubectl get -o yaml` dump.

use std::time::Instant;

use trainyard_bench::{machine, workloads};
use trainyard_ingest::{LoadOptions, Source};

use crate::median;

/// Times `trainyard_ingest::load` on a generated dump of `nodes` nodes and
/// 4 pods per node, and reports MB/s and the process's peak memory.
pub fn load_bench(runs: usize, nodes: usize) -> anyhow::Result<()> {
    let text = workloads::cluster_dump_yaml(nodes, 4);
    let before = machine::peak_rss_mib();
    let mut times = Vec::new();
    let mut summary = None;
    for _ in 0..runs {
        let t = Instant::now();
        let loaded =
            trainyard_ingest::load(&[Source::new("dump.yaml", &text)], &LoadOptions::default())
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        times.push(t.elapsed());
        summary = Some((loaded.snapshot.nodes.len(), loaded.snapshot.jobs.len()));
    }
    let (n, jobs) = summary.unwrap_or_default();
    let time = median(times);
    let mb = text.len() as f64 / 1e6;
    println!("| benchmark | input | median time | throughput | peak RSS |");
    println!("|---|---|---|---|---|");
    println!(
        "| load a YAML dump | {n} nodes, {} pods ({jobs} jobs), {mb:.0} MB | {:.2} s | {:.1} MB/s | {} (text alone {}) |",
        nodes * 4,
        time.as_secs_f64(),
        mb / time.as_secs_f64(),
        machine::peak_rss_mib().map_or("n/a".into(), |m| format!("{m:.0} MiB")),
        before.map_or("n/a".into(), |m| format!("{m:.0} MiB")),
    );
    Ok(())
}
