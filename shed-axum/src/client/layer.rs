//! The layer that puts a [`Retrier`] around an HTTP client service.

use shed_core::retry::Retrier;
use tower::retry::Retry;
use tower::Layer;

use super::classify::NoConnectErrors;
use super::{MarkOriginal, ShedRetryPolicy};

/// Retries the calls of an HTTP client service as a [`Retrier`] decides,
/// marking every attempt: `shed-attempt: N`, and what is left of the
/// operation's deadline as `grpc-timeout`, so a shed server sheds retries
/// first and refuses what cannot finish in time. Both replace any the
/// request arrived with: each request sent through the layer is this
/// client's own operation. Each retry waits at least the server's pushback.
///
/// The service it makes is a [`MarkOriginal`] around
/// [`tower::retry::Retry`] with a [`ShedRetryPolicy`] around the client
/// service. Build the layer once per client: its retrier's budget is shared
/// by every service it makes and every request they send.
///
/// # Which requests are retried
///
/// A request is replayed only if declared safe: by a
/// [`Replay`](shed_core::retry::Replay) request extension, or failing that
/// by an idempotent method (`GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT`,
/// `DELETE`; RFC 9110 section 9.2.2). `POST` and `PATCH` are never retried
/// unless the request carries `Replay::Safe`. Errors are retried only when
/// the classifier says they are connect errors
/// ([`classify_errors`](Self::classify_errors)).
///
/// # Request bodies
///
/// Retrying resends the request, so the body must be `Clone` (`String`,
/// `Bytes`, `http_body_util::Full<Bytes>`...). Buffer a streaming body into
/// one of those before the retry layer.
///
/// # Panics
///
/// The delay before a retry is a [`tokio::time::Sleep`]: retrying needs a
/// tokio runtime with time enabled, as [`tokio::time::sleep`] does.
///
/// ```
/// use shed_axum::client::ShedRetryLayer;
/// use shed_core::retry::Retrier;
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), shed_core::ConfigError> {
/// let client = ServiceBuilder::new()
///     .layer(ShedRetryLayer::new(Retrier::builder().build()?))
///     .service(service_fn(|req: http::Request<String>| async move {
///         assert_eq!(req.headers()["shed-attempt"], "1");
///         assert_eq!(req.headers()["grpc-timeout"], "1450000u");
///         Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
///     }));
/// let response = client.oneshot(http::Request::new(String::new())).await.unwrap();
/// assert_eq!(response.status(), 200);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ShedRetryLayer<C = NoConnectErrors> {
    retrier: Retrier,
    classify: C,
}

impl ShedRetryLayer {
    /// A layer retrying as `retrier` decides, treating no transport error
    /// as a connect error.
    pub fn new(retrier: Retrier) -> Self {
        Self {
            retrier,
            classify: NoConnectErrors,
        }
    }
}

impl<C> ShedRetryLayer<C> {
    /// Uses `classify` to recognise connect errors (the request never
    /// reached the server), which are then retried if the retrier's
    /// retryable set includes them, as it does by default.
    ///
    /// ```
    /// use shed_axum::client::{is_connection_refused, ShedRetryLayer};
    /// use shed_core::retry::Retrier;
    ///
    /// let layer = ShedRetryLayer::new(Retrier::builder().build()?)
    ///     .classify_errors(|err: &tower::BoxError| is_connection_refused(err.as_ref()));
    /// # let _ = layer;
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn classify_errors<D>(self, classify: D) -> ShedRetryLayer<D> {
        ShedRetryLayer {
            retrier: self.retrier,
            classify,
        }
    }
}

impl<S, C: Clone> Layer<S> for ShedRetryLayer<C> {
    type Service = MarkOriginal<Retry<ShedRetryPolicy<C>, S>>;

    fn layer(&self, inner: S) -> Self::Service {
        let policy = ShedRetryPolicy::new(self.retrier.clone(), self.classify.clone());
        MarkOriginal::new(Retry::new(policy, inner), self.retrier.forwarded_deadline())
    }
}
