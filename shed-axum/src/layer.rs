//! The tower [`Layer`]: configuration and the shared engine.
//!
//! ```
//! use axum::{routing::get, Router};
//! use shed_axum::ShedLayer;
//! use shed_core::{Class, Shedder};
//!
//! let shedder = Shedder::builder().limit(64).build()?;
//! // Route groups, each under its own layer of one shared engine: the batch
//! // routes are judged as batch, and all of them count against one limit.
//! let interactive = Router::new()
//!     .route("/search", get(|| async { "results" }))
//!     .route_layer(ShedLayer::new(shedder.clone()));
//! let batch = Router::new()
//!     .route("/export", get(|| async { "csv" }))
//!     .route_layer(ShedLayer::new(shedder).class(Class::Batch));
//! let app: Router = interactive.merge(batch);
//! # Ok::<(), shed_core::ConfigError>(())
//! ```
//!
//! Layers of one engine sit side by side, not nested: see
//! [Nesting](ShedLayer#nesting).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, Response, StatusCode};
use shed_core::{Class, Rejection, Shedder};
use tower::Layer;

use crate::body::ShedBody;
use crate::classify::{Classification, ClassifyRules};
use crate::feedback::LoadFeedback;
use crate::hook::{BypassRequest, ClassifyRequest, MakeCohortKey, OnRejection, RequestHead};
use crate::reject::{GrpcOverloadStatus, Responder};
use crate::Shed;

/// When a served request gives its slot back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReleaseOn {
    /// When the response body is finished or dropped: streaming responses
    /// count against the limit while they stream. The default.
    #[default]
    BodyEnd,
    /// As soon as the inner service has produced the response head.
    Headers,
}

/// Admission control for every request through the wrapped service.
///
/// The engine ([`Shedder`]) is created before the layer and shared by every
/// clone of it, so applying the layer per route, per router, or many times
/// (axum calls [`Layer::layer`] again for each route) always enforces one
/// limit. Two layers built from clones of one `Shedder` share it too: that is
/// how routes get their own class.
///
/// Each request is classified from its head: its class (the layer's
/// [`class`](ShedLayer::class), a [`classifier`](ShedLayer::classifier), or
/// a [caller's header](ShedLayer::caller_class_header)), its attempt (retry
/// markers), its deadline (`grpc-timeout` and friends) and an optional
/// [cohort key](ShedLayer::cohort_key).
///
/// # Nesting
///
/// Give each request exactly one layer per engine: put the layers side by
/// side (per route, or per group of routes with `route_layer`), not one
/// inside the other. Nested layers of one engine judge the request twice,
/// the outer one first, and it holds two slots while it is served. To class
/// routes under a single router-wide layer, give it a
/// [`classifier`](ShedLayer::classifier).
///
/// # gRPC
///
/// In tonic, the layer goes in `Server::builder().layer(..)`: one layer for
/// every service of the server, with a classifier reading the method from
/// the path (`/package.Service/Method`). gRPC callers are answered in gRPC's
/// terms: `RESOURCE_EXHAUSTED` (or
/// [`UNAVAILABLE`](ShedLayer::grpc_overload_status)) with
/// `grpc-retry-pushback-ms`, and `DEADLINE_EXCEEDED`. tonic's server reads
/// `grpc-timeout` too, with a timer outside every layer: a call still
/// running at its deadline is answered by whichever timer fires first,
/// tonic's (`CANCELLED` "Timeout expired", and shed counts the call
/// abandoned) or shed's (`DEADLINE_EXCEEDED`, counted cut at its deadline).
/// Refusals at the door are always shed's. The repository's
/// `examples/grpc.rs` shows a whole service.
#[derive(Clone, Debug)]
pub struct ShedLayer {
    shedder: Shedder,
    config: Arc<Config>,
}

impl ShedLayer {
    /// A layer judging requests with `shedder`, classed as interactive, with
    /// the wire defaults for deadlines and retries.
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use shed_axum::ShedLayer;
    /// use shed_core::Shedder;
    ///
    /// let shedder = Shedder::builder().limit(64).build()?;
    /// let app: Router = Router::new()
    ///     .route("/", get(|| async { "hello" }))
    ///     .layer(ShedLayer::new(shedder));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn new(shedder: Shedder) -> ShedLayer {
        ShedLayer {
            shedder,
            config: Arc::new(Config {
                bypass: None,
                rules: ClassifyRules::default(),
                responder: Responder::default(),
                release_on: ReleaseOn::default(),
                feedback: None,
            }),
        }
    }

    fn edit(mut self, change: impl FnOnce(&mut Config)) -> ShedLayer {
        change(Arc::make_mut(&mut self.config));
        self
    }

    /// The class of every request through this layer (default
    /// interactive), unless a [`classifier`](ShedLayer::classifier) or a
    /// [caller's header](ShedLayer::caller_class_header) says otherwise.
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use shed_axum::ShedLayer;
    /// use shed_core::{Class, Shedder};
    ///
    /// let shedder = Shedder::builder().limit(64).build()?;
    /// // Exports may wait, and are the first shed under overload.
    /// let exports: Router = Router::new()
    ///     .route("/export", get(|| async { "csv" }))
    ///     .route_layer(ShedLayer::new(shedder).class(Class::Batch));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn class(self, class: Class) -> ShedLayer {
        self.edit(|config| config.rules.class = class)
    }

    /// Chooses each request's class from its head; where it answers `None`,
    /// the layer's [`class`](ShedLayer::class) holds. The way to class
    /// routes under one router-wide layer (see [Nesting](ShedLayer#nesting)).
    ///
    /// It runs for every request and must never block or panic (see
    /// [`ClassifyRequest`]). A closure takes its argument type spelled out:
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use shed_axum::{RequestHead, ShedLayer};
    /// use shed_core::{Class, Shedder};
    ///
    /// let shedder = Shedder::builder().limit(64).build()?;
    /// let app: Router = Router::new()
    ///     .route("/search", get(|| async { "results" }))
    ///     .route("/reports/daily", get(|| async { "report" }))
    ///     .layer(ShedLayer::new(shedder).classifier(|head: &RequestHead<'_>| {
    ///         head.uri.path().starts_with("/reports/").then_some(Class::Batch)
    ///     }));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn classifier(self, classifier: impl ClassifyRequest) -> ShedLayer {
        self.edit(|config| config.rules.class_hook = Some(Arc::new(classifier)))
    }

    /// Lets callers state their class in a header: an untrusted caller may
    /// only lower its class (below the one the layer and its classifier
    /// chose), never raise it; see [`trust_caller`](ShedLayer::trust_caller).
    /// Default: no header is read.
    ///
    /// ```
    /// use http::HeaderName;
    /// use shed_axum::ShedLayer;
    /// use shed_core::Shedder;
    ///
    /// // A caller sending `shed-class: background` is judged as background;
    /// // one sending `shed-class: critical` keeps the layer's class.
    /// let layer = ShedLayer::new(Shedder::with_limit(64)?)
    ///     .caller_class_header(HeaderName::from_static("shed-class"));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn caller_class_header(self, name: HeaderName) -> ShedLayer {
        self.edit(|config| config.rules.caller_class_header = Some(name))
    }

    /// Trusts the [caller's class header](ShedLayer::caller_class_header) to
    /// raise the class too. Only for callers that cannot forge it: internal
    /// callers behind a proxy that strips the header from outside requests.
    /// Default: not trusted.
    ///
    /// ```
    /// use http::HeaderName;
    /// use shed_axum::ShedLayer;
    /// use shed_core::Shedder;
    ///
    /// // An internal service: `shed-class: critical` is taken at its word.
    /// let layer = ShedLayer::new(Shedder::with_limit(64)?)
    ///     .caller_class_header(HeaderName::from_static("shed-class"))
    ///     .trust_caller(true);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn trust_caller(self, trusted: bool) -> ShedLayer {
        self.edit(|config| config.rules.trust_caller = trusted)
    }

    /// Chooses each request's cohort key (user, tenant, API key, peer
    /// address), so that while only part of a class is shed, one caller is
    /// consistently admitted or refused rather than a random few of its
    /// calls. Default: none; requests are spread evenly over the cohorts.
    ///
    /// It runs for every request and must never block or panic (see
    /// [`MakeCohortKey`]). A closure takes its argument type spelled out:
    ///
    /// ```
    /// use std::hash::{BuildHasher, RandomState};
    /// use shed_axum::{RequestHead, ShedLayer};
    /// use shed_core::Shedder;
    ///
    /// let hasher = RandomState::new();
    /// let layer = ShedLayer::new(Shedder::with_limit(64)?).cohort_key(
    ///     move |head: &RequestHead<'_>| {
    ///         let api_key = head.headers.get("x-api-key")?;
    ///         Some(hasher.hash_one(api_key.as_bytes()))
    ///     },
    /// );
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn cohort_key(self, key: impl MakeCohortKey) -> ShedLayer {
        self.edit(|config| config.rules.cohort_key_hook = Some(Arc::new(key)))
    }

    /// Lets the requests `hook` picks through unjudged: never shed, never
    /// queued, taking no slot, and unseen by the controller and the
    /// adaptive limit; only counted ([`Stats::bypassed`](shed_core::Stats::bypassed)).
    /// For health checks, metrics scrapes and admin routes, whose cheap
    /// answers would otherwise shorten the service times the engine
    /// measures (the door's predicted waits and Retry-After, the adaptive
    /// limit's hold times under load). Default: none.
    ///
    /// It runs first, for every request, and must never block or panic
    /// (see [`BypassRequest`]). A closure takes its argument type spelled out:
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use shed_axum::{RequestHead, ShedLayer};
    /// use shed_core::Shedder;
    ///
    /// let layer = ShedLayer::new(Shedder::builder().build()?)
    ///     .bypass(|head: &RequestHead<'_>| head.uri.path() == "/healthz");
    /// let app: Router = Router::new()
    ///     .route("/search", get(|| async { "results" }))
    ///     .route("/healthz", get(|| async { "ok" }))
    ///     .layer(layer);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn bypass(self, hook: impl BypassRequest) -> ShedLayer {
        self.edit(|config| config.bypass = Some(Arc::new(hook)))
    }

    /// The deadline of requests that send none (default: no deadline). A
    /// request still running at its deadline is cancelled and answered
    /// `504`: the caller has stopped waiting.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_axum::ShedLayer;
    /// use shed_core::Shedder;
    ///
    /// // Browsers send no deadline, and give up after a few seconds.
    /// let layer = ShedLayer::new(Shedder::with_limit(64)?)
    ///     .default_deadline(Duration::from_secs(10));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn default_deadline(self, deadline: Duration) -> ShedLayer {
        self.edit(|config| config.rules.default_deadline = Some(deadline))
    }

    /// The longest deadline a caller may ask for, or be given by
    /// [`default_deadline`](ShedLayer::default_deadline); longer ones are cut
    /// to it (default 60 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_axum::ShedLayer;
    /// use shed_core::Shedder;
    ///
    /// // No answer of this service is worth more than 5 s of waiting.
    /// let layer = ShedLayer::new(Shedder::with_limit(64)?)
    ///     .max_deadline(Duration::from_secs(5));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn max_deadline(self, deadline: Duration) -> ShedLayer {
        self.edit(|config| config.rules.max_deadline = deadline)
    }

    /// The status of overload refusals to HTTP callers: `429 Too Many
    /// Requests` by default. Deadline refusals are always `504`.
    ///
    /// ```
    /// use http::StatusCode;
    /// use shed_axum::ShedLayer;
    /// use shed_core::Shedder;
    ///
    /// // For clients and proxies that retry on 503 only.
    /// let layer = ShedLayer::new(Shedder::with_limit(64)?)
    ///     .overload_status(StatusCode::SERVICE_UNAVAILABLE);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn overload_status(self, status: StatusCode) -> ShedLayer {
        self.edit(|config| config.responder.overload_status = status)
    }

    /// The gRPC status of overload refusals to gRPC callers (default
    /// `RESOURCE_EXHAUSTED`).
    ///
    /// ```
    /// use shed_axum::{GrpcOverloadStatus, ShedLayer};
    /// use shed_core::Shedder;
    ///
    /// // For gRPC clients whose retry policy retries UNAVAILABLE only.
    /// let layer = ShedLayer::new(Shedder::with_limit(64)?)
    ///     .grpc_overload_status(GrpcOverloadStatus::Unavailable);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn grpc_overload_status(self, status: GrpcOverloadStatus) -> ShedLayer {
        self.edit(|config| config.responder.grpc_overload_status = status)
    }

    /// Replaces shed's answer to a refusal wherever the hook returns a
    /// response; where it returns `None`, shed answers.
    ///
    /// It runs for every refused request and must never block or panic (see
    /// [`OnRejection`]). A closure takes its argument types spelled out:
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http::{header::RETRY_AFTER, Response, StatusCode};
    /// use shed_axum::{RequestHead, ShedLayer};
    /// use shed_core::{Rejection, Shedder};
    ///
    /// // A short text for overload; deadlines (no Retry-After) keep shed's 504.
    /// let layer = ShedLayer::new(Shedder::with_limit(64)?).on_rejection(
    ///     |rejection: &Rejection, _head: &RequestHead<'_>| {
    ///         let after = rejection.retry_after()?;
    ///         Response::builder()
    ///             .status(StatusCode::SERVICE_UNAVAILABLE)
    ///             .header(RETRY_AFTER, after.as_secs())
    ///             .body(Bytes::from_static(b"busy, try again shortly"))
    ///             .ok()
    ///     },
    /// );
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn on_rejection(self, hook: impl OnRejection) -> ShedLayer {
        self.edit(|config| config.responder.hook = Some(Arc::new(hook)))
    }

    /// When served requests give their slot back (default: at the end of
    /// the body).
    ///
    /// ```
    /// use shed_axum::{ReleaseOn, ShedLayer};
    /// use shed_core::Shedder;
    ///
    /// // Event streams stay open for hours, doing little: let them not count
    /// // against the limit once their head is sent.
    /// let events = ShedLayer::new(Shedder::with_limit(64)?).release_on(ReleaseOn::Headers);
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn release_on(self, release_on: ReleaseOn) -> ShedLayer {
        self.edit(|config| config.release_on = release_on)
    }

    /// Puts the replica's load on every answer to a request the layer
    /// judges, served or refused: the `shed-load` header
    /// ([`LOAD_HEADER`](shed_core::wire::LOAD_HEADER)), such as
    /// `ranks=2, cohorts=32, in-flight=60, limit=64, queued=17`. A client
    /// layer ([`ShedThrottleLayer`](crate::client::ShedThrottleLayer))
    /// reads it to refuse locally the ranks this replica sheds; a balancer
    /// or a dashboard may read the load. Default: off.
    ///
    /// - `ranks` and `cohorts`: the admission [`Level`](shed_core::Level) in
    ///   rank terms, the first `ranks` ranks of the shed order refused whole
    ///   and `cohorts` of the 128 cohorts of the next one;
    /// - `in-flight`, `limit`, `queued`: requests holding a slot, the
    ///   concurrency limit, requests waiting in all ranks.
    ///
    /// The header is in the head of HTTP answers and of gRPC refusals
    /// (trailers-only answers, whose head is their trailers); a gRPC call
    /// the handler answers carries it in its trailers, written as they
    /// pass, so it says the state at the end of the call. The state is read
    /// without a lock. Each thread repeats its last header value while the
    /// level it states holds and its counts are under 10 ms old, so writing
    /// it allocates at most once per thread per 10 ms, whatever the rate of
    /// refusals; a changed level is written at once.
    ///
    /// Turn it on where the callers are trusted: services called by other
    /// services of one fleet, behind a proxy that strips `shed-load` from
    /// answers leaving it. Off for public callers: the header tells anyone
    /// how close the replica is to its capacity, and when it is shedding,
    /// which helps an attacker time a flood.
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use shed_axum::ShedLayer;
    /// use shed_core::Shedder;
    ///
    /// // An internal service: its callers shed before sending.
    /// let app: Router = Router::new()
    ///     .route("/search", get(|| async { "results" }))
    ///     .layer(ShedLayer::new(Shedder::with_limit(64)?).load_feedback(true));
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn load_feedback(self, enabled: bool) -> ShedLayer {
        let feedback = enabled.then(|| LoadFeedback::new(self.shedder.clone()));
        self.edit(|config| config.feedback = feedback)
    }

    /// The shared engine.
    pub fn shedder(&self) -> &Shedder {
        &self.shedder
    }
}

impl<S> Layer<S> for ShedLayer {
    type Service = Shed<S>;

    fn layer(&self, inner: S) -> Shed<S> {
        Shed::new(inner, self.shedder.clone(), Arc::clone(&self.config))
    }
}

/// Everything a layer's services share, behind one `Arc`: cloning a service,
/// or keeping a queued request's config, costs one reference count.
#[derive(Clone)]
pub(crate) struct Config {
    bypass: Option<Arc<dyn BypassRequest>>,
    rules: ClassifyRules,
    responder: Responder,
    release_on: ReleaseOn,
    feedback: Option<LoadFeedback>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("bypass", &self.bypass.is_some())
            .field("rules", &self.rules)
            .field("responder", &self.responder)
            .field("release_on", &self.release_on)
            .field("feedback", &self.feedback.is_some())
            .finish()
    }
}

impl Config {
    /// Whether the request goes through unjudged (see [`BypassRequest`]).
    pub(crate) fn bypasses(&self, head: &RequestHead<'_>) -> bool {
        self.bypass.as_ref().is_some_and(|hook| hook.bypass(head))
    }

    /// What the head of a request says about it.
    pub(crate) fn classify(&self, head: &RequestHead<'_>) -> Classification {
        self.rules.classify(head)
    }

    /// The answer to a request refused at the door or in the queue.
    pub(crate) fn refuse<B>(
        &self,
        rejection: &Rejection,
        head: &RequestHead<'_>,
        classification: &Classification,
    ) -> Response<ShedBody<B>> {
        tracing::debug!(
            target: "shed",
            class = classification.class().as_str(),
            attempt = classification.attempt(),
            reason = rejection.reason().as_str(),
            retry_after_s = rejection.retry_after().map(|after| after.as_secs()),
            "refused"
        );
        let mut response = self.responder.respond(rejection, head, classification);
        if let Some(feedback) = &self.feedback {
            feedback.stamp(response.headers_mut());
        }
        response
    }

    pub(crate) fn release_on(&self) -> ReleaseOn {
        self.release_on
    }

    /// The load feedback to put on answers, if the layer gives it.
    pub(crate) fn feedback(&self) -> Option<&LoadFeedback> {
        self.feedback.as_ref()
    }
}
