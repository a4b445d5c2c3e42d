//! The client throttle's [`Layer`]: its settings and its shared state.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use shed_core::retry::{Jitter, SplitMix64};
use shed_core::{Class, Clock, MonotonicClock};
use tower::Layer;

use super::judge::Throttle;
use super::replicas::Replicas;
use super::stats::Counters;
use super::{ShedThrottle, ThrottleStats};
use crate::classify::ClassifyRules;
use crate::hook::ClassifyRequest;

/// The default window of the adaptive throttle.
const DEFAULT_WINDOW: Duration = Duration::from_secs(1);

/// SRE's `K`: the throttle refuses once requests exceed `K` times accepts.
const DEFAULT_MULTIPLIER: f64 = 2.0;

/// Refuses locally, before sending, the requests a replica would refuse:
/// the ranks its load reports say it sheds (DAGOR), and, from a replica
/// that says nothing of its load, a share of requests by SRE's adaptive
/// throttling. A refused request is answered as a shed server would answer
/// it (`429` with `Retry-After`, or gRPC `RESOURCE_EXHAUSTED` with
/// `grpc-retry-pushback-ms`), marked [`RefusedLocally`](super::RefusedLocally).
///
/// Build it once per client: the layer and every service it makes share
/// one state, kept per replica (the authority, `host:port`, of each
/// request's URI; requests without one, such as those to a tonic
/// `Channel`, which adds its own below the layer, share one state). At most
/// 1,024 replicas are kept; when that many still count, a new one is sent
/// to unjudged.
///
/// ```
/// use shed_axum::client::ShedThrottleLayer;
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let throttle = ShedThrottleLayer::new();
/// let client = ServiceBuilder::new()
///     .layer(throttle.clone())
///     .service(service_fn(|_req: http::Request<String>| async {
///         // Stands in for a real transport, e.g. hyper-util's client.
///         Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
///     }));
/// let request = http::Request::get("http://search.internal:8080/q").body(String::new()).unwrap();
/// let response = client.oneshot(request).await.unwrap();
/// assert_eq!(response.status(), 200);
/// assert_eq!(throttle.stats().sent, 1);
/// # }
/// ```
///
/// # What it decides
///
/// It judges each request against what it knows of the
/// replica it is sent to (the authority, `host:port`, of its URI):
///
/// - **The replica's load reports** (DAGOR). A shed server with
///   [`load_feedback`](crate::ShedLayer::load_feedback) states on every
///   answer which ranks it sheds (`shed-load`). The throttle refuses each
///   rank with the share of it the recent reports say is shed: whole ranks
///   always, the rank the level cuts into by a random draw (the server
///   spreads requests without a caller key evenly over its cohorts; a
///   caller key's consistent cohort is not reproduced here). A request's
///   rank is its class (a [`Class`](shed_core::Class) extension, the
///   layer's [classifier](Self::classifier), or the layer's
///   [class](Self::class)) and its attempt (the retry markers
///   `shed-attempt` and `grpc-previous-rpc-attempts`, and the others the
///   server reads).
/// - **Adaptive throttling** (Google SRE book, "Handling Overload"), when
///   the replica has said nothing of its load for a second: over a sliding
///   [window](Self::window) of requests (sent or refused by the
///   throttle) and accepts (answers that are not overload refusals: `429`,
///   `503`, gRPC `RESOURCE_EXHAUSTED` or `UNAVAILABLE`), a request is
///   refused with probability `max(0, (requests - K * accepts) / (requests
///   + 1))`, `K` = 2 by [default](Self::multiplier).
///
/// A refused request is answered as a shed server answers an overload
/// refusal: `429 Too Many Requests` with `Retry-After` and a problem body
/// whose `reason` is `shed_locally` or `throttled_locally`; a gRPC call
/// gets a trailers-only `RESOURCE_EXHAUSTED` with
/// `grpc-retry-pushback-ms`. The wait asked for is the last pushback the
/// replica asked of that rank within the window, and at least a second. The
/// answer carries [`RefusedLocally`](super::RefusedLocally) in its extensions; it is counted
/// ([`stats`](Self::stats)) and traced (a `debug` event, target
/// `shed`, "refused locally", with the authority, class, attempt, reason
/// and wait).
///
/// # Forgetting
///
/// A report counts for a second, fading linearly to nothing: a replica the
/// throttle stopped sending to (every request refused locally, so no new
/// report comes) gets its traffic back within a second of its last report,
/// and the next answer brings a fresh one. The adaptive throttle's counts
/// leave the window a tenth at a time, so a second after a replica
/// recovers its refusals no longer count. Either way a recovered replica
/// gets traffic back within two seconds.
///
/// # Behind a proxy
///
/// With client-side balancing each replica has its own authority and its
/// own state. Behind a proxy (a load balancer, a service mesh's sidecar)
/// the client sees one authority, and the answers through it come from
/// whichever replica served them. Its state is then the average of the
/// recent reports: each report moves the share of each rank a quarter of
/// the way towards what it says, so the shares follow roughly the last
/// eight answers. Averaging shares, not levels, is what makes that right:
/// if one replica of two sheds batch work and the other sheds nothing, the
/// proxy refuses half the batch work, and so does the throttle; the
/// latest report alone would flip between refusing all of it and none. The
/// adaptive throttle counts the answers of every replica behind the proxy
/// together, which is what the SRE book prescribes for one backend.
///
/// # With retries
///
/// Put the throttle inside [`ShedRetryLayer`](crate::client::ShedRetryLayer),
/// between it and the transport, so that each attempt is judged at its own
/// rank (retries carry the markers the retry layer writes, and are the
/// first shed):
///
/// ```
/// use shed_axum::client::{ShedRetryLayer, ShedThrottleLayer};
/// use shed_core::retry::Retrier;
/// use tower::{service_fn, ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), shed_core::ConfigError> {
/// // A replica that sheds everything but interactive and critical originals,
/// // and says so.
/// let replica = service_fn(|_req: http::Request<String>| async {
///     let refusal = http::Response::builder()
///         .status(429)
///         .header("retry-after", "1")
///         .header("shed-load", "ranks=6, cohorts=0, in-flight=64, limit=64, queued=20")
///         .body(String::new())
///         .unwrap();
///     Ok::<_, std::convert::Infallible>(refusal)
/// });
/// let retrier = Retrier::builder().build()?;
/// let throttle = ShedThrottleLayer::new();
/// let client = ServiceBuilder::new()
///     .layer(ShedRetryLayer::new(retrier.clone()))
///     .layer(throttle.clone())
///     .service(replica);
///
/// let request = || http::Request::get("http://api.internal/q").body(String::new()).unwrap();
/// let response = client.clone().oneshot(request()).await.unwrap();
/// assert_eq!(response.status(), 429);
/// // The replica refused the original and said it sheds every retry: the
/// // retry was refused here, before the retrier spent budget on it.
/// assert_eq!((throttle.stats().sent, throttle.stats().refused_shed), (1, 1));
/// assert_eq!(retrier.stats().retries(), 0);
/// assert_eq!(retrier.budget().balance_tenths(), 21, "20 + 1 earned, nothing spent");
/// # Ok(())
/// # }
/// ```
///
/// How local refusals meet the retry budget:
///
/// - The retry policy stops at an answer marked [`RefusedLocally`](super::RefusedLocally) without
///   asking its retrier for a retry, and no denial is counted (the
///   throttle counts the refusal). An original refused here had begun its
///   operation, and earned its tenth of a retry, before it reached the
///   throttle: the policy takes the tenth back
///   ([`Retrier::unsent`](shed_core::retry::Retrier::unsent)).
/// - The retrier takes a retry's credit when it grants the retry, before
///   the retry is sent. So the policy asks the throttle first: the throttle
///   puts a way back to itself on each failed answer it passes up, and the
///   policy asks it whether the retry would be refused; if so the
///   operation ends with the replica's last answer (the refusal is counted
///   and traced as local), and no credit is taken. A retry the throttle let
///   through there is not judged again when it is sent.
/// - A transport error is not an answer, so it carries no way back: a
///   retry after one is judged when it is sent, after the retrier took its
///   credit. If the throttle refuses it then, the policy gives the credit
///   back ([`Retrier::unsent`](shed_core::retry::Retrier::unsent)).
///
/// Outside the retry layer, the throttle would judge only originals (the
/// retries happen below it), so it could not shed the retries a replica
/// sheds first.
#[derive(Clone, Debug)]
pub struct ShedThrottleLayer {
    state: Arc<State>,
    config: Arc<Config>,
}

/// What every service of a layer shares and changes: the replicas and the
/// counters.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) replicas: Replicas,
    pub(super) counters: Counters,
}

/// A layer's settings.
#[derive(Clone)]
pub(super) struct Config {
    pub(super) rules: ClassifyRules,
    pub(super) window: Duration,
    pub(super) multiplier: f64,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) random: Arc<dyn Jitter + Send + Sync>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("rules", &self.rules)
            .field("window", &self.window)
            .field("multiplier", &self.multiplier)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl Default for ShedThrottleLayer {
    fn default() -> Self {
        ShedThrottleLayer::new()
    }
}

impl ShedThrottleLayer {
    /// A throttle classing requests as interactive, with a one-second
    /// window, `K` = 2, the system's clock and a [`SplitMix64`] seeded per
    /// process.
    pub fn new() -> ShedThrottleLayer {
        ShedThrottleLayer {
            state: Arc::default(),
            config: Arc::new(Config {
                rules: ClassifyRules::default(),
                window: DEFAULT_WINDOW,
                multiplier: DEFAULT_MULTIPLIER,
                clock: Arc::new(MonotonicClock),
                random: Arc::new(SplitMix64::from_entropy()),
            }),
        }
    }

    fn edit(mut self, change: impl FnOnce(&mut Config)) -> ShedThrottleLayer {
        change(Arc::make_mut(&mut self.config));
        self
    }

    /// The class of requests that carry no [`Class`] extension and that
    /// the [`classifier`](Self::classifier) does not class (default
    /// interactive). Give it the class the server gives them.
    ///
    /// ```
    /// use shed_axum::client::ShedThrottleLayer;
    /// use shed_core::Class;
    ///
    /// // A crawler's client: the first shed when the replica sheds.
    /// let throttle = ShedThrottleLayer::new().class(Class::Batch);
    /// ```
    pub fn class(self, class: Class) -> ShedThrottleLayer {
        self.edit(|config| config.rules.class = class)
    }

    /// Classes each request from its head, as the server's
    /// [`ShedLayer::classifier`](crate::ShedLayer::classifier) does (the
    /// same trait: a client and its server may share one classifier); where
    /// it answers `None`, the layer's [`class`](Self::class) holds. A
    /// [`Class`] in a request's extensions comes before both.
    ///
    /// The attempt comes from the request's retry markers (`shed-attempt`,
    /// `grpc-previous-rpc-attempts`, and the others the server reads), as
    /// [`ShedRetryLayer`](crate::client::ShedRetryLayer) writes them.
    ///
    /// ```
    /// use shed_axum::client::ShedThrottleLayer;
    /// use shed_axum::RequestHead;
    /// use shed_core::Class;
    ///
    /// let throttle = ShedThrottleLayer::new().classifier(|head: &RequestHead<'_>| {
    ///     head.uri.path().starts_with("/reports/").then_some(Class::Batch)
    /// });
    /// let mut call = http::Request::get("http://api.internal/search").body(()).unwrap();
    /// // This one call is critical, whatever the classifier says.
    /// call.extensions_mut().insert(Class::Critical);
    /// # let _ = (throttle, call);
    /// ```
    pub fn classifier(self, classifier: impl ClassifyRequest) -> ShedThrottleLayer {
        self.edit(|config| config.rules.class_hook = Some(Arc::new(classifier)))
    }

    /// The window over which the adaptive throttle counts requests and
    /// accepts (default 1 s, sliding a tenth at a time).
    ///
    /// The SRE book uses two minutes, which smooths the estimate but keeps
    /// refusing for up to two minutes after a backend recovers. One second
    /// gives a recovered replica its traffic back within about a second,
    /// and still holds enough answers to estimate from at the rates where
    /// refusing locally saves anything (below a few requests a second, the
    /// `+ 1` in the formula keeps the throttle from refusing much).
    ///
    /// ```
    /// use std::time::Duration;
    /// use shed_axum::client::ShedThrottleLayer;
    ///
    /// let throttle = ShedThrottleLayer::new().window(Duration::from_secs(5));
    /// ```
    ///
    /// # Panics
    ///
    /// If `window` is zero.
    pub fn window(self, window: Duration) -> ShedThrottleLayer {
        assert!(!window.is_zero(), "the throttle's window must not be zero");
        self.edit(|config| config.window = window)
    }

    /// SRE's `K`: the adaptive throttle refuses with probability
    /// `max(0, (requests - K * accepts) / (requests + 1))` (default 2).
    /// Lower is more aggressive: 1.1 sends little more than is accepted;
    /// 2 lets through twice what is accepted, spending more of the
    /// replica's capacity on refusals for a quicker view of its recovery.
    ///
    /// ```
    /// use shed_axum::client::ShedThrottleLayer;
    ///
    /// let throttle = ShedThrottleLayer::new().multiplier(1.5);
    /// ```
    ///
    /// # Panics
    ///
    /// If `k` is below 1 or not finite: below 1 the throttle refuses
    /// requests the replica would accept.
    pub fn multiplier(self, k: f64) -> ShedThrottleLayer {
        assert!(
            k.is_finite() && k >= 1.0,
            "the throttle's multiplier must be at least 1, got {k}"
        );
        self.edit(|config| config.multiplier = k)
    }

    /// The clock the throttle reads (default: the system's monotonic
    /// clock). Tests drive a [`ManualClock`](shed_core::ManualClock).
    ///
    /// ```
    /// use shed_axum::client::ShedThrottleLayer;
    /// use shed_core::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// let throttle = ShedThrottleLayer::new().clock(clock.clone());
    /// ```
    pub fn clock(self, clock: impl Clock) -> ShedThrottleLayer {
        self.edit(|config| config.clock = Arc::new(clock))
    }

    /// Where the throttle's draws come from: any [`Jitter`], uniform in
    /// `[0, 1)` (default: a [`SplitMix64`] seeded per process). A request
    /// is refused when its draw falls below the chance of refusing it.
    ///
    /// ```
    /// use shed_axum::client::ShedThrottleLayer;
    /// use shed_core::retry::SplitMix64;
    ///
    /// // Reproducible runs.
    /// let throttle = ShedThrottleLayer::new().random(SplitMix64::new(7));
    /// ```
    pub fn random(self, random: impl Jitter + Send + Sync + 'static) -> ShedThrottleLayer {
        self.edit(|config| config.random = Arc::new(random))
    }

    /// What the throttle did so far, over every service of this layer.
    pub fn stats(&self) -> ThrottleStats {
        self.state.counters.snapshot()
    }

    fn throttle(&self) -> Throttle {
        Throttle {
            state: Arc::clone(&self.state),
            config: Arc::clone(&self.config),
        }
    }
}

impl<S> Layer<S> for ShedThrottleLayer {
    type Service = ShedThrottle<S>;

    fn layer(&self, inner: S) -> ShedThrottle<S> {
        ShedThrottle::new(inner, self.throttle())
    }
}
