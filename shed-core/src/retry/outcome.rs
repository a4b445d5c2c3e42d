//! How one attempt ended, as far as retrying is concerned.

/// How one attempt ended: the input to [`Retrier::decide`](super::Retrier::decide).
///
/// New kinds of ending may be added, so matches need a wildcard arm.
///
/// ```
/// use shed_core::retry::AttemptOutcome;
///
/// assert!(AttemptOutcome::Status(204).is_success());
/// assert!(!AttemptOutcome::Status(503).is_success());
/// assert!(!AttemptOutcome::ConnectError.is_success());
/// // A gRPC call answers HTTP 200 either way; its status says how it ended.
/// assert!(AttemptOutcome::GrpcStatus(0).is_success());
/// assert!(!AttemptOutcome::GrpcStatus(8).is_success()); // RESOURCE_EXHAUSTED
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AttemptOutcome {
    /// A response with this HTTP status code arrived.
    Status(u16),
    /// A gRPC call ended with this `grpc-status` code before any response
    /// message arrived: `0` (`OK`) is a success, any other code a failure
    /// (`8` `RESOURCE_EXHAUSTED`, `14` `UNAVAILABLE`, `4`
    /// `DEADLINE_EXCEEDED`...). gRPC answers a refusal with HTTP 200 and
    /// the code in a trailers-only response, so the HTTP status says
    /// nothing about how the call ended.
    GrpcStatus(u32),
    /// The request never reached the server (connection refused, no route,
    /// DNS failure): always safe to send again.
    ConnectError,
    /// Any other transport error (reset, timeout after sending): the server
    /// may have acted on the request, so it is not retried.
    OtherError,
}

impl AttemptOutcome {
    /// Whether the attempt succeeded: an HTTP status below 400, or gRPC's
    /// `OK` (0).
    ///
    /// ```
    /// use shed_core::retry::AttemptOutcome;
    ///
    /// assert!(AttemptOutcome::Status(304).is_success());
    /// assert!(!AttemptOutcome::Status(429).is_success());
    /// assert!(!AttemptOutcome::GrpcStatus(14).is_success()); // UNAVAILABLE
    /// ```
    #[must_use]
    pub fn is_success(self) -> bool {
        match self {
            Self::Status(code) => code < 400,
            Self::GrpcStatus(code) => code == 0,
            Self::ConnectError | Self::OtherError => false,
        }
    }
}
