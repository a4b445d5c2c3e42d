//! The service that marks every request as an original before tower's retry
//! sees it.

use http::Request;
use shed_core::retry::Retrier;
use std::task::{Context, Poll};
use tower::Service;

use super::headers::{self, CallerDeadline};

/// Marks every request as this client's original: `shed-attempt: 1`, with
/// the operation's whole deadline less the response reserve as
/// `grpc-timeout`, replacing any attempt number the request arrived with (a
/// proxy that copies its caller's headers onto its own call would otherwise
/// pass on the caller's attempt number). A deadline the request arrived with
/// in `grpc-timeout` (tonic's `Request::set_timeout`, or a caller's copied
/// by a proxy) is never lengthened: when it is the shorter, the operation
/// ends there and the original forwards it, less the response reserve.
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
    retrier: Retrier,
}

impl<S> MarkOriginal<S> {
    pub(super) fn new(inner: S, retrier: Retrier) -> Self {
        Self { inner, retrier }
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
        let forwarded = match headers::caller_deadline(req.headers()) {
            Some(caller) => {
                req.extensions_mut().insert(CallerDeadline(caller));
                self.retrier.forwarded_deadline_within(caller)
            }
            None => self.retrier.forwarded_deadline(),
        };
        headers::mark(req.headers_mut(), 1, forwarded);
        self.inner.call(req)
    }
}
