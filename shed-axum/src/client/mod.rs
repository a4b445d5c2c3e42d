//! The client half: retry HTTP and gRPC calls made through tower within a
//! shared budget, honouring the server's pushback and the operation's
//! deadline.
//!
//! ```
//! use shed_axum::client::ShedRetryLayer;
//! use shed_core::retry::Retrier;
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), shed_core::ConfigError> {
//! // One retrier per client: every operation draws on its budget.
//! let retrier = Retrier::builder().build()?;
//! let client = ServiceBuilder::new()
//!     .layer(ShedRetryLayer::new(retrier.clone()))
//!     .service(service_fn(|req: http::Request<String>| async move {
//!         // Stands in for a real transport, e.g. hyper-util's client.
//!         let status = if req.headers()["shed-attempt"] == "1" { 503 } else { 200 };
//!         let mut response = http::Response::new(String::new());
//!         *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
//!         Ok::<_, std::convert::Infallible>(response)
//!     }));
//!
//! let response = client.oneshot(http::Request::new(String::new())).await.unwrap();
//! assert_eq!(response.status(), 200);
//! assert_eq!(retrier.budget().balance_tenths(), 11); // 20 + 1 earned - 10 spent
//! # Ok(())
//! # }
//! ```
//!
//! The model itself (budget, backoff, pushback, deadline, reasons, the
//! bound on retries and when to share a budget fleet-wide) lives in
//! [`shed_core::retry`]; this module adapts its [`Retrier`] to
//! [`tower::retry`]:
//!
//! - [`ShedRetryLayer`] puts it around a client service, marking every
//!   attempt with `shed-attempt: N` and the remaining deadline as
//!   `grpc-timeout` (replacing any the request arrived with);
//!   [`MarkOriginal`] (originals) and [`ShedRetryPolicy`] (retries) are the
//!   pieces it is made of.
//! - [`ClassifyError`] tells connect errors (safe to resend) from others.
//! - [`ReplayableBody`] is what it needs of a request body to send it
//!   again: a clone, or a replay of a [`ReplayBody`], which records a body
//!   that is not `Clone` (tonic's, axum's, a stream) up to a byte budget
//!   ([`ShedRetryLayer::replay_buffer`]; [`RecordBody`] and [`BoxReplay`]
//!   carry it through tower's retry).
//! - gRPC calls are retried in gRPC's terms: see
//!   [gRPC](ShedRetryLayer#grpc).
//!
//! [`ShedThrottleLayer`] refuses locally, before sending, the requests a
//! replica would refuse: the ranks its load reports say it sheds, and
//! SRE-style adaptive throttling when it says nothing. It goes inside the
//! retry layer; see [With retries](ShedThrottleLayer#with-retries).
//!
//! [`Retrier`]: shed_core::retry::Retrier

#[cfg(any(feature = "tonic", feature = "axum"))]
mod boxed;
mod classify;
mod grpc;
mod headers;
mod layer;
mod mark_original;
mod policy;
mod record_body;
mod replay_body;
mod replayable;
mod throttle;

pub use classify::{is_connection_refused, ClassifyError, NoConnectErrors};
pub use layer::{CloneBody, ReplayBuffer, ShedRetryLayer};
pub use mark_original::MarkOriginal;
pub use policy::ShedRetryPolicy;
pub use record_body::{BoxReplay, RecordBody};
pub use replay_body::ReplayBody;
pub use replayable::ReplayableBody;
pub(crate) use throttle::TrailerReader;
pub use throttle::{
    LocalReason, RefusedLocally, ShedThrottle, ShedThrottleLayer, ThrottleFuture, ThrottleStats,
};
