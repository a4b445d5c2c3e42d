//! The service that marks every request as an original before tower's retry
//! sees it.

use std::task::{Context, Poll};
use std::time::Duration;

use http::Request;
use tower::Service;

use super::headers;

/// Marks every request as this client's original: `shed-attempt: 1`, with
/// the operation's whole deadline less the response reserve as
/// `grpc-timeout`, replacing any attempt number or deadline the request
/// arrived with. A proxy that copies its caller's headers onto its own call
/// would otherwise pass on the caller's attempt number and deadline.
/// Retries are marked by [`ShedRetryPolicy`].
///
/// Made by [`ShedRetryLayer`], outside tower's retry; the future is the
/// retry's own.
///
/// [`ShedRetryPolicy`]: super::ShedRetryPolicy
/// [`ShedRetryLayer`]: super::ShedRetryLayer
///
/// ```
/// use shed_axum::client::{MarkOriginal, ShedRetryLayer};
/// use shed_core::retry::Retrier;
/// use tower::retry::Retry;
/// use tower::{service_fn, Layer};
///
/// let layer = ShedRetryLayer::new(Retrier::builder().build()?);
/// let client: MarkOriginal<_> = layer.layer(service_fn(|_req: http::Request<String>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// }));
/// let _retry: &Retry<_, _> = client.get_ref();
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

    /// The service it marks requests for: tower's retry around the client
    /// service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The service it marks requests for, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The service it marks requests for, unwrapped.
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
        headers::mark(req.headers_mut(), 1, self.forwarded_deadline);
        self.inner.call(req)
    }
}
