//! Authentication (opt-in with [`crate::Config::rbac`]): bearer tokens mapped to
//! identities, and the request attributes the authorizer ([`crate::rbac`]) judges.
//!
//! Tokens come from three places:
//!
//! * the admin token [`ADMIN_TOKEN`] (user `testapi-admin`, group `system:masters`,
//!   which bypasses RBAC as kube-apiserver's privileged group does); the
//!   kubeconfig the server writes uses it;
//! * static tokens from [`crate::Config::tokens`] and tokens minted for a user with
//!   `POST /testapi/tokens?user=NAME&groups=G1,G2`;
//! * service-account tokens minted with `POST /testapi/tokens?serviceaccount=NS/NAME`,
//!   [`crate::TestApiServer::service_account_token`], or the ServiceAccount `token`
//!   subresource (`TokenRequest`, what `kubectl create token` calls). They
//!   authenticate as `system:serviceaccount:NS:NAME` with the groups
//!   `system:serviceaccounts`, `system:serviceaccounts:NS` and `system:authenticated`,
//!   and only while that ServiceAccount (the same uid) exists, like bound tokens.
//!
//! A request without a token, or with an unknown one, gets 401 `Unauthorized`
//! (kube-apiserver with `--anonymous-auth=false`). Impersonation headers are refused.

use std::collections::BTreeMap;

use rand::Rng;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::http::Req;
use crate::state::State;

/// The admin's bearer token.
pub const ADMIN_TOKEN: &str = "trainyard-testapi-admin";
/// The admin's user name.
pub const ADMIN_USER: &str = "testapi-admin";

/// An authenticated identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// User name (`system:serviceaccount:NS:NAME` for service accounts).
    pub name: String,
    /// Uid (the ServiceAccount's for its tokens, empty otherwise).
    pub uid: String,
    /// Groups, always including `system:authenticated`.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// A user with these groups (plus `system:authenticated`).
    pub fn new(name: impl Into<String>, groups: &[&str]) -> Self {
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        UserInfo {
            name: name.into(),
            uid: String::new(),
            groups,
        }
    }

    /// The admin: group `system:masters`.
    pub fn admin() -> Self {
        Self::new(ADMIN_USER, &["system:masters"])
    }

    /// A service account's identity.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> Self {
        let mut u = Self::new(
            format!("system:serviceaccount:{namespace}:{name}"),
            &[
                "system:serviceaccounts",
                &format!("system:serviceaccounts:{namespace}"),
            ],
        );
        u.uid = uid.into();
        u
    }

    /// Member of `system:masters` (bypasses authorization).
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }

    /// `{"username", "uid", "groups"}` as kube's `UserInfo`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        v
    }
}

/// What a token stands for.
#[derive(Debug, Clone)]
pub enum TokenSubject {
    /// A fixed identity.
    User(UserInfo),
    /// A service account, valid while it exists with this uid.
    ServiceAccount {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The ServiceAccount's uid when the token was minted.
        uid: String,
    },
}

/// Authentication settings and the token table.
#[derive(Debug, Clone, Default)]
pub struct AuthState {
    /// Authentication and RBAC are enforced.
    pub enabled: bool,
    /// Token → identity.
    pub tokens: BTreeMap<String, TokenSubject>,
}

impl AuthState {
    /// The table with the admin token and `static_tokens`.
    pub fn new(enabled: bool, static_tokens: &[(String, UserInfo)]) -> Self {
        let mut tokens = BTreeMap::new();
        tokens.insert(
            ADMIN_TOKEN.to_string(),
            TokenSubject::User(UserInfo::admin()),
        );
        for (t, u) in static_tokens {
            tokens.insert(t.clone(), TokenSubject::User(u.clone()));
        }
        AuthState { enabled, tokens }
    }
}

/// 401 as kube-apiserver writes it.
pub fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

/// Who sent `authorization` (the header's value). `Ok(None)` when authentication is off.
pub fn authenticate(st: &State, authorization: &str) -> ApiResult<Option<UserInfo>> {
    if !st.auth.enabled {
        return Ok(None);
    }
    let token = authorization
        .strip_prefix("Bearer ")
        .or_else(|| authorization.strip_prefix("bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(unauthorized)?;
    identity(st, token).map(Some).ok_or_else(unauthorized)
}

/// Whom `token` stands for: a known token, and for a ServiceAccount's, only
/// while that ServiceAccount (the same uid) exists.
pub fn identity(st: &State, token: &str) -> Option<UserInfo> {
    match st.auth.tokens.get(token)? {
        TokenSubject::User(u) => Some(u.clone()),
        TokenSubject::ServiceAccount {
            namespace,
            name,
            uid,
        } => st
            .store
            .get("/serviceaccounts", namespace, name)
            .is_some_and(|sa| sa["metadata"]["uid"].as_str() == Some(uid))
            .then(|| UserInfo::service_account(namespace, name, uid)),
    }
}

/// The audience kube-apiserver's tokens are for by default.
const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// `POST /apis/authentication.k8s.io/v1/tokenreviews`: whom `spec.token`
/// authenticates as, against the same token table as requests (whether or
/// not authentication is enforced). An unknown token, or a ServiceAccount's
/// whose account is gone, is `authenticated: false` with an `error`; an
/// empty one is 400, as kube-apiserver answers. Audiences are echoed
/// (`spec.audiences`, else the default), not checked.
pub fn token_review(st: &State, body: &Value) -> ApiResult<Value> {
    let spec = &body["spec"];
    let token = spec["token"].as_str().unwrap_or("");
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let audiences = match spec["audiences"].as_array() {
        Some(a) if !a.is_empty() => Value::Array(a.clone()),
        _ => json!([DEFAULT_AUDIENCE]),
    };
    let status = match identity(st, token) {
        Some(u) => json!({"authenticated": true, "user": u.to_json(), "audiences": audiences}),
        None => json!({"authenticated": false, "user": {}, "error": "invalid bearer token"}),
    };
    let mut out = json!({
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status,
    });
    if let Some(m) = body["metadata"].as_object() {
        out["metadata"] = Value::Object(m.clone());
    }
    Ok(out)
}

fn new_token(st: &mut State, prefix: &str) -> String {
    let b: [u8; 24] = st.rng.random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{prefix}-{h}")
}

/// Mints a token for an existing ServiceAccount (404 if it does not exist).
pub fn mint_service_account_token(
    st: &mut State,
    namespace: &str,
    name: &str,
) -> ApiResult<(String, UserInfo)> {
    let uid = st
        .store
        .get("/serviceaccounts", namespace, name)
        .and_then(|sa| sa["metadata"]["uid"].as_str().map(String::from))
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let token = new_token(st, "sa");
    st.auth.tokens.insert(
        token.clone(),
        TokenSubject::ServiceAccount {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.clone(),
        },
    );
    Ok((token, UserInfo::service_account(namespace, name, &uid)))
}

/// Mints a token for a user.
pub fn mint_user_token(st: &mut State, user: UserInfo) -> String {
    let token = new_token(st, "user");
    st.auth
        .tokens
        .insert(token.clone(), TokenSubject::User(user));
    token
}

/// `POST .../serviceaccounts/NAME/token`: a `TokenRequest` answered with a token.
pub fn token_request(
    st: &mut State,
    namespace: &str,
    name: &str,
    body: &Value,
) -> ApiResult<Value> {
    let (token, _) = mint_service_account_token(st, namespace, name)?;
    let secs = body["spec"]["expirationSeconds"].as_i64().unwrap_or(3600);
    let expires = crate::time::format_rfc3339(st.now() + secs);
    let now = crate::time::format_rfc3339(st.now());
    let mut out = if body.is_object() {
        body.clone()
    } else {
        json!({})
    };
    out["apiVersion"] = json!("authentication.k8s.io/v1");
    out["kind"] = json!("TokenRequest");
    out["metadata"]["name"] = json!(name);
    out["metadata"]["namespace"] = json!(namespace);
    out["metadata"]["creationTimestamp"] = json!(now);
    out["spec"]["expirationSeconds"] = json!(secs);
    if out["spec"]["audiences"].is_null() {
        out["spec"]["audiences"] = json!(["https://kubernetes.default.svc.cluster.local"]);
    }
    out["status"] = json!({"token": token, "expirationTimestamp": expires});
    Ok(out)
}

/// The attributes of a request, as kube-apiserver's `RequestInfo` derives them
/// from the method, path and query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`; lower-case HTTP method for non-resource requests.
    pub verb: String,
    /// A resource request (under `/api/v1/...` or `/apis/g/v/...`).
    pub resource_request: bool,
    /// The URL path (non-resource requests).
    pub path: String,
    /// API group (empty for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Namespace (empty for cluster scope).
    pub namespace: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Object name (also from a `metadata.name=` field selector on list/watch).
    pub name: String,
}

/// The attributes of a parsed request.
pub fn attributes(r: &Req) -> Attributes {
    let segs: Vec<&str> = r.segs.iter().map(String::as_str).collect();
    let path = format!("/{}", segs.join("/"));
    let method_verb = r.method.as_str().to_lowercase();
    let non_resource = Attributes {
        verb: method_verb.clone(),
        path: path.clone(),
        ..Default::default()
    };
    let (group, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => (("", *v), rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => ((*g, *v), rest),
        _ => return non_resource,
    };
    let mut a = Attributes {
        resource_request: true,
        path,
        api_group: group.0.into(),
        api_version: group.1.into(),
        verb: match method_verb.as_str() {
            "post" => "create",
            "get" | "head" => "get",
            "put" => "update",
            "patch" => "patch",
            "delete" => "delete",
            _ => "",
        }
        .into(),
        ..Default::default()
    };
    let mut parts: &[&str] = rest;
    if parts[0] == "namespaces" && parts.len() > 1 {
        a.namespace = parts[1].into();
        // `/namespaces/NS/status` and `/finalize` are the namespace's own subresources.
        if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
            parts = &parts[2..];
        }
    }
    a.resource = parts[0].into();
    if let Some(n) = parts.get(1) {
        a.name = n.to_string();
    }
    if let Some(s) = parts.get(2) {
        a.subresource = s.to_string();
    }
    if a.name.is_empty() && a.verb == "get" {
        a.verb = if r.flag("watch") { "watch" } else { "list" }.into();
        if let Some(fs) = r.q("fieldSelector") {
            let exact = fs.split(',').find_map(|t| {
                let t = t.trim();
                t.strip_prefix("metadata.name==")
                    .or_else(|| t.strip_prefix("metadata.name="))
            });
            if let Some(n) = exact.filter(|n| !n.is_empty() && !n.contains('/')) {
                a.name = n.into();
            }
        }
    }
    if a.name.is_empty() && a.verb == "delete" {
        a.verb = "deletecollection".into();
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::Method;

    fn req(method: Method, path: &str, query: &[(&str, &str)]) -> Req {
        Req {
            method,
            segs: path
                .split('/')
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
            query: query
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            accept: String::new(),
            content_type: String::new(),
            body: Default::default(),
            user: None,
        }
    }

    #[test]
    fn request_attributes_follow_kube_request_info() {
        let a = attributes(&req(Method::GET, "/api/v1/namespaces/ns/pods", &[]));
        assert_eq!(
            (a.verb.as_str(), a.namespace.as_str(), a.resource.as_str()),
            ("list", "ns", "pods")
        );
        assert!(a.resource_request);
        let a = attributes(&req(Method::GET, "/api/v1/pods", &[("watch", "true")]));
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("watch", ""));
        let a = attributes(&req(
            Method::POST,
            "/api/v1/namespaces/ns/pods/p/binding",
            &[],
        ));
        assert_eq!(
            (a.verb.as_str(), a.name.as_str(), a.subresource.as_str()),
            ("create", "p", "binding")
        );
        let a = attributes(&req(
            Method::DELETE,
            "/apis/apps/v1/namespaces/ns/deployments",
            &[],
        ));
        assert_eq!(
            (a.verb.as_str(), a.api_group.as_str()),
            ("deletecollection", "apps")
        );
        // The namespace object itself is in its own namespace.
        let a = attributes(&req(Method::GET, "/api/v1/namespaces/team-a", &[]));
        assert_eq!(
            (
                a.verb.as_str(),
                a.resource.as_str(),
                a.name.as_str(),
                a.namespace.as_str()
            ),
            ("get", "namespaces", "team-a", "team-a")
        );
        let a = attributes(&req(Method::PUT, "/api/v1/namespaces/team-a/status", &[]));
        assert_eq!(
            (a.resource.as_str(), a.subresource.as_str()),
            ("namespaces", "status")
        );
        // A list narrowed to one name is about that name.
        let a = attributes(&req(
            Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
            &[("fieldSelector", "metadata.name=trainyard"), ("watch", "1")],
        ));
        assert_eq!((a.verb.as_str(), a.name.as_str()), ("watch", "trainyard"));
        for p in [
            "/api",
            "/api/v1",
            "/apis/apps",
            "/apis/apps/v1",
            "/version",
            "/openapi/v3",
        ] {
            let a = attributes(&req(Method::GET, p, &[]));
            assert!(!a.resource_request, "{p}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", p));
        }
    }
}
