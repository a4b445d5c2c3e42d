//! An admitted request runs inside a `shed.request` span carrying its
//! class, attempt and queued time, so the handler's own spans and events
//! nest in it.

mod common;

use axum::routing::get;
use axum::Router;
use common::{get_with, shedder, text, Lines};
use shed_axum::ShedLayer;
use tower::ServiceExt;

#[tokio::test(flavor = "current_thread")]
async fn the_handlers_events_nest_in_the_admitted_requests_span() {
    let (lines, _default) = Lines::capture(tracing::Level::INFO);

    let app = Router::new()
        .route(
            "/",
            get(|| async {
                tracing::info!("inside the handler");
                "ok"
            }),
        )
        .layer(ShedLayer::new(shedder(2)));
    let response = app
        .oneshot(get_with("/", &[("shed-attempt", "2")]))
        .await
        .unwrap();
    assert_eq!(text(response).await, "ok");

    let logged = lines.text();
    let handler_line = logged
        .lines()
        .find(|line| line.contains("inside the handler"))
        .unwrap_or_else(|| panic!("no handler event in {logged}"));
    assert!(
        handler_line.contains("shed.request{class=\"interactive\" attempt=2 queued_ms=0}"),
        "the handler's event is not in the request's span: {handler_line}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn work_an_inner_service_does_in_call_is_in_the_span_too() {
    let (lines, _default) = Lines::capture(tracing::Level::INFO);

    // A tower service that starts its work in `call`, before its future.
    let inner = tower::service_fn(|_request: http::Request<axum::body::Body>| {
        tracing::info!("inside call");
        async { Ok::<_, std::convert::Infallible>(http::Response::new(axum::body::Body::empty())) }
    });
    let service = tower::Layer::layer(&ShedLayer::new(shedder(2)), inner);
    service.oneshot(get_with("/", &[])).await.unwrap();

    let logged = lines.text();
    let call_line = logged
        .lines()
        .find(|line| line.contains("inside call"))
        .unwrap_or_else(|| panic!("no event from call in {logged}"));
    assert!(
        call_line.contains("shed.request{"),
        "not in the request's span: {call_line}"
    );
}
