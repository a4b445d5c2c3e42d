//! What a client throttle did: requests sent, and refused locally by reason.

use std::sync::atomic::{AtomicU64, Ordering};

use super::LocalReason;

/// Counters of a [`ShedThrottleLayer`](super::ShedThrottleLayer), shared by
/// every service it makes; read with
/// [`ShedThrottleLayer::stats`](super::ShedThrottleLayer::stats).
///
/// ```
/// use shed_axum::client::ShedThrottleLayer;
///
/// let stats = ShedThrottleLayer::new().stats();
/// assert_eq!(stats.sent + stats.refused_shed + stats.refused_throttled, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThrottleStats {
    /// Requests passed on to the client service.
    pub sent: u64,
    /// Requests refused locally because the replica's load reports say it
    /// sheds their rank ([`LocalReason::Shed`]).
    pub refused_shed: u64,
    /// Requests refused locally by the adaptive throttle, the replica
    /// having said nothing of its load ([`LocalReason::Throttled`]).
    pub refused_throttled: u64,
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    sent: AtomicU64,
    refused_shed: AtomicU64,
    refused_throttled: AtomicU64,
}

impl Counters {
    pub(super) fn count_sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_refused(&self, reason: LocalReason) {
        let counter = match reason {
            LocalReason::Shed => &self.refused_shed,
            LocalReason::Throttled => &self.refused_throttled,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> ThrottleStats {
        ThrottleStats {
            sent: self.sent.load(Ordering::Relaxed),
            refused_shed: self.refused_shed.load(Ordering::Relaxed),
            refused_throttled: self.refused_throttled.load(Ordering::Relaxed),
        }
    }
}
