//! The monitoring artefacts against what the scheduler really exports:
//!
//! - every PromQL expression of the Grafana dashboard
//!   (`deploy/grafana/trainyard-dashboard.json`) and of the alerts
//!   (`deploy/prometheus/trainyard-rules.yaml`) names only metrics the
//!   service exports, taken from its own exposition
//!   (`trainyard_serve::metrics::Metrics::new().prometheus_text()`: the
//!   `# TYPE` lines, with `_bucket`, `_sum`, `_count` for histograms), and
//!   the dashboard shows every exported family;
//! - the alerts pass `promtool check rules` (the PrometheusRule's `spec`
//!   extracted into a plain rules file) and their unit tests
//!   (`promtool test rules deploy/prometheus/trainyard-rules.test.yaml`),
//!   and the dashboard's queries parse (as recording rules for promtool);
//! - each alert has a summary, a description and a `runbook_url` whose
//!   anchor is a runbook section of docs/operations.md;
//! - the PrometheusRule is the chart's (`prometheusRule.enabled`), rendered
//!   from the one rules file `deploy/helm/trainyard/files/prometheus-rules.yaml`;
//! - the metrics table of docs/operations.md lists exactly the exported
//!   families, with their types and labels.
//!
//! Without promtool or Python's Helm library the tests that need them
//! print `SKIPPED: ...` and return; with `TRAINYARD_REQUIRE_TOOLS` set they
//! fail instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use regex::Regex;
use serde_json::Value;

// ---------------------------------------------------------------- paths, tools

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the workspace root")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Prints why a test does not run, or fails when tools are required.
fn skip(reason: &str) {
    assert!(
        std::env::var_os("TRAINYARD_REQUIRE_TOOLS").is_none(),
        "TRAINYARD_REQUIRE_TOOLS is set but {reason}"
    );
    println!("SKIPPED: {reason}");
    eprintln!("SKIPPED: {reason}");
}

/// `promtool` if it runs (on PATH, or in the user bin dir
/// scripts/install-test-tools.sh fills); else prints why the caller skips.
fn promtool_or_skip(test: &str) -> Option<PathBuf> {
    let mut candidates = vec![PathBuf::from("promtool")];
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(home).join(".local/bin/promtool"));
    }
    let found = candidates.into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        skip(&format!(
            "promtool not found ({test}; install it with scripts/install-test-tools.sh, which unpacks Debian's prometheus package)"
        ));
    }
    found
}

/// Whether Python can import the Helm library; prints SKIPPED when not.
fn helm_or_skip(test: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import helm_python"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip(&format!(
            "helm-python-sdk not found (python3 cannot import helm_python; {test}; install it with scripts/install-test-tools.sh)"
        ));
    }
    ok
}

/// A fresh scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!(
            "trainyard-observability-{}-{tag}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("scratch dir");
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------- exports

/// The families registered in crates/serve/src/metrics.rs (its
/// `.register("name", ...)` calls), with the registry's prefix.
fn registered() -> BTreeSet<String> {
    let src = read(&root().join("crates/serve/src/metrics.rs"));
    let re = Regex::new(r#"\.register\(\s*"([a-z0-9_]+)""#).expect("regex");
    re.captures_iter(&src)
        .map(|c| format!("trainyard_{}", &c[1]))
        .collect()
}

/// The exported families of the Prometheus text format: name -> type,
/// from the service's exposition with a series in every family
/// ([`populated`]; a family with labels shows only once it has one).
fn families() -> BTreeMap<String, String> {
    let text = populated().prometheus_text();
    let families: BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
    // Every registered family is there (counters as `_total`), and no other.
    let shown: BTreeSet<String> = families
        .iter()
        .map(|(n, t)| match (t.as_str(), n.strip_suffix("_total")) {
            ("counter", Some(base)) => base.to_string(),
            _ => n.clone(),
        })
        .collect();
    let registered = registered();
    assert!(registered.len() >= 10, "{registered:?}");
    assert_eq!(
        shown, registered,
        "the exposition of populated() (left) lacks families registered in crates/serve/src/metrics.rs (right): give each a series in populated()"
    );
    families
}

/// The names a query may select: a counter's or gauge's name, a
/// histogram's `_bucket`, `_sum` and `_count` series; each with its family.
fn selectable(families: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, kind) in families {
        match kind.as_str() {
            "histogram" => {
                for s in ["_bucket", "_sum", "_count"] {
                    out.insert(format!("{name}{s}"), name.clone());
                }
            }
            "summary" => {
                out.insert(name.clone(), name.clone());
                for s in ["_sum", "_count"] {
                    out.insert(format!("{name}{s}"), name.clone());
                }
            }
            _ => {
                out.insert(name.clone(), name.clone());
            }
        }
    }
    out
}

/// The `trainyard_...` metric names a PromQL expression selects.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let re = Regex::new(r"(?:^|[^A-Za-z0-9_:])(trainyard_[A-Za-z0-9_:]*)").expect("regex");
    re.captures_iter(expr).map(|c| c[1].to_string()).collect()
}

/// Problems with `exprs` (what names each): names not exported, or no
/// Trainyard metric at all. Returns the families used.
fn check_names(
    exprs: &[(String, String)],
    selectable: &BTreeMap<String, String>,
    problems: &mut Vec<String>,
) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for (what, expr) in exprs {
        let names = metric_names(expr);
        if names.is_empty() {
            problems.push(format!("{what}: names no trainyard_ metric: {expr}"));
        }
        for n in names {
            match selectable.get(&n) {
                Some(family) => {
                    used.insert(family.clone());
                }
                None => problems.push(format!("{what}: {n} is not exported: {expr}")),
            }
        }
    }
    used
}

#[test]
fn the_name_check_catches_a_misspelt_or_bare_histogram_name() {
    let sel = selectable(&families());
    let mut problems = Vec::new();
    let exprs = [
        (
            "misspelt".to_string(),
            "sum(rate(trainyard_bind_total[5m]))".to_string(),
        ),
        (
            "bare histogram".to_string(),
            "rate(trainyard_cycle_duration_seconds[5m])".to_string(),
        ),
        ("none".to_string(), "up == 0".to_string()),
        (
            "fine".to_string(),
            "sum by (le) (rate(trainyard_cycle_duration_seconds_bucket[5m])) and trainyard_leader"
                .to_string(),
        ),
    ];
    let used = check_names(&exprs, &sel, &mut problems);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("trainyard_bind_total is not exported"));
    assert!(problems[1].contains("trainyard_cycle_duration_seconds is not exported"));
    assert!(problems[2].contains("names no trainyard_ metric"));
    assert_eq!(
        used,
        BTreeSet::from([
            "trainyard_cycle_duration_seconds".to_string(),
            "trainyard_leader".to_string()
        ])
    );
}

// ---------------------------------------------------------------- dashboard

fn dashboard() -> Value {
    let path = root().join("deploy/grafana/trainyard-dashboard.json");
    serde_json::from_str(&read(&path)).expect("the dashboard is JSON")
}

/// Every panel, rows' nested panels included.
fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        out.push(p);
        for inner in p["panels"].as_array().into_iter().flatten() {
            out.push(inner);
        }
    }
    out
}

/// (where, expression) of every query of the dashboard: panel targets and
/// query variables.
fn dashboard_queries(d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("panel {:?}: a target without expr: {t}", p["title"]));
            out.push((
                format!(
                    "panel {} {:?} {}",
                    p["id"],
                    p["title"].as_str().unwrap_or(""),
                    t["refId"].as_str().unwrap_or("")
                ),
                expr.to_string(),
            ));
        }
    }
    for v in d["templating"]["list"].as_array().expect("templating") {
        if v["type"] == "query" {
            let q = v["query"]["query"]
                .as_str()
                .or(v["query"].as_str())
                .expect("a query variable's query");
            out.push((format!("variable {}", v["name"]), q.to_string()));
        }
    }
    out
}

#[test]
fn dashboard_queries_name_only_exported_metrics_and_show_every_family() {
    let d = dashboard();
    let fams = families();
    let queries = dashboard_queries(&d);
    assert!(queries.len() >= 15, "{} queries", queries.len());
    let mut problems = Vec::new();
    let used = check_names(&queries, &selectable(&fams), &mut problems);
    for f in fams.keys() {
        if !used.contains(f) {
            problems.push(format!("{f} is exported but on no panel"));
        }
    }
    assert!(
        problems.is_empty(),
        "deploy/grafana/trainyard-dashboard.json:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn dashboard_is_importable_with_a_datasource_variable() {
    let d = dashboard();
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(d["uid"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(d["schemaVersion"].as_u64().is_some());
    assert!(d.get("id").is_none_or(Value::is_null), "no instance id");
    let vars = d["templating"]["list"].as_array().expect("variables");
    let ds: Vec<&Value> = vars.iter().filter(|v| v["type"] == "datasource").collect();
    assert_eq!(ds.len(), 1, "one datasource variable");
    assert_eq!(ds[0]["query"], "prometheus");
    let name = ds[0]["name"].as_str().expect("its name");
    let uid = format!("${{{name}}}");
    let mut ids = BTreeSet::new();
    let mut problems = Vec::new();
    for p in panels(&d) {
        let title = p["title"].as_str().unwrap_or("");
        if !ids.insert(p["id"].as_u64().expect("a panel id")) {
            problems.push(format!("{title}: id {} twice", p["id"]));
        }
        let g = &p["gridPos"];
        let (x, w) = (g["x"].as_u64(), g["w"].as_u64());
        if !matches!((x, w), (Some(x), Some(w)) if x + w <= 24 && w > 0)
            || g["h"].as_u64().is_none()
        {
            problems.push(format!("{title}: gridPos {g}"));
        }
        if p["type"] == "row" {
            continue;
        }
        if p["datasource"]["uid"] != uid.as_str() {
            problems.push(format!("{title}: datasource {}", p["datasource"]));
        }
        let targets = p["targets"].as_array().map_or(&[][..], Vec::as_slice);
        if targets.is_empty() {
            problems.push(format!("{title}: no query"));
        }
        for t in targets {
            if t["datasource"]["uid"] != uid.as_str() {
                problems.push(format!("{title}: target datasource {}", t["datasource"]));
            }
        }
    }
    for v in vars.iter().filter(|v| v["type"] == "query") {
        if v["datasource"]["uid"] != uid.as_str() {
            problems.push(format!(
                "variable {}: datasource {}",
                v["name"], v["datasource"]
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The dashboard's queries with Grafana's variables given values, as
/// recording rules: promtool parses them.
fn dashboard_as_rules(d: &Value) -> String {
    let mut rules = Vec::new();
    for (i, (what, expr)) in dashboard_queries(d).iter().enumerate() {
        if what.starts_with("variable") {
            continue; // label_values(...) is Grafana's, not PromQL
        }
        let expr = expr
            .replace("$__rate_interval", "5m")
            .replace("$__interval", "1m")
            .replace("$queue", ".*");
        assert!(!expr.contains('$'), "{what}: a variable left in {expr}");
        rules.push(serde_json::json!({"record": format!("dashboard:query_{i}"), "expr": expr}));
    }
    serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]}).to_string()
}

// ---------------------------------------------------------------- alerts

const RULE_FILE: &str = "deploy/prometheus/trainyard-rules.yaml";
const CHART_RULES: &str = "deploy/helm/trainyard/files/prometheus-rules.yaml";
const RULE_TESTS: &str = "deploy/prometheus/trainyard-rules.test.yaml";

/// The committed PrometheusRule.
fn prometheus_rule() -> Value {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&read(&root().join(RULE_FILE))).expect("YAML");
    let docs: Vec<Value> = docs.into_iter().filter(Value::is_object).collect();
    assert_eq!(docs.len(), 1, "{RULE_FILE}: one object");
    let rule = docs.into_iter().next().expect("one");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["kind"], "PrometheusRule");
    rule
}

fn rules(spec: &Value) -> Vec<&Value> {
    spec["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules").iter())
        .collect()
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces
/// as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of the `###` headings under docs/operations.md's
/// `## Runbook`.
fn runbook_anchors() -> BTreeSet<String> {
    let doc = read(&root().join("docs/operations.md"));
    let start = doc
        .find("\n## Runbook\n")
        .expect("docs/operations.md has ## Runbook");
    let rest = &doc[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end]
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(anchor)
        .collect()
}

/// The repository's address (Cargo.toml's workspace `repository`).
fn repository() -> String {
    let cargo = read(&root().join("Cargo.toml"));
    let re = Regex::new(r#"(?m)^repository\s*=\s*"([^"]+)""#).expect("regex");
    re.captures(&cargo).expect("Cargo.toml repository")[1].to_string()
}

#[test]
fn alert_rules_name_exported_metrics_and_link_their_runbook_sections() {
    let rule = prometheus_rule();
    let fams = families();
    let sel = selectable(&fams);
    let all = rules(&rule["spec"]);
    let exprs: Vec<(String, String)> = all
        .iter()
        .map(|r| {
            (
                format!("alert {}", r["alert"].as_str().unwrap_or("?")),
                r["expr"].as_str().expect("expr").to_string(),
            )
        })
        .collect();
    let mut problems = Vec::new();
    check_names(&exprs, &sel, &mut problems);
    let alerts: BTreeSet<&str> = all.iter().filter_map(|r| r["alert"].as_str()).collect();
    for want in [
        "TrainyardQueueStarving",
        "TrainyardBindFailures",
        "TrainyardNoLeader",
        "TrainyardLeaderFlapping",
        "TrainyardCycleSlow",
        "TrainyardEventsDropped",
        "TrainyardConfigReloadRejected",
        "TrainyardJobsPastWalltime",
    ] {
        if !alerts.contains(want) {
            problems.push(format!("no alert {want}"));
        }
    }
    let anchors = runbook_anchors();
    let prefix = format!("{}/blob/main/docs/operations.md#", repository());
    for r in &all {
        let name = r["alert"].as_str().unwrap_or("?");
        if !matches!(
            r["labels"]["severity"].as_str(),
            Some("critical" | "warning" | "info")
        ) {
            problems.push(format!("{name}: severity {}", r["labels"]["severity"]));
        }
        for a in ["summary", "description", "runbook_url"] {
            if r["annotations"][a].as_str().is_none_or(str::is_empty) {
                problems.push(format!("{name}: no {a}"));
            }
        }
        let url = r["annotations"]["runbook_url"].as_str().unwrap_or("");
        match url.strip_prefix(&prefix) {
            Some(a) if anchors.contains(a) => {}
            Some(a) => problems.push(format!(
                "{name}: runbook anchor #{a} is no ### heading under docs/operations.md's ## Runbook ({anchors:?})"
            )),
            None => problems.push(format!("{name}: runbook_url {url} does not start with {prefix}")),
        }
    }
    assert!(
        problems.is_empty(),
        "{RULE_FILE}:\n  {}",
        problems.join("\n  ")
    );

    // One source: the PrometheusRule's spec is the chart's rules file.
    let chart: Value = serde_saphyr::from_str(&read(&root().join(CHART_RULES))).expect("YAML");
    assert_eq!(
        rule["spec"], chart,
        "{RULE_FILE}'s spec differs from {CHART_RULES}; regenerate with: python3 deploy/helm/test/render.py prometheus-rule --out deploy/prometheus"
    );
}

/// `promtool ARGS...` in `dir`.
fn promtool(promtool: &Path, dir: &Path, args: &[&str]) -> Output {
    Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool runs")
}

#[test]
fn alert_rules_and_dashboard_queries_pass_promtool_and_the_alert_unit_tests() {
    let Some(tool) = promtool_or_skip("alert_rules_and_dashboard_queries_pass_promtool") else {
        return;
    };
    let scratch = Scratch::new("promtool");
    let dir = &scratch.0;
    // The PrometheusRule's spec as a plain rules file.
    let rule = prometheus_rule();
    let n = rules(&rule["spec"]).len();
    std::fs::write(dir.join("rules.yaml"), rule["spec"].to_string()).expect("written");
    let out = promtool(&tool, dir, &["check", "rules", "rules.yaml"]);
    assert!(
        out.status.success() && text(&out).contains(&format!("SUCCESS: {n} rules found")),
        "promtool check rules:\n{}",
        text(&out)
    );

    // The dashboard's queries parse.
    let d = dashboard();
    std::fs::write(dir.join("dashboard.yaml"), dashboard_as_rules(&d)).expect("written");
    let out = promtool(&tool, dir, &["check", "rules", "dashboard.yaml"]);
    assert!(
        out.status.success(),
        "the dashboard's queries as recording rules:\n{}",
        text(&out)
    );

    // The unit tests, as committed (against the chart's rules file) and
    // against the extracted spec; they cover the starving queue and the
    // missing leader.
    let tests = read(&root().join(RULE_TESTS));
    for alert in ["TrainyardQueueStarving", "TrainyardNoLeader"] {
        assert!(
            tests.contains(&format!(
                "alertname: {alert}\n        exp_alerts:\n          - exp_labels"
            )),
            "{RULE_TESTS} expects no firing {alert}"
        );
    }
    let out = promtool(&tool, &root(), &["test", "rules", RULE_TESTS]);
    assert!(
        out.status.success() && text(&out).contains("SUCCESS"),
        "promtool test rules {RULE_TESTS}:\n{}",
        text(&out)
    );
    let local = tests.replace(
        "../helm/trainyard/files/prometheus-rules.yaml",
        "rules.yaml",
    );
    assert_ne!(local, tests, "{RULE_TESTS} names the chart's rules file");
    std::fs::write(dir.join("tests.yaml"), &local).expect("written");
    let out = promtool(&tool, dir, &["test", "rules", "tests.yaml"]);
    assert!(
        out.status.success(),
        "the unit tests against the PrometheusRule's spec:\n{}",
        text(&out)
    );

    // The checks have teeth: a misspelt function, and an alert expected
    // for the wrong queue, fail.
    let bad = rule["spec"]
        .to_string()
        .replace("histogram_quantile", "histogram_quantil");
    std::fs::write(dir.join("bad.yaml"), bad).expect("written");
    let out = promtool(&tool, dir, &["check", "rules", "bad.yaml"]);
    assert!(
        !out.status.success(),
        "a misspelt function passed: {}",
        text(&out)
    );
    let wrong = local.replacen("queue: research", "queue: prod", 1);
    assert_ne!(wrong, local);
    std::fs::write(dir.join("wrong.yaml"), wrong).expect("written");
    let out = promtool(&tool, dir, &["test", "rules", "wrong.yaml"]);
    assert!(
        !out.status.success() && text(&out).contains("TrainyardQueueStarving"),
        "a wrong expectation passed: {}",
        text(&out)
    );
}

#[test]
fn the_chart_renders_the_committed_prometheus_rule() {
    if !helm_or_skip("the_chart_renders_the_committed_prometheus_rule") {
        return;
    }
    let scratch = Scratch::new("rule");
    let render = |args: &[&str]| {
        let out = Command::new("python3")
            .arg(root().join("deploy/helm/test/render.py"))
            .args(args)
            .current_dir(root())
            .output()
            .expect("python3 runs");
        assert!(out.status.success(), "render.py {args:?}:\n{}", text(&out));
        out
    };
    let out_dir = scratch.0.display().to_string();
    render(&["prometheus-rule", "--out", &out_dir]);
    let fresh = read(&scratch.0.join("trainyard-rules.yaml"));
    assert!(
        fresh == read(&root().join(RULE_FILE)),
        "{RULE_FILE} is not the chart's; regenerate with: python3 deploy/helm/test/render.py prometheus-rule --out deploy/prometheus"
    );

    // With the monitoring value set: the rule, in the release namespace,
    // with the labels Prometheus selects by, the committed spec.
    let values = root().join("deploy/helm/test/values/servicemonitor-and-custom-config.yaml");
    let dir = scratch.0.join("rendered");
    let dir_s = dir.display().to_string();
    let out = render(&[
        "render",
        "--out",
        &dir_s,
        "-f",
        &values.display().to_string(),
    ]);
    let rendered: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .flat_map(|f| {
            let docs: Vec<Value> = serde_saphyr::from_multiple(&read(Path::new(f))).expect("YAML");
            docs
        })
        .filter(|o| o["kind"] == "PrometheusRule")
        .collect();
    assert_eq!(rendered.len(), 1, "one PrometheusRule");
    let r = &rendered[0];
    assert_eq!(r["metadata"]["namespace"], "trainyard-system");
    assert_eq!(r["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(r["spec"], prometheus_rule()["spec"]);

    // Off by default.
    let dir = scratch.0.join("defaults");
    let dir_s = dir.display().to_string();
    let out = render(&["render", "--out", &dir_s]);
    for f in String::from_utf8_lossy(&out.stdout).lines() {
        assert!(
            !read(Path::new(f)).contains("kind: PrometheusRule"),
            "{f}: a PrometheusRule with the default values"
        );
    }
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        anchor("Why is this job pending?"),
        "why-is-this-job-pending"
    );
    assert_eq!(anchor("The leader flaps"), "the-leader-flaps");
    assert_eq!(
        anchor("A config change was rejected"),
        "a-config-change-was-rejected"
    );
}

// In a folder of its own: a file here would be a test binary of its own.
#[path = "observability/metrics_table.rs"]
mod metrics_table;
use metrics_table::populated;
