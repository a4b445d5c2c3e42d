//! The client half: retry HTTP calls made through tower within a shared
//! budget, honouring the server's pushback and the operation's deadline.
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
//!
//! [`Retrier`]: shed_core::retry::Retrier

mod classify;
mod headers;
mod layer;
mod mark_original;
mod policy;

pub use classify::{is_connection_refused, ClassifyError, NoConnectErrors};
pub use layer::ShedRetryLayer;
pub use mark_original::MarkOriginal;
pub use policy::ShedRetryPolicy;
