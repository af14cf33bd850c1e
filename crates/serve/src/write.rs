//! The decisions' writes to the API: binds (after writing the chosen GPU
//! devices onto the pod; a `Scheduled` Event after), evictions through the
//! Eviction API (a `Reclaimed` or `Preempted` Event with the core's
//! message after), and nominations (`status.nominatedNodeName`), with
//! bounded concurrency.
//!
//! A write that fails is logged and counted, and its assumption is
//! forgotten at once: the next cycle sees the pod as the world has it and
//! decides again (a gang with a failed bind is completed there, or
//! repaired, [`crate::repair`]).

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use serde_json::json;
use trainyard_cluster::Write;

use crate::conn::Conn;
use trainyard_model::TaskKey;
use trainyard_sched::decisions::{Bind, Eviction, EvictionKind, NominationDecision};

/// Annotation with the GPU device indices chosen on the node
/// (`"0,1,2,3"`), written before the bind: `trainyard.io/gpu-indices`, the
/// key the reader takes a bound pod's devices from, so the next snapshot
/// holds the same devices the core chose.
pub const GPU_DEVICES_ANNOTATION: &str = trainyard_crd::keys::GPU_INDICES;

/// What a batch of writes did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub binds: u64,
    pub evictions: u64,
    pub nominations: u64,
    pub failed: u64,
}

/// The namespace of `task`'s pod (`default` when the key has none).
pub(crate) fn namespace(task: &TaskKey) -> &str {
    if task.namespace.is_empty() {
        "default"
    } else {
        &task.namespace
    }
}

fn pods(client: &Client, task: &TaskKey) -> Api<Pod> {
    Api::namespaced(client.clone(), namespace(task))
}

async fn bind(conn: &Conn, b: &Bind, at: &str) -> Result<(), kube::Error> {
    if !b.gpus.is_empty() {
        let api = pods(conn.client().await, &b.task);
        let devices: Vec<String> = b.gpus.iter().map(u32::to_string).collect();
        api.patch(
            &b.task.name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {GPU_DEVICES_ANNOTATION: devices.join(",")}}}),
            ),
        )
        .await?;
    }
    let mut meta = json!({"name": b.task.name, "namespace": namespace(&b.task)});
    if !b.task.uid.is_empty() {
        // The pod we placed, not a namesake created since.
        meta["uid"] = b.task.uid.clone().into();
    }
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding", "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": b.node.to_string()}
    });
    pods(conn.client().await, &b.task)
        .create_subresource::<serde_json::Value, serde_json::Value>(
            "binding",
            &b.task.name,
            &PostParams::default(),
            &binding,
        )
        .await?;
    let message = format!("Successfully assigned {} to {}", b.task, b.node);
    if let Err(e) = crate::report::event(conn, &b.task, "Normal", "Scheduled", &message, at).await {
        tracing::warn!("Scheduled event of {}: {e}", b.task);
    }
    Ok(())
}

async fn evict(conn: &Conn, e: &Eviction, at: &str) -> Result<(), kube::Error> {
    pods(conn.client().await, &e.task)
        .evict(&e.task.name, &EvictParams::default())
        .await?;
    let reason = match e.kind {
        EvictionKind::Reclaim => "Reclaimed",
        EvictionKind::Preempt => "Preempted",
    };
    if let Err(err) = crate::report::event(conn, &e.task, "Normal", reason, &e.message, at).await {
        tracing::warn!("{reason} event of {}: {err}", e.task);
    }
    Ok(())
}

async fn nominate(conn: &Conn, n: &NominationDecision) -> Result<(), kube::Error> {
    pods(conn.client().await, &n.task)
        .patch_status(
            &n.task.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"nominatedNodeName": n.node.to_string()}})),
        )
        .await
        .map(|_| ())
}

/// Evicts a bound member of an incomplete gang ([`crate::repair`]), with
/// an `IncompleteGang` Event.
pub async fn evict_incomplete(
    conn: &Conn,
    e: &crate::repair::RepairEviction,
    at: &str,
) -> Result<(), kube::Error> {
    pods(conn.client().await, &e.task)
        .evict(&e.task.name, &EvictParams::default())
        .await?;
    let event = crate::report::event(conn, &e.task, "Warning", "IncompleteGang", &e.message, at);
    if let Err(err) = event.await {
        tracing::warn!("IncompleteGang event of {}: {err}", e.task);
    }
    Ok(())
}

/// Executes `writes`, at most `concurrency` at once; Events are dated
/// `now`. Returns what was done and the writes that failed (their
/// assumptions are to be forgotten: the world will not show them).
pub async fn execute(
    conn: &Conn,
    writes: Vec<Write>,
    concurrency: usize,
    now: trainyard_model::Timestamp,
) -> (Written, Vec<Write>) {
    let at = crate::report::rfc3339(now);
    let at = at.as_str();
    let results: Vec<(Write, Result<(), kube::Error>, String)> = futures::stream::iter(writes)
        .map(|w| async move {
            let (result, text) = match &w {
                Write::Bind(b) => (
                    bind(conn, b, at).await,
                    format!("bind {} to {}", b.task, b.node),
                ),
                Write::Evict(e) => (evict(conn, e, at).await, format!("evict {}", e.task)),
                Write::Nominate(n) => (
                    nominate(conn, n).await,
                    format!("nominate {} on {}", n.task, n.node),
                ),
            };
            (w, result, text)
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut out = Written::default();
    let mut failed = Vec::new();
    for (write, result, text) in results {
        match result {
            Ok(()) => match write {
                Write::Bind(_) => out.binds += 1,
                Write::Evict(_) => out.evictions += 1,
                Write::Nominate(_) => out.nominations += 1,
            },
            Err(e) => {
                tracing::warn!("{text}: {e}");
                out.failed += 1;
                failed.push(write);
            }
        }
    }
    (out, failed)
}

/// Writes each object's `status` (merge patch of the status subresource
/// of `ar`: Trainyard's Queue or PodGroup), keyed `name` (cluster-scoped)
/// or `namespace/name`; returns the keys whose write failed.
pub async fn statuses(
    conn: &Conn,
    ar: &kube::core::ApiResource,
    changes: Vec<(String, serde_json::Value)>,
    concurrency: usize,
) -> Vec<String> {
    let failed: Vec<Option<String>> = futures::stream::iter(changes)
        .map(|(key, status)| async move {
            let client = conn.client().await;
            let (api, name): (Api<kube::api::DynamicObject>, &str) = match key.split_once('/') {
                Some((ns, name)) => (Api::namespaced_with(client.clone(), ns, ar), name),
                None => (Api::all_with(client.clone(), ar), key.as_str()),
            };
            let patch = Patch::Merge(json!({"status": status}));
            match api
                .patch_status(name, &PatchParams::default(), &patch)
                .await
            {
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!("status of {} {key}: {e}", ar.kind);
                    Some(key)
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    failed.into_iter().flatten().collect()
}
