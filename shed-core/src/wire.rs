//! Names shared by the server and client halves on the wire.
//!
//! The server (shed-axum) reads these headers and the client half writes them,
//! so both ends agree on one spelling.
//!
//! ```
//! assert_eq!(shed_core::wire::ATTEMPT_HEADER, "shed-attempt");
//! ```

/// The attempt number a shed client sends with every attempt: `1` for the
/// original, `2` and up for retries. Servers shed attempts above 1 first.
pub const ATTEMPT_HEADER: &str = "shed-attempt";

/// The gRPC deadline header (`grpc-timeout`), which shed clients also use to
/// forward the remaining deadline of plain HTTP calls.
pub const GRPC_TIMEOUT_HEADER: &str = "grpc-timeout";

/// Millisecond retry hint some servers send beside `Retry-After`.
pub const RETRY_AFTER_MS_HEADER: &str = "retry-after-ms";

/// gRPC pushback hint in milliseconds (gRFC A6); negative means "do not retry".
pub const GRPC_RETRY_PUSHBACK_MS_HEADER: &str = "grpc-retry-pushback-ms";
