//! The layer's extension points: what it asks of your code about each
//! request. Each is a trait with a blanket implementation for closures, so a
//! closure is enough and a type of your own (a route table, a tenant map)
//! fits the same place.

use bytes::Bytes;
use http::{Extensions, HeaderMap, Method, Response, Uri};
use shed_core::{Class, Rejection};

/// A borrowed view of a request's head: what every hook is given.
///
/// ```
/// use shed_axum::RequestHead;
/// let request = http::Request::get("/batch/export").body(()).unwrap();
/// let head = RequestHead::of(&request);
/// assert_eq!(head.uri.path(), "/batch/export");
/// ```
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct RequestHead<'a> {
    /// The request method.
    pub method: &'a Method,
    /// The request URI.
    pub uri: &'a Uri,
    /// The request headers.
    pub headers: &'a HeaderMap,
    /// The request extensions (for example axum's `ConnectInfo`).
    pub extensions: &'a Extensions,
}

impl<'a> RequestHead<'a> {
    /// The head of `request`.
    pub fn of<B>(request: &'a http::Request<B>) -> RequestHead<'a> {
        RequestHead {
            method: request.method(),
            uri: request.uri(),
            headers: request.headers(),
            extensions: request.extensions(),
        }
    }
}

/// Chooses a request's class from its head.
///
/// Implemented for every `Fn(&RequestHead<'_>) -> Option<Class>`; a closure
/// passed where the trait is expected takes its argument type spelled out
/// (`|head: &RequestHead<'_>| ...`). Set with
/// [`ShedLayer::classifier`](crate::ShedLayer::classifier).
///
/// # On the request path
///
/// It runs inside [`Service::call`](tower::Service::call) for every request
/// that reaches the layer and is not bypassed, on the task serving the connection. It must be
/// quick, and must never block (no I/O, no lock another task may hold for
/// long) nor panic: a panic unwinds through the server's connection task,
/// not just the one request. Read what the head carries; leave anything
/// slower to the handler.
///
/// ```
/// use shed_axum::{ClassifyRequest, RequestHead, ShedLayer};
/// use shed_core::{Class, Shedder};
///
/// /// Routes by path prefix, first match wins.
/// struct ByPrefix(Vec<(&'static str, Class)>);
///
/// impl ClassifyRequest for ByPrefix {
///     fn classify(&self, head: &RequestHead<'_>) -> Option<Class> {
///         let path = head.uri.path();
///         self.0.iter().find(|(prefix, _)| path.starts_with(prefix)).map(|&(_, class)| class)
///     }
/// }
///
/// let routes = ByPrefix(vec![("/admin/", Class::Critical), ("/export/", Class::Background)]);
/// let layer = ShedLayer::new(Shedder::with_limit(8)?).classifier(routes);
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
pub trait ClassifyRequest: Send + Sync + 'static {
    /// The class of the request with this head; `None` keeps the layer's
    /// [`class`](crate::ShedLayer::class).
    fn classify(&self, head: &RequestHead<'_>) -> Option<Class>;
}

impl<F> ClassifyRequest for F
where
    F: Fn(&RequestHead<'_>) -> Option<Class> + Send + Sync + 'static,
{
    fn classify(&self, head: &RequestHead<'_>) -> Option<Class> {
        self(head)
    }
}

/// Chooses a request's cohort key (user, tenant, API key, peer address)
/// from its head, so that while shedding is partial one caller is
/// consistently admitted or refused rather than a random few of its calls.
///
/// Implemented for every `Fn(&RequestHead<'_>) -> Option<u64>`. Set with
/// [`ShedLayer::cohort_key`](crate::ShedLayer::cohort_key). The key is hashed
/// into a cohort, so any number that stays the same for one caller will do.
///
/// # On the request path
///
/// It runs inside [`Service::call`](tower::Service::call) for every request
/// that reaches the layer and is not bypassed, as [`ClassifyRequest`] does, and is bound by
/// [the same rule](ClassifyRequest#on-the-request-path): quick, never
/// blocking, never panicking.
///
/// ```
/// use shed_axum::{MakeCohortKey, RequestHead, ShedLayer};
/// use shed_core::Shedder;
///
/// /// The tenant's number, from a header the gateway sets.
/// struct Tenant;
///
/// impl MakeCohortKey for Tenant {
///     fn make_cohort_key(&self, head: &RequestHead<'_>) -> Option<u64> {
///         head.headers.get("x-tenant-id")?.to_str().ok()?.parse().ok()
///     }
/// }
///
/// let layer = ShedLayer::new(Shedder::with_limit(8)?).cohort_key(Tenant);
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
pub trait MakeCohortKey: Send + Sync + 'static {
    /// The cohort key of the request with this head; `None` spreads it
    /// evenly over the cohorts.
    fn make_cohort_key(&self, head: &RequestHead<'_>) -> Option<u64>;
}

impl<F> MakeCohortKey for F
where
    F: Fn(&RequestHead<'_>) -> Option<u64> + Send + Sync + 'static,
{
    fn make_cohort_key(&self, head: &RequestHead<'_>) -> Option<u64> {
        self(head)
    }
}

/// Picks the requests the layer lets through unjudged: health checks,
/// metrics scrapes, admin routes.
///
/// A bypassed request is never shed, never queued and takes no slot, and
/// the engine learns nothing from it: the controller's queue delays, the
/// adaptive limit's hold times and the class counters never see it. It is
/// only counted, as [`Stats::bypassed`](shed_core::Stats::bypassed). Cheap
/// requests judged with the rest would shorten the service times the door
/// predicts waits and Retry-After from, and the hold times the adaptive
/// limit measures under load; bypassing them keeps those times the real
/// work's.
///
/// Unlike a route mounted outside the layer, it can pick requests anywhere
/// in a router (by header, say, or a probe's user agent), and they are
/// counted in the engine's stats.
///
/// Implemented for every `Fn(&RequestHead<'_>) -> bool`. Set with
/// [`ShedLayer::bypass`](crate::ShedLayer::bypass).
///
/// # On the request path
///
/// It runs inside [`Service::call`](tower::Service::call) for every request
/// that reaches the layer, before anything else, and is bound by
/// [the rule of the other hooks](ClassifyRequest#on-the-request-path):
/// quick, never blocking, never panicking.
///
/// ```
/// use shed_axum::{BypassRequest, RequestHead, ShedLayer};
/// use shed_core::Shedder;
///
/// /// Kubernetes' probes and the Prometheus scraper.
/// struct Probes;
///
/// impl BypassRequest for Probes {
///     fn bypass(&self, head: &RequestHead<'_>) -> bool {
///         matches!(head.uri.path(), "/healthz" | "/readyz" | "/metrics")
///     }
/// }
///
/// let layer = ShedLayer::new(Shedder::builder().build()?).bypass(Probes);
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
pub trait BypassRequest: Send + Sync + 'static {
    /// Whether the request with this head goes through unjudged.
    fn bypass(&self, head: &RequestHead<'_>) -> bool;
}

impl<F> BypassRequest for F
where
    F: Fn(&RequestHead<'_>) -> bool + Send + Sync + 'static,
{
    fn bypass(&self, head: &RequestHead<'_>) -> bool {
        self(head)
    }
}

/// Replaces shed's answer to a refused request.
///
/// Implemented for every
/// `Fn(&Rejection, &RequestHead<'_>) -> Option<Response<Bytes>>`. Set with
/// [`ShedLayer::on_rejection`](crate::ShedLayer::on_rejection). It answers
/// refusals at the door and in the queue; a request cut off at its deadline
/// while it was served always gets shed's `504` (or gRPC
/// `DEADLINE_EXCEEDED`).
///
/// # On the request path
///
/// It runs for every refused request, which under overload is most of them,
/// and is bound by [the rule of `ClassifyRequest`](ClassifyRequest#on-the-request-path):
/// quick, never blocking, never panicking. Refusing must stay cheaper than
/// serving.
///
/// ```
/// use bytes::Bytes;
/// use http::{Response, StatusCode};
/// use shed_axum::{OnRejection, RequestHead, ShedLayer};
/// use shed_core::{Rejection, Shedder};
///
/// /// A plain-text body for browsers; shed's own answer for everyone else.
/// struct PlainText;
///
/// impl OnRejection for PlainText {
///     fn on_rejection(&self, rejection: &Rejection, head: &RequestHead<'_>) -> Option<Response<Bytes>> {
///         let accept = head.headers.get("accept")?.to_str().ok()?;
///         accept.contains("text/html").then(|| {
///             let mut response = Response::new(Bytes::from_static(b"Busy, please retry shortly."));
///             *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
///             response
///         })
///     }
/// }
///
/// let layer = ShedLayer::new(Shedder::with_limit(8)?).on_rejection(PlainText);
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
pub trait OnRejection: Send + Sync + 'static {
    /// The answer to send instead of shed's, or `None` to send shed's.
    fn on_rejection(
        &self,
        rejection: &Rejection,
        head: &RequestHead<'_>,
    ) -> Option<Response<Bytes>>;
}

impl<F> OnRejection for F
where
    F: Fn(&Rejection, &RequestHead<'_>) -> Option<Response<Bytes>> + Send + Sync + 'static,
{
    fn on_rejection(
        &self,
        rejection: &Rejection,
        head: &RequestHead<'_>,
    ) -> Option<Response<Bytes>> {
        self(rejection, head)
    }
}
