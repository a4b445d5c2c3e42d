//! The layer that puts shed's retry policy around an HTTP client service.

use std::task::{Context, Poll};

use http::Request;
use shed_core::retry::RetryPolicy;
use tower::retry::Retry;
use tower::{Layer, Service};

use super::classify::NoConnectErrors;
use super::{headers, ShedRetry};

/// Wraps a client service in [`tower::retry::Retry`] with a [`ShedRetry`]
/// policy, and marks originals (`shed-attempt: 1` and the whole deadline
/// less the response reserve as `grpc-timeout`) on their way in.
///
/// Build the layer once per client: the budget in its [`RetryPolicy`] is
/// shared by every service it makes and every request they send.
///
/// ```
/// use std::sync::Arc;
/// use shed_axum::client::ShedRetryLayer;
/// use shed_core::retry::{RetryBudget, RetryPolicy};
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let policy = RetryPolicy::new(Arc::new(RetryBudget::default()));
/// let client = ServiceBuilder::new()
///     .layer(ShedRetryLayer::new(policy))
///     .service(service_fn(|req: http::Request<String>| async move {
///         assert_eq!(req.headers()["shed-attempt"], "1");
///         assert_eq!(req.headers()["grpc-timeout"], "1450000u");
///         Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
///     }));
/// let response = client.oneshot(http::Request::new(String::new())).await.unwrap();
/// assert_eq!(response.status(), 200);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ShedRetryLayer<C = NoConnectErrors> {
    policy: ShedRetry<C>,
}

impl ShedRetryLayer {
    /// A layer following `policy`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_axum::client::ShedRetryLayer;
    /// use shed_core::retry::{RetryBudget, RetryPolicy};
    ///
    /// let layer = ShedRetryLayer::new(RetryPolicy::new(Arc::new(RetryBudget::default())));
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn new(policy: RetryPolicy) -> Self {
        Self::from_policy(ShedRetry::new(policy))
    }
}

impl<C> ShedRetryLayer<C> {
    /// A layer using a configured [`ShedRetry`] (with an error classifier,
    /// for instance).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_axum::client::{is_connection_refused, ShedRetry, ShedRetryLayer};
    /// use shed_core::retry::{RetryBudget, RetryPolicy};
    ///
    /// let policy = ShedRetry::new(RetryPolicy::new(Arc::new(RetryBudget::default())))
    ///     .classify_errors(|err: &tower::BoxError| is_connection_refused(err.as_ref()));
    /// let layer = ShedRetryLayer::from_policy(policy);
    /// # let _ = layer;
    /// ```
    #[must_use]
    pub fn from_policy(policy: ShedRetry<C>) -> Self {
        Self { policy }
    }
}

impl<S, C: Clone> Layer<S> for ShedRetryLayer<C> {
    type Service = Retry<ShedRetry<C>, MarkOriginal<S>>;

    fn layer(&self, inner: S) -> Self::Service {
        let config = self.policy.policy().config();
        let mark = MarkOriginal {
            inner,
            remaining: config.deadline().saturating_sub(config.response_reserve()),
        };
        Retry::new(self.policy.clone(), mark)
    }
}

/// Marks requests that carry no `shed-attempt` header as originals: attempt
/// 1, with the operation's whole deadline less the response reserve as
/// `grpc-timeout`. Retries, already marked by [`ShedRetry`], pass untouched.
///
/// Made by [`ShedRetryLayer`]; the future is the inner service's own.
///
/// ```
/// use std::sync::Arc;
/// use shed_axum::client::{MarkOriginal, ShedRetryLayer};
/// use shed_core::retry::{RetryBudget, RetryPolicy};
/// use tower::{service_fn, Layer};
///
/// let layer = ShedRetryLayer::new(RetryPolicy::new(Arc::new(RetryBudget::default())));
/// let service = layer.layer(service_fn(|_req: http::Request<String>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// }));
/// let _inner: &MarkOriginal<_> = service.get_ref();
/// ```
#[derive(Debug, Clone)]
pub struct MarkOriginal<S> {
    inner: S,
    remaining: std::time::Duration,
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
            headers::mark(req.headers_mut(), 1, self.remaining);
        }
        self.inner.call(req)
    }
}
