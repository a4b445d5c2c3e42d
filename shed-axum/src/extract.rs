//! Extractors: what the middleware decided, handed to the handler.
//!
//! ```
//! use axum::{routing::get, Router};
//! use shed_axum::{Admitted, Deadline, ShedLayer};
//!
//! async fn handler(admitted: Admitted, deadline: Option<Deadline>) -> String {
//!     let left = deadline.map(|d| d.remaining().as_millis());
//!     format!("{} attempt {} waited {:?}, {left:?} ms left", admitted.class, admitted.attempt, admitted.queued)
//! }
//!
//! let app: Router = Router::new()
//!     .route("/", get(handler))
//!     .layer(ShedLayer::new(shed_core::Shedder::with_limit(16)?));
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use std::time::{Duration, Instant};

#[cfg(feature = "axum")]
use axum::extract::{FromRequestParts, OptionalFromRequestParts};
#[cfg(feature = "axum")]
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue};
use shed_core::wire::CONNECT_TIMEOUT_MS_HEADER;
use shed_core::Class;

use crate::forward;

#[cfg(feature = "axum")]
mod rejection;

#[cfg(feature = "axum")]
pub use rejection::{DeadlineRejection, MissingDeadline, MissingShedLayer};

/// The admission facts of the request being served: its class, attempt,
/// deadline and how long it queued.
///
/// Extracting it where no [`ShedLayer`](crate::ShedLayer) runs is a server
/// bug, answered with `500` and a message naming the missing layer
/// ([`MissingShedLayer`]); use `Option<Admitted>` where the layer is optional.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Admitted {
    /// The class the request was admitted at.
    pub class: Class,
    /// Its attempt number (1 = original).
    pub attempt: u32,
    /// When its caller stops waiting, if it has a deadline.
    pub deadline: Option<Instant>,
    /// How long it waited for a slot.
    pub queued: Duration,
}

impl Admitted {
    /// Whether the request is a retry.
    pub fn is_retry(&self) -> bool {
        self.attempt > 1
    }
}

#[cfg(feature = "axum")]
impl<S: Send + Sync> FromRequestParts<S> for Admitted {
    type Rejection = MissingShedLayer;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Admitted>()
            .copied()
            .ok_or(MissingShedLayer)
    }
}

#[cfg(feature = "axum")]
impl<S: Send + Sync> OptionalFromRequestParts<S> for Admitted {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(parts.extensions.get::<Admitted>().copied())
    }
}

/// The request's deadline, to propagate to the calls it makes.
///
/// Extract `Option<Deadline>`: absence (no deadline) is normal. Extracting a
/// bare `Deadline` when the request has none answers `500`
/// ([`MissingDeadline`]), as does a missing layer ([`MissingShedLayer`]).
///
/// ```
/// use shed_axum::Deadline;
/// use std::time::{Duration, Instant};
///
/// let deadline = Deadline::at(Instant::now() + Duration::from_millis(800));
/// let mut outgoing = http::HeaderMap::new();
/// deadline.propagate(&mut outgoing);
/// assert!(outgoing.contains_key("grpc-timeout"));
/// assert!(outgoing.contains_key("connect-timeout-ms"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    at: Instant,
}

const CONNECT_TIMEOUT_MS: HeaderName = HeaderName::from_static(CONNECT_TIMEOUT_MS_HEADER);

impl Deadline {
    /// A deadline at `at`.
    pub fn at(at: Instant) -> Deadline {
        Deadline { at }
    }

    /// The instant the caller stops waiting.
    pub fn instant(&self) -> Instant {
        self.at
    }

    /// The time left now (zero once passed).
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Whether the deadline has passed.
    pub fn has_passed(&self) -> bool {
        self.remaining().is_zero()
    }

    /// The remaining time as a `grpc-timeout` value.
    pub fn grpc_timeout(&self) -> HeaderValue {
        forward::grpc_timeout(self.remaining())
    }

    /// Writes the remaining time into outgoing request headers, as
    /// `grpc-timeout` and as `connect-timeout-ms`, so the next service can
    /// refuse what cannot finish in time.
    pub fn propagate(&self, headers: &mut HeaderMap) {
        let remaining = self.remaining();
        headers.insert(forward::GRPC_TIMEOUT, forward::grpc_timeout(remaining));
        let millis = u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX);
        headers.insert(CONNECT_TIMEOUT_MS, HeaderValue::from(millis));
    }
}

#[cfg(feature = "axum")]
impl<S: Send + Sync> FromRequestParts<S> for Deadline {
    type Rejection = DeadlineRejection;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let admitted = parts.extensions.get::<Admitted>().ok_or(MissingShedLayer)?;
        let deadline = admitted.deadline.ok_or(MissingDeadline)?;
        Ok(Deadline::at(deadline))
    }
}

#[cfg(feature = "axum")]
impl<S: Send + Sync> OptionalFromRequestParts<S> for Deadline {
    type Rejection = MissingShedLayer;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> Result<Option<Self>, Self::Rejection> {
        let admitted = parts.extensions.get::<Admitted>().ok_or(MissingShedLayer)?;
        Ok(admitted.deadline.map(Deadline::at))
    }
}
