//! The leader's checkpoint in the API server: the small, essential part of
//! the persisted state, so a standby that takes over (with its own store,
//! older, or none) does not start from nothing.
//!
//! Every `service.store.checkpointSeconds` (default 60) the leader writes
//! one ConfigMap (`service.store.checkpointName`, in the lease's
//! namespace), key `checkpoint.json`: when it was taken, the decayed usage
//! of every (leaf queue, user) at that moment, the bind journal's open
//! intents, and the observed runtimes of the reservations' estimate. The pending queue's order is not in it: every input of it is
//! in API objects already (docs/persistence.md).
//!
//! A replica that becomes leader reads it once, before its first cycle:
//! when it is newer than what the replica's own history knows (the end of
//! its store's newest bucket, or its own last sample), the usage history
//! restarts from the checkpoint's decayed totals (one bucket per (queue,
//! user) ending at the checkpoint's time, so decay goes on from there),
//! and what runs now is counted as held since the checkpoint. So a
//! failover loses at most the usage of jobs that ended between the last
//! checkpoint and the takeover: one interval at most. The checkpoint's
//! intents join the replica's own open intents ([`crate::journal`]). Its
//! observed runtimes are restored whether or not it is newer (a replica
//! that starts to lead keeps none of its own), so a restarted or new
//! leader estimates running jobs' ends from its first cycle. So are
//! consolidation's open moves (the room held for moved jobs'
//! replacements, the controllers moved recently): merged into the
//! replica's own, and written at once after a cycle that moved jobs
//! rather than at the next interval.
//!
//! The format is this module's own (versioned JSON), never the store's
//! records.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::{Deserialize, Serialize};
use trainyard_cluster::Moves;
use trainyard_cluster::usage::{ClosedBucket, UsageHistory};
use trainyard_model::Timestamp;
use trainyard_store::{JournalBind, JournalRecord, JournalState, UsageRecord};

/// The data key of the ConfigMap.
pub const KEY: &str = "checkpoint.json";
/// The format's version.
pub const VERSION: u32 = 1;
/// Larger checkpoints are not written (a ConfigMap holds 1 MiB).
pub const MAX_BYTES: usize = 900_000;

/// One (leaf queue, user)'s decayed usage, resource·seconds (CPU and GPU
/// in milli-units, memory in bytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageEntry {
    pub queue: String,
    pub user: String,
    pub cpu: u128,
    pub memory: u128,
    pub gpu: u128,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extended: BTreeMap<String, u128>,
}

/// One bind of an open intent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IntentBind {
    pub pod: String,
    pub uid: String,
    pub node: String,
    pub gpus: Vec<u32>,
}

/// An open intent of the bind journal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Intent {
    pub gang: String,
    pub opened_s: i64,
    pub rolling_back: bool,
    pub binds: Vec<IntentBind>,
}

/// What a checkpoint holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub version: u32,
    /// When it was taken (ms since the epoch).
    pub taken_at_ms: i64,
    pub usage: Vec<UsageEntry>,
    pub intents: Vec<Intent>,
    /// The observed runtimes (ms) of each leaf queue's jobs that ended on
    /// their own, in the order they ended, oldest first
    /// (`reservations.runtimeEstimate`); absent in older checkpoints.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub runtimes: BTreeMap<String, Vec<i64>>,
    /// Consolidation's open plans and recently moved controllers
    /// (docs/consolidation.md); absent when none, and in older
    /// checkpoints.
    #[serde(default, skip_serializing_if = "Moves::is_empty")]
    pub moves: Moves,
}

impl Checkpoint {
    /// The checkpoint of `history` at `now`, with the open `intents` and
    /// the observed `runtimes`.
    pub fn take(
        history: &UsageHistory,
        now: Timestamp,
        intents: &[JournalRecord],
        runtimes: BTreeMap<String, Vec<i64>>,
    ) -> Checkpoint {
        let mut usage = Vec::new();
        for (queue, users) in history.decayed_by_user(now) {
            for (user, used) in users {
                let r = crate::persist::record_of(&used, 0);
                usage.push(UsageEntry {
                    queue: queue.clone(),
                    user,
                    cpu: r.cpu,
                    memory: r.memory,
                    gpu: r.gpu,
                    extended: r.extended,
                });
            }
        }
        Checkpoint {
            version: VERSION,
            taken_at_ms: now.0,
            usage,
            intents: intents
                .iter()
                .map(|r| Intent {
                    gang: r.gang.clone(),
                    opened_s: r.opened_s,
                    rolling_back: r.state == JournalState::RollingBack,
                    binds: r
                        .binds
                        .iter()
                        .map(|b| IntentBind {
                            pod: b.pod.clone(),
                            uid: b.uid.clone(),
                            node: b.node.clone(),
                            gpus: b.gpus.clone(),
                        })
                        .collect(),
                })
                .collect(),
            runtimes,
            moves: Moves::default(),
        }
    }

    /// A usage history that starts from this checkpoint's decayed totals
    /// (decaying by `half_life_s` from its time on).
    pub fn history(&self, half_life_s: u64) -> UsageHistory {
        let width = UsageHistory::new(half_life_s).bucket_s();
        let end_s = self.taken_at_ms.div_euclid(1000);
        let buckets = self.usage.iter().map(|u| ClosedBucket {
            queue: u.queue.clone(),
            user: u.user.clone(),
            start_s: end_s - width as i64,
            width_s: width as u32,
            used: crate::persist::usage_of(&UsageRecord {
                width_s: width as u32,
                cpu: u.cpu,
                memory: u.memory,
                gpu: u.gpu,
                extended: u.extended.clone(),
            }),
        });
        UsageHistory::restore(half_life_s, buckets)
    }

    /// Its open intents, as the journal keeps them.
    pub fn intents(&self) -> Vec<JournalRecord> {
        self.intents
            .iter()
            .map(|i| JournalRecord {
                gang: i.gang.clone(),
                opened_s: i.opened_s,
                binds: i
                    .binds
                    .iter()
                    .map(|b| JournalBind {
                        pod: b.pod.clone(),
                        uid: b.uid.clone(),
                        node: b.node.clone(),
                        gpus: b.gpus.clone(),
                    })
                    .collect(),
                state: if i.rolling_back {
                    JournalState::RollingBack
                } else {
                    JournalState::Open
                },
            })
            .collect()
    }

    /// The JSON a ConfigMap holds; `what` names the object in messages.
    /// Above [`MAX_BYTES`] the observed runtimes are left out (with a
    /// warning: they are the part a standby can do without, as it
    /// measures again); still above, it is an error (not written).
    pub fn to_text(&self, what: &str) -> Result<String, String> {
        let text = serde_json::to_string(self).map_err(|e| format!("{what}: {e}"))?;
        let text = if text.len() > MAX_BYTES && !self.runtimes.is_empty() {
            let without = Checkpoint {
                runtimes: BTreeMap::new(),
                ..self.clone()
            };
            let smaller = serde_json::to_string(&without).map_err(|e| format!("{what}: {e}"))?;
            tracing::warn!(
                "{what}: the checkpoint would be {} bytes with the observed runtimes of {} queues, more than the {MAX_BYTES} a ConfigMap can safely hold; written without them ({} bytes)",
                text.len(),
                self.runtimes.len(),
                smaller.len()
            );
            smaller
        } else {
            text
        };
        if text.len() > MAX_BYTES {
            return Err(format!(
                "{what}: the checkpoint is {} bytes, more than the {MAX_BYTES} a ConfigMap can safely hold; not written",
                text.len()
            ));
        }
        Ok(text)
    }

    /// Reads a checkpoint from the JSON a ConfigMap holds; `what` names
    /// the object in errors.
    pub fn parse(text: &str, what: &str) -> Result<Checkpoint, String> {
        let c: Checkpoint = serde_json::from_str(text)
            .map_err(|e| format!("{what}: data.{KEY} is not a checkpoint: {e}"))?;
        if c.version > VERSION {
            return Err(format!(
                "{what}: checkpoint version {} is newer than this Trainyard reads ({VERSION})",
                c.version
            ));
        }
        Ok(c)
    }
}

/// The checkpoint in ConfigMap `namespace/name`, if there is one. A
/// checkpoint that cannot be read is an error (the caller starts from its
/// own store and says why), never a crash.
pub async fn read(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<Checkpoint>, String> {
    let what = format!("ConfigMap {namespace}/{name}");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = api
        .get_opt(name)
        .await
        .map_err(|e| format!("{what}: {e}"))?;
    let Some(text) = cm.and_then(|c| c.data).and_then(|mut d| d.remove(KEY)) else {
        return Ok(None);
    };
    Checkpoint::parse(&text, &what).map(Some)
}

/// Writes `checkpoint` into ConfigMap `namespace/name` (created when
/// missing), through the fenced connection: only a leader writes.
pub async fn write(
    conn: &crate::conn::Conn,
    namespace: &str,
    name: &str,
    checkpoint: &Checkpoint,
) -> Result<(), String> {
    let what = format!("ConfigMap {namespace}/{name}");
    let text = checkpoint.to_text(&what)?;
    let client = conn.client().await.map_err(|e| format!("{what}: {e}"))?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({"data": {KEY: text}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => {
            let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {"app.kubernetes.io/managed-by": "trainyard"}},
                "data": {KEY: text}
            }))
            .map_err(|e| format!("{what}: {e}"))?;
            api.create(&PostParams::default(), &cm)
                .await
                .map(|_| ())
                .map_err(|e| format!("{what}: {e}"))
        }
        Err(e) => Err(format!("{what}: {}", crate::conn::plain(&e))),
    }
}

/// On becoming leader, with the checkpoint read: when it is newer than
/// what this replica's usage history knows (`known`, in seconds), the
/// history restarts from it and the jobs running now count as held since
/// it was taken; its observed runtimes are restored (with
/// `runtime_window`, the estimate's `samples`, when it is on). Returns
/// whether the history resumed from it (its open intents then join the
/// journal: the caller's part). Pure.
pub fn apply(
    ck: &Checkpoint,
    world: &mut crate::world::World,
    known: Option<i64>,
    runtime_window: Option<u32>,
) -> bool {
    let taken_s = ck.taken_at_ms.div_euclid(1000);
    if let Some(window) = runtime_window
        && !ck.runtimes.is_empty()
    {
        world.state.track_runtimes(Some(window));
        world.state.restore_runtimes(&ck.runtimes);
        tracing::info!(
            queues = ck.runtimes.len(),
            runtimes = world.state.runtimes_kept(),
            "observed runtimes restored from the checkpoint"
        );
    }
    let Some(h) = world.state.usage_history() else {
        return false;
    };
    if known.is_some_and(|k| k >= taken_s) {
        tracing::info!(checkpoint_s = taken_s, known_s = ?known, "the checkpoint is not newer than this replica's usage history; not used");
        return false;
    }
    let half_life = h.half_life_s();
    // The objects the watch listed, into jobs: what runs now.
    world.state.refresh();
    world.state.track_usage(ck.history(half_life));
    world
        .state
        .sample_usage(trainyard_model::Timestamp(ck.taken_at_ms));
    tracing::info!(checkpoint_s = taken_s, known_s = ?known, queues = ck.usage.len(), intents = ck.intents.len(), "usage history resumed from the checkpoint");
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use trainyard_model::Resources;

    #[test]
    fn a_history_restored_from_a_checkpoint_decays_on_as_the_original() {
        let hl = 3600;
        let mut h = UsageHistory::new(hl);
        let held = BTreeMap::from([
            (
                ("a".to_string(), "ns1".to_string()),
                Resources::zero().with_gpus(8),
            ),
            (
                ("b".to_string(), "ns2".to_string()),
                Resources::new(4000, 1 << 30, 0),
            ),
        ]);
        h.sample(Timestamp(0), held);
        let t = Timestamp(2 * 3_600_000 + 17_000);
        h.sample(t, BTreeMap::new());
        let runtimes = BTreeMap::from([("a".to_string(), vec![60_000, 5_000])]);
        let c = Checkpoint::take(&h, t, &[], runtimes.clone());
        let text = serde_json::to_string(&c).expect("json");
        let back = Checkpoint::parse(&text, "cm").expect("parses");
        assert_eq!(back, c);
        assert_eq!(back.runtimes, runtimes);
        let r = back.history(hl);
        for later in [
            t,
            Timestamp(t.0 + 3_600_000),
            Timestamp(t.0 + 10 * 3_600_000),
        ] {
            // As the service does every cycle: buckets close on time.
            let (mut h, mut r) = (h.clone(), r.clone());
            h.advance(later);
            r.advance(later);
            let (want, got) = (h.decayed_by_user(later), r.decayed_by_user(later));
            for (q, users) in &want {
                for (u, w) in users {
                    let g: BTreeMap<&str, u128> = got[q][u].iter().collect();
                    for (name, v) in w.iter() {
                        let x = g.get(name).copied().unwrap_or(0);
                        // The history leaves its open bucket undecayed until
                        // the bucket closes; the checkpoint decays everything
                        // from its time on: they differ by at most one
                        // bucket's decay (1/64 of a half-life at least: 1.1%).
                        assert!(v.abs_diff(x) <= v / 50, "{q}/{u} {name}: {v} vs {x}");
                    }
                }
            }
        }
    }

    #[test]
    fn intents_round_trip_and_a_newer_version_is_refused() {
        let rec = JournalRecord {
            gang: "ml/g".into(),
            opened_s: 5,
            binds: vec![JournalBind {
                pod: "ml/g-0".into(),
                uid: "u".into(),
                node: "n1".into(),
                gpus: vec![0, 1],
            }],
            state: JournalState::RollingBack,
        };
        let c = Checkpoint::take(
            &UsageHistory::new(60),
            Timestamp(1000),
            std::slice::from_ref(&rec),
            BTreeMap::new(),
        );
        assert_eq!(c.intents(), vec![rec]);
        // No runtimes: none written, and a checkpoint without them (an
        // older one) reads as none.
        let text = serde_json::to_string(&c).expect("json");
        assert!(!text.contains("runtimes"), "{text}");
        let old = Checkpoint::parse(
            r#"{"version": 1, "takenAtMs": 0, "usage": [], "intents": []}"#,
            "ConfigMap d/c",
        )
        .expect("an older checkpoint");
        assert!(old.runtimes.is_empty());
        // Runtimes that would make it too big are left out, not the rest.
        let mut big = c.clone();
        big.runtimes = (0..100)
            .map(|q| (format!("queue-{q}"), vec![123_456_789; 1000]))
            .collect();
        let text = big.to_text("ConfigMap d/c").expect("written without them");
        assert!(text.len() <= MAX_BYTES);
        assert_eq!(Checkpoint::parse(&text, "cm").expect("parses"), c);
        let e = Checkpoint::parse(
            r#"{"version": 9, "takenAtMs": 0, "usage": [], "intents": []}"#,
            "ConfigMap d/c",
        )
        .expect_err("newer");
        assert_eq!(
            e,
            "ConfigMap d/c: checkpoint version 9 is newer than this Trainyard reads (1)"
        );
        let e = Checkpoint::parse("{", "ConfigMap d/c").expect_err("bad");
        assert!(
            e.starts_with("ConfigMap d/c: data.checkpoint.json is not a checkpoint"),
            "{e}"
        );
    }
}
