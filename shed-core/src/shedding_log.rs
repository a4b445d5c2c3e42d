//! Tells the logs when the engine starts and stops shedding: one `warn`
//! each, so an operator sees an overload in the logs without an event per
//! refused request (those are `debug`, from the host).
//!
//! Checked where a controller interval closes, one thread at a time. A
//! start is warned about at most once per [`QUIET_NANOS`]: a level that
//! flaps between shedding and not within that time gives one start and one
//! stop, and shedding still going on once the quiet time has passed is
//! warned about then. Every warned start is followed by its stop. An idle
//! service's stop is told by the interval the next request closes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::Level;

/// The least time between two warnings that shedding started: ten seconds.
const QUIET_NANOS: u64 = 10_000_000_000;
/// `warned_start` when no warned shedding is going on.
const NOT_SHEDDING: u64 = u64::MAX;
/// `last_start_warning` before the first.
const NEVER: u64 = u64::MAX;

/// What a warning reports besides the level.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Snapshot {
    pub(crate) limit: u32,
    pub(crate) queue_delay: Option<Duration>,
}

/// Whether a start has been warned about, and when.
///
/// # Memory ordering
///
/// `Relaxed`: only the thread closing an interval (holding the controller's
/// claim) reads or writes it.
#[derive(Debug)]
pub(crate) struct SheddingLog {
    /// When the shedding last warned about began; [`NOT_SHEDDING`] once its
    /// stop was warned about (or before any start).
    warned_start: AtomicU64,
    /// When the last start warning was given.
    last_start_warning: AtomicU64,
}

impl SheddingLog {
    pub(crate) fn new() -> SheddingLog {
        SheddingLog {
            warned_start: AtomicU64::new(NOT_SHEDDING),
            last_start_warning: AtomicU64::new(NEVER),
        }
    }

    /// Warns if the engine started or stopped shedding: `level` is the
    /// level the interval closing at `now` left. `snapshot` is only read
    /// when a warning is given.
    pub(crate) fn observe(&self, now: u64, level: Level, snapshot: impl FnOnce() -> Snapshot) {
        let shedding = level != Level::NONE;
        let warned_start = self.warned_start.load(Ordering::Relaxed);
        if shedding && warned_start == NOT_SHEDDING {
            let last = self.last_start_warning.load(Ordering::Relaxed);
            if last != NEVER && now.saturating_sub(last) < QUIET_NANOS {
                return;
            }
            let Snapshot { limit, queue_delay } = snapshot();
            tracing::warn!(
                level = level.get(),
                level_text = %level,
                limit,
                queue_delay_ms = queue_delay.map(|delay| delay.as_secs_f64() * 1e3),
                "shedding started"
            );
            self.warned_start.store(now, Ordering::Relaxed);
            self.last_start_warning.store(now, Ordering::Relaxed);
        } else if !shedding && warned_start != NOT_SHEDDING {
            let Snapshot { limit, queue_delay } = snapshot();
            tracing::warn!(
                limit,
                queue_delay_ms = queue_delay.map(|delay| delay.as_secs_f64() * 1e3),
                shed_for_ms = now.saturating_sub(warned_start) / 1_000_000,
                "shedding stopped"
            );
            self.warned_start.store(NOT_SHEDDING, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    const SECOND: u64 = 1_000_000_000;
    const SHEDDING: Level = Level::new(300);

    fn snapshot() -> Snapshot {
        Snapshot {
            limit: 8,
            queue_delay: Some(Duration::from_millis(12)),
        }
    }

    /// Keeps a second dispatcher registered for the rest of the process, so a
    /// scoped capture cannot miss an event to another test thread: `tracing`
    /// caches once per process whether a callsite is wanted, and with a single
    /// dispatcher registered it asks only the default of the thread that first
    /// reaches the callsite (a test thread with none caches "never"). With two
    /// or more registered, it asks every registered dispatcher.
    fn keep_two_dispatchers_registered() {
        static PIN: std::sync::OnceLock<tracing::Dispatch> = std::sync::OnceLock::new();
        PIN.get_or_init(|| tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default()));
    }

    /// The lines `observe` logged, for levels seen at the given seconds.
    fn logged(levels: &[(u64, Level)]) -> Vec<String> {
        #[derive(Clone, Default)]
        struct Lines(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Lines {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        keep_two_dispatchers_registered();
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let log = SheddingLog::new();
        tracing::subscriber::with_default(subscriber, || {
            for &(second, level) in levels {
                log.observe(second * SECOND, level, snapshot);
            }
        });
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_owned).collect()
    }

    /// The messages of the lines `observe` logged.
    fn warnings(levels: &[(u64, Level)]) -> Vec<String> {
        let messages = ["shedding started", "shedding stopped"];
        logged(levels)
            .iter()
            .map(|line| {
                let message = messages.into_iter().find(|message| line.contains(message));
                message.unwrap_or(line).to_owned()
            })
            .collect()
    }

    #[test]
    fn a_start_and_a_stop_are_each_warned_about_once() {
        let seen = [
            (1, SHEDDING),
            (2, SHEDDING),
            (3, Level::NONE),
            (4, Level::NONE),
        ];
        assert_eq!(warnings(&seen), ["shedding started", "shedding stopped"]);
    }

    #[test]
    fn a_level_that_flaps_within_ten_seconds_gives_one_start_and_one_stop() {
        let seen = [
            (1, SHEDDING),
            (2, Level::NONE),
            (3, SHEDDING),
            (4, Level::NONE),
        ];
        assert_eq!(warnings(&seen), ["shedding started", "shedding stopped"]);
    }

    #[test]
    fn shedding_that_starts_again_soon_is_warned_about_once_ten_seconds_have_passed() {
        let seen = [
            (1, SHEDDING),
            (2, Level::NONE),
            (3, SHEDDING),
            (10, SHEDDING),
            (11, SHEDDING),
            (12, Level::NONE),
        ];
        assert_eq!(
            warnings(&seen),
            [
                "shedding started",
                "shedding stopped",
                "shedding started",
                "shedding stopped"
            ]
        );
    }

    #[test]
    fn the_warnings_carry_the_level_the_limit_and_the_queue_delay() {
        let lines = logged(&[(1, SHEDDING), (3, Level::NONE)]);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        for field in ["WARN", "level=300", "limit=8", "queue_delay_ms=12"] {
            assert!(
                lines[0].contains(field),
                "{field} missing from {}",
                lines[0]
            );
        }
        for field in ["WARN", "limit=8", "shed_for_ms=2000"] {
            assert!(
                lines[1].contains(field),
                "{field} missing from {}",
                lines[1]
            );
        }
    }

    #[test]
    fn no_warning_reads_no_snapshot() {
        let log = SheddingLog::new();
        log.observe(SECOND, Level::NONE, || panic!("read without a warning"));
    }
}
