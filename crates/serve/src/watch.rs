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

use crate::upstream_status::{self, UpstreamVersion};
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

/// The upstream gang kinds (`scheduling.k8s.io`, Kubernetes 1.36
/// `v1alpha2`, 1.37 `v1beta1`), read into gangs as Trainyard's PodGroups
/// are; watched in one version, chosen by [`upstream_version`].
pub const UPSTREAM_KINDS: &[&str] = &["PodGroup", "Workload"];

/// The served kinds among [`KINDS`], found by discovery, then the
/// upstream PodGroup and Workload in the version [`upstream_version`]
/// picks (none, logged once, when the server serves neither).
pub async fn served_kinds(client: &Client) -> Result<Vec<ApiResource>, kube::Error> {
    let discovery = Discovery::new(client.clone()).run().await?;
    let resolve = |g: &str, v: &str, k: &str| {
        discovery
            .resolve_gvk(&GroupVersionKind::gvk(g, v, k))
            .map(|(ar, _)| ar)
    };
    let mut kinds: Vec<ApiResource> = KINDS
        .iter()
        .filter_map(|(g, v, k)| resolve(g, v, k))
        .collect();
    let served: Vec<&str> = UpstreamVersion::ALL
        .iter()
        .map(|v| v.as_str())
        .filter(|v| resolve(upstream_status::GROUP, v, "PodGroup").is_some())
        .collect();
    match upstream_version(&served) {
        Some(v) => {
            tracing::info!(
                version = v.as_str(),
                "upstream gangs on: watching scheduling.k8s.io/{} PodGroups and Workloads",
                v.as_str()
            );
            kinds.extend(
                UPSTREAM_KINDS
                    .iter()
                    .filter_map(|k| resolve(upstream_status::GROUP, v.as_str(), k)),
            );
        }
        None => tracing::info!(
            "upstream gangs off: the API server serves no scheduling.k8s.io PodGroup in v1beta1 or v1alpha2 (Kubernetes before 1.36, or the GenericWorkload feature gate off)"
        ),
    }
    Ok(kinds)
}

/// The version of the upstream PodGroup to watch, given the versions the
/// server serves it in: v1beta1, else v1alpha2, else none.
pub fn upstream_version(served: &[&str]) -> Option<UpstreamVersion> {
    UpstreamVersion::pick(served.iter().copied())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_version_is_v1beta1_else_v1alpha2_else_none() {
        let cases: [(&[&str], Option<UpstreamVersion>); 5] = [
            (&["v1alpha2"], Some(UpstreamVersion::V1Alpha2)),
            (&["v1beta1"], Some(UpstreamVersion::V1Beta1)),
            (&["v1alpha2", "v1beta1"], Some(UpstreamVersion::V1Beta1)),
            (&[], None),
            // Versions Trainyard does not read.
            (&["v1alpha1", "v1"], None),
        ];
        for (served, want) in cases {
            assert_eq!(upstream_version(served), want, "{}", served.join(","));
        }
    }

    #[test]
    fn the_upstream_kinds_are_not_among_the_fixed_ones() {
        assert!(
            KINDS
                .iter()
                .all(|(g, _, k)| *g != upstream_status::GROUP || !UPSTREAM_KINDS.contains(k))
        );
    }
}
