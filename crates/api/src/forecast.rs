//! `ForecastStart`: the simulator's forecast (`trainyard_sim::forecast`:
//! its engine run forward from the latest cycle's snapshot through the
//! same core) for one job, as a message. Nothing reaches the service.

use trainyard_model::Snapshot;
use trainyard_serve::view::CycleView;
use trainyard_sim::forecast::{ForecastOptions, Forecasts, JobForecast};

use crate::{ApiError, convert, pb};

/// The look-ahead when the request names none: a week.
pub const DEFAULT_HORIZON_SECONDS: u64 = 7 * 24 * 3600;

/// The forecast options for `job` with the request's horizon.
pub fn options(job: &str, horizon_seconds: u64) -> ForecastOptions {
    ForecastOptions {
        horizon_seconds: if horizon_seconds == 0 {
            DEFAULT_HORIZON_SECONDS
        } else {
            horizon_seconds
        },
        jobs: Some(vec![job.to_string()]),
        threads: forecast_threads(),
        ..ForecastOptions::default()
    }
}

/// Threads one forecast may take: every core but one, which is left to
/// the scheduling cycle (at least one).
fn forecast_threads() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.saturating_sub(1).max(1) as u32
}

/// The forecast of job `id` of `snapshot` (the latest cycle's, or a copy
/// with a what-if job in it).
pub fn forecast(
    c: &CycleView,
    snapshot: &Snapshot,
    id: &str,
    horizon_seconds: u64,
) -> Result<pb::ForecastStartResponse, ApiError> {
    let Some(job) = snapshot.jobs.iter().find(|j| j.id == id) else {
        let (ns, name) = id.split_once('/').unwrap_or(("", id));
        return Err(ApiError::job_not_found(snapshot, ns, name));
    };
    let placed_now = c.decisions.binds.iter().any(|b| b.job.as_str() == id);
    if !job.tasks.iter().any(|t| t.is_pending())
        || (placed_now && !c.decisions.pending.iter().any(|p| p.job.as_str() == id))
    {
        return Ok(pb::ForecastStartResponse {
            cycle: Some(convert::cycle(c)),
            job: id.to_string(),
            running: true,
            ..Default::default()
        });
    }
    let opts = options(id, horizon_seconds);
    let all = trainyard_sim::forecast::forecast(snapshot, &c.config, c.now, &opts);
    let Some(jf) = all.jobs.iter().find(|j| j.job == id) else {
        return Err(ApiError::Unavailable(format!(
            "no forecast was made for job {id}: it is not pending in the scheduler's latest cycle"
        )));
    };
    Ok(response(c, &all, jf))
}

/// One job's forecast as the response.
pub fn response(c: &CycleView, all: &Forecasts, jf: &JobForecast) -> pb::ForecastStartResponse {
    let ms = |t: Option<trainyard_model::Timestamp>| t.map_or(0, |t| t.0);
    pb::ForecastStartResponse {
        cycle: Some(convert::cycle(c)),
        job: jf.job.clone(),
        running: false,
        starts: jf.expected.is_some() || jf.p50.is_some(),
        expected_ms: ms(jf.expected),
        p10_ms: ms(jf.p10),
        p50_ms: ms(jf.p50),
        p90_ms: ms(jf.p90),
        nodes: jf.nodes.clone(),
        waits_for: jf
            .waits_for
            .iter()
            .map(|w| pb::WaitsFor {
                job: w.job.clone(),
                ends_ms: w.ends.0,
                nodes: w.nodes.clone(),
            })
            .collect(),
        reservation: jf
            .pending_now
            .as_ref()
            .and_then(|p| convert::reservation(&p.reason)),
        reason: jf
            .pending_now
            .as_ref()
            .map(|p| p.reason.code().to_string())
            .unwrap_or_default(),
        message: jf
            .pending_now
            .as_ref()
            .map(|p| p.message.clone())
            .unwrap_or_default(),
        reason_at_horizon: jf.reason_at_end.clone().unwrap_or_default(),
        horizon_ms: all.until.0,
        capped: all.capped,
        runs: all.runs,
        cycles: all.cycles,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::tests::{CLUSTER, cycle_of, pod};

    /// `run` holds n1's 8 GPUs until 08:30 (started 07:30, deadline one
    /// hour); n2 is tainted. `next` (8 GPUs) starts when `run` ends, on
    /// n1, waiting for it; a running job needs no forecast; an unknown
    /// one is NOT_FOUND with the names that come closest.
    #[test]
    fn a_waiting_job_starts_when_the_running_one_ends() {
        let running = "---\napiVersion: v1\nkind: Pod\nmetadata: {name: run, namespace: ml, labels: {trainyard.io/queue: team}, creationTimestamp: '2027-01-15T07:00:00Z'}\nspec: {schedulerName: trainyard, nodeName: n1, activeDeadlineSeconds: 3600, containers: [{name: c, resources: {requests: {nvidia.com/gpu: '8'}}}]}\nstatus: {phase: Running, startTime: '2027-01-15T07:30:00Z'}\n";
        let c = cycle_of(&format!("{CLUSTER}{running}{}", pod("next", 8, 7)));
        let r = forecast(&c, &c.snapshot, "ml/next", 0).expect("a forecast");
        let ends = trainyard_model::Timestamp::from_secs(1_800_001_800).0;
        assert!(r.starts && !r.running);
        assert_eq!(r.expected_ms, ends, "starts as run ends, 08:30");
        assert_eq!((r.p10_ms, r.p50_ms, r.p90_ms), (ends, ends, ends));
        assert_eq!(r.nodes, ["n1"]);
        let waits: Vec<(&str, i64)> = r
            .waits_for
            .iter()
            .map(|w| (w.job.as_str(), w.ends_ms))
            .collect();
        assert_eq!(waits, [("ml/run", ends)]);
        assert_eq!(r.horizon_ms, c.now.0 + 7 * 24 * 3600 * 1000);
        let run = forecast(&c, &c.snapshot, "ml/run", 0).expect("a running job");
        assert!(run.running && !run.starts);
        let e = forecast(&c, &c.snapshot, "ml/nex", 0).expect_err("unknown");
        assert!(e.to_string().contains("did you mean ml/next"), "{e}");
    }
}
