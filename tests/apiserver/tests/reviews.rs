//! TokenReview and SubjectAccessReview with kube-rs, as a delegating
//! authenticator and authorizer (kube-rbac-proxy, metrics-server,
//! `trainyard serve`'s exposed API) calls them: with the bootstrap
//! `system:auth-delegator` ClusterRole bound to a ServiceAccount, reviews
//! of user and ServiceAccount tokens and of RoleBinding-scoped rights.

use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use trainyard_testapi::{ADMIN_TOKEN, Config, TestApiServer, UserInfo};

fn client(server: &TestApiServer, token: &str) -> Client {
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.default_retry = false;
    config.auth_info.token = Some(token.to_string().into());
    Client::try_from(config).expect("client")
}

fn obj<K: DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("object")
}

/// Creates `v` (with its apiVersion and kind) through the in-process handle.
fn create(server: &TestApiServer, v: Value) {
    server.create(v).expect("created");
}

async fn review_token(c: &Client, token: &str) -> Result<TokenReview, kube::Error> {
    Api::<TokenReview>::all(c.clone())
        .create(
            &PostParams::default(),
            &obj(json!({"spec": {"token": token}})),
        )
        .await
}

async fn may(c: &Client, user: &str, groups: &[&str], verb: &str, ns: &str) -> bool {
    let sar: SubjectAccessReview = obj(json!({"spec": {
        "user": user, "groups": groups,
        "resourceAttributes": {"verb": verb, "resource": "pods", "group": "", "namespace": ns}
    }}));
    let r = Api::<SubjectAccessReview>::all(c.clone())
        .create(&PostParams::default(), &sar)
        .await
        .expect("a SubjectAccessReview answer");
    r.status.expect("a status").allowed
}

#[tokio::test]
async fn a_delegating_service_reviews_tokens_and_access() {
    let server = TestApiServer::start(Config {
        manual_clock: true,
        rbac: true,
        ..Config::default()
    })
    .await
    .expect("server starts");
    let admin = client(&server, ADMIN_TOKEN);
    for ns in ["a", "b", "sys"] {
        create(
            &server,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
    }
    for sa in ["proxy", "other"] {
        create(
            &server,
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": sa, "namespace": "sys"}}),
        );
    }
    create(
        &server,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "proxy-auth-delegator"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
               "subjects": [{"kind": "ServiceAccount", "name": "proxy", "namespace": "sys"}]}),
    );
    create(
        &server,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "pod-reader", "namespace": "a"},
               "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
    );
    create(
        &server,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "alice-reads", "namespace": "a"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}),
    );

    let proxy = client(
        &server,
        &server
            .service_account_token("sys", "proxy")
            .expect("a token"),
    );
    let alice = server.user_token(UserInfo::new("alice", &["team-a"]));

    // TokenReview: a user's token, a ServiceAccount's, an unknown one.
    let r = review_token(&proxy, &alice).await.expect("reviewed");
    let s = r.status.expect("a status");
    assert_eq!(s.authenticated, Some(true));
    let u = s.user.expect("a user");
    assert_eq!(u.username.as_deref(), Some("alice"));
    let groups = u.groups.unwrap_or_default();
    assert!(groups.iter().any(|g| g == "team-a"), "{groups:?}");
    assert!(groups.iter().any(|g| g == "system:authenticated"));
    let sa_token = server
        .service_account_token("sys", "other")
        .expect("a token");
    let s = review_token(&proxy, &sa_token)
        .await
        .expect("reviewed")
        .status
        .expect("a status");
    assert_eq!(
        s.user.and_then(|u| u.username).as_deref(),
        Some("system:serviceaccount:sys:other")
    );
    let s = review_token(&proxy, "not-a-token")
        .await
        .expect("reviewed")
        .status
        .expect("a status");
    assert_ne!(s.authenticated, Some(true));
    assert_eq!(s.error.as_deref(), Some("invalid bearer token"));
    // An empty token is a bad request, as kube-apiserver answers.
    match review_token(&proxy, "").await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 400, "{s:?}"),
        other => panic!("an empty token: {other:?}"),
    }

    // SubjectAccessReview: alice may list pods in a (her RoleBinding), not
    // in b, not cluster-wide; the groups are taken as given.
    assert!(may(&proxy, "alice", &["system:authenticated"], "list", "a").await);
    assert!(may(&proxy, "alice", &[], "get", "a").await);
    assert!(!may(&proxy, "alice", &["system:authenticated"], "list", "b").await);
    assert!(!may(&proxy, "alice", &["system:authenticated"], "list", "").await);
    assert!(!may(&proxy, "alice", &["system:authenticated"], "delete", "a").await);
    assert!(may(&proxy, "someone", &["system:masters"], "list", "").await);
    // Neither user nor group: 422, naming the field.
    let bad: SubjectAccessReview = obj(json!({"spec": {
        "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "a"}}}));
    match Api::<SubjectAccessReview>::all(proxy.clone())
        .create(&PostParams::default(), &bad)
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422, "{s:?}");
            assert!(s.message.contains("spec.user"), "{}", s.message);
        }
        other => panic!("a review without a subject: {other:?}"),
    }

    // Without system:auth-delegator: 403, as in a real cluster.
    let other = client(&server, &sa_token);
    match review_token(&other, &alice).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403, "{s:?}");
            assert!(
                s.message.contains(
                    "cannot create resource \"tokenreviews\" in API group \"authentication.k8s.io\""
                ),
                "{}",
                s.message
            );
        }
        other => panic!("a review without the right: {other:?}"),
    }
    let listed = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(admin.clone())
        .get("system:auth-delegator")
        .await
        .expect("the bootstrap role");
    assert_eq!(listed.name_any(), "system:auth-delegator");
}
