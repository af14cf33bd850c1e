//! Authentication and RBAC with real clients: kube-rs with service-account and
//! user tokens (401 without one, 403 with kube-apiserver's message when a role is
//! too narrow, RoleBindings confined to their namespace, resourceNames, discovery
//! for everyone, SelfSubjectAccessReview, TokenRequest), and kubectl over the
//! server's TLS port applying a chart-like manifest as admin and then acting, and
//! asking `auth can-i`, as the ServiceAccount.

mod common;

use std::time::Duration;

use common::{Kubectl, fixture, kubectl_or_skip, scratch};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DeleteParams, EvictParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::Status;
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use trainyard_testapi::{ADMIN_TOKEN, Config, TestApiServer, UserInfo};

async fn rbac_server() -> TestApiServer {
    TestApiServer::start(Config {
        manual_clock: true,
        rbac: true,
        tokens: vec![(
            "static-viewer".into(),
            UserInfo::new("viewer", &["viewers"]),
        )],
        ..Config::default()
    })
    .await
    .expect("server starts")
}

/// A kube-rs client over plain HTTP with `token` (none if `None`); no retries, so
/// errors surface at once.
fn client(server: &TestApiServer, token: Option<&str>) -> Client {
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.default_retry = false;
    config.auth_info.token = token.map(|t| t.to_string().into());
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

fn pod(name: &str) -> Pod {
    obj(
        json!({"metadata": {"name": name}, "spec": {"schedulerName": "trainyard", "containers": [{"name": "c", "image": "img"}]}}),
    )
}

const SA: &str = "system:serviceaccount:trainyard-system:trainyard-scheduler";

async fn bind(pods: &Api<Pod>, name: &str) -> Result<Status, kube::Error> {
    let b = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}});
    pods.create_subresource::<Value, Status>("binding", name, &PostParams::default(), &b)
        .await
}

/// Creates the namespace, ServiceAccount and RBAC objects of
/// `tests/fixtures/install.yaml` through the in-process handle.
fn install(server: &TestApiServer) {
    let text = std::fs::read_to_string(fixture("install.yaml")).expect("fixture");
    for doc in text.split("\n---\n") {
        let v: Value = serde_saphyr::from_str(doc).expect("yaml");
        let kind = v["kind"].as_str().unwrap_or_default();
        if matches!(
            kind,
            "Namespace"
                | "ServiceAccount"
                | "ClusterRole"
                | "ClusterRoleBinding"
                | "Role"
                | "RoleBinding"
        ) {
            server.create(v).expect("created");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_tokens_are_authorized_by_stored_rbac() {
    let server = rbac_server().await;
    let admin = client(&server, Some(ADMIN_TOKEN));
    install(&server);
    let nss: Api<Namespace> = Api::all(admin.clone());
    for ns in ["team-a", "team-b"] {
        nss.create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": ns}})),
        )
        .await
        .expect("namespace");
    }
    Api::<Node>::all(admin.clone())
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "node-a"}})),
        )
        .await
        .expect("node");
    for ns in ["team-a", "team-b"] {
        let pods: Api<Pod> = Api::namespaced(admin.clone(), ns);
        for name in ["p1", "p2"] {
            pods.create(&PostParams::default(), &pod(name))
                .await
                .expect("pod");
        }
    }
    // The ClusterRole `pod-evictor`, bound in team-a only.
    let evictor: ClusterRole = obj(
        json!({"metadata": {"name": "pod-evictor"}, "rules": [{"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}]}),
    );
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &evictor)
        .await
        .expect("cr");
    let rb: RoleBinding = obj(
        json!({"metadata": {"name": "evict"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-evictor"},
        "subjects": [{"kind": "ServiceAccount", "name": "trainyard-scheduler", "namespace": "trainyard-system"}]}),
    );
    Api::<RoleBinding>::namespaced(admin.clone(), "team-a")
        .create(&PostParams::default(), &rb)
        .await
        .expect("rb");

    // No token, or an unknown one: 401.
    for c in [client(&server, None), client(&server, Some("made-up"))] {
        let e = status(
            Api::<Pod>::all(c.clone())
                .list(&ListParams::default())
                .await
                .expect_err("401"),
        );
        assert_eq!(
            (e.code, e.reason.as_str(), e.message.as_str()),
            (401, "Unauthorized", "Unauthorized")
        );
        let e = c
            .apiserver_version()
            .await
            .expect_err("version needs credentials too");
        assert!(matches!(e, kube::Error::Api(s) if s.code == 401));
    }

    let token = server
        .service_account_token("trainyard-system", "trainyard-scheduler")
        .expect("token");
    let sa = client(&server, Some(&token));
    // Discovery and /version for every authenticated identity.
    sa.apiserver_version().await.expect("version");
    assert!(
        sa.list_api_groups()
            .await
            .expect("groups")
            .groups
            .iter()
            .any(|g| g.name == "apps")
    );
    sa.list_core_api_resources("v1")
        .await
        .expect("core resources");

    // What the ClusterRole grants: list and watch pods everywhere, bind.
    let all: Api<Pod> = Api::all(sa.clone());
    assert_eq!(
        all.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        4
    );
    let mut w = all
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch accepted")
        .boxed();
    use futures::StreamExt;
    let first = tokio::time::timeout(Duration::from_secs(10), w.next())
        .await
        .expect("event in time");
    assert!(matches!(first, Some(Ok(WatchEvent::Added(_)))), "{first:?}");
    let team_b: Api<Pod> = Api::namespaced(sa.clone(), "team-b");
    bind(&team_b, "p1").await.expect("binding allowed");

    // Not granted: eviction in team-b, creating pods, reading secrets, nodes/status.
    let e = status(
        team_b
            .evict("p2", &EvictParams::default())
            .await
            .expect_err("403"),
    );
    assert_eq!(e.code, 403);
    assert_eq!(e.reason, "Forbidden");
    assert_eq!(
        e.message,
        format!(
            "pods \"p2\" is forbidden: User \"{SA}\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"team-b\""
        )
    );
    let d = e.details.expect("details");
    assert_eq!(
        (d.name.as_str(), d.kind.as_str(), d.group.as_str()),
        ("p2", "pods", "")
    );
    let e = status(
        team_b
            .create(&PostParams::default(), &pod("p3"))
            .await
            .expect_err("403"),
    );
    assert_eq!(
        e.message,
        format!(
            "pods is forbidden: User \"{SA}\" cannot create resource \"pods\" in API group \"\" in the namespace \"team-b\""
        )
    );
    let e = status(
        Api::<k8s_openapi::api::core::v1::Secret>::all(sa.clone())
            .list(&ListParams::default())
            .await
            .expect_err("403"),
    );
    assert_eq!(
        e.message,
        format!(
            "secrets is forbidden: User \"{SA}\" cannot list resource \"secrets\" in API group \"\" at the cluster scope"
        )
    );
    // The RoleBinding to `pod-evictor` grants eviction in team-a only.
    Api::<Pod>::namespaced(sa.clone(), "team-a")
        .evict("p2", &EvictParams::default())
        .await
        .expect("eviction in team-a");

    // resourceNames: the leader-election Role allows its own lease only.
    let leases: Api<Lease> = Api::namespaced(sa.clone(), "trainyard-system");
    let lease: Lease =
        obj(json!({"metadata": {"name": "trainyard-scheduler"}, "spec": {"holderIdentity": "a"}}));
    leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create lease");
    leases
        .get("trainyard-scheduler")
        .await
        .expect("get own lease");
    let other: Lease = obj(json!({"metadata": {"name": "other"}}));
    leases
        .create(&PostParams::default(), &other)
        .await
        .expect("create is not name-scoped");
    let e = status(leases.get("other").await.expect_err("403"));
    assert_eq!(
        e.message,
        format!(
            "leases.coordination.k8s.io \"other\" is forbidden: User \"{SA}\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"trainyard-system\""
        )
    );
    assert_eq!(e.details.expect("details").group, "coordination.k8s.io");
    let e = status(
        leases
            .list(&ListParams::default())
            .await
            .expect_err("list is not granted"),
    );
    assert_eq!(e.code, 403);

    // SelfSubjectAccessReview answers for the requester, with the allowing binding.
    let ssar: Api<SelfSubjectAccessReview> = Api::all(sa.clone());
    let ask = |verb: &str, ns: &str, sub: &str| -> SelfSubjectAccessReview {
        obj(
            json!({"spec": {"resourceAttributes": {"verb": verb, "resource": "pods", "subresource": sub, "namespace": ns}}}),
        )
    };
    let r = ssar
        .create(&PostParams::default(), &ask("create", "team-b", "binding"))
        .await
        .expect("ssar");
    let st = r.status.expect("status");
    assert!(st.allowed);
    assert_eq!(
        st.reason.as_deref(),
        Some(
            "RBAC: allowed by ClusterRoleBinding \"trainyard-scheduler\" of ClusterRole \"trainyard-scheduler\" to ServiceAccount \"trainyard-scheduler/trainyard-system\""
        )
    );
    let r = ssar
        .create(&PostParams::default(), &ask("create", "team-b", "eviction"))
        .await
        .expect("ssar");
    assert!(!r.status.expect("status").allowed);
    let r = ssar
        .create(&PostParams::default(), &ask("create", "team-a", "eviction"))
        .await
        .expect("ssar");
    assert_eq!(
        r.status.expect("status").reason.as_deref(),
        Some(
            "RBAC: allowed by RoleBinding \"evict/team-a\" of ClusterRole \"pod-evictor\" to ServiceAccount \"trainyard-scheduler/trainyard-system\""
        )
    );

    // A binding to a ClusterRole that does not exist: the 403 says so.
    let dangling: ClusterRoleBinding = obj(
        json!({"metadata": {"name": "dangling"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gone"},
        "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:serviceaccounts:trainyard-system"}]}),
    );
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &dangling)
        .await
        .expect("crb");
    let e = status(
        Api::<Namespace>::all(sa.clone())
            .delete("team-a", &DeleteParams::default())
            .await
            .expect_err("403"),
    );
    assert_eq!(
        e.message,
        format!(
            "namespaces \"team-a\" is forbidden: User \"{SA}\" cannot delete resource \"namespaces\" in API group \"\" in the namespace \"team-a\": RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found"
        )
    );

    // Static tokens and minted user tokens; group subjects.
    let viewer = client(&server, Some("static-viewer"));
    let e = status(
        Api::<Pod>::all(viewer.clone())
            .list(&ListParams::default())
            .await
            .expect_err("403"),
    );
    assert!(
        e.message
            .contains("User \"viewer\" cannot list resource \"pods\""),
        "{}",
        e.message
    );
    let crb: ClusterRoleBinding = obj(
        json!({"metadata": {"name": "viewers"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "trainyard-scheduler"},
        "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "viewers"}]}),
    );
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &crb)
        .await
        .expect("crb");
    Api::<Pod>::all(viewer)
        .list(&ListParams::default())
        .await
        .expect("group binding applies");
    let alice = server.user_token(UserInfo::new("alice", &["viewers"]));
    Api::<Pod>::all(client(&server, Some(&alice)))
        .list(&ListParams::default())
        .await
        .expect("alice is a viewer");

    // TokenRequest through the ServiceAccount's token subresource; tokens die with the ServiceAccount.
    let sas: Api<ServiceAccount> = Api::namespaced(admin.clone(), "trainyard-system");
    let tr: TokenRequest = obj(json!({"spec": {"audiences": [], "expirationSeconds": 600}}));
    let tr = sas
        .create_token_request("trainyard-scheduler", &PostParams::default(), &tr)
        .await
        .expect("token request");
    let minted = tr.status.expect("status").token.expect("token");
    Api::<Pod>::all(client(&server, Some(&minted)))
        .list(&ListParams::default())
        .await
        .expect("minted token works");
    sas.delete("trainyard-scheduler", &DeleteParams::default())
        .await
        .expect("delete sa");
    sas.create(
        &PostParams::default(),
        &obj(json!({"metadata": {"name": "trainyard-scheduler"}})),
    )
    .await
    .expect("recreate sa");
    let e = status(
        all.list(&ListParams::default())
            .await
            .expect_err("old token is dead"),
    );
    assert_eq!(e.code, 401);
    assert_eq!(
        sas.get("trainyard-scheduler").await.expect("sa").name_any(),
        "trainyard-scheduler"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_endpoint_mints_tokens_and_rbac_off_needs_none() {
    let server = rbac_server().await;
    let admin = client(&server, Some(ADMIN_TOKEN));
    install(&server);
    let post = |q: &str| {
        http::Request::post(format!("/testapi/tokens?{q}"))
            .body(Vec::new())
            .expect("request")
    };
    // Control endpoints need no credentials.
    let anon = client(&server, None);
    let v: Value = anon
        .request(post("serviceaccount=trainyard-system/trainyard-scheduler"))
        .await
        .expect("minted");
    assert_eq!(v["user"]["username"], SA);
    assert_eq!(
        v["user"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:trainyard-system",
            "system:authenticated"
        ])
    );
    let sa = client(&server, v["token"].as_str());
    Api::<Pod>::all(sa)
        .list(&ListParams::default())
        .await
        .expect("list");
    let e = anon
        .request::<Value>(post("serviceaccount=trainyard-system/nobody"))
        .await
        .expect_err("404");
    assert!(matches!(e, kube::Error::Api(s) if s.code == 404));
    let v: Value = anon
        .request(post("user=bob&groups=system:masters"))
        .await
        .expect("minted");
    let bob = client(&server, v["token"].as_str());
    Api::<k8s_openapi::api::core::v1::Secret>::all(bob)
        .list(&ListParams::default())
        .await
        .expect("masters bypass RBAC");

    // The bootstrap policy is stored like any RBAC object.
    let crs: Api<ClusterRole> = Api::all(admin.clone());
    for name in [
        "cluster-admin",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
    ] {
        crs.get(name).await.expect("bootstrap role");
    }

    // RBAC off (the default): no credentials needed, everything allowed, and
    // SelfSubjectAccessReview says so.
    let open = common::manual_server().await;
    let c = client(&open, None);
    Api::<Pod>::all(c.clone())
        .list(&ListParams::default())
        .await
        .expect("list");
    let r = Api::<SelfSubjectAccessReview>::all(c)
        .create(
            &PostParams::default(),
            &obj(json!({"spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}})),
        )
        .await
        .expect("ssar");
    assert!(r.status.expect("status").allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_a_chart_as_admin_and_acts_as_its_service_account() {
    let Some(bin) =
        kubectl_or_skip("kubectl_applies_a_chart_as_admin_and_acts_as_its_service_account")
    else {
        return;
    };
    let server = rbac_server().await;
    // The default kubeconfig: admin token over TLS (kubectl sends tokens only over TLS).
    let k = Kubectl::new(bin.clone(), &server, "rbac-admin");
    assert!(
        std::fs::read_to_string(&k.kubeconfig)
            .expect("kubeconfig")
            .contains("https://127.0.0.1:")
    );
    let out = k
        .ok(&[
            "apply",
            "-f",
            &fixture("install.yaml").display().to_string(),
        ])
        .await;
    for line in [
        "serviceaccount/trainyard-scheduler created",
        "clusterrole.rbac.authorization.k8s.io/trainyard-scheduler created",
        "clusterrolebinding.rbac.authorization.k8s.io/trainyard-scheduler created",
        "rolebinding.rbac.authorization.k8s.io/trainyard-leader-election created",
        "deployment.apps/trainyard-scheduler created",
    ] {
        assert!(out.contains(line), "{out}");
    }
    k.ok(&["apply", "-f", &fixture("node.yaml").display().to_string()])
        .await;
    k.ok(&["apply", "-f", &fixture("pod.yaml").display().to_string()])
        .await;

    // The same kubectl with the ServiceAccount's token.
    let token = server
        .service_account_token("trainyard-system", "trainyard-scheduler")
        .expect("token");
    let dir = scratch("rbac-sa");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_with_token(&token)).expect("write");
    let sa = Kubectl {
        bin: bin.clone(),
        kubeconfig,
        dir,
    };
    assert_eq!(
        sa.ok(&[
            "auth",
            "can-i",
            "create",
            "pods",
            "--subresource=binding",
            "-A"
        ])
        .await
        .trim(),
        "yes"
    );
    assert_eq!(
        sa.ok(&["auth", "can-i", "list", "pods", "-A"]).await.trim(),
        "yes"
    );
    let no = sa
        .run(&[
            "auth",
            "can-i",
            "create",
            "pods",
            "--subresource=eviction",
            "-n",
            "default",
        ])
        .await;
    assert_eq!((no.ok, no.stdout.trim()), (false, "no"), "{no:?}");
    assert_eq!(
        sa.ok(&[
            "auth",
            "can-i",
            "update",
            "leases/trainyard-scheduler",
            "-n",
            "trainyard-system"
        ])
        .await
        .trim(),
        "yes"
    );
    let no = sa
        .run(&[
            "auth",
            "can-i",
            "update",
            "leases/other",
            "-n",
            "trainyard-system",
        ])
        .await;
    assert_eq!(no.stdout.trim(), "no", "{no:?}");

    let pods = sa.ok(&["get", "pods", "-A", "-o", "name"]).await;
    assert!(pods.contains("pod/web"), "{pods}");
    let denied = sa.run(&["get", "secrets", "-n", "trainyard-system"]).await;
    assert!(!denied.ok);
    assert!(
        denied.stderr.contains(&format!(
            "Error from server (Forbidden): secrets is forbidden: User \"{SA}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"trainyard-system\""
        )),
        "{}",
        denied.stderr
    );
    let denied = sa.run(&["delete", "pod", "web", "--wait=false"]).await;
    assert!(
        !denied.ok && denied.stderr.contains("cannot delete resource \"pods\""),
        "{denied:?}"
    );

    // A token the server does not know: 401.
    let dir = scratch("rbac-bad");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, server.kubeconfig_with_token("nope")).expect("write");
    let bad = Kubectl {
        bin,
        kubeconfig,
        dir,
    };
    let out = bad.run(&["get", "pods"]).await;
    assert!(
        !out.ok
            && out
                .stderr
                .contains("error: You must be logged in to the server"),
        "{out:?}"
    );
}
