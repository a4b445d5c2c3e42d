//! The client half over tonic: a hand-declared tonic client whose `Channel`
//! is wrapped in `ShedRetryLayer::replay_buffer`, against a tonic server on
//! 127.0.0.1 (a scripted service for exact control, and one behind shed's
//! own `ShedLayer`). On paused tokio time: the pushback waits are exact.

mod common;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use common::full_shedder;
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full};
use prost::Message;
use shed_axum::client::{BoxReplay, MarkOriginal, RecordBody, ShedRetryLayer, ShedRetryPolicy};
use shed_axum::{GrpcOverloadStatus, ShedLayer};
use shed_core::retry::{Reason, Replay, Retrier};
use tokio::net::TcpListener;
use tokio::time::Instant;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::body::Body;
use tonic::client::GrpcService;
use tonic::server::NamedService;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::Code;
use tonic_prost::ProstCodec;
use tower::retry::Retry;
use tower::{Layer, Service};

/// The one message of the hand-declared `lab.v1.Lab` service.
#[derive(Clone, PartialEq, prost::Message)]
struct Chunk {
    #[prost(bytes = "vec", tag = "1")]
    data: Vec<u8>,
}

/// A client as tonic's code generator writes one, over any gRPC service.
struct LabClient<T> {
    inner: tonic::client::Grpc<T>,
}

impl<T> LabClient<T>
where
    T: GrpcService<Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: http_body::Body<Data = Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    fn new(inner: T) -> Self {
        Self {
            inner: tonic::client::Grpc::new(inner),
        }
    }

    /// `rpc Work(Chunk) returns (Chunk)`
    async fn work(&mut self, request: tonic::Request<Chunk>) -> Result<Chunk, tonic::Status> {
        self.inner
            .ready()
            .await
            .map_err(|err| tonic::Status::unknown(format!("service not ready: {}", err.into())))?;
        let path = PathAndQuery::from_static("/lab.v1.Lab/Work");
        let codec = ProstCodec::<Chunk, Chunk>::default();
        let response = self.inner.unary(request, path, codec).await?;
        Ok(response.into_inner())
    }

    /// `rpc Upload(stream Chunk) returns (Chunk)`
    async fn upload(&mut self, chunks: Vec<Chunk>) -> Result<Chunk, tonic::Status> {
        self.inner
            .ready()
            .await
            .map_err(|err| tonic::Status::unknown(format!("service not ready: {}", err.into())))?;
        let path = PathAndQuery::from_static("/lab.v1.Lab/Upload");
        let codec = ProstCodec::<Chunk, Chunk>::default();
        let request = tonic::Request::new(tokio_stream::iter(chunks));
        let response = self.inner.client_streaming(request, path, codec).await?;
        Ok(response.into_inner())
    }
}

/// How the scripted server answers one attempt.
#[derive(Clone, Debug)]
enum Answer {
    /// Trailers-only, before reading the request: a door's refusal.
    Refuse {
        code: u32,
        pushback: Option<&'static str>,
    },
    /// Trailers-only, after reading the whole request.
    RefuseAfterReading {
        code: u32,
        pushback: Option<&'static str>,
    },
    /// Reads the request and answers one empty message and `OK`.
    Serve,
}

fn refuse(code: Code, pushback: &'static str) -> Answer {
    Answer::Refuse {
        code: code as u32,
        pushback: Some(pushback),
    }
}

/// What the scripted server saw of one attempt.
#[derive(Clone, Debug)]
struct Seen {
    at: Instant,
    headers: HeaderMap,
    /// The request body, when it was read.
    body: Option<Bytes>,
}

/// A gRPC server answering from a script (then serving), recording every
/// attempt.
#[derive(Clone)]
struct Scripted {
    script: Arc<Mutex<VecDeque<Answer>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    fn new(script: impl IntoIterator<Item = Answer>) -> Self {
        Self {
            script: Arc::new(Mutex::new(script.into_iter().collect())),
            seen: Arc::default(),
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The `grpc-previous-rpc-attempts` of each attempt seen.
    fn previous_attempts(&self) -> Vec<Option<String>> {
        self.seen()
            .iter()
            .map(|seen| {
                seen.headers
                    .get("grpc-previous-rpc-attempts")
                    .map(|value| value.to_str().unwrap().to_owned())
            })
            .collect()
    }
}

impl NamedService for Scripted {
    const NAME: &'static str = "lab.v1.Lab";
}

impl Service<Request<Body>> for Scripted {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let answer = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Answer::Serve);
        let seen = Arc::clone(&self.seen);
        Box::pin(async move {
            let at = Instant::now();
            let (parts, body) = request.into_parts();
            let body = match answer {
                Answer::Refuse { .. } => None,
                _ => Some(body.collect().await.unwrap().to_bytes()),
            };
            seen.lock().unwrap().push(Seen {
                at,
                headers: parts.headers,
                body,
            });
            Ok(match answer {
                Answer::Refuse { code, pushback }
                | Answer::RefuseAfterReading { code, pushback } => trailers_only(code, pushback),
                Answer::Serve => one_empty_message(),
            })
        })
    }
}

fn trailers_only(code: u32, pushback: Option<&'static str>) -> Response<Body> {
    let mut response = Response::builder()
        .header("content-type", "application/grpc")
        .header("grpc-status", code);
    if let Some(pushback) = pushback {
        response = response.header("grpc-retry-pushback-ms", pushback);
    }
    response.body(Body::empty()).unwrap()
}

fn one_empty_message() -> Response<Body> {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let message = Full::new(grpc_frames(&[Chunk::default()]));
    let body = message.with_trailers(async { Some(Ok(trailers)) });
    Response::builder()
        .header("content-type", "application/grpc")
        .body(Body::new(body))
        .unwrap()
}

/// `chunks` as gRPC puts them on the wire: each message uncompressed,
/// behind its length.
fn grpc_frames(chunks: &[Chunk]) -> Bytes {
    let mut frames = BytesMut::new();
    for chunk in chunks {
        frames.put_u8(0);
        frames.put_u32(u32::try_from(chunk.encoded_len()).unwrap());
        chunk.encode(&mut frames).unwrap();
    }
    frames.freeze()
}

/// A loopback listener for a server, and the address to reach it.
async fn listen() -> (TcpListenerStream, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    (TcpListenerStream::new(listener), address)
}

async fn connect(address: String) -> Channel {
    Endpoint::from_shared(address)
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Serves `scripted` on loopback for the rest of the test.
async fn serve(scripted: &Scripted) -> Channel {
    let (incoming, address) = listen().await;
    let server = Server::builder().add_service(scripted.clone());
    tokio::spawn(server.serve_with_incoming(incoming));
    connect(address).await
}

/// Serves `scripted` behind a shed layer on loopback.
async fn serve_behind(shed: ShedLayer, scripted: &Scripted) -> Channel {
    let (incoming, address) = listen().await;
    let server = Server::builder().layer(shed).add_service(scripted.clone());
    tokio::spawn(server.serve_with_incoming(incoming));
    connect(address).await
}

/// A retrier with a fixed jitter (half of each backoff window) and room
/// for pushbacks of a second or two.
fn retrier() -> Retrier {
    Retrier::builder()
        .jitter(|| 0.5)
        .deadline(Duration::from_secs(5))
        .build()
        .unwrap()
}

const BUDGET: usize = 64 * 1024;

/// A tonic channel through `ShedRetryLayer::replay_buffer`.
type RetryingChannel = MarkOriginal<RecordBody<Retry<ShedRetryPolicy, BoxReplay<Channel>>>>;

/// A client through `ShedRetryLayer::replay_buffer(max_bytes)` over `channel`.
fn lab_client(retrier: &Retrier, channel: Channel, max_bytes: usize) -> LabClient<RetryingChannel> {
    let layer = ShedRetryLayer::new(retrier.clone()).replay_buffer(max_bytes);
    LabClient::new(layer.layer(channel))
}

fn chunk(text: &str) -> Chunk {
    Chunk {
        data: text.as_bytes().to_vec(),
    }
}

#[tokio::test(start_paused = true)]
async fn resource_exhausted_and_unavailable_are_retried_with_previous_attempts_counted() {
    let scripted = Scripted::new([
        refuse(Code::ResourceExhausted, "100"),
        refuse(Code::Unavailable, "100"),
    ]);
    let retrier = retrier();
    let mut client = lab_client(&retrier, serve(&scripted).await, BUDGET);

    client
        .work(tonic::Request::new(chunk("job")))
        .await
        .unwrap();

    assert_eq!(
        scripted.previous_attempts(),
        [None, Some("1".to_owned()), Some("2".to_owned())]
    );
    let shed_attempts: Vec<_> = scripted
        .seen()
        .iter()
        .map(|seen| seen.headers["shed-attempt"].to_str().unwrap().to_owned())
        .collect();
    assert_eq!(shed_attempts, ["1", "2", "3"]);
    assert_eq!(retrier.stats().retries(), 2);
}

#[tokio::test(start_paused = true)]
async fn each_retry_waits_at_least_the_pushback() {
    let scripted = Scripted::new([
        refuse(Code::ResourceExhausted, "700"),
        refuse(Code::ResourceExhausted, "1200"),
    ]);
    let retrier = retrier();
    let mut client = lab_client(&retrier, serve(&scripted).await, BUDGET);

    client
        .work(tonic::Request::new(chunk("job")))
        .await
        .unwrap();

    let at: Vec<Instant> = scripted.seen().iter().map(|seen| seen.at).collect();
    assert_eq!(at.len(), 3);
    assert!(
        at[1] - at[0] >= Duration::from_millis(700),
        "{:?}",
        at[1] - at[0]
    );
    assert!(
        at[2] - at[1] >= Duration::from_millis(1200),
        "{:?}",
        at[2] - at[1]
    );
}

#[tokio::test(start_paused = true)]
async fn each_attempt_carries_what_is_left_of_the_deadline() {
    let scripted = Scripted::new([refuse(Code::ResourceExhausted, "1000")]);
    let retrier = retrier();
    let mut client = lab_client(&retrier, serve(&scripted).await, BUDGET);

    client
        .work(tonic::Request::new(chunk("job")))
        .await
        .unwrap();

    let timeouts: Vec<_> = scripted
        .seen()
        .iter()
        .map(|seen| seen.headers["grpc-timeout"].to_str().unwrap().to_owned())
        .collect();
    // 5 s less the 50 ms reserve, then a second less (the pushback).
    assert_eq!(timeouts, ["4950000u", "3950000u"]);
}

#[tokio::test(start_paused = true)]
async fn deadline_exceeded_is_not_retried() {
    let scripted = Scripted::new([refuse(Code::DeadlineExceeded, "100")]);
    let retrier = retrier();
    let mut client = lab_client(&retrier, serve(&scripted).await, BUDGET);

    let status = client
        .work(tonic::Request::new(chunk("job")))
        .await
        .unwrap_err();

    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert_eq!(scripted.seen().len(), 1);
    assert_eq!(retrier.stats().denials(Reason::TerminalStatus), 1);
}

#[tokio::test(start_paused = true)]
async fn a_negative_or_malformed_pushback_stops_retries() {
    for pushback in ["-1", "soon"] {
        let scripted = Scripted::new([refuse(Code::ResourceExhausted, pushback)]);
        let retrier = retrier();
        let mut client = lab_client(&retrier, serve(&scripted).await, BUDGET);

        let status = client
            .work(tonic::Request::new(chunk("job")))
            .await
            .unwrap_err();

        assert_eq!(status.code(), Code::ResourceExhausted, "{pushback}");
        assert_eq!(scripted.seen().len(), 1, "{pushback}");
        assert_eq!(
            retrier.stats().denials(Reason::ServerRefused),
            1,
            "{pushback}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_refusal_without_pushback_is_not_retried_unless_the_call_is_declared_safe() {
    let unavailable = Answer::Refuse {
        code: Code::Unavailable as u32,
        pushback: None,
    };
    let scripted = Scripted::new([unavailable.clone()]);
    let retrier = retrier();
    let mut client = lab_client(&retrier, serve(&scripted).await, BUDGET);
    let status = client
        .work(tonic::Request::new(chunk("job")))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(retrier.stats().denials(Reason::UnsafeOperation), 1);

    let scripted = Scripted::new([unavailable]);
    let mut client = lab_client(&retrier, serve(&scripted).await, BUDGET);
    let mut request = tonic::Request::new(chunk("job"));
    request.extensions_mut().insert(Replay::Safe);
    client.work(request).await.unwrap();
    assert_eq!(scripted.seen().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_call_declared_unsafe_is_not_retried_even_when_refused() {
    let scripted = Scripted::new([refuse(Code::ResourceExhausted, "100")]);
    let retrier = retrier();
    let mut client = lab_client(&retrier, serve(&scripted).await, BUDGET);
    let mut request = tonic::Request::new(chunk("job"));
    request.extensions_mut().insert(Replay::Unsafe);

    let status = client.work(request).await.unwrap_err();

    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(retrier.stats().denials(Reason::UnsafeOperation), 1);
}

#[tokio::test(start_paused = true)]
async fn a_body_over_the_replay_budget_is_sent_once_and_not_retried() {
    let scripted = Scripted::new([Answer::RefuseAfterReading {
        code: Code::Unavailable as u32,
        pushback: Some("100"),
    }]);
    let retrier = retrier();
    let mut client = lab_client(&retrier, serve(&scripted).await, 1024);
    let large = Chunk {
        data: vec![7; 4096],
    };

    let status = client
        .work(tonic::Request::new(large.clone()))
        .await
        .unwrap_err();

    assert_eq!(status.code(), Code::Unavailable);
    let seen = scripted.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body.as_ref().unwrap(), &grpc_frames(&[large]));
    assert_eq!(retrier.stats().denials(Reason::BodyTooLarge), 1);
}

#[tokio::test(start_paused = true)]
async fn a_streamed_request_body_is_replayed_byte_for_byte() {
    let chunks: Vec<Chunk> = (0..16u8).map(|n| Chunk { data: vec![n; 512] }).collect();
    // Refused before the server read it (the client may not have sent it
    // all), then after, then served.
    let scripted = Scripted::new([
        refuse(Code::ResourceExhausted, "100"),
        Answer::RefuseAfterReading {
            code: Code::Unavailable as u32,
            pushback: Some("100"),
        },
    ]);
    let retrier = retrier();
    let mut client = lab_client(&retrier, serve(&scripted).await, BUDGET);

    client.upload(chunks.clone()).await.unwrap();

    let seen = scripted.seen();
    assert_eq!(seen.len(), 3);
    let sent = grpc_frames(&chunks);
    assert_eq!(seen[1].body.as_ref().unwrap(), &sent);
    assert_eq!(seen[2].body.as_ref().unwrap(), &sent);
}

#[tokio::test(start_paused = true)]
async fn a_shed_servers_refusal_is_retried_after_its_pushback_and_served() {
    for overload_status in [
        GrpcOverloadStatus::ResourceExhausted,
        GrpcOverloadStatus::Unavailable,
    ] {
        let (shedder, busy) = full_shedder();
        let shed = ShedLayer::new(shedder).grpc_overload_status(overload_status);
        let scripted = Scripted::new([]);
        let retrier = retrier();
        let mut client = lab_client(&retrier, serve_behind(shed, &scripted).await, BUDGET);
        // The slot frees soon after the refusal, well within the pushback.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            drop(busy);
        });

        client
            .work(tonic::Request::new(chunk("job")))
            .await
            .unwrap();

        assert_eq!(
            scripted.previous_attempts(),
            [Some("1".to_owned())],
            "only the retry reached the handler ({overload_status:?})"
        );
        assert_eq!(retrier.stats().retries(), 1);
    }
}
