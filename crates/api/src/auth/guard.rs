//! The authentication layer: wraps a gRPC service so every call carries
//! its [`Caller`] in the request's extensions, or is refused with
//! UNAUTHENTICATED before the service sees it.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::server::NamedService;

use super::{Authorizer, Caller, bearer};

/// How a listener's calls are let in.
#[derive(Clone, Debug)]
pub enum Guard {
    /// Every call is [`Caller::Trusted`].
    Trusted,
    /// Every call needs a bearer token `authorizer` accepts.
    Tokens(Arc<dyn Authorizer>),
}

impl Guard {
    /// The caller of a request with `headers`, or UNAUTHENTICATED.
    pub async fn caller(&self, headers: &http::HeaderMap) -> Result<Caller, Status> {
        let authorizer = match self {
            Guard::Trusted => return Ok(Caller::Trusted),
            Guard::Tokens(a) => a,
        };
        let value = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let Some(token) = bearer(value) else {
            return Err(Status::unauthenticated(
                "this API listener needs a Kubernetes bearer token: send `authorization: Bearer TOKEN` metadata (for example from `kubectl create token NAME`)",
            ));
        };
        match authorizer.authenticate(token).await? {
            Some(identity) => Ok(Caller::User {
                identity: Arc::new(identity),
                authorizer: authorizer.clone(),
            }),
            None => Err(Status::unauthenticated(
                "the bearer token was rejected by the Kubernetes API (TokenReview): it is unknown, expired, or its ServiceAccount is gone",
            )),
        }
    }
}

/// `inner` behind `guard`.
#[derive(Clone, Debug)]
pub struct Guarded<S> {
    inner: S,
    guard: Guard,
}

impl<S> Guarded<S> {
    pub fn new(inner: S, guard: Guard) -> Guarded<S> {
        Guarded { inner, guard }
    }
}

impl<S: NamedService> NamedService for Guarded<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> tonic::codegen::Service<http::Request<Body>> for Guarded<S>
where
    S: tonic::codegen::Service<
            http::Request<Body>,
            Response = http::Response<Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        // The clone is not ready; the one polled ready serves this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let guard = self.guard.clone();
        Box::pin(async move {
            // gRPC is HTTP/2; the listener takes HTTP/1.1 for the
            // dashboard only (a browser page could otherwise call RPCs).
            if req.version() < http::Version::HTTP_2 {
                return Ok(Status::unimplemented(
                    "gRPC needs HTTP/2; over HTTP/1.1 this listener serves the dashboard (/ui) only",
                )
                .into_http());
            }
            match guard.caller(req.headers()).await {
                Ok(caller) => {
                    req.extensions_mut().insert(caller);
                    inner.call(req).await
                }
                Err(status) => {
                    tracing::debug!(path = %req.uri().path(), "refused: {}", status.message());
                    Ok(status.into_http())
                }
            }
        })
    }
}
