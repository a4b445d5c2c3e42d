//! Priority classes and ranks: who is shed first.
//!
//! ```
//! use shed_core::{Class, Rank};
//!
//! // Retries are shed before originals, and within each, the least important class first.
//! let order: Vec<String> = Rank::ALL.iter().map(|r| r.to_string()).collect();
//! assert_eq!(order.first().unwrap(), "background retry");
//! assert_eq!(order.last().unwrap(), "critical");
//! assert!(Rank::retry(Class::Critical) < Rank::original(Class::Background));
//! ```

use std::fmt;

/// How important a request is to the service. `Critical > Interactive > Batch > Background`.
///
/// The default is [`Class::Interactive`].
///
/// ```
/// use shed_core::Class;
/// assert!(Class::Critical > Class::Interactive);
/// assert_eq!(Class::default(), Class::Interactive);
/// assert_eq!(Class::from_name("BATCH"), Some(Class::Batch));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Work nobody waits for (prefetch, cache warming, analytics).
    Background = 0,
    /// Work a machine waits for (bulk jobs, exports, crawlers).
    Batch = 1,
    /// Work a person waits for. The default.
    #[default]
    Interactive = 2,
    /// Work the service cannot do without (health of the business: checkout, auth).
    Critical = 3,
}

impl Class {
    /// The number of classes.
    pub const COUNT: usize = 4;

    /// Every class, least important first.
    pub const ALL: [Class; Class::COUNT] = [
        Class::Background,
        Class::Batch,
        Class::Interactive,
        Class::Critical,
    ];

    /// The class's position in [`Class::ALL`] (0 = Background, 3 = Critical).
    ///
    /// ```
    /// assert_eq!(shed_core::Class::Critical.index(), 3);
    /// ```
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The lowercase name, as written in headers and stats.
    ///
    /// ```
    /// assert_eq!(shed_core::Class::Batch.as_str(), "batch");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            Class::Background => "background",
            Class::Batch => "batch",
            Class::Interactive => "interactive",
            Class::Critical => "critical",
        }
    }

    /// Parses a class name, ignoring ASCII case. Anything else is `None`.
    ///
    /// ```
    /// use shed_core::Class;
    /// assert_eq!(Class::from_name("Critical"), Some(Class::Critical));
    /// assert_eq!(Class::from_name("urgent"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Class> {
        Class::ALL
            .into_iter()
            .find(|class| class.as_str().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request's place in the shed order: its class and whether it is a retry.
///
/// Ranks are ordered from first shed (`Rank::ALL[0]`, a background retry) to last
/// shed (a critical original). Every retry ranks below every original.
///
/// ```
/// use shed_core::{Class, Rank};
/// let retry = Rank::retry(Class::Interactive);
/// assert!(retry.is_retry());
/// assert!(retry < Rank::original(Class::Background));
/// assert_eq!(Rank::original(Class::Critical).index(), 7);
/// assert_eq!(Rank::of(Class::Interactive, 2), retry);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rank(u8);

impl Rank {
    /// The number of ranks.
    pub const COUNT: usize = 8;

    /// Every rank, in shed order: first shed first.
    pub const ALL: [Rank; Rank::COUNT] = [
        Rank(0),
        Rank(1),
        Rank(2),
        Rank(3),
        Rank(4),
        Rank(5),
        Rank(6),
        Rank(7),
    ];

    /// The rank of a first attempt of `class`.
    pub const fn original(class: Class) -> Rank {
        Rank(Class::COUNT as u8 + class as u8)
    }

    /// The rank of a retry of `class`: below every original.
    pub const fn retry(class: Class) -> Rank {
        Rank(class as u8)
    }

    /// The rank of a class at an attempt number (1 = original, more = retry; 0 counts as 1).
    pub const fn of(class: Class, attempt: u32) -> Rank {
        if attempt > 1 {
            Rank::retry(class)
        } else {
            Rank::original(class)
        }
    }

    /// Position in the shed order, 0 (shed first) to 7 (shed last).
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The class this rank belongs to.
    pub const fn class(self) -> Class {
        Class::ALL[self.0 as usize % Class::COUNT]
    }

    /// Whether this is the rank of a retry.
    pub const fn is_retry(self) -> bool {
        (self.0 as usize) < Class::COUNT
    }
}

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_retry() {
            write!(f, "{} retry", self.class())
        } else {
            write!(f, "{}", self.class())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shed_order_puts_every_retry_before_every_original() {
        let names: Vec<String> = Rank::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "background retry",
                "batch retry",
                "interactive retry",
                "critical retry",
                "background",
                "batch",
                "interactive",
                "critical"
            ]
        );
    }

    #[test]
    fn rank_round_trips_class_and_retry() {
        for class in Class::ALL {
            for (rank, retry) in [(Rank::original(class), false), (Rank::retry(class), true)] {
                assert_eq!(rank.class(), class);
                assert_eq!(rank.is_retry(), retry);
                assert_eq!(Rank::ALL[rank.index()], rank);
            }
        }
    }

    #[test]
    fn a_second_attempt_is_a_retry() {
        assert_eq!(Rank::of(Class::Batch, 1), Rank::original(Class::Batch));
        assert_eq!(Rank::of(Class::Batch, 2), Rank::retry(Class::Batch));
    }

    #[test]
    fn attempt_zero_counts_as_an_original() {
        assert!(!Rank::of(Class::Batch, 0).is_retry());
    }
}
