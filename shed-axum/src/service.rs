//! The tower [`Service`] and its response future.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use pin_project_lite::pin_project;
use shed_core::{Admission, Arrival, Permit, Rejection, Shedder, Waiter};
use tokio::time::Sleep;
use tower::Service;

use crate::body::ShedBody;
use crate::classify::{Classification, RequestHead};
use crate::extract::Admitted;
use crate::held::HeldPermit;
use crate::layer::ReleaseOn;
use crate::reject::deadline_answer;
use crate::ShedLayer;

/// Admission control around an inner service; made by [`ShedLayer`].
///
/// Its error type is the inner service's: refusals are ordinary responses
/// (`429`, `504`, or gRPC trailers-only), so no `HandleErrorLayer` is needed.
#[derive(Clone, Debug)]
pub struct Shed<S> {
    inner: S,
    layer: ShedLayer,
}

impl<S> Shed<S> {
    pub(crate) fn new(inner: S, layer: ShedLayer) -> Shed<S> {
        Shed { inner, layer }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The shared engine.
    pub fn shedder(&self) -> &Shedder {
        &self.layer.shedder
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Shed<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: http_body::Body,
{
    type Response = Response<ShedBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let shedder = &self.layer.shedder;
        let head = RequestHead::of(&request);
        let (facts, grpc) = self.layer.config.classifier.classify(&head);
        // The engine turns the timeout into a deadline with its own clock read.
        let mut arrival = Arrival::new(facts.class)
            .with_attempt(facts.attempt)
            .with_timeout(facts.timeout);
        if let Some(key) = facts.cohort_key {
            arrival = arrival.with_cohort_key(key);
        }
        let kind = match shedder.admit(&arrival) {
            Admission::Admitted(permit) => serve(
                &mut self.inner,
                request,
                permit,
                &facts,
                grpc,
                self.layer.config.release_on,
            ),
            Admission::Queued(waiter) => {
                // Keep the instance that was polled ready; call it once a slot comes.
                let ready = self.inner.clone();
                Kind::Waiting {
                    expiry: tokio::time::sleep_until(waiter.expires_at().into()),
                    waiter,
                    pending: Some(Pending {
                        inner: std::mem::replace(&mut self.inner, ready),
                        request,
                        facts,
                        grpc,
                        layer: self.layer.clone(),
                    }),
                }
            }
            Admission::Rejected(rejection) => Kind::Rejected {
                response: Some(refuse(&self.layer, &rejection, &head, &facts, grpc)),
            },
        };
        ResponseFuture { kind }
    }
}

/// Starts serving an admitted request under its deadline.
fn serve<S, ReqBody, ResBody>(
    inner: &mut S,
    mut request: Request<ReqBody>,
    permit: Permit,
    facts: &Classification,
    grpc: bool,
    release_on: ReleaseOn,
) -> Kind<S, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    tracing::trace!(
        target: "shed",
        class = facts.class.as_str(),
        attempt = facts.attempt,
        queued_ms = permit.queued().as_millis() as u64,
        "admitted"
    );
    let deadline = permit.deadline();
    request.extensions_mut().insert(Admitted {
        class: facts.class,
        attempt: facts.attempt,
        deadline,
        queued: permit.queued(),
    });
    Kind::Serving {
        future: inner.call(request),
        deadline: deadline.map(|at| tokio::time::sleep_until(at.into())),
        permit: Some(HeldPermit::new(permit)),
        release_on,
        grpc,
        facts: *facts,
    }
}

fn refuse<B>(
    layer: &ShedLayer,
    rejection: &Rejection,
    head: &RequestHead<'_>,
    facts: &Classification,
    grpc: bool,
) -> Response<ShedBody<B>> {
    tracing::debug!(
        target: "shed",
        class = facts.class.as_str(),
        attempt = facts.attempt,
        reason = rejection.reason().as_str(),
        retry_after_s = rejection.retry_after().map(|after| after.as_secs()),
        "refused"
    );
    layer
        .config
        .responder
        .respond(rejection, head, facts.attempt, grpc)
}

pin_project! {
    /// The response future of [`Shed`]: refused at once, waiting for a slot,
    /// or serving under the request's deadline. Not boxed.
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point gives back whatever it holds: its queue
    /// place, its slot, and the inner future (cancelling the handler's work).
    pub struct ResponseFuture<S, ReqBody, ResBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        kind: Kind<S, ReqBody, ResBody>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<S, ReqBody, ResBody>
    where
        S: Service<Request<ReqBody>>,
    {
        Rejected {
            response: Option<Response<ShedBody<ResBody>>>,
        },
        Waiting {
            waiter: Waiter,
            #[pin]
            expiry: Sleep,
            pending: Option<Pending<S, ReqBody>>,
        },
        Serving {
            #[pin]
            future: S::Future,
            #[pin]
            deadline: Option<Sleep>,
            permit: Option<HeldPermit>,
            release_on: ReleaseOn,
            grpc: bool,
            facts: Classification,
        },
    }
}

/// What a waiting request needs to be served once it has a slot.
struct Pending<S, B> {
    inner: S,
    request: Request<B>,
    facts: Classification,
    /// Whether the caller speaks gRPC, as classification found.
    grpc: bool,
    layer: ShedLayer,
}

/// How long to look again when the host's timer fires a hair before the engine's clock agrees.
const EXPIRY_RECHECK: Duration = Duration::from_millis(1);

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: http_body::Body,
{
    type Output = Result<Response<ShedBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut kind = self.project().kind;
        loop {
            match kind.as_mut().project() {
                KindProj::Rejected { response } => {
                    let response = response
                        .take()
                        .expect("ResponseFuture polled after completion");
                    return Poll::Ready(Ok(response));
                }
                KindProj::Waiting {
                    waiter,
                    mut expiry,
                    pending,
                } => {
                    let verdict = match Pin::new(&mut *waiter).poll(cx) {
                        Poll::Ready(verdict) => verdict,
                        Poll::Pending => {
                            if expiry.as_mut().poll(cx).is_pending() {
                                return Poll::Pending;
                            }
                            // The timer fired: the waiter sees its expiry on the next poll.
                            match Pin::new(waiter).poll(cx) {
                                Poll::Ready(verdict) => verdict,
                                Poll::Pending => {
                                    let again = tokio::time::Instant::now() + EXPIRY_RECHECK;
                                    expiry.as_mut().reset(again);
                                    let _ = expiry.poll(cx);
                                    return Poll::Pending;
                                }
                            }
                        }
                    };
                    let Pending {
                        mut inner,
                        request,
                        facts,
                        grpc,
                        layer,
                    } = pending
                        .take()
                        .expect("ResponseFuture polled after completion");
                    let next = match verdict {
                        Ok(permit) => serve(
                            &mut inner,
                            request,
                            permit,
                            &facts,
                            grpc,
                            layer.config.release_on,
                        ),
                        Err(rejection) => Kind::Rejected {
                            response: Some(refuse(
                                &layer,
                                &rejection,
                                &RequestHead::of(&request),
                                &facts,
                                grpc,
                            )),
                        },
                    };
                    kind.set(next);
                }
                KindProj::Serving {
                    future,
                    deadline,
                    permit,
                    release_on,
                    grpc,
                    facts,
                } => {
                    if let Poll::Ready(result) = future.poll(cx) {
                        let permit = match release_on {
                            ReleaseOn::BodyEnd => permit.take(),
                            ReleaseOn::Headers => {
                                if let Some(permit) = permit.take() {
                                    permit.finish();
                                }
                                None
                            }
                        };
                        return Poll::Ready(
                            result
                                .map(|response| response.map(|body| ShedBody::inner(body, permit))),
                        );
                    }
                    let Some(deadline) = deadline.as_pin_mut() else {
                        return Poll::Pending;
                    };
                    if deadline.poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let rejection = Rejection::deadline_exceeded(facts.rank());
                    tracing::debug!(
                        target: "shed",
                        class = facts.class.as_str(),
                        attempt = facts.attempt,
                        reason = rejection.reason().as_str(),
                        "deadline passed while serving; handler cancelled"
                    );
                    let response = deadline_answer(&rejection, *grpc, facts.attempt);
                    if let Some(permit) = permit.take() {
                        permit.cut_at_deadline();
                    }
                    // Dropping the serving state cancels the handler.
                    kind.set(Kind::Rejected {
                        response: Some(response),
                    });
                }
            }
        }
    }
}
