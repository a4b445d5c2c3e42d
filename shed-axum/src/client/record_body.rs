//! The two services that carry request bodies through tower's retry in a
//! [`ReplayBody`]: one starts the recording, one hands each attempt's body to
//! the client service as the body type it takes.

use std::task::{Context, Poll};

use http::Request;
use http_body::Body;
use tower::Service;

use super::ReplayBody;

/// Wraps each request's body in a [`ReplayBody`] recording up to
/// `max_bytes`, outside tower's retry. Made by
/// [`ShedRetryLayer::replay_buffer`](super::ShedRetryLayer::replay_buffer).
#[derive(Debug, Clone)]
pub struct RecordBody<S> {
    inner: S,
    max_bytes: usize,
}

impl<S> RecordBody<S> {
    pub(super) fn new(inner: S, max_bytes: usize) -> Self {
        Self { inner, max_bytes }
    }

    /// The service it sends the recorded requests to: tower's retry.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The service it sends the recorded requests to, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The service it sends the recorded requests to, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B> Service<Request<B>> for RecordBody<S>
where
    S: Service<Request<ReplayBody<B>>>,
    B: Body,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let max_bytes = self.max_bytes;
        self.inner
            .call(req.map(|body| ReplayBody::new(body, max_bytes)))
    }
}

/// Hands each attempt's [`ReplayBody`] to the client service as the body
/// type the client takes, through `From<ReplayBody<B>> for B`, inside
/// tower's retry. shed implements that conversion for `tonic::body::Body`
/// (feature `tonic`) and `axum::body::Body` (feature `axum`); implement it
/// for a boxed body type of your own to use it in its place.
///
/// Made by [`ShedRetryLayer::replay_buffer`](super::ShedRetryLayer::replay_buffer).
#[derive(Debug, Clone)]
pub struct BoxReplay<S> {
    inner: S,
}

impl<S> BoxReplay<S> {
    pub(super) fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The client service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The client service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The client service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B> Service<Request<ReplayBody<B>>> for BoxReplay<S>
where
    S: Service<Request<B>>,
    B: From<ReplayBody<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReplayBody<B>>) -> Self::Future {
        self.inner.call(req.map(B::from))
    }
}
