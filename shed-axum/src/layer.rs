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

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, Response, StatusCode};
use shed_core::{Class, Rejection, Shedder};
use tower::Layer;

use crate::body::ShedBody;
use crate::classify::{Classification, Classifier, RequestHead};
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
/// Give each request exactly one layer per engine: put the layers side by
/// side (per route, or per group of routes with `route_layer`), not one
/// inside the other. Nested layers of one engine judge the request twice,
/// the outer one first, and it holds two slots while it is served. To class
/// routes under a single router-wide layer, use [`classify`](ShedLayer::classify).
#[derive(Clone, Debug)]
pub struct ShedLayer {
    shedder: Shedder,
    config: Arc<Config>,
}

impl ShedLayer {
    /// A layer judging requests with `shedder`, classed as interactive, with
    /// the wire defaults for deadlines and retries.
    pub fn new(shedder: Shedder) -> ShedLayer {
        ShedLayer {
            shedder,
            config: Arc::new(Config {
                classifier: Classifier::default(),
                responder: Responder::default(),
                release_on: ReleaseOn::default(),
            }),
        }
    }

    fn edit(mut self, change: impl FnOnce(&mut Config)) -> ShedLayer {
        change(Arc::make_mut(&mut self.config));
        self
    }

    /// The class of requests through this layer (default interactive).
    pub fn class(self, class: Class) -> ShedLayer {
        self.edit(|config| config.classifier.class = class)
    }

    /// Chooses the class from the request head; `None` keeps the layer's class.
    ///
    /// ```
    /// use shed_axum::ShedLayer;
    /// use shed_core::{Class, Shedder};
    /// let layer = ShedLayer::new(Shedder::with_limit(8)?).classify(|head| {
    ///     head.uri.path().starts_with("/reports").then_some(Class::Batch)
    /// });
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    pub fn classify<F>(self, choose: F) -> ShedLayer
    where
        F: Fn(&RequestHead<'_>) -> Option<Class> + Send + Sync + 'static,
    {
        self.edit(|config| config.classifier.class_fn = Some(Arc::new(choose)))
    }

    /// Lets callers state their class in a header (such as `shed-class: batch`).
    /// Untrusted callers may only lower their class; see
    /// [`trust_caller`](ShedLayer::trust_caller).
    pub fn caller_class_header(self, name: HeaderName) -> ShedLayer {
        self.edit(|config| config.classifier.caller_class_header = Some(name))
    }

    /// Trusts the caller's class header to raise the class too (for internal
    /// callers behind an authenticating proxy). Default: not trusted.
    pub fn trust_caller(self, trusted: bool) -> ShedLayer {
        self.edit(|config| config.classifier.trust_caller = trusted)
    }

    /// Chooses a cohort key (user, tenant, API key, peer address) so that one
    /// caller is consistently admitted or refused while shedding is partial.
    pub fn cohort_key<F>(self, key: F) -> ShedLayer
    where
        F: Fn(&RequestHead<'_>) -> Option<u64> + Send + Sync + 'static,
    {
        self.edit(|config| config.classifier.cohort_key_fn = Some(Arc::new(key)))
    }

    /// The deadline of requests that send none (default: no deadline).
    pub fn default_deadline(self, deadline: Duration) -> ShedLayer {
        self.edit(|config| config.classifier.default_deadline = Some(deadline))
    }

    /// The longest deadline a caller may ask for; longer ones are cut to it
    /// (default 60 s).
    pub fn max_deadline(self, deadline: Duration) -> ShedLayer {
        self.edit(|config| config.classifier.max_deadline = deadline)
    }

    /// The status of overload refusals: `429 Too Many Requests` by default;
    /// `503 Service Unavailable` for those who prefer it.
    pub fn overload_status(self, status: StatusCode) -> ShedLayer {
        self.edit(|config| config.responder.overload_status = status)
    }

    /// The gRPC status of overload refusals (default `RESOURCE_EXHAUSTED`).
    pub fn grpc_overload_status(self, status: GrpcOverloadStatus) -> ShedLayer {
        self.edit(|config| config.responder.grpc_overload_status = status)
    }

    /// Replaces the answer to refusals when the closure returns a response.
    pub fn on_rejection<F>(self, hook: F) -> ShedLayer
    where
        F: Fn(&Rejection, &RequestHead<'_>) -> Option<Response<Bytes>> + Send + Sync + 'static,
    {
        self.edit(|config| config.responder.hook = Some(Arc::new(hook)))
    }

    /// When served requests give their slot back (default: at the end of the body).
    pub fn release_on(self, release_on: ReleaseOn) -> ShedLayer {
        self.edit(|config| config.release_on = release_on)
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
#[derive(Clone, Debug)]
pub(crate) struct Config {
    classifier: Classifier,
    responder: Responder,
    release_on: ReleaseOn,
}

impl Config {
    /// What the head of a request says about it.
    pub(crate) fn classify(&self, head: &RequestHead<'_>) -> Classification {
        self.classifier.classify(head)
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
        self.responder.respond(rejection, head, classification)
    }

    pub(crate) fn release_on(&self) -> ReleaseOn {
        self.release_on
    }
}
