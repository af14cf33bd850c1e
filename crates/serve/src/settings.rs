//! The service's settings: the scheduler `Config` plus how the service
//! runs (cycle period, debounce, bind concurrency, how long an unconfirmed
//! assumption is kept). Typed, defaulted and checked when loaded.
//!
//! ```yaml
//! scheduler:            # trainyard_sched::Config, as `trainyard schedule --config` takes it
//!   scoring: {gpu: {strategy: binpack, weight: 10}}
//! service:
//!   schedulerName: trainyard
//!   defaultQueue: default
//!   cyclePeriodMillis: 1000
//!   debounceMillis: 100
//!   bindConcurrency: 16
//!   assumeTimeoutSeconds: 30
//!   gangRepairSeconds: 60
//!   admissionGating: false
//!   clientQps: 5000
//!   clientBurst: 10000
//!   inferPodGroups: true
//!   nominateBeforeBind: gangs   # or always, never
//!   eventQueue: 10000
//!   httpAddress: 0.0.0.0:8080   # /metrics, /healthz, /readyz; "" for none
//!   leaderElection:
//!     enabled: true             # off only for one replica (--leader-elect=false)
//!     leaseName: trainyard
//!     leaseNamespace: ""        # POD_NAMESPACE, else default
//!     identity: ""              # POD_NAME, else the host name
//!     leaseDurationSeconds: 15
//!     renewDeadlineSeconds: 10
//!     retryPeriodSeconds: 2
//!   store:                      # docs/persistence.md
//!     path: ""                  # "" keeps nothing
//!     backend: redb             # or sled
//!     retentionDays: null       # null: eight half-lives
//!     jobRetentionDays: null    # per-job records; null: 14 (at most retentionDays)
//!     checkpointSeconds: 60     # 0: no checkpoint to the API server
//!     checkpointName: trainyard-checkpoint  # a ConfigMap, lease namespace
//! ```

use serde::{Deserialize, Serialize};
use trainyard_sched::Config;

/// Everything `trainyard serve --config FILE` reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Settings {
    /// The core's configuration, as for `trainyard schedule`.
    pub scheduler: Config,
    pub service: ServiceSettings,
}

/// How the service runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ServiceSettings {
    /// Pods with this `spec.schedulerName` are Trainyard's.
    pub scheduler_name: String,
    /// Queue of pods and groups that name none. Empty: PodGroups inferred
    /// from owners get no default (their pods are told which label to
    /// set); other pods and groups that name none still go to `default`.
    pub default_queue: String,
    /// When leading, create the Queue `defaultQueue` names if no such
    /// Queue exists (once per start, as Volcano creates its `default`
    /// queue): unlabelled jobs then run in a queue `kubectl get tyq`
    /// shows, with a status, never in a hidden one.
    pub create_default_queue: bool,
    /// A cycle runs at least this often (milliseconds).
    pub cycle_period_millis: u64,
    /// After a relevant change, a cycle runs this soon (milliseconds),
    /// collecting the changes that arrive meanwhile.
    pub debounce_millis: u64,
    /// Binding requests in flight at once.
    pub bind_concurrency: usize,
    /// A bind (or eviction) the world has not shown after this long is
    /// forgotten, and its pod is pending again in the next cycle.
    pub assume_timeout_seconds: u64,
    /// A gang with some members bound but fewer than its minimum for this
    /// long has its bound members evicted ([`crate::repair`]).
    pub gang_repair_seconds: u64,
    /// End jobs at their walltime: a job that has run its walltime (its
    /// own, else its queue's default, else its queue's maximum) has its pods
    /// evicted with a `WalltimeExceeded` Event ([`crate::walltime`]). Off
    /// by default, as walltimes are new to Kubernetes users; then each of
    /// its pods gets one `WalltimePassed` Event and it runs on.
    pub enforce_walltime: bool,
    /// Queue-admission gating: remove the `trainyard.io/admission`
    /// scheduling gate from a job's pods only when its queue has room
    /// ([`crate::admission`]).
    pub admission_gating: bool,
    /// Write requests per second to the API server, sustained (client-go's
    /// QPS).
    pub client_qps: u32,
    /// Write requests allowed at once above `clientQps` (client-go's Burst).
    pub client_burst: u32,
    /// Pods owned by a Job, JobSet, PyTorchJob, ... that name no PodGroup
    /// wait for one inferred from their owner (docs/serve.md, "PodGroups
    /// from owners"); off: each is a job of its own.
    pub infer_pod_groups: bool,
    /// Which placed pods get `status.nominatedNodeName` before their bind
    /// (`gangs`: the members of gangs of two or more pods; `always`;
    /// `never`).
    pub nominate_before_bind: NominateBeforeBind,
    /// Events queued for writing at most; more are dropped and counted
    /// (as client-go's event broadcaster drops them).
    pub event_queue: usize,
    /// Where `/metrics`, `/healthz` and `/readyz` are served
    /// (`host:port`); empty: not served.
    pub http_address: String,
    /// Leader election among replicas ([`crate::leader`]).
    pub leader_election: LeaderElection,
    /// Where the persisted state is kept ([`crate::persist`]).
    pub store: crate::persist::StoreSettings,
}

/// Leader election on a Lease (client-go's defaults).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LeaderElection {
    /// Off: this replica is the leader (one replica only).
    pub enabled: bool,
    pub lease_name: String,
    /// Empty: the `POD_NAMESPACE` environment variable (set by the chart),
    /// else `default`.
    pub lease_namespace: String,
    /// This replica's name in the Lease; empty: `POD_NAME`, else the host
    /// name, with a random suffix.
    pub identity: String,
    /// A holder that has not renewed for this long loses the Lease.
    pub lease_duration_seconds: u64,
    /// The leader stops writing when it could not renew for this long
    /// (shorter than the lease).
    pub renew_deadline_seconds: u64,
    /// How often the Lease is tried or renewed.
    pub retry_period_seconds: u64,
}

impl Default for LeaderElection {
    fn default() -> Self {
        LeaderElection {
            // On by default, as kube-scheduler's `--leader-elect`: two
            // replicas started alike never both write.
            enabled: true,
            lease_name: "trainyard".into(),
            lease_namespace: String::new(),
            identity: String::new(),
            lease_duration_seconds: 15,
            renew_deadline_seconds: 10,
            retry_period_seconds: 2,
        }
    }
}

/// Which placed pods are nominated to their node before they are bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NominateBeforeBind {
    /// Members of gangs of two or more pods: their binds take a while,
    /// and until the last one lands the nodes look half empty.
    #[default]
    Gangs,
    /// Every pod (one more request per bind).
    Always,
    /// None: a bind in flight is held only by the service's assumption.
    Never,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        ServiceSettings {
            scheduler_name: "trainyard".into(),
            default_queue: "default".into(),
            create_default_queue: true,
            cycle_period_millis: 1000,
            debounce_millis: 100,
            bind_concurrency: 16,
            assume_timeout_seconds: 30,
            gang_repair_seconds: 60,
            enforce_walltime: false,
            admission_gating: false,
            client_qps: 5000,
            client_burst: 10000,
            infer_pod_groups: true,
            nominate_before_bind: NominateBeforeBind::Gangs,
            event_queue: 10_000,
            http_address: "0.0.0.0:8080".into(),
            leader_election: LeaderElection::default(),
            store: crate::persist::StoreSettings::default(),
        }
    }
}

/// A settings file that cannot be used: which field, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {field}: {message}")]
pub struct SettingsError {
    pub source_name: String,
    pub field: String,
    pub message: String,
}

impl Settings {
    /// Fills in what the environment decides: the lease's namespace
    /// (empty: the pod's `namespace`, else `default`) and this replica's
    /// identity (empty: the pod's name, else `host`, then `_` and
    /// `suffix`, so two processes of one pod never share a name).
    pub fn with_environment(
        mut self,
        pod: &str,
        namespace: &str,
        host: &str,
        suffix: &str,
    ) -> Settings {
        let le = &mut self.service.leader_election;
        if le.lease_namespace.is_empty() {
            le.lease_namespace = if namespace.is_empty() {
                "default".into()
            } else {
                namespace.into()
            };
        }
        if le.identity.is_empty() {
            let base = if pod.is_empty() { host } else { pod };
            le.identity = format!("{base}_{suffix}");
        }
        self
    }

    /// Reads and checks a settings file (YAML or JSON); `source_name`
    /// names it in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Settings, SettingsError> {
        let err = |field: &str, message: String| SettingsError {
            source_name: source_name.to_string(),
            field: field.to_string(),
            message,
        };
        let value: serde_json::Value = if text.trim().is_empty() {
            serde_json::Value::Object(Default::default())
        } else {
            serde_saphyr::from_str(text).map_err(|e| err("", format!("invalid YAML: {e}")))?
        };
        let settings: Settings = serde_path_to_error::deserialize(&value).map_err(|e| {
            let path = e.path().to_string();
            err(
                if path == "." { "" } else { &path },
                e.into_inner().to_string(),
            )
        })?;
        settings
            .scheduler
            .validate()
            .map_err(|e| err(&format!("scheduler.{}", e.field), e.message))?;
        let s = &settings.service;
        let positive = [
            ("service.cyclePeriodMillis", s.cycle_period_millis),
            ("service.bindConcurrency", s.bind_concurrency as u64),
            ("service.assumeTimeoutSeconds", s.assume_timeout_seconds),
            ("service.clientQps", u64::from(s.client_qps)),
            ("service.clientBurst", u64::from(s.client_burst)),
            ("service.eventQueue", s.event_queue as u64),
        ];
        for (field, v) in positive {
            if v == 0 {
                return Err(err(field, "must be at least 1, found 0".into()));
            }
        }
        if let Some(days) = s.store.retention_days {
            let field = "service.store.retentionDays";
            if !(1..=3660).contains(&days) {
                return Err(err(
                    field,
                    format!("must be from 1 to 3660 days, found {days}"),
                ));
            }
            if let Some(hl) = settings.scheduler.fair_share.usage_half_life_seconds
                && u64::from(days) * 86_400 < 4 * hl
            {
                return Err(err(
                    field,
                    format!(
                        "{days} days is less than four of scheduler.fairShare.usageHalfLifeSeconds ({hl} s): a restart would forget usage that still counts; keep at least {} days",
                        (4 * hl).div_ceil(86_400)
                    ),
                ));
            }
        }
        if let Some(days) = s.store.job_retention_days
            && !(1..=3660).contains(&days)
        {
            return Err(err(
                "service.store.jobRetentionDays",
                format!("must be from 1 to 3660 days, found {days}"),
            ));
        }
        if s.store.checkpoint_seconds > 86_400 {
            return Err(err(
                "service.store.checkpointSeconds",
                format!(
                    "must be from 0 (off) to 86400 s, found {}",
                    s.store.checkpoint_seconds
                ),
            ));
        }
        let name = &s.store.checkpoint_name;
        if s.store.checkpoint_seconds > 0
            && (name.is_empty()
                || name.len() > 253
                || !name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
                || !name.starts_with(|c: char| c.is_ascii_alphanumeric())
                || !name.ends_with(|c: char| c.is_ascii_alphanumeric()))
        {
            return Err(err(
                "service.store.checkpointName",
                format!(
                    "must be a ConfigMap name (lower-case letters, digits, '-' and '.'; starting and ending with a letter or digit), found {name:?}"
                ),
            ));
        }
        let le = &s.leader_election;
        for (field, v) in [
            (
                "service.leaderElection.leaseDurationSeconds",
                le.lease_duration_seconds,
            ),
            (
                "service.leaderElection.renewDeadlineSeconds",
                le.renew_deadline_seconds,
            ),
            (
                "service.leaderElection.retryPeriodSeconds",
                le.retry_period_seconds,
            ),
        ] {
            if v == 0 {
                return Err(err(field, "must be at least 1, found 0".into()));
            }
        }
        if le.renew_deadline_seconds >= le.lease_duration_seconds {
            return Err(err(
                "service.leaderElection.renewDeadlineSeconds",
                format!(
                    "must be shorter than leaseDurationSeconds ({}), found {}: the leader must stop writing before another replica can take the lease",
                    le.lease_duration_seconds, le.renew_deadline_seconds
                ),
            ));
        }
        if le.retry_period_seconds >= le.renew_deadline_seconds {
            return Err(err(
                "service.leaderElection.retryPeriodSeconds",
                format!(
                    "must be shorter than renewDeadlineSeconds ({}), found {}",
                    le.renew_deadline_seconds, le.retry_period_seconds
                ),
            ));
        }
        if le.enabled && le.lease_name.is_empty() {
            return Err(err(
                "service.leaderElection.leaseName",
                "must not be empty".into(),
            ));
        }
        if !s.http_address.is_empty() && s.http_address.parse::<std::net::SocketAddr>().is_err() {
            return Err(err(
                "service.httpAddress",
                format!(
                    "expected host:port such as 0.0.0.0:8080, found {:?}",
                    s.http_address
                ),
            ));
        }
        if s.scheduler_name.is_empty() {
            return Err(err("service.schedulerName", "must not be empty".into()));
        }
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_the_defaults() {
        assert_eq!(Settings::parse("", "s.yaml"), Ok(Settings::default()));
        assert_eq!(Settings::parse("{}", "s.yaml"), Ok(Settings::default()));
    }

    #[test]
    fn fields_are_read_and_bad_ones_named() {
        let s = Settings::parse(
            "service: {cyclePeriodMillis: 250, bindConcurrency: 4}\nscheduler: {reservations: {starvingAfterSeconds: 600}}",
            "s.yaml",
        )
        .expect("valid");
        assert_eq!(s.service.cycle_period_millis, 250);
        assert_eq!(s.service.bind_concurrency, 4);
        assert_eq!(s.scheduler.reservations.starving_after_seconds, 600);

        let e = Settings::parse("service: {cyclePeriodMilis: 5}", "s.yaml").expect_err("typo");
        assert_eq!(e.field, "service.cyclePeriodMilis");
        assert!(e.message.contains("cyclePeriodMilis"), "{e}");
        let e = Settings::parse("service: {bindConcurrency: 0}", "s.yaml").expect_err("zero");
        assert_eq!(
            e.to_string(),
            "s.yaml: service.bindConcurrency: must be at least 1, found 0"
        );
        let e = Settings::parse(
            "service: {leaderElection: {leaseDurationSeconds: 10, renewDeadlineSeconds: 10}}",
            "s.yaml",
        )
        .expect_err("deadline");
        assert_eq!(e.field, "service.leaderElection.renewDeadlineSeconds");
        assert!(
            e.message.contains("shorter than leaseDurationSeconds (10)"),
            "{e}"
        );
        let e = Settings::parse("service: {httpAddress: 'localhost'}", "s.yaml").expect_err("addr");
        assert_eq!(e.field, "service.httpAddress");
        let e = Settings::parse("service: {debounceMillis: soon}", "s.yaml").expect_err("type");
        assert_eq!(e.field, "service.debounceMillis");
        let s = Settings::parse(
            "service: {inferPodGroups: false, defaultQueue: ''}",
            "s.yaml",
        )
        .expect("valid");
        assert!(!s.service.infer_pod_groups);
        assert_eq!(s.service.default_queue, "");
    }

    #[test]
    fn store_retention_is_checked_against_the_half_life() {
        let s = Settings::parse(
            "service: {store: {path: /var/lib/trainyard/state.redb, backend: sled, retentionDays: 90}}",
            "s.yaml",
        )
        .expect("valid");
        assert_eq!(s.service.store.retention_days, Some(90));
        assert_eq!(s.service.store.backend, trainyard_store::Backend::Sled);
        let e = Settings::parse("service: {store: {jobRetentionDays: 0}}", "s.yaml")
            .expect_err("0 days");
        assert_eq!(
            e.to_string(),
            "s.yaml: service.store.jobRetentionDays: must be from 1 to 3660 days, found 0"
        );
        let e = Settings::parse("service: {store: {checkpointName: Bad_Name}}", "s.yaml")
            .expect_err("bad name");
        expect_test::expect![[r#"s.yaml: service.store.checkpointName: must be a ConfigMap name (lower-case letters, digits, '-' and '.'; starting and ending with a letter or digit), found "Bad_Name""#]]
            .assert_eq(&e.to_string());
        let e = Settings::parse("service: {store: {checkpointSeconds: 100000}}", "s.yaml")
            .expect_err("too long");
        assert_eq!(
            e.to_string(),
            "s.yaml: service.store.checkpointSeconds: must be from 0 (off) to 86400 s, found 100000"
        );
        let off = Settings::parse(
            "service: {store: {checkpointSeconds: 0, checkpointName: ''}}",
            "s.yaml",
        )
        .expect("off needs no name");
        assert_eq!(off.service.store.checkpoint_seconds, 0);
        let e = Settings::parse("service: {store: {retentionDays: 0}}", "s.yaml").expect_err("0");
        assert_eq!(
            e.to_string(),
            "s.yaml: service.store.retentionDays: must be from 1 to 3660 days, found 0"
        );
        let e = Settings::parse(
            "scheduler: {fairShare: {usageHalfLifeSeconds: 1209600}}\nservice: {store: {retentionDays: 30}}",
            "s.yaml",
        )
        .expect_err("shorter than four half-lives");
        assert_eq!(
            e.to_string(),
            "s.yaml: service.store.retentionDays: 30 days is less than four of scheduler.fairShare.usageHalfLifeSeconds (1209600 s): a restart would forget usage that still counts; keep at least 56 days"
        );
        let e =
            Settings::parse("service: {store: {backend: rocks}}", "s.yaml").expect_err("engine");
        assert_eq!(e.field, "service.store.backend");
        assert!(e.message.contains("redb"), "{e}");
    }
}
