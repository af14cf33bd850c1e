//! The deploy artefacts (docs/operations.md): the Helm chart
//! `deploy/helm/trainyard`, the plain manifests `deploy/manifests`, and the
//! Dockerfile.
//!
//! - The chart is rendered and linted by the real Helm library (PyPI
//!   `helm-python-sdk`, driven by `deploy/helm/test/render.py`) with the
//!   default values and the value sets in `deploy/helm/test/values/`, for
//!   every Kubernetes version the chart supports (its `kubeVersion`).
//! - Every rendered manifest passes `kubernetes-validate --strict` for those
//!   versions (the ServiceMonitor excepted: its schema is the Prometheus
//!   Operator's CRD, not Kubernetes'; its fields are checked here instead).
//! - The rendered objects fit together: the config is one the service's own
//!   settings reader accepts, the probes, Service and ServiceMonitor name the
//!   port the config serves on, the lease Role names the config's lease, the
//!   pod meets the "restricted" Pod Security Standard.
//! - Values the chart refuses fail with the key and the reason.
//! - The plain manifests and the chart's CRDs are current.
//! - The RBAC grants nothing with `*`, and grants what the service calls:
//!   list+watch of every kind `crates/serve/src/watch.rs` watches, get of
//!   every owner kind `crates/serve/src/infer.rs` infers groups from; the
//!   RBAC table of docs/operations.md is the chart's.
//!
//! Without Python's Helm library or kubernetes-validate the tests that need
//! them print `SKIPPED: ...` and return; with `TRAINYARD_REQUIRE_TOOLS` set
//! (as `.ci/run` sets it once `scripts/install-test-tools.sh` succeeded) they
//! fail instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use regex::Regex;
use serde_json::Value;

// ---------------------------------------------------------------- paths, tools

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the workspace root")
}

fn chart_dir() -> PathBuf {
    root().join("deploy/helm/trainyard")
}

fn render_script() -> PathBuf {
    root().join("deploy/helm/test/render.py")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const REGENERATE: &str = "python3 deploy/helm/test/render.py manifests --out deploy/manifests";

/// Prints why a test does not run, or fails when tools are required.
fn skip(reason: &str) {
    assert!(
        std::env::var_os("TRAINYARD_REQUIRE_TOOLS").is_none(),
        "TRAINYARD_REQUIRE_TOOLS is set but {reason}"
    );
    println!("SKIPPED: {reason}");
    // Past the harness's capture too, so a skip is never silent.
    eprintln!("SKIPPED: {reason}");
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

/// Whether kubernetes-validate runs; prints SKIPPED when not.
fn kubernetes_validate_or_skip(test: &str) -> bool {
    let ok = Command::new("kubernetes-validate")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip(&format!(
            "kubernetes-validate not found on PATH ({test}; install it with scripts/install-test-tools.sh)"
        ));
    }
    ok
}

static SCRATCH: AtomicUsize = AtomicUsize::new(0);

/// A fresh scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!(
            "trainyard-deploy-{}-{tag}-{}",
            std::process::id(),
            SCRATCH.fetch_add(1, Ordering::SeqCst)
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

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn script(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(render_script())
        .args(args)
        .current_dir(root())
        .output()
        .expect("python3 runs")
}

// ---------------------------------------------------------------- YAML

/// The objects of a (multi-document) YAML text.
fn objects(text: &str, what: &str) -> Vec<Value> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).unwrap_or_else(|e| panic!("{what}: not YAML: {e}"));
    docs.into_iter().filter(|d| d.is_object()).collect()
}

fn kind(o: &Value) -> &str {
    o["kind"].as_str().unwrap_or("")
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or("")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------- versions

/// The Kubernetes versions the chart supports, from its `kubeVersion`
/// (`>=1.A.0-0 <1.B.0-0`): 1.A.0 up to, not including, 1.B.0. The one list
/// of them; the CRD test's list must be the same (checked below).
fn kubernetes_versions() -> Vec<String> {
    let chart: Value =
        serde_saphyr::from_str(&read(&chart_dir().join("Chart.yaml"))).expect("Chart.yaml is YAML");
    let range = chart["kubeVersion"]
        .as_str()
        .expect("Chart.yaml kubeVersion");
    let re = Regex::new(r"^>=\s*1\.(\d+)\.0-0\s+<\s*1\.(\d+)\.0-0$").expect("regex");
    let caps = re
        .captures(range)
        .unwrap_or_else(|| panic!("kubeVersion {range:?} is not \">=1.A.0-0 <1.B.0-0\""));
    let low: u32 = caps[1].parse().expect("minor");
    let high: u32 = caps[2].parse().expect("minor");
    assert!(low < high, "kubeVersion {range:?} is empty");
    (low..high).map(|m| format!("1.{m}.0")).collect()
}

#[test]
fn supported_kubernetes_versions_are_the_crd_tests() {
    let versions = kubernetes_versions();
    let crd_test = read(&root().join("api/crd/tests/crds.rs"));
    let re = Regex::new(r"const KUBERNETES_VERSIONS: &\[&str\] = &\[([^\]]*)\]").expect("regex");
    let listed: Vec<String> = re
        .captures(&crd_test)
        .expect("api/crd/tests/crds.rs lists KUBERNETES_VERSIONS")[1]
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(
        listed, versions,
        "the chart's kubeVersion (deploy/helm/trainyard/Chart.yaml) and api/crd/tests/crds.rs KUBERNETES_VERSIONS disagree"
    );
}

// ---------------------------------------------------------------- rendering

/// A set of values the chart is rendered with, and what it must give.
struct ValueSet {
    name: &'static str,
    /// Under deploy/helm/test/values/; `None`: the defaults.
    file: Option<&'static str>,
    replicas: u64,
    leader_election: bool,
    service_monitor: bool,
    /// The store's engine, when the values turn the store on.
    store: Option<&'static str>,
    /// The gRPC API exposed through its own Service.
    api_exposed: bool,
}

const VALUE_SETS: &[ValueSet] = &[
    ValueSet {
        name: "defaults",
        file: None,
        replicas: 2,
        leader_election: true,
        service_monitor: false,
        store: None,
        api_exposed: false,
    },
    ValueSet {
        name: "ha-off",
        file: Some("ha-off.yaml"),
        replicas: 1,
        leader_election: false,
        service_monitor: false,
        store: None,
        api_exposed: false,
    },
    ValueSet {
        name: "servicemonitor-and-custom-config",
        file: Some("servicemonitor-and-custom-config.yaml"),
        replicas: 3,
        leader_election: true,
        service_monitor: true,
        store: Some("sled"),
        api_exposed: false,
    },
    ValueSet {
        name: "api-exposed",
        file: Some("api-exposed.yaml"),
        replicas: 2,
        leader_election: true,
        service_monitor: false,
        store: None,
        api_exposed: true,
    },
];

impl ValueSet {
    fn values_args(&self) -> Vec<String> {
        self.file
            .map(|f| {
                vec![
                    "-f".to_string(),
                    root()
                        .join("deploy/helm/test/values")
                        .join(f)
                        .display()
                        .to_string(),
                ]
            })
            .unwrap_or_default()
    }
}

/// The chart rendered into a directory: one file per template, CRDs under
/// `crds/`.
struct Rendered {
    dir: Scratch,
    files: Vec<PathBuf>,
}

impl Rendered {
    fn objects(&self) -> Vec<(PathBuf, Value)> {
        self.files
            .iter()
            .flat_map(|f| {
                objects(&read(f), &f.display().to_string())
                    .into_iter()
                    .map(move |o| (f.clone(), o))
            })
            .collect()
    }
}

/// Renders the chart with `values_args` (`-f FILE` pairs); the error is the
/// script's output.
fn render(tag: &str, values_args: &[String]) -> Result<Rendered, String> {
    let dir = Scratch::new(tag);
    let out_dir = dir.0.display().to_string();
    let mut args = vec!["render", "--out", &out_dir];
    args.extend(values_args.iter().map(String::as_str));
    let out = script(&args);
    if !out.status.success() {
        return Err(format!("exit {:?}: {}", out.status.code(), text(&out)));
    }
    let files = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(PathBuf::from)
        .collect();
    Ok(Rendered { dir, files })
}

fn render_ok(set: &ValueSet) -> Rendered {
    render(set.name, &set.values_args())
        .unwrap_or_else(|e| panic!("values {}: the chart does not render: {e}", set.name))
}

#[test]
fn chart_lints_strictly_for_every_value_set_and_kubernetes_version() {
    if !helm_or_skip("chart_lints_strictly_for_every_value_set_and_kubernetes_version") {
        return;
    }
    for set in VALUE_SETS {
        for version in kubernetes_versions() {
            let kube_version = format!("v{version}");
            let mut args = vec!["lint", "--kube-version", &kube_version];
            let values = set.values_args();
            args.extend(values.iter().map(String::as_str));
            let out = script(&args);
            assert!(
                out.status.success(),
                "values {}, Kubernetes {version}: helm lint --strict fails:\n{}",
                set.name,
                text(&out)
            );
            assert!(
                text(&out).contains("1 chart(s) linted, passed"),
                "{}",
                text(&out)
            );
        }
    }
}

#[test]
fn rendered_manifests_pass_kubernetes_validate_strict() {
    let test = "rendered_manifests_pass_kubernetes_validate_strict";
    if !helm_or_skip(test) || !kubernetes_validate_or_skip(test) {
        return;
    }
    let versions = kubernetes_versions();
    for set in VALUE_SETS {
        let rendered = render_ok(set);
        let objects = rendered.objects();
        // kubernetes-validate knows Kubernetes' own kinds only.
        let operator_kind = |o: &Value| matches!(kind(o), "ServiceMonitor" | "PrometheusRule");
        let (foreign, files): (Vec<_>, Vec<_>) = rendered
            .files
            .iter()
            .partition(|f| objects.iter().any(|(g, o)| g == *f && operator_kind(o)));
        for f in &foreign {
            println!(
                "values {}: {} not validated by kubernetes-validate: the schemas of a ServiceMonitor and a PrometheusRule are the Prometheus Operator's CRDs (monitoring.coreos.com/v1), which it does not ship; rendered_objects_fit_together checks the ServiceMonitor's fields, tests/observability.rs the PrometheusRule's rules",
                set.name,
                f.display()
            );
        }
        assert_eq!(foreign.is_empty(), !set.service_monitor, "{}", set.name);
        let expected = objects.iter().filter(|(f, _)| files.contains(&f)).count();
        for version in &versions {
            let out = Command::new("kubernetes-validate")
                .args(["--strict", "--kubernetes-version", version])
                .args(&files)
                .output()
                .expect("kubernetes-validate runs");
            let t = text(&out);
            assert!(
                out.status.success(),
                "values {}, Kubernetes {version}:\n{t}",
                set.name
            );
            assert_eq!(
                t.matches("passed for resource").count(),
                expected,
                "values {}, Kubernetes {version}: every object must pass:\n{t}",
                set.name
            );
        }
    }
    // The validation has teeth: a misspelt field of the Deployment fails it.
    let rendered = render_ok(&VALUE_SETS[0]);
    let deployment = rendered.dir.0.join("deployment.yaml");
    let bad = read(&deployment).replace(
        "readOnlyRootFilesystem: true",
        "readOnlyRootFileSystem: true",
    );
    let bad_file = rendered.dir.0.join("misspelt.yaml");
    std::fs::write(&bad_file, bad).expect("write");
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "--kubernetes-version", &versions[0]])
        .arg(&bad_file)
        .output()
        .expect("kubernetes-validate runs");
    assert!(
        !out.status.success() && text(&out).contains("readOnlyRootFileSystem"),
        "a misspelt field passed:\n{}",
        text(&out)
    );
}

/// Values the chart must refuse, the text its message must contain, and
/// whether lint (the schema) refuses them too (template checks fail the
/// render only).
const INVALID_VALUES: &[(&str, &str, bool)] = &[
    (
        "replicas: -1\n",
        "at '/replicas': minimum: got -1, want 1",
        true,
    ),
    (
        "replica: 3\n",
        "additional properties 'replica' not allowed",
        true,
    ),
    (
        "config:\n  service:\n    bindConcurency: 8\n",
        "at '/config/service': additional properties 'bindConcurency' not allowed",
        true,
    ),
    (
        "config:\n  service:\n    httpAddress: 0.0.0.0:9000\n",
        "additional properties 'httpAddress' not allowed",
        true,
    ),
    (
        "resources:\n  requests:\n    cpu: lots\n",
        "at '/resources/requests/cpu'",
        true,
    ),
    ("image:\n  digest: latest\n", "at '/image/digest'", true),
    (
        "serviceMonitor:\n  interval: soon\n",
        "at '/serviceMonitor/interval'",
        true,
    ),
    (
        "replicas: 3\nleaderElection:\n  enabled: false\n",
        "replicas is 3 but leaderElection.enabled is false",
        false,
    ),
    (
        "leaderElection:\n  leaseDurationSeconds: 10\n  renewDeadlineSeconds: 10\n",
        "leaderElection.renewDeadlineSeconds (10) must be less than leaderElection.leaseDurationSeconds (10)",
        false,
    ),
    (
        "podDisruptionBudget:\n  minAvailable: 2\n",
        "podDisruptionBudget.minAvailable (2) must be less than replicas (2)",
        false,
    ),
];

#[test]
fn invalid_values_are_refused_naming_the_key() {
    if !helm_or_skip("invalid_values_are_refused_naming_the_key") {
        return;
    }
    let dir = Scratch::new("invalid");
    for (i, (values, expected, schema)) in INVALID_VALUES.iter().enumerate() {
        let file = dir.0.join(format!("invalid-{i}.yaml"));
        std::fs::write(&file, values).expect("write");
        let args = ["-f".to_string(), file.display().to_string()];
        match render(&format!("invalid-{i}"), &args) {
            Ok(_) => panic!("values {values:?} rendered; the chart must refuse them"),
            Err(e) => {
                assert!(e.starts_with("exit Some(2)"), "{values:?}: {e}");
                assert!(
                    e.contains(expected),
                    "values {values:?}: the message does not say {expected:?}:\n{e}"
                );
            }
        }
        if *schema {
            let out = script(&["lint", "-f", &file.display().to_string()]);
            assert!(
                !out.status.success() && text(&out).contains(expected),
                "values {values:?}: lint does not refuse them with {expected:?}:\n{}",
                text(&out)
            );
        }
    }
}

// ---------------------------------------------------------------- currency

#[test]
fn plain_manifests_are_current() {
    if !helm_or_skip("plain_manifests_are_current") {
        return;
    }
    let dir = Scratch::new("manifests");
    let out = script(&["manifests", "--out", &dir.0.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let committed = root().join("deploy/manifests");
    let mut stale = Vec::new();
    let names = |d: &Path| -> BTreeSet<String> {
        std::fs::read_dir(d)
            .map(|r| {
                r.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (want, have) = (names(&dir.0), names(&committed));
    for f in want.union(&have) {
        let (w, h) = (dir.0.join(f), committed.join(f));
        match (std::fs::read_to_string(&w), std::fs::read_to_string(&h)) {
            (Ok(a), Ok(b)) if a == b => {}
            (Ok(_), Ok(_)) => stale.push(format!("deploy/manifests/{f} differs from the chart")),
            (Ok(_), Err(_)) => stale.push(format!("deploy/manifests/{f} is missing")),
            (Err(_), _) => stale.push(format!("deploy/manifests/{f} is not generated")),
        }
    }
    assert!(
        stale.is_empty(),
        "deploy/manifests is stale:\n  {}\nregenerate with: {REGENERATE}",
        stale.join("\n  ")
    );
}

#[test]
fn chart_crds_are_the_generated_crds() {
    let generated = root().join("deploy/crds");
    let chart = chart_dir().join("crds");
    let list = |d: &Path| -> BTreeSet<String> {
        std::fs::read_dir(d)
            .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    let (want, have) = (list(&generated), list(&chart));
    let mut stale = Vec::new();
    for f in want.union(&have) {
        match (
            std::fs::read_to_string(generated.join(f)),
            std::fs::read_to_string(chart.join(f)),
        ) {
            (Ok(a), Ok(b)) if a == b => {}
            (Ok(_), Ok(_)) => stale.push(format!("{f} differs")),
            (Ok(_), Err(_)) => stale.push(format!("{f} is missing from the chart")),
            (Err(_), _) => stale.push(format!("{f} is in the chart but not in deploy/crds")),
        }
    }
    assert!(
        stale.is_empty(),
        "deploy/helm/trainyard/crds is not deploy/crds:\n  {}\nupdate with: rm -f deploy/helm/trainyard/crds/*.yaml && cp deploy/crds/*.yaml deploy/helm/trainyard/crds/ && {REGENERATE}",
        stale.join("\n  ")
    );
}

// ---------------------------------------------------------------- Dockerfile

#[test]
fn dockerfile_runs_the_ci_commands_and_a_non_root_runtime() {
    let dockerfile = read(&root().join("Dockerfile"));
    let ci = read(&root().join(".ci/run"));
    // The checks of .ci/run that need only the toolchain, verbatim, in the
    // image's `check` stage.
    let commands: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| {
            l.starts_with("cargo fmt")
                || l.starts_with("cargo clippy")
                || l.starts_with("cargo test")
        })
        .collect();
    assert_eq!(commands.len(), 3, ".ci/run: {commands:?}");
    for c in commands {
        assert!(
            dockerfile.contains(c),
            "the Dockerfile does not run {c:?} as .ci/run does"
        );
    }
    for line in [
        "cargo build --release --locked --bin trainyard",
        "USER 65532:65532",
        "ENTRYPOINT [\"/trainyard\"]",
        "CMD [\"serve\", \"--config\", \"/etc/trainyard/config.yaml\"]",
    ] {
        assert!(dockerfile.contains(line), "the Dockerfile lacks {line:?}");
    }
    let from: Vec<&str> = dockerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    let runtime = from.last().expect("a FROM line");
    assert!(
        runtime.contains("distroless") && runtime.contains("nonroot"),
        "the runtime stage is not a non-root distroless image: {runtime}"
    );
    // The Rust toolchain of the build stage is at least the workspace's.
    let manifest = read(&root().join("Cargo.toml"));
    let msrv = Regex::new(r#"rust-version = "(\d+)\.(\d+)""#)
        .expect("regex")
        .captures(&manifest)
        .map(|c| {
            (
                c[1].parse::<u32>().unwrap_or(0),
                c[2].parse::<u32>().unwrap_or(0),
            )
        })
        .expect("rust-version in Cargo.toml");
    let rust = Regex::new(r"FROM (?:docker\.io/library/)?rust:(\d+)\.(\d+)")
        .expect("regex")
        .captures(&dockerfile)
        .map(|c| {
            (
                c[1].parse::<u32>().unwrap_or(0),
                c[2].parse::<u32>().unwrap_or(0),
            )
        })
        .expect("the build stage is FROM rust:<version>");
    assert!(
        rust >= msrv,
        "rust:{rust:?} is older than rust-version {msrv:?}"
    );
}

// ---------------------------------------------------------------- shared by rbac and cluster

/// The objects of the committed plain manifests (the chart with default
/// values; `plain_manifests_are_current` keeps them so).
fn manifest_objects() -> Vec<Value> {
    let path = root().join("deploy/manifests/trainyard.yaml");
    objects(&read(&path), &path.display().to_string())
}

fn one_of<'a>(objects: &'a [Value], k: &str) -> &'a Value {
    let found: Vec<&Value> = objects.iter().filter(|o| kind(o) == k).collect();
    assert_eq!(found.len(), 1, "one {k}");
    found[0]
}

#[path = "deploy/objects.rs"]
mod objects;

#[path = "deploy/rbac.rs"]
mod rbac;

#[path = "deploy/cluster.rs"]
mod cluster;
