//! The client throttle's [`Service`] and its response future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower::Service;

use super::gate::{JudgedByGate, RetryGate};
use super::judge::{Call, Throttle, TrailerReader};
use super::refusal::refusal;
use crate::body::{ShedBody, TrailerHook};
use crate::feedback::GRPC_STATUS;

/// A client service whose requests a replica would refuse are refused
/// before they are sent; made by
/// [`ShedThrottleLayer`](super::ShedThrottleLayer).
///
/// Its error type is the inner service's: local refusals are answers.
#[derive(Clone)]
pub struct ShedThrottle<S> {
    inner: S,
    throttle: Throttle,
}

impl<S> ShedThrottle<S> {
    pub(super) fn new(inner: S, throttle: Throttle) -> ShedThrottle<S> {
        ShedThrottle { inner, throttle }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, taking this one apart.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: fmt::Debug> fmt::Debug for ShedThrottle<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedThrottle")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ShedThrottle<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: http_body::Body,
{
    type Response = Response<ShedBody<ResBody>>;
    type Error = S::Error;
    type Future = ThrottleFuture<S::Future, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let now = self.throttle.now();
        let Some(call) = self.throttle.call_of(&request, now) else {
            self.throttle.count_sent(None, now);
            return ThrottleFuture::sent(self.inner.call(request), None);
        };
        if request.extensions().get::<JudgedByGate>().is_some() {
            // A retry the retry policy asked about has been judged already.
            self.throttle.count_sent(Some(&call), now);
        } else if let Some(verdict) = self.throttle.judge_to_send(&call, now) {
            let answer = refusal(
                verdict.reason,
                verdict.retry_after,
                call.class,
                call.attempt,
                call.grpc,
            );
            return ThrottleFuture::refused(answer);
        }
        let tracker = Tracker {
            throttle: self.throttle.clone(),
            call,
        };
        ThrottleFuture::sent(self.inner.call(request), Some(tracker))
    }
}

/// A request sent: what learns from its answer.
struct Tracker {
    throttle: Throttle,
    call: Call,
}

impl Tracker {
    fn answered<B: http_body::Body>(self, mut response: Response<B>) -> Response<ShedBody<B>> {
        self.throttle.answered(&self.call, &response);
        // A gRPC call answering 200 without a status has begun answering:
        // its status (and any load report) comes in the trailers.
        let committed_grpc = self.call.grpc
            && response.status() == StatusCode::OK
            && !response.headers().contains_key(GRPC_STATUS);
        let may_be_retried = if self.call.grpc {
            !committed_grpc
        } else {
            !response.status().is_success()
        };
        if may_be_retried {
            // The retry policy asks here before it spends budget on a retry.
            let gate = RetryGate::new(self.throttle.clone(), self.call.clone());
            response.extensions_mut().insert(gate);
        }
        let trailer = committed_grpc
            .then(|| TrailerHook::Read(Box::new(TrailerReader::new(self.throttle, self.call))));
        response.map(|body| ShedBody::inner(body, None, trailer))
    }
}

pin_project! {
    /// The response future of [`ShedThrottle`]: the inner service's answer
    /// (learnt from), or a local refusal, ready at once. Not boxed.
    pub struct ThrottleFuture<F, B> {
        #[pin]
        kind: Kind<F, B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, B> {
        Sent {
            #[pin]
            future: F,
            tracker: Option<Tracker>,
        },
        Refused {
            response: Option<Response<ShedBody<B>>>,
        },
    }
}

impl<F, B> ThrottleFuture<F, B> {
    fn sent(future: F, tracker: Option<Tracker>) -> Self {
        ThrottleFuture {
            kind: Kind::Sent { future, tracker },
        }
    }

    fn refused(response: Response<ShedBody<B>>) -> Self {
        ThrottleFuture {
            kind: Kind::Refused {
                response: Some(response),
            },
        }
    }
}

impl<F, B> fmt::Debug for ThrottleFuture<F, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.kind {
            Kind::Sent { .. } => "sent",
            Kind::Refused { .. } => "refused",
        };
        f.debug_struct("ThrottleFuture")
            .field("state", &state)
            .finish()
    }
}

const POLLED_AFTER_COMPLETION: &str = "ThrottleFuture polled after completion";

impl<F, B, E> Future for ThrottleFuture<F, B>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: http_body::Body,
{
    type Output = Result<Response<ShedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Sent { future, tracker } => {
                let result = ready!(future.poll(cx));
                let tracker = tracker.take();
                Poll::Ready(match (result, tracker) {
                    (Ok(response), Some(tracker)) => Ok(tracker.answered(response)),
                    (Ok(response), None) => {
                        Ok(response.map(|body| ShedBody::inner(body, None, None)))
                    }
                    (Err(error), tracker) => {
                        if let Some(tracker) = tracker {
                            tracker.throttle.failed(&tracker.call);
                        }
                        Err(error)
                    }
                })
            }
            KindProj::Refused { response } => {
                Poll::Ready(Ok(response.take().expect(POLLED_AFTER_COMPLETION)))
            }
        }
    }
}
