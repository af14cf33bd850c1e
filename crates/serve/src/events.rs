//! Events about pods (`Scheduled`, `FailedScheduling`, `Preempted`,
//! `Reclaimed`, `IncompleteGang`, ...), written by a task of their own so
//! that no bind, eviction or cycle waits for one.
//!
//! [`EventSink::record`] never waits: it queues the Event, or drops it and
//! counts the drop when `capacity` Events are already queued, as client-go's
//! event broadcaster does (an Event is a report for people, not state: the
//! pod's condition and the objects themselves carry what controllers read).
//! The task writes at most `concurrency` at once, through the same
//! [`Conn`] (and its QPS budget) as every other write.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::sync::mpsc;
use trainyard_model::TaskKey;

use crate::conn::Conn;

/// The `source.component` and `reportingComponent` of Trainyard's Events.
pub const COMPONENT: &str = "trainyard";

/// One Event to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub task: TaskKey,
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    pub reason: &'static str,
    pub message: String,
    /// RFC 3339.
    pub at: String,
}

/// Events written, failed and dropped so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventCounts {
    pub written: u64,
    pub failed: u64,
    /// Dropped because `capacity` Events were queued.
    pub dropped: u64,
}

#[derive(Debug, Default)]
struct Counters {
    written: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
}

/// Where Events are recorded; cheap to clone.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: mpsc::Sender<Record>,
    counts: Arc<Counters>,
}

impl EventSink {
    /// A sink and the task that writes its Events (it ends when every
    /// clone of the sink is gone and the queue is written).
    pub fn spawn(
        conn: Arc<Conn>,
        capacity: usize,
        concurrency: usize,
    ) -> (EventSink, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<Record>(capacity.max(1));
        let counts = Arc::new(Counters::default());
        let c = Arc::clone(&counts);
        let task = tokio::spawn(async move {
            futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
                .for_each_concurrent(concurrency.max(1), |r| {
                    let conn = Arc::clone(&conn);
                    let c = Arc::clone(&c);
                    async move {
                        match write(&conn, &r).await {
                            Ok(()) => c.written.fetch_add(1, Ordering::Relaxed),
                            Err(e) => {
                                tracing::warn!(
                                    "{} Event of {}: {}",
                                    r.reason,
                                    r.task,
                                    crate::conn::plain(&e)
                                );
                                c.failed.fetch_add(1, Ordering::Relaxed)
                            }
                        };
                    }
                })
                .await;
        });
        (EventSink { tx, counts }, task)
    }

    /// Queues `r`, or drops it when the queue is full (counted, logged).
    pub fn record(&self, r: Record) {
        match self.tx.try_send(r) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(r)) => {
                let n = self.counts.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                // One line per power of two, not one per Event.
                if n.is_power_of_two() {
                    tracing::warn!(
                        dropped = n,
                        "Event queue full: dropped {} Event of {} (and {} before)",
                        r.reason,
                        r.task,
                        n - 1
                    );
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// Events written, failed and dropped so far.
    pub fn counts(&self) -> EventCounts {
        EventCounts {
            written: self.counts.written.load(Ordering::Relaxed),
            failed: self.counts.failed.load(Ordering::Relaxed),
            dropped: self.counts.dropped.load(Ordering::Relaxed),
        }
    }
}

/// Creates the Event of `r` about its pod.
async fn write(conn: &Conn, r: &Record) -> Result<(), kube::Error> {
    let ns = crate::write::namespace(&r.task);
    let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(json!({
        "metadata": {"generateName": format!("{}.", r.task.name), "namespace": ns},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": r.task.name,
                           "namespace": ns, "uid": r.task.uid},
        "reason": r.reason, "message": r.message, "type": r.type_,
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
        "firstTimestamp": r.at, "lastTimestamp": r.at, "count": 1
    }))
    .map_err(kube::Error::SerdeError)?;
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(conn.client().await?.clone(), ns)
        .create(&PostParams::default(), &event)
        .await
        .map(|_| ())
}
