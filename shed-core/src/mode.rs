//! Whether the engine acts on its decisions or only records them.

use std::fmt;
use std::str::FromStr;

/// Whether the engine acts on its decisions ([`Mode::Enforcing`], the
/// default) or only records them ([`Mode::Shadow`]).
///
/// Teams adopt a load shedder the way they adopt any control loop: they
/// deploy it watching, read for a while what it would have done, then turn
/// it on. In shadow mode every request is judged exactly as in enforcing
/// mode, and what enforcing mode would have done is counted
/// ([`ClassStats::would`](crate::ClassStats::would)) and traced (target
/// `shed::shadow`, with the Retry-After it would have sent), but every
/// request is admitted at once and served untouched.
///
/// # How a shadow engine accounts for what it did not do
///
/// It must not believe the service less loaded than it is, nor learn the
/// service's speed from load it would have kept out:
///
/// - Every request served holds a slot, above the limit if need be, so
///   [`Stats::in_flight`](crate::Stats::in_flight) is what the service
///   really runs.
/// - A request that would have waited joins a *rehearsed* queue: an entry
///   with no request behind it, in a replay of the door enforcing mode
///   would have kept, paced as the door measures itself (a slot frees every
///   slot time; slots go to waiting entries in the door's serve order). It
///   leaves when a slot would have freed for it, or is refused when its
///   deadline, its wait or the admission level would have refused it.
///   Later arrivals are judged behind it, its wait feeds the queue-delay
///   controller, and [`Stats::queued`](crate::Stats::queued) counts it.
/// - A request taken while the service runs more requests than the limit
///   allows (the requests enforcing mode would have kept waiting or refused
///   are running too) is measured in a service enforcing mode would not have
///   had: its hold time, the adaptive limit's samples and waves of hang-ups
///   of that time are left out, and the engine goes on with the limit it
///   last measured and a service time settled over about twenty seconds of
///   measured requests. The waits it
///   predicts, and so the refusals, are those of the service it would have
///   protected. How long callers wait before they hang up is theirs, and is
///   learnt whatever the load.
/// - So it must have seen the service within the limit first: started cold
///   in an overload, it knows no service time, predicts no wait and counts
///   no refusal for want of one.
///
/// Switching at run time ([`Shedder::set_mode`](crate::Shedder::set_mode))
/// takes effect for the next request and loses no slot: requests already
/// admitted keep their slots until they finish (the excess over the limit
/// drains as after a lowered limit), waiters already queued in enforcing
/// mode are still served in order, and the rehearsed queue is dropped when
/// enforcing resumes.
///
/// ```
/// use shed_core::{Arrival, Class, Mode, Shedder};
///
/// let shedder = Shedder::builder().limit(1).mode(Mode::Shadow).build()?;
/// let first = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
/// // Enforcing, a second request could not take a slot now; in shadow it is
/// // served, and the refusal is counted.
/// let second = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
/// assert_eq!(shedder.in_flight(), 2);
/// assert_eq!(shedder.stats().class(Class::Batch).would.rejected(), 1);
/// # drop((first, second));
/// # Ok::<(), shed_core::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Requests are queued and refused as judged.
    #[default]
    Enforcing,
    /// Requests are judged and the judgement recorded, but every one is
    /// served at once.
    Shadow,
}

impl Mode {
    /// `"enforcing"` or `"shadow"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Enforcing => "enforcing",
            Mode::Shadow => "shadow",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A mode name that is neither `enforcing` nor `shadow`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseModeError(String);

impl fmt::Display for ParseModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown mode {:?}; use \"enforcing\" or \"shadow\"",
            self.0
        )
    }
}

impl std::error::Error for ParseModeError {}

impl FromStr for Mode {
    type Err = ParseModeError;

    /// Parses `enforcing` or `shadow`, as [`Mode::as_str`] writes them.
    ///
    /// ```
    /// use shed_core::Mode;
    /// assert_eq!("shadow".parse(), Ok(Mode::Shadow));
    /// assert!("dry-run".parse::<Mode>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Mode, ParseModeError> {
        match s {
            "enforcing" => Ok(Mode::Enforcing),
            "shadow" => Ok(Mode::Shadow),
            other => Err(ParseModeError(other.to_owned())),
        }
    }
}
