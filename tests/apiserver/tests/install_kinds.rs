//! The built-in kinds an installation brings — ServiceAccounts, Services,
//! Secrets, Deployments and the RBAC kinds — through kube-rs (defaults,
//! validation naming the field, immutable fields, status subresources, watches)
//! and kubectl (apply of a chart-like manifest, `get` tables, apply errors).

mod common;

use std::time::Duration;

use common::{Kubectl, fixture, kubectl_or_skip, manual_server};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::Status;
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use trainyard_testapi::TestApiServer;

fn client(server: &TestApiServer) -> Client {
    let config = kube::Config::new(server.url().parse().expect("url"));
    Client::try_from(config).expect("client")
}

fn obj<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("object")
}

fn status(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other:?}"),
    }
}

fn fields(s: &Status) -> Vec<String> {
    s.details
        .as_ref()
        .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
        .unwrap_or_default()
}

fn deployment(selector: Value, labels: Value) -> Value {
    json!({"metadata": {"name": "sched"}, "spec": {"selector": selector, "template": {"metadata": {"labels": labels},
        "spec": {"containers": [{"name": "s", "image": "trainyard:dev"}]}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_services_secrets_and_rbac_objects_are_validated_and_served() {
    let server = manual_server().await;
    let c = client(&server);
    let pp = PostParams::default();

    // Deployments: required fields and the selector/labels match, 422 naming the field.
    let deploys: Api<Deployment> = Api::default_namespaced(c.clone());
    let mut w = deploys
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    // k8s-openapi always sends a selector (`{}` when empty).
    let e = status(
        deploys
            .create(&pp, &obj(deployment(json!({}), json!({"app": "ty"}))))
            .await
            .expect_err("422"),
    );
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert_eq!(fields(&e), ["spec.selector"]);
    assert_eq!(
        e.message,
        "Deployment.apps \"sched\" is invalid: spec.selector: Invalid value: {}: empty selector is invalid for deployment"
    );
    let mut missing = deployment(json!({}), json!({}));
    missing["spec"] = json!({"template": missing["spec"]["template"].clone()});
    missing["apiVersion"] = json!("apps/v1");
    missing["kind"] = json!("Deployment");
    let e = server.create(missing).expect_err("422");
    assert!(
        e.to_string()
            .ends_with("Deployment.apps \"sched\" is invalid: spec.selector: Required value"),
        "{e}"
    );
    let e = status(
        deploys
            .create(
                &pp,
                &obj(deployment(
                    json!({"matchLabels": {"app": "ty"}}),
                    json!({"app": "other"}),
                )),
            )
            .await
            .expect_err("422"),
    );
    assert_eq!(fields(&e), ["spec.template.metadata.labels"]);
    assert!(
        e.message.ends_with("spec.template.metadata.labels: Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`"),
        "{}",
        e.message
    );
    let mut no_image = deployment(json!({"matchLabels": {"app": "ty"}}), json!({"app": "ty"}));
    no_image["spec"]["template"]["spec"]["containers"][0]["image"] = json!("");
    let e = status(deploys.create(&pp, &obj(no_image)).await.expect_err("422"));
    assert_eq!(fields(&e), ["spec.template.spec.containers[0].image"]);

    let d = deploys
        .create(
            &pp,
            &obj(deployment(
                json!({"matchLabels": {"app": "ty"}}),
                json!({"app": "ty", "tier": "x"}),
            )),
        )
        .await
        .expect("valid deployment");
    let spec = d.spec.clone();
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(
        spec.strategy.and_then(|s| s.type_).as_deref(),
        Some("RollingUpdate")
    );
    assert_eq!(
        spec.template.spec.and_then(|s| s.restart_policy).as_deref(),
        Some("Always")
    );
    let ev = tokio::time::timeout(Duration::from_secs(10), w.next())
        .await
        .expect("event in time");
    assert!(
        matches!(ev, Some(Ok(WatchEvent::Added(ref x))) if x.name_any() == "sched"),
        "{ev:?}"
    );
    // No controller: nothing but the Deployment exists; its status is written through /status.
    let st = deploys
        .patch_status("sched", &PatchParams::default(), &Patch::Merge(json!({"status": {"replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1}})))
        .await
        .expect("status");
    assert_eq!(st.status.and_then(|s| s.ready_replicas), Some(1));
    let e = status(
        deploys
            .patch(
                "sched",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"selector": {"matchLabels": {"app": "ty", "tier": "x"}}}}),
                ),
            )
            .await
            .expect_err("immutable"),
    );
    assert_eq!(fields(&e), ["spec.selector"]);
    assert!(e.message.contains("field is immutable"), "{}", e.message);
    let scaled = deploys
        .patch(
            "sched",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}, "status": {"replicas": 9}})),
        )
        .await
        .expect("scale by patch");
    assert_eq!(scaled.spec.replicas, Some(3));
    assert_eq!(scaled.status.and_then(|s| s.replicas), Some(1));

    // Services: a cluster IP is allocated and kept; defaults; validation.
    let svcs: Api<Service> = Api::default_namespaced(c.clone());
    let svc = svcs
        .create(&pp, &obj(json!({"metadata": {"name": "metrics"}, "spec": {"selector": {"app": "ty"}, "ports": [{"name": "m", "port": 8080}]}})))
        .await
        .expect("service");
    let spec = svc.spec.expect("spec");
    let ip = spec.cluster_ip.clone().expect("cluster IP");
    assert!(ip.starts_with("10.96."), "{ip}");
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    let port = &spec.ports.expect("ports")[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080))
    );
    let mut replaced: Value =
        serde_json::to_value(svcs.get("metrics").await.expect("get")).expect("json");
    replaced["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("clusterIP");
    replaced["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("clusterIPs");
    let kept = svcs
        .replace("metrics", &pp, &obj(replaced))
        .await
        .expect("replace");
    assert_eq!(kept.spec.and_then(|s| s.cluster_ip), Some(ip));
    let other = svcs
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "other"}, "spec": {"ports": [{"port": 80}]}})),
        )
        .await
        .expect("second service");
    assert_ne!(other.spec.and_then(|s| s.cluster_ip), kept_ip(&svcs).await);
    let e = status(
        svcs.create(
            &pp,
            &obj(json!({"metadata": {"name": "bad"}, "spec": {"ports": [{"port": 0}]}})),
        )
        .await
        .expect_err("422"),
    );
    assert_eq!(fields(&e), ["spec.ports[0].port"]);
    let e = status(
        svcs.create(&pp, &obj(json!({"metadata": {"name": "bad"}, "spec": {}})))
            .await
            .expect_err("422"),
    );
    assert_eq!(fields(&e), ["spec.ports"]);
    svcs.create(
        &pp,
        &obj(json!({"metadata": {"name": "headless"}, "spec": {"clusterIP": "None"}})),
    )
    .await
    .expect("headless services need no ports");

    // Secrets: stringData folded into base64 data; bad base64 is a 400.
    let secrets: Api<Secret> = Api::default_namespaced(c.clone());
    let s = secrets
        .create(
            &pp,
            &obj(json!({"metadata": {"name": "tok"}, "stringData": {"token": "s3cret"}})),
        )
        .await
        .expect("secret");
    assert_eq!(s.type_.as_deref(), Some("Opaque"));
    let raw: Value = serde_json::to_value(&s).expect("json");
    assert_eq!(raw["data"]["token"], "czNjcmV0");
    assert!(raw.get("stringData").is_none());
    let bad: Value = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bad"}, "data": {"k": "not base64!"}});
    let e = server.create(bad).expect_err("400");
    assert!(
        e.to_string()
            .contains("illegal base64 data at input byte 3"),
        "{e}"
    );

    // ServiceAccounts are plain objects.
    let sas: Api<ServiceAccount> = Api::default_namespaced(c.clone());
    sas.create(&pp, &obj(json!({"metadata": {"name": "sched"}})))
        .await
        .expect("sa");
    assert_eq!(
        sas.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );

    // RBAC objects: rule validation, roleRef immutable.
    let crs: Api<ClusterRole> = Api::all(c.clone());
    let e = status(
        crs.create(&pp, &obj(json!({"metadata": {"name": "bad"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": []}]})))
            .await
            .expect_err("422"),
    );
    assert_eq!(fields(&e), ["rules[0].verbs"]);
    assert!(
        e.message
            .ends_with("rules[0].verbs: Required value: verbs must contain at least one value"),
        "{}",
        e.message
    );
    let rbs: Api<RoleBinding> = Api::default_namespaced(c.clone());
    let rb = json!({"metadata": {"name": "rb"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "sched"}]});
    rbs.create(&pp, &obj(rb)).await.expect("rolebinding");
    let e = status(
        rbs.patch(
            "rb",
            &PatchParams::default(),
            &Patch::Merge(json!({"roleRef": {"name": "edit"}})),
        )
        .await
        .expect_err("roleRef is immutable"),
    );
    assert_eq!((e.code, fields(&e)), (422, vec!["roleRef".to_string()]));
    assert!(e.message.contains("cannot change roleRef"), "{}", e.message);
    rbs.patch("rb", &PatchParams::default(), &Patch::Merge(json!({"subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "amy"}]})))
        .await
        .expect("subjects may change");
    let e = status(
        rbs.create(&pp, &obj(json!({"metadata": {"name": "rb2"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Thing", "name": "x"}})))
            .await
            .expect_err("422"),
    );
    assert_eq!(fields(&e), ["roleRef.kind"]);
}

async fn kept_ip(svcs: &Api<Service>) -> Option<String> {
    svcs.get("metrics")
        .await
        .ok()
        .and_then(|s| s.spec)
        .and_then(|s| s.cluster_ip)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_and_shows_installation_kinds() {
    let Some(bin) = kubectl_or_skip("kubectl_applies_and_shows_installation_kinds") else {
        return;
    };
    let server = manual_server().await;
    let k = Kubectl::new(bin, &server, "install");
    let manifest = fixture("install.yaml").display().to_string();
    let out = k.ok(&["apply", "-f", &manifest]).await;
    for line in [
        "namespace/trainyard-system created",
        "serviceaccount/trainyard-scheduler created",
        "clusterrole.rbac.authorization.k8s.io/trainyard-scheduler created",
        "clusterrolebinding.rbac.authorization.k8s.io/trainyard-scheduler created",
        "role.rbac.authorization.k8s.io/trainyard-leader-election created",
        "rolebinding.rbac.authorization.k8s.io/trainyard-leader-election created",
        "configmap/trainyard-config created",
        "secret/trainyard-webhook created",
        "service/trainyard-metrics created",
        "deployment.apps/trainyard-scheduler created",
    ] {
        assert!(out.contains(line), "{out}");
    }
    // Applying again changes nothing. (The Secret is patched again, as with
    // kube-apiserver: `stringData` is in the last-applied configuration but never
    // in the stored object, so kubectl always sends it.)
    let again = k.ok(&["apply", "-f", &manifest]).await;
    assert!(
        again
            .lines()
            .all(|l| l.ends_with(" unchanged") || l == "secret/trainyard-webhook configured"),
        "{again}"
    );

    let table = k
        .ok(&["get", "deploy,sa,svc,secret", "-n", "trainyard-system"])
        .await;
    let has_row = |prefix: &str, cells: &[&str]| {
        table.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.first() == Some(&prefix)
                && cells
                    .iter()
                    .enumerate()
                    .all(|(i, c)| f.get(i + 1) == Some(c))
        })
    };
    assert!(
        has_row("deployment.apps/trainyard-scheduler", &["0/1", "0", "0"]),
        "{table}"
    );
    assert!(
        has_row("serviceaccount/trainyard-scheduler", &["0"]),
        "{table}"
    );
    assert!(
        has_row("secret/trainyard-webhook", &["Opaque", "1"]),
        "{table}"
    );
    let svc = table
        .lines()
        .find(|l| l.starts_with("service/trainyard-metrics"))
        .unwrap_or_default();
    assert!(
        svc.contains("ClusterIP") && svc.contains("10.96.") && svc.contains("8080/TCP"),
        "{table}"
    );
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header
            .split_whitespace()
            .eq(["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]),
        "{table}"
    );
    let rbac = k
        .ok(&["get", "clusterrole,clusterrolebinding", "-o", "wide"])
        .await;
    assert!(
        rbac.contains("clusterrole.rbac.authorization.k8s.io/trainyard-scheduler"),
        "{rbac}"
    );
    assert!(
        rbac.lines().any(|l| l
            .starts_with("clusterrolebinding.rbac.authorization.k8s.io/trainyard-scheduler")
            && l.contains("ClusterRole/trainyard-scheduler")
            && l.contains("trainyard-system/trainyard-scheduler")),
        "{rbac}"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "secret",
            "trainyard-webhook",
            "-n",
            "trainyard-system",
            "-o",
            "jsonpath={.data.token}"
        ])
        .await,
        "czNjcmV0"
    );

    // A changed manifest: strategic merge patches on the Deployment (containers by
    // name) and the Service (ports by port).
    let changed = std::fs::read_to_string(fixture("install.yaml"))
        .expect("fixture")
        .replace("image: trainyard:dev", "image: trainyard:v2")
        .replace("port: 8080", "port: 9090");
    let path = k.dir.join("install-v2.yaml");
    std::fs::write(&path, changed).expect("write");
    let out = k.ok(&["apply", "-f", &path.display().to_string()]).await;
    assert!(
        out.contains("deployment.apps/trainyard-scheduler configured")
            && out.contains("service/trainyard-metrics configured")
            && out.contains("clusterrole.rbac.authorization.k8s.io/trainyard-scheduler unchanged"),
        "{out}"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "deploy",
            "trainyard-scheduler",
            "-n",
            "trainyard-system",
            "-o",
            "jsonpath={.spec.template.spec.containers[*].image}"
        ])
        .await,
        "trainyard:v2"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "svc",
            "trainyard-metrics",
            "-n",
            "trainyard-system",
            "-o",
            "jsonpath={.spec.ports[*].port}"
        ])
        .await,
        "9090"
    );

    // An invalid Deployment: kubectl prints the server's 422 naming the field.
    let bad = k.dir.join("bad-deploy.yaml");
    std::fs::write(&bad, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: bad\nspec:\n  selector:\n    matchLabels:\n      app: a\n  template:\n    metadata:\n      labels:\n        app: b\n    spec:\n      containers:\n      - name: c\n        image: i\n").expect("write");
    let out = k.run(&["apply", "-f", &bad.display().to_string()]).await;
    assert!(!out.ok);
    assert!(
        out.stderr.contains("The Deployment \"bad\" is invalid: spec.template.metadata.labels: Invalid value: {\"app\":\"b\"}: `selector` does not match template `labels`"),
        "{}",
        out.stderr
    );
    let role = k.dir.join("bad-role.yaml");
    std::fs::write(&role, "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: bad\nrules:\n- apiGroups: [\"\"]\n  resources: [\"pods\"]\n  verbs: []\n").expect("write");
    let out = k.run(&["apply", "-f", &role.display().to_string()]).await;
    assert!(
        !out.ok
            && out
                .stderr
                .contains("rules[0].verbs: Required value: verbs must contain at least one value"),
        "{out:?}"
    );
}
