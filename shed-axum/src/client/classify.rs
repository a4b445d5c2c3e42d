//! Telling connect errors (never reached the server: safe to resend) from
//! other transport errors.

use std::error::Error;
use std::io;

/// Decides whether a transport error means the request never reached the
/// server. Implemented by every `Fn(&E) -> bool`; given to
/// [`ShedRetryLayer::classify_errors`](super::ShedRetryLayer::classify_errors).
///
/// tower's error types differ from client to client, so the retry policy
/// asks this instead of guessing. With hyper-util's legacy client, for instance, pass
/// `|err: &hyper_util::client::legacy::Error| err.is_connect()`.
///
/// ```
/// use shed_axum::client::ClassifyError;
///
/// let by_message = |err: &String| err.starts_with("connect");
/// assert!(by_message.is_connect_error(&"connect: refused".to_string()));
/// ```
pub trait ClassifyError<E> {
    /// Whether `error` means the request was never sent.
    fn is_connect_error(&self, error: &E) -> bool;
}

impl<E, F: Fn(&E) -> bool> ClassifyError<E> for F {
    fn is_connect_error(&self, error: &E) -> bool {
        self(error)
    }
}

/// The default classifier: treats every error as possibly sent, so errors
/// are never retried until a classifier says which are connect errors.
///
/// ```
/// use shed_axum::client::{ClassifyError, NoConnectErrors};
///
/// assert!(!NoConnectErrors.is_connect_error(&"connection refused"));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NoConnectErrors;

impl<E> ClassifyError<E> for NoConnectErrors {
    fn is_connect_error(&self, _error: &E) -> bool {
        false
    }
}

/// Whether `error`, or any error in its `source` chain, is an
/// [`io::Error`] of kind [`ConnectionRefused`](io::ErrorKind::ConnectionRefused):
/// a building block for classifiers of boxed errors.
///
/// ```
/// use std::io;
/// use shed_axum::client::is_connection_refused;
///
/// let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
/// assert!(is_connection_refused(&refused));
/// assert!(!is_connection_refused(&io::Error::from(io::ErrorKind::TimedOut)));
///
/// // For tower's boxed errors:
/// let classify = |err: &tower::BoxError| is_connection_refused(err.as_ref());
/// # let _ = classify;
/// ```
#[must_use]
pub fn is_connection_refused(error: &(dyn Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        next = error.source();
    }
    false
}
