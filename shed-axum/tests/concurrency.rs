//! The limit is real: one engine shared by every route and every re-layering,
//! at most N requests served at once, the rest waiting in priority order or
//! refused when their class's maximum wait runs out.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use common::{get as get_request, get_with, hold_slot, json, retry_after_secs, settle, text};
use shed_axum::{Admitted, RequestHead, ShedLayer, TokioClock};
use shed_core::{Class, ManualClock, Rank, Shedder};
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// Handlers that count how many run at once and block until the gate opens.
#[derive(Clone)]
struct Gate {
    current: Arc<AtomicUsize>,
    max: Arc<AtomicUsize>,
    served: Arc<AtomicUsize>,
    closed: Arc<Semaphore>,
}

impl Gate {
    fn new() -> Gate {
        Gate {
            current: Arc::default(),
            max: Arc::default(),
            served: Arc::default(),
            closed: Arc::new(Semaphore::new(0)),
        }
    }

    async fn pass(&self) -> &'static str {
        let now = self.current.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        // Blocks until the gate is opened (the semaphore is closed).
        let _ = self.closed.acquire().await;
        self.current.fetch_sub(1, Ordering::SeqCst);
        self.served.fetch_add(1, Ordering::SeqCst);
        "passed"
    }

    fn open(&self) {
        self.closed.close();
    }

    fn route(&self) -> axum::routing::MethodRouter {
        let gate = self.clone();
        get(move || {
            let gate = gate.clone();
            async move { gate.pass().await }
        })
    }
}

/// A shedder whose waiters never time out on their own in these tests.
fn patient_shedder(limit: usize) -> Shedder {
    let mut builder = Shedder::builder()
        .limit(limit)
        .queue_capacity(64)
        .clock(TokioClock);
    for class in Class::ALL {
        builder = builder.max_wait(class, Duration::from_secs(3_600));
    }
    builder.build().unwrap()
}

type Answer = (http::StatusCode, String);

/// Sends `count` requests at once, alternating over `paths`. Each task reads
/// its whole body: the slot is held until the body ends.
fn send_all(app: &Router, paths: &[&str], count: usize) -> Vec<tokio::task::JoinHandle<Answer>> {
    (0..count)
        .map(|index| {
            let request = get_request(paths[index % paths.len()]);
            let app = app.clone();
            tokio::spawn(async move {
                let response = app.oneshot(request).await.unwrap();
                (response.status(), text(response).await)
            })
        })
        .collect()
}

async fn all_ok(handles: Vec<tokio::task::JoinHandle<Answer>>) {
    for handle in handles {
        let (status, body) = handle.await.unwrap();
        assert_eq!(status, 200, "{body}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_limit_of_n_admits_at_most_n_at_once_through_route_layer() {
    let shedder = patient_shedder(3);
    let gate = Gate::new();
    let app = Router::new()
        .route("/a", gate.route())
        .route("/b", gate.route())
        .route_layer(ShedLayer::new(shedder.clone()));

    let handles = send_all(&app, &["/a", "/b"], 20);
    assert!(settle(|| shedder.stats().queue_len() == 17).await);
    assert_eq!(gate.current.load(Ordering::SeqCst), 3);
    assert_eq!(shedder.in_flight(), 3);

    gate.open();
    all_ok(handles).await;
    assert_eq!(gate.max.load(Ordering::SeqCst), 3);
    assert_eq!(gate.served.load(Ordering::SeqCst), 20);
    assert_eq!(shedder.in_flight(), 0);
    assert_eq!(shedder.stats().queue_len(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_limit_of_n_is_shared_by_routes_layered_one_by_one() {
    let shedder = patient_shedder(2);
    let gate = Gate::new();
    let layer = ShedLayer::new(shedder.clone());
    let app = Router::new()
        .route("/search", gate.route().layer(layer.clone()))
        .route(
            "/export",
            gate.route()
                .layer(ShedLayer::new(shedder.clone()).class(Class::Batch)),
        )
        .route("/other", gate.route().layer(layer));

    let handles = send_all(&app, &["/search", "/export", "/other"], 15);
    assert!(settle(|| shedder.stats().queue_len() == 13).await);
    assert_eq!(gate.current.load(Ordering::SeqCst), 2);

    gate.open();
    all_ok(handles).await;
    assert_eq!(gate.max.load(Ordering::SeqCst), 2);
    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_limit_of_n_holds_when_the_layer_wraps_the_whole_router() {
    let shedder = patient_shedder(4);
    let gate = Gate::new();
    let app = Router::new()
        .route("/a", gate.route())
        .layer(ShedLayer::new(shedder.clone()));

    let handles = send_all(&app, &["/a"], 12);
    assert!(settle(|| shedder.stats().queue_len() == 8).await);

    gate.open();
    all_ok(handles).await;
    assert_eq!(gate.max.load(Ordering::SeqCst), 4);
}

#[tokio::test(start_paused = true)]
async fn below_the_limit_every_request_is_admitted_without_queueing() {
    let shedder = patient_shedder(5);
    let gate = Gate::new();
    let app = Router::new()
        .route("/a", gate.route())
        .layer(ShedLayer::new(shedder.clone()));

    let handles = send_all(&app, &["/a"], 5);
    assert!(settle(|| gate.current.load(Ordering::SeqCst) == 5).await);
    assert_eq!(shedder.stats().queue_len(), 0);

    gate.open();
    all_ok(handles).await;
    assert_eq!(shedder.stats().class(Class::Interactive).queued, 0);
}

#[tokio::test(start_paused = true)]
async fn a_queued_request_is_served_when_the_slot_frees() {
    let shedder = patient_shedder(1);
    let gate = Gate::new();
    let app = Router::new()
        .route("/slow", gate.route())
        .route(
            "/fast",
            get(|admitted: Admitted| async move { format!("waited {:?}", admitted.queued) }),
        )
        .layer(ShedLayer::new(shedder.clone()));

    let first = send_all(&app, &["/slow"], 1);
    assert!(settle(|| gate.current.load(Ordering::SeqCst) == 1).await);
    let second = tokio::spawn(app.clone().oneshot(get_request("/fast")));
    let rank = Rank::original(Class::Interactive);
    assert!(settle(|| shedder.queue_len(rank) == 1).await);
    tokio::time::advance(Duration::from_millis(40)).await;

    gate.open();
    all_ok(first).await;
    let response = second.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(text(response).await, "waited 40ms");
    assert_eq!(shedder.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_past_its_class_max_wait_is_refused_429_queue_timeout() {
    let shedder = Shedder::builder()
        .limit(1)
        .max_wait(Class::Interactive, Duration::from_millis(200))
        .clock(TokioClock)
        .build()
        .unwrap();
    let _busy = hold_slot(&shedder);
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .layer(ShedLayer::new(shedder.clone()));

    let start = tokio::time::Instant::now();
    let response = app.oneshot(get_request("/")).await.unwrap();

    assert_eq!(response.status(), 429);
    assert!(retry_after_secs(&response) >= 1);
    assert_eq!(json(response).await["reason"], "queue_timeout");
    // Paused time jumps straight to the waiter's expiry, and no further.
    assert_eq!(start.elapsed(), Duration::from_millis(200));
    assert_eq!(shedder.stats().queue_len(), 0);
    assert_eq!(shedder.in_flight(), 1);
}

/// The engine may run on a clock of its own, behind tokio's: the timer then
/// fires before the engine sees the waiter's expiry. The waiter is looked at
/// again until the engine agrees, rather than left waiting for a slot.
#[tokio::test(start_paused = true)]
async fn a_waiter_is_refused_once_the_engines_own_clock_reaches_its_expiry() {
    let clock = ManualClock::new();
    let shedder = Shedder::builder()
        .limit(1)
        .max_wait(Class::Interactive, Duration::from_millis(200))
        .clock(clock.clone())
        .build()
        .unwrap();
    let _busy = hold_slot(&shedder);
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .layer(ShedLayer::new(shedder.clone()));
    let waiting = tokio::spawn(app.oneshot(get_request("/")));
    assert!(settle(|| shedder.stats().queue_len() == 1).await);

    // Tokio's timer fires at the expiry; the engine's clock has not moved.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished());
    assert_eq!(shedder.stats().queue_len(), 1);

    clock.advance(Duration::from_millis(200));
    let response = tokio::time::timeout(Duration::from_secs(1), waiting)
        .await
        .expect("refused once the engine's clock reaches the expiry")
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(json(response).await["reason"], "queue_timeout");
    assert_eq!(shedder.stats().queue_len(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_whose_deadline_comes_first_is_refused_504() {
    let shedder = patient_shedder(1);
    let _busy = hold_slot(&shedder);
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .layer(ShedLayer::new(shedder.clone()));

    let response = app
        .oneshot(get_with("/", &[("grpc-timeout", "100m")]))
        .await
        .unwrap();

    assert_eq!(response.status(), 504);
    assert!(response.headers().get("retry-after").is_none());
    assert_eq!(json(response).await["reason"], "deadline_expired_in_queue");
    assert_eq!(shedder.stats().queue_len(), 0);
}

/// The retry marker reaches the engine (the retry waits in its rank), and
/// below overload a freed slot goes to the longest waiting, retry or not.
#[tokio::test(start_paused = true)]
async fn below_overload_a_freed_slot_goes_to_an_earlier_retry_before_a_later_original() {
    let shedder = patient_shedder(1);
    let busy = hold_slot(&shedder);
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = order.clone();
    let app = Router::new()
        .route(
            "/",
            get(move |admitted: Admitted| {
                let record = record.clone();
                async move { record.lock().unwrap().push(admitted.attempt) }
            }),
        )
        .layer(ShedLayer::new(shedder.clone()));

    let retry = tokio::spawn(app.clone().oneshot(get_with("/", &[("shed-attempt", "2")])));
    assert!(settle(|| shedder.queue_len(Rank::retry(Class::Interactive)) == 1).await);
    let original = tokio::spawn(app.clone().oneshot(get_request("/")));
    assert!(settle(|| shedder.queue_len(Rank::original(Class::Interactive)) == 1).await);

    drop(busy);
    assert_eq!(original.await.unwrap().unwrap().status(), 200);
    assert_eq!(retry.await.unwrap().unwrap().status(), 200);
    assert_eq!(*order.lock().unwrap(), vec![2, 1]);
}

/// A handler that answers with its class and the engine's in-flight count.
fn reporting(shedder: &Shedder) -> axum::routing::MethodRouter {
    let shedder = shedder.clone();
    get(move |admitted: Admitted| {
        let shedder = shedder.clone();
        async move { format!("{} {}", admitted.class, shedder.in_flight()) }
    })
}

#[tokio::test(start_paused = true)]
async fn route_groups_under_their_own_layers_take_one_slot_at_their_own_class() {
    let shedder = patient_shedder(4);
    let interactive = Router::new()
        .route("/search", reporting(&shedder))
        .route_layer(ShedLayer::new(shedder.clone()));
    let batch = Router::new()
        .route("/export", reporting(&shedder))
        .route_layer(ShedLayer::new(shedder.clone()).class(Class::Batch));
    let app = interactive.merge(batch);

    let search = app.clone().oneshot(get_request("/search")).await.unwrap();
    assert_eq!(text(search).await, "interactive 1");
    let export = app.oneshot(get_request("/export")).await.unwrap();
    assert_eq!(text(export).await, "batch 1");
}

#[tokio::test(start_paused = true)]
async fn one_router_wide_layer_can_class_routes_by_path() {
    let shedder = patient_shedder(4);
    let app = Router::new()
        .route("/search", reporting(&shedder))
        .route("/reports/daily", reporting(&shedder))
        .layer(
            ShedLayer::new(shedder.clone()).classifier(|head: &RequestHead<'_>| {
                head.uri
                    .path()
                    .starts_with("/reports/")
                    .then_some(Class::Batch)
            }),
        );

    let search = app.clone().oneshot(get_request("/search")).await.unwrap();
    assert_eq!(text(search).await, "interactive 1");
    let report = app.oneshot(get_request("/reports/daily")).await.unwrap();
    assert_eq!(text(report).await, "batch 1");
}
