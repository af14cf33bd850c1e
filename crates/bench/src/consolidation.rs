//! `--consolidation`: the cycle's cost with consolidation on against off
//! (issue 46's targets: under 10% added when nothing needs consolidating,
//! under one cycle's time when it does), in alternating pairs, reclaim and
//! preemption off, on two inputs of `--nodes` (5,000) nodes:
//!
//! - the allocate suite's cluster, one pending gang per node (the gangs
//!   that do not fit there do not fit the free room in total either);
//! - the `--reservations` cluster, 98% full of running jobs, every running
//!   pod given a controller so that it may move, with `--large` 64-GPU
//!   gangs pending whose room is scattered;
//! - a cluster whose free GPUs are all scattered (every node half full
//!   with one movable 4-GPU job, `--large` 8-GPU pods pending): a move
//!   frees a node each cycle (`consolidation.maxGangs` 1).

use std::sync::Arc;
use std::time::{Duration, Instant};

use trainyard_bench::workloads;
use trainyard_model::{Snapshot, Timestamp};
use trainyard_sched::{Config, schedule};

pub fn consolidation_bench(runs: usize, nodes: usize, large: usize) -> anyhow::Result<()> {
    let alloc = workloads::allocate_cluster(workloads::ALLOCATE_SEED, nodes, nodes);
    let (mut full, now) = workloads::reservation_cluster(13, nodes, large.max(1));
    for job in &mut full.jobs {
        let j = Arc::make_mut(job);
        let id = j.id.clone();
        for t in &mut j.tasks {
            if !t.is_pending() {
                t.controller = Some(format!("ReplicaSet/{id}"));
            }
        }
    }
    println!(
        "| input | runs | off (median) | on (median) | change (median of the pairs' ratios) | moves, gangs helped |"
    );
    println!("|---|---|---|---|---|---|");
    pairs(
        "allocate cluster, one pending gang per node",
        &alloc,
        Timestamp(0),
        runs,
    )?;
    pairs(
        "reservations cluster, 98% full, movable running jobs",
        &full,
        now,
        runs,
    )?;
    let (scattered, now) = workloads::scattered_cluster(nodes, large.max(1));
    pairs(
        "every node half full of movable 4-GPU jobs, 8-GPU pods pending",
        &scattered,
        now,
        runs,
    )?;
    Ok(())
}

fn pairs(name: &str, snap: &Snapshot, now: Timestamp, runs: usize) -> anyhow::Result<()> {
    // Reclaim and preemption off in both: the pass measured alone.
    let mut off = Config::default();
    off.preemption.reclaim = false;
    off.preemption.preempt = false;
    let mut on = off.clone();
    on.consolidation.enabled = true;
    let (mut t_off, mut t_on, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut moves = (0, 0);
    for i in 0..runs.max(1) {
        let mut pair = [Duration::ZERO; 2];
        for k in [i % 2, 1 - i % 2] {
            let cfg = if k == 0 { &off } else { &on };
            let t = Instant::now();
            let d = schedule(snap, cfg, now);
            pair[k] = t.elapsed();
            if k == 1 {
                let gangs: std::collections::BTreeSet<&str> =
                    d.moves.iter().map(|m| m.for_job.as_str()).collect();
                moves = (d.moves.len(), gangs.len());
            }
        }
        t_off.push(pair[0]);
        t_on.push(pair[1]);
        ratios.push(pair[1].as_secs_f64() / pair[0].as_secs_f64().max(1e-9));
    }
    let med = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1e3
    };
    ratios.sort_by(f64::total_cmp);
    println!(
        "| {name} | {} | {:.1} ms | {:.1} ms | {:+.1}% | {}, {} |",
        t_off.len(),
        med(t_off),
        med(t_on),
        (ratios[ratios.len() / 2] - 1.0) * 100.0,
        moves.0,
        moves.1
    );
    Ok(())
}
