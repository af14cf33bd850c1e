//! DRA end to end against the test API server: ResourceSlices of two
//! nodes (8 GPUs each), a DeviceClass, a ResourceClaimTemplate asking two
//! GPUs with a CEL selector, and gangs whose pods each get a claim from
//! it (made by the test server's resource claim controller). The service
//! writes each claim's allocation and reservation before the pod's bind;
//! the kubelet starts a pod only once its claim is allocated and reserved
//! for it. Outcomes are read from the API objects (and a watch of them),
//! never from the service's state.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use serde_json::{Value, json};

fn dra(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("resource.k8s.io", "v1", kind))
}

async fn make(client: &Client, kind: &str, namespace: Option<&str>, object: Value) {
    create(client, &dra(kind), namespace, object).await;
}

/// Slices of n1 and n2 (8 H100s each), the class, the template.
async fn devices(client: &Client) {
    for n in ["n1", "n2"] {
        let gpus: Vec<Value> = (0..8)
            .map(|i| {
                json!({"name": format!("gpu-{i}"),
                       "attributes": {"productName": {"string": "H100"}, "index": {"int": i}}})
            })
            .collect();
        make(
            client,
            "ResourceSlice",
            None,
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": format!("{n}-gpus")},
                "spec": {"driver": "gpu.example.com", "nodeName": n,
                         "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                         "devices": gpus}}),
        )
        .await;
    }
    make(
        client,
        "DeviceClass",
        None,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}}),
    )
    .await;
    make(
        client,
        "ResourceClaimTemplate",
        Some("ml"),
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "two-h100", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 2,
                "selectors": [{"cel": {"expression":
                    "device.attributes[\"gpu.example.com\"].productName == \"H100\""}}]}}]}}}}),
    )
    .await;
}

/// A PodGroup of `pods` pods, each with a claim from the template.
async fn dra_gang(client: &Client, name: &str, pods: u32) {
    create(
        client,
        &trainyard("PodGroup", "podgroups"),
        Some("ml"),
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
               "metadata": {"name": name, "namespace": "ml"},
               "spec": {"queue": "team", "minMember": pods}}),
    )
    .await;
    let pod_api = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"));
    for i in 0..pods {
        create(
            client,
            &pod_api,
            Some("ml"),
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("{name}-{i}"), "namespace": "ml",
                             "labels": {"trainyard.io/pod-group": name}},
                "spec": {"schedulerName": "trainyard",
                         "containers": [{"name": "c", "image": "train:1",
                                         "resources": {"claims": [{"name": "gpu"}]}}],
                         "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-h100"}]}}),
        )
        .await;
    }
}

/// One object as a watch showed it: (resourceVersion, kind, name, object).
type Shown = (u64, String, String, Value);

/// What watches of pods and claims in `ml` saw.
struct History {
    seen: Arc<Mutex<Vec<Shown>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl History {
    async fn start(client: &Client) -> History {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for ar in [
            ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod")),
            dra("ResourceClaim"),
        ] {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ml", &ar);
            let s = seen.clone();
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            tasks.push(tokio::spawn(async move {
                let mut events = watcher(api, watcher::Config::default()).boxed();
                let mut ready = Some(ready_tx);
                while let Some(e) = events.next().await {
                    let o = match e {
                        Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                        Ok(watcher::Event::InitDone) => {
                            if let Some(r) = ready.take() {
                                let _ = r.send(());
                            }
                            continue;
                        }
                        _ => continue,
                    };
                    let rv = o
                        .metadata
                        .resource_version
                        .as_deref()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    let name = o.metadata.name.clone().unwrap_or_default();
                    let v = serde_json::to_value(&o).unwrap_or_default();
                    s.lock()
                        .expect("not poisoned")
                        .push((rv, ar.kind.clone(), name, v));
                }
            }));
            ready_rx.await.expect("the watch lists");
        }
        History { seen, tasks }
    }

    /// The first resourceVersion at which `pred` held of `kind` `name`.
    fn first(&self, kind: &str, name: &str, pred: impl Fn(&Value) -> bool) -> Option<u64> {
        let seen = self.seen.lock().expect("not poisoned");
        seen.iter()
            .filter(|(_, k, n, o)| k == kind && n == name && pred(o))
            .map(|(rv, ..)| *rv)
            .min()
    }
}

impl Drop for History {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Every claim of `ml` as the API shows it, by name.
async fn claims(client: &Client) -> BTreeMap<String, Value> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ml", &dra("ResourceClaim"));
    api.list(&ListParams::default())
        .await
        .expect("claims")
        .items
        .into_iter()
        .map(|o| {
            let name = o.metadata.name.clone().unwrap_or_default();
            (name, serde_json::to_value(&o).unwrap_or_default())
        })
        .collect()
}

/// Every pod of `ml`, by name.
async fn pods(client: &Client) -> BTreeMap<String, Value> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "ml", &ar);
    api.list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .into_iter()
        .map(|o| {
            let name = o.metadata.name.clone().unwrap_or_default();
            (name, serde_json::to_value(&o).unwrap_or_default())
        })
        .collect()
}

/// The claim the controller made for `pod` (its `resourceClaimStatuses`).
fn claim_of(pod: &Value) -> String {
    pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `driver/pool/device` of each result of `claim`'s allocation.
fn devices_of(claim: &Value) -> Vec<String> {
    claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| format!("{}/{}/{}", r["driver"], r["pool"], r["device"]))
        .collect()
}

/// Checks the bound pods of `names` and their claims: each claim holds
/// two devices on its pod's node, is reserved for the pod by uid and
/// carries the finalizer; no device is in two claims (over all of `ml`).
fn check_claims(
    pods: &BTreeMap<String, Value>,
    claims: &BTreeMap<String, Value>,
    names: &[String],
) {
    for name in names {
        let pod = &pods[name];
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        assert!(!node.is_empty(), "{name} is not bound");
        let claim = &claims[&claim_of(pod)];
        assert_eq!(devices_of(claim).len(), 2, "{name}: {claim}");
        let selected = &claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"]
            [0];
        assert_eq!(
            (selected["key"].as_str(), selected["values"][0].as_str()),
            (Some("metadata.name"), Some(node)),
            "{name}: {claim}"
        );
        assert_eq!(
            claim["status"]["reservedFor"],
            json!([{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]),
            "{name}"
        );
        assert!(
            claim["metadata"]["finalizers"].as_array().is_some_and(|f| f
                .iter()
                .any(|f| f == "resource.kubernetes.io/delete-protection")),
            "{name}: {claim}"
        );
    }
    let mut all = BTreeSet::new();
    for (name, c) in claims {
        for d in devices_of(c) {
            assert!(all.insert(d.clone()), "{d} is in two claims ({name})");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_with_template_claims_gets_its_devices_written_before_its_binds() {
    if skip_on_cluster("the DRA test", "the test server's claim controller clock") {
        return;
    }
    let (server, client) = server().await;
    cluster(&client).await;
    devices(&client).await;
    dra_gang(&client, "train", 4).await;
    let history = History::start(&client).await;
    let (mut progress, _stop) = start(client.clone());
    let first = until(&mut progress, "a cycle", |p| p.cycles >= 1).await;
    // The claims do not exist yet: nothing is bound, the pods are told why.
    let quiet = until(&mut progress, "two more cycles", |p| {
        p.cycles >= first.cycles + 2
    })
    .await;
    assert_eq!(
        (quiet.written.binds, quiet.written.claims),
        (0, 0),
        "{quiet:?}"
    );
    // The claim controller makes them (a kubelet step of the test server).
    server.tick();
    let done = until(&mut progress, "the gang's claims and binds", |p| {
        p.written.binds == 4 && p.written.claims == 4
    })
    .await;
    assert_eq!(done.written.failed, 0, "{done:?}");
    // The watches of the history show the writes a cycle or two on.
    until(&mut progress, "two more cycles", |p| {
        p.cycles >= done.cycles + 2
    })
    .await;

    let (pods_now, claims_now) = (pods(&client).await, claims(&client).await);
    let names: Vec<String> = (0..4).map(|i| format!("train-{i}")).collect();
    check_claims(&pods_now, &claims_now, &names);
    // Each claim showed its allocation and reservation before its pod
    // showed its node.
    for name in &names {
        let claim = claim_of(&pods_now[name]);
        let allocated = history.first("ResourceClaim", &claim, |c| {
            !c["status"]["allocation"].is_null() && c["status"]["reservedFor"].is_array()
        });
        let bound = history.first("Pod", name, |p| p["spec"]["nodeName"].is_string());
        let (Some(allocated), Some(bound)) = (allocated, bound) else {
            panic!("{name}: allocated at {allocated:?}, bound at {bound:?}");
        };
        assert!(
            allocated < bound,
            "{name}: bound at {bound} before its claim at {allocated}"
        );
    }

    // The kubelet starts the pods: their claims are ready.
    server.tick();
    let started = pods(&client).await;
    for name in &names {
        assert_eq!(started[name]["status"]["phase"], "Running", "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_taking_over_sees_the_written_allocations_and_gives_no_device_twice() {
    if skip_on_cluster("the DRA standby test", "killing a replica") {
        return;
    }
    let (server, client) = server().await;
    cluster(&client).await;
    devices(&client).await;
    let spawn = |identity: &str| {
        spawn_service(
            client.clone(),
            leader_settings(identity),
            Arc::new(trainyard_serve::metrics::Metrics::new()),
            Default::default(),
        )
    };
    let mut a = spawn("replica-a");
    until(&mut a.progress, "replica-a leads", |p| p.leader).await;
    let mut b = spawn("replica-b");
    until(&mut b.progress, "replica-b watches", |p| !p.leader).await;

    // The leader allocates half of the cluster's GPUs and binds.
    dra_gang(&client, "first", 4).await;
    server.tick();
    until(&mut a.progress, "the first gang's claims and binds", |p| {
        p.written.binds == 4 && p.written.claims == 4
    })
    .await;
    // It dies without releasing the lease; a second gang needs the other
    // half exactly.
    a.task.abort();
    dra_gang(&client, "second", 4).await;
    server.tick();
    until(&mut b.progress, "replica-b leads", |p| p.leader).await;
    let done = until(&mut b.progress, "the second gang's claims and binds", |p| {
        p.written.binds == 4 && p.written.claims == 4
    })
    .await;
    assert_eq!(done.written.failed, 0, "{done:?}");

    let (pods_now, claims_now) = (pods(&client).await, claims(&client).await);
    let names: Vec<String> = ["first", "second"]
        .iter()
        .flat_map(|g| (0..4).map(move |i| format!("{g}-{i}")))
        .collect();
    check_claims(&pods_now, &claims_now, &names);
    assert_eq!(claims_now.len(), 8);
    // Every device of both nodes is in exactly one claim.
    let all: BTreeSet<String> = claims_now.values().flat_map(devices_of).collect();
    assert_eq!(all.len(), 16);
    server.tick();
    let started = pods(&client).await;
    for name in &names {
        assert_eq!(started[name]["status"]["phase"], "Running", "{name}");
    }
    b.stop.send_replace(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), b.task).await;
}

/// DRA-backed `nvidia.com/gpu` (KEP-5004): nodes without it in their
/// allocatable, each with 8 GPUs in a ResourceSlice, and a DeviceClass with
/// `extendedResourceName: nvidia.com/gpu`. A gang of 4 pods asking 4 each
/// binds whole; each pod gets a claim created for it (annotated, owned by
/// it), allocated 4 devices on its node and reserved for it, recorded in
/// its `status.extendedResourceClaimStatus`, all before its bind; no device
/// is in two claims; the kubelet starts them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_asking_dra_backed_gpus_gets_claims_created_before_its_binds() {
    if skip_on_cluster("the DRA extended-resource test", "DRA-only nodes") {
        return;
    }
    let (server, client) = server().await;
    namespace(&client, "ml").await;
    node(&client, "n1", 0).await;
    node(&client, "n2", 0).await;
    create(
        &client,
        &trainyard("Queue", "queues"),
        None,
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
               "metadata": {"name": "team"}, "spec": {"quota": {"nvidia.com/gpu": 16}}}),
    )
    .await;
    devices(&client).await;
    make(
        &client,
        "DeviceClass",
        None,
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}],
                     "extendedResourceName": "nvidia.com/gpu"}}),
    )
    .await;
    create(
        &client,
        &trainyard("PodGroup", "podgroups"),
        Some("ml"),
        json!({"apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
               "metadata": {"name": "train", "namespace": "ml"},
               "spec": {"queue": "team", "minMember": 4}}),
    )
    .await;
    let pod_api = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Pod"));
    for i in 0..4 {
        create(
            &client,
            &pod_api,
            Some("ml"),
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("train-{i}"), "namespace": "ml",
                             "labels": {"trainyard.io/pod-group": "train"}},
                "spec": {"schedulerName": "trainyard",
                         "containers": [{"name": "main", "image": "train:1",
                                         "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}),
        )
        .await;
    }
    let history = History::start(&client).await;
    let (mut progress, _stop) = start(client.clone());
    let done = until(&mut progress, "the gang's claims and binds", |p| {
        p.written.binds == 4 && p.written.claims == 4
    })
    .await;
    assert_eq!(done.written.failed, 0, "{done:?}");
    // The watches of the history have shown the binds by the time the
    // service's own watch has, a cycle or two on.
    until(&mut progress, "two more cycles", |p| {
        p.cycles >= done.cycles + 2
    })
    .await;

    let (pods_now, claims_now) = (pods(&client).await, claims(&client).await);
    assert_eq!(claims_now.len(), 4, "one claim per pod: {claims_now:?}");
    let mut all = BTreeSet::new();
    for i in 0..4 {
        let name = format!("train-{i}");
        let pod = &pods_now[&name];
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        assert!(!node.is_empty(), "{name} is not bound");
        let status = &pod["status"]["extendedResourceClaimStatus"];
        let claim_name = status["resourceClaimName"].as_str().unwrap_or_default();
        assert!(
            claim_name.starts_with(&format!("{name}-extended-resources-")),
            "{name}: {status}"
        );
        assert_eq!(
            status["requestMappings"],
            json!([{"containerName": "main", "resourceName": "nvidia.com/gpu",
                    "requestName": "request-0"}]),
            "{name}"
        );
        let claim = &claims_now[claim_name];
        assert_eq!(
            claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"],
            "true"
        );
        let owner = &claim["metadata"]["ownerReferences"][0];
        assert_eq!(
            (
                &owner["kind"],
                &owner["name"],
                &owner["uid"],
                &owner["controller"]
            ),
            (
                &json!("Pod"),
                &json!(name),
                &pod["metadata"]["uid"],
                &json!(true)
            ),
            "{claim}"
        );
        assert_eq!(
            claim["spec"]["devices"]["requests"],
            json!([{"name": "request-0", "exactly": {"deviceClassName": "gpu.nvidia.com",
                "allocationMode": "ExactCount", "count": 4}}]),
        );
        let results = claim["status"]["allocation"]["devices"]["results"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(results.len(), 4, "{name}: {claim}");
        for r in &results {
            assert_eq!(
                (&r["request"], &r["pool"]),
                (&json!("request-0"), &json!(node))
            );
            assert!(
                all.insert(format!("{}/{}", r["pool"], r["device"])),
                "{r} twice"
            );
        }
        assert_eq!(
            claim["status"]["reservedFor"],
            json!([{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}]),
        );
        // Created, allocated and recorded in the pod before the bind.
        let allocated = history.first("ResourceClaim", claim_name, |c| {
            c["status"]["reservedFor"].is_array() && !c["status"]["allocation"].is_null()
        });
        let recorded = history.first("Pod", &name, |p| {
            p["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == claim_name
        });
        let bound = history.first("Pod", &name, |p| p["spec"]["nodeName"].is_string());
        let (Some(allocated), Some(recorded), Some(bound)) = (allocated, recorded, bound) else {
            panic!("{name}: allocated {allocated:?}, recorded {recorded:?}, bound {bound:?}");
        };
        assert!(
            allocated < recorded && recorded < bound,
            "{name}: allocated {allocated}, recorded {recorded}, bound {bound}"
        );
    }

    // The kubelet starts the pods: their claims are ready.
    server.tick();
    let started = pods(&client).await;
    for i in 0..4 {
        let name = format!("train-{i}");
        assert_eq!(started[&name]["status"]["phase"], "Running", "{name}");
    }
}
