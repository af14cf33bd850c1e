//! `trainyard usage` against the live scheduler's API: each queue's
//! time-decayed usage, the one its fair share weighs (`ListQueues`), in
//! GPU-hours, core-hours and GiB-hours, with what it holds now. The
//! store's hour-by-hour accounting is `trainyard usage --store` or
//! `--server http://...` (the scheduler's HTTP `/usage`).

use std::io::Write;

use anyhow::Result;
use trainyard_api::pb;

use super::{ConnectArgs, Session, block_on, output, show};

/// How the live usage is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveFormat {
    Table,
    Csv,
    Json,
}

/// Asks the scheduler at `server` (else `TRAINYARD_SERVER`, the local
/// socket, the kubeconfig) and prints every queue's usage.
pub fn live(server: Option<String>, format: LiveFormat) -> Result<()> {
    let connect = ConnectArgs {
        server,
        kubeconfig: None,
        context: None,
        scheduler_namespace: "trainyard-system".into(),
        token: None,
        certificate_authority: None,
        insecure_skip_tls_verify: false,
    };
    let resp = block_on(async move {
        let mut s = Session::open(&connect).await?;
        s.client
            .list_queues(pb::ListQueuesRequest {})
            .await
            .map(tonic::Response::into_inner)
            .map_err(|e| s.refused(&e))
    })??;
    let text = match format {
        LiveFormat::Json => output::json(&resp, "ListQueuesResponse")?,
        LiveFormat::Csv => csv(&resp),
        LiveFormat::Table => table(&resp),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    Ok(())
}

/// `queue`'s decayed usage of `resource` in hours, and what it holds now.
fn of(q: &pb::Queue, resource: &str) -> (String, String) {
    match q.resources.iter().find(|r| r.resource == resource) {
        Some(r) => (
            show::usage_hours(&r.unit, &r.decayed_usage),
            show::quantity(&r.unit, r.allocated),
        ),
        None => ("0.0".into(), "0".into()),
    }
}

const RESOURCES: [&str; 3] = ["nvidia.com/gpu", "cpu", "memory"];

fn table(resp: &pb::ListQueuesResponse) -> String {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    t.set_header([
        "QUEUE",
        "GPU-HOURS",
        "CPU CORE-HOURS",
        "MEMORY GIB-HOURS",
        "GPUS NOW",
        "CPU NOW",
        "MEMORY NOW",
    ]);
    for q in &resp.queues {
        let cells: Vec<(String, String)> = RESOURCES.iter().map(|r| of(q, r)).collect();
        let mut row = vec![format!("{}{}", "  ".repeat(q.depth as usize), q.name)];
        row.extend(cells.iter().map(|c| c.0.clone()));
        row.extend(cells.iter().map(|c| c.1.clone()));
        t.add_row(row);
    }
    for i in 1..t.column_count() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    if let Some(c) = t.column_mut(0) {
        c.set_padding((0, 1));
    }
    let at = resp.cycle.as_ref().map_or_else(String::new, |c| {
        format!(
            " at cycle {}, {}",
            c.number,
            trainyard_serve::report::rfc3339(trainyard_model::Timestamp(c.time_ms))
        )
    });
    format!(
        "time-decayed usage (what the fair share weighs){at}\n{}\n",
        crate::render::fit(&mut t, crate::render::terminal_width())
    )
}

fn csv(resp: &pb::ListQueuesResponse) -> String {
    let mut out = String::from("queue,gpu_hours,cpu_core_hours,memory_gib_hours\n");
    for q in &resp.queues {
        let h: Vec<String> = RESOURCES.iter().map(|r| of(q, r).0).collect();
        out.push_str(&format!("{},{}\n", q.path, h.join(",")));
    }
    out
}
