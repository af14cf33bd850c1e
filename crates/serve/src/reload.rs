//! Settings read again while the service runs (a ConfigMap update): the
//! file is read every few seconds; when its text changed, it is parsed and
//! checked as at start ([`Settings::parse`]). Valid settings go to the
//! service ([`crate::Options::reload`]); invalid ones are refused, the
//! running settings stay, and the refusal is logged, counted
//! (`trainyard_config_reloads_total{result="invalid"}`) and recorded as a
//! Warning Event on the scheduler's own pod (from `POD_NAMESPACE` and
//! `POD_NAME`, when set).
//!
//! What a reload changes at once: the whole `scheduler:` section, and of
//! `service:` the cycle period, debounce, assume timeout, gang repair
//! time, admission gating and bind concurrency of status writes. The rest
//! (client QPS, the writer's concurrency, the HTTP address, leader
//! election, scheduler name, default queue, inference) is read at start
//! only; a change to it is logged as needing a restart.

use std::path::PathBuf;
use std::sync::Arc;

use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Duration;

use crate::metrics::{Metrics, ResultLabels};
use crate::settings::{ServiceSettings, Settings, SettingsErrors};

/// The service settings that take effect only at the next start and
/// differ between `old` and `new`, by their YAML names.
pub fn needs_restart(old: &ServiceSettings, new: &ServiceSettings) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut check = |name, changed: bool| {
        if changed {
            out.push(name);
        }
    };
    check("schedulerName", old.scheduler_name != new.scheduler_name);
    check("defaultQueue", old.default_queue != new.default_queue);
    check(
        "createDefaultQueue",
        old.create_default_queue != new.create_default_queue,
    );
    check("clientQps", old.client_qps != new.client_qps);
    check("clientBurst", old.client_burst != new.client_burst);
    check(
        "inferPodGroups",
        old.infer_pod_groups != new.infer_pod_groups,
    );
    check(
        "nominateBeforeBind",
        old.nominate_before_bind != new.nominate_before_bind,
    );
    check("eventQueue", old.event_queue != new.event_queue);
    check("httpAddress", old.http_address != new.http_address);
    check("leaderElection", old.leader_election != new.leader_election);
    check("store", old.store != new.store);
    out
}

/// `old` with the fields a reload changes at once taken from `new`.
pub fn apply(old: &ServiceSettings, new: &ServiceSettings) -> ServiceSettings {
    ServiceSettings {
        cycle_period_millis: new.cycle_period_millis,
        debounce_millis: new.debounce_millis,
        assume_timeout_seconds: new.assume_timeout_seconds,
        gang_repair_seconds: new.gang_repair_seconds,
        enforce_walltime: new.enforce_walltime,
        admission_gating: new.admission_gating,
        bind_concurrency: new.bind_concurrency,
        ..old.clone()
    }
}

/// Where the scheduler runs: its own pod, for the Events about itself (a
/// refused reload, a store moved aside).
#[derive(Clone, Debug, Default)]
pub struct Own {
    pub namespace: String,
    pub pod: String,
}

/// Watches `path` (first read as `text`) every `every`, sending valid new
/// settings on `tx`, until every receiver is gone.
pub async fn watch_file(
    path: PathBuf,
    mut text: String,
    every: Duration,
    tx: watch::Sender<Settings>,
    metrics: Arc<Metrics>,
    client: Option<(Client, Own)>,
) {
    let name = path.display().to_string();
    loop {
        tokio::time::sleep(every).await;
        if tx.is_closed() {
            return;
        }
        let now = match tokio::fs::read_to_string(&path).await {
            Ok(t) => t,
            Err(e) => {
                // A ConfigMap volume swaps a symlink; a read in between
                // can fail. Tried again at the next turn.
                tracing::debug!("{name}: {e}");
                continue;
            }
        };
        if now == text {
            continue;
        }
        text = now;
        match Settings::parse(&text, &name) {
            Ok(s) => {
                metrics
                    .config_reloads
                    .get_or_create(&ResultLabels { result: "ok" })
                    .inc();
                tracing::info!("{name} changed: reloading");
                tx.send_replace(s);
            }
            Err(e) => {
                metrics
                    .config_reloads
                    .get_or_create(&ResultLabels { result: "invalid" })
                    .inc();
                let message = refusal(&e);
                tracing::error!("{message}");
                if let Some((client, own)) = &client {
                    own_event(client, own, "ConfigRejected", &message).await;
                }
            }
        }
    }
}

/// What a refused reload says (its log line and its `ConfigRejected`
/// Event): every problem of the file, as at start.
pub fn refusal(e: &SettingsErrors) -> String {
    match e.0.len() {
        1 => format!("{e}; the running settings stay"),
        n => format!("{n} problems; the running settings stay:\n{e}"),
    }
}

/// A Warning Event `reason` on the scheduler's own pod; nothing when the
/// pod is not known (`POD_NAME`, `POD_NAMESPACE` unset). A failure is
/// logged, never fatal: the log and the metrics say it too.
pub async fn own_event(client: &Client, own: &Own, reason: &str, message: &str) {
    if own.pod.is_empty() || own.namespace.is_empty() {
        return;
    }
    let at = crate::report::rfc3339(crate::wall_clock());
    let event = json!({
        "metadata": {"generateName": format!("{}.", own.pod), "namespace": own.namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": own.pod,
                           "namespace": own.namespace},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": {"component": crate::events::COMPONENT},
        "reportingComponent": crate::events::COMPONENT,
        "firstTimestamp": at, "lastTimestamp": at, "count": 1
    });
    let Ok(event) = serde_json::from_value::<k8s_openapi::api::core::v1::Event>(event) else {
        return;
    };
    let api: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(client.clone(), &own.namespace);
    if let Err(e) = api.create(&PostParams::default(), &event).await {
        tracing::warn!("{reason} Event: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_reload_names_every_problem() {
        let e = Settings::parse(
            "service:\n  bindConcurrency: many\n  debounceMillis: soon\n  admissionGating: maybe\n",
            "config.yaml",
        )
        .expect_err("three problems");
        expect_test::expect![[r#"
            3 problems; the running settings stay:
            config.yaml: service.admissionGating: expected true or false, found "maybe"
            config.yaml: service.bindConcurrency: expected a positive whole number, found "many"
            config.yaml: service.debounceMillis: expected a whole number from 0 to 18446744073709551615, found "soon""#]]
        .assert_eq(&refusal(&e));
        let e = Settings::parse("service: {cyclePeriodMillis: 0}", "config.yaml")
            .expect_err("one problem");
        assert_eq!(
            refusal(&e),
            "config.yaml: service.cyclePeriodMillis: expected a positive whole number, found 0; the running settings stay"
        );
    }

    #[test]
    fn what_a_reload_changes_and_what_waits_for_a_restart() {
        let old = ServiceSettings::default();
        let mut new = old.clone();
        new.cycle_period_millis = 250;
        new.client_qps = 10;
        new.leader_election.lease_name = "other".into();
        assert_eq!(needs_restart(&old, &new), ["clientQps", "leaderElection"]);
        let live = apply(&old, &new);
        assert_eq!(live.cycle_period_millis, 250);
        assert_eq!(live.client_qps, old.client_qps);
        assert_eq!(live.leader_election, old.leader_election);
    }
}
