//! axum and tower middleware for shed: admission control at the front door.
//!
//! ```
//! use axum::{routing::get, Router};
//! use shed_axum::ShedLayer;
//! use shed_core::{Class, Shedder};
//!
//! let shedder = Shedder::builder().limit(64).build()?;
//! // One engine, one limit; each route is judged at its own class.
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }).layer(ShedLayer::new(shedder.clone())))
//!     .route("/report", get(|| async { "slow report" })
//!         .layer(ShedLayer::new(shedder.clone()).class(Class::Batch)))
//!     // Outside any shed layer: operators can always read the stats.
//!     .route("/stats", get(shed_axum::stats::handler(shedder)));
//! # Ok::<(), shed_core::ConfigError>(())
//! ```
//!
//! Each request is classified from its head ([`RequestHead`]): class, attempt
//! (retry markers), deadline (`grpc-timeout` and friends) and an optional
//! cohort key. The engine admits it, queues it, or refuses it with `429` and a
//! computed `Retry-After` (gRPC callers get a trailers-only status with
//! `grpc-retry-pushback-ms`). An admitted handler runs under its deadline, and
//! its slot is held until the response body ends.
//!
//! With [load feedback](ShedLayer::load_feedback) on, every answer also
//! states the replica's load (`shed-load`), and a client's
//! [`ShedThrottleLayer`](client::ShedThrottleLayer) refuses before sending
//! the requests the replica would refuse.
//!
//! Layers of one engine sit side by side, not nested: see
//! [Nesting](ShedLayer#nesting).
//!
//! # Features
//!
//! - `axum` (on by default): the extractors ([`Admitted`] and [`Deadline`]
//!   as handler arguments, with their rejections) and the stats handler
//!   ([`stats::handler`]). The layer, the service and the client half need
//!   only tower and http; without the feature a handler reads [`Admitted`]
//!   from the request's extensions.
//! - `tonic`: the client half's replay buffer over a tonic `Channel`
//!   ([`ShedRetryLayer::replay_buffer`](client::ShedRetryLayer::replay_buffer)
//!   hands recorded request bodies to it as `tonic::body::Body`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod body;
mod classify;
pub mod client;
mod clock;
mod extract;
mod feedback;
mod forward;
pub mod future;
mod held;
mod hook;
mod layer;
mod reject;
mod service;
pub mod stats;

pub use body::ShedBody;
pub use clock::TokioClock;
pub use extract::{Admitted, Deadline};
#[cfg(feature = "axum")]
pub use extract::{DeadlineRejection, MissingDeadline, MissingShedLayer};
pub use hook::{BypassRequest, ClassifyRequest, MakeCohortKey, OnRejection, RequestHead};
pub use layer::{ReleaseOn, ShedLayer};
pub use reject::GrpcOverloadStatus;
pub use service::Shed;
