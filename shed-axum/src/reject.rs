//! The answers shed gives when it refuses a request.
//!
//! | caller | overload | deadline |
//! |---|---|---|
//! | HTTP | `429` (or the configured status), `Retry-After: <s>`, `application/problem+json` | `504`, no Retry-After, `application/problem+json` |
//! | gRPC (`content-type: application/grpc*`) | `200` trailers-only, `grpc-status: 8` (or 14), `grpc-retry-pushback-ms` | `200` trailers-only, `grpc-status: 4` |
//!
//! The problem body follows RFC 9457 and adds `reason`, `class`, `attempt`
//! and, for overload, `retry_after_ms`:
//!
//! ```json
//! {"type":"urn:shed:overloaded","title":"Too Many Requests","status":429,
//!  "detail":"the service is overloaded and is shedding this kind of request",
//!  "reason":"shed","class":"batch","attempt":1,"retry_after_ms":2150}
//! ```

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderName, HeaderValue, Response, StatusCode};
use shed_core::wire::GRPC_RETRY_PUSHBACK_MS_HEADER;
use shed_core::{RejectReason, Rejection};

use crate::body::ShedBody;
use crate::classify::Classification;
use crate::hook::{OnRejection, RequestHead};

const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");
const GRPC: HeaderValue = HeaderValue::from_static("application/grpc");
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const GRPC_PUSHBACK: HeaderName = HeaderName::from_static(GRPC_RETRY_PUSHBACK_MS_HEADER);

/// The gRPC status sent when a gRPC caller is refused for overload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GrpcOverloadStatus {
    /// `RESOURCE_EXHAUSTED` (8): the default, as gRFC A6 pushback expects.
    #[default]
    ResourceExhausted,
    /// `UNAVAILABLE` (14): for callers whose retry policy only retries on it.
    Unavailable,
}

impl GrpcOverloadStatus {
    fn value(self) -> HeaderValue {
        match self {
            GrpcOverloadStatus::ResourceExhausted => HeaderValue::from_static("8"),
            GrpcOverloadStatus::Unavailable => HeaderValue::from_static("14"),
        }
    }
}

/// How a layer answers refusals.
#[derive(Clone)]
pub(crate) struct Responder {
    pub(crate) overload_status: StatusCode,
    pub(crate) grpc_overload_status: GrpcOverloadStatus,
    pub(crate) hook: Option<Arc<dyn OnRejection>>,
}

impl Default for Responder {
    fn default() -> Self {
        Responder {
            overload_status: StatusCode::TOO_MANY_REQUESTS,
            grpc_overload_status: GrpcOverloadStatus::ResourceExhausted,
            hook: None,
        }
    }
}

impl fmt::Debug for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder")
            .field("overload_status", &self.overload_status)
            .field("grpc_overload_status", &self.grpc_overload_status)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}

impl Responder {
    /// The answer to a request refused at the door or in the queue.
    pub(crate) fn respond<B>(
        &self,
        rejection: &Rejection,
        head: &RequestHead<'_>,
        classification: &Classification,
    ) -> Response<ShedBody<B>> {
        let custom = self
            .hook
            .as_ref()
            .and_then(|hook| hook.on_rejection(rejection, head));
        if let Some(custom) = custom {
            return custom.map(ShedBody::full);
        }
        if classification.is_grpc() {
            grpc_answer(rejection, self.grpc_overload_status)
        } else {
            http_answer(rejection, self.overload_status, classification.attempt())
        }
    }
}

/// The answer to a request whose deadline passed while it was served.
pub(crate) fn deadline_answer<B>(
    rejection: &Rejection,
    classification: &Classification,
) -> Response<ShedBody<B>> {
    debug_assert!(rejection.reason().is_deadline());
    if classification.is_grpc() {
        grpc_answer(rejection, GrpcOverloadStatus::default())
    } else {
        http_answer(
            rejection,
            StatusCode::GATEWAY_TIMEOUT,
            classification.attempt(),
        )
    }
}

fn http_answer<B>(
    rejection: &Rejection,
    overload_status: StatusCode,
    attempt: u32,
) -> Response<ShedBody<B>> {
    let status = if rejection.reason().is_deadline() {
        StatusCode::GATEWAY_TIMEOUT
    } else {
        overload_status
    };
    let body = Problem::of(rejection, status, attempt).to_bytes();
    let mut response = Response::new(ShedBody::full(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, PROBLEM_JSON);
    if let Some(after) = rejection.retry_after() {
        headers.insert(RETRY_AFTER, seconds_value(after.as_secs()));
    }
    response
}

fn grpc_answer<B>(
    rejection: &Rejection,
    overload_status: GrpcOverloadStatus,
) -> Response<ShedBody<B>> {
    let mut response = Response::new(ShedBody::full(Bytes::new()));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, GRPC);
    let status = if rejection.reason().is_deadline() {
        HeaderValue::from_static("4")
    } else {
        overload_status.value()
    };
    headers.insert(GRPC_STATUS, status);
    // Descriptions are plain printable ASCII: valid grpc-message text as is.
    headers.insert(
        GRPC_MESSAGE,
        HeaderValue::from_static(rejection.reason().description()),
    );
    if let Some(after) = rejection.retry_after() {
        headers.insert(GRPC_PUSHBACK, HeaderValue::from(after.as_millis()));
    }
    response
}

/// Whole seconds as a header value, without allocating for the common
/// values (up to a minute).
fn seconds_value(secs: u64) -> HeaderValue {
    const SMALL: [&str; 61] = [
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
        "17", "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31",
        "32", "33", "34", "35", "36", "37", "38", "39", "40", "41", "42", "43", "44", "45", "46",
        "47", "48", "49", "50", "51", "52", "53", "54", "55", "56", "57", "58", "59", "60",
    ];
    match SMALL.get(secs as usize) {
        Some(text) => HeaderValue::from_static(text),
        None => HeaderValue::from(secs),
    }
}

/// Room for the longest problem body, with some to spare:
/// `the_longest_problem_body_fits_its_buffer` proves that it fits.
const PROBLEM_CAPACITY: usize = 384;

/// The fields of an RFC 9457 problem body.
///
/// Every text is a fixed ASCII name from a finite set (so no escaping is
/// needed) and every number has at most 20 digits, so the longest body is
/// the one whose every field is the longest of its set: the test
/// `the_longest_problem_body_fits_its_buffer` builds that one.
struct Problem {
    kind: &'static str,
    title: &'static str,
    status: StatusCode,
    detail: &'static str,
    reason: &'static str,
    class: &'static str,
    attempt: u32,
    retry_after_ms: Option<u64>,
}

impl Problem {
    fn of(rejection: &Rejection, status: StatusCode, attempt: u32) -> Problem {
        let reason = rejection.reason();
        Problem {
            kind: kind(reason),
            title: title(status),
            status,
            detail: reason.description(),
            reason: reason.as_str(),
            class: rejection.class().as_str(),
            attempt,
            retry_after_ms: rejection.retry_after().map(|after| after.as_millis()),
        }
    }

    /// The body, built on the stack by pushing its pieces, then copied once
    /// into a buffer of exactly its length: on the reject path, `write!`'s
    /// formatting machinery cost more instructions than the engine's whole
    /// decision, and a `String` (or a `BytesMut`) handed to `Bytes` costs a
    /// second allocation when its capacity is not its length.
    fn to_bytes(&self) -> Bytes {
        let mut body = StackText::new();
        for piece in [
            r#"{"type":"urn:shed:"#,
            self.kind,
            r#"","title":""#,
            self.title,
            r#"","status":"#,
            self.status.as_str(),
            r#","detail":""#,
            self.detail,
            r#"","reason":""#,
            self.reason,
            r#"","class":""#,
            self.class,
            r#"","attempt":"#,
        ] {
            body.push(piece.as_bytes());
        }
        body.push_decimal(u64::from(self.attempt));
        if let Some(millis) = self.retry_after_ms {
            body.push(br#","retry_after_ms":"#);
            body.push_decimal(millis);
        }
        body.push(b"}");
        Bytes::copy_from_slice(body.as_bytes())
    }
}

/// The problem type's last word: what kind of refusal it was.
fn kind(reason: RejectReason) -> &'static str {
    if reason.is_deadline() {
        "deadline"
    } else {
        "overloaded"
    }
}

/// The problem title: the status's reason phrase.
fn title(status: StatusCode) -> &'static str {
    status.canonical_reason().unwrap_or("Refused")
}

/// A fixed buffer on the stack for the problem body.
struct StackText {
    bytes: [u8; PROBLEM_CAPACITY],
    len: usize,
}

impl StackText {
    fn new() -> StackText {
        StackText {
            bytes: [0; PROBLEM_CAPACITY],
            len: 0,
        }
    }

    /// Appends `piece`. The capacity holds the longest body (proven by a
    /// test), so this never runs out of room; if it did, it would panic
    /// rather than send a body cut short.
    fn push(&mut self, piece: &[u8]) {
        let end = self.len + piece.len();
        self.bytes[self.len..end].copy_from_slice(piece);
        self.len = end;
    }

    /// Appends `n` in decimal.
    fn push_decimal(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[start..]);
    }

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use shed_core::{Arrival, Class, Rank, Shedder};

    use super::*;

    /// The body as `write!` renders it: the oracle for the hand-built one.
    fn formatted(rejection: &Rejection, status: StatusCode, attempt: u32) -> String {
        let reason = rejection.reason();
        let kind = if reason.is_deadline() {
            "deadline"
        } else {
            "overloaded"
        };
        let mut body = format!(
            r#"{{"type":"urn:shed:{kind}","title":"{title}","status":{status},"detail":"{detail}","reason":"{reason}","class":"{class}","attempt":{attempt}"#,
            title = status.canonical_reason().unwrap_or("Refused"),
            status = status.as_u16(),
            detail = reason.description(),
            class = rejection.class(),
        );
        if let Some(after) = rejection.retry_after() {
            let _ = write!(body, r#","retry_after_ms":{}"#, after.as_millis());
        }
        body.push('}');
        body
    }

    #[test]
    fn retry_after_seconds_are_written_in_decimal() {
        for secs in [0, 1, 9, 30, 60, 61, 3_600] {
            assert_eq!(seconds_value(secs), HeaderValue::from(secs));
        }
    }

    #[test]
    fn the_problem_body_is_the_one_write_would_render() {
        let shedder = Shedder::builder()
            .limit(1)
            .queue_capacity(0)
            .build()
            .unwrap();
        let _busy = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
        let mut rejections = vec![Rejection::deadline_exceeded(Rank::retry(Class::Batch))];
        for class in Class::ALL {
            rejections.push(
                shedder
                    .try_admit(&Arrival::new(class).with_attempt(3))
                    .unwrap_err(),
            );
        }
        for rejection in &rejections {
            for attempt in [1, 7, 10, 1_000, u32::MAX] {
                for status in [
                    StatusCode::TOO_MANY_REQUESTS,
                    StatusCode::SERVICE_UNAVAILABLE,
                    StatusCode::GATEWAY_TIMEOUT,
                ] {
                    assert_eq!(
                        Problem::of(rejection, status, attempt).to_bytes(),
                        formatted(rejection, status, attempt).as_bytes()
                    );
                }
            }
        }
    }

    /// The longest of a set of texts.
    fn longest(texts: impl IntoIterator<Item = &'static str>) -> &'static str {
        texts.into_iter().max_by_key(|text| text.len()).unwrap()
    }

    /// Every field of a problem body is one of a finite set of texts, or a
    /// number of at most 20 digits; the body is their sum plus fixed
    /// punctuation. So the body of the longest of each, the longest title of
    /// every status a layer may be configured with, the longest attempt and
    /// the longest delay, is the longest body there can be: if it fits, every
    /// body does.
    #[test]
    fn the_longest_problem_body_fits_its_buffer() {
        let longest_status_title = (100..=999)
            .map(|code| title(StatusCode::from_u16(code).unwrap()))
            .max_by_key(|title| title.len())
            .unwrap();
        let problem = Problem {
            kind: longest(RejectReason::ALL.map(kind)),
            title: longest_status_title,
            status: StatusCode::NETWORK_AUTHENTICATION_REQUIRED,
            detail: longest(RejectReason::ALL.map(RejectReason::description)),
            reason: longest(RejectReason::ALL.map(RejectReason::as_str)),
            class: longest(Class::ALL.map(Class::as_str)),
            attempt: u32::MAX,
            retry_after_ms: Some(u64::MAX),
        };

        let whole = format!(
            r#"{{"type":"urn:shed:{}","title":"{}","status":511,"detail":"{}","reason":"{}","class":"{}","attempt":{},"retry_after_ms":{}}}"#,
            problem.kind,
            problem.title,
            problem.detail,
            problem.reason,
            problem.class,
            u32::MAX,
            u64::MAX,
        );
        assert!(
            whole.len() <= PROBLEM_CAPACITY,
            "the longest body, {} bytes, does not fit in {PROBLEM_CAPACITY}",
            whole.len()
        );
        assert_eq!(problem.to_bytes(), whole.as_bytes());
    }
}
