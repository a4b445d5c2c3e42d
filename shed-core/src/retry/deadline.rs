//! An operation's deadline and the response reserve kept back at its end:
//! the one place the time its attempts may use is worked out.

use std::time::Duration;

/// How long an operation may take, measured from when its original is sent,
/// and the time kept back at the end for the last response to reach the
/// caller. Attempts are promised only what is left once the reserve is
/// kept back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OperationDeadline {
    pub(super) length: Duration,
    pub(super) response_reserve: Duration,
}

impl OperationDeadline {
    /// The time attempts may use, from the original: the deadline less the
    /// response reserve; `None` if the reserve is the longer.
    fn usable(self) -> Option<Duration> {
        self.length.checked_sub(self.response_reserve)
    }

    /// The deadline to forward with an attempt sent at `sent_at`: what is
    /// left of the usable time; zero if nothing is.
    pub(super) fn forwarded(self, sent_at: Duration) -> Duration {
        self.usable()
            .map_or(Duration::ZERO, |usable| usable.saturating_sub(sent_at))
    }

    /// The latest time an attempt may start and still have `window` of the
    /// usable time.
    pub(super) fn latest_useful_start(self, window: Duration) -> Option<Duration> {
        self.usable()?.checked_sub(window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadline(length_ms: u64, reserve_ms: u64) -> OperationDeadline {
        OperationDeadline {
            length: Duration::from_millis(length_ms),
            response_reserve: Duration::from_millis(reserve_ms),
        }
    }

    #[test]
    fn a_reserve_longer_than_the_deadline_leaves_nothing() {
        let deadline = deadline(40, 50);
        assert_eq!(deadline.forwarded(Duration::ZERO), Duration::ZERO);
        assert_eq!(deadline.latest_useful_start(Duration::ZERO), None);
    }

    #[test]
    fn the_latest_useful_start_leaves_the_window_before_the_reserve() {
        let deadline = deadline(1_500, 50);
        assert_eq!(
            deadline.latest_useful_start(Duration::from_millis(20)),
            Some(Duration::from_millis(1_430))
        );
        assert_eq!(deadline.latest_useful_start(Duration::from_secs(2)), None);
    }
}
