//! shed: admission control and load shedding for axum and tower HTTP services.
//!
//! One dependency, `shed = "0.2"`, for everything: this crate re-exports the
//! engine ([`Shedder`] and its settings, the [`retry`] model, the [`wire`]
//! format; the `shed-core` crate, which needs no HTTP framework or runtime)
//! and the middleware ([`ShedLayer`], the extractors, the [`client`] half;
//! the `shed-axum` crate). Depend on either of those directly only to leave
//! the other out.
//!
//! ```
//! use axum::{routing::get, Router};
//! use shed::{ShedLayer, Shedder};
//!
//! let shedder = Shedder::builder().build()?; // the limit adapts
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(ShedLayer::new(shedder));
//! # Ok::<(), shed::ConfigError>(())
//! ```
//!
//! # Features
//!
//! - `axum` (on by default): the extractors ([`Admitted`] and [`Deadline`]
//!   as handler arguments) and [`stats::handler`]. The layer, the service and
//!   the client half need only tower and http.
//! - `metrics`: the engine's counters, gauges and histograms through the
//!   `metrics` facade, for the application's exporter; the names, labels and
//!   units are in `shed-core`'s docs (`# Metrics`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[doc(inline)]
pub use shed_axum::*;
#[doc(inline)]
pub use shed_core::*;

/// The README's examples, compiled and run as doctests so they cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
