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

/// The one object of `kind` (and `name`, when given).
fn one<'a>(objects: &'a [(PathBuf, Value)], k: &str) -> &'a Value {
    let found: Vec<&Value> = objects
        .iter()
        .map(|(_, o)| o)
        .filter(|o| kind(o) == k)
        .collect();
    assert_eq!(found.len(), 1, "expected one {k}, found {}", found.len());
    found[0]
}

fn maybe<'a>(objects: &'a [(PathBuf, Value)], k: &str) -> Option<&'a Value> {
    objects.iter().map(|(_, o)| o).find(|o| kind(o) == k)
}

/// The "restricted" Pod Security Standard's rules, as they apply to this
/// pod template.
fn check_restricted(pod: &Value, what: &str) {
    let spec = &pod["spec"];
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        assert!(spec[host].as_bool() != Some(true), "{what}: {host} is set");
    }
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{what}");
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
        "{what}"
    );
    // The volume types the restricted standard allows (no hostPath).
    let allowed = [
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    ];
    for v in spec["volumes"].as_array().into_iter().flatten() {
        let types: Vec<&str> = v
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .filter(|k| *k != "name")
            .collect();
        assert!(
            types.len() == 1 && allowed.contains(&types[0]),
            "{what}: volume {v} is not of a type the restricted standard allows"
        );
    }
    let containers = spec["containers"].as_array().expect("containers");
    assert!(!containers.is_empty(), "{what}: no container");
    for c in containers {
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{what}");
        assert_eq!(sc["privileged"], false, "{what}");
        assert_eq!(sc["runAsNonRoot"], true, "{what}");
        assert_eq!(sc["runAsUser"], 65532, "{what}");
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{what}");
        assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"], "{what}");
        assert!(sc["capabilities"].get("add").is_none(), "{what}");
        assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault", "{what}");
        assert!(c.get("ports").is_some_and(|p| {
            p.as_array()
                .is_some_and(|p| p.iter().all(|p| p.get("hostPort").is_none()))
        }));
    }
}

fn labels_match(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .is_some_and(|s| !s.is_empty() && s.iter().all(|(k, v)| &labels[k] == v))
}

#[test]
fn rendered_objects_fit_together() {
    if !helm_or_skip("rendered_objects_fit_together") {
        return;
    }
    for set in VALUE_SETS {
        let what = set.name;
        let rendered = render_ok(set);
        let objects = rendered.objects();

        // The config is one the service accepts.
        let cm = one(&objects, "ConfigMap");
        let config_text = cm["data"]["config.yaml"]
            .as_str()
            .expect("ConfigMap data config.yaml");
        let settings = trainyard_serve::Settings::parse(config_text, "config.yaml")
            .unwrap_or_else(|e| panic!("values {what}: the rendered config is refused: {e}"));
        let config: Value = serde_saphyr::from_str(config_text).expect("config YAML");
        let service = &config["service"];
        let election = &service["leaderElection"];
        assert_eq!(election["enabled"], set.leader_election, "{what}");
        let port: u64 = service["httpAddress"]
            .as_str()
            .and_then(|a| a.rsplit_once(':'))
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or_else(|| panic!("{what}: httpAddress {}", service["httpAddress"]));
        // `trainyard serve` listens on loopback unless told otherwise; in
        // a pod the probes and Prometheus come from outside it.
        assert_eq!(
            settings.service.http_address,
            format!("0.0.0.0:{port}"),
            "{what}: the chart must ask for every interface"
        );

        // The Deployment runs the config it mounts.
        let deployment = one(&objects, "Deployment");
        let spec = &deployment["spec"];
        assert_eq!(spec["replicas"], set.replicas, "{what}");
        assert_eq!(spec["strategy"]["type"], "RollingUpdate", "{what}");
        assert_eq!(
            spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0,
            "{what}"
        );
        let pod = &spec["template"];
        let pod_labels = &pod["metadata"]["labels"];
        assert!(
            labels_match(&spec["selector"]["matchLabels"], pod_labels),
            "{what}: the Deployment's selector does not select its pods"
        );
        check_restricted(pod, what);
        assert_eq!(
            pod["spec"]["priorityClassName"], "system-cluster-critical",
            "{what}"
        );
        let c = &pod["spec"]["containers"][0];
        assert_eq!(
            strings(&c["args"])[..3],
            ["serve", "--config", "/etc/trainyard/config.yaml"],
            "{what}"
        );
        let mount = c["volumeMounts"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["mountPath"] == "/etc/trainyard"))
            .unwrap_or_else(|| panic!("{what}: no mount at /etc/trainyard"));
        let volume = pod["spec"]["volumes"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["name"] == mount["name"]))
            .expect("the mounted volume");
        assert_eq!(volume["configMap"]["name"], name(cm), "{what}");
        // The store, when on: a writable volume at /var/lib/trainyard, and
        // the config's store path inside it.
        let store_mount = c["volumeMounts"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["mountPath"] == "/var/lib/trainyard"));
        match set.store {
            Some(backend) => {
                let m = store_mount.unwrap_or_else(|| panic!("{what}: no store mount"));
                assert_ne!(m["readOnly"], true, "{what}");
                let v = pod["spec"]["volumes"]
                    .as_array()
                    .and_then(|v| v.iter().find(|v| v["name"] == m["name"]))
                    .unwrap_or_else(|| panic!("{what}: the store's volume"));
                assert!(v["emptyDir"].is_object(), "{what}: {v}");
                let store = &settings.service.store;
                assert_eq!(
                    store.path,
                    format!("/var/lib/trainyard/state.{backend}"),
                    "{what}"
                );
                assert_eq!(store.backend.name(), backend, "{what}");
            }
            None => {
                assert!(store_mount.is_none(), "{what}");
                assert!(settings.service.store.path.is_empty(), "{what}");
            }
        }
        let env: BTreeMap<&str, &Value> = c["env"]
            .as_array()
            .expect("env")
            .iter()
            .map(|e| (e["name"].as_str().unwrap_or(""), e))
            .collect();
        for (var, field) in [
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace"),
        ] {
            assert_eq!(
                env.get(var)
                    .map(|e| &e["valueFrom"]["fieldRef"]["fieldPath"]),
                Some(&Value::from(field)),
                "{what}: {var} from the downward API"
            );
        }
        let container_port = c["ports"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["name"] == "http-metrics"))
            .unwrap_or_else(|| panic!("{what}: no port http-metrics"));
        assert_eq!(container_port["containerPort"], port, "{what}");
        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            assert_eq!(c[probe]["httpGet"]["path"], path, "{what}");
            assert_eq!(c[probe]["httpGet"]["port"], "http-metrics", "{what}");
        }
        for r in ["requests", "limits"] {
            for res in ["cpu", "memory"] {
                assert!(
                    !c["resources"][r][res].is_null() || (r, res) == ("limits", "cpu"),
                    "{what}: resources.{r}.{res}"
                );
            }
        }
        let anti = &pod["spec"]["affinity"]["podAntiAffinity"];
        assert_eq!(
            !anti.is_null(),
            set.replicas > 1,
            "{what}: anti-affinity across nodes exactly when replicas > 1"
        );

        // ServiceAccount and its bindings.
        let sa = one(&objects, "ServiceAccount");
        assert_eq!(pod["spec"]["serviceAccountName"], sa["metadata"]["name"]);
        let namespace = sa["metadata"]["namespace"].clone();
        for binding in ["ClusterRoleBinding", "RoleBinding"] {
            for b in objects
                .iter()
                .map(|(_, o)| o)
                .filter(|o| kind(o) == binding)
            {
                let subject = &b["subjects"][0];
                assert_eq!(subject["kind"], "ServiceAccount", "{what}");
                assert_eq!(subject["name"], sa["metadata"]["name"], "{what}");
                assert_eq!(subject["namespace"], namespace, "{what}");
                let role_kind = if binding == "RoleBinding" {
                    "Role"
                } else {
                    "ClusterRole"
                };
                assert_eq!(b["roleRef"]["kind"], role_kind);
                one(&objects, role_kind);
            }
        }

        // The Role grants the config's Lease (with leader election) and
        // its checkpoint ConfigMap (with checkpoints) in its namespace.
        let store = &service["store"];
        let checkpoint = store["checkpointSeconds"].as_u64().unwrap_or(0) > 0;
        match maybe(&objects, "Role") {
            Some(role) => {
                assert!(
                    set.leader_election || checkpoint,
                    "{what}: a Role without election or checkpoint"
                );
                assert_eq!(election["leaseNamespace"], role["metadata"]["namespace"]);
                let named = |resource: &str| -> Option<Vec<String>> {
                    role["rules"]
                        .as_array()
                        .expect("rules")
                        .iter()
                        .find(|r| {
                            r.get("resourceNames").is_some()
                                && strings(&r["resources"]) == [resource]
                        })
                        .map(|r| strings(&r["resourceNames"]))
                };
                assert_eq!(
                    named("leases"),
                    set.leader_election
                        .then(|| vec![election["leaseName"].as_str().unwrap_or("").to_string()]),
                    "{what}"
                );
                assert_eq!(
                    named("configmaps"),
                    checkpoint
                        .then(|| vec![store["checkpointName"].as_str().unwrap_or("").to_string()]),
                    "{what}"
                );
                one(&objects, "RoleBinding");
            }
            None => assert!(
                !set.leader_election && !checkpoint,
                "{what}: no Role for the lease or the checkpoint"
            ),
        }
        assert_eq!(
            settings.service.scheduler_name,
            service["schedulerName"].as_str().unwrap_or("trainyard")
        );

        // Service and ServiceMonitor reach the pods' metrics port.
        let services: Vec<&Value> = objects
            .iter()
            .map(|(_, o)| o)
            .filter(|o| kind(o) == "Service")
            .collect();
        let by_port = |p: &str| {
            services
                .iter()
                .copied()
                .find(|s| s["spec"]["ports"][0]["name"] == p)
        };
        let svc = by_port("http-metrics").unwrap_or_else(|| panic!("{what}: no metrics Service"));
        // The gRPC API's Service exactly when exposed, with its TLS flags.
        assert_eq!(services.len(), 1 + usize::from(set.api_exposed), "{what}");
        if let Some(api) = by_port("grpc-api") {
            assert!(set.api_exposed, "{what}: API Service not asked for");
            assert!(labels_match(&api["spec"]["selector"], pod_labels), "{what}");
            let args = strings(&pod["spec"]["containers"][0]["args"]);
            for flag in ["--api-listen", "--api-tls-cert", "--api-tls-key"] {
                assert!(
                    args.iter().any(|a| a == flag),
                    "{what}: no {flag} in {args:?}"
                );
            }
            let ports = &pod["spec"]["containers"][0]["ports"];
            assert!(
                ports
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["name"] == "grpc-api"),
                "{what}: no grpc-api container port"
            );
        }
        assert!(
            labels_match(&svc["spec"]["selector"], pod_labels),
            "{what}: the Service does not select the pods"
        );
        let svc_port = &svc["spec"]["ports"][0];
        assert_eq!(svc_port["name"], "http-metrics");
        assert_eq!(svc_port["targetPort"], "http-metrics");
        assert_eq!(svc_port["port"], port);
        match maybe(&objects, "ServiceMonitor") {
            Some(sm) => {
                assert!(set.service_monitor, "{what}: ServiceMonitor not asked for");
                assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
                assert!(
                    labels_match(
                        &sm["spec"]["selector"]["matchLabels"],
                        &svc["metadata"]["labels"]
                    ),
                    "{what}: the ServiceMonitor does not select the Service"
                );
                assert!(
                    strings(&sm["spec"]["namespaceSelector"]["matchNames"])
                        .iter()
                        .any(|n| Some(n.as_str()) == svc["metadata"]["namespace"].as_str()),
                    "{what}: the ServiceMonitor looks in another namespace"
                );
                let endpoint = &sm["spec"]["endpoints"][0];
                assert_eq!(endpoint["port"], "http-metrics", "{what}");
                assert_eq!(endpoint["path"], "/metrics", "{what}");
                assert_eq!(
                    sm["metadata"]["labels"]["release"], "prometheus",
                    "{what}: the ServiceMonitor's extra labels"
                );
            }
            None => assert!(!set.service_monitor, "{what}: no ServiceMonitor"),
        }

        // A PodDisruptionBudget keeps one replica, when there are several.
        match maybe(&objects, "PodDisruptionBudget") {
            Some(pdb) => {
                assert!(set.replicas > 1, "{what}: a PDB for one replica");
                let min = pdb["spec"]["minAvailable"].as_u64().expect("minAvailable");
                assert!(min >= 1 && min < set.replicas, "{what}: minAvailable {min}");
                assert!(
                    labels_match(&pdb["spec"]["selector"]["matchLabels"], pod_labels),
                    "{what}: the PDB does not select the pods"
                );
            }
            None => assert_eq!(set.replicas, 1, "{what}: no PodDisruptionBudget"),
        }

        // Standard labels on every object the chart renders.
        for (f, o) in &objects {
            if kind(o) == "CustomResourceDefinition" {
                continue;
            }
            let labels = &o["metadata"]["labels"];
            for l in [
                "app.kubernetes.io/name",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/version",
                "app.kubernetes.io/managed-by",
                "helm.sh/chart",
            ] {
                assert!(
                    labels[l].is_string(),
                    "{what}: {} {} ({}) has no label {l}",
                    kind(o),
                    name(o),
                    f.display()
                );
            }
        }
    }
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

// ---------------------------------------------------------------- RBAC

/// The objects of the committed plain manifests (the chart with default
/// values; `plain_manifests_are_current` keeps them so).
fn manifest_objects() -> Vec<Value> {
    let path = root().join("deploy/manifests/trainyard.yaml");
    objects(&read(&path), &path.display().to_string())
}

/// (API group, resource) -> verbs, over the rules of `role`.
fn grants(role: &Value) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for rule in role["rules"].as_array().expect("rules") {
        for g in strings(&rule["apiGroups"]) {
            for r in strings(&rule["resources"]) {
                out.entry((g.clone(), r))
                    .or_default()
                    .extend(strings(&rule["verbs"]));
            }
        }
    }
    out
}

/// The resource (plural) of a kind, as the API names it.
fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else if lower.ends_with('s') {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// An API group as people write it ("core" for the empty one).
fn group_name(g: &str) -> &str {
    if g.is_empty() { "core" } else { g }
}

/// The kinds `crates/serve/src/watch.rs` watches: (group, kind).
fn watched_kinds() -> Vec<(String, String)> {
    let src = read(&root().join("crates/serve/src/watch.rs"));
    let start = src
        .find("pub const KINDS")
        .expect("watch.rs declares KINDS");
    let end = start + src[start..].find("];").expect("the end of KINDS");
    let re = Regex::new(r#"\(\s*"([^"]*)"\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*\)"#).expect("regex");
    let kinds: Vec<(String, String)> = re
        .captures_iter(&src[start..end])
        .map(|c| (c[1].to_string(), c[3].to_string()))
        .collect();
    assert!(kinds.len() >= 10, "watch.rs KINDS parsed as {kinds:?}");
    kinds
}

/// The owner kinds `crates/serve/src/infer.rs` infers PodGroups from:
/// (group, kind), from its `Workload::of` table.
fn workload_kinds() -> Vec<(String, String)> {
    let src = read(&root().join("crates/serve/src/infer.rs"));
    let re = Regex::new(r#"\(\s*"([^"]*)"\s*,\s*"([^"]*)"\s*\)\s*=>\s*Workload::"#).expect("regex");
    let kinds: Vec<(String, String)> = re
        .captures_iter(&src)
        .map(|c| (c[1].to_string(), c[2].to_string()))
        .collect();
    assert!(
        kinds.len() >= 5,
        "infer.rs Workload::of parsed as {kinds:?}"
    );
    kinds
}

#[test]
fn rbac_grants_nothing_with_a_wildcard() {
    let objects = manifest_objects();
    let roles: Vec<&Value> = objects
        .iter()
        .filter(|o| matches!(kind(o), "ClusterRole" | "Role"))
        .collect();
    assert_eq!(roles.len(), 2, "one ClusterRole and one Role");
    for role in roles {
        for rule in role["rules"].as_array().expect("rules") {
            for field in [
                "apiGroups",
                "resources",
                "verbs",
                "resourceNames",
                "nonResourceURLs",
            ] {
                assert!(
                    !strings(&rule[field]).iter().any(|s| s.contains('*')),
                    "{} {}: {field} has a wildcard: {rule}",
                    kind(role),
                    name(role)
                );
            }
        }
    }
    // Nothing the service never does: it updates nothing cluster-wide,
    // deletes nothing but the ResourceClaims it created for DRA-backed
    // extended resources (when their pods are not bound, as kube-scheduler
    // deletes them), and reads no Secrets or ConfigMaps (its config is a
    // mounted file).
    let cluster = grants(one_of(&objects, "ClusterRole"));
    let allowed: BTreeSet<&str> = ["get", "list", "watch", "create", "patch"].into();
    for ((g, r), verbs) in &cluster {
        for v in verbs {
            let claim_delete = v == "delete" && g == "resource.k8s.io" && r == "resourceclaims";
            assert!(
                allowed.contains(v.as_str()) || claim_delete,
                "ClusterRole grants {v} on {}/{r}",
                group_name(g)
            );
        }
        assert!(
            !matches!(r.as_str(), "secrets" | "configmaps"),
            "ClusterRole grants {r}"
        );
    }
}

fn one_of<'a>(objects: &'a [Value], k: &str) -> &'a Value {
    let found: Vec<&Value> = objects.iter().filter(|o| kind(o) == k).collect();
    assert_eq!(found.len(), 1, "one {k}");
    found[0]
}

#[test]
fn rbac_covers_what_the_service_calls() {
    let objects = manifest_objects();
    let cluster = grants(one_of(&objects, "ClusterRole"));
    let has = |g: &str, r: &str, verbs: &[&str]| -> bool {
        cluster
            .get(&(g.to_string(), r.to_string()))
            .is_some_and(|v| verbs.iter().all(|verb| v.contains(*verb)))
    };
    let mut missing = Vec::new();
    for (g, k) in watched_kinds() {
        if !has(&g, &plural(&k), &["list", "watch"]) {
            missing.push(format!(
                "list, watch on {}/{} (watch.rs KINDS {k})",
                group_name(&g),
                plural(&k)
            ));
        }
    }
    for (g, k) in workload_kinds() {
        if !has(&g, &plural(&k), &["get"]) {
            missing.push(format!(
                "get on {}/{} (an owner infer.rs groups by: {k})",
                group_name(&g),
                plural(&k)
            ));
        }
    }
    // The writes (crates/serve/src: write.rs, report.rs, grouper.rs,
    // admission.rs) and the other reads (grouper.rs: Namespaces, the
    // StatefulSet and leader pod of a LeaderWorkerSet).
    for (g, r, verbs) in [
        ("", "pods", &["get", "patch"][..]),
        ("", "pods/binding", &["create"]),
        ("", "pods/eviction", &["create"]),
        ("", "pods/status", &["patch"]),
        ("", "events", &["create"]),
        ("", "namespaces", &["list", "watch"]),
        ("apps", "statefulsets", &["get"]),
        ("trainyard.io", "podgroups", &["create"]),
        ("trainyard.io", "podgroups/status", &["patch"]),
        ("trainyard.io", "queues/status", &["patch"]),
        // DRA claims (claims.rs): the finalizer, then the allocation and
        // reservations, authorized on the synthetic binding subresource
        // too from Kubernetes 1.36; the claim of a pod's DRA-backed
        // extended resources created, and deleted when released
        // (extended.rs), its name recorded in the pod's status.
        (
            "resource.k8s.io",
            "resourceclaims",
            &["patch", "create", "delete"],
        ),
        ("resource.k8s.io", "resourceclaims/status", &["patch"]),
        ("resource.k8s.io", "resourceclaims/binding", &["patch"]),
    ] {
        if !has(g, r, verbs) {
            missing.push(format!("{} on {}/{r}", verbs.join(", "), group_name(g)));
        }
    }
    assert!(
        missing.is_empty(),
        "the ClusterRole (deploy/helm/trainyard/templates/rbac.yaml) lacks:\n  {}\nadd them, with the reason in docs/operations.md, then {REGENERATE}",
        missing.join("\n  ")
    );

    // Leases and the checkpoint ConfigMap: only in the release namespace,
    // beyond create only the configured ones by name.
    let role = one_of(&objects, "Role");
    let rules: Vec<&Value> = role["rules"].as_array().expect("rules").iter().collect();
    for rule in &rules {
        let (group, name) = match strings(&rule["resources"]).as_slice() {
            [r] if r == "leases" => ("coordination.k8s.io", "trainyard"),
            [r] if r == "configmaps" => ("", "trainyard-checkpoint"),
            other => panic!("the Role grants {other:?}: only leases and configmaps"),
        };
        assert_eq!(strings(&rule["apiGroups"]), [group]);
        let verbs = strings(&rule["verbs"]);
        if verbs != ["create"] {
            assert_eq!(
                strings(&rule["resourceNames"]),
                [name],
                "verbs {verbs:?} beyond create are for the one object"
            );
        }
    }
    let granted = grants(role);
    let verbs = &granted[&("coordination.k8s.io".to_string(), "leases".to_string())];
    for v in ["get", "create", "update"] {
        assert!(verbs.contains(v), "the Role lacks {v} on leases");
    }
    let verbs = &granted[&(String::new(), "configmaps".to_string())];
    for v in ["get", "create", "patch"] {
        assert!(
            verbs.contains(v),
            "the Role lacks {v} on configmaps (the checkpoint)"
        );
    }
    let config: Value = serde_saphyr::from_str(
        one_of(&objects, "ConfigMap")["data"]["config.yaml"]
            .as_str()
            .expect("config"),
    )
    .expect("config YAML");
    assert_eq!(
        config["service"]["leaderElection"]["leaseNamespace"],
        role["metadata"]["namespace"]
    );
}

/// The rows of the RBAC table in docs/operations.md:
/// `| kind | API group | resource | verbs | why |`.
fn documented_grants() -> BTreeMap<(String, String, String), BTreeSet<String>> {
    let doc = read(&root().join("docs/operations.md"));
    let start = doc.find("## RBAC").expect("docs/operations.md has ## RBAC");
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut out = BTreeMap::new();
    for line in section.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if cells.len() != 5
            || !matches!(cells[0], "ClusterRole" | "Role")
            || !cells[2].starts_with('`')
        {
            continue;
        }
        let unquote = |s: &str| s.trim_matches('`').to_string();
        let group = match unquote(cells[1]).as_str() {
            "core" => String::new(),
            g => g.to_string(),
        };
        let verbs: BTreeSet<String> = cells[3].split(',').map(|v| unquote(v.trim())).collect();
        assert!(!cells[4].is_empty(), "{line}: no reason given");
        out.insert((cells[0].to_string(), group, unquote(cells[2])), verbs);
    }
    out
}

#[test]
fn rbac_table_in_the_docs_is_the_charts() {
    let objects = manifest_objects();
    let mut chart = BTreeMap::new();
    for k in ["ClusterRole", "Role"] {
        for ((g, r), verbs) in grants(one_of(&objects, k)) {
            chart.insert((k.to_string(), g, r), verbs);
        }
    }
    let docs = documented_grants();
    let fmt = |m: &BTreeMap<(String, String, String), BTreeSet<String>>| -> Vec<String> {
        m.iter()
            .map(|((k, g, r), v)| {
                let g = if g.is_empty() { "core" } else { g };
                format!(
                    "{k} {g} {r}: {}",
                    v.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect()
    };
    assert_eq!(
        fmt(&docs),
        fmt(&chart),
        "docs/operations.md's RBAC table (left) and the chart's roles (right) differ"
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

// ---------------------------------------------------------------- the cluster

/// Applies the plain manifests (the chart with its default values) with
/// kubectl to the test API server and starts the scheduler from them: its
/// settings from the applied ConfigMap, its client as the applied
/// ServiceAccount (the test server honours RBAC when it enforces it), and
/// checks that it binds a pod.
///
/// Skips with the reason while the test server does not serve a kind the
/// manifests hold (it learns Deployments, ServiceAccounts, Services and the
/// RBAC kinds in issue 16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_manifests_apply_to_the_test_api_server_and_the_scheduler_starts_from_them() {
    use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
    use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
    use kube::core::{ApiResource, GroupVersionKind};
    use serde_json::json;

    let test = "rendered_manifests_apply_to_the_test_api_server_and_the_scheduler_starts_from_them";
    let Some(kubectl) = find_kubectl() else {
        skip(&format!(
            "kubectl not found ({test}; install it with scripts/install-test-tools.sh)"
        ));
        return;
    };
    // RBAC on: the scheduler gets only what the rendered ClusterRole and
    // Role grant its ServiceAccount.
    let server = trainyard_testapi::TestApiServer::start(trainyard_testapi::Config {
        rbac: true,
        ..Default::default()
    })
    .await
    .expect("the test API server starts");
    let admin = client_with_token(&server, trainyard_testapi::ADMIN_TOKEN).await;

    // Every kind of the manifests must be served (the CRDs' own kinds come
    // with them).
    let manifests = manifest_objects();
    let discovery = kube::discovery::Discovery::new(admin.clone())
        .run()
        .await
        .expect("discovery");
    let unserved: BTreeSet<String> = manifests
        .iter()
        .filter_map(|o| {
            let api_version = o["apiVersion"].as_str().unwrap_or("");
            let (g, v) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let gvk = GroupVersionKind::gvk(g, v, kind(o));
            discovery
                .resolve_gvk(&gvk)
                .is_none()
                .then(|| format!("{api_version} {}", kind(o)))
        })
        .collect();
    if !unserved.is_empty() {
        // Not a missing tool: the server's own coverage, said every run.
        let reason = format!(
            "the test API server does not serve {} ({test})",
            unserved.into_iter().collect::<Vec<_>>().join(", ")
        );
        println!("SKIPPED: {reason}");
        eprintln!("SKIPPED: {reason}");
        return;
    }

    let dir = Scratch::new("apply");
    let kubeconfig = dir.0.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let file = root().join("deploy/manifests/trainyard.yaml");
    let out = tokio::process::Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.0.join("cache"))
        .args(["apply", "--server-side", "-f"])
        .arg(&file)
        .output()
        .await
        .expect("kubectl runs");
    let applied = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl apply -f {}:\n{applied}{}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    for o in &manifests {
        assert!(
            applied.contains(&format!("/{} serverside-applied", name(o))),
            "kubectl did not apply {} {}:\n{applied}",
            kind(o),
            name(o)
        );
    }

    // The scheduler's settings, as the pod would read them from its volume.
    let namespace = name(one_of(&manifests, "Namespace")).to_string();
    let cm_name = name(one_of(&manifests, "ConfigMap")).to_string();
    let cm = Api::<ConfigMap>::namespaced(admin.clone(), &namespace)
        .get(&cm_name)
        .await
        .expect("the applied ConfigMap");
    let config_text = cm
        .data
        .as_ref()
        .and_then(|d| d.get("config.yaml"))
        .expect("config.yaml in the ConfigMap");
    let settings = trainyard_serve::Settings::parse(config_text, "config.yaml")
        .expect("the applied config is accepted")
        .with_environment("trainyard-0", &namespace, "host", "1");
    assert_eq!(
        settings.service.http_address, "0.0.0.0:8080",
        "deploy/manifests must ask for every interface: the probes and Prometheus come from outside the pod"
    );

    // A node, a queue and a pod for it.
    let nodes: Api<Node> = Api::all(admin.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "gpu-1"}})).expect("node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("node");
    nodes
        .patch_status(
            "gpu-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }})),
        )
        .await
        .expect("node status");
    let queues: Api<DynamicObject> = Api::all_with(
        admin.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("trainyard.io", "v1alpha1", "Queue"),
            "queues",
        ),
    );
    let queue: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "trainyard.io/v1alpha1", "kind": "Queue",
        "metadata": {"name": settings.service.default_queue},
        "spec": {"quota": {"nvidia.com/gpu": 8}}
    }))
    .expect("queue");
    queues
        .create(&PostParams::default(), &queue)
        .await
        .expect("queue");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "train-0"},
        "spec": {"schedulerName": settings.service.scheduler_name,
                 "containers": [{"name": "c", "image": "train:1",
                                 "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");

    // The scheduler, as the applied ServiceAccount, with its token.
    let sa = one_of(&manifests, "ServiceAccount");
    let token = server
        .service_account_token(sa["metadata"]["namespace"].as_str().unwrap_or(""), name(sa))
        .expect("a token for the ServiceAccount");
    let client = client_with_token(&server, &token).await;
    let as_scheduler: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (progress_tx, _progress_rx) = tokio::sync::watch::channel(Default::default());
    let service = tokio::spawn(trainyard_serve::run(client, settings, stop_rx, progress_tx));
    let cond = |p: Option<&Pod>| {
        p.and_then(|p| p.spec.as_ref())
            .is_some_and(|s| s.node_name.is_some())
    };
    let bound = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        kube::runtime::wait::await_condition(pods.clone(), "train-0", cond),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .flatten()
    .and_then(|p| p.spec.and_then(|s| s.node_name));
    // RBAC is in force: what the ClusterRole does not grant is refused.
    let refused = as_scheduler
        .delete("train-0", &Default::default())
        .await
        .expect_err("the scheduler may not delete pods");
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused:?}"
    );
    let _ = stop_tx.send(true);
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(10), service).await;
    assert_eq!(
        bound.as_deref(),
        Some("gpu-1"),
        "the scheduler started from the applied manifests did not bind the pod"
    );

    match stopped {
        Ok(Ok(Ok(()))) => {}
        other => panic!("the scheduler did not stop cleanly: {other:?}"),
    }
}

/// A kube-rs client of the test server with a bearer token (over plain
/// HTTP; kube-rs sends tokens there, kubectl does not).
async fn client_with_token(server: &trainyard_testapi::TestApiServer, token: &str) -> kube::Client {
    let text = trainyard_testapi::kubeconfig_with_token(&server.url(), token);
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).expect("a kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("a client config");
    config.default_retry = false;
    kube::Client::try_from(config).expect("a client")
}

/// kubectl on PATH or where `scripts/install-test-tools.sh` puts it.
fn find_kubectl() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".local/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}
