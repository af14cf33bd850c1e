//! kube-rs watchers, one per kind the scheduler reads, turned into
//! [`WorldEvent`]s on one channel.
//!
//! Objects are watched as JSON (`DynamicObject`) and read by Trainyard's
//! own reader (see ARCHITECTURE.md, "One conversion from Kubernetes
//! objects"): the world state keeps only what it reads. Watchers ask for
//! bookmarks (kube's default), relist after a 410, and back off on errors.

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::Discovery;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::world::WorldEvent;

/// The kinds the scheduler reads: Kubernetes', Trainyard's, and the
/// peers' (read as Trainyard's). Kinds the server does not serve (a CRD
/// not installed) are not watched.
pub const KINDS: &[(&str, &str, &str)] = &[
    ("", "v1", "Node"),
    ("", "v1", "Pod"),
    ("", "v1", "Namespace"),
    ("scheduling.k8s.io", "v1", "PriorityClass"),
    ("policy", "v1", "PodDisruptionBudget"),
    ("trainyard.io", "v1alpha1", "Queue"),
    ("trainyard.io", "v1alpha1", "PodGroup"),
    ("trainyard.io", "v1alpha1", "Topology"),
    ("scheduling.volcano.sh", "v1beta1", "Queue"),
    ("scheduling.volcano.sh", "v1beta1", "PodGroup"),
    ("scheduling.run.ai", "v2", "Queue"),
    ("scheduling.run.ai", "v2alpha2", "PodGroup"),
    ("scheduling.x-k8s.io", "v1alpha1", "PodGroup"),
    ("kai.scheduler", "v1alpha1", "Topology"),
    ("kueue.x-k8s.io", "v1beta1", "Topology"),
    // DRA: devices, classes, claims (their allocation and reservations
    // are written by Trainyard and read back here), templates, taints.
    ("resource.k8s.io", "v1", "ResourceSlice"),
    ("resource.k8s.io", "v1", "DeviceClass"),
    ("resource.k8s.io", "v1", "ResourceClaim"),
    ("resource.k8s.io", "v1", "ResourceClaimTemplate"),
    ("resource.k8s.io", "v1alpha3", "DeviceTaintRule"),
];

/// The served kinds among [`KINDS`], found by discovery.
pub async fn served_kinds(client: &Client) -> Result<Vec<ApiResource>, kube::Error> {
    let discovery = Discovery::new(client.clone()).run().await?;
    Ok(KINDS
        .iter()
        .filter_map(|(g, v, k)| {
            discovery
                .resolve_gvk(&GroupVersionKind::gvk(g, v, k))
                .map(|(ar, _)| ar)
        })
        .collect())
}

/// The JSON of `o`, with the `apiVersion` and `kind` of `ar` (list items
/// may come without them).
fn json_of(ar: &ApiResource, o: DynamicObject) -> Value {
    let mut v = serde_json::to_value(o).unwrap_or(Value::Null);
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), ar.api_version.clone().into());
        m.insert("kind".into(), ar.kind.clone().into());
    }
    v
}

/// Watches `ar` (stream number `stream`) until the receiver is gone,
/// sending every event.
pub async fn run(client: Client, ar: ApiResource, stream: usize, tx: mpsc::Sender<WorldEvent>) {
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(watcher::Event::Init) => WorldEvent::ListStart { stream },
            Ok(watcher::Event::InitApply(o)) | Ok(watcher::Event::Apply(o)) => {
                WorldEvent::Applied {
                    stream,
                    object: json_of(&ar, o),
                }
            }
            Ok(watcher::Event::Delete(o)) => WorldEvent::Deleted {
                stream,
                object: json_of(&ar, o),
            },
            Ok(watcher::Event::InitDone) => WorldEvent::ListDone { stream },
            Err(e) => {
                // The watcher retries (with backoff) by itself.
                tracing::warn!(kind = %ar.kind, group = %ar.group, "watch: {e}");
                continue;
            }
        };
        if tx.send(event).await.is_err() {
            return;
        }
    }
}
