//! The `--load` suite: reading a `kubectl get -o yaml` dump.

use std::time::Instant;

use trainyard_bench::{machine, workloads};
use trainyard_ingest::{LoadOptions, Source};

use crate::median;

/// The dumps timed, as pods per node: nodes alone, then nodes with pods.
const PODS_PER_NODE: [usize; 2] = [0, 4];

/// Starts a new peak of resident memory (`VmHWM`) at the current resident
/// size, where Linux allows (`/proc/self/clear_refs`); false otherwise.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Times `trainyard_ingest::load` on generated dumps of `nodes` nodes,
/// alone and with 4 pods per node, and reports MB/s, the peak memory of
/// each (the text included) and that peak per byte of YAML.
pub fn load_bench(runs: usize, nodes: usize) -> anyhow::Result<()> {
    println!(
        "| benchmark | input | median time | throughput | peak RSS (text included) | bytes per byte of YAML |"
    );
    println!("|---|---|---|---|---|---|");
    for pods_per_node in PODS_PER_NODE {
        let text = workloads::cluster_dump_yaml(nodes, pods_per_node);
        let reset = reset_peak_rss();
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
        // Without a reset the peak is the process's, earlier dumps included.
        let peak = machine::peak_rss_mib();
        println!(
            "| load a YAML dump | {n} nodes, {} pods ({jobs} jobs), {mb:.0} MB | {:.2} s | {:.1} MB/s | {}{} | {} |",
            nodes * pods_per_node,
            time.as_secs_f64(),
            mb / time.as_secs_f64(),
            peak.map_or("n/a".into(), |m| format!("{m:.0} MiB")),
            if reset { "" } else { " (process)" },
            peak.map_or("n/a".into(), |m| format!(
                "{:.1}",
                m * 1024.0 * 1024.0 / text.len() as f64
            )),
        );
    }
    Ok(())
}
