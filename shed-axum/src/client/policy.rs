//! shed's retry model as a [`tower::retry::Policy`] for HTTP requests.

use std::time::SystemTime;

use http::{Method, Request, Response};
use shed_core::retry::{AttemptOutcome, Decision, Operation, Pushback, Replay, RetryPolicy};
use tokio::time::{Instant, Sleep};
use tower::retry::Policy;

use super::classify::{ClassifyError, NoConnectErrors};
use super::headers;

/// A [`tower::retry::Policy`] for `http` services, built on
/// [`shed_core::retry::RetryPolicy`]: a shared budget, an attempt cap, one
/// deadline per operation, full-jitter backoff, and server pushback as a
/// floor.
///
/// Each retry is marked with `shed-attempt: N` and carries the time left of
/// the operation's deadline as `grpc-timeout` (for example `450000u`, 450 ms), so a shed
/// server sheds retries first and refuses what cannot finish in time. Use it
/// through [`ShedRetryLayer`](super::ShedRetryLayer), which also marks the
/// original (tower hands the original to the service untouched).
///
/// # Which requests are retried
///
/// A request is replayed only if declared safe: by a [`Replay`] request
/// extension, or failing that by an idempotent method (`GET`, `HEAD`,
/// `OPTIONS`, `TRACE`, `PUT`, `DELETE`; RFC 9110 section 9.2.2). `POST` and
/// `PATCH` are never retried unless the request carries `Replay::Safe`.
/// Errors are retried only when the classifier says they are connect errors
/// (see [`ClassifyError`]).
///
/// # Request bodies
///
/// Retrying resends the request, so the body must be `Clone` (`String`,
/// `Bytes`, `http_body_util::Full<Bytes>`...). Buffer a streaming body into
/// one of those before the retry layer.
///
/// # Panics
///
/// The delay is a [`tokio::time::Sleep`]: retrying needs a tokio runtime
/// with time enabled, as [`tokio::time::sleep`] does.
///
/// ```
/// use std::sync::Arc;
/// use shed_axum::client::ShedRetry;
/// use shed_core::retry::{RetryBudget, RetryPolicy};
/// use tower::retry::Retry;
/// use tower::service_fn;
///
/// let budget = Arc::new(RetryBudget::default()); // one per client, shared
/// let policy = ShedRetry::new(RetryPolicy::new(budget));
/// let transport = service_fn(|_req: http::Request<String>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
/// });
/// let client = Retry::new(policy, transport);
/// # let _ = client;
/// ```
#[derive(Debug, Clone)]
pub struct ShedRetry<C = NoConnectErrors> {
    policy: RetryPolicy,
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

impl ShedRetry {
    /// A policy following `policy`, treating no transport error as a
    /// connect error.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_axum::client::ShedRetry;
    /// use shed_core::retry::{RetryBudget, RetryPolicy};
    ///
    /// let retry = ShedRetry::new(RetryPolicy::new(Arc::new(RetryBudget::default())));
    /// assert_eq!(retry.policy().stats().originals(), 0);
    /// ```
    #[must_use]
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            classify: NoConnectErrors,
            session: None,
            resending: false,
        }
    }
}

impl<C> ShedRetry<C> {
    /// Uses `classify` to recognise connect errors, which are retried by
    /// default.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_axum::client::{is_connection_refused, ShedRetry};
    /// use shed_core::retry::{RetryBudget, RetryPolicy};
    ///
    /// let retry = ShedRetry::new(RetryPolicy::new(Arc::new(RetryBudget::default())))
    ///     .classify_errors(|err: &tower::BoxError| is_connection_refused(err.as_ref()));
    /// # let _ = retry;
    /// ```
    #[must_use]
    pub fn classify_errors<D>(self, classify: D) -> ShedRetry<D> {
        ShedRetry {
            policy: self.policy,
            classify,
            session: None,
            resending: false,
        }
    }

    /// The underlying model: configuration, budget and counters.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shed_axum::client::ShedRetry;
    /// use shed_core::retry::{RetryBudget, RetryPolicy};
    ///
    /// let retry = ShedRetry::new(RetryPolicy::new(Arc::new(RetryBudget::default())));
    /// assert_eq!(retry.policy().budget().balance_tenths(), 20);
    /// ```
    #[must_use]
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }
}

/// The replay declaration of `req`: its [`Replay`] extension, else whether
/// its method is idempotent.
fn replay_of<B>(req: &Request<B>) -> Replay {
    if let Some(replay) = req.extensions().get::<Replay>() {
        return *replay;
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

fn clone_request<B: Clone>(req: &Request<B>) -> Request<B> {
    let mut clone = Request::new(req.body().clone());
    *clone.method_mut() = req.method().clone();
    *clone.uri_mut() = req.uri().clone();
    *clone.version_mut() = req.version();
    *clone.headers_mut() = req.headers().clone();
    *clone.extensions_mut() = req.extensions().clone();
    clone
}

impl<B, ResBody, E, C> Policy<Request<B>, Response<ResBody>, E> for ShedRetry<C>
where
    B: Clone,
    C: ClassifyError<E>,
{
    type Future = Sleep;

    fn retry(
        &mut self,
        req: &mut Request<B>,
        result: &mut Result<Response<ResBody>, E>,
    ) -> Option<Self::Future> {
        let session = self.session.as_mut()?;
        let now = session.started.elapsed();
        let (outcome, pushback) = match result {
            Ok(response) => (
                AttemptOutcome::Status(response.status().as_u16()),
                headers::pushback(response.headers(), SystemTime::now()),
            ),
            Err(error) if self.classify.is_connect_error(error) => {
                (AttemptOutcome::ConnectError, Pushback::Absent)
            }
            Err(_) => (AttemptOutcome::OtherError, Pushback::Absent),
        };
        match self.policy.decide(&mut session.op, outcome, pushback, now) {
            Decision::Retry { attempt, delay } => {
                let remaining = session.op.remaining(now.saturating_add(delay));
                headers::mark(req.headers_mut(), attempt, remaining);
                self.resending = true;
                Some(tokio::time::sleep(delay))
            }
            Decision::Stop(_) => None,
        }
    }

    fn clone_request(&mut self, req: &Request<B>) -> Option<Request<B>> {
        if !std::mem::take(&mut self.resending) {
            // tower asks before sending an original: the operation begins.
            self.session = Some(Session {
                op: self.policy.begin(replay_of(req)),
                started: Instant::now(),
            });
        }
        Some(clone_request(req))
    }
}
