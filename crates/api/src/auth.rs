//! Who calls the API, and what they may see.
//!
//! A listener is either trusted (the Unix socket, mode 0600; loopback
//! unless `--api-require-auth`) or guarded: every call there carries a
//! Kubernetes bearer token (`authorization: Bearer TOKEN`), which the
//! [`Authorizer`] authenticates (TokenReview), and each RPC then asks it
//! for the Kubernetes permission its answer needs (SubjectAccessReview):
//!
//! | RPC | needs |
//! |---|---|
//! | `ListQueues` | an authenticated caller (queue totals count every job, anonymously) |
//! | `ListJobs` | shows the jobs of the namespaces where the caller may `list pods`; others are omitted. A `namespace` (or `user`) filter the caller may not `list pods` in is PERMISSION_DENIED |
//! | `ExplainJob`, `WhatIf` (`ForecastStart` the same) | `get pods` in the job's namespace (each namespace of a what-if's objects); evictions and displaced jobs in namespaces the caller may not `list pods` in are shown without their names |
//! | `WatchDecisions` | binds, evictions and reasons of the namespaces where the caller may `list pods` |
//! | `GetSnapshot` | `list pods` cluster-wide (it has every object) |
//!
//! [`guard`] is the tower layer that authenticates; [`kubernetes`] the
//! [`Authorizer`] over TokenReview and SubjectAccessReview. The rest of
//! this module is pure: the decisions, the statuses and the filters.

pub mod guard;
pub mod kubernetes;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use tonic::Status;

use crate::pb;

/// A caller as TokenReview authenticated them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// A Kubernetes permission on core `pods`: `verb` in `namespace`, or in
/// every namespace when it is empty (a ClusterRoleBinding's grant).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Permission {
    pub verb: &'static str,
    pub namespace: String,
}

impl Permission {
    /// The API group and resource every check is about (core `pods`).
    pub const GROUP: &'static str = "";
    pub const RESOURCE: &'static str = "pods";

    /// `get pods` in `namespace`: explaining, what-ifs and forecasts.
    pub fn get_pods(namespace: &str) -> Permission {
        Permission {
            verb: "get",
            namespace: namespace.into(),
        }
    }

    /// `list pods` in `namespace`: seeing its jobs in lists and streams.
    pub fn list_pods(namespace: &str) -> Permission {
        Permission {
            verb: "list",
            namespace: namespace.into(),
        }
    }

    /// `list pods` in every namespace: the snapshot.
    pub fn list_pods_everywhere() -> Permission {
        Permission::list_pods("")
    }

    /// The `kubectl auth can-i` line that asks the same question.
    pub fn can_i(&self, user: &str) -> String {
        let scope = if self.namespace.is_empty() {
            "--all-namespaces".to_string()
        } else {
            format!("-n {}", self.namespace)
        };
        format!("kubectl auth can-i {} pods {scope} --as {user}", self.verb)
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "`{} pods` in every namespace", self.verb)
        } else {
            write!(
                f,
                "`{} pods` in namespace \"{}\"",
                self.verb, self.namespace
            )
        }
    }
}

/// The authenticator or authorizer could not answer (the Kubernetes API
/// unreachable, or the review refused): the call is UNAVAILABLE.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("checking the caller's token (TokenReview): {0}")]
    TokenReview(String),
    #[error("checking the caller's rights (SubjectAccessReview): {0}")]
    AccessReview(String),
}

impl From<AuthError> for Status {
    fn from(e: AuthError) -> Status {
        Status::unavailable(format!("{e}; try again in a moment"))
    }
}

/// Authenticates bearer tokens and answers permission questions.
#[tonic::async_trait]
pub trait Authorizer: Send + Sync + fmt::Debug + 'static {
    /// Whom `token` authenticates as; `Ok(None)` when it is rejected.
    async fn authenticate(&self, token: &str) -> Result<Option<Identity>, AuthError>;
    /// Whether `who` has `what`.
    async fn allowed(&self, who: &Identity, what: &Permission) -> Result<bool, AuthError>;
}

/// Who makes a call: put in each request's extensions by [`guard`].
#[derive(Clone, Debug)]
pub enum Caller {
    /// A trusted listener (the socket; loopback unless auth is required
    /// there): everything is allowed.
    Trusted,
    /// An authenticated user, judged by `authorizer`.
    User {
        identity: Arc<Identity>,
        authorizer: Arc<dyn Authorizer>,
    },
}

/// What namespaces' jobs a caller sees by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Visible {
    All,
    Only(BTreeSet<String>),
}

impl Visible {
    pub fn shows(&self, namespace: &str) -> bool {
        match self {
            Visible::All => true,
            Visible::Only(set) => set.contains(namespace),
        }
    }

    /// Whether job `id` (`namespace/name`) is shown.
    pub fn shows_job(&self, id: &str) -> bool {
        self.shows(namespace_of(id))
    }
}

/// The namespace of `namespace/name` (empty when there is no `/`).
pub fn namespace_of(id: &str) -> &str {
    id.split_once('/').map_or("", |(ns, _)| ns)
}

impl Caller {
    /// The caller of `r`. A request without one came through routes
    /// built without [`guard`]: refused, never taken as trusted.
    pub fn of<T>(r: &tonic::Request<T>) -> Result<Caller, Status> {
        r.extensions()
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| Status::internal("the API's routes lack their authentication layer"))
    }

    /// Whether the caller has `p`.
    pub async fn may(&self, p: &Permission) -> Result<bool, Status> {
        match self {
            Caller::Trusted => Ok(true),
            Caller::User {
                identity,
                authorizer,
            } => Ok(authorizer.allowed(identity, p).await?),
        }
    }

    /// PERMISSION_DENIED, naming the permission, unless the caller has `p`.
    pub async fn require(&self, p: &Permission, rpc: &str) -> Result<(), Status> {
        if self.may(p).await? {
            return Ok(());
        }
        let user = match self {
            Caller::User { identity, .. } => identity.user.as_str(),
            Caller::Trusted => "",
        };
        Err(denied(user, p, rpc))
    }

    /// The namespaces among `namespaces` whose jobs the caller sees by
    /// name (`list pods` there, or cluster-wide).
    pub async fn visible<'a>(
        &self,
        namespaces: impl IntoIterator<Item = &'a str>,
    ) -> Result<Visible, Status> {
        if let Caller::Trusted = self {
            return Ok(Visible::All);
        }
        if self.may(&Permission::list_pods_everywhere()).await? {
            return Ok(Visible::All);
        }
        let wanted: BTreeSet<&str> = namespaces.into_iter().collect();
        let mut shown = BTreeSet::new();
        for ns in wanted {
            if self.may(&Permission::list_pods(ns)).await? {
                shown.insert(ns.to_string());
            }
        }
        Ok(Visible::Only(shown))
    }
}

/// PERMISSION_DENIED for `user` lacking `p` for `rpc`.
pub fn denied(user: &str, p: &Permission, rpc: &str) -> Status {
    Status::permission_denied(format!(
        "user \"{user}\" may not {rpc}: it needs {p} (check with `{}`)",
        p.can_i(user)
    ))
}

/// The token of an `authorization` header value: `Bearer TOKEN`
/// (the scheme in any case), `None` when absent or empty.
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Keeps the jobs whose namespace `v` shows.
pub fn filter_jobs(r: &mut pb::ListJobsResponse, v: &Visible) {
    r.jobs.retain(|j| v.shows(&j.namespace));
}

/// Keeps the binds, evictions and reason changes of jobs `v` shows (the
/// count of pending jobs stays the whole cycle's).
pub fn filter_decisions(m: &mut pb::CycleDecisions, v: &Visible) {
    m.binds.retain(|b| v.shows_job(&b.job));
    m.evictions.retain(|e| v.shows_job(&e.job));
    m.reasons.retain(|r| v.shows_job(&r.job));
}

/// What stands for a job the caller may not see by name.
pub const HIDDEN: &str = "(a job in a namespace you may not list pods in)";

/// Hides the names of evicted and displaced jobs `v` does not show (the
/// node and kind of each eviction stay: they tell what the what-if costs).
pub fn redact_what_if(r: &mut pb::WhatIfResponse, v: &Visible) {
    for e in &mut r.evictions {
        if !v.shows_job(&e.job) {
            e.job = HIDDEN.into();
            e.pod = String::new();
            e.message = String::new();
        }
    }
    for d in &mut r.displaced {
        if !v.shows_job(d) {
            *d = HIDDEN.into();
        }
    }
}

/// Hides the names of the jobs a forecast waits for that `v` does not
/// show (when they end and the nodes they free stay).
pub fn redact_forecast(r: &mut pb::ForecastStartResponse, v: &Visible) {
    for w in &mut r.waits_for {
        if !v.shows_job(&w.job) {
            w.job = HIDDEN.into();
        }
    }
}

/// The namespaces of the jobs a what-if answer names.
pub fn what_if_namespaces(r: &pb::WhatIfResponse) -> BTreeSet<&str> {
    r.evictions
        .iter()
        .map(|e| namespace_of(&e.job))
        .chain(r.displaced.iter().map(|d| namespace_of(d)))
        .collect()
}

#[cfg(test)]
mod tests;
