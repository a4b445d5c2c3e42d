//! How one attempt ended, as far as retrying is concerned.

/// How one attempt ended: the input to [`Retrier::decide`](super::Retrier::decide).
///
/// New kinds of ending (gRPC statuses, for one) may be added, so matches
/// need a wildcard arm.
///
/// ```
/// use shed_core::retry::AttemptOutcome;
///
/// assert!(AttemptOutcome::Status(204).is_success());
/// assert!(!AttemptOutcome::Status(503).is_success());
/// assert!(!AttemptOutcome::ConnectError.is_success());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// A response with this HTTP status code arrived.
    Status(u16),
    /// The request never reached the server (connection refused, no route,
    /// DNS failure): always safe to send again.
    ConnectError,
    /// Any other transport error (reset, timeout after sending): the server
    /// may have acted on the request, so it is not retried.
    OtherError,
}

impl AttemptOutcome {
    /// Whether the attempt succeeded: a status below 400.
    ///
    /// ```
    /// use shed_core::retry::AttemptOutcome;
    ///
    /// assert!(AttemptOutcome::Status(304).is_success());
    /// assert!(!AttemptOutcome::Status(429).is_success());
    /// ```
    #[must_use]
    pub fn is_success(self) -> bool {
        matches!(self, Self::Status(code) if code < 400)
    }
}
