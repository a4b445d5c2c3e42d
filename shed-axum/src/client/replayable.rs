//! What the retry policy needs of a request body: a way to send it again.

/// A request body that [`ShedRetryPolicy`](super::ShedRetryPolicy) can send
/// more than once.
///
/// Every `Clone` body is one (`String`, `Bytes`,
/// `http_body_util::Full<Bytes>`...): a replay is a clone. A body that is
/// not `Clone`, such as `tonic::body::Body` or `axum::body::Body`, is sent
/// through a [`ReplayBody`](super::ReplayBody), which records it as it is
/// sent ([`ShedRetryLayer::replay_buffer`](super::ShedRetryLayer::replay_buffer)).
///
/// ```
/// use shed_axum::client::ReplayableBody;
///
/// let body = String::from("ping");
/// assert_eq!(body.replay(), "ping");
/// assert!(body.can_replay());
/// ```
pub trait ReplayableBody: Sized {
    /// A body that sends what `self` sends. Taken before `self` is sent;
    /// tower's retry sends it if the attempt fails and a retry is granted.
    #[must_use]
    fn replay(&self) -> Self;

    /// Whether a replay taken earlier can still send every byte of the
    /// original: `false` once a bounded record of it overflowed. Asked
    /// after an attempt fails, before a retry is granted.
    fn can_replay(&self) -> bool;
}

impl<B: Clone> ReplayableBody for B {
    fn replay(&self) -> Self {
        self.clone()
    }

    fn can_replay(&self) -> bool {
        true
    }
}
