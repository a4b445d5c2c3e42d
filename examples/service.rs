//! A small, realistic service behind shed: copy it as a starting point.
//!
//! ```text
//! cargo run --example service              # starts, sends itself a few requests, prints the answers, exits
//! cargo run --example service -- --serve   # serves on 127.0.0.1:3000 until Ctrl-C
//! SHED_ADDR=127.0.0.1:8080 cargo run --example service -- --serve
//! RUST_LOG=shed=debug cargo run --example service   # every refusal, as the middleware logs it
//! ```
//!
//! What it shows:
//!
//! - one [`Shedder`] (one concurrency limit) shared by an interactive route
//!   (`/search`) and a batch route (`/report`): when they compete, batch work
//!   is shed first;
//! - `/search` calls a downstream service and forwards what is left of its
//!   caller's deadline with [`Deadline::propagate`], so the downstream refuses
//!   work nobody will wait for;
//! - `/stats` is mounted outside the shed layer, so operators can always read it.
//!
//! With `--serve`, try:
//!
//! ```text
//! curl -i localhost:3000/search -H 'grpc-timeout: 800m'
//! curl -i localhost:3000/report
//! curl -s localhost:3000/stats
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::State;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use shed::{Admitted, Deadline, ShedLayer};
use shed::{Class, Shedder};
use tokio::net::TcpListener;

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// What the `/search` handler needs: a client and where the downstream lives.
#[derive(Clone)]
struct AppState {
    client: HttpClient,
    downstream: SocketAddr,
}

/// The main service: an interactive route and a batch route sharing one
/// shedder, and the stats outside the shed layers.
///
/// Each route group gets its own layer of the same engine, side by side: one
/// limit for all, each judged at its own class. (Do not also wrap the whole
/// router in a layer of the same shedder: a request would take two slots.)
fn app(shedder: Shedder, state: AppState) -> Router {
    let interactive = Router::new().route("/search", get(search)).route_layer(
        ShedLayer::new(shedder.clone())
            // Callers that send no deadline get this one; nobody gets more than 5 s.
            .default_deadline(Duration::from_secs(2))
            .max_deadline(Duration::from_secs(5)),
    );
    let batch = Router::new()
        .route("/report", get(report))
        // The same engine, judged as batch: shed before interactive work.
        .route_layer(ShedLayer::new(shedder.clone()).class(Class::Batch));
    interactive
        .merge(batch)
        .with_state(state)
        // Outside every shed layer: never shed.
        .route("/stats", get(shed::stats::handler(shedder)))
}

/// Interactive: asks the downstream price service, within our caller's deadline.
async fn search(
    State(state): State<AppState>,
    admitted: Admitted,
    deadline: Option<Deadline>,
) -> Result<String, (StatusCode, String)> {
    let mut request = Request::get(format!("http://{}/price", state.downstream))
        .body(Empty::new())
        .expect("a valid request");
    if let Some(deadline) = deadline {
        // Writes `grpc-timeout` and `connect-timeout-ms`: the time we have left.
        deadline.propagate(request.headers_mut());
    }
    let response = state
        .client
        .request(request)
        .await
        .map_err(|error| (StatusCode::BAD_GATEWAY, format!("downstream: {error}")))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|error| (StatusCode::BAD_GATEWAY, format!("downstream: {error}")))?
        .to_bytes();
    let body = String::from_utf8_lossy(&body);
    if !status.is_success() {
        return Err((StatusCode::BAD_GATEWAY, format!("downstream said {status}")));
    }
    Ok(format!(
        "search ({}, attempt {}, queued {:?}): {body}",
        admitted.class, admitted.attempt, admitted.queued
    ))
}

/// Batch: slow work that can wait, or come back later.
async fn report(admitted: Admitted) -> String {
    tokio::time::sleep(Duration::from_millis(150)).await;
    format!("report ({}, queued {:?})", admitted.class, admitted.queued)
}

/// The downstream: its own shedder, and it reads the deadline it was sent.
fn downstream() -> Router {
    let shedder = Shedder::with_limit(16).expect("a valid limit");
    Router::new()
        .route("/price", get(price))
        .layer(ShedLayer::new(shedder))
}

async fn price(deadline: Option<Deadline>) -> String {
    tokio::time::sleep(Duration::from_millis(20)).await;
    match deadline {
        Some(deadline) => format!(
            "42.00 (downstream had {} ms of the caller's deadline left)",
            deadline.remaining().as_millis()
        ),
        None => "42.00 (no deadline was propagated)".to_owned(),
    }
}

async fn spawn_server(addr: SocketAddr, app: Router) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "server stopped");
        }
    });
    Ok(bound)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,shed=info".into()),
        )
        .init();
    let serve = std::env::args().any(|arg| arg == "--serve");

    // One engine for the whole service: 4 requests at once, short queues.
    let shedder = Shedder::builder()
        .limit(4)
        .queue_capacity(2)
        .max_wait(Class::Batch, Duration::from_millis(100))
        .build()?;
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();

    let loopback: SocketAddr = ([127, 0, 0, 1], 0).into();
    let downstream = spawn_server(loopback, downstream()).await?;
    let state = AppState {
        client: client.clone(),
        downstream,
    };
    let main_addr = if serve {
        std::env::var("SHED_ADDR")
            .ok()
            .map(|addr| addr.parse())
            .transpose()?
            .unwrap_or_else(|| ([127, 0, 0, 1], 3000).into())
    } else {
        loopback
    };
    let addr = spawn_server(main_addr, app(shedder.clone(), state)).await?;

    if serve {
        println!("serving on http://{addr} (downstream on http://{downstream}); Ctrl-C to stop");
        println!("try: curl -i http://{addr}/search -H 'grpc-timeout: 800m'");
        tokio::signal::ctrl_c().await?;
        return Ok(());
    }

    println!("self-demo against http://{addr} (run with `-- --serve` to keep serving)\n");
    let get = |path: &str, headers: &[(&str, &str)]| {
        let mut request = Request::get(format!("http://{addr}{path}"));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request
            .body(Empty::<Bytes>::new())
            .expect("a valid request")
    };

    println!("1. an interactive call with an 800 ms deadline, propagated downstream:");
    show(&client, get("/search", &[("grpc-timeout", "800m")])).await;

    println!("\n2. a caller whose deadline has already passed:");
    show(&client, get("/search", &[("grpc-timeout", "0m")])).await;

    println!("\n3. a burst of 12 batch reports at a limit of 4 (2 may wait 100 ms):");
    let burst: Vec<_> = (0..12)
        .map(|_| {
            let client = client.clone();
            let request = get("/report", &[]);
            tokio::spawn(async move { answer(&client, request).await })
        })
        .collect();
    // Meanwhile, interactive work still gets through: it waits ahead of batch.
    let search = {
        let client = client.clone();
        let request = get("/search", &[("grpc-timeout", "800m")]);
        tokio::spawn(async move { answer(&client, request).await })
    };
    for handle in burst {
        let (status, retry_after, _) = handle.await?;
        match retry_after {
            Some(seconds) => println!("   {status}, Retry-After: {seconds}"),
            None => println!("   {status}"),
        }
    }

    let (status, _, body) = search.await?;
    println!("\n4. an interactive call sent during the burst:\n   {status}\n   {body}");

    println!("\n5. the stats, which are never shed:");
    show(&client, get("/stats", &[])).await;

    // Every permit is back once every response has ended.
    let mut in_flight = shedder.in_flight();
    for _ in 0..100 {
        if in_flight == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        in_flight = shedder.in_flight();
    }
    println!("\nin flight at the end: {in_flight}");
    Ok(())
}

/// Sends `request` and returns the status, any Retry-After, and the body.
async fn answer(
    client: &HttpClient,
    request: Request<Empty<Bytes>>,
) -> (StatusCode, Option<String>, String) {
    match client.request(request).await {
        Ok(response) => {
            let status = response.status();
            let retry_after = response
                .headers()
                .get("retry-after")
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let body = response
                .into_body()
                .collect()
                .await
                .map(|body| body.to_bytes())
                .unwrap_or_default();
            (
                status,
                retry_after,
                String::from_utf8_lossy(&body).into_owned(),
            )
        }
        Err(error) => (StatusCode::BAD_GATEWAY, None, error.to_string()),
    }
}

async fn show(client: &HttpClient, request: Request<Empty<Bytes>>) {
    let (status, retry_after, body) = answer(client, request).await;
    let retry_after = retry_after.map_or(String::new(), |s| format!(", Retry-After: {s}"));
    println!("   {status}{retry_after}\n   {body}");
}
