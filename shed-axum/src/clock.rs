//! A clock that follows tokio's time, for tests that pause it.

use std::time::Instant;

use shed_core::Clock;

/// The engine clock for tokio services: reads [`tokio::time::Instant::now`],
/// which is the system's monotonic clock, except under
/// `tokio::time::pause()`, where it follows the paused test time.
///
/// ```
/// let shedder = shed_core::Shedder::builder().clock(shed_axum::TokioClock).build()?;
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}
