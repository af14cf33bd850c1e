//! The pure decisions with a fake authorizer (the Kubernetes one is
//! tested end to end against the test API server: tests/security.rs).

use std::collections::BTreeSet;
use std::sync::Arc;

use tonic::Code;

use super::*;

/// Tokens → users; users → the permissions they hold.
#[derive(Debug, Default)]
struct Fake {
    tokens: Vec<(&'static str, &'static str)>,
    grants: Vec<(&'static str, Permission)>,
    down: bool,
}

#[tonic::async_trait]
impl Authorizer for Fake {
    async fn authenticate(&self, token: &str) -> Result<Option<Identity>, AuthError> {
        if self.down {
            return Err(AuthError::TokenReview("connection refused".into()));
        }
        Ok(self
            .tokens
            .iter()
            .find(|(t, _)| *t == token)
            .map(|(_, u)| Identity {
                user: u.to_string(),
                ..Identity::default()
            }))
    }

    async fn allowed(&self, who: &Identity, what: &Permission) -> Result<bool, AuthError> {
        Ok(self.grants.iter().any(|(u, p)| {
            *u == who.user && (p == what || (p.namespace.is_empty() && p.verb == what.verb))
        }))
    }
}

fn alice() -> Caller {
    let fake = Fake {
        tokens: vec![("t-alice", "alice")],
        grants: vec![
            ("alice", Permission::get_pods("a")),
            ("alice", Permission::list_pods("a")),
        ],
        down: false,
    };
    Caller::User {
        identity: Arc::new(Identity {
            user: "alice".into(),
            ..Identity::default()
        }),
        authorizer: Arc::new(fake),
    }
}

fn job(ns: &str, name: &str) -> pb::Job {
    pb::Job {
        namespace: ns.into(),
        name: name.into(),
        ..pb::Job::default()
    }
}

#[test]
fn bearer_tokens_are_read_from_the_authorization_value() {
    assert_eq!(bearer("Bearer abc"), Some("abc"));
    assert_eq!(bearer("bearer  abc "), Some("abc"));
    assert_eq!(bearer("Basic abc"), None);
    assert_eq!(bearer("Bearer "), None);
    assert_eq!(bearer(""), None);
}

#[tokio::test]
async fn a_denial_names_the_namespace_and_the_permission() {
    let c = alice();
    assert!(
        c.require(&Permission::get_pods("a"), "explain job a/x")
            .await
            .is_ok()
    );
    let e = c
        .require(&Permission::get_pods("b"), "explain job b/x")
        .await
        .expect_err("denied");
    assert_eq!(e.code(), Code::PermissionDenied);
    assert_eq!(
        e.message(),
        "user \"alice\" may not explain job b/x: it needs `get pods` in namespace \"b\" (check with `kubectl auth can-i get pods -n b --as alice`)"
    );
    let e = c
        .require(&Permission::list_pods_everywhere(), "read the snapshot")
        .await
        .expect_err("denied");
    assert!(
        e.message().contains("`list pods` in every namespace"),
        "{}",
        e.message()
    );
    assert!(e.message().contains("--all-namespaces"), "{}", e.message());
    // Trusted callers may do anything.
    assert!(
        Caller::Trusted
            .require(&Permission::list_pods_everywhere(), "read the snapshot")
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn lists_keep_only_the_namespaces_the_caller_may_list() {
    let c = alice();
    let v = c.visible(["a", "b", "a"]).await.expect("answered");
    assert_eq!(v, Visible::Only(BTreeSet::from(["a".to_string()])));
    let mut r = pb::ListJobsResponse {
        jobs: vec![job("a", "x"), job("b", "y")],
        ..Default::default()
    };
    filter_jobs(&mut r, &v);
    let names: Vec<&str> = r.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["x"]);
    assert_eq!(
        Caller::Trusted.visible(["b"]).await.expect("answered"),
        Visible::All
    );

    let mut m = pb::CycleDecisions {
        binds: vec![
            pb::Bind {
                job: "a/x".into(),
                ..Default::default()
            },
            pb::Bind {
                job: "b/y".into(),
                ..Default::default()
            },
        ],
        reasons: vec![pb::ReasonChange {
            job: "b/y".into(),
            ..Default::default()
        }],
        pending: 7,
        ..Default::default()
    };
    filter_decisions(&mut m, &v);
    assert_eq!(m.binds.len(), 1);
    assert!(m.reasons.is_empty());
    assert_eq!(m.pending, 7, "the count stays the cycle's");
}

#[test]
fn what_ifs_hide_the_names_of_jobs_in_other_namespaces() {
    let mut r = pb::WhatIfResponse {
        job: "a/x".into(),
        evictions: vec![pb::Victim {
            job: "b/y".into(),
            pod: "b/y-0".into(),
            node: "n1".into(),
            kind: "preempt".into(),
            message: "preempted by a/x".into(),
        }],
        displaced: vec!["a/z".into(), "b/w".into()],
        ..Default::default()
    };
    assert_eq!(what_if_namespaces(&r), BTreeSet::from(["a", "b"]));
    redact_what_if(&mut r, &Visible::Only(BTreeSet::from(["a".to_string()])));
    assert_eq!(r.evictions[0].job, HIDDEN);
    assert_eq!(
        (r.evictions[0].pod.as_str(), r.evictions[0].node.as_str()),
        ("", "n1")
    );
    assert_eq!(r.displaced, ["a/z", HIDDEN]);
}

#[tokio::test]
async fn the_guard_refuses_missing_and_unknown_tokens_and_fails_closed() {
    use guard::Guard;
    use tonic::codegen::http::{HeaderMap, HeaderValue, header};
    let fake = Fake {
        tokens: vec![("t-alice", "alice")],
        ..Fake::default()
    };
    let g = Guard::Tokens(Arc::new(fake));
    let mut h = HeaderMap::new();
    let e = g.caller(&h).await.expect_err("no token");
    assert_eq!(e.code(), Code::Unauthenticated);
    assert!(
        e.message().contains("authorization: Bearer"),
        "{}",
        e.message()
    );
    h.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer nope"),
    );
    let e = g.caller(&h).await.expect_err("unknown token");
    assert_eq!(e.code(), Code::Unauthenticated);
    assert!(e.message().contains("rejected"), "{}", e.message());
    h.insert(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer t-alice"),
    );
    match g.caller(&h).await.expect("alice") {
        Caller::User { identity, .. } => assert_eq!(identity.user, "alice"),
        Caller::Trusted => panic!("a token caller is never trusted"),
    }
    // The Kubernetes API down: UNAVAILABLE, not let in.
    let down = Guard::Tokens(Arc::new(Fake {
        down: true,
        ..Fake::default()
    }));
    let e = down.caller(&h).await.expect_err("cannot check");
    assert_eq!(e.code(), Code::Unavailable);
    // A request that skipped the guard is refused.
    let bare = tonic::Request::new(());
    assert_eq!(
        Caller::of(&bare).expect_err("no caller").code(),
        Code::Internal
    );
}
