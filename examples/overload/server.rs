//! The server under test: a real axum server on loopback, one route per
//! class, a service with finite capacity behind them (the worker pool of
//! `downstream.rs` or the CPU work of `cpu.rs`), under one admission policy.
//!
//! `/stats` (JSON: the service's state and work counters, and the shed
//! engine's stats under `shed`), `/admin/slowdown/{percent}`,
//! `/admin/seed/{seed}` and the engine's settings at `/admin/shed/...`
//! (`tuning.rs`) are merged after the policy layer, so they are never shed.

use std::{
    fmt,
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    extract::Path,
    http::{HeaderMap, StatusCode},
    response::IntoResponse,
    routing::{get, put, MethodRouter},
    Extension, Json,
};
use shed::Shedder;
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};

use crate::{
    class::Class,
    client::Protocol,
    cpu::CpuService,
    downstream::{Closed, Downstream, ServiceTime},
    exposition, grpc,
    policy::ServerPolicy,
    request_deadline::{self, Arrived},
    tuning,
    work::ClassStats,
};

/// Length of one slice of CPU work in the CPU-bound service.
pub const CPU_SLICE: Duration = Duration::from_millis(1);

/// What serves the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServiceSpec {
    /// A pool of `workers` workers, each job holding one for a drawn time.
    Downstream {
        /// K, the number of workers.
        workers: usize,
        /// How long a job holds a worker.
        time: ServiceTime,
    },
    /// Each request burns about `work` of CPU in [`CPU_SLICE`]s.
    Cpu {
        /// CPU work per request.
        work: Duration,
        /// Loop iterations per slice, measured once by the lab
        /// ([`crate::cpu::iterations_per_slice`]); `None`: the server
        /// measures them itself.
        iterations: Option<u64>,
    },
}

impl ServiceSpec {
    /// How many requests the service can work on at once, as far as its
    /// shape tells (the calibration measures what it really does).
    pub fn parallelism(&self) -> usize {
        match self {
            ServiceSpec::Downstream { workers, .. } => *workers,
            ServiceSpec::Cpu { .. } => 1,
        }
    }

    /// The `overload serve` flags that build this service.
    pub fn serve_args(&self) -> Vec<String> {
        match self {
            ServiceSpec::Downstream { workers, time } => vec![
                "--service".into(),
                "downstream".into(),
                "--workers".into(),
                workers.to_string(),
                "--service-us".into(),
                time.mean.as_micros().to_string(),
                "--service-dist".into(),
                match time.distribution {
                    crate::downstream::Distribution::Exponential => "exp".into(),
                    crate::downstream::Distribution::Constant => "constant".into(),
                },
            ],
            ServiceSpec::Cpu { work, iterations } => {
                let mut args = vec![
                    "--service".into(),
                    "cpu".into(),
                    "--cpu-work-us".into(),
                    work.as_micros().to_string(),
                ];
                if let Some(iterations) = iterations {
                    args.extend(["--cpu-iterations".into(), iterations.to_string()]);
                }
                args
            }
        }
    }
}

impl fmt::Display for ServiceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServiceSpec::Downstream { workers, time } => write!(
                f,
                "{workers} workers x {} ms {} service time",
                time.mean.as_secs_f64() * 1e3,
                match time.distribution {
                    crate::downstream::Distribution::Exponential => "mean exponential",
                    crate::downstream::Distribution::Constant => "constant",
                }
            ),
            ServiceSpec::Cpu { work, iterations } => {
                write!(
                    f,
                    "{} ms of CPU per request in {} ms slices",
                    work.as_secs_f64() * 1e3,
                    CPU_SLICE.as_secs_f64() * 1e3
                )?;
                match iterations {
                    Some(n) => write!(f, " of {n} loop iterations (measured once)"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// How the server is built.
#[derive(Clone, Copy, Debug)]
pub struct ServerConfig {
    /// The admission policy in front of the service.
    pub policy: ServerPolicy,
    /// What serves the requests.
    pub service: ServiceSpec,
    /// Seed of the service-time draws.
    pub seed: u64,
    /// Whether a shed policy states its load on every answer (`shed-load`).
    pub load_feedback: bool,
}

/// The shed engine's state in a sample.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EngineSample {
    /// The concurrency limit.
    pub limit: u32,
    /// Requests holding a slot.
    pub in_flight: u32,
    /// Requests waiting in the engine's queues.
    pub queue_len: u32,
    /// Refusals since the server started, by reason, over all classes.
    pub refusals: Refusals,
    /// In shadow mode, the refusals enforcing mode would have made.
    pub would: Refusals,
    /// Probes the adaptive limit ran since the server started (0 if fixed).
    pub probes: u64,
    /// Cuts of the adaptive limit for censored permits since the server
    /// started.
    pub back_offs: u64,
    /// The adaptive limit's phase (empty if fixed).
    pub phase: &'static str,
    /// The knee the adaptive limit's probes measured, once measured.
    pub knee: Option<f64>,
    /// The adaptive limit's no-queue baseline hold time, in milliseconds.
    pub baseline_ms: Option<f64>,
    /// The admission level (0 admits everything; 128 positions a rank).
    pub level: u16,
    /// Completions per second the engine measures with every slot busy.
    pub drain_rate: Option<f64>,
}

/// The engine's refusals by reason (its `/stats` class counters, summed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refusals {
    /// At the door, by the admission level (429).
    pub level: u64,
    /// At the door, for a deadline passed or unmeetable (504).
    pub deadline: u64,
    /// At the door, for a queue longer than callers wait or full (429).
    pub queue_full: u64,
    /// While queued: shed by a raised level, or out of time (429, 504).
    pub in_queue: u64,
    /// Of those, per class from background to critical.
    pub in_queue_by_class: [u64; 4],
}

impl std::fmt::Display for Refusals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "level {}, deadline {}, queue full {}, in queue {} (by class from background: {:?})",
            self.level, self.deadline, self.queue_full, self.in_queue, self.in_queue_by_class
        )
    }
}

impl Refusals {
    fn of(stats: &shed::Stats) -> Refusals {
        Refusals::summed(stats, |c| {
            [
                c.shed,
                c.shed_by_deadline,
                c.queue_full,
                c.dropped_from_queue + c.expired,
            ]
        })
    }

    /// The refusals a shadow engine would have made.
    fn would_of(stats: &shed::Stats) -> Refusals {
        Refusals::summed(stats, |c| {
            let w = &c.would;
            [
                w.shed,
                w.shed_by_deadline,
                w.queue_full,
                w.dropped_from_queue + w.expired,
            ]
        })
    }

    /// Sums per class what `counts` reads: by the level, for a deadline, for
    /// a full queue, while queued.
    fn summed(stats: &shed::Stats, counts: impl Fn(&shed::ClassStats) -> [u64; 4]) -> Refusals {
        let mut refusals = Refusals::default();
        for c in &stats.classes {
            let [level, deadline, queue_full, in_queue] = counts(c);
            refusals.level += level;
            refusals.deadline += deadline;
            refusals.queue_full += queue_full;
            refusals.in_queue += in_queue;
            refusals.in_queue_by_class[c.class.index()] += in_queue;
        }
        refusals
    }

    /// Every refusal, whatever the reason.
    pub fn total(&self) -> u64 {
        self.level + self.deadline + self.queue_full + self.in_queue
    }

    /// Reads the class counters of `/stats`, or their `nested` object
    /// (`would`).
    fn from_json<'a>(classes: &'a serde_json::Value, nested: Option<&str>) -> Refusals {
        let within = |c: &'a serde_json::Value| -> &'a serde_json::Value {
            match nested {
                Some(key) => &c[key],
                None => c,
            }
        };
        let sum = |key: &str| {
            classes.as_object().map_or(0, |all| {
                all.values()
                    .map(|c| within(c)[key].as_u64().unwrap_or(0))
                    .sum()
            })
        };
        let in_queue_of = |class: &str| {
            let c = within(&classes[class]);
            c["dropped_from_queue"].as_u64().unwrap_or(0) + c["expired"].as_u64().unwrap_or(0)
        };
        Refusals {
            level: sum("shed"),
            deadline: sum("shed_by_deadline"),
            queue_full: sum("queue_full"),
            in_queue: sum("dropped_from_queue") + sum("expired"),
            in_queue_by_class: ["background", "batch", "interactive", "critical"].map(in_queue_of),
        }
    }
}

/// A point-in-time copy of the server's state, as served at `/stats`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerSample {
    /// Jobs waiting for a worker (always 0 for the CPU service).
    pub queued: usize,
    /// Workers busy, or CPU requests running.
    pub busy: usize,
    /// Current service-time multiplier, in percent.
    pub slowdown_pct: u64,
    /// Per-class work counters, indexed by [`Class::index`].
    pub classes: [ClassStats; 4],
    /// The shed engine's state, under a shed policy.
    pub engine: Option<EngineSample>,
}

impl ServerSample {
    /// Totals over all classes.
    pub fn total(&self) -> ClassStats {
        self.classes
            .iter()
            .fold(ClassStats::default(), |a, c| a.plus(*c))
    }

    /// Reads the JSON of `/stats`; `None` when it is not that JSON.
    pub fn from_json(v: &serde_json::Value) -> Option<ServerSample> {
        let n = |v: &serde_json::Value| v.as_u64();
        let mut classes = [ClassStats::default(); 4];
        for c in Class::ALL {
            classes[c.index()] = ClassStats::from_json(v.get("classes")?.get(c.name())?);
        }
        let engine = v.get("shed").map(|s| EngineSample {
            limit: s["limit"].as_u64().unwrap_or(0) as u32,
            in_flight: s["in_flight"].as_u64().unwrap_or(0) as u32,
            queue_len: s["queue_len"].as_u64().unwrap_or(0) as u32,
            refusals: Refusals::from_json(&s["classes"], None),
            would: Refusals::from_json(&s["classes"], Some("would")),
            probes: s["adaptive"]["probes"].as_u64().unwrap_or(0),
            back_offs: s["adaptive"]["back_offs"].as_u64().unwrap_or(0),
            phase: match s["adaptive"]["phase"].as_str() {
                Some("slow start") => "slow start",
                Some("steady") => "steady",
                Some("probing") => "probing",
                _ => "",
            },
            knee: s["adaptive"]["knee"].as_f64(),
            baseline_ms: s["adaptive"]["baseline_ms"].as_f64(),
            level: s["level"].as_u64().unwrap_or(0) as u16,
            drain_rate: s["drain_rate_per_s"].as_f64(),
        });
        Some(ServerSample {
            queued: n(v.get("queued")?)? as usize,
            busy: n(v.get("busy")?)? as usize,
            slowdown_pct: n(v.get("slowdown_pct")?)?,
            classes,
            engine,
        })
    }
}

/// The service behind the class routes.
#[derive(Clone)]
enum Backend {
    Downstream(Arc<Downstream>),
    Cpu(Arc<CpuService>),
}

/// A handle on a server in this process: its state and its knobs.
#[derive(Clone)]
pub struct LocalControl {
    backend: Backend,
    shedder: Option<Shedder>,
}

impl LocalControl {
    /// The server's state now.
    pub fn sample(&self) -> ServerSample {
        let (queued, busy, slowdown_pct, counters) = match &self.backend {
            Backend::Downstream(d) => {
                let (q, b) = d.queued_busy();
                (q, b, d.slowdown_pct(), d.counters())
            }
            Backend::Cpu(c) => (0, c.running(), c.slowdown_pct(), c.counters()),
        };
        ServerSample {
            queued,
            busy,
            slowdown_pct,
            classes: counters.snapshot(),
            engine: self.shedder.as_ref().map(|s| {
                let stats = s.stats();
                EngineSample {
                    limit: stats.limit,
                    in_flight: stats.in_flight,
                    queue_len: stats.queue_len(),
                    refusals: Refusals::of(&stats),
                    would: Refusals::would_of(&stats),
                    probes: stats.adaptive.map_or(0, |a| a.probes),
                    back_offs: stats.adaptive.map_or(0, |a| a.back_offs),
                    phase: stats.adaptive.map_or("", |a| a.phase),
                    knee: stats.adaptive.and_then(|a| a.knee),
                    baseline_ms: stats
                        .adaptive
                        .and_then(|a| a.baseline)
                        .map(|b| b.as_secs_f64() * 1e3),
                    level: stats.level.get(),
                    drain_rate: stats.drain_rate,
                }
            }),
        }
    }

    /// Stretches the service's work from now on by `percent`/100.
    pub fn set_slowdown_pct(&self, percent: u64) {
        match &self.backend {
            Backend::Downstream(d) => d.set_slowdown_pct(percent),
            Backend::Cpu(c) => c.set_slowdown_pct(percent),
        }
    }

    /// Restarts the service-time draws from `seed` (the CPU service draws none).
    pub fn reseed(&self, seed: u64) {
        if let Backend::Downstream(d) = &self.backend {
            d.reseed(seed);
        }
    }

    /// The `/stats` JSON.
    fn stats_json(&self) -> serde_json::Value {
        let s = self.sample();
        let classes: serde_json::Map<String, serde_json::Value> = Class::ALL
            .iter()
            .map(|c| (c.name().to_owned(), s.classes[c.index()].to_json()))
            .collect();
        let mut json = serde_json::json!({
            "queued": s.queued,
            "busy": s.busy,
            "slowdown_pct": s.slowdown_pct,
            "total": s.total().to_json(),
            "classes": classes,
        });
        if let Some(shedder) = &self.shedder {
            let engine = shed::stats::to_json(&shedder.stats());
            json["shed"] = serde_json::from_str(&engine).unwrap_or_default();
        }
        json
    }
}

/// Why a server could not start.
#[derive(Debug)]
pub enum ServerError {
    /// The shed engine refused its configuration.
    ShedConfig(shed::ConfigError),
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

impl From<shed::ConfigError> for ServerError {
    fn from(e: shed::ConfigError) -> Self {
        ServerError::ShedConfig(e)
    }
}

impl From<std::io::Error> for ServerError {
    fn from(e: std::io::Error) -> Self {
        ServerError::Io(e)
    }
}

impl Backend {
    /// Serves one request of `class` that must finish by `deadline`.
    async fn work(&self, class: Class, deadline: Option<Instant>) -> Result<(), Closed> {
        match self {
            Backend::Downstream(d) => d.call(class, deadline).await,
            Backend::Cpu(c) => {
                c.call(class, deadline).await;
                Ok(())
            }
        }
    }
}

/// The handler of one class on `backend`: `GET` over HTTP, or the class's
/// unary gRPC method.
fn class_route(backend: &Backend, class: Class, protocol: Protocol) -> MethodRouter {
    let backend = backend.clone();
    match protocol {
        Protocol::Http => get(
            move |arrived: Option<Extension<Arrived>>, headers: HeaderMap| async move {
                let arrived = arrived.map_or_else(Instant::now, |Extension(Arrived(at))| at);
                let deadline = request_deadline::deadline(arrived, &headers);
                match backend.work(class, deadline).await {
                    Ok(()) => (StatusCode::OK, class.name()).into_response(),
                    Err(Closed) => {
                        (StatusCode::SERVICE_UNAVAILABLE, "server stopping").into_response()
                    }
                }
            },
        ),
        Protocol::Grpc => grpc::method(ClassWork { backend, class }),
    }
}

/// The work of one class's gRPC method.
#[derive(Clone)]
struct ClassWork {
    backend: Backend,
    class: Class,
}

impl grpc::Work for ClassWork {
    fn serve(
        &self,
        deadline: Option<Instant>,
    ) -> impl std::future::Future<Output = Result<String, tonic::Status>> + Send + 'static {
        let ClassWork { backend, class } = self.clone();
        async move {
            match backend.work(class, deadline).await {
                Ok(()) => Ok(class.name().to_owned()),
                Err(Closed) => Err(tonic::Status::unavailable("server stopping")),
            }
        }
    }
}

/// The whole application: the class routes under `policy`, then the
/// unprotected `/stats` and `/admin` routes.
fn app(
    config: &ServerConfig,
    backend: &Backend,
) -> Result<(axum::Router, LocalControl), ServerError> {
    let (protected, shedder) = config
        .policy
        .protect(config.load_feedback, |class, protocol| {
            class_route(backend, class, protocol)
        })?;
    let control = LocalControl {
        backend: backend.clone(),
        shedder,
    };
    let (stats, slowdown, seed) = (control.clone(), control.clone(), control.clone());
    let router = protected
        .route(
            "/stats",
            get(move || std::future::ready(Json(stats.stats_json()))),
        )
        .route(
            "/admin/slowdown/{percent}",
            put(move |Path(percent): Path<u64>| {
                slowdown.set_slowdown_pct(percent);
                std::future::ready(StatusCode::NO_CONTENT)
            }),
        )
        .route(
            "/admin/seed/{seed}",
            put(move |Path(s): Path<u64>| {
                seed.reseed(s);
                std::future::ready(StatusCode::NO_CONTENT)
            }),
        )
        .merge(tuning::routes(control.shedder.clone()))
        .merge(exposition::routes(control.shedder.clone()))
        // Outermost, so the stamp is taken before any policy layer runs.
        .layer(axum::middleware::map_request(
            request_deadline::stamp_arrival,
        ));
    Ok((router, control))
}

/// A running server; [`Server::stop`] shuts it down.
pub struct Server {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// Its state and knobs.
    pub control: LocalControl,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Builds the app and starts serving on `addr` (port 0 picks one).
    pub async fn start(config: &ServerConfig, addr: SocketAddr) -> Result<Server, ServerError> {
        let backend = match config.service {
            ServiceSpec::Downstream { workers, time } => {
                Backend::Downstream(Downstream::new(workers, time, config.seed))
            }
            ServiceSpec::Cpu { work, iterations } => {
                Backend::Cpu(CpuService::new(work, CPU_SLICE, iterations))
            }
        };
        let (app, control) = app(config, &backend)?;
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
            control,
            shutdown,
            task,
        })
    }

    /// Refuses queued jobs, stops accepting, and waits up to 2 s for open
    /// connections before dropping them.
    pub async fn stop(self) {
        if let Backend::Downstream(d) = &self.control.backend {
            d.close();
        }
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
