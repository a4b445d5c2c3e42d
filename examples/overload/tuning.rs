//! Changes to a running shed engine, taken over HTTP so an operator can try
//! them on `overload serve` mid-load: each `PUT` changes one setting,
//! checked as the builder checks it, in force for the next request.
//!
//! | route | setting |
//! |---|---|
//! | `PUT /admin/shed/limit/{n}` | the limit (an adaptive one goes on adapting from it) |
//! | `PUT /admin/shed/limit_bounds/{min}/{max}` | an adaptive limit's bounds |
//! | `PUT /admin/shed/target_sojourn_ms/{ms}` | the queue-delay target |
//! | `PUT /admin/shed/max_wait_ms/{class}/{ms}` | a class's longest wait |
//! | `PUT /admin/shed/retry_after_cap_s/{s}` | the longest Retry-After |
//! | `PUT /admin/shed/mode/{mode}` | `enforcing`, or `shadow` (judge and count, serve everything) |
//!
//! Answers: `204` when changed; `400` with what to fix when refused; `404`
//! when the server's policy has no shed engine (tower, none).

use std::time::Duration;

use axum::{
    extract::Path,
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::put,
    Router,
};
use shed::{Class, ConfigError, Mode, Shedder};

/// The routes, for a server whose engine is `shedder` (if its policy has one).
pub fn routes(shedder: Option<Shedder>) -> Router {
    let engine = move || shedder.clone();
    let (e1, e2, e3, e4, e5, e6) = (
        engine.clone(),
        engine.clone(),
        engine.clone(),
        engine.clone(),
        engine.clone(),
        engine,
    );
    Router::new()
        .route(
            "/admin/shed/limit/{n}",
            put(move |Path(n): Path<usize>| async move { change(e1(), |s| s.set_limit(n)) }),
        )
        .route(
            "/admin/shed/limit_bounds/{min}/{max}",
            put(move |Path((min, max)): Path<(usize, usize)>| async move {
                change(e2(), |s| s.set_limit_bounds(min, max))
            }),
        )
        .route(
            "/admin/shed/target_sojourn_ms/{ms}",
            put(move |Path(ms): Path<u64>| async move {
                change(e3(), |s| s.set_target_sojourn(Duration::from_millis(ms)))
            }),
        )
        .route(
            "/admin/shed/max_wait_ms/{class}/{ms}",
            put(move |Path((class, ms)): Path<(String, u64)>| async move {
                let Some(class) = Class::from_name(&class) else {
                    let names = Class::ALL.map(Class::as_str).join(", ");
                    return (
                        StatusCode::BAD_REQUEST,
                        format!("no class {class:?}; one of {names}"),
                    )
                        .into_response();
                };
                change(e4(), |s| s.set_max_wait(class, Duration::from_millis(ms)))
            }),
        )
        .route(
            "/admin/shed/retry_after_cap_s/{s}",
            put(move |Path(secs): Path<u64>| async move {
                change(e5(), |s| s.set_retry_after_cap(Duration::from_secs(secs)))
            }),
        )
        .route(
            "/admin/shed/mode/{mode}",
            put(move |Path(mode): Path<String>| async move {
                match mode.parse::<Mode>() {
                    Ok(mode) => change(e6(), |s| {
                        s.set_mode(mode);
                        Ok(())
                    }),
                    Err(error) => (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response(),
                }
            }),
        )
}

/// Applies one change and answers for it.
fn change(
    shedder: Option<Shedder>,
    apply: impl FnOnce(&Shedder) -> Result<(), ConfigError>,
) -> Response {
    let Some(shedder) = shedder else {
        return (
            StatusCode::NOT_FOUND,
            "this server's policy has no shed engine\n",
        )
            .into_response();
    };
    match apply(&shedder) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => (StatusCode::BAD_REQUEST, format!("{error}\n")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn put(app: &Router, path: &str) -> (StatusCode, String) {
        let request = Request::put(path).body(Body::empty()).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_change_is_in_force_at_once_and_a_bad_one_says_what_to_fix() {
        let shedder = Shedder::builder().build().unwrap();
        let app = routes(Some(shedder.clone()));

        assert_eq!(
            put(&app, "/admin/shed/limit_bounds/2/16").await.0,
            StatusCode::NO_CONTENT
        );
        assert_eq!(shedder.stats().limit_bounds, (2, 16));
        assert_eq!(
            put(&app, "/admin/shed/max_wait_ms/batch/300").await.0,
            StatusCode::NO_CONTENT
        );
        assert_eq!(
            put(&app, "/admin/shed/target_sojourn_ms/20").await.0,
            StatusCode::NO_CONTENT
        );
        assert_eq!(
            put(&app, "/admin/shed/retry_after_cap_s/5").await.0,
            StatusCode::NO_CONTENT
        );

        assert_eq!(
            put(&app, "/admin/shed/mode/shadow").await.0,
            StatusCode::NO_CONTENT
        );
        assert_eq!(shedder.mode(), Mode::Shadow);
        let (status, body) = put(&app, "/admin/shed/mode/dry-run").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains(r#"use "enforcing" or "shadow""#), "{body}");
        assert_eq!(shedder.mode(), Mode::Shadow);

        let (status, body) = put(&app, "/admin/shed/limit_bounds/16/2").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("min <= max"), "{body}");
        assert_eq!(shedder.stats().limit_bounds, (2, 16));
        let (status, body) = put(&app, "/admin/shed/max_wait_ms/urgent/300").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(
            body.contains("one of background, batch, interactive, critical"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn a_server_without_shed_says_so() {
        let app = routes(None);
        assert_eq!(
            put(&app, "/admin/shed/limit/8").await.0,
            StatusCode::NOT_FOUND
        );
    }
}
