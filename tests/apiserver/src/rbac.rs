//! RBAC authorization over the stored ClusterRoles, ClusterRoleBindings, Roles and
//! RoleBindings, evaluated as kube-apiserver's RBAC authorizer does:
//!
//! * every ClusterRoleBinding whose subjects include the user grants its
//!   ClusterRole's rules everywhere; for a namespaced request, every RoleBinding in
//!   that namespace grants its Role's or ClusterRole's rules in that namespace only;
//! * subjects are `User` (name), `Group` (one of the user's groups) and
//!   `ServiceAccount` (`system:serviceaccount:NS:NAME`; a RoleBinding's subject
//!   without a namespace means the binding's);
//! * a rule allows a resource request when its `verbs`, `apiGroups`, `resources`
//!   (`*`, `resource/subresource`, `*/subresource`) and `resourceNames` (empty = any)
//!   all match, a non-resource request when its `verbs` and `nonResourceURLs`
//!   (exact, `*`, or a `prefix*`) match;
//! * `system:masters` bypasses RBAC; a binding to a missing role contributes
//!   nothing and the 403 names it (`RBAC: clusterrole.rbac.authorization.k8s.io "x" not found`).
//!
//! Not done: aggregated ClusterRoles (`aggregationRule` is stored but not
//! evaluated), escalation checks when creating roles and bindings, impersonation.
//! [`seed_default_policy`] stores the bootstrap roles the rest leans on:
//! `cluster-admin`, `system:discovery`, `system:public-info-viewer`, `system:basic-user`,
//! and the ClusterRole `system:auth-delegator` (TokenReviews and SubjectAccessReviews,
//! unbound: an installation binds it, as for kube-rbac-proxy or metrics-server).

use serde_json::{Value, json};

use crate::auth::{Attributes, UserInfo};
use crate::error::ApiError;
use crate::state::{State, WriteOpts};

const GROUP: &str = "rbac.authorization.k8s.io";

fn strs(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn has(list: &Value, want: &str) -> bool {
    strs(list).any(|x| x == "*" || x == want)
}

/// Whether `rule` allows the request (kube's `RuleAllows`).
pub fn rule_allows(a: &Attributes, rule: &Value) -> bool {
    if !has(&rule["verbs"], &a.verb) {
        return false;
    }
    if !a.resource_request {
        return strs(&rule["nonResourceURLs"]).any(|u| {
            u == "*"
                || u == a.path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| a.path.starts_with(prefix))
        });
    }
    let combined = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let resource_ok = strs(&rule["resources"]).any(|r| {
        r == "*"
            || r == combined
            || (!a.subresource.is_empty() && r.strip_prefix("*/") == Some(a.subresource.as_str()))
    });
    let names_ok = rule["resourceNames"].as_array().is_none_or(Vec::is_empty)
        || strs(&rule["resourceNames"]).any(|n| n == a.name);
    strs(&rule["apiGroups"]).any(|g| g == "*" || g == a.api_group) && resource_ok && names_ok
}

/// Whether a binding's subject is the user (kube's `appliesToUser`).
fn applies(user: &UserInfo, subject: &Value, binding_ns: &str) -> bool {
    let name = subject["name"].as_str().unwrap_or("");
    match subject["kind"].as_str() {
        Some("User") => user.name == name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let ns = subject["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn describe_subject(subject: &Value, binding_ns: &str) -> String {
    let kind = subject["kind"].as_str().unwrap_or("");
    let name = subject["name"].as_str().unwrap_or("");
    if kind == "ServiceAccount" {
        let ns = subject["namespace"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or(binding_ns);
        format!("{kind} \"{name}/{ns}\"")
    } else {
        format!("{kind} \"{name}\"")
    }
}

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Allowed.
    pub allowed: bool,
    /// Why (which binding allowed it, or the errors met while denying it).
    pub reason: String,
}

/// Judges a request by `user` against the stored RBAC objects.
pub fn authorize(st: &State, user: &UserInfo, a: &Attributes) -> Decision {
    if user.is_master() {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let mut errors: Vec<String> = Vec::new();
    let role_rules = |kind: &str, ns: &str, name: &str, errors: &mut Vec<String>| {
        let (key, singular) = if kind == "ClusterRole" {
            (format!("{GROUP}/clusterroles"), "clusterrole")
        } else {
            (format!("{GROUP}/roles"), "role")
        };
        let ns = if kind == "ClusterRole" { "" } else { ns };
        match st.store.get(&key, ns, name) {
            Some(r) => r["rules"].as_array().cloned().unwrap_or_default(),
            None => {
                errors.push(format!("{singular}.{GROUP} \"{name}\" not found"));
                Vec::new()
            }
        }
    };
    let mut scopes: Vec<(String, &str)> = vec![(format!("{GROUP}/clusterrolebindings"), "")];
    if !a.namespace.is_empty() {
        scopes.push((format!("{GROUP}/rolebindings"), a.namespace.as_str()));
    }
    for (key, ns) in scopes {
        let bindings = st.store.list(&key, (!ns.is_empty()).then_some(ns));
        for b in bindings {
            let Some(subject) = objects(&b["subjects"]).find(|s| applies(user, s, ns)) else {
                continue;
            };
            let rr = &b["roleRef"];
            let kind = rr["kind"].as_str().unwrap_or("");
            let role = rr["name"].as_str().unwrap_or("");
            let rules = role_rules(kind, ns, role, &mut errors);
            if rules.iter().any(|r| rule_allows(a, r)) {
                let bname = b["metadata"]["name"].as_str().unwrap_or("");
                let source = if ns.is_empty() {
                    format!("ClusterRoleBinding \"{bname}\"")
                } else {
                    format!("RoleBinding \"{bname}/{ns}\"")
                };
                return Decision {
                    allowed: true,
                    reason: format!(
                        "RBAC: allowed by {source} of {kind} \"{role}\" to {}",
                        describe_subject(subject, ns)
                    ),
                };
            }
        }
    }
    let reason = match errors.len() {
        0 => String::new(),
        1 => format!("RBAC: {}", errors[0]),
        _ => format!("RBAC: [{}]", errors.join(", ")),
    };
    Decision {
        allowed: false,
        reason,
    }
}

fn objects(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// The 403 kube-apiserver answers a denied request with.
pub fn forbidden(user: &UserInfo, a: &Attributes, reason: &str) -> ApiError {
    let mut msg = if !a.resource_request {
        format!(
            "User \"{}\" cannot {} path \"{}\"",
            user.name, a.verb, a.path
        )
    } else {
        let resource = if a.subresource.is_empty() {
            a.resource.clone()
        } else {
            format!("{}/{}", a.resource, a.subresource)
        };
        if a.namespace.is_empty() {
            format!(
                "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" at the cluster scope",
                user.name, a.verb, a.api_group
            )
        } else {
            format!(
                "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" in the namespace \"{}\"",
                user.name, a.verb, a.api_group, a.namespace
            )
        }
    };
    if !reason.is_empty() {
        msg = format!("{msg}: {reason}");
    }
    let qualified = match (a.resource.as_str(), a.api_group.as_str()) {
        ("", _) => String::new(),
        (r, "") => r.to_string(),
        (r, g) => format!("{r}.{g}"),
    };
    let full = match (qualified.is_empty(), a.name.is_empty()) {
        (true, _) => format!("forbidden: {msg}"),
        (false, true) => format!("{qualified} is forbidden: {msg}"),
        (false, false) => format!("{qualified} \"{}\" is forbidden: {msg}", a.name),
    };
    let mut e = ApiError::new(403, "Forbidden", full);
    if a.resource_request {
        e.group = Some(a.api_group.clone());
        e.kind = Some(a.resource.clone());
        if !a.name.is_empty() {
            e.name = Some(a.name.clone());
        }
    }
    e
}

/// `authorization.k8s.io/v1 SelfSubjectAccessReview`: whether the requester may
/// do what `spec.resourceAttributes` / `spec.nonResourceAttributes` describe.
pub fn self_subject_access_review(st: &State, user: Option<&UserInfo>, body: &Value) -> Value {
    let a = review_attributes(&body["spec"]);
    let d = match user {
        Some(u) => authorize(st, u, &a),
        // Authorization off: everything is allowed.
        None => Decision {
            allowed: true,
            reason: String::new(),
        },
    };
    review_answer("SelfSubjectAccessReview", body, &d)
}

/// The attributes a review's `spec.resourceAttributes` or
/// `spec.nonResourceAttributes` describe.
fn review_attributes(spec: &Value) -> Attributes {
    let ra = &spec["resourceAttributes"];
    if ra.is_object() {
        let s = |k: &str| ra[k].as_str().unwrap_or("").to_string();
        Attributes {
            verb: s("verb"),
            resource_request: true,
            path: String::new(),
            api_group: s("group"),
            api_version: s("version"),
            namespace: s("namespace"),
            resource: s("resource"),
            subresource: s("subresource"),
            name: s("name"),
        }
    } else {
        let na = &spec["nonResourceAttributes"];
        Attributes {
            verb: na["verb"].as_str().unwrap_or("").into(),
            path: na["path"].as_str().unwrap_or("").into(),
            ..Default::default()
        }
    }
}

/// A review of `kind` answered with `d`: the request's spec and metadata,
/// and `status.allowed` (with `reason` when there is one).
fn review_answer(kind: &str, body: &Value, d: &Decision) -> Value {
    let mut status = json!({"allowed": d.allowed});
    if !d.reason.is_empty() {
        status["reason"] = json!(d.reason);
    }
    let mut out = json!({
        "kind": kind,
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": body["spec"],
        "status": status,
    });
    if let Some(m) = body["metadata"].as_object() {
        out["metadata"] = Value::Object(m.clone());
    }
    out
}

/// `authorization.k8s.io/v1 SubjectAccessReview`: whether `spec.user` with
/// `spec.groups` (taken as given: `system:authenticated` is not added, as
/// kube-apiserver does not) may do what the attributes describe, judged
/// by the stored RBAC objects (everything is allowed when RBAC is off).
/// 422 without a user or group, or without exactly one kind of attributes.
pub fn subject_access_review(st: &State, body: &Value) -> Result<Value, ApiError> {
    let spec = &body["spec"];
    let user = spec["user"].as_str().unwrap_or("");
    let groups: Vec<String> = strs(&spec["groups"]).map(String::from).collect();
    let invalid = |field: &str, message: &str| {
        ApiError::invalid(
            "SubjectAccessReview.authorization.k8s.io",
            "authorization.k8s.io",
            "",
            vec![crate::error::Cause {
                reason: "FieldValueInvalid".into(),
                message: message.into(),
                field: field.into(),
            }],
        )
    };
    if user.is_empty() && groups.is_empty() {
        return Err(invalid(
            "spec.user",
            "Invalid value: \"\": at least one of user or group must be specified",
        ));
    }
    if spec["resourceAttributes"].is_object() == spec["nonResourceAttributes"].is_object() {
        return Err(invalid(
            "spec.resourceAttributes",
            "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    let who = UserInfo {
        name: user.into(),
        uid: spec["uid"].as_str().unwrap_or("").into(),
        groups,
    };
    let d = if st.auth.enabled {
        authorize(st, &who, &review_attributes(spec))
    } else {
        Decision {
            allowed: true,
            reason: String::new(),
        }
    };
    Ok(review_answer("SubjectAccessReview", body, &d))
}

/// Stores the bootstrap policy kube-apiserver creates and this server's
/// authorization relies on (discovery for every authenticated user).
pub fn seed_default_policy(st: &mut State) {
    let all = json!([
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/"
    ]);
    let info = json!(["/healthz", "/livez", "/readyz", "/version", "/version/"]);
    let roles = [
        (
            "system:auth-delegator",
            json!([{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}, {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]),
            json!(null),
        ),
        (
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
            json!([{"apiGroup": GROUP, "kind": "Group", "name": "system:masters"}]),
        ),
        (
            "system:discovery",
            json!([{"nonResourceURLs": all, "verbs": ["get"]}]),
            json!([{"apiGroup": GROUP, "kind": "Group", "name": "system:authenticated"}]),
        ),
        (
            "system:public-info-viewer",
            json!([{"nonResourceURLs": info, "verbs": ["get"]}]),
            json!([{"apiGroup": GROUP, "kind": "Group", "name": "system:authenticated"}, {"apiGroup": GROUP, "kind": "Group", "name": "system:unauthenticated"}]),
        ),
        (
            "system:basic-user",
            json!([{"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]}]),
            json!([{"apiGroup": GROUP, "kind": "Group", "name": "system:authenticated"}]),
        ),
    ];
    let (Some(cr), Some(crb)) = (
        st.registry
            .by_key(&format!("{GROUP}/clusterroles"))
            .cloned(),
        st.registry
            .by_key(&format!("{GROUP}/clusterrolebindings"))
            .cloned(),
    ) else {
        return;
    };
    let labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let annotations = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    for (name, rules, subjects) in roles {
        let bound = !subjects.is_null();
        let role = json!({"metadata": {"name": name, "labels": labels, "annotations": annotations}, "rules": rules});
        let binding = json!({"metadata": {"name": name, "labels": labels, "annotations": annotations},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name}, "subjects": subjects});
        // Valid objects on a fresh store: these creates cannot fail.
        let _ = st.create(&cr, "v1", None, role, &WriteOpts::default());
        // `system:auth-delegator` is granted by installations, not bound here.
        if bound {
            let _ = st.create(&crb, "v1", None, binding, &WriteOpts::default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            api_version: "v1".into(),
            namespace: ns.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            path: String::new(),
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let rule = json!({"apiGroups": [""], "resources": ["pods", "pods/binding"], "verbs": ["get", "list", "create"]});
        assert!(rule_allows(&res("list", "", "pods", "", "ns", ""), &rule));
        assert!(rule_allows(
            &res("create", "", "pods", "binding", "ns", "p"),
            &rule
        ));
        assert!(!rule_allows(
            &res("create", "", "pods", "eviction", "ns", "p"),
            &rule
        ));
        assert!(!rule_allows(&res("watch", "", "pods", "", "ns", ""), &rule));
        assert!(!rule_allows(
            &res("list", "apps", "pods", "", "ns", ""),
            &rule
        ));
        // `*` covers subresources; `*/sub` only that subresource.
        let star = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert!(rule_allows(
            &res("create", "policy", "pods", "eviction", "", "p"),
            &star
        ));
        let sub = json!({"apiGroups": [""], "resources": ["*/status"], "verbs": ["update"]});
        assert!(rule_allows(
            &res("update", "", "nodes", "status", "", "n"),
            &sub
        ));
        assert!(!rule_allows(&res("update", "", "nodes", "", "", "n"), &sub));
        // resourceNames: only named requests of those names (never a list).
        let named = json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["trainyard"], "verbs": ["get", "update", "list"]});
        assert!(rule_allows(
            &res(
                "get",
                "coordination.k8s.io",
                "leases",
                "",
                "ns",
                "trainyard"
            ),
            &named
        ));
        assert!(!rule_allows(
            &res("get", "coordination.k8s.io", "leases", "", "ns", "other"),
            &named
        ));
        assert!(!rule_allows(
            &res("list", "coordination.k8s.io", "leases", "", "ns", ""),
            &named
        ));
        // Non-resource URLs: exact, prefix*, *; resource rules never match them.
        let urls = json!({"nonResourceURLs": ["/metrics", "/apis/*"], "verbs": ["get"]});
        let path = |p: &str| Attributes {
            verb: "get".into(),
            path: p.into(),
            ..Default::default()
        };
        assert!(rule_allows(&path("/metrics"), &urls));
        assert!(rule_allows(&path("/apis/apps/v1"), &urls));
        assert!(!rule_allows(&path("/metricsz"), &urls));
        assert!(!rule_allows(&path("/metrics"), &rule));
        assert!(!rule_allows(&res("get", "", "metrics", "", "", ""), &urls));
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let sa = UserInfo::service_account("ty", "sched", "u1");
        assert!(applies(
            &sa,
            &json!({"kind": "ServiceAccount", "name": "sched", "namespace": "ty"}),
            ""
        ));
        // A RoleBinding's subject without a namespace means the binding's.
        assert!(applies(
            &sa,
            &json!({"kind": "ServiceAccount", "name": "sched"}),
            "ty"
        ));
        assert!(!applies(
            &sa,
            &json!({"kind": "ServiceAccount", "name": "sched"}),
            ""
        ));
        assert!(!applies(
            &sa,
            &json!({"kind": "ServiceAccount", "name": "sched"}),
            "other"
        ));
        assert!(applies(
            &sa,
            &json!({"kind": "Group", "name": "system:serviceaccounts:ty"}),
            ""
        ));
        assert!(applies(
            &sa,
            &json!({"kind": "User", "name": "system:serviceaccount:ty:sched"}),
            ""
        ));
        assert!(!applies(&sa, &json!({"kind": "User", "name": "sched"}), ""));
    }

    #[test]
    fn forbidden_messages_have_kube_apiservers_shape() {
        let u = UserInfo::service_account("ns", "sa", "");
        let e = forbidden(&u, &res("create", "", "pods", "binding", "ns", "x"), "");
        assert_eq!(
            e.message,
            "pods \"x\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot create resource \"pods/binding\" in API group \"\" in the namespace \"ns\""
        );
        let e = forbidden(
            &u,
            &res("list", "coordination.k8s.io", "leases", "", "", ""),
            "RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found",
        );
        assert_eq!(
            e.message,
            "leases.coordination.k8s.io is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found"
        );
        let e = forbidden(
            &u,
            &Attributes {
                verb: "get".into(),
                path: "/metrics".into(),
                ..Default::default()
            },
            "",
        );
        assert_eq!(
            e.message,
            "forbidden: User \"system:serviceaccount:ns:sa\" cannot get path \"/metrics\""
        );
    }
}
