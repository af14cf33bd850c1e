//! The decisions' writes to the API: binds (after writing the chosen GPU
//! devices onto the pod; a `Scheduled` Event after), evictions through the
//! Eviction API (a `Reclaimed` or `Preempted` Event with the core's
//! message after), and nominations (`status.nominatedNodeName`), with
//! bounded concurrency.
//!
//! A write that fails is logged and counted; its assumption stays until
//! the world shows otherwise (the pod bound elsewhere, deleted) or the
//! assume timeout forgets it, after which the pod is pending again.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use serde_json::json;
use trainyard_cluster::Write;
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

async fn bind(client: &Client, b: &Bind, at: &str) -> Result<(), kube::Error> {
    let api = pods(client, &b.task);
    if !b.gpus.is_empty() {
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
    api.create_subresource::<serde_json::Value, serde_json::Value>(
        "binding",
        &b.task.name,
        &PostParams::default(),
        &binding,
    )
    .await?;
    let message = format!("Successfully assigned {} to {}", b.task, b.node);
    if let Err(e) = crate::report::event(client, &b.task, "Normal", "Scheduled", &message, at).await
    {
        tracing::warn!("Scheduled event of {}: {e}", b.task);
    }
    Ok(())
}

async fn evict(client: &Client, e: &Eviction, at: &str) -> Result<(), kube::Error> {
    pods(client, &e.task)
        .evict(&e.task.name, &EvictParams::default())
        .await?;
    let reason = match e.kind {
        EvictionKind::Reclaim => "Reclaimed",
        EvictionKind::Preempt => "Preempted",
    };
    if let Err(err) = crate::report::event(client, &e.task, "Normal", reason, &e.message, at).await
    {
        tracing::warn!("{reason} event of {}: {err}", e.task);
    }
    Ok(())
}

async fn nominate(client: &Client, n: &NominationDecision) -> Result<(), kube::Error> {
    pods(client, &n.task)
        .patch_status(
            &n.task.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"nominatedNodeName": n.node.to_string()}})),
        )
        .await
        .map(|_| ())
}

/// Executes `writes`, at most `concurrency` at once; Events are dated `now`.
pub async fn execute(
    client: &Client,
    writes: Vec<Write>,
    concurrency: usize,
    now: trainyard_model::Timestamp,
) -> Written {
    let at = crate::report::rfc3339(now);
    let at = at.as_str();
    let results: Vec<(usize, Result<(), kube::Error>, String)> = futures::stream::iter(writes)
        .map(|w| async move {
            match &w {
                Write::Bind(b) => (
                    0,
                    bind(client, b, at).await,
                    format!("bind {} to {}", b.task, b.node),
                ),
                Write::Evict(e) => (1, evict(client, e, at).await, format!("evict {}", e.task)),
                Write::Nominate(n) => (
                    2,
                    nominate(client, n).await,
                    format!("nominate {} on {}", n.task, n.node),
                ),
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut out = Written::default();
    for (what, result, text) in results {
        match result {
            Ok(()) => match what {
                0 => out.binds += 1,
                1 => out.evictions += 1,
                _ => out.nominations += 1,
            },
            Err(e) => {
                tracing::warn!("{text}: {e}");
                out.failed += 1;
            }
        }
    }
    out
}

/// Writes each queue's `status` (merge patch of the status subresource of
/// `ar`, Trainyard's Queue); returns the names whose write failed.
pub async fn queue_statuses(
    client: &Client,
    ar: &kube::core::ApiResource,
    changes: Vec<(String, serde_json::Value)>,
    concurrency: usize,
) -> Vec<String> {
    let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), ar);
    let api = &api;
    let failed: Vec<Option<String>> = futures::stream::iter(changes)
        .map(|(name, status)| async move {
            match api
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": status})),
                )
                .await
            {
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!("status of Queue {name}: {e}");
                    Some(name)
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    failed.into_iter().flatten().collect()
}
