//! A tower layer on the kube client that counts and times every API
//! request (`trainyard_api_requests_total`,
//! `trainyard_api_request_duration_seconds`) by verb and resource, as
//! kube-apiserver names them. Time is to the response headers (a watch
//! counts as answered when its stream opens).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request, Response};
use tokio::time::Instant;

use crate::metrics::{Metrics, RequestCodeLabels, RequestLabels};

/// Verb and resource of a request: `("create", "pods/binding")`.
pub fn verb_and_resource(method: &Method, path: &str, query: Option<&str>) -> (String, String) {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/... or /apis/group/version/...
    let rest: &[&str] = match parts.as_slice() {
        ["api", _v, rest @ ..] => rest,
        ["apis", _g, _v, rest @ ..] => rest,
        _ => &[],
    };
    let rest = match rest {
        ["namespaces", _ns, r @ ..] if !r.is_empty() => r,
        r => r,
    };
    let (resource, named) = match rest {
        [] => ("".to_string(), false),
        [r] => (r.to_string(), false),
        [r, _name] => (r.to_string(), true),
        [r, _name, sub, ..] => (format!("{r}/{sub}"), true),
    };
    let watch = query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    let verb = match *method {
        Method::GET if watch => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    };
    let resource = if resource.is_empty() {
        // Discovery and other non-resource paths.
        "discovery".to_string()
    } else {
        resource
    };
    (verb.to_string(), resource)
}

/// The layer.
#[derive(Clone)]
pub struct ApiMetricsLayer(pub Arc<Metrics>);

impl<S> tower_layer::Layer<S> for ApiMetricsLayer {
    type Service = ApiMetrics<S>;
    fn layer(&self, inner: S) -> ApiMetrics<S> {
        ApiMetrics {
            inner,
            metrics: Arc::clone(&self.0),
        }
    }
}

/// The service the layer wraps around the client's.
#[derive(Clone)]
pub struct ApiMetrics<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

impl<S, ReqBody, ResBody> tower_service::Service<Request<ReqBody>> for ApiMetrics<S>
where
    S: tower_service::Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let (verb, resource) = verb_and_resource(req.method(), req.uri().path(), req.uri().query());
        let metrics = Arc::clone(&self.metrics);
        let start = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let r = fut.await;
            let code = match &r {
                Ok(resp) => resp.status().as_u16().to_string(),
                Err(_) => "error".to_string(),
            };
            metrics
                .api_duration
                .get_or_create(&RequestLabels {
                    verb: verb.clone(),
                    resource: resource.clone(),
                })
                .observe(start.elapsed().as_secs_f64());
            metrics
                .api_requests
                .get_or_create(&RequestCodeLabels {
                    verb,
                    resource,
                    code,
                })
                .inc();
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_and_resources_as_the_api_server_names_them() {
        let cases = [
            (
                Method::POST,
                "/api/v1/namespaces/ml/pods/a/binding",
                None,
                ("create", "pods/binding"),
            ),
            (
                Method::POST,
                "/api/v1/namespaces/ml/pods/a/eviction",
                None,
                ("create", "pods/eviction"),
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/ml/pods/a/status",
                None,
                ("patch", "pods/status"),
            ),
            (
                Method::GET,
                "/api/v1/pods",
                Some("watch=true&resourceVersion=5"),
                ("watch", "pods"),
            ),
            (
                Method::GET,
                "/api/v1/pods",
                Some("limit=500"),
                ("list", "pods"),
            ),
            (Method::GET, "/api/v1/nodes/n1", None, ("get", "nodes")),
            (
                Method::PATCH,
                "/apis/trainyard.io/v1alpha1/queues/team/status",
                None,
                ("patch", "queues/status"),
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/ty/leases/trainyard",
                None,
                ("update", "leases"),
            ),
            (
                Method::POST,
                "/api/v1/namespaces/ml/events",
                None,
                ("create", "events"),
            ),
            (Method::GET, "/apis", None, ("list", "discovery")),
        ];
        for (m, path, q, (verb, resource)) in cases {
            assert_eq!(
                verb_and_resource(&m, path, q),
                (verb.to_string(), resource.to_string()),
                "{m} {path}"
            );
        }
    }
}
