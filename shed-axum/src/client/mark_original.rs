//! The service that marks originals, which tower's retry hands to the
//! client untouched.

use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use tower::Service;

use super::headers;

/// Marks requests that carry no `shed-attempt` header as originals: attempt
/// 1, with the operation's whole deadline less the response reserve as
/// `grpc-timeout`. Retries, already marked by [`ShedRetryPolicy`], pass
/// untouched.
///
/// Made by [`ShedRetryLayer`], between tower's retry and the client
/// service; the future is the client service's own.
///
/// [`ShedRetryPolicy`]: super::ShedRetryPolicy
/// [`ShedRetryLayer`]: super::ShedRetryLayer
///
/// ```
/// use shed_axum::client::{MarkOriginal, ShedRetryLayer};
/// use shed_core::retry::Retrier;
/// use tower::{service_fn, Layer};
///
/// let layer = ShedRetryLayer::new(Retrier::builder().build()?);
/// let client = layer.layer(service_fn(|_req: http::Request<String>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// }));
/// let _marking: &MarkOriginal<_> = client.get_ref();
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct MarkOriginal<S> {
    inner: S,
    forwarded_deadline: Duration,
}

impl<S> MarkOriginal<S> {
    pub(super) fn new(inner: S, forwarded_deadline: Duration) -> Self {
        Self {
            inner,
            forwarded_deadline,
        }
    }

    /// The client service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The client service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The client service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B> Service<Request<B>> for MarkOriginal<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        if !headers::is_marked(req.headers()) {
            headers::mark(req.headers_mut(), 1, self.forwarded_deadline);
        }
        self.inner.call(req)
    }
}
