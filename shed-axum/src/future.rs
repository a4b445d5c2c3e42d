//! The future types of [`Shed`](crate::Shed).
//!
//! A request through the layer is let through unjudged (bypassed), refused
//! at the door, queued for a slot, or served at once; a queued one is then
//! served or refused, and a served one answers, or is cut off at its
//! deadline. [`ResponseFuture`] is that journey
//! as a state machine whose every state waits on one thing.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use pin_project_lite::pin_project;
use shed_core::{Mode, Permit, Rejection, Waiter};
use tokio::time::{Instant, Sleep};
use tower::Service;
use tracing::instrument::{Instrument, Instrumented};

use crate::body::{ShedBody, TrailerHook};
use crate::classify::Classification;
use crate::extract::Admitted;
use crate::feedback::{LoadFeedback, GRPC_STATUS};
use crate::held::HeldPermit;
use crate::hook::RequestHead;
use crate::layer::{Config, ReleaseOn};
use crate::reject::deadline_answer;

const POLLED_AFTER_COMPLETION: &str = "ResponseFuture polled after completion";

pin_project! {
    /// The response future of [`Shed`](crate::Shed): bypassed, refused at
    /// once, queued for a slot, or served under the request's deadline. Not
    /// boxed.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point gives back whatever it holds: its queue
    /// place (or a slot handed to it that it had not yet taken), its slot
    /// while served, and the inner future (cancelling the handler's work).
    pub struct ResponseFuture<S, ReqBody, ResBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<S, ReqBody, ResBody>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, ReqBody, ResBody>
    where
        S: Service<Request<ReqBody>>,
    {
        // Waiting in the engine's queue for a slot.
        Queued {
            #[pin]
            queued: Queued,
            pending: Option<Pending<S, ReqBody>>,
        },
        // The inner service at work, holding a slot, until the deadline.
        Serving {
            #[pin]
            call: UnderDeadline<Instrumented<S::Future>>,
            permit: Option<HeldPermit>,
            classification: Classification,
            release_on: ReleaseOn,
            feedback: Option<LoadFeedback>,
        },
        // Let through unjudged: the inner service's answer as it is.
        Bypassed {
            #[pin]
            call: S::Future,
            feedback: Option<LoadFeedback>,
            grpc: bool,
        },
        // Answered by shed: refused, or cut off at the deadline.
        Refused {
            response: Option<Response<ShedBody<ResBody>>>,
        },
    }
}

impl<S, ReqBody, ResBody> ResponseFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>>,
{
    /// Serves an admitted request: calls `inner` now.
    pub(crate) fn serve(
        inner: &mut S,
        request: Request<ReqBody>,
        permit: Permit,
        classification: Classification,
        config: &Config,
    ) -> Self {
        ResponseFuture {
            state: State::serving(inner, request, permit, classification, config),
        }
    }

    /// Waits for a slot, then serves the request with `inner` (an instance
    /// that was polled ready), or answers its refusal.
    pub(crate) fn queue(
        waiter: Waiter,
        inner: S,
        request: Request<ReqBody>,
        classification: Classification,
        config: Arc<Config>,
    ) -> Self {
        ResponseFuture {
            state: State::Queued {
                queued: Queued::new(waiter),
                pending: Some(Pending {
                    inner,
                    request,
                    classification,
                    config,
                }),
            },
        }
    }

    /// Passes the inner service's answer through, holding nothing, with
    /// the layer's load feedback if it gives any. `grpc`: whether the
    /// request is a gRPC call.
    pub(crate) fn bypassed(call: S::Future, feedback: Option<LoadFeedback>, grpc: bool) -> Self {
        ResponseFuture {
            state: State::Bypassed {
                call,
                feedback,
                grpc,
            },
        }
    }

    /// Answers with `response` at once.
    pub(crate) fn refused(response: Response<ShedBody<ResBody>>) -> Self {
        ResponseFuture {
            state: State::Refused {
                response: Some(response),
            },
        }
    }
}

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: http_body::Body,
{
    type Output = Result<Response<ShedBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Queued { queued, pending } => {
                    let verdict = ready!(queued.poll(cx));
                    let pending = pending.take().expect(POLLED_AFTER_COMPLETION);
                    state.set(match verdict {
                        Ok(permit) => pending.serve(permit),
                        Err(rejection) => pending.refuse(&rejection),
                    });
                }
                StateProj::Serving {
                    call,
                    permit,
                    classification,
                    release_on,
                    feedback,
                } => match ready!(call.poll(cx)) {
                    Ok(result) => {
                        let permit = body_permit(permit.take(), *release_on);
                        let feedback = feedback.take();
                        let grpc = classification.is_grpc();
                        return Poll::Ready(
                            result.map(|response| answer(response, permit, feedback, grpc)),
                        );
                    }
                    Err(DeadlinePassed) => {
                        let mut response = cut_at_deadline(permit.take(), classification);
                        if let Some(feedback) = feedback.take() {
                            feedback.stamp(response.headers_mut());
                        }
                        // Leaving the serving state drops the handler's future.
                        state.set(State::Refused {
                            response: Some(response),
                        });
                    }
                },
                StateProj::Bypassed {
                    call,
                    feedback,
                    grpc,
                } => {
                    let result = ready!(call.poll(cx));
                    let (feedback, grpc) = (feedback.take(), *grpc);
                    return Poll::Ready(
                        result.map(|response| answer(response, None, feedback, grpc)),
                    );
                }
                StateProj::Refused { response } => {
                    return Poll::Ready(Ok(response.take().expect(POLLED_AFTER_COMPLETION)));
                }
            }
        }
    }
}

impl<S, ReqBody, ResBody> State<S, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>>,
{
    /// Hands the request its admission facts and calls `inner`.
    fn serving(
        inner: &mut S,
        mut request: Request<ReqBody>,
        permit: Permit,
        classification: Classification,
        config: &Config,
    ) -> Self {
        // The handler's own spans nest in this one; its events carry the
        // admission facts. Checked first: with no subscriber, building the
        // span anyway measured 11,169 instructions a request against 10,779
        // (`.ci/instructions --compare`, router_admit_shed, with tracing's
        // `log` feature on as axum turns it on).
        let span = if tracing::level_enabled!(tracing::Level::INFO) {
            tracing::info_span!(
                target: "shed",
                "shed.request",
                class = classification.class().as_str(),
                attempt = classification.attempt(),
                queued_ms = permit.queued().as_millis() as u64,
            )
        } else {
            tracing::Span::none()
        };
        tracing::trace!(target: "shed", parent: &span, "admitted");
        let deadline = permit.deadline();
        request.extensions_mut().insert(Admitted {
            class: classification.class(),
            attempt: classification.attempt(),
            deadline,
            queued: permit.queued(),
        });
        State::Serving {
            call: UnderDeadline {
                future: span.in_scope(|| inner.call(request)).instrument(span),
                // In shadow mode the request is served untouched; the engine
                // counts a deadline passed by the time it ends.
                deadline: deadline
                    .filter(|_| permit.mode() == Mode::Enforcing)
                    .map(|at| tokio::time::sleep_until(at.into())),
            },
            permit: Some(HeldPermit::new(permit)),
            classification,
            release_on: config.release_on(),
            feedback: config.feedback().cloned(),
        }
    }
}

/// A queued request: what it needs to be served once it has a slot, or
/// answered if it gets none.
struct Pending<S, B> {
    inner: S,
    request: Request<B>,
    classification: Classification,
    config: Arc<Config>,
}

impl<S, B> Pending<S, B>
where
    S: Service<Request<B>>,
{
    fn serve<ResBody>(mut self, permit: Permit) -> State<S, B, ResBody> {
        State::serving(
            &mut self.inner,
            self.request,
            permit,
            self.classification,
            &self.config,
        )
    }

    fn refuse<ResBody>(self, rejection: &Rejection) -> State<S, B, ResBody> {
        let head = RequestHead::of(&self.request);
        State::Refused {
            response: Some(self.config.refuse(rejection, &head, &self.classification)),
        }
    }
}

/// The inner service's answer as the layer sends it: its body holding
/// `permit`, and with the load feedback if the layer gives it. The feedback
/// goes in the head, except for a gRPC call that has begun answering (no
/// `grpc-status` in its head), whose trailers carry it.
fn answer<B: http_body::Body>(
    response: Response<B>,
    permit: Option<HeldPermit>,
    feedback: Option<LoadFeedback>,
    grpc: bool,
) -> Response<ShedBody<B>> {
    let Some(feedback) = feedback else {
        return response.map(|body| ShedBody::inner(body, permit, None));
    };
    let (mut head, body) = response.into_parts();
    let in_trailers = grpc && !head.headers.contains_key(GRPC_STATUS);
    if in_trailers {
        let hook = TrailerHook::Stamp(feedback);
        return Response::from_parts(head, ShedBody::inner(body, permit, Some(hook)));
    }
    feedback.stamp(&mut head.headers);
    Response::from_parts(head, ShedBody::inner(body, permit, None))
}

/// The permit a response body holds until it ends: none when the slot goes
/// back as soon as the head is out.
fn body_permit(permit: Option<HeldPermit>, release_on: ReleaseOn) -> Option<HeldPermit> {
    match release_on {
        ReleaseOn::BodyEnd => permit,
        ReleaseOn::Headers => {
            if let Some(permit) = permit {
                permit.finish();
            }
            None
        }
    }
}

/// The answer to a request whose deadline passed while it was served; its
/// slot goes back as cut off.
fn cut_at_deadline<B>(
    permit: Option<HeldPermit>,
    classification: &Classification,
) -> Response<ShedBody<B>> {
    let rejection = Rejection::deadline_exceeded(classification.rank());
    tracing::debug!(
        target: "shed",
        class = classification.class().as_str(),
        attempt = classification.attempt(),
        reason = rejection.reason().as_str(),
        "deadline passed while serving; handler cancelled"
    );
    let response = deadline_answer(&rejection, classification);
    if let Some(permit) = permit {
        permit.cut_at_deadline();
    }
    response
}

/// How soon a waiter is looked at again when its timer has fired and it is
/// still waiting.
///
/// The timer runs on tokio's clock, but the waiter judges its expiry by the
/// engine's, which may be any [`shed_core::Clock`]. Where the engine's clock
/// runs behind tokio's (a `ManualClock`, or the system clock under tokio's
/// paused test clock), the timer fires before the waiter sees its expiry,
/// and nothing else would wake it: so it is looked at again, this often,
/// until the engine's clock agrees.
const EXPIRY_RECHECK: Duration = Duration::from_millis(1);

pin_project! {
    /// A request waiting in the engine's queue, and the timer that wakes it
    /// at its expiry (the engine has no timer of its own).
    ///
    /// Dropped, the waiter leaves the queue, or passes on a slot that was
    /// handed to it.
    struct Queued {
        waiter: Waiter,
        #[pin]
        expiry: Sleep,
    }
}

impl Queued {
    fn new(waiter: Waiter) -> Queued {
        Queued {
            expiry: tokio::time::sleep_until(waiter.expires_at().into()),
            waiter,
        }
    }
}

impl Future for Queued {
    type Output = Result<Permit, Rejection>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            if let Poll::Ready(verdict) = Pin::new(&mut *this.waiter).poll(cx) {
                return Poll::Ready(verdict);
            }
            ready!(this.expiry.as_mut().poll(cx));
            // The engine's clock has not reached the expiry yet: see EXPIRY_RECHECK.
            this.expiry.as_mut().reset(Instant::now() + EXPIRY_RECHECK);
        }
    }
}

pin_project! {
    /// The inner service's future, cut off at the request's deadline.
    struct UnderDeadline<F> {
        #[pin]
        future: F,
        #[pin]
        deadline: Option<Sleep>,
    }
}

/// The request's deadline passed before the inner service answered.
struct DeadlinePassed;

impl<F: Future> Future for UnderDeadline<F> {
    type Output = Result<F::Output, DeadlinePassed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.future.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        match this.deadline.as_pin_mut() {
            Some(deadline) => deadline.poll(cx).map(|()| Err(DeadlinePassed)),
            None => Poll::Pending,
        }
    }
}
