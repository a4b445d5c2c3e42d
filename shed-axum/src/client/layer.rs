//! The layer that puts a [`Retrier`] around an HTTP or gRPC client service.

use shed_core::retry::Retrier;
use tower::retry::Retry;
use tower::Layer;

use super::classify::NoConnectErrors;
use super::{BoxReplay, MarkOriginal, RecordBody, ShedRetryPolicy};

/// Retries the calls of an HTTP client service as a [`Retrier`] decides,
/// marking every attempt: `shed-attempt: N`, and what is left of the
/// operation's deadline as `grpc-timeout`, so a shed server sheds retries
/// first and refuses what cannot finish in time. The attempt number
/// replaces any the request arrived with: each request sent through the
/// layer is this client's own operation. A deadline it arrived with in
/// `grpc-timeout` (tonic's `Request::set_timeout`) is kept when it is the
/// shorter: the operation ends there. Each retry waits at least the
/// server's pushback.
///
/// The service it makes is a [`MarkOriginal`] around
/// [`tower::retry::Retry`] with a [`ShedRetryPolicy`] around the client
/// service (with [`replay_buffer`](Self::replay_buffer), a [`RecordBody`]
/// between the two and a [`BoxReplay`] around the client service). Build
/// the layer once per client: its retrier's budget is shared by every
/// service it makes and every request they send.
///
/// # Which requests are retried
///
/// A request is replayed only if declared safe: by a
/// [`Replay`](shed_core::retry::Replay) request extension, or failing that
/// by an idempotent method (`GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT`,
/// `DELETE`; RFC 9110 section 9.2.2). `POST` and `PATCH` are never retried
/// unless the request carries `Replay::Safe`. A gRPC call (see below) is
/// [`Replay::WhenRefused`](shed_core::retry::Replay::WhenRefused) unless its
/// extension says otherwise. Errors are retried only when the classifier
/// says they are connect errors ([`classify_errors`](Self::classify_errors)).
///
/// # Request bodies
///
/// Retrying resends the request. By default the body is cloned, so it must
/// be `Clone` (`String`, `Bytes`, `http_body_util::Full<Bytes>`...). A body
/// that is not (`tonic::body::Body`, `axum::body::Body`, a stream) is
/// recorded as it is sent, up to a byte budget, by
/// [`replay_buffer`](Self::replay_buffer); a request whose body outgrows the
/// budget is sent once and not retried
/// ([`Reason::BodyTooLarge`](shed_core::retry::Reason::BodyTooLarge)).
///
/// # gRPC
///
/// A request whose `content-type` is `application/grpc` (or `+proto`,
/// `+json`...) is a gRPC call, and is retried in gRPC's terms:
///
/// - How an attempt ended is its `grpc-status`, read from a trailers-only
///   answer (HTTP 200 with `grpc-status` in the headers): `OK` succeeds;
///   `RESOURCE_EXHAUSTED` and `UNAVAILABLE` are retryable by default, as a
///   gRFC A6 retry policy's `retryableStatusCodes` usually are;
///   `DEADLINE_EXCEEDED` is not (its deadline is spent). Change the codes
///   with [`RetryableSet::add_grpc_status`](shed_core::retry::RetryableSet::add_grpc_status).
///   An answer that began with headers alone has committed the call (A6):
///   it is not retried, whatever status its trailers carry.
/// - Which calls are retried: a gRPC call is a `POST`, which says nothing
///   about whether running it twice is harmless. Unless its
///   [`Replay`](shed_core::retry::Replay) extension says otherwise, a call
///   is retried only when the server vouched it did not run it: the
///   refusal carried `grpc-retry-pushback-ms` (a shed server's door sends
///   it with `RESOURCE_EXHAUSTED` or `UNAVAILABLE`: the handler never ran),
///   or the connection was never made. That is
///   [`Replay::WhenRefused`](shed_core::retry::Replay::WhenRefused). Insert
///   `Replay::Safe` in a call's extensions to retry every retryable status
///   (as a gRPC retry policy configured for the method would), or
///   `Replay::Unsafe` to never retry it.
/// - Pushback: a retry waits at least `grpc-retry-pushback-ms`; a negative
///   or malformed value means "do not retry" (A6), counted as
///   [`Reason::ServerRefused`](shed_core::retry::Reason::ServerRefused).
/// - Markers: every attempt carries `shed-attempt: N` and the remaining
///   deadline as `grpc-timeout`; a retry also carries
///   `grpc-previous-rpc-attempts: N - 1`, as gRPC clients send it, and an
///   original none (any it arrived with is removed).
///
/// tonic's `Channel` takes `tonic::body::Body`, which is not `Clone`: use
/// [`replay_buffer`](Self::replay_buffer) with shed-axum's `tonic` feature,
/// which hands each attempt's recorded body to the channel as a
/// `tonic::body::Body`. The layer goes between the generated client and the
/// channel; no adapter is needed.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
/// use shed_axum::client::ShedRetryLayer;
/// use shed_core::retry::Retrier;
/// use tower::{service_fn, ServiceBuilder};
/// # use http_body_util::BodyExt;
/// # /// One empty message, then trailers with `grpc-status: 0`.
/// # fn one_empty_message() -> tonic::body::Body {
/// #     let message = http_body_util::Full::new(bytes::Bytes::from_static(&[0, 0, 0, 0, 0]));
/// #     let mut trailers = http::HeaderMap::new();
/// #     trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
/// #     tonic::body::Body::new(message.with_trailers(async { Some(Ok(trailers)) }))
/// # }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Stands in for a tonic `Channel`: refuses the first attempt as a shed
/// // server's door does, then answers.
/// let attempts = Arc::new(AtomicU32::new(0));
/// let seen = Arc::clone(&attempts);
/// let channel = service_fn(move |req: http::Request<tonic::body::Body>| {
///     let attempt = seen.fetch_add(1, Ordering::Relaxed) + 1;
///     let previous = req.headers().get("grpc-previous-rpc-attempts").cloned();
///     async move {
///         let answer = http::Response::builder().header("content-type", "application/grpc");
///         let answer = if attempt == 1 {
///             assert_eq!(previous, None);
///             // Trailers-only: the status in the headers, no message.
///             let refusal = answer.header("grpc-status", "8").header("grpc-retry-pushback-ms", "250");
///             refusal.body(tonic::body::Body::empty())
///         } else {
///             assert_eq!(previous.unwrap(), "1");
///             answer.body(one_empty_message())
///         };
///         Ok::<_, std::convert::Infallible>(answer.unwrap())
///     }
/// });
///
/// let channel = ServiceBuilder::new()
///     .layer(ShedRetryLayer::new(Retrier::builder().build()?).replay_buffer(64 * 1024))
///     .service(channel);
/// // What a generated client does with the channel it is given:
/// let mut client = tonic::client::Grpc::new(channel);
/// client.ready().await?;
/// let path = http::uri::PathAndQuery::from_static("/grpc.health.v1.Health/Check");
/// let codec = tonic_prost::ProstCodec::<(), ()>::default();
/// client.unary(tonic::Request::new(()), path, codec).await?;
/// assert_eq!(attempts.load(Ordering::Relaxed), 2);
/// # Ok(())
/// # }
/// ```
///
/// # With a throttle
///
/// A [`ShedThrottleLayer`](super::ShedThrottleLayer) goes inside this
/// layer, between it and the transport, so that every attempt is judged at
/// its own rank. An answer the throttle made up
/// ([`RefusedLocally`](super::RefusedLocally)) ends the operation without
/// asking the retrier, and the throttle is asked about a retry before the
/// retrier takes its credit: local refusals spend no retry budget. See
/// [With retries](super::ShedThrottleLayer#with-retries).
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
pub struct ShedRetryLayer<C = NoConnectErrors, K = CloneBody> {
    retrier: Retrier,
    classify: C,
    bodies: K,
}

/// How a [`ShedRetryLayer`] keeps request bodies to send them again: it
/// clones them (the default; the body must be `Clone`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CloneBody;

/// How a [`ShedRetryLayer`] keeps request bodies to send them again: it
/// records each as it is sent, up to a byte budget, in a
/// [`ReplayBody`](super::ReplayBody). Set by
/// [`ShedRetryLayer::replay_buffer`].
#[derive(Debug, Clone, Copy)]
pub struct ReplayBuffer {
    max_bytes: usize,
}

impl ReplayBuffer {
    /// The most data bytes recorded per request.
    #[must_use]
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

impl ShedRetryLayer {
    /// A layer retrying as `retrier` decides, treating no transport error
    /// as a connect error, cloning request bodies to send them again.
    pub fn new(retrier: Retrier) -> Self {
        Self {
            retrier,
            classify: NoConnectErrors,
            bodies: CloneBody,
        }
    }
}

impl<C, K> ShedRetryLayer<C, K> {
    /// Records each request body as it is sent, up to `max_bytes` of data,
    /// and sends the record again on a retry, so bodies need not be
    /// `Clone`; a request whose body outgrows `max_bytes` is sent once and
    /// not retried, counted as
    /// [`Reason::BodyTooLarge`](shed_core::retry::Reason::BodyTooLarge).
    ///
    /// The client service receives each attempt's body as its own body
    /// type, boxed through `From<ReplayBody<B>> for B`
    /// ([`BoxReplay`](super::BoxReplay)): shed provides it for
    /// `tonic::body::Body` (feature `tonic`) and `axum::body::Body`
    /// (feature `axum`).
    ///
    /// ```
    /// use axum::body::Body;
    /// use http_body_util::BodyExt;
    /// use shed_axum::client::ShedRetryLayer;
    /// use shed_core::retry::Retrier;
    /// use tower::{service_fn, ServiceBuilder, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), tower::BoxError> {
    /// let client = ServiceBuilder::new()
    ///     .layer(ShedRetryLayer::new(Retrier::builder().build()?).replay_buffer(64 * 1024))
    ///     .service(service_fn(|req: http::Request<Body>| async move {
    ///         let attempt = req.headers()["shed-attempt"].clone();
    ///         let body = req.into_body().collect().await?.to_bytes();
    ///         assert_eq!(body, "report");
    ///         let status = if attempt == "1" { 503 } else { 200 };
    ///         Ok::<_, tower::BoxError>(http::Response::builder().status(status).body(Body::empty())?)
    ///     }));
    /// let response = client.oneshot(http::Request::put("/").body(Body::from("report"))?).await?;
    /// assert_eq!(response.status(), 200);
    /// # Ok(())
    /// # }
    /// ```
    pub fn replay_buffer(self, max_bytes: usize) -> ShedRetryLayer<C, ReplayBuffer> {
        ShedRetryLayer {
            retrier: self.retrier,
            classify: self.classify,
            bodies: ReplayBuffer { max_bytes },
        }
    }

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
    pub fn classify_errors<D>(self, classify: D) -> ShedRetryLayer<D, K> {
        ShedRetryLayer {
            retrier: self.retrier,
            classify,
            bodies: self.bodies,
        }
    }

    fn policy(&self) -> ShedRetryPolicy<C>
    where
        C: Clone,
    {
        ShedRetryPolicy::new(self.retrier.clone(), self.classify.clone())
    }
}

impl<S, C: Clone> Layer<S> for ShedRetryLayer<C, CloneBody> {
    type Service = MarkOriginal<Retry<ShedRetryPolicy<C>, S>>;

    fn layer(&self, inner: S) -> Self::Service {
        let retry = Retry::new(self.policy(), inner);
        MarkOriginal::new(retry, self.retrier.clone())
    }
}

impl<S, C: Clone> Layer<S> for ShedRetryLayer<C, ReplayBuffer> {
    type Service = MarkOriginal<RecordBody<Retry<ShedRetryPolicy<C>, BoxReplay<S>>>>;

    fn layer(&self, inner: S) -> Self::Service {
        let retry = Retry::new(self.policy(), BoxReplay::new(inner));
        let record = RecordBody::new(retry, self.bodies.max_bytes);
        MarkOriginal::new(record, self.retrier.clone())
    }
}
