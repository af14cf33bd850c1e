//! The metrics table of docs/operations.md against the exposition, and
//! the exposition with a series of every family (`populated`), which the
//! dashboard and alert checks read too.

use super::*;
use trainyard_serve::metrics::{
    EvictionLabels, Metrics, PhaseLabels, QueueLabels, QueueResourceLabels, ReasonLabels,
    RequestCodeLabels, RequestLabels, ResultLabels, UsageLabels,
};

/// The rows of docs/operations.md's metrics table: name -> (type, labels).
fn documented_metrics() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let doc = read(&root().join("docs/operations.md"));
    let start = doc
        .find("\n## Metrics\n")
        .expect("docs/operations.md has ## Metrics");
    let rest = &doc[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    let tick = Regex::new(r"`([^`]+)`").expect("regex");
    let mut out = BTreeMap::new();
    for line in rest[..end]
        .lines()
        .filter(|l| l.trim_start().starts_with('|'))
    {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        let Some(name) = cells.first().and_then(|c| tick.captures(c)) else {
            continue;
        };
        let name = name[1].to_string();
        if !name.starts_with("trainyard_") {
            continue;
        }
        assert!(
            cells.len() >= 4,
            "metrics table row {line:?}: name, type, labels, meaning"
        );
        let labels = tick
            .captures_iter(cells[2])
            .map(|c| c[1].to_string())
            .collect();
        let prev = out.insert(name.clone(), (cells[1].trim().to_string(), labels));
        assert!(prev.is_none(), "{name} twice in the metrics table");
    }
    out
}

/// Every family with a series each (the label sets the service uses), so
/// that the exposition shows their label names.
pub(super) fn populated() -> Metrics {
    let m = Metrics::new();
    m.cycle_duration
        .get_or_create(&PhaseLabels { phase: "total" })
        .observe(0.1);
    m.bind_failures
        .get_or_create(&ReasonLabels {
            reason: "conflict".into(),
        })
        .inc();
    m.evictions
        .get_or_create(&EvictionLabels {
            kind: "reclaim",
            reason: "evicted".into(),
        })
        .inc();
    m.pending_gangs
        .get_or_create(&ReasonLabels {
            reason: "Unschedulable".into(),
        })
        .set(1);
    let qr = QueueResourceLabels {
        queue: "team".into(),
        resource: "nvidia.com/gpu".into(),
        unit: "device",
    };
    for f in [
        &m.queue_quota,
        &m.queue_fair_share,
        &m.queue_allocated,
        &m.queue_demand,
    ] {
        f.get_or_create(&qr).set(1.0);
    }
    m.queue_oldest_pending
        .get_or_create(&QueueLabels {
            queue: "team".into(),
        })
        .set(1);
    for f in [
        &m.queue_observed_runtimes,
        &m.queue_reserved_gangs,
        &m.queue_invalid,
    ] {
        f.get_or_create(&QueueLabels {
            queue: "team".into(),
        })
        .set(1);
    }
    m.api_duration
        .get_or_create(&RequestLabels {
            verb: "create".into(),
            resource: "pods/binding".into(),
        })
        .observe(0.01);
    m.api_requests
        .get_or_create(&RequestCodeLabels {
            verb: "create".into(),
            resource: "pods/binding".into(),
            code: "201".into(),
        })
        .inc();
    m.config_reloads
        .get_or_create(&ResultLabels { result: "ok" })
        .inc();
    m.usage
        .get_or_create(&UsageLabels {
            queue: "team".into(),
            namespace: "ns".into(),
            resource: "nvidia.com/gpu".into(),
            unit: "device",
        })
        .inc_by(3600.0);
    m
}

/// Label names per family in `text` (`le` of histogram buckets left out).
fn exported_labels(
    text: &str,
    selectable: &BTreeMap<String, String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let re = Regex::new(r#"([A-Za-z_][A-Za-z0-9_]*)="(?:[^"\\]|\\.)*""#).expect("regex");
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = line.split(['{', ' ']).next().unwrap_or("");
        let family = selectable
            .get(name)
            .unwrap_or_else(|| panic!("sample {name} of no family"));
        let labels = out.entry(family.clone()).or_default();
        if let Some((_, rest)) = line.split_once('{') {
            for c in re.captures_iter(rest) {
                if &c[1] != "le" {
                    labels.insert(c[1].to_string());
                }
            }
        }
    }
    out
}

#[test]
fn metrics_table_in_the_docs_is_the_exported_families() {
    let fams = families();
    let sel = selectable(&fams);
    let labels = exported_labels(&populated().prometheus_text(), &sel);
    let exported: BTreeMap<String, (String, BTreeSet<String>)> = fams
        .iter()
        .map(|(name, kind)| {
            let l = labels.get(name).cloned().unwrap_or_else(|| {
                panic!("{name} has no series in populated(): give it one so its labels show")
            });
            (name.clone(), (kind.clone(), l))
        })
        .collect();
    assert_eq!(
        documented_metrics(),
        exported,
        "docs/operations.md's metrics table (left: name -> (type, labels)) and the service's exposition (right) differ"
    );
}
