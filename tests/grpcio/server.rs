//! The server `tests/grpcio/interop.py` calls with Python's grpcio (run by
//! `.ci/grpcio`): a tonic server with `ShedLayer` in its builder, and shed's
//! stats as JSON on a second port, for the script to read.
//!
//! ```text
//! grpcio-server door [--unavailable]   # one slot, one waiting place per rank, pushback of 1 s
//! grpcio-server load [--no-pushback]   # four slots, 20 ms calls, shed's defaults
//! ```
//!
//! It prints `grpc=<addr> stats=http://<addr>/stats` once it listens, and
//! stops when its standard input closes (so it never outlives the script).
//!
//! Methods of `interop.v1.Probe`, all unary with empty messages:
//! `Hold` holds its slot until its caller cancels it; `Work` takes 20 ms.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::header::CONTENT_TYPE;
use shed::{Class, GrpcOverloadStatus, Rejection, RequestHead, ShedLayer, Shedder};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;
use tower::{service_fn, Service};

const HOLD: &str = "/interop.v1.Probe/Hold";
const WORK: &str = "/interop.v1.Probe/Work";

/// Room for exactly one held call and one waiting call per rank, with
/// pushbacks of exactly 1 s (the cap), and no controller decision while the
/// script runs: every answer follows from the calls the script makes.
fn door() -> Shedder {
    Shedder::builder()
        .limit(1)
        .queue_capacity(1)
        .interval(Duration::from_secs(60))
        .target_sojourn(Duration::from_secs(30))
        .max_wait(Class::Interactive, Duration::from_secs(60))
        .retry_after_cap(Duration::from_secs(1))
        // Calls that leave less than 2 s are refused for their deadline.
        .min_useful_window(Duration::from_secs(2))
        .build()
        .expect("a valid configuration")
}

/// An ordinary service under load: four slots and shed's defaults.
fn load() -> Shedder {
    Shedder::builder()
        .limit(4)
        .build()
        .expect("a valid configuration")
}

/// An overload refusal as shed answers it, minus `grpc-retry-pushback-ms`:
/// the baseline a server without pushback gives gRPC clients. Deadline
/// refusals keep shed's answer.
fn without_pushback(rejection: &Rejection, _: &RequestHead<'_>) -> Option<http::Response<Bytes>> {
    rejection.retry_after()?;
    http::Response::builder()
        .header(CONTENT_TYPE, "application/grpc")
        .header("grpc-status", "8")
        .header("grpc-message", rejection.reason().description())
        .body(Bytes::new())
        .ok()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().any(|arg| arg == name);
    let (shedder, mut layer) = match args.first().map(String::as_str) {
        Some("door") => {
            let shedder = door();
            (shedder.clone(), ShedLayer::new(shedder))
        }
        Some("load") => {
            let shedder = load();
            (shedder.clone(), ShedLayer::new(shedder))
        }
        _ => return Err("usage: grpcio-server door|load [--unavailable] [--no-pushback]".into()),
    };
    if flag("--unavailable") {
        layer = layer.grpc_overload_status(GrpcOverloadStatus::Unavailable);
    }
    if flag("--no-pushback") {
        layer = layer.on_rejection(without_pushback);
    }

    let grpc = TcpListener::bind("127.0.0.1:0").await?;
    let stats = TcpListener::bind("127.0.0.1:0").await?;
    println!(
        "grpc={} stats=http://{}/stats",
        grpc.local_addr()?,
        stats.local_addr()?
    );
    let stats_app = Router::new().route("/stats", get(shed::stats::handler(shedder)));
    tokio::spawn(async move { axum::serve(stats, stats_app).await });
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(Probe)
            .serve_with_incoming(TcpIncoming::from(grpc)),
    );

    // Serve until the script closes our standard input (or goes away).
    let mut rest = Vec::new();
    tokio::io::stdin().read_to_end(&mut rest).await?;
    Ok(())
}

/// `interop.v1.Probe`, declared by hand.
#[derive(Clone)]
struct Probe;

impl NamedService for Probe {
    const NAME: &'static str = "interop.v1.Probe";
}

impl Service<http::Request<Body>> for Probe {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::default());
            Ok(match request.uri().path() {
                HOLD => grpc.unary(service_fn(hold), request).await,
                WORK => grpc.unary(service_fn(work), request).await,
                _ => Status::unimplemented("no such method").into_http(),
            })
        })
    }
}

/// Holds its slot until the caller cancels the call.
async fn hold(_: Request<()>) -> Result<Response<()>, Status> {
    std::future::pending().await
}

async fn work(_: Request<()>) -> Result<Response<()>, Status> {
    tokio::time::sleep(Duration::from_millis(20)).await;
    Ok(Response::new(()))
}
