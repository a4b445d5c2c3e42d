//! The throttle's judgement of one request, and what it learns from the
//! answer: shared by the service and by the retry policy's gate.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderMap, Request, Response, StatusCode};
use parking_lot::Mutex;
use shed_core::wire::{self, LOAD_HEADER};
use shed_core::{Class, Rank};

use super::layer::{Config, State};
use super::replica::{Answer, Replica};
use super::replicas::ReplicaKey;
use super::LocalReason;
use crate::client::headers;
use crate::feedback::GRPC_STATUS;
use crate::hook::RequestHead;

/// A throttle's shared state and settings: two reference counts.
#[derive(Clone)]
pub(super) struct Throttle {
    pub(super) state: Arc<State>,
    pub(super) config: Arc<Config>,
}

/// One request as the throttle sees it.
#[derive(Clone)]
pub(super) struct Call {
    pub(super) replica: Arc<Mutex<Replica>>,
    pub(super) key: ReplicaKey,
    pub(super) class: Class,
    pub(super) attempt: u32,
    pub(super) grpc: bool,
}

impl Call {
    pub(super) fn rank(&self) -> Rank {
        Rank::of(self.class, self.attempt)
    }
}

/// A local refusal: why, and how long the caller is asked to wait.
#[derive(Clone, Copy, Debug)]
pub(super) struct Verdict {
    pub(super) reason: LocalReason,
    pub(super) retry_after: Duration,
}

impl Throttle {
    /// The throttle's clock now: read once per request sent through it.
    pub(super) fn now(&self) -> Instant {
        self.config.clock.now()
    }

    /// The request's replica, class, attempt and protocol, at `now`; `None`
    /// when the throttle has no room for its replica.
    pub(super) fn call_of<B>(&self, request: &Request<B>, now: Instant) -> Option<Call> {
        let head = RequestHead::of(request);
        let classification = self.config.rules.classify(&head);
        let class = request
            .extensions()
            .get::<Class>()
            .copied()
            .unwrap_or(classification.class());
        let key = request.uri().authority().cloned();
        let replica = self.state.replicas.get(&key, now, self.config.window)?;
        Some(Call {
            replica,
            key,
            class,
            attempt: classification.attempt(),
            grpc: classification.is_grpc(),
        })
    }

    /// Whether `call`, as attempt `attempt`, is refused here; counted and
    /// traced if so.
    pub(super) fn judge(&self, call: &Call, attempt: u32) -> Option<Verdict> {
        let mut replica = call.replica.lock();
        let verdict = self.judge_locked(&mut replica, call, attempt, self.now());
        drop(replica);
        verdict.inspect(|verdict| self.refused(call, attempt, verdict))
    }

    /// Judges `call` on its way out at `now` and counts it: refused here
    /// (counted and traced), or sent to its replica. One lock of the
    /// replica for both.
    pub(super) fn judge_to_send(&self, call: &Call, now: Instant) -> Option<Verdict> {
        let mut replica = call.replica.lock();
        let verdict = self.judge_locked(&mut replica, call, call.attempt, now);
        if verdict.is_none() {
            replica.sent(now);
        }
        drop(replica);
        match verdict {
            Some(verdict) => self.refused(call, call.attempt, &verdict),
            None => self.state.counters.count_sent(),
        }
        verdict
    }

    fn judge_locked(
        &self,
        replica: &mut Replica,
        call: &Call,
        attempt: u32,
        now: Instant,
    ) -> Option<Verdict> {
        let rank = Rank::of(call.class, attempt);
        let draw = self.config.random.unit();
        let reason = replica.judge(rank, now, draw, self.config.multiplier)?;
        Some(Verdict {
            reason,
            retry_after: replica.retry_after(rank, now, self.config.window),
        })
    }

    /// Counts and traces a local refusal.
    fn refused(&self, call: &Call, attempt: u32, verdict: &Verdict) {
        let Verdict {
            reason,
            retry_after,
        } = *verdict;
        self.state.counters.count_refused(reason);
        tracing::debug!(
            target: "shed",
            authority = call.key.as_ref().map_or("", |authority| authority.as_str()),
            class = call.class.as_str(),
            attempt,
            reason = reason.as_str(),
            retry_after_ms = retry_after.as_millis() as u64,
            "refused locally"
        );
    }

    /// Counts a request sent at `now`, to `call`'s replica if the throttle
    /// keeps one for it.
    pub(super) fn count_sent(&self, call: Option<&Call>, now: Instant) {
        self.state.counters.count_sent();
        if let Some(call) = call {
            call.replica.lock().sent(now);
        }
    }

    /// Learns from the head of an answer to `call`: its load report, and
    /// whether the replica accepted the request.
    pub(super) fn answered<B>(&self, call: &Call, response: &Response<B>) {
        let now = self.config.clock.now();
        let mut replica = call.replica.lock();
        if let Some(report) = report_in(response.headers()) {
            replica.reported(&report, now);
        }
        replica.answered(call.rank(), answer_of(response, call.grpc), now);
    }

    /// Learns from a transport failure of `call`.
    pub(super) fn failed(&self, call: &Call) {
        let now = self.config.clock.now();
        call.replica
            .lock()
            .answered(call.rank(), Answer::Failed, now);
    }

    /// Learns from the trailers of a gRPC call that `call` made.
    pub(super) fn trailers(&self, call: &Call, trailers: &HeaderMap) {
        if let Some(report) = report_in(trailers) {
            let now = self.config.clock.now();
            call.replica.lock().reported(&report, now);
        }
    }
}

/// The load report in `headers`, if one is there and well formed.
fn report_in(headers: &HeaderMap) -> Option<wire::LoadReport> {
    wire::load_report(headers.get(LOAD_HEADER)?.as_bytes())
}

/// Whether an answer is an overload refusal: `429` or `503` for HTTP, a
/// trailers-only `RESOURCE_EXHAUSTED` or `UNAVAILABLE` for gRPC (as the
/// shed server sends them), with the pushback it asked for.
fn answer_of<B>(response: &Response<B>, grpc: bool) -> Answer {
    let status = response.status();
    let overloaded = match response.headers().get(GRPC_STATUS) {
        Some(code) if grpc && status == StatusCode::OK => {
            matches!(code.as_bytes(), b"8" | b"14")
        }
        _ => matches!(
            status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
        ),
    };
    if !overloaded {
        return Answer::Accepted;
    }
    let pushback = headers::pushback(response.headers(), SystemTime::now()).floor();
    Answer::Overloaded(pushback.unwrap_or(Duration::ZERO))
}

/// Reads the load report in the trailers of a gRPC call the throttle sent.
pub(crate) struct TrailerReader {
    throttle: Throttle,
    call: Call,
}

impl TrailerReader {
    pub(super) fn new(throttle: Throttle, call: Call) -> TrailerReader {
        TrailerReader { throttle, call }
    }

    pub(crate) fn read(&self, trailers: &HeaderMap) {
        self.throttle.trailers(&self.call, trailers);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, headers: &[(&'static str, &'static str)]) -> Response<()> {
        let mut builder = Response::builder().status(status);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn http_overload_refusals_are_429_and_503_with_their_pushback() {
        let refused = response(429, &[("retry-after", "2")]);
        assert_eq!(
            answer_of(&refused, false),
            Answer::Overloaded(Duration::from_secs(2))
        );
        assert_eq!(
            answer_of(&response(503, &[]), false),
            Answer::Overloaded(Duration::ZERO)
        );
    }

    #[test]
    fn other_failures_are_accepted_work() {
        for status in [200, 404, 500, 504] {
            assert_eq!(answer_of(&response(status, &[]), false), Answer::Accepted);
        }
    }

    #[test]
    fn grpc_overload_refusals_are_trailers_only_8_and_14() {
        for code in ["8", "14"] {
            let refused = response(
                200,
                &[("grpc-status", code), ("grpc-retry-pushback-ms", "250")],
            );
            assert_eq!(
                answer_of(&refused, true),
                Answer::Overloaded(Duration::from_millis(250))
            );
        }
        let failed = response(200, &[("grpc-status", "13")]);
        assert_eq!(answer_of(&failed, true), Answer::Accepted);
        assert_eq!(answer_of(&response(200, &[]), true), Answer::Accepted);
    }

    #[test]
    fn a_report_that_is_malformed_is_absent() {
        let mut headers = HeaderMap::new();
        headers.insert(LOAD_HEADER, http::HeaderValue::from_static("ranks=9"));
        assert!(report_in(&headers).is_none());
    }
}
