//! The header names shed reads and writes, in the lower case HTTP/2 sends.
//!
//! `http::HeaderName::from_static` accepts each of them as it is.

/// The attempt number a shed client sends with every attempt: `1` for the
/// original, `2` and up for retries. Servers shed attempts above 1 first.
/// Read with [`count`](super::count).
pub const ATTEMPT_HEADER: &str = "shed-attempt";

/// The gRPC deadline header, which shed clients also use to forward the
/// remaining deadline of plain HTTP calls. Read with
/// [`grpc_timeout`](super::grpc_timeout), written with
/// [`format_grpc_timeout`](super::format_grpc_timeout).
pub const GRPC_TIMEOUT_HEADER: &str = "grpc-timeout";

/// Connect's deadline header, in milliseconds. Read with
/// [`timeout_ms`](super::timeout_ms).
pub const CONNECT_TIMEOUT_MS_HEADER: &str = "connect-timeout-ms";

/// The deadline Envoy tells its upstream, in milliseconds. Read with
/// [`timeout_ms`](super::timeout_ms).
pub const ENVOY_EXPECTED_RQ_TIMEOUT_MS_HEADER: &str = "x-envoy-expected-rq-timeout-ms";

/// gRPC's retry marker: how many attempts came before this one (`1` on the
/// first retry). Read with [`count`](super::count).
pub const GRPC_PREVIOUS_RPC_ATTEMPTS_HEADER: &str = "grpc-previous-rpc-attempts";

/// Envoy's attempt number (`1` for the original). Read with
/// [`count`](super::count).
pub const ENVOY_ATTEMPT_COUNT_HEADER: &str = "x-envoy-attempt-count";

/// The AWS SDKs' request marker, such as `attempt=2; max=3`. Read with
/// [`amz_sdk_attempt`](super::amz_sdk_attempt).
pub const AMZ_SDK_REQUEST_HEADER: &str = "amz-sdk-request";

/// The Stainless SDKs' (OpenAI, Anthropic...) retry count: `0` for the
/// original. Read with [`count`](super::count).
pub const STAINLESS_RETRY_COUNT_HEADER: &str = "x-stainless-retry-count";

/// The standard pushback header (RFC 9110 section 10.2.3): delay-seconds or
/// an HTTP-date. Read with [`retry_after`](super::retry_after).
pub const RETRY_AFTER_HEADER: &str = "retry-after";

/// Millisecond retry hint some servers send beside `Retry-After`. Read with
/// [`delay_ms`](super::delay_ms).
pub const RETRY_AFTER_MS_HEADER: &str = "retry-after-ms";

/// gRPC pushback hint in milliseconds (gRFC A6); negative means "do not
/// retry". Read with [`delay_ms`](super::delay_ms).
pub const GRPC_RETRY_PUSHBACK_MS_HEADER: &str = "grpc-retry-pushback-ms";

/// A replica's load feedback on its answers (an HTTP header; a trailer of
/// gRPC calls that reach the handler): which ranks it sheds and how loaded
/// it is, such as `ranks=2, cohorts=32, in-flight=60, limit=64, queued=17`.
/// Read with [`load_report`](super::load_report), written with
/// [`format_load_report`](super::format_load_report).
pub const LOAD_HEADER: &str = "shed-load";
