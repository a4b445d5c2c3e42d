//! The tower [`Service`]: judges each request at the door.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use shed_core::{Admission, Shedder};
use tower::Service;

use crate::body::ShedBody;
use crate::future::ResponseFuture;
use crate::hook::RequestHead;
use crate::layer::Config;

/// Admission control around an inner service; made by
/// [`ShedLayer`](crate::ShedLayer).
///
/// Its error type is the inner service's: refusals are ordinary responses
/// (`429`, `504`, or gRPC trailers-only), so no `HandleErrorLayer` is needed.
#[derive(Clone, Debug)]
pub struct Shed<S> {
    inner: S,
    shedder: Shedder,
    config: Arc<Config>,
}

impl<S> Shed<S> {
    pub(crate) fn new(inner: S, shedder: Shedder, config: Arc<Config>) -> Shed<S> {
        Shed {
            inner,
            shedder,
            config,
        }
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

    /// The shared engine.
    pub fn shedder(&self) -> &Shedder {
        &self.shedder
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
        let head = RequestHead::of(&request);
        if self.config.bypasses(&head) {
            self.shedder.count_bypassed();
            let feedback = self.config.feedback().cloned();
            let grpc = feedback.is_some() && crate::classify::is_grpc_request(head.headers);
            return ResponseFuture::bypassed(self.inner.call(request), feedback, grpc);
        }
        let classification = self.config.classify(&head);
        match self.shedder.admit(&classification.arrival()) {
            Admission::Admitted(permit) => ResponseFuture::serve(
                &mut self.inner,
                request,
                permit,
                classification,
                &self.config,
            ),
            Admission::Queued(waiter) => {
                // The instance that was polled ready serves the request once
                // a slot comes; this service goes on with a fresh clone.
                let fresh = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, fresh);
                ResponseFuture::queue(
                    waiter,
                    ready,
                    request,
                    classification,
                    Arc::clone(&self.config),
                )
            }
            Admission::Rejected(rejection) => {
                ResponseFuture::refused(self.config.refuse(&rejection, &head, &classification))
            }
        }
    }
}
