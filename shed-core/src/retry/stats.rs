//! Counters of what a retrier did: originals, retries, denials by reason.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Reason;

/// Live counters, shared by every clone of a [`Retrier`](super::Retrier)
/// and read through [`Retrier::stats`](super::Retrier::stats). Reading them
/// is a few relaxed loads: each counter is exact, but a read of several
/// counters is not one atomic snapshot.
///
/// ```
/// use std::time::Duration;
/// use shed_core::retry::{AttemptOutcome, Pushback, Reason, Replay, Retrier};
///
/// let retrier = Retrier::builder().build()?;
/// let mut op = retrier.begin(Replay::Safe);
/// let _ = retrier.decide(&mut op, AttemptOutcome::Status(400), Pushback::Absent, Duration::ZERO);
///
/// let stats = retrier.stats();
/// assert_eq!(stats.originals(), 1);
/// assert_eq!(stats.retries(), 0);
/// assert_eq!(stats.denials(Reason::TerminalStatus), 1);
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Debug, Default)]
pub struct RetryStats {
    originals: AtomicU64,
    retries: AtomicU64,
    /// Indexed by [`Reason::index`]; the `Succeeded` slot stays zero.
    denials: [AtomicU64; Reason::ALL.len()],
}

impl RetryStats {
    /// Originals begun.
    #[must_use]
    pub fn originals(&self) -> u64 {
        self.originals.load(Ordering::Relaxed)
    }

    /// Retries granted.
    #[must_use]
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Failed attempts not retried for `reason` ([`Reason::Succeeded`] is
    /// not a denial and always reads zero).
    #[must_use]
    pub fn denials(&self, reason: Reason) -> u64 {
        self.denials[reason.index()].load(Ordering::Relaxed)
    }

    /// Every failed attempt not retried, whatever the reason.
    #[must_use]
    pub fn total_denials(&self) -> u64 {
        Reason::ALL.iter().map(|&reason| self.denials(reason)).sum()
    }
    pub(crate) fn record_original(&self) {
        self.originals.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_denial(&self, reason: Reason) {
        if reason != Reason::Succeeded {
            self.denials[reason.index()].fetch_add(1, Ordering::Relaxed);
        }
    }
}
