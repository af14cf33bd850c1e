//! The [`Authorizer`] of a cluster: bearer tokens checked with TokenReview
//! (`authentication.k8s.io/v1`), permissions with SubjectAccessReview
//! (`authorization.k8s.io/v1`), both created with the scheduler's own
//! client (which needs the `system:auth-delegator` ClusterRole, as
//! kube-rbac-proxy and metrics-server do). Answers are cached briefly:
//! tokens keyed by their SHA-256 (the token itself is never kept),
//! permissions by user, groups and permission; each cache is bounded.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::{AuthError, Authorizer, Identity, Permission};

/// The client reviews are created with (the scheduler's own).
pub use kube::Client;

/// How long answers are kept.
#[derive(Clone, Copy, Debug)]
pub struct CacheTtl {
    /// A token accepted, a permission granted.
    pub yes: Duration,
    /// A token rejected, a permission refused (shorter: a new
    /// RoleBinding should take effect soon).
    pub no: Duration,
    /// Entries per cache; past it, expired ones go, then all.
    pub capacity: usize,
}

impl Default for CacheTtl {
    fn default() -> CacheTtl {
        CacheTtl {
            yes: Duration::from_secs(60),
            no: Duration::from_secs(10),
            capacity: 4096,
        }
    }
}

/// A bounded map whose entries expire.
#[derive(Debug)]
struct Cache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
    capacity: usize,
}

impl<K: Eq + Hash, V: Clone> Cache<K, V> {
    fn new(capacity: usize) -> Cache<K, V> {
        Cache {
            entries: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    fn get(&self, k: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(k)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, v)| v.clone())
    }

    fn put(&self, k: K, v: V, ttl: Duration) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity {
            entries.retain(|_, (until, _)| *until > now);
            if entries.len() >= self.capacity {
                entries.clear();
            }
        }
        entries.insert(k, (now + ttl, v));
    }
}

/// TokenReview and SubjectAccessReview through `client`.
pub struct KubeAuthorizer {
    client: kube::Client,
    ttl: CacheTtl,
    tokens: Cache<[u8; 32], Option<Identity>>,
    access: Cache<(String, Vec<String>, Permission), bool>,
}

impl std::fmt::Debug for KubeAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeAuthorizer")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl KubeAuthorizer {
    pub fn new(client: kube::Client, ttl: CacheTtl) -> KubeAuthorizer {
        KubeAuthorizer {
            client,
            ttl,
            tokens: Cache::new(ttl.capacity),
            access: Cache::new(ttl.capacity),
        }
    }

    fn ttl(&self, yes: bool) -> Duration {
        if yes { self.ttl.yes } else { self.ttl.no }
    }
}

/// SHA-256 of `token`: the cache's key.
fn digest(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// What a failed review means, for the operator.
fn review_error(e: &kube::Error, resource: &str) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 => format!(
            "the scheduler may not create {resource} ({}); bind its ServiceAccount to the ClusterRole system:auth-delegator (the chart does when api.expose.enabled is true)",
            s.message
        ),
        other => other.to_string(),
    }
}

#[tonic::async_trait]
impl Authorizer for KubeAuthorizer {
    async fn authenticate(&self, token: &str) -> Result<Option<Identity>, AuthError> {
        let key = digest(token);
        if let Some(known) = self.tokens.get(&key) {
            return Ok(known);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let answer = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AuthError::TokenReview(review_error(&e, "tokenreviews")))?;
        let status = answer.status.unwrap_or_default();
        let identity = match (status.authenticated, status.user) {
            (Some(true), Some(u)) => Some(Identity {
                user: u.username.unwrap_or_default(),
                uid: u.uid.unwrap_or_default(),
                groups: u.groups.unwrap_or_default(),
                extra: u.extra.unwrap_or_default().into_iter().collect(),
            }),
            _ => None,
        };
        if let Some(err) = status.error.filter(|_| identity.is_none()) {
            tracing::debug!("a bearer token was rejected: {err}");
        }
        self.tokens
            .put(key, identity.clone(), self.ttl(identity.is_some()));
        Ok(identity)
    }

    async fn allowed(&self, who: &Identity, what: &Permission) -> Result<bool, AuthError> {
        let key = (who.user.clone(), who.groups.clone(), what.clone());
        if let Some(known) = self.access.get(&key) {
            return Ok(known);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(who.user.clone()),
                uid: (!who.uid.is_empty()).then(|| who.uid.clone()),
                groups: Some(who.groups.clone()),
                extra: (!who.extra.is_empty()).then(|| who.extra.clone().into_iter().collect()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(what.verb.to_string()),
                    group: Some(Permission::GROUP.to_string()),
                    resource: Some(Permission::RESOURCE.to_string()),
                    namespace: (!what.namespace.is_empty()).then(|| what.namespace.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AuthError::AccessReview(review_error(&e, "subjectaccessreviews")))?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        self.access.put(key, allowed, self.ttl(allowed));
        Ok(allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_expires_and_stays_bounded() {
        let c: Cache<u32, bool> = Cache::new(2);
        c.put(1, true, Duration::from_secs(60));
        c.put(2, false, Duration::ZERO);
        assert_eq!(c.get(&1), Some(true));
        assert_eq!(c.get(&2), None, "expired");
        // Full: the expired entry goes, the live one stays.
        c.put(3, true, Duration::from_secs(60));
        assert_eq!((c.get(&1), c.get(&3)), (Some(true), Some(true)));
        // Full of live entries: all go.
        c.put(4, true, Duration::from_secs(60));
        assert_eq!((c.get(&1), c.get(&3), c.get(&4)), (None, None, Some(true)));
    }

    #[test]
    fn tokens_are_kept_as_digests() {
        assert_eq!(digest("a"), digest("a"));
        assert_ne!(digest("a"), digest("b"));
    }
}
