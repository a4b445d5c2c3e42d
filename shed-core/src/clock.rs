//! Where the engine's time comes from.
//!
//! Production uses [`MonotonicClock`]; tests drive a [`ManualClock`] so that
//! timing behaviour is checked deterministically, without sleeping.
//!
//! ```
//! use shed_core::{Clock, ManualClock};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new();
//! let start = clock.now();
//! clock.advance(Duration::from_millis(250));
//! assert_eq!(clock.now() - start, Duration::from_millis(250));
//! ```

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A source of monotonic time. The engine reads it once per event.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current instant. Must never go backwards.
    fn now(&self) -> Instant;
}

/// The operating system's monotonic clock ([`Instant::now`]). The default.
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told to. Clones share one time.
///
/// ```
/// use shed_core::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let handle = clock.clone();
/// handle.advance(Duration::from_secs(1));
/// assert_eq!(clock.elapsed(), Duration::from_secs(1));
/// ```
#[derive(Clone)]
pub struct ManualClock {
    shared: Arc<ManualTime>,
}

struct ManualTime {
    start: Instant,
    elapsed_nanos: AtomicU64,
}

impl ManualClock {
    /// A clock standing at the moment it was made.
    pub fn new() -> ManualClock {
        ManualClock {
            shared: Arc::new(ManualTime {
                start: Instant::now(),
                elapsed_nanos: AtomicU64::new(0),
            }),
        }
    }

    /// Moves time forward by `by`. The clock counts up to `u64::MAX`
    /// nanoseconds (about 584 years) and stops there: it never wraps back.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self.shared.elapsed_nanos.fetch_update(
            Ordering::Relaxed,
            Ordering::Relaxed,
            |elapsed| Some(elapsed.saturating_add(nanos)),
        );
    }

    /// How far the clock has been moved since it was made.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.shared.elapsed_nanos.load(Ordering::Relaxed))
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.shared.start + self.elapsed()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("elapsed", &self.elapsed())
            .finish()
    }
}
