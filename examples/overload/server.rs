//! The service under test: a real axum server whose capacity is a downstream
//! of K workers, run under one admission policy.
//!
//! A request hands a job to the [`Downstream`] and waits for the answer. The
//! job waits for one of K workers (a FIFO [`Semaphore`]) and holds it for a
//! service time drawn from [`ServiceTime`]. The downstream is deliberately not
//! cancellable, like a database or a thread pool: once a job is handed over it
//! runs, even when the caller has long given up. Only the front door (the
//! policy) can avoid that work, which is what the lab measures.
//!
//! `/stats` (JSON) and `/admin/slowdown/{percent}` are merged after the policy
//! layer, so they are never shed.

use std::{
    fmt,
    net::SocketAddr,
    str::FromStr,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use axum::{
    error_handling::HandleErrorLayer,
    extract::Path,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, put, MethodRouter},
    BoxError, Extension, Json, Router,
};
use shed::axum::ShedLayer;
use shed::core::{wire::GRPC_TIMEOUT_HEADER, Shedder};
use tokio::{
    net::TcpListener,
    sync::{oneshot, Semaphore},
    task::JoinHandle,
};
use tower::{limit::GlobalConcurrencyLimitLayer, load_shed::error::Overloaded, ServiceBuilder};

use crate::class::Class;

/// Envoy's deadline header, in milliseconds.
const ENVOY_TIMEOUT_HEADER: &str = "x-envoy-expected-rq-timeout-ms";

/// The admission policy in front of the downstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// No protection: every request is handed to the downstream and queues.
    None,
    /// The axum docs pattern: `load_shed` + a concurrency limit of K, 503.
    Tower,
    /// shed-axum with a limit of K (see [`shed_policy`]).
    Shed,
}

impl Policy {
    /// Every policy, in table order.
    pub const ALL: [Policy; 3] = [Policy::None, Policy::Tower, Policy::Shed];

    /// The name used on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::Tower => "tower",
            Policy::Shed => "shed",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown policy {s:?} (expected none, tower or shed)"))
    }
}

/// Why a server could not start.
#[derive(Debug)]
pub enum ServerError {
    /// The shed engine refused its configuration.
    ShedConfig(shed::core::ConfigError),
    /// Binding or inspecting the listener failed.
    Io(std::io::Error),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::ShedConfig(e) => write!(f, "cannot build the shed engine: {e}"),
            ServerError::Io(e) => write!(f, "cannot listen: {e}"),
        }
    }
}

impl std::error::Error for ServerError {}

impl From<shed::core::ConfigError> for ServerError {
    fn from(e: shed::core::ConfigError) -> Self {
        ServerError::ShedConfig(e)
    }
}

impl From<std::io::Error> for ServerError {
    fn from(e: std::io::Error) -> Self {
        ServerError::Io(e)
    }
}

/// The shape of the service-time distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Exponential with the given mean (memoryless; the default).
    Exponential,
    /// Always exactly the mean.
    Constant,
}

/// How long a job holds a worker.
#[derive(Clone, Copy, Debug)]
pub struct ServiceTime {
    /// Mean service time at full capacity.
    pub mean: Duration,
    /// Shape of the distribution around the mean.
    pub distribution: Distribution,
}

impl ServiceTime {
    /// Draws one service time, stretched by `slowdown` (1.0 = normal).
    fn sample(&self, slowdown: f64) -> Duration {
        let mean = self.mean.as_secs_f64() * slowdown;
        let secs = match self.distribution {
            Distribution::Constant => mean,
            // Inverse transform; 1 - U lies in (0, 1], so ln is finite.
            Distribution::Exponential => -mean * (1.0 - fastrand::f64()).ln(),
        };
        // Cap the tail at 20 means so one draw cannot stall a worker for ever.
        Duration::from_secs_f64(secs.min(mean * 20.0))
    }
}

/// How the server is built.
#[derive(Clone, Copy, Debug)]
pub struct ServerConfig {
    /// The admission policy in front of the downstream.
    pub policy: Policy,
    /// K, the number of downstream workers (and the policy's limit).
    pub workers: usize,
    /// Service time of one job.
    pub service: ServiceTime,
}

impl ServerConfig {
    /// Requests per second the downstream completes at full capacity.
    pub fn capacity(&self) -> f64 {
        self.workers as f64 / self.service.mean.as_secs_f64()
    }
}

/// Counters of one class, as seen by the downstream.
#[derive(Default)]
struct ClassCounters {
    submitted: AtomicU64,
    completed: AtomicU64,
    work_us: AtomicU64,
    wasted_us: AtomicU64,
    past_deadline_us: AtomicU64,
    late: AtomicU64,
    abandoned: AtomicU64,
}

/// A point-in-time copy of one class's downstream counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClassStats {
    /// Jobs handed to the downstream.
    pub submitted: u64,
    /// Jobs that ran to completion.
    pub completed: u64,
    /// Worker time spent, in microseconds (measured, not drawn).
    pub work_us: u64,
    /// Worker time spent on jobs whose caller had given up: the job finished
    /// after the deadline the request carried, or the caller had gone.
    pub wasted_us: u64,
    /// Worker time spent after the request's deadline had passed (the part
    /// of each job that ran while its caller had already given up).
    pub past_deadline_us: u64,
    /// Completed jobs that finished after their deadline.
    pub late: u64,
    /// Completed jobs whose caller had dropped the request.
    pub abandoned: u64,
}

/// A point-in-time copy of the downstream's state.
#[derive(Clone, Copy, Debug, Default)]
pub struct DownstreamStats {
    /// Jobs waiting for a worker.
    pub queued: usize,
    /// Workers busy.
    pub busy: usize,
    /// Current service-time multiplier, in percent.
    pub slowdown_pct: u64,
    /// Per-class counters, indexed by [`Class::index`].
    pub classes: [ClassStats; 4],
}

impl DownstreamStats {
    /// Totals over all classes.
    pub fn total(&self) -> ClassStats {
        self.classes
            .iter()
            .fold(ClassStats::default(), |a, c| ClassStats {
                submitted: a.submitted + c.submitted,
                completed: a.completed + c.completed,
                work_us: a.work_us + c.work_us,
                wasted_us: a.wasted_us + c.wasted_us,
                past_deadline_us: a.past_deadline_us + c.past_deadline_us,
                late: a.late + c.late,
                abandoned: a.abandoned + c.abandoned,
            })
    }

    /// The stats as the JSON served at `/stats`.
    pub fn to_json(self) -> serde_json::Value {
        let class = |c: &ClassStats| {
            serde_json::json!({
                "submitted": c.submitted,
                "completed": c.completed,
                "work_ms": c.work_us / 1000,
                "wasted_work_ms": c.wasted_us / 1000,
                "work_past_deadline_ms": c.past_deadline_us / 1000,
                "late": c.late,
                "abandoned": c.abandoned,
            })
        };
        let classes: serde_json::Map<String, serde_json::Value> = Class::ALL
            .iter()
            .map(|c| (c.name().to_owned(), class(&self.classes[c.index()])))
            .collect();
        serde_json::json!({
            "queued": self.queued,
            "busy": self.busy,
            "slowdown_pct": self.slowdown_pct,
            "total": class(&self.total()),
            "classes": classes,
        })
    }
}

/// The downstream was closed (the server is stopping).
#[derive(Debug)]
pub struct Closed;

/// K workers that run jobs for a drawn service time; see the module docs.
pub struct Downstream {
    workers: Arc<Semaphore>,
    service: ServiceTime,
    slowdown_pct: AtomicU64,
    queued: AtomicUsize,
    busy: AtomicUsize,
    classes: [ClassCounters; 4],
}

impl Downstream {
    /// A downstream with `workers` workers at normal speed.
    pub fn new(workers: usize, service: ServiceTime) -> Arc<Self> {
        Arc::new(Downstream {
            workers: Arc::new(Semaphore::new(workers)),
            service,
            slowdown_pct: AtomicU64::new(100),
            queued: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            classes: Default::default(),
        })
    }

    /// Stretches every service time that starts from now on by `percent`/100
    /// (200 halves the capacity). This is the metastable trigger's knob.
    pub fn set_slowdown_pct(&self, percent: u64) {
        self.slowdown_pct.store(percent.max(1), Ordering::Relaxed);
    }

    /// Copies the counters (each one atomically, not all together).
    pub fn snapshot(&self) -> DownstreamStats {
        let mut classes = [ClassStats::default(); 4];
        for (out, c) in classes.iter_mut().zip(&self.classes) {
            *out = ClassStats {
                submitted: c.submitted.load(Ordering::Relaxed),
                completed: c.completed.load(Ordering::Relaxed),
                work_us: c.work_us.load(Ordering::Relaxed),
                wasted_us: c.wasted_us.load(Ordering::Relaxed),
                past_deadline_us: c.past_deadline_us.load(Ordering::Relaxed),
                late: c.late.load(Ordering::Relaxed),
                abandoned: c.abandoned.load(Ordering::Relaxed),
            };
        }
        DownstreamStats {
            queued: self.queued.load(Ordering::Relaxed),
            busy: self.busy.load(Ordering::Relaxed),
            slowdown_pct: self.slowdown_pct.load(Ordering::Relaxed),
            classes,
        }
    }

    /// Refuses all waiting and future jobs; running ones finish.
    pub fn close(&self) {
        self.workers.close();
    }

    /// Hands a job to the downstream and waits for it. Dropping the returned
    /// future does not cancel the job (see the module docs).
    pub async fn call(
        self: &Arc<Self>,
        class: Class,
        deadline: Option<Instant>,
    ) -> Result<(), Closed> {
        self.classes[class.index()]
            .submitted
            .fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let result = this.run(class, deadline, &tx).await;
            let _ = tx.send(result);
        });
        rx.await.unwrap_or(Err(Closed))
    }

    async fn run(
        &self,
        class: Class,
        deadline: Option<Instant>,
        caller: &oneshot::Sender<Result<(), Closed>>,
    ) -> Result<(), Closed> {
        self.queued.fetch_add(1, Ordering::Relaxed);
        let permit = self.workers.acquire().await;
        self.queued.fetch_sub(1, Ordering::Relaxed);
        let _permit = permit.map_err(|_| Closed)?;

        self.busy.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let slowdown = self.slowdown_pct.load(Ordering::Relaxed) as f64 / 100.0;
        tokio::time::sleep(self.service.sample(slowdown)).await;
        let finished = Instant::now();
        self.busy.fetch_sub(1, Ordering::Relaxed);

        let work_us = u64::try_from((finished - started).as_micros()).unwrap_or(u64::MAX);
        let late = deadline.is_some_and(|d| finished > d);
        let abandoned = caller.is_closed();
        let counters = &self.classes[class.index()];
        counters.completed.fetch_add(1, Ordering::Relaxed);
        counters.work_us.fetch_add(work_us, Ordering::Relaxed);
        if late {
            counters.late.fetch_add(1, Ordering::Relaxed);
        }
        if abandoned {
            counters.abandoned.fetch_add(1, Ordering::Relaxed);
        }
        if late || abandoned {
            counters.wasted_us.fetch_add(work_us, Ordering::Relaxed);
        }
        if let Some(deadline) = deadline.filter(|d| finished > *d) {
            let past = finished - started.max(deadline);
            let past_us = u64::try_from(past.as_micros()).unwrap_or(u64::MAX);
            counters
                .past_deadline_us
                .fetch_add(past_us, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// The deadline a request carries: the minimum of the valid `grpc-timeout`
/// and `x-envoy-expected-rq-timeout-ms` values; malformed values are ignored.
pub fn request_budget(headers: &HeaderMap) -> Option<Duration> {
    let grpc = headers
        .get(GRPC_TIMEOUT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout);
    let envoy = headers
        .get(ENVOY_TIMEOUT_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| (1..=8).contains(&v.len()))
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis);
    grpc.into_iter().chain(envoy).min()
}

/// Parses the gRPC timeout grammar: 1 to 8 digits and a unit (H M S m u n).
fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    if !value.is_ascii() {
        return None;
    }
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The per-class routes before they are merged into one router, so a policy
/// can attach a per-route layer (such as a class marker) to each.
pub struct ClassRoutes {
    downstream: Arc<Downstream>,
}

impl ClassRoutes {
    fn new(downstream: Arc<Downstream>) -> Self {
        ClassRoutes { downstream }
    }

    /// The handler of one class: hand a job to the downstream, answer 200.
    pub fn route(&self, class: Class) -> MethodRouter {
        let downstream = Arc::clone(&self.downstream);
        get(
            move |arrived: Option<Extension<Arrived>>, headers: HeaderMap| {
                serve_class(downstream, class, arrived, headers)
            },
        )
    }

    /// All class routes in one router, each as built by [`Self::route`].
    pub fn into_router(self) -> Router {
        self.into_router_with(|_, route| route)
    }

    /// All class routes in one router, each passed through `per_route`
    /// first: the place to attach a class to a route.
    pub fn into_router_with(
        self,
        mut per_route: impl FnMut(Class, MethodRouter) -> MethodRouter,
    ) -> Router {
        Class::ALL.into_iter().fold(Router::new(), |router, class| {
            router.route(class.path(), per_route(class, self.route(class)))
        })
    }
}

/// When a request reached the server, stamped before any policy layer runs,
/// so its deadline counts from its arrival whatever the policy made it wait.
#[derive(Clone, Copy, Debug)]
struct Arrived(Instant);

async fn stamp_arrival(mut request: axum::extract::Request) -> axum::extract::Request {
    request.extensions_mut().insert(Arrived(Instant::now()));
    request
}

async fn serve_class(
    downstream: Arc<Downstream>,
    class: Class,
    arrived: Option<Extension<Arrived>>,
    headers: HeaderMap,
) -> Response {
    let arrived = arrived.map_or_else(Instant::now, |Extension(Arrived(at))| at);
    let deadline = request_budget(&headers).and_then(|budget| arrived.checked_add(budget));
    match downstream.call(class, deadline).await {
        Ok(()) => (StatusCode::OK, class.name()).into_response(),
        Err(Closed) => (StatusCode::SERVICE_UNAVAILABLE, "server stopping").into_response(),
    }
}

/// The `tower` policy, as in axum's error-handling docs: `load_shed` over a
/// concurrency limit of K, the overload error mapped to 503.
///
/// The limit is [`GlobalConcurrencyLimitLayer`], not `concurrency_limit(K)`:
/// `Router::layer` applies the layer to each route separately, and the plain
/// layer creates its semaphore per application, which would allow K per route
/// (4K in all). The global layer shares one semaphore of K.
fn tower_policy(router: Router, workers: usize) -> Router {
    router.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(overload_response))
            .load_shed()
            .layer(GlobalConcurrencyLimitLayer::new(workers)),
    )
}

async fn overload_response(err: BoxError) -> (StatusCode, &'static str) {
    if err.is::<Overloaded>() {
        (StatusCode::SERVICE_UNAVAILABLE, "overloaded")
    } else {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "unexpected middleware error",
        )
    }
}

/// The `shed` policy: shed-axum with a concurrency limit of K (the
/// downstream's workers) and every other setting at its default.
///
/// Each class route gets its own [`ShedLayer`] of one shared engine, so all
/// four count against one limit and each is judged at its own class. Returns
/// the engine too, for `/stats`.
pub fn shed_policy(routes: ClassRoutes, workers: usize) -> Result<(Router, Shedder), ServerError> {
    let shedder = Shedder::builder().limit(workers).build()?;
    let router = routes.into_router_with(|class, route| {
        route.layer(ShedLayer::new(shedder.clone()).class(class.into()))
    });
    Ok((router, shedder))
}

/// The whole application: the class routes under `config.policy`, then the
/// unprotected `/stats` and `/admin` routes.
fn app(config: &ServerConfig, downstream: &Arc<Downstream>) -> Result<Router, ServerError> {
    let routes = ClassRoutes::new(Arc::clone(downstream));
    let (protected, shedder) = match config.policy {
        Policy::None => (routes.into_router(), None),
        Policy::Tower => (tower_policy(routes.into_router(), config.workers), None),
        Policy::Shed => {
            let (router, shedder) = shed_policy(routes, config.workers)?;
            (router, Some(shedder))
        }
    };
    let stats = Arc::clone(downstream);
    let admin = Arc::clone(downstream);
    Ok(protected
        .route(
            "/stats",
            get(move || async move {
                let mut json = stats.snapshot().to_json();
                if let Some(shedder) = &shedder {
                    let engine = shed::axum::stats::to_json(&shedder.stats());
                    json["shed"] = serde_json::from_str(&engine).unwrap_or_default();
                }
                Json(json)
            }),
        )
        .route(
            "/admin/slowdown/{percent}",
            put(move |Path(percent): Path<u64>| async move {
                admin.set_slowdown_pct(percent);
                StatusCode::NO_CONTENT
            }),
        )
        // Outermost, so the stamp is taken before any policy layer runs.
        .layer(axum::middleware::map_request(stamp_arrival)))
}

/// A running server; [`Server::stop`] shuts it down.
pub struct Server {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// Its downstream, for the lab's knobs and counters.
    pub downstream: Arc<Downstream>,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Builds the app and starts serving on `addr` (port 0 picks one).
    pub async fn start(config: &ServerConfig, addr: SocketAddr) -> Result<Server, ServerError> {
        let downstream = Downstream::new(config.workers, config.service);
        let app = app(config, &downstream)?;
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (shutdown, signal) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = signal.await;
                })
                .await
        });
        Ok(Server {
            addr,
            downstream,
            shutdown,
            task,
        })
    }

    /// Refuses queued jobs, stops accepting, and waits up to 2 s for open
    /// connections before dropping them.
    pub async fn stop(self) {
        self.downstream.close();
        let _ = self.shutdown.send(());
        let abort = self.task.abort_handle();
        if tokio::time::timeout(Duration::from_secs(2), self.task)
            .await
            .is_err()
        {
            abort.abort();
        }
    }

    /// Serves until the task ends (for `overload serve`).
    pub async fn wait(self) -> std::io::Result<()> {
        self.task
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_grammar() {
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_grpc_timeout("123456789m"), None);
        assert_eq!(parse_grpc_timeout("m"), None);
        assert_eq!(parse_grpc_timeout("10x"), None);
        assert_eq!(parse_grpc_timeout(""), None);
        assert_eq!(parse_grpc_timeout("-1m"), None);
        assert_eq!(parse_grpc_timeout("1é"), None);
    }

    #[test]
    fn budget_is_the_minimum_of_valid_headers() {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT_HEADER, "300m".parse().unwrap());
        headers.insert(ENVOY_TIMEOUT_HEADER, "120".parse().unwrap());
        assert_eq!(request_budget(&headers), Some(Duration::from_millis(120)));
        headers.insert(ENVOY_TIMEOUT_HEADER, "bogus".parse().unwrap());
        assert_eq!(request_budget(&headers), Some(Duration::from_millis(300)));
    }
}
