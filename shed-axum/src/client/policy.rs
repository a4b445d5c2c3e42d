//! The [`tower::retry::Policy`] that drives a [`Retrier`] for HTTP requests
//! and gRPC calls.

use std::time::SystemTime;

use http::{Method, Request, Response};
use shed_core::retry::{AttemptOutcome, Decision, Operation, Pushback, Replay, Retrier};
use tokio::time::{Instant, Sleep};
use tower::retry::Policy;

use super::classify::{ClassifyError, NoConnectErrors};
use super::headers::{self, CallerDeadline};
use super::throttle::{JudgedByGate, RetryGate};
use super::{grpc, RefusedLocally, ReplayableBody};

/// shed's [`tower::retry::Policy`] for `http` services: asks a [`Retrier`]
/// after each attempt, marks each retry with `shed-attempt: N` (and, for a
/// gRPC call, `grpc-previous-rpc-attempts: N - 1`) and what is left of the
/// operation's deadline as `grpc-timeout`, and sleeps the delay the retrier
/// chose.
///
/// A request's body is sent again through [`ReplayableBody`]: a clone for
/// `Clone` bodies, a replay for a [`ReplayBody`](super::ReplayBody). A
/// failure after the replay buffer overflowed stops with
/// [`Reason::BodyTooLarge`](shed_core::retry::Reason::BodyTooLarge).
///
/// It stops at an answer a [`ShedThrottleLayer`](super::ShedThrottleLayer)
/// below it made up ([`RefusedLocally`]) without asking the retrier, and
/// asks that throttle whether a retry would be refused before asking the
/// retrier, so local refusals spend no retry budget.
///
/// Made by [`ShedRetryLayer`](super::ShedRetryLayer), whose
/// [`MarkOriginal`](super::MarkOriginal) marks the original before tower's
/// retry sees it (tower hands the original to the client service
/// untouched); see there for which requests are retried.
#[derive(Debug, Clone)]
pub struct ShedRetryPolicy<C = NoConnectErrors> {
    retrier: Retrier,
    classify: C,
    /// The operation of this request session (tower clones the policy for
    /// each request and calls `clone_request` on the template first).
    session: Option<Session>,
    /// Set by `retry`, so the next `clone_request` continues the operation
    /// instead of beginning one.
    resending: bool,
}

#[derive(Debug, Clone)]
struct Session {
    op: Operation,
    started: Instant,
}

impl<C> ShedRetryPolicy<C> {
    pub(super) fn new(retrier: Retrier, classify: C) -> Self {
        Self {
            retrier,
            classify,
            session: None,
            resending: false,
        }
    }
}

/// The replay declaration of `req`: its [`Replay`] extension; else, for a
/// gRPC call, [`Replay::WhenRefused`]; else whether its method is
/// idempotent.
fn replay_of<B>(req: &Request<B>) -> Replay {
    if let Some(replay) = req.extensions().get::<Replay>() {
        return *replay;
    }
    if grpc::is_call(req.headers()) {
        return Replay::WhenRefused;
    }
    let idempotent = [
        Method::GET,
        Method::HEAD,
        Method::OPTIONS,
        Method::TRACE,
        Method::PUT,
        Method::DELETE,
    ];
    if idempotent.contains(req.method()) {
        Replay::Safe
    } else {
        Replay::Unsafe
    }
}

fn clone_request<B: ReplayableBody>(req: &Request<B>) -> Request<B> {
    let mut clone = Request::new(req.body().replay());
    *clone.method_mut() = req.method().clone();
    *clone.uri_mut() = req.uri().clone();
    *clone.version_mut() = req.version();
    *clone.headers_mut() = req.headers().clone();
    *clone.extensions_mut() = req.extensions().clone();
    clone
}

impl<B, ResBody, E, C> Policy<Request<B>, Response<ResBody>, E> for ShedRetryPolicy<C>
where
    B: ReplayableBody,
    C: ClassifyError<E>,
{
    type Future = Sleep;

    fn retry(
        &mut self,
        req: &mut Request<B>,
        result: &mut Result<Response<ResBody>, E>,
    ) -> Option<Self::Future> {
        let session = self.session.as_mut()?;
        if let Ok(response) = result {
            if response.extensions().get::<RefusedLocally>().is_some() {
                // Never sent: the throttle below counted it. What this
                // attempt earned or spent goes back: an original earns no
                // tenth, and a retry granted after a transport error (with
                // no answer to ask the throttle through first) gets its
                // credit back.
                self.retrier.unsent(&session.op);
                return None;
            }
        }
        let outcome = match result {
            Ok(response) if grpc::is_call(req.headers()) => grpc::outcome(response),
            Ok(response) => AttemptOutcome::Status(response.status().as_u16()),
            Err(error) if self.classify.is_connect_error(error) => AttemptOutcome::ConnectError,
            Err(_) => AttemptOutcome::OtherError,
        };
        if outcome.is_success() {
            // Nothing to retry (and nothing counted): no clock or header read.
            return None;
        }
        let pushback = match result {
            Ok(response) => headers::pushback(response.headers(), SystemTime::now()),
            Err(_) => Pushback::Absent,
        };
        if !req.body().can_replay() {
            session.op.mark_body_too_large();
        }
        let gate = match result {
            Ok(response) => response.extensions().get::<RetryGate>(),
            Err(_) => None,
        };
        if let Some(gate) = gate {
            // Asked before the retrier, which takes the retry's credit when
            // it grants it: a retry the throttle refuses spends nothing.
            if gate.refuses(session.op.attempt() + 1) {
                return None;
            }
        }
        let now = session.started.elapsed();
        match self.retrier.decide(&mut session.op, outcome, pushback, now) {
            Decision::Retry { attempt, delay } => {
                let sent_at = now.saturating_add(delay);
                let forwarded = session.op.forwarded_deadline(sent_at);
                headers::mark(req.headers_mut(), attempt, forwarded);
                if gate.is_some() {
                    req.extensions_mut().insert(JudgedByGate);
                }
                self.resending = true;
                Some(tokio::time::sleep(delay))
            }
            Decision::Stop(_) => None,
        }
    }

    fn clone_request(&mut self, req: &Request<B>) -> Option<Request<B>> {
        if !std::mem::take(&mut self.resending) {
            // tower asks before sending an original: the operation begins.
            let mut op = self.retrier.begin(replay_of(req));
            if let Some(CallerDeadline(caller)) = req.extensions().get() {
                let shorter = op.deadline().min(*caller);
                op = op.with_deadline(shorter);
            }
            self.session = Some(Session {
                op,
                started: Instant::now(),
            });
        }
        // A clone even of a request that can never be replayed (not safe,
        // or its last attempt): tower calls `retry` only for requests cloned
        // here, and `retry` is where each failure reaches the retrier's
        // counters of denials.
        Some(clone_request(req))
    }
}
