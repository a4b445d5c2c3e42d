//! Serving the engine's stats as JSON, for operators.
//!
//! ```
//! use axum::{routing::get, Router};
//! use shed_core::Shedder;
//!
//! let shedder = Shedder::with_limit(32)?;
//! // Mount it outside the shed layer so it is never shed.
//! let app: Router = Router::new().route("/stats", get(shed_axum::stats::handler(shedder)));
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use std::fmt::Write as _;
#[cfg(feature = "axum")]
use std::future::{ready, Ready};

#[cfg(feature = "axum")]
use axum::response::{IntoResponse, Response};
#[cfg(feature = "axum")]
use http::{header::CONTENT_TYPE, HeaderValue};
#[cfg(feature = "axum")]
use shed_core::Shedder;
use shed_core::{Rank, Stats};

/// A handler closure answering every request with the stats of `shedder` as JSON.
///
/// Needs the `axum` feature (on by default).
#[cfg(feature = "axum")]
pub fn handler(shedder: Shedder) -> impl Fn() -> Ready<StatsJson> + Clone + Send + Sync + 'static {
    move || ready(StatsJson(shedder.stats()))
}

/// A stats snapshot as an `application/json` response.
///
/// Needs the `axum` feature (on by default).
#[cfg(feature = "axum")]
#[derive(Clone, Debug)]
pub struct StatsJson(pub Stats);

#[cfg(feature = "axum")]
impl IntoResponse for StatsJson {
    fn into_response(self) -> Response {
        (
            [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
            to_json(&self.0),
        )
            .into_response()
    }
}

/// The stats as a JSON object.
///
/// ```
/// let stats = shed_core::Shedder::with_limit(4)?.stats();
/// let json = shed_axum::stats::to_json(&stats);
/// assert!(json.starts_with(r#"{"limit":4,"limit_min":4,"limit_max":4,"in_flight":0,"#));
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
pub fn to_json(stats: &Stats) -> String {
    let mut out = String::with_capacity(1_024);
    let _ = write!(
        out,
        r#"{{"limit":{},"limit_min":{},"limit_max":{},"in_flight":{},"queue_len":{},"level":{},"level_text":"{}","bypassed":{},"mode":"{}","#,
        stats.limit,
        stats.limit_bounds.0,
        stats.limit_bounds.1,
        stats.in_flight,
        stats.queue_len(),
        stats.level.get(),
        stats.level,
        stats.bypassed,
        stats.mode,
    );
    match &stats.adaptive {
        Some(adaptive) => {
            let number = |value: Option<f64>| match value {
                Some(v) if v.is_finite() => format!("{v:.3}"),
                _ => "null".to_string(),
            };
            let _ = write!(
                out,
                r#""adaptive":{{"phase":"{}","baseline_ms":{},"knee":{},"delivery_rate_per_s":{},"headroom":{:.3},"probes":{},"back_offs":{}}},"#,
                adaptive.phase,
                number(adaptive.baseline.map(|b| b.as_secs_f64() * 1e3)),
                number(adaptive.knee),
                number(adaptive.delivery_rate),
                adaptive.headroom,
                adaptive.probes,
                adaptive.back_offs,
            );
        }
        None => out.push_str(r#""adaptive":null,"#),
    }
    out.push_str(r#""queued":{"#);
    for (index, rank) in Rank::ALL.iter().enumerate() {
        let comma = if index == 0 { "" } else { "," };
        let _ = write!(out, r#"{comma}"{rank}":{}"#, stats.queued[rank.index()]);
    }
    out.push_str("},");
    match stats.recent_sojourn {
        Some(sojourn) => {
            let _ = write!(
                out,
                r#""recent_sojourn_ms":{:.3},"#,
                sojourn.as_secs_f64() * 1e3
            );
        }
        None => out.push_str(r#""recent_sojourn_ms":null,"#),
    }
    match stats.drain_rate {
        Some(rate) if rate.is_finite() => {
            let _ = write!(out, r#""drain_rate_per_s":{rate:.1},"#);
        }
        _ => out.push_str(r#""drain_rate_per_s":null,"#),
    }
    out.push_str(r#""classes":{"#);
    for (index, class) in stats.classes.iter().enumerate() {
        let comma = if index == 0 { "" } else { "," };
        let _ = write!(
            out,
            r#"{comma}"{}":{{"admitted":{},"queued":{},"shed":{},"shed_by_deadline":{},"queue_full":{},"dropped_from_queue":{},"expired":{},"completed":{},"abandoned":{},"cut_at_deadline":{},"would":{{"queued":{},"shed":{},"shed_by_deadline":{},"queue_full":{},"dropped_from_queue":{},"expired":{},"cut_at_deadline":{}}}}}"#,
            class.class,
            class.admitted,
            class.queued,
            class.shed,
            class.shed_by_deadline,
            class.queue_full,
            class.dropped_from_queue,
            class.expired,
            class.completed,
            class.abandoned,
            class.cut_at_deadline,
            class.would.queued,
            class.would.shed,
            class.would.shed_by_deadline,
            class.would.queue_full,
            class.would.dropped_from_queue,
            class.would.expired,
            class.would.cut_at_deadline,
        );
    }
    out.push_str("}}");
    out
}
