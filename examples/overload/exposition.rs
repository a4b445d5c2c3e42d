//! `GET /metrics` for `overload serve`, in the Prometheus text format,
//! through a real exporter (metrics-exporter-prometheus) fed by shed's
//! `metrics` feature. Built with `--features metrics`; without it the route
//! is absent.
//!
//! The recorder is installed before the server builds its engine, since the
//! engine registers its instruments when it is built; the handler reads the
//! engine's stats before rendering, which refreshes the gauges (an idle
//! service reads as not shedding).

use axum::Router;
use shed::Shedder;

#[cfg(feature = "metrics")]
mod enabled {
    use std::sync::OnceLock;

    use axum::{http::header::CONTENT_TYPE, routing::get, Router};
    use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
    use shed::Shedder;

    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

    /// Installs the process's recorder; later calls do nothing.
    pub fn install() -> Result<(), String> {
        if HANDLE.get().is_some() {
            return Ok(());
        }
        let handle = PrometheusBuilder::new()
            .install_recorder()
            .map_err(|e| format!("metrics recorder: {e}"))?;
        let _ = HANDLE.set(handle);
        Ok(())
    }

    /// The route, when a recorder is installed.
    pub fn routes(shedder: Option<Shedder>) -> Router {
        match HANDLE.get() {
            Some(handle) => route(handle.clone(), shedder),
            None => Router::new(),
        }
    }

    /// `GET /metrics` rendering `handle`.
    pub fn route(handle: PrometheusHandle, shedder: Option<Shedder>) -> Router {
        Router::new().route(
            "/metrics",
            get(move || {
                if let Some(shedder) = &shedder {
                    shedder.stats(); // refreshes the gauges
                }
                let body = handle.render();
                std::future::ready(([(CONTENT_TYPE, "text/plain; version=0.0.4")], body))
            }),
        )
    }
}

/// Installs the recorder `/metrics` renders, before any engine is built.
pub fn install() -> Result<(), String> {
    #[cfg(feature = "metrics")]
    return enabled::install();
    #[cfg(not(feature = "metrics"))]
    Ok(())
}

/// `GET /metrics`, when the lab is built with `--features metrics` and a
/// recorder is installed; no route otherwise.
pub fn routes(shedder: Option<Shedder>) -> Router {
    #[cfg(feature = "metrics")]
    return enabled::routes(shedder);
    #[cfg(not(feature = "metrics"))]
    {
        let _ = shedder;
        Router::new()
    }
}

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use std::collections::HashMap;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use axum::{body::Body, routing::get};
    use http::Request;
    use http_body_util::BodyExt;
    use metrics_exporter_prometheus::PrometheusBuilder;
    use prometheus_parse::{Sample, Scrape, Value};
    use shed::{
        Admission, Arrival, Class, Cohort, Level, ManualClock, Permit, ShedLayer, Shedder, Stats,
        Waiter,
    };
    use tower::ServiceExt;

    async fn get_text(app: &axum::Router, path: &str) -> String {
        let request = Request::get(path).body(Body::empty()).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(body.to_vec()).unwrap()
    }

    /// The samples of one scrape of `/metrics`, parsed as Prometheus text.
    async fn scrape(app: &axum::Router) -> Vec<Sample> {
        let exposition = get_text(app, "/metrics").await;
        let scrape = Scrape::parse(exposition.lines().map(|line| Ok(line.to_owned())))
            .unwrap_or_else(|e| panic!("not Prometheus text: {e}\n{exposition}"));
        scrape.samples
    }

    /// The value of the sample named `name` (with or without a `_total`
    /// suffix) whose labels include `labels`.
    fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
        let found = samples.iter().find(|sample| {
            (sample.metric == name || sample.metric == format!("{name}_total"))
                && labels
                    .iter()
                    .all(|(key, want)| sample.labels.get(key) == Some(*want))
        });
        match found.map(|sample| &sample.value) {
            Some(Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v)) => *v,
            other => panic!("{name} {labels:?}: {other:?}"),
        }
    }

    /// The samples of histogram `name` for `class` (the exporter writes
    /// histograms as summaries: quantiles, `_sum` and `_count`).
    fn histogram<'a>(samples: &'a [Sample], name: &str, class: &str) -> Vec<&'a Sample> {
        samples
            .iter()
            .filter(|sample| {
                sample.metric.starts_with(name) && sample.labels.get("class") == Some(class)
            })
            .collect()
    }

    #[tokio::test]
    async fn the_scraped_metrics_agree_with_the_stats() {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let shedder = metrics::with_local_recorder(&recorder, || {
            Shedder::builder().limit(4).build().unwrap()
        });
        let app = axum::Router::new()
            .route("/search", get(|| async { "results" }))
            .route("/export", get(|| async { "csv" }))
            .layer(ShedLayer::new(shedder.clone()))
            .merge(super::enabled::route(handle, Some(shedder.clone())));
        for _ in 0..7 {
            get_text(&app, "/search").await;
        }
        let _held = shedder
            .try_admit(&shed::Arrival::new(Class::Batch))
            .unwrap();

        let exposition = get_text(&app, "/metrics").await;
        let stats: Stats = shedder.stats();
        let scrape = Scrape::parse(exposition.lines().map(|line| Ok(line.to_owned())))
            .unwrap_or_else(|e| panic!("not Prometheus text: {e}\n{exposition}"));
        let samples = &scrape.samples;

        let interactive = stats.class(Class::Interactive);
        assert_eq!(interactive.admitted, 7);
        let counted: HashMap<&str, u64> = [
            ("admitted", interactive.admitted),
            ("completed", interactive.completed),
        ]
        .into();
        for (outcome, count) in counted {
            let scraped = value(
                samples,
                "shed_requests",
                &[("class", "interactive"), ("outcome", outcome)],
            );
            assert_eq!(scraped, count as f64, "{outcome}");
        }
        assert_eq!(value(samples, "shed_limit", &[]), f64::from(stats.limit));
        assert_eq!(
            value(samples, "shed_in_flight", &[]),
            f64::from(stats.in_flight)
        );
        assert_eq!(value(samples, "shed_in_flight", &[]), 1.0);
        assert_eq!(
            value(samples, "shed_admission_level", &[]),
            f64::from(stats.level.get())
        );
        assert_eq!(
            value(
                samples,
                "shed_queue_length",
                &[("class", "batch"), ("attempt", "original")]
            ),
            0.0
        );
        let service = histogram(samples, "shed_service_duration", "interactive");
        assert!(
            !service.is_empty(),
            "no service-time histogram in\n{exposition}"
        );
        if let Some(count) = service.iter().find(|s| s.metric.ends_with("_count")) {
            assert!(
                matches!(count.value, Value::Untyped(n) | Value::Counter(n) if n == interactive.completed as f64)
            );
        }
    }

    /// The permit a waiter was handed, which it must hold by now.
    fn granted(waiter: &mut Waiter) -> Permit {
        match Pin::new(waiter).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(Ok(permit)) => permit,
            other => panic!("expected a permit, got {other:?}"),
        }
    }

    /// One slot and a standing queue of batch requests, each waiting 10 ms
    /// or more, twice the default target, for one 100 ms interval whose
    /// close raises the level; then everybody leaves.
    fn flood(shedder: &Shedder, clock: &ManualClock) {
        let batch = || Arrival::new(Class::Batch).with_cohort(Cohort::MAX);
        let mut serving = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
        let mut waiting: Vec<Waiter> = (0..20)
            .map(|_| match shedder.admit(&batch()) {
                Admission::Queued(waiter) => waiter,
                other => panic!("expected to wait, got {other:?}"),
            })
            .collect();
        for mut next in waiting.drain(..10) {
            clock.advance(Duration::from_millis(10));
            drop(serving);
            serving = granted(&mut next);
        }
        // Everybody leaves: the rest stop waiting, the last one served ends.
        drop(waiting);
        drop(serving);
    }

    #[tokio::test]
    async fn an_idle_service_scrapes_as_not_shedding_before_any_request_arrives() {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let clock = ManualClock::new();
        let shedder = metrics::with_local_recorder(&recorder, || {
            Shedder::builder()
                .limit(1)
                .clock(clock.clone())
                .build()
                .unwrap()
        });
        let app = super::enabled::route(handle, Some(shedder.clone()));

        flood(&shedder, &clock);
        let raised = shedder.level();
        assert!(raised > Level::NONE);
        let level = value(&scrape(&app).await, "shed_admission_level", &[]);
        assert_eq!(level, f64::from(raised.get()), "shedding while flooded");

        // Sixteen intervals without a request or completion: the next
        // request would find the level reset, and so does the scrape.
        clock.advance(Duration::from_millis(1_600));
        let level = value(&scrape(&app).await, "shed_admission_level", &[]);
        assert_eq!(level, 0.0, "an idle service is not shedding");
    }
}
