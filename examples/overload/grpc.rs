//! The lab's gRPC face: one unary method per class, `lab.v1.Lab/{Class}`,
//! served beside the HTTP routes and behind the same policy layer.
//!
//! Each method takes a `google.protobuf.Empty` and answers the class name as
//! a `google.protobuf.StringValue` (prost's `()` and `String`), so no
//! `.proto` file or protoc is needed. The server side runs tonic's own
//! server codec (`tonic::server::Grpc`) inside an axum route, and the callers
//! are tonic clients over HTTP/2 `Channel`s: the frames, trailers and status
//! mapping are tonic's, as a gRPC user's would be.

use std::{
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    sync::atomic::{AtomicUsize, Ordering},
    sync::Arc,
    time::{Duration, Instant},
};

use axum::routing::{post_service, MethodRouter};
use http::uri::PathAndQuery;
use shed::wire::{self, GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER, GRPC_RETRY_PUSHBACK_MS_HEADER};
use tonic::{
    transport::{Channel, Endpoint},
    Code, Status,
};
use tonic_prost::ProstCodec;

use crate::{
    class::Class,
    client::AttemptResult,
    request_deadline::{self, Arrived},
};

/// The gRPC method of `class`: `/lab.v1.Lab/Critical` and so on.
pub fn path(class: Class) -> &'static str {
    match class {
        Class::Critical => "/lab.v1.Lab/Critical",
        Class::Interactive => "/lab.v1.Lab/Interactive",
        Class::Batch => "/lab.v1.Lab/Batch",
        Class::Background => "/lab.v1.Lab/Background",
    }
}

/// The work behind a method: given the call's deadline (from its arrival
/// and `grpc-timeout`, as the HTTP routes read it), the reply or a status.
pub trait Work: Clone + Send + Sync + 'static {
    /// Serves one call.
    fn serve(
        &self,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<String, Status>> + Send + 'static;
}

/// A unary method serving `work`, as an axum route (HTTP/2 POST).
pub fn method<W: Work>(work: W) -> MethodRouter {
    post_service(tower::service_fn(move |request: axum::extract::Request| {
        let work = work.clone();
        async move {
            let arrived = request
                .extensions()
                .get::<Arrived>()
                .map_or_else(Instant::now, |Arrived(at)| *at);
            let deadline = request_deadline::deadline(arrived, request.headers());
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<String, ()>::default());
            Ok::<_, Infallible>(grpc.unary(Unary { work, deadline }, request).await)
        }
    }))
}

/// One call of a method, for tonic's server codec.
struct Unary<W> {
    work: W,
    deadline: Option<Instant>,
}

impl<W: Work> tonic::server::UnaryService<()> for Unary<W> {
    type Response = String;
    type Future =
        Pin<Box<dyn Future<Output = Result<tonic::Response<String>, Status>> + Send + 'static>>;

    fn call(&mut self, _request: tonic::Request<()>) -> Self::Future {
        let reply = self.work.serve(self.deadline);
        Box::pin(async move { reply.await.map(tonic::Response::new) })
    }
}

/// HTTP/2 connections one caller spreads its calls over. One connection
/// would cap the calls in flight at the server's stream limit (hyper's
/// default is 200), which the lab's overload steps exceed.
const CONNECTIONS: usize = 8;

/// A tonic client of the lab's methods, over a few HTTP/2 connections.
#[derive(Clone)]
pub struct Caller {
    channels: Arc<[Channel]>,
    next: Arc<AtomicUsize>,
}

impl Caller {
    /// A caller of the server at `addr`; connections open on first use.
    pub fn new(addr: SocketAddr) -> Self {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .expect("a socket address forms a valid URI")
            .tcp_nodelay(true);
        let channels = (0..CONNECTIONS).map(|_| endpoint.connect_lazy()).collect();
        Caller {
            channels,
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Attempt `n` of a call of `class`, telling the server `deadline` is
    /// left (`grpc-timeout`, tonic's own encoding) and marking retries with
    /// `grpc-previous-rpc-attempts` as gRPC clients do; given up after
    /// `give_up`. Returns the result and the server's pushback, if any.
    pub async fn attempt(
        &self,
        class: Class,
        n: u32,
        deadline: Duration,
        give_up: Duration,
    ) -> (AttemptResult, Option<Duration>) {
        let mut request = tonic::Request::new(());
        request.set_timeout(deadline);
        if n > 1 {
            request
                .metadata_mut()
                .insert(GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER, (n - 1).into());
        }
        let channel = {
            let i = self.next.fetch_add(1, Ordering::Relaxed) % self.channels.len();
            self.channels[i].clone()
        };
        let call = async move {
            let mut grpc = tonic::client::Grpc::new(channel);
            grpc.ready()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            grpc.unary(
                request,
                PathAndQuery::from_static(path(class)),
                ProstCodec::<(), String>::default(),
            )
            .await
        };
        match tokio::time::timeout(give_up, call).await {
            Err(_) => (AttemptResult::Timeout, None),
            Ok(Ok(_)) => (AttemptResult::Success, None),
            Ok(Err(status)) => (AttemptResult::Grpc(status.code()), pushback(&status)),
        }
    }
}

/// The `grpc-retry-pushback-ms` of a status, read with shed's own parser.
fn pushback(status: &Status) -> Option<Duration> {
    let value = status.metadata().get(GRPC_RETRY_PUSHBACK_MS_HEADER)?;
    match wire::delay_ms(value.as_bytes())? {
        wire::Delay::After(delay) => Some(delay),
        wire::Delay::TooLong => Some(Duration::from_secs(86_400)),
    }
}

/// The HTTP status the lab's tables file a gRPC refusal under: 429 for
/// RESOURCE_EXHAUSTED, 503 for UNAVAILABLE, 504 for DEADLINE_EXCEEDED (the
/// answers an HTTP caller gets for the same refusals).
pub fn refusal_status(code: Code) -> Option<u16> {
    match code {
        Code::ResourceExhausted => Some(429),
        Code::Unavailable => Some(503),
        Code::DeadlineExceeded => Some(504),
        _ => None,
    }
}
