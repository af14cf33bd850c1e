//! API errors, rendered as `meta/v1` `Status` objects the way kube-apiserver does.

use serde_json::{Value, json};

/// One field-level cause inside a `Status`'s `details.causes`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// Machine reason, e.g. `FieldValueInvalid`.
    pub reason: String,
    /// Human message for this cause.
    pub message: String,
    /// Field path, e.g. `spec.weight`.
    pub field: String,
}

/// An error the API answers with: an HTTP code, a `Status` reason and details
/// (boxed, so results that carry it stay small).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} {}: {}", .0.code, .0.reason, .0.message)]
pub struct ApiError(Box<ApiErrorData>);

impl std::ops::Deref for ApiError {
    type Target = ApiErrorData;
    fn deref(&self) -> &ApiErrorData {
        &self.0
    }
}

impl std::ops::DerefMut for ApiError {
    fn deref_mut(&mut self) -> &mut ApiErrorData {
        &mut self.0
    }
}

/// The fields of an [`ApiError`].
#[derive(Debug, Clone)]
pub struct ApiErrorData {
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `details.name`.
    pub name: Option<String>,
    /// `details.group`.
    pub group: Option<String>,
    /// `details.kind` (the resource plural, as the real server writes it).
    pub kind: Option<String>,
    /// `details.causes`.
    pub causes: Vec<Cause>,
    /// `details.retryAfterSeconds` (and the `Retry-After` header).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A bare error with code, reason and message.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError(Box::new(ApiErrorData {
            code,
            reason,
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
            retry_after: None,
        }))
    }

    fn qualified(group: &str, plural: &str) -> String {
        if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        }
    }

    fn with_details(mut self, group: &str, plural: &str, name: &str) -> Self {
        self.group = Some(group.to_string());
        self.kind = Some(plural.to_string());
        if !name.is_empty() {
            self.name = Some(name.to_string());
        }
        self
    }

    /// 404 `pods "x" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        let q = Self::qualified(group, plural);
        Self::new(404, "NotFound", format!("{q} \"{name}\" not found"))
            .with_details(group, plural, name)
    }

    /// 409 `pods "x" already exists`.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let q = Self::qualified(group, plural);
        Self::new(
            409,
            "AlreadyExists",
            format!("{q} \"{name}\" already exists"),
        )
        .with_details(group, plural, name)
    }

    /// 409 Conflict with the optimistic-concurrency message.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        let q = Self::qualified(group, plural);
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {q} \"{name}\": {why}"),
        )
        .with_details(group, plural, name)
    }

    /// The stale-resourceVersion conflict.
    pub fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid with field causes; `kind_q` is e.g. `Widget.example.com`.
    pub fn invalid(kind_q: &str, group: &str, name: &str, causes: Vec<Cause>) -> Self {
        let parts: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let joined = if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{kind_q} \"{name}\" is invalid: {joined}"),
        );
        e.group = Some(group.to_string());
        e.kind = Some(kind_q.split('.').next().unwrap_or(kind_q).to_string());
        e.name = Some(name.to_string());
        e.causes = causes;
        e
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// 410 Gone / Expired.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 429 TooManyRequests.
    pub fn too_many_requests(message: impl Into<String>, retry_after: u64) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message);
        e.retry_after = Some(retry_after);
        e
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml; got {ct}"
            ),
        )
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut st = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = serde_json::Map::new();
        if let Some(n) = &self.name {
            details.insert("name".into(), json!(n));
        }
        if let Some(g) = self.group.as_ref().filter(|g| !g.is_empty()) {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = &self.kind {
            details.insert("kind".into(), json!(k));
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| {
                    let mut o = json!({"reason": c.reason, "message": c.message});
                    if !c.field.is_empty() {
                        o["field"] = json!(c.field);
                    }
                    o
                })
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(r) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(r));
        }
        if !details.is_empty() {
            st["details"] = Value::Object(details);
        }
        st
    }
}

/// A `Status` with `status: Success` (what DELETE of some kinds and eviction return).
pub fn success_status(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

/// Result alias for handlers.
pub type ApiResult<T> = Result<T, ApiError>;
