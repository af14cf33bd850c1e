//! The gang bind journal against `kill -9`: `trainyard serve` runs as a
//! process against the test API server with a store, binds gangs one
//! request at a time (`bindConcurrency: 1`, 20 ms added to every request)
//! and is killed with SIGKILL at random points of a gang's binding (a
//! seeded choice: before any bind shows, or right after the first, second
//! or third of four), then started again, many times. While it is down
//! the test sometimes deletes an unbound member of a gang left bound in
//! part, as a user or controller might.
//!
//! Checked from the API's pods alone, never from the service: no pod is
//! ever bound twice or moved (a watch records every pod's node from the
//! first list on), and once the last start has resolved the journal, no
//! gang is left in part: every gang has all its pods bound or none
//! (bound members of a gang that lost a member are evicted). The repair
//! timer (`gangRepairSeconds`) is an hour, so the journal alone can do
//! that. At the end the store holds no open intent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::watcher;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use trainyard_store::{Backend, Records};
use trainyard_testapi::{Config, Faults, TestApiServer};

const NS: &str = "ml";
const GROUP_LABEL: &str = "trainyard.io/pod-group";
const MEMBERS: usize = 4;
const GANGS: usize = 14;
const WAIT: Duration = Duration::from_secs(30);

fn ar(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("trainyard.io", "v1alpha1", kind),
        plural,
    )
}

async fn setup(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for f in ["queues", "podgroups", "topologies"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../../deploy/crds/{f}.trainyard.io.yaml"));
        let text = std::fs::read_to_string(p).expect("committed CRD");
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("a CRD");
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD accepted");
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("ns");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let queue: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
        "metadata": {"name": "q"}, "spec": {}
    }))
    .expect("queue");
    Api::<DynamicObject>::all_with(client.clone(), &ar("Queue", "queues"))
        .create(&PostParams::default(), &queue)
        .await
        .expect("queue created");
    let nodes: Api<Node> = Api::all(client.clone());
    // Room for every gang at once: the journal, not room, decides.
    for i in 0..GANGS {
        let name = format!("n{i:02}");
        let n: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("node");
        nodes
            .create(&PostParams::default(), &n)
            .await
            .expect("node");
        nodes
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                    "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                    "conditions": [{"type": "Ready", "status": "True"}]
                }})),
            )
            .await
            .expect("node status");
    }
}

async fn gang(client: &kube::Client, name: &str) {
    let pg: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"queue": "q", "minMember": MEMBERS}
    }))
    .expect("podgroup");
    Api::<DynamicObject>::namespaced_with(client.clone(), NS, &ar("PodGroup", "podgroups"))
        .create(&PostParams::default(), &pg)
        .await
        .expect("podgroup created");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for i in 0..MEMBERS {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-{i}"), "labels": {GROUP_LABEL: name}},
            "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "train:1",
                     "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &p)
            .await
            .expect("pod created");
    }
}

/// Every pod the watch has seen: uid → (name, gang, nodes it was seen on,
/// in order, without repeats), and whether it is being deleted.
#[derive(Default)]
struct Seen {
    pods: BTreeMap<String, (String, String, Vec<String>, bool)>,
    live: BTreeMap<String, String>,
}

impl Seen {
    fn apply(&mut self, p: &Pod) {
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        let gang = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(GROUP_LABEL))
            .cloned()
            .unwrap_or_default();
        let e = self
            .pods
            .entry(uid.clone())
            .or_insert((name.clone(), gang, Vec::new(), false));
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone())
            && e.2.last() != Some(&n)
        {
            e.2.push(n);
        }
        e.3 = p.metadata.deletion_timestamp.is_some();
        self.live.insert(name, uid);
    }

    fn delete(&mut self, p: &Pod) {
        let name = p.metadata.name.clone().unwrap_or_default();
        self.live.remove(&name);
    }

    /// Per gang: (live members bound and not being deleted, live members).
    fn gangs(&self) -> BTreeMap<String, (usize, usize)> {
        let mut out: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for uid in self.live.values() {
            let (_, gang, nodes, deleting) = &self.pods[uid];
            let e = out.entry(gang.clone()).or_default();
            e.1 += 1;
            if !nodes.is_empty() && !deleting {
                e.0 += 1;
            }
        }
        out
    }

    fn bound_in(&self, gang: &str) -> usize {
        self.gangs().get(gang).map_or(0, |g| g.0)
    }
}

/// A pod watch feeding `seen`; `changed` wakes waiters.
fn watch(
    client: &kube::Client,
) -> (
    Arc<Mutex<Seen>>,
    tokio::sync::watch::Receiver<u64>,
    tokio::task::JoinHandle<()>,
) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (tx, rx) = tokio::sync::watch::channel(0u64);
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let s = seen.clone();
    let task = tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default()).boxed();
        while let Some(e) = events.next().await {
            {
                let mut s = s.lock().expect("not poisoned");
                match e {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => s.apply(&p),
                    Ok(watcher::Event::Delete(p)) => s.delete(&p),
                    _ => continue,
                }
            }
            tx.send_modify(|n| *n += 1);
        }
    });
    (seen, rx, task)
}

/// Waits (on the watch, not a clock) until `done` holds.
async fn until(
    seen: &Arc<Mutex<Seen>>,
    changed: &mut tokio::sync::watch::Receiver<u64>,
    what: &str,
    done: impl Fn(&Seen) -> bool,
) {
    let wait = async {
        loop {
            if done(&seen.lock().expect("not poisoned")) {
                return;
            }
            changed.changed().await.expect("the watch runs");
        }
    };
    if tokio::time::timeout(WAIT, wait).await.is_err() {
        let s = seen.lock().expect("not poisoned");
        panic!("timed out waiting for {what}: gangs {:?}", s.gangs());
    }
}

fn serve(settings: &Path, kubeconfig: &Path) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_trainyard"))
        .arg("serve")
        .arg("--config")
        .arg(settings)
        .env("KUBECONFIG", kubeconfig)
        .env_remove("TRAINYARD_LOG")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("trainyard serve starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_binding_gangs_no_partial_gang_survives_and_no_pod_is_bound_twice() {
    let server = TestApiServer::start(Config::default())
        .await
        .expect("the test API server starts");
    let client = kube::Client::try_from(kube::Config::new(
        server.url().parse().expect("the server's URL"),
    ))
    .expect("a client");
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let store = dir.path().join("state.redb");
    let settings = dir.path().join("serve.yaml");
    std::fs::write(
        &settings,
        format!(
            "service:\n  cyclePeriodMillis: 50\n  debounceMillis: 10\n  httpAddress: ''\n  bindConcurrency: 1\n  gangRepairSeconds: 3600\n  leaderElection:\n    enabled: false\n  store:\n    path: {}\n",
            store.display()
        ),
    )
    .expect("settings");
    setup(&client).await;
    let (seen, mut changed, watch_task) = watch(&client);
    server.set_faults(Faults {
        latency_ms: 20,
        ..Faults::default()
    });
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut rng = ChaCha8Rng::seed_from_u64(18);
    let mut log: Vec<String> = Vec::new();
    let mut partial_at_kill = 0;
    let mut member_deleted = 0;
    for g in 0..GANGS {
        let name = format!("g{g:02}");
        let mut child = serve(&settings, &kubeconfig);
        gang(&client, &name).await;
        // Killed after `after` binds of this gang show (0: at a random
        // moment after it was created, bound or not).
        let after = rng.random_range(0..MEMBERS);
        if after == 0 {
            let ms = rng.random_range(0..400);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        } else {
            until(
                &seen,
                &mut changed,
                &format!("{after} binds of {name}"),
                |s| s.bound_in(&name) >= after,
            )
            .await;
        }
        child.start_kill().expect("SIGKILL sent");
        child.wait().await.expect("the child is reaped");
        let bound = seen.lock().expect("not poisoned").bound_in(&name);
        let what = format!("{name}: killed after {after} binds seen, {bound} bound at the kill");
        if bound > 0 && bound < MEMBERS {
            partial_at_kill += 1;
            // Sometimes a member goes while the scheduler is down (always
            // the first time, so the roll-back is always exercised).
            if rng.random_bool(0.4) || member_deleted == 0 {
                let unbound: Vec<String> = pods
                    .list(&Default::default())
                    .await
                    .expect("pods")
                    .into_iter()
                    .filter(|p| {
                        p.metadata.labels.as_ref().and_then(|l| l.get(GROUP_LABEL)) == Some(&name)
                            && p.spec.as_ref().is_some_and(|s| s.node_name.is_none())
                    })
                    .filter_map(|p| p.metadata.name)
                    .collect();
                if let Some(victim) = unbound.first() {
                    pods.delete(victim, &DeleteParams::default())
                        .await
                        .expect("member deleted");
                    member_deleted += 1;
                    log.push(format!("{what}; {victim} deleted"));
                    continue;
                }
            }
        }
        log.push(what);
    }
    // The last start resolves the journal; nothing kills it.
    let mut child = serve(&settings, &kubeconfig);
    until(&seen, &mut changed, "no gang left in part", |s| {
        s.gangs()
            .values()
            .all(|(bound, live)| *bound == 0 || (*bound == *live && *live == MEMBERS))
    })
    .await;
    let gangs = {
        let s = seen.lock().expect("not poisoned");
        for (uid, (name, _, nodes, _)) in &s.pods {
            assert!(
                nodes.len() <= 1,
                "{name} ({uid}) was bound more than once: {nodes:?}\n{log:#?}"
            );
        }
        s.gangs()
    };
    // Every gang whose members are all there ran whole.
    for (g, (bound, live)) in &gangs {
        if *live == MEMBERS {
            until(&seen, &mut changed, &format!("{g} bound whole"), |s| {
                s.bound_in(g) == MEMBERS
            })
            .await;
        } else {
            assert_eq!(
                *bound, 0,
                "{g} lost a member and keeps {bound} bound\n{log:#?}"
            );
        }
    }
    for (uid, (name, _, nodes, _)) in &seen.lock().expect("not poisoned").pods {
        assert!(
            nodes.len() <= 1,
            "{name} ({uid}) was bound more than once: {nodes:?}\n{log:#?}"
        );
    }
    // The test was not vacuous: kills left gangs in part, some of which
    // lost a member.
    assert!(
        partial_at_kill >= 3,
        "only {partial_at_kill} kills left a gang in part\n{log:#?}"
    );
    assert!(member_deleted >= 1, "no member was deleted\n{log:#?}");

    // SIGTERM: the service stops and closes its store; no intent is left.
    let pid = child.id().expect("a running child");
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("it exits within 30 s of SIGTERM")
        .expect("its exit status");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let store = trainyard_store::open(&store, Backend::Redb).expect("the store opens");
    let open: BTreeSet<String> = store
        .journal()
        .expect("journal")
        .into_values()
        .map(|r| r.gang)
        .collect();
    assert!(open.is_empty(), "intents left open: {open:?}\n{log:#?}");
    watch_task.abort();
}
