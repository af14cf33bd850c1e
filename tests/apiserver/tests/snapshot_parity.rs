//! The one conversion, end to end, with a real client: the objects of the
//! bundled example and of every scenario are created in the test API server
//! through kube-rs (Trainyard's CRDs from `deploy/crds`, the peers' kinds
//! from a fixture); a kube-rs watcher's events, each read by
//! `Decoded::object` into a `ClusterState`, give the same snapshot that
//! `trainyard_ingest::load` gives for the same objects as the server lists
//! them, written to a file the way `kubectl get -o yaml` does.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::{Discovery, Scope};
use kube::runtime::watcher;
use serde_json::{Value, json};
use trainyard_cluster::{Change, ClusterState, Decoded, ObjectChange};
use trainyard_ingest::{LoadOptions, Source};
use trainyard_testapi::TestApiServer;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn client(server: &TestApiServer) -> Client {
    let config = kube::Config::new(server.url().parse().expect("url"));
    Client::try_from(config).expect("client")
}

/// The example and each scenario's `snapshot`, by name.
fn inputs() -> Vec<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Scenario {
        snapshot: String,
    }
    let mut out = vec![(
        "examples/snapshot.yaml".to_string(),
        std::fs::read_to_string(root().join("examples/snapshot.yaml")).expect("example"),
    )];
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("tests/scenarios"))
        .expect("scenarios")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("readable");
        let s: Scenario = serde_saphyr::from_str(&text).expect("a scenario");
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        out.push((name.unwrap_or_default(), s.snapshot));
    }
    out
}

/// Every object of a text alone, as an API server holds them.
fn objects_of(name: &str, text: &str) -> Vec<Value> {
    let docs = trainyard_ingest::parse_documents(&Source::new(name, text)).expect("parses");
    trainyard_ingest::split_objects(docs)
}

/// Hand-written snapshots leave out what the scheduler does not read but
/// the API server requires; filled in here the way a real manifest has it
/// (a container image).
fn completed(mut o: Value) -> Value {
    if o["kind"] == "Pod" {
        for list in ["containers", "initContainers"] {
            if let Some(cs) = o["spec"][list].as_array_mut() {
                for c in cs {
                    if c.get("image").is_none_or(Value::is_null) {
                        c["image"] = "registry.example/train:1".into();
                    }
                }
            }
        }
    }
    o
}

fn gvk_of(o: &Value) -> GroupVersionKind {
    let api = o["apiVersion"].as_str().unwrap_or("");
    let (group, version) = api.split_once('/').unwrap_or(("", api));
    GroupVersionKind::gvk(group, version, o["kind"].as_str().unwrap_or(""))
}

/// The server with Trainyard's CRDs and the peers' kinds installed.
async fn server_with_crds() -> (TestApiServer, Client) {
    let server = common::manual_server().await;
    let client = client(&server);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut texts = Vec::new();
    for f in ["queues", "podgroups", "topologies"] {
        let p = root().join(format!("deploy/crds/{f}.trainyard.io.yaml"));
        texts.push(std::fs::read_to_string(p).expect("committed CRD"));
    }
    texts.push(
        std::fs::read_to_string(common::fixture("peer-crds.yaml")).expect("peer CRDs fixture"),
    );
    for (i, text) in texts.iter().enumerate() {
        for doc in objects_of(&format!("crds {i}"), text) {
            let crd: CustomResourceDefinition = serde_json::from_value(doc).expect("a CRD");
            crds.create(&PostParams::default(), &crd)
                .await
                .expect("the CRD is accepted");
        }
    }
    (server, client)
}

/// Creates `objects` (their namespaces first), then writes each one's
/// status through the status subresource, as controllers do. Returns the
/// API resources used, with their scope.
async fn create_all(client: &Client, name: &str, objects: &[Value]) -> Vec<(ApiResource, bool)> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let namespaces: BTreeSet<String> = objects
        .iter()
        .filter_map(|o| o["metadata"]["namespace"].as_str().map(str::to_string))
        .chain(["default".to_string()])
        .collect();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for ns in namespaces {
        if ns_api.get_opt(&ns).await.expect("get namespace").is_none() {
            let n: Namespace =
                serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
            ns_api
                .create(&PostParams::default(), &n)
                .await
                .expect("namespace created");
        }
    }
    let mut used: BTreeMap<String, (ApiResource, bool)> = BTreeMap::new();
    for o in objects {
        let gvk = gvk_of(o);
        let (ar, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("{name}: the server serves no {gvk:?}"));
        let namespaced = caps.scope == Scope::Namespaced;
        let api: Api<DynamicObject> = if namespaced {
            let ns = o["metadata"]["namespace"].as_str().unwrap_or("default");
            Api::namespaced_with(client.clone(), ns, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        let object: DynamicObject = serde_json::from_value(o.clone()).expect("an object");
        let obj_name = object.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("{name}: {} {obj_name} refused: {e}", gvk.kind));
        if let Some(status) = o.get("status").filter(|s| !s.is_null()) {
            api.patch_status(
                &obj_name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
            .unwrap_or_else(|e| panic!("{name}: status of {obj_name}: {e}"));
        }
        used.insert(format!("{}/{}", ar.api_version, ar.kind), (ar, namespaced));
    }
    used.into_values().collect()
}

/// What the server holds, listed, as one `List` document (`kubectl get
/// -o yaml` prints the same shape).
async fn listed(client: &Client, kinds: &[(ApiResource, bool)]) -> String {
    let mut items = Vec::new();
    for (ar, _) in kinds {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
        for mut o in api.list(&ListParams::default()).await.expect("list") {
            o.types = Some(kube::core::TypeMeta {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
            });
            items.push(serde_json::to_value(&o).expect("serializes"));
        }
    }
    serde_json::to_string_pretty(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
        .expect("serializes")
}

/// A world state fed by one kube-rs watcher per kind, up to the end of
/// each watcher's initial list.
async fn watched(client: &Client, kinds: &[(ApiResource, bool)]) -> ClusterState {
    let mut state = ClusterState::for_objects(LoadOptions::default());
    for (ar, _) in kinds {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
        let mut events = watcher(api, watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            match event.expect("watch event") {
                watcher::Event::Init => {}
                watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                    apply(&mut state, ar, &o);
                }
                watcher::Event::Delete(o) => remove(&mut state, ar, &o),
                watcher::Event::InitDone => break,
            }
        }
    }
    state
}

fn apply(state: &mut ClusterState, ar: &ApiResource, o: &DynamicObject) {
    let mut v = serde_json::to_value(o).expect("serializes");
    v["apiVersion"] = ar.api_version.clone().into();
    v["kind"] = ar.kind.clone().into();
    let origin = format!("watch {}", ar.plural);
    let decoded = Decoded::object(&v, &origin);
    assert!(decoded.errors.is_empty(), "{:?}", decoded.errors);
    for c in decoded.changes {
        state.apply(Change::Object(c));
    }
}

fn remove(state: &mut ClusterState, ar: &ApiResource, o: &DynamicObject) {
    let name = o.metadata.name.as_deref().unwrap_or("");
    if let Some(c) = ObjectChange::gone(&ar.kind, o.metadata.namespace.as_deref(), name) {
        state.apply(Change::Object(c));
    }
}

fn same(name: &str, file: &trainyard_model::Snapshot, watched: &trainyard_model::Snapshot) {
    let a = serde_json::to_value(file).expect("serializes");
    let b = serde_json::to_value(watched).expect("serializes");
    if a != b {
        let keys: Vec<String> = a
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| b.get(k.as_str()) != Some(v))
            .map(|(k, _)| k.clone())
            .collect();
        panic!(
            "{name}: the watched snapshot differs from the file's in {keys:?}\nfile: {a}\nwatched: {b}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_snapshot_equals_the_file_snapshot_for_every_bundled_input() {
    let mut checked = 0;
    for (name, text) in inputs() {
        let opts = LoadOptions::default();
        if trainyard_ingest::load(&[Source::new(&name, &text)], &opts).is_err() {
            continue; // a scenario of bad input: the API would refuse it too
        }
        let (_server, client) = server_with_crds().await;
        let mut objects: Vec<Value> = objects_of(&name, &text)
            .into_iter()
            .map(completed)
            .collect();
        // What admission needs first: priority classes (the Priority
        // plugin resolves a pod's priorityClassName at creation).
        objects.sort_by_key(|o| o["kind"] != "PriorityClass");
        let kinds = create_all(&client, &name, &objects).await;
        let file = listed(&client, &kinds).await;
        let loaded =
            trainyard_ingest::load(&[Source::new(format!("{name} (listed)"), file)], &opts)
                .unwrap_or_else(|e| panic!("{name}: the listed objects do not load: {e}"));
        let mut state = watched(&client, &kinds).await;
        assert!(
            state.problems().errors.is_empty(),
            "{name}: {:?}",
            state.problems().errors
        );
        same(&name, &loaded.snapshot, &state.snapshot());
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} inputs compared");
}
