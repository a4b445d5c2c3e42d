//! One logical request as a real HTTP client makes it: attempts with a
//! timeout, retries with exponential backoff and full jitter, what is left
//! of the request's deadline sent in `grpc-timeout` (as gRPC sends a call's
//! deadline, not an attempt's: callers advertise more than each attempt
//! waits), and the attempt number in `shed-attempt`. Callers wait
//! at least the `Retry-After` of any server that sends one; a share of them
//! may hang up early (the soak's hang-ups).

use std::{
    net::SocketAddr,
    time::{Duration, Instant, SystemTime},
};

use bytes::Bytes;
use http::{header::RETRY_AFTER, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::TokioExecutor,
};
use shed::client::{RefusedLocally, ShedThrottle, ShedThrottleLayer};
use shed::wire::{self, ATTEMPT_HEADER, GRPC_TIMEOUT_HEADER};
use tower::{Layer, ServiceExt};

use crate::{class::Class, grpc};

/// An attempt is not started with less time than this left.
const MIN_ATTEMPT_WINDOW: Duration = Duration::from_millis(5);

/// How callers behave.
#[derive(Clone, Copy, Debug)]
pub struct ClientConfig {
    /// Time from the first send within which an answer is useful.
    pub deadline: Duration,
    /// Timeout of one attempt (capped by what is left of the deadline).
    pub attempt_timeout: Duration,
    /// Attempts per logical request, the original included.
    pub max_attempts: u32,
    /// Backoff before retry k is uniform in [0, min(cap, base * 2^(k-1))).
    pub backoff_base: Duration,
    /// Upper bound of the backoff window.
    pub backoff_cap: Duration,
    /// Share of logical requests whose caller hangs up during its first
    /// attempt, at a uniform time within the attempt timeout, and does not
    /// retry (0 in every scenario but the soak).
    pub hangup_share: f64,
    /// What the calls speak.
    pub protocol: Protocol,
    /// Whether HTTP calls go through shed's client throttle
    /// (`ShedThrottleLayer`), which refuses locally what the server's load
    /// reports say it sheds.
    pub throttle: bool,
}

impl ClientConfig {
    /// The lab's callers: a 1 s deadline, 250 ms attempts, up to 3 attempts,
    /// over HTTP.
    pub fn standard() -> Self {
        ClientConfig {
            deadline: Duration::from_millis(1000),
            attempt_timeout: Duration::from_millis(250),
            max_attempts: 3,
            backoff_base: Duration::from_millis(25),
            backoff_cap: Duration::from_millis(250),
            hangup_share: 0.0,
            protocol: Protocol::Http,
            throttle: false,
        }
    }
}

/// What a lab client speaks to the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `GET /{class}` over pooled HTTP/1.1 connections (`shed-attempt`,
    /// `Retry-After`).
    Http,
    /// The unary method `lab.v1.Lab/{Class}` with tonic over HTTP/2
    /// (`grpc-previous-rpc-attempts`, `grpc-retry-pushback-ms`).
    Grpc,
}

impl Protocol {
    /// Its name in trial labels and tables.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Grpc => "grpc",
        }
    }
}

/// What became of one attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptResult {
    /// A 2xx answer.
    Success,
    /// Any other status.
    Status(u16),
    /// A gRPC call ended with this status (not OK).
    Grpc(tonic::Code),
    /// The client's throttle refused it before sending (the `429` it
    /// answered carries a `Retry-After` like a server's).
    RefusedLocally,
    /// No complete answer within the attempt timeout.
    Timeout,
    /// The connection failed.
    Error,
    /// The caller hung up before the answer.
    HungUp,
}

impl AttemptResult {
    /// Whether a caller retries after this result.
    fn retryable(self) -> bool {
        match self {
            AttemptResult::Success => false,
            AttemptResult::Status(s) => matches!(s, 429 | 502 | 503 | 504),
            // The same refusals as over HTTP, under their gRPC names.
            AttemptResult::Grpc(code) => grpc::refusal_status(code).is_some(),
            AttemptResult::RefusedLocally => true,
            AttemptResult::Timeout | AttemptResult::Error => true,
            AttemptResult::HungUp => false,
        }
    }

    /// A short label for failure counts: the status code, `timeout`, `io`
    /// or `hangup`.
    pub fn reason(self) -> Option<String> {
        match self {
            AttemptResult::Success => None,
            AttemptResult::Status(s) => Some(s.to_string()),
            AttemptResult::Grpc(code) => Some(match grpc::refusal_status(code) {
                Some(status) => status.to_string(),
                None => format!("grpc-{}", code as i32),
            }),
            AttemptResult::RefusedLocally => Some("local".into()),
            AttemptResult::Timeout => Some("timeout".into()),
            AttemptResult::Error => Some("io".into()),
            AttemptResult::HungUp => Some("hangup".into()),
        }
    }

    /// Whether the server turned the attempt away (rather than failing it).
    pub fn is_shed(self) -> bool {
        match self {
            AttemptResult::Status(status) => matches!(status, 429 | 503 | 504),
            AttemptResult::Grpc(code) => grpc::refusal_status(code).is_some(),
            _ => false,
        }
    }
}

/// One attempt as recorded.
#[derive(Clone, Copy, Debug)]
pub struct Attempt {
    /// When it was sent, from the run's epoch.
    pub sent: Duration,
    /// What came of it.
    pub result: AttemptResult,
}

/// One logical request as recorded: every figure of the lab comes from these.
#[derive(Clone, Debug)]
pub struct LogicalRecord {
    /// The class (route) it called.
    pub class: Class,
    /// When the first attempt was sent, from the run's epoch.
    pub start: Duration,
    /// How late the generator sent it after its scheduled arrival.
    pub lag: Duration,
    /// When the caller was done (success, or gave up), from the epoch.
    pub end: Duration,
    /// The attempts made, in order.
    pub attempts: Vec<Attempt>,
    /// Answered with success within the deadline.
    pub success: bool,
}

impl LogicalRecord {
    /// Time from first send to the end.
    pub fn latency(&self) -> Duration {
        self.end.saturating_sub(self.start)
    }
}

/// A client bound to one lab server: pooled HTTP/1, or tonic over HTTP/2,
/// as its [`ClientConfig::protocol`] says.
#[derive(Clone)]
pub struct LabClient {
    http: Client<HttpConnector, Empty<Bytes>>,
    uris: [Uri; 4],
    grpc: Option<grpc::Caller>,
    throttled: Option<ShedThrottle<Client<HttpConnector, Empty<Bytes>>>>,
    config: ClientConfig,
}

impl LabClient {
    /// A client calling the class routes of the server at `addr`.
    pub fn new(addr: SocketAddr, config: ClientConfig) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let http = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(1024)
            .pool_idle_timeout(Duration::from_secs(5))
            .build(connector);
        let uris = Class::ALL.map(|c| {
            format!("http://{addr}{}", c.path())
                .parse()
                .expect("a socket address and a path form a valid URI")
        });
        let grpc = (config.protocol == Protocol::Grpc).then(|| grpc::Caller::new(addr));
        // One throttle per client (per process in the fleet): its state is
        // per replica address, shared by every call.
        let throttled = config
            .throttle
            .then(|| ShedThrottleLayer::new().layer(http.clone()));
        LabClient {
            http,
            uris,
            grpc,
            throttled,
            config,
        }
    }

    /// Makes one logical request: up to `max_attempts` attempts within the
    /// deadline. `epoch` is the run's time origin for the record and `due`
    /// the arrival time the generator scheduled.
    pub async fn call(&self, class: Class, epoch: Instant, due: Instant) -> LogicalRecord {
        let cfg = &self.config;
        let start = Instant::now();
        let deadline = start + cfg.deadline;
        let mut attempts = Vec::with_capacity(cfg.max_attempts as usize);
        let mut success = false;
        let hangup = (cfg.hangup_share > 0.0 && fastrand::f64() < cfg.hangup_share)
            .then(|| cfg.attempt_timeout.mul_f64(fastrand::f64()));
        for n in 1..=cfg.max_attempts {
            let sent = Instant::now();
            let remaining = deadline.saturating_duration_since(sent);
            if remaining < MIN_ATTEMPT_WINDOW {
                break;
            }
            let timeout = remaining.min(cfg.attempt_timeout);
            let (result, retry_after) = match hangup {
                // The header still carries the whole deadline: the server
                // cannot know the caller will leave early.
                Some(after) if n == 1 => {
                    match self.attempt(class, n, remaining, after.min(timeout)).await {
                        (AttemptResult::Timeout, r) => (AttemptResult::HungUp, r),
                        other => other,
                    }
                }
                _ => self.attempt(class, n, remaining, timeout).await,
            };
            attempts.push(Attempt {
                sent: sent - epoch,
                result,
            });
            if result == AttemptResult::Success {
                success = Instant::now() <= deadline;
                break;
            }
            if !result.retryable() || n == cfg.max_attempts {
                break;
            }
            let pause = full_jitter(cfg.backoff_base, cfg.backoff_cap, n)
                .max(retry_after.unwrap_or_default());
            if Instant::now() + pause + MIN_ATTEMPT_WINDOW >= deadline {
                break;
            }
            tokio::time::sleep(pause).await;
        }
        LogicalRecord {
            class,
            start: start - epoch,
            lag: start.saturating_duration_since(due),
            end: Instant::now() - epoch,
            attempts,
            success,
        }
    }

    /// One attempt: the request, its answer and the body, all within
    /// `give_up` (`deadline` is the time left that the request tells the server).
    async fn attempt(
        &self,
        class: Class,
        n: u32,
        deadline: Duration,
        give_up: Duration,
    ) -> (AttemptResult, Option<Duration>) {
        if let Some(grpc) = &self.grpc {
            return grpc.attempt(class, n, deadline, give_up).await;
        }
        let mut request = Request::get(self.uris[class.index()].clone())
            .header(
                GRPC_TIMEOUT_HEADER,
                wire::format_grpc_timeout(deadline).as_str(),
            )
            .header(ATTEMPT_HEADER, n)
            .body(Empty::new())
            .expect("static parts form a valid request");
        let exchange = async {
            let response = match &self.throttled {
                Some(throttled) => {
                    request.extensions_mut().insert(shed::Class::from(class));
                    let response = throttled.clone().oneshot(request).await.map_err(|_| ())?;
                    if let Some(refused) = response.extensions().get::<RefusedLocally>() {
                        return Ok((None, Some(refused.retry_after())));
                    }
                    response.map(BodyExt::boxed_unsync)
                }
                None => self
                    .http
                    .request(request)
                    .await
                    .map_err(|_| ())?
                    .map(BodyExt::boxed_unsync),
            };
            let status = response.status();
            // Read as shed's own client reads it: seconds or an HTTP-date.
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| wire::retry_after(v.as_bytes(), SystemTime::now()))
                .map(|delay| match delay {
                    wire::Delay::After(delay) => delay,
                    wire::Delay::TooLong => Duration::from_secs(86_400),
                });
            response.into_body().collect().await.map_err(|_| ())?;
            Ok::<_, ()>((Some(status), retry_after))
        };
        match tokio::time::timeout(give_up, exchange).await {
            Err(_) => (AttemptResult::Timeout, None),
            Ok(Err(())) => (AttemptResult::Error, None),
            // Refused before sending: the caller waits the throttle's
            // Retry-After as a server's.
            Ok(Ok((None, retry_after))) => (AttemptResult::RefusedLocally, retry_after),
            Ok(Ok((Some(status), retry_after))) if status == StatusCode::OK => {
                (AttemptResult::Success, retry_after)
            }
            Ok(Ok((Some(status), retry_after))) => {
                (AttemptResult::Status(status.as_u16()), retry_after)
            }
        }
    }
}

/// Full-jitter backoff before retry number `n` (1 = the first retry):
/// uniform in [0, min(cap, base * 2^(n-1))).
fn full_jitter(base: Duration, cap: Duration, n: u32) -> Duration {
    let window = base.saturating_mul(1 << (n - 1).min(16)).min(cap);
    window.mul_f64(fastrand::f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_window_doubles_up_to_the_cap() {
        let (base, cap) = (Duration::from_millis(50), Duration::from_millis(150));
        for _ in 0..1000 {
            assert!(full_jitter(base, cap, 1) < Duration::from_millis(50));
            assert!(full_jitter(base, cap, 2) < Duration::from_millis(100));
            assert!(full_jitter(base, cap, 9) < cap);
        }
    }
}
