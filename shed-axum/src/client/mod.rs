//! The client half: retry HTTP calls made through tower within a shared
//! budget, honouring the server's pushback and the operation's deadline.
//!
//! ```
//! use std::sync::Arc;
//! use shed_axum::client::ShedRetryLayer;
//! use shed_core::retry::{RetryBudget, RetryPolicy};
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // One budget per client (or per fleet): every operation draws on it.
//! let budget = Arc::new(RetryBudget::default());
//! let client = ServiceBuilder::new()
//!     .layer(ShedRetryLayer::new(RetryPolicy::new(Arc::clone(&budget))))
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
//! assert_eq!(budget.balance_tenths(), 11); // 20 + 1 earned - 10 spent
//! # }
//! ```
//!
//! The model itself (budget, backoff, pushback, deadline, reasons, the
//! bound on retries and when to share a budget fleet-wide) lives in
//! [`shed_core::retry`]; this module adapts it to [`tower::retry`]:
//!
//! - [`ShedRetry`] is the [`tower::retry::Policy`]: it marks retries with
//!   `shed-attempt: N`, forwards the remaining deadline as `grpc-timeout`,
//!   and sleeps at least the server's pushback before each retry.
//! - [`ShedRetryLayer`] puts it around a client service and, through
//!   [`MarkOriginal`], marks originals too.
//! - [`ClassifyError`] tells connect errors (safe to resend) from others.

mod classify;
mod headers;
mod layer;
mod policy;

pub use classify::{is_connection_refused, ClassifyError, NoConnectErrors};
pub use layer::{MarkOriginal, ShedRetryLayer};
pub use policy::ShedRetry;
