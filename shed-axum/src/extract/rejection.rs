//! Why an extractor could not hand the handler what it asked for.
//!
//! Each is a server bug, not the caller's fault: answered `500` with a
//! message for the operator. Like axum's own rejections, each has its
//! [`status`](MissingShedLayer::status) and
//! [`body_text`](MissingShedLayer::body_text), and is an [`Error`] whose
//! [`Display`](fmt::Display) is that text, so it can be logged, mapped, or
//! returned as is.

use std::error::Error;
use std::fmt;

use axum::response::{IntoResponse, Response};
use http::StatusCode;

/// The rejection of [`Admitted`](crate::Admitted) and of
/// `Option<`[`Deadline`](crate::Deadline)`>` when no [`ShedLayer`](crate::ShedLayer)
/// runs in front of the handler.
///
/// ```
/// use shed_axum::MissingShedLayer;
/// let rejection = MissingShedLayer::default();
/// assert_eq!(rejection.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
/// assert!(rejection.to_string().contains("no ShedLayer"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MissingShedLayer;

impl MissingShedLayer {
    /// `500 Internal Server Error`.
    pub fn status(&self) -> StatusCode {
        StatusCode::INTERNAL_SERVER_ERROR
    }

    /// The text of the response body.
    pub fn body_text(&self) -> &'static str {
        "server misconfigured: this handler extracts shed admission facts, but no ShedLayer runs in front of it"
    }
}

/// The rejection of a bare [`Deadline`](crate::Deadline) when the request
/// has none; extract `Option<Deadline>` where requests may come without.
///
/// ```
/// use shed_axum::MissingDeadline;
/// let rejection = MissingDeadline::default();
/// assert_eq!(rejection.status(), http::StatusCode::INTERNAL_SERVER_ERROR);
/// assert!(rejection.to_string().contains("Option<Deadline>"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MissingDeadline;

impl MissingDeadline {
    /// `500 Internal Server Error`.
    pub fn status(&self) -> StatusCode {
        StatusCode::INTERNAL_SERVER_ERROR
    }

    /// The text of the response body.
    pub fn body_text(&self) -> &'static str {
        "this handler requires a deadline; extract Option<Deadline> where requests may have none"
    }
}

/// The rejection of a bare [`Deadline`](crate::Deadline): no shed layer, or
/// no deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeadlineRejection {
    /// No shed layer runs in front of the handler.
    MissingShedLayer(MissingShedLayer),
    /// The request has no deadline.
    MissingDeadline(MissingDeadline),
}

impl DeadlineRejection {
    /// The status of the response.
    pub fn status(&self) -> StatusCode {
        match self {
            DeadlineRejection::MissingShedLayer(inner) => inner.status(),
            DeadlineRejection::MissingDeadline(inner) => inner.status(),
        }
    }

    /// The text of the response body.
    pub fn body_text(&self) -> &'static str {
        match self {
            DeadlineRejection::MissingShedLayer(inner) => inner.body_text(),
            DeadlineRejection::MissingDeadline(inner) => inner.body_text(),
        }
    }
}

impl From<MissingShedLayer> for DeadlineRejection {
    fn from(inner: MissingShedLayer) -> Self {
        DeadlineRejection::MissingShedLayer(inner)
    }
}

impl From<MissingDeadline> for DeadlineRejection {
    fn from(inner: MissingDeadline) -> Self {
        DeadlineRejection::MissingDeadline(inner)
    }
}

/// `Display`, `Error` and `IntoResponse` from `status` and `body_text`,
/// the same for each rejection.
macro_rules! answer_with_status_and_body_text {
    ($($rejection:ty),+) => {$(
        impl fmt::Display for $rejection {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.body_text())
            }
        }

        impl Error for $rejection {}

        impl IntoResponse for $rejection {
            fn into_response(self) -> Response {
                (self.status(), self.body_text()).into_response()
            }
        }
    )+};
}

answer_with_status_and_body_text!(MissingShedLayer, MissingDeadline, DeadlineRejection);
