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
//!   httpAddress: 127.0.0.1:8080 # /metrics, /healthz, /readyz, /usage; 0.0.0.0:8080 for every interface; "" for none
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
    #[serde(deserialize_with = "positive")]
    pub cycle_period_millis: u64,
    /// After a relevant change, a cycle runs this soon (milliseconds),
    /// collecting the changes that arrive meanwhile.
    pub debounce_millis: u64,
    /// Binding requests in flight at once.
    #[serde(deserialize_with = "positive")]
    pub bind_concurrency: usize,
    /// A bind (or eviction) the world has not shown after this long is
    /// forgotten, and its pod is pending again in the next cycle.
    #[serde(deserialize_with = "positive")]
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
    #[serde(deserialize_with = "positive")]
    pub client_qps: u32,
    /// Write requests allowed at once above `clientQps` (client-go's Burst).
    #[serde(deserialize_with = "positive")]
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
    #[serde(deserialize_with = "positive")]
    pub event_queue: usize,
    /// Where `/metrics`, `/healthz`, `/readyz` and `/usage` are served
    /// (`host:port`); empty: not served. The default listens on the
    /// loopback interface only: a pod that Prometheus scrapes and the
    /// kubelet probes sets `0.0.0.0:<port>` (the Helm chart does).
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
    #[serde(deserialize_with = "positive")]
    pub lease_duration_seconds: u64,
    /// The leader stops writing when it could not renew for this long
    /// (shorter than the lease).
    #[serde(deserialize_with = "positive")]
    pub renew_deadline_seconds: u64,
    /// How often the Lease is tried or renewed.
    #[serde(deserialize_with = "positive")]
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

/// Where `/metrics` and the probes are served by default: this machine
/// only, until an all-interfaces address is asked for.
pub const DEFAULT_HTTP_ADDRESS: &str = "127.0.0.1:8080";

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
            http_address: DEFAULT_HTTP_ADDRESS.into(),
            leader_election: LeaderElection::default(),
            store: crate::persist::StoreSettings::default(),
        }
    }
}

/// One problem of a settings file: which field, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.line())]
pub struct SettingsError {
    pub source_name: String,
    /// The field's path (`service.bindConcurrency`); empty: the file as a
    /// whole.
    pub field: String,
    pub message: String,
}

impl SettingsError {
    /// `file: field: message`, as the snapshot and config loaders write
    /// their problems.
    fn line(&self) -> String {
        if self.field.is_empty() {
            format!("{}: {}", self.source_name, self.message)
        } else {
            format!("{}: {}: {}", self.source_name, self.field, self.message)
        }
    }
}

/// Every problem of a settings file (never empty), one per line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct SettingsErrors(pub Vec<SettingsError>);

impl std::fmt::Display for SettingsErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        trainyard_crd::write_lines(f, &self.0)
    }
}

/// Most problems reported for one file.
const MAX_PROBLEMS: usize = 20;

/// A whole number of at least 1 (the error says so, not the range of the
/// Rust type), fitting `T`.
fn positive<'de, D: serde::Deserializer<'de>, T: Whole>(d: D) -> Result<T, D::Error> {
    struct V<T>(std::marker::PhantomData<T>);
    impl<T: Whole> serde::de::Visitor<'_> for V<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            if T::MAX == u64::MAX {
                f.write_str("a positive whole number")
            } else {
                write!(f, "a positive whole number up to {}", T::MAX)
            }
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<T, E> {
            T::from_u64(v)
                .filter(|_| v > 0)
                .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<T, E> {
            match u64::try_from(v) {
                Ok(u) => self.visit_u64(u),
                Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(v), &self)),
            }
        }
    }
    d.deserialize_u64(V(std::marker::PhantomData))
}

/// The unsigned integer types [`positive`] reads into.
trait Whole: Sized {
    const MAX: u64;
    fn from_u64(v: u64) -> Option<Self>;
}

impl Whole for u32 {
    const MAX: u64 = u32::MAX as u64;
    fn from_u64(v: u64) -> Option<Self> {
        u32::try_from(v).ok()
    }
}

impl Whole for u64 {
    const MAX: u64 = u64::MAX;
    fn from_u64(v: u64) -> Option<Self> {
        Some(v)
    }
}

impl Whole for usize {
    // Every target Trainyard builds for has 64-bit pointers.
    const MAX: u64 = usize::MAX as u64;
    fn from_u64(v: u64) -> Option<Self> {
        usize::try_from(v).ok()
    }
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
    /// names it in errors. Reports every problem at once, each with the
    /// field's path and what was expected in the words of the snapshot and
    /// config loaders (`trainyard_crd::de::from_value_all`): the type
    /// problems, then the checks beyond types of the fields that were
    /// readable.
    pub fn parse(text: &str, source_name: &str) -> Result<Settings, SettingsErrors> {
        let at = |field: &str, message: String| SettingsError {
            source_name: source_name.to_string(),
            field: field.to_string(),
            message,
        };
        let source = trainyard_ingest::Source::new(source_name, text);
        let docs = trainyard_ingest::parse_documents(&source)
            .map_err(|e| SettingsErrors(vec![at("", e.message)]))?;
        let mut present = trainyard_ingest::present_documents(docs);
        let value = match present.next() {
            None => serde_json::Value::Object(Default::default()),
            Some((_, value)) => value,
        };
        if let Some((extra, _)) = present.next() {
            return Err(SettingsErrors(vec![at(
                "",
                format!(
                    "document {extra}: expected one settings document per file, found a second one"
                ),
            )]));
        }
        let (settings, mut problems, reported) = match trainyard_crd::de::from_value_all::<Settings>(
            &value,
            MAX_PROBLEMS,
            trainyard_crd::de::plain_message,
        ) {
            Ok(s) => (s, Vec::new(), Vec::new()),
            Err((found, without)) => {
                let reported: Vec<String> = found.iter().map(|(f, _)| f.clone()).collect();
                let problems = found.into_iter().map(|(f, m)| at(&f, m)).collect();
                match without {
                    Some(s) => (s, problems, reported),
                    None => return Err(SettingsErrors(problems)),
                }
            }
        };
        // Checks beyond the types; one that reads a field whose type was
        // wrong (and was left out, so defaulted) is not made.
        for (field, reads, message) in settings.checks() {
            let unread = reads.iter().any(|f| {
                reported
                    .iter()
                    .any(|r| r == f || r.starts_with(&format!("{f}.")))
            });
            if !unread {
                problems.push(at(&field, message));
            }
        }
        if problems.is_empty() {
            Ok(settings)
        } else {
            Err(SettingsErrors(problems))
        }
    }

    /// What is wrong beyond the types: (the field, the fields the check
    /// reads, the message).
    fn checks(&self) -> Vec<(String, Vec<&'static str>, String)> {
        let mut out: Vec<(String, Vec<&'static str>, String)> = Vec::new();
        let mut add = |reads: Vec<&'static str>, message: String| {
            let field = reads.first().map_or(String::new(), |f| f.to_string());
            out.push((field, reads, message));
        };
        let s = &self.service;
        if let Some(days) = s.store.retention_days {
            let field = "service.store.retentionDays";
            if !(1..=3660).contains(&days) {
                add(
                    vec![field],
                    format!("must be from 1 to 3660 days, found {days}"),
                );
            } else if let Some(hl) = self.scheduler.fair_share.usage_half_life_seconds
                && u64::from(days) * 86_400 < 4 * hl
            {
                add(
                    vec![field, "scheduler"],
                    format!(
                        "{days} days is less than four of scheduler.fairShare.usageHalfLifeSeconds ({hl} s): a restart would forget usage that still counts; keep at least {} days",
                        (4 * hl).div_ceil(86_400)
                    ),
                );
            }
        }
        if let Some(days) = s.store.job_retention_days
            && !(1..=3660).contains(&days)
        {
            add(
                vec!["service.store.jobRetentionDays"],
                format!("must be from 1 to 3660 days, found {days}"),
            );
        }
        if s.store.checkpoint_seconds > 86_400 {
            add(
                vec!["service.store.checkpointSeconds"],
                format!(
                    "must be from 0 (off) to 86400 s, found {}",
                    s.store.checkpoint_seconds
                ),
            );
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
            add(
                vec![
                    "service.store.checkpointName",
                    "service.store.checkpointSeconds",
                ],
                format!(
                    "must be a ConfigMap name (lower-case letters, digits, '-' and '.'; starting and ending with a letter or digit), found \"{name}\""
                ),
            );
        }
        let le = &s.leader_election;
        const LEASE: &str = "service.leaderElection.leaseDurationSeconds";
        const RENEW: &str = "service.leaderElection.renewDeadlineSeconds";
        const RETRY: &str = "service.leaderElection.retryPeriodSeconds";
        if le.renew_deadline_seconds >= le.lease_duration_seconds {
            add(
                vec![RENEW, LEASE],
                format!(
                    "must be shorter than leaseDurationSeconds ({}), found {}: the leader must stop writing before another replica can take the lease",
                    le.lease_duration_seconds, le.renew_deadline_seconds
                ),
            );
        }
        if le.retry_period_seconds >= le.renew_deadline_seconds {
            add(
                vec![RETRY, RENEW],
                format!(
                    "must be shorter than renewDeadlineSeconds ({}), found {}",
                    le.renew_deadline_seconds, le.retry_period_seconds
                ),
            );
        }
        if le.enabled && le.lease_name.is_empty() {
            add(
                vec!["service.leaderElection.leaseName"],
                "must not be empty".into(),
            );
        }
        if !s.http_address.is_empty() && s.http_address.parse::<std::net::SocketAddr>().is_err() {
            add(
                vec!["service.httpAddress"],
                format!(
                    "expected host:port such as 127.0.0.1:8080 (this machine only) or 0.0.0.0:8080 (every interface), found \"{}\"",
                    s.http_address
                ),
            );
        }
        if s.scheduler_name.is_empty() {
            add(vec!["service.schedulerName"], "must not be empty".into());
        }
        // The core checks its section as a whole.
        if let Err(e) = self.scheduler.validate() {
            out.push((
                format!("scheduler.{}", e.field),
                vec!["scheduler"],
                e.message,
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one problem of `text`.
    fn one(text: &str) -> SettingsError {
        let mut e = Settings::parse(text, "s.yaml").expect_err("a problem").0;
        assert_eq!(e.len(), 1, "{e:?}");
        e.remove(0)
    }

    #[test]
    fn empty_file_is_the_defaults() {
        assert_eq!(Settings::parse("", "s.yaml"), Ok(Settings::default()));
        assert_eq!(Settings::parse("{}", "s.yaml"), Ok(Settings::default()));
        assert_eq!(
            Settings::parse("# nothing yet\n", "s.yaml"),
            Ok(Settings::default())
        );
        assert_eq!(
            Settings::default().service.http_address,
            "127.0.0.1:8080",
            "loopback unless every interface is asked for"
        );
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

        let e = one("service: {cyclePeriodMilis: 5}");
        assert_eq!(e.field, "service.cyclePeriodMilis");
        assert!(e.message.contains("cyclePeriodMilis"), "{e}");
        assert_eq!(
            one("service: {bindConcurrency: 0}").to_string(),
            "s.yaml: service.bindConcurrency: expected a positive whole number, found 0"
        );
        assert_eq!(
            one("service: {clientQps: 5000000000}").to_string(),
            "s.yaml: service.clientQps: expected a positive whole number up to 4294967295, found 5000000000"
        );
        let e =
            one("service: {leaderElection: {leaseDurationSeconds: 10, renewDeadlineSeconds: 10}}");
        assert_eq!(e.field, "service.leaderElection.renewDeadlineSeconds");
        assert!(
            e.message.contains("shorter than leaseDurationSeconds (10)"),
            "{e}"
        );
        assert_eq!(
            one("service: {httpAddress: 'localhost'}").to_string(),
            "s.yaml: service.httpAddress: expected host:port such as 127.0.0.1:8080 (this machine only) or 0.0.0.0:8080 (every interface), found \"localhost\""
        );
        assert_eq!(
            one("service: {debounceMillis: soon}").field,
            "service.debounceMillis"
        );
        let s = Settings::parse(
            "service: {inferPodGroups: false, defaultQueue: ''}",
            "s.yaml",
        )
        .expect("valid");
        assert!(!s.service.infer_pod_groups);
        assert_eq!(s.service.default_queue, "");
    }

    #[test]
    fn every_problem_of_a_file_is_reported_at_once_in_the_loaders_words() {
        // Three mistakes, three lines: no serde wording (`invalid type:
        // string "many", expected usize`), no Rust type names.
        let text =
            "service:\n  bindConcurrency: many\n  cyclePeriodMillis: -5\n  enforceWalltime: yes\n";
        expect_test::expect![[r#"
            s.yaml: service.bindConcurrency: expected a positive whole number, found "many"
            s.yaml: service.cyclePeriodMillis: expected a positive whole number, found -5
            s.yaml: service.enforceWalltime: expected true or false, found "yes""#]]
        .assert_eq(
            &Settings::parse(text, "s.yaml")
                .expect_err("three")
                .to_string(),
        );
        // Type problems in both sections, an unknown field, and checks
        // beyond types of the fields that could be read; a check that
        // reads a field whose type was wrong is not made.
        let text = "scheduler:\n  scoring: {gpu: {strategy: pack, weight: 1}}\nservice:\n  schedulr: x\n  store: {jobRetentionDays: 0, checkpointSeconds: often}\n  leaderElection: {leaseDurationSeconds: long, renewDeadlineSeconds: 20}\n  httpAddress: localhost\n";
        expect_test::expect![[r#"
            s.yaml: scheduler.scoring.gpu.strategy: unknown variant `pack`, expected one of `binpack`, `spread`, `random`, `dotProd`, `clustering`, `packing`, `bestFit`, `fgd`, `trainyard`
            s.yaml: service.leaderElection.leaseDurationSeconds: expected a positive whole number, found "long"
            s.yaml: service.schedulr: unknown field `schedulr`, expected one of `schedulerName`, `defaultQueue`, `createDefaultQueue`, `cyclePeriodMillis`, `debounceMillis`, `bindConcurrency`, `assumeTimeoutSeconds`, `gangRepairSeconds`, `enforceWalltime`, `admissionGating`, `clientQps`, `clientBurst`, `inferPodGroups`, `nominateBeforeBind`, `eventQueue`, `httpAddress`, `leaderElection`, `store`
            s.yaml: service.store.checkpointSeconds: expected a whole number from 0 to 18446744073709551615, found "often"
            s.yaml: service.store.jobRetentionDays: must be from 1 to 3660 days, found 0
            s.yaml: service.httpAddress: expected host:port such as 127.0.0.1:8080 (this machine only) or 0.0.0.0:8080 (every interface), found "localhost""#]]
        .assert_eq(&Settings::parse(text, "s.yaml").expect_err("several").to_string());
        // YAML that does not parse, and a second document.
        expect_test::expect![[
            r#"s.yaml: invalid YAML: unclosed bracket '{' at line 1, column 10"#
        ]]
        .assert_eq(
            &Settings::parse("service: {", "s.yaml")
                .expect_err("syntax")
                .to_string(),
        );
        expect_test::expect![[
            r#"s.yaml: document 2: expected one settings document per file, found a second one"#
        ]]
        .assert_eq(
            &Settings::parse("service: {}\n---\nservice: {}\n", "s.yaml")
                .expect_err("two")
                .to_string(),
        );
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
        assert_eq!(
            one("service: {store: {jobRetentionDays: 0}}").to_string(),
            "s.yaml: service.store.jobRetentionDays: must be from 1 to 3660 days, found 0"
        );
        expect_test::expect![[r#"s.yaml: service.store.checkpointName: must be a ConfigMap name (lower-case letters, digits, '-' and '.'; starting and ending with a letter or digit), found "Bad_Name""#]]
            .assert_eq(&one("service: {store: {checkpointName: Bad_Name}}").to_string());
        assert_eq!(
            one("service: {store: {checkpointSeconds: 100000}}").to_string(),
            "s.yaml: service.store.checkpointSeconds: must be from 0 (off) to 86400 s, found 100000"
        );
        let off = Settings::parse(
            "service: {store: {checkpointSeconds: 0, checkpointName: ''}}",
            "s.yaml",
        )
        .expect("off needs no name");
        assert_eq!(off.service.store.checkpoint_seconds, 0);
        assert_eq!(
            one("service: {store: {retentionDays: 0}}").to_string(),
            "s.yaml: service.store.retentionDays: must be from 1 to 3660 days, found 0"
        );
        assert_eq!(
            one("scheduler: {fairShare: {usageHalfLifeSeconds: 1209600}}\nservice: {store: {retentionDays: 30}}").to_string(),
            "s.yaml: service.store.retentionDays: 30 days is less than four of scheduler.fairShare.usageHalfLifeSeconds (1209600 s): a restart would forget usage that still counts; keep at least 56 days"
        );
        let e = one("service: {store: {backend: rocks}}");
        assert_eq!(e.field, "service.store.backend");
        assert!(e.message.contains("redb"), "{e}");
    }
}
