//! The decisions' writes to the API, by a task of their own ([`Writer`])
//! so the next cycle need not wait for them: binds (one `pods/binding`
//! request carrying the chosen GPU devices as annotations; a `Scheduled`
//! Event after), evictions through the Eviction API (a `Reclaimed` or
//! `Preempted` Event with the core's message after), and nominations
//! (`status.nominatedNodeName`), at most `bindConcurrency` requests at
//! once. A gang's members get `status.nominatedNodeName` before their
//! binds (`nominateBeforeBind`), so an autoscaler does not take their
//! nodes away while the gang is being bound.
//!
//! Until the world shows a write, its assumption holds the pod's place;
//! a write that fails is logged and counted, and its assumption is
//! forgotten at once: the next cycle sees the pod as the world has it and
//! decides again (a gang with a failed bind is completed there, or
//! repaired, [`crate::repair`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::{Semaphore, mpsc, watch};
use trainyard_cluster::Write;
use trainyard_crd::keys::NOMINATED_AT;
use trainyard_model::{TaskKey, Timestamp};
use trainyard_sched::decisions::{Bind, Eviction, EvictionKind, NominationDecision};

use crate::conn::Conn;
use crate::events::{EventSink, Record};
use crate::journal::Journal;
use crate::machine::Unit;
pub use crate::settings::NominateBeforeBind;

mod unit;
use unit::write_unit;

/// Annotation with the GPU device indices chosen on the node
/// (`"0,1,2,3"`), written with the bind: `trainyard.io/gpu-indices`, the
/// key the reader takes a bound pod's devices from, so the next snapshot
/// holds the same devices the core chose.
pub const GPU_DEVICES_ANNOTATION: &str = trainyard_crd::keys::GPU_INDICES;

/// What a batch of writes did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    pub binds: u64,
    pub evictions: u64,
    pub nominations: u64,
    pub withdrawals: u64,
    /// DRA claims allocated or reserved before their pods' binds.
    pub claims: u64,
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

/// Binds the pod of `b`: one `pods/binding` request whose annotations
/// (the chosen GPU devices) kube-apiserver copies onto the pod in the same
/// write that sets its node, so no node agent ever sees the pod bound
/// without its devices. A `Scheduled` Event is recorded after.
async fn bind(conn: &Conn, events: &EventSink, b: &Bind, at: &str) -> Result<(), kube::Error> {
    let mut meta = json!({"name": b.task.name, "namespace": namespace(&b.task)});
    if !b.task.uid.is_empty() {
        // The pod we placed, not a namesake created since.
        meta["uid"] = b.task.uid.clone().into();
    }
    if !b.gpus.is_empty() {
        let devices: Vec<String> = b.gpus.iter().map(u32::to_string).collect();
        meta["annotations"] = json!({GPU_DEVICES_ANNOTATION: devices.join(",")});
    }
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding", "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": b.node.to_string()}
    });
    pods(conn.client().await?, &b.task)
        .create_subresource::<serde_json::Value, serde_json::Value>(
            "binding",
            &b.task.name,
            &PostParams::default(),
            &binding,
        )
        .await?;
    events.record(Record {
        task: b.task.clone(),
        type_: "Normal",
        reason: "Scheduled",
        message: format!("Successfully assigned {} to {}", b.task, b.node),
        at: at.to_string(),
    });
    Ok(())
}

/// Evicts the pod of `task` through the Eviction API, conditional on its
/// uid when known (`deleteOptions.preconditions.uid`: 409 Conflict for a
/// namesake created since), so the pod a cycle chose is the only one it
/// can evict. The body is written here: kube's `EvictParams` sends its
/// delete options as `delete_options`, a key kube-apiserver ignores.
async fn post_eviction(conn: &Conn, task: &TaskKey) -> Result<(), kube::Error> {
    let mut eviction = json!({
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": task.name, "namespace": namespace(task)},
    });
    if !task.uid.is_empty() {
        eviction["deleteOptions"] = json!({"preconditions": {"uid": task.uid}});
    }
    pods(conn.client().await?, task)
        .create_subresource::<serde_json::Value, serde_json::Value>(
            "eviction",
            &task.name,
            &PostParams::default(),
            &eviction,
        )
        .await
        .map(|_| ())
}

async fn evict(conn: &Conn, events: &EventSink, e: &Eviction, at: &str) -> Result<(), kube::Error> {
    post_eviction(conn, &e.task).await?;
    let reason = match e.kind {
        EvictionKind::Reclaim => "Reclaimed",
        EvictionKind::Preempt => "Preempted",
        EvictionKind::Consolidate => "Consolidated",
    };
    events.record(Record {
        task: e.task.clone(),
        type_: "Normal",
        reason,
        message: e.message.clone(),
        at: at.to_string(),
    });
    Ok(())
}

/// A JSON merge patch of the pod of `task`, conditional on its uid when
/// known: kube-apiserver refuses to change a uid (422 `field is
/// immutable`), so a namesake created since is never patched.
fn merge_patch(task: &TaskKey, mut body: serde_json::Value) -> Patch<serde_json::Value> {
    if !task.uid.is_empty() {
        body["metadata"]["uid"] = task.uid.clone().into();
    }
    Patch::Merge(body)
}

/// Sets `status.nominatedNodeName` of the pod of `task` to `node`, or
/// clears it (`None`: a JSON merge patch's `null` removes the field).
async fn set_nomination(
    conn: &Conn,
    task: &TaskKey,
    node: Option<&str>,
) -> Result<(), kube::Error> {
    pods(conn.client().await?, task)
        .patch_status(
            &task.name,
            &PatchParams::default(),
            &merge_patch(task, json!({"status": {"nominatedNodeName": node}})),
        )
        .await
        .map(|_| ())
}

/// Nominates a preemptor's pod: first its annotations `trainyard.io/nominated-at`
/// (when the nomination was made, so that it lapses
/// `nominationTimeoutSeconds` later, not counted from the pod's creation)
/// and `trainyard.io/gpu-indices` (the devices held for it), then
/// `status.nominatedNodeName`, so the pod is never seen nominated without
/// its time.
async fn nominate_preemptor(
    conn: &Conn,
    n: &NominationDecision,
    at: &str,
) -> Result<(), kube::Error> {
    let mut annotations = json!({NOMINATED_AT: at});
    if !n.gpus.is_empty() {
        let devices: Vec<String> = n.gpus.iter().map(u32::to_string).collect();
        annotations[GPU_DEVICES_ANNOTATION] = devices.join(",").into();
    }
    pods(conn.client().await?, &n.task)
        .patch(
            &n.task.name,
            &PatchParams::default(),
            &merge_patch(&n.task, json!({"metadata": {"annotations": annotations}})),
        )
        .await?;
    set_nomination(conn, &n.task, Some(&n.node.to_string())).await
}

/// Withdraws the nomination of the pod of `task`: clears
/// `status.nominatedNodeName` (a JSON merge patch's `null` removes the
/// field), then the annotations written with it. Like every patch here it
/// names the pod's uid, so a namesake's nomination is left alone.
async fn withdraw(conn: &Conn, task: &TaskKey) -> Result<(), kube::Error> {
    set_nomination(conn, task, None).await?;
    pods(conn.client().await?, task)
        .patch(
            &task.name,
            &PatchParams::default(),
            &merge_patch(
                task,
                json!({"metadata": {"annotations": {
                NOMINATED_AT: null, GPU_DEVICES_ANNOTATION: null}}}),
            ),
        )
        .await
        .map(|_| ())
}

/// Evicts a bound member of an incomplete gang ([`crate::repair`]), with
/// an `IncompleteGang` Event.
pub async fn evict_incomplete(
    conn: &Conn,
    events: &EventSink,
    e: &crate::repair::RepairEviction,
    at: &str,
) -> Result<(), kube::Error> {
    evict_with_event(conn, events, &e.task, "IncompleteGang", &e.message, at).await
}

/// Evicts `task` through the Eviction API and, once evicted, records a
/// Warning Event `reason` on it.
pub async fn evict_with_event(
    conn: &Conn,
    events: &EventSink,
    task: &TaskKey,
    reason: &'static str,
    message: &str,
    at: &str,
) -> Result<(), kube::Error> {
    post_eviction(conn, task).await?;
    events.record(Record {
        task: task.clone(),
        type_: "Warning",
        reason,
        message: message.to_string(),
        at: at.to_string(),
    });
    Ok(())
}

/// One write done: the cycle it came from (`at`), the write, and why it
/// failed, if it did.
#[derive(Debug)]
pub struct Outcome {
    /// The unit it belongs to ([`crate::machine::Unit`]).
    pub unit: u64,
    pub at: Timestamp,
    pub write: Write,
    pub error: Option<Failure>,
}

pub use crate::machine::Failure;

/// Keeps the writes of each pod in the order they were handed over. Units
/// run concurrently, and a merge patch carries no precondition on what
/// came before it, so without this a nomination and its withdrawal a
/// cycle later (or a bind and an eviction) could land in the wrong order.
/// A unit waits for every earlier unit that writes one of its pods; units
/// of other pods do not wait. A unit waits before it takes one of the
/// `bindConcurrency` unit slots, so many cycles' writes of one slow pod
/// do not hold up the other pods' writes; and the oldest unit waits for
/// nothing, so nothing waits forever.
#[derive(Default)]
struct PodOrder {
    next: u64,
    /// The last unit entered for each pod (namespace, name), and a
    /// receiver that ends when that unit is done.
    last: HashMap<(String, String), (u64, watch::Receiver<()>)>,
}

/// A unit's turn: its id, the sender whose drop says it is done, and the
/// units it waits for.
type Turn = (u64, watch::Sender<()>, Vec<watch::Receiver<()>>);

fn pod_of(task: &TaskKey) -> (String, String) {
    (namespace(task).to_string(), task.name.clone())
}

impl PodOrder {
    /// Enters a unit writing `writes`: after every unit entered before it
    /// that writes one of the same pods.
    fn enter(&mut self, writes: &[Write]) -> Turn {
        let id = self.next;
        self.next += 1;
        let (done, rx) = watch::channel(());
        let mut waits: Vec<(u64, watch::Receiver<()>)> = Vec::new();
        for w in writes {
            if let Some((prev, r)) = self.last.insert(pod_of(w.task()), (id, rx.clone()))
                && prev != id
                && !waits.iter().any(|(p, _)| *p == prev)
            {
                waits.push((prev, r));
            }
        }
        (id, done, waits.into_iter().map(|(_, r)| r).collect())
    }

    /// Unit `id`, writing `pods`, is done: pods no later unit writes are
    /// forgotten.
    fn leave(&mut self, id: u64, pods: &[TaskKey]) {
        for t in pods {
            let key = pod_of(t);
            if self.last.get(&key).is_some_and(|(last, _)| *last == id) {
                self.last.remove(&key);
            }
        }
    }
}

fn lock(order: &std::sync::Mutex<PodOrder>) -> std::sync::MutexGuard<'_, PodOrder> {
    // Nothing panics while holding it; a poisoned map is still whole.
    order.lock().unwrap_or_else(|p| p.into_inner())
}

/// The writer: a task that writes the units the machine hands out
/// ([`crate::machine::Unit`]) while the next cycles run, at most
/// `bindConcurrency` requests at once, and reports each write's outcome.
pub struct Writer {
    tx: mpsc::UnboundedSender<Unit>,
    rx: mpsc::UnboundedReceiver<Outcome>,
    /// Writes not yet done, by the time of their cycle.
    in_flight: BTreeMap<Timestamp, usize>,
    /// Units made by [`Writer::send`] (without a machine).
    own: crate::machine::units::Units,
    nominate: NominateBeforeBind,
    task: tokio::task::JoinHandle<()>,
}

impl Writer {
    pub fn spawn(
        conn: Arc<Conn>,
        events: EventSink,
        concurrency: usize,
        nominate: NominateBeforeBind,
        journal: Option<Journal>,
    ) -> Writer {
        let (tx, mut units) = mpsc::unbounded_channel::<Unit>();
        let (out, rx) = mpsc::unbounded_channel();
        let permits = Arc::new(Semaphore::new(concurrency.max(1)));
        let order = Arc::new(std::sync::Mutex::new(PodOrder::default()));
        let task = tokio::spawn(async move {
            let turns = Arc::clone(&order);
            futures::stream::poll_fn(move |cx| units.poll_recv(cx))
                // Units are taken one at a time, in the order they were
                // handed over: each waits for the earlier ones writing its
                // pods.
                .map(move |unit| {
                    let turn = lock(&turns).enter(&unit.writes);
                    (unit, turn)
                })
                // The waiting happens here, outside the `bindConcurrency`
                // units below: a unit waiting for an earlier one of its pod
                // holds no slot the other pods' units need.
                .map(|(unit, (id, done, waits))| async move {
                    for mut w in waits {
                        // Ends when that unit's sender is dropped.
                        while w.changed().await.is_ok() {}
                    }
                    (unit, id, done)
                })
                .buffer_unordered(usize::MAX)
                .for_each_concurrent(concurrency.max(1), |(unit, id, done)| {
                    let (conn, events, permits, out, journal, order) = (
                        Arc::clone(&conn),
                        events.clone(),
                        Arc::clone(&permits),
                        out.clone(),
                        journal.clone(),
                        Arc::clone(&order),
                    );
                    async move {
                        let pods: Vec<TaskKey> =
                            unit.writes.iter().map(|w| w.task().clone()).collect();
                        write_unit(&conn, &events, &permits, journal.as_ref(), unit, &out).await;
                        lock(&order).leave(id, &pods);
                        drop(done);
                    }
                })
                .await;
        });
        Writer {
            tx,
            rx,
            in_flight: BTreeMap::new(),
            own: crate::machine::units::Units::new(false, 0),
            nominate,
            task,
        }
    }

    /// Hands over the writes of the cycle at `at`, grouped into units as
    /// the machine groups them (no journal): for callers without a
    /// machine.
    pub fn send(&mut self, at: Timestamp, writes: Vec<Write>) {
        for unit in self.own.make(at, writes, self.nominate, |_| None, |_| None) {
            self.send_unit(unit);
        }
    }

    /// Hands over one unit.
    pub fn send_unit(&mut self, unit: Unit) {
        if unit.writes.is_empty() {
            return;
        }
        *self.in_flight.entry(unit.at).or_default() += unit.writes.len();
        // The task ends only with the writer.
        let _ = self.tx.send(unit);
    }

    /// The next write done (waits; pending forever when none is in flight).
    pub async fn outcome(&mut self) -> Option<Outcome> {
        let o = self.rx.recv().await?;
        if let Some(n) = self.in_flight.get_mut(&o.at) {
            *n -= 1;
            if *n == 0 {
                self.in_flight.remove(&o.at);
            }
        }
        Some(o)
    }

    /// Writes not yet done.
    pub fn in_flight(&self) -> usize {
        self.in_flight.values().sum()
    }
}

impl Writer {
    /// Stops the task (writes still queued are lost, as on drop) and waits
    /// until it is gone, with everything it held (the journal's handle on
    /// the store's thread among them).
    pub async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Writes still queued are lost, as in a crash: their assumptions
        // die with the process, and the next start sees the world as it is.
        self.task.abort();
    }
}

/// Creates Trainyard's Queue `name` (kind and version of `ar`) with no
/// quota and no limit; one that exists already is left as it is.
pub async fn create_queue(conn: &Conn, ar: &kube::core::ApiResource, name: &str) {
    let queue = json!({
        "apiVersion": ar.api_version, "kind": ar.kind,
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "trainyard"}},
        "spec": {},
    });
    let created = match conn.client().await {
        Ok(client) => {
            let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), ar);
            match serde_json::from_value(queue) {
                Ok(obj) => api
                    .create(&kube::api::PostParams::default(), &obj)
                    .await
                    .map(|_| ()),
                Err(e) => Err(kube::Error::SerdeError(e)),
            }
        }
        Err(e) => Err(e),
    };
    match created {
        Ok(()) => tracing::info!(
            "created Queue {name}: jobs that name no queue run in it (no quota, no limit; kubectl edit queue {name} to give it some)"
        ),
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => tracing::warn!("creating Queue {name}: {}", crate::conn::plain(&e)),
    }
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
            let patch = Patch::Merge(json!({"status": status}));
            let written = match conn.client().await {
                Ok(client) => {
                    let (api, name): (Api<kube::api::DynamicObject>, &str) = match key
                        .split_once('/')
                    {
                        Some((ns, name)) => (Api::namespaced_with(client.clone(), ns, ar), name),
                        None => (Api::all_with(client.clone(), ar), key.as_str()),
                    };
                    api.patch_status(name, &PatchParams::default(), &patch)
                        .await
                        .map(|_| ())
                }
                Err(e) => Err(e),
            };
            match written {
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!("status of {} {key}: {}", ar.kind, crate::conn::plain(&e));
                    Some(key)
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    failed.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use trainyard_sched::decisions::{Bind, Eviction, EvictionKind, NominationDecision};

    use super::*;

    fn task(name: &str) -> TaskKey {
        TaskKey {
            namespace: "ml".into(),
            name: name.into(),
            uid: String::new(),
        }
    }

    fn bind(job: &str, pod: &str) -> Write {
        Write::Bind(Bind {
            job: job.into(),
            task: task(pod),
            node: "n1".into(),
            gpus: vec![0],
        })
    }

    fn names(units: &[(bool, Vec<Write>)]) -> Vec<(bool, Vec<String>)> {
        units
            .iter()
            .map(|(first, ws)| {
                let names = ws
                    .iter()
                    .map(|w| match w {
                        Write::Bind(b) => format!("bind {}", b.task.name),
                        Write::Evict(e) => format!("evict {}", e.task.name),
                        Write::Nominate(n) => format!("nominate {}", n.task.name),
                        Write::Withdraw(w) => format!("withdraw {}", w.task.name),
                        Write::Claim(c) => format!("claim {}", c.claim),
                    })
                    .collect();
                (*first, names)
            })
            .collect()
    }

    /// True once every unit `r` waits on is done (its sender dropped).
    fn done(waits: &[watch::Receiver<()>]) -> bool {
        waits.iter().all(|r| r.has_changed().is_err())
    }

    #[test]
    fn a_pods_writes_wait_for_its_earlier_ones_and_no_others() {
        let mut order = PodOrder::default();
        let (a, a_done, a_waits) = order.enter(&[bind("ml/g", "p"), bind("ml/g", "q")]);
        assert!(a_waits.is_empty());
        let (b, b_done, b_waits) = order.enter(&[bind("ml/x", "p")]);
        let (_, _, c_waits) = order.enter(&[bind("ml/y", "r")]);
        let (_, _, d_waits) = order.enter(&[bind("ml/z", "q")]);
        // p's second unit and q's waits for the gang; r's for nothing.
        assert_eq!((b_waits.len(), c_waits.len(), d_waits.len()), (1, 0, 1));
        assert!(!done(&b_waits) && !done(&d_waits));
        order.leave(a, &[task("p"), task("q")]);
        drop(a_done);
        assert!(done(&b_waits) && done(&d_waits));
        // p's last unit is still b's: a unit entered now waits for it.
        let (_, _, e_waits) = order.enter(&[bind("ml/w", "p")]);
        assert_eq!(e_waits.len(), 1);
        assert!(!done(&e_waits));
        order.leave(b, &[task("p")]);
        drop(b_done);
        assert!(done(&e_waits));
        // The same name in another namespace is another pod.
        let other = TaskKey {
            namespace: "other".into(),
            ..task("r")
        };
        let (_, _, f_waits) = order.enter(&[Write::Bind(Bind {
            job: "other/v".into(),
            task: other,
            node: "n1".into(),
            gpus: vec![],
        })]);
        assert!(f_waits.is_empty());
    }

    #[test]
    fn binds_are_written_by_gang_with_nominations_first_for_gangs() {
        let writes = vec![
            Write::Evict(Eviction {
                job: "ml/old".into(),
                task: task("old-0"),
                node: "n1".into(),
                kind: EvictionKind::Reclaim,
                preemptor: "ml/g".into(),
                message: "reclaimed".into(),
            }),
            bind("ml/g", "g-0"),
            bind("ml/one", "one-0"),
            bind("ml/g", "g-1"),
            Write::Nominate(NominationDecision {
                job: "ml/p".into(),
                task: task("p-0"),
                node: "n2".into(),
                gpus: vec![],
            }),
        ];
        let gangs = crate::machine::units::plan(writes.clone(), NominateBeforeBind::Gangs);
        assert_eq!(
            names(&gangs),
            [
                (true, vec!["bind g-0".to_string(), "bind g-1".to_string()]),
                (false, vec!["bind one-0".to_string()]),
                (false, vec!["evict old-0".to_string()]),
                (false, vec!["nominate p-0".to_string()]),
            ]
        );
        let always: Vec<bool> =
            crate::machine::units::plan(writes.clone(), NominateBeforeBind::Always)
                .iter()
                .map(|u| u.0)
                .collect();
        assert_eq!(always, [true, true, false, false]);
        let never: Vec<bool> = crate::machine::units::plan(writes, NominateBeforeBind::Never)
            .iter()
            .map(|u| u.0)
            .collect();
        assert_eq!(never, [false, false, false, false]);
    }
}
