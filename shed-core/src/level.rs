//! The admission level: how much of the shed order is currently refused.
//!
//! ```
//! use shed_core::{Class, Cohort, Level, Rank};
//!
//! // Shedding all background retries and half of the batch retries:
//! let level = Level::new(128 + 64);
//! assert!(level.sheds(Rank::retry(Class::Background), Cohort::MAX));
//! assert!(level.sheds(Rank::retry(Class::Batch), Cohort::new(63).unwrap()));
//! assert!(!level.sheds(Rank::retry(Class::Batch), Cohort::new(64).unwrap()));
//! assert!(!level.sheds(Rank::original(Class::Critical), Cohort::MIN));
//! ```

use std::fmt;

use crate::{Cohort, Rank};

/// A point in the shed order, counted in (rank, cohort) positions from the bottom.
///
/// Every position below the level is refused at the door; every position at or
/// above it may enter. `Level::NONE` refuses nothing. The highest level still
/// admits the last cohort of critical originals: they are shed only by their own
/// queue filling up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Level(u16);

impl Level {
    /// Nothing is shed.
    pub const NONE: Level = Level(0);
    /// Everything is shed but the last cohort of critical originals.
    pub const MAX: Level = Level(Rank::COUNT as u16 * Cohort::COUNT - 1);

    /// A level of `positions` shed positions, capped at [`Level::MAX`].
    pub const fn new(positions: u16) -> Level {
        if positions > Level::MAX.0 {
            Level::MAX
        } else {
            Level(positions)
        }
    }

    /// The position of a (rank, cohort) pair in the shed order.
    pub const fn position(rank: Rank, cohort: Cohort) -> u16 {
        rank.index() as u16 * Cohort::COUNT + cohort.get() as u16
    }

    /// How many positions are shed.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// Whether a request at this rank and cohort is refused at this level.
    pub const fn sheds(self, rank: Rank, cohort: Cohort) -> bool {
        Level::position(rank, cohort) < self.0
    }

    /// The share of `rank`'s cohorts this level sheds: 1 for ranks below
    /// the one it cuts into, 0 for those above, and the cut part of that one.
    ///
    /// ```
    /// use shed_core::{Class, Level, Rank};
    ///
    /// let level = Level::new(128 + 32);
    /// assert_eq!(level.share_shed(Rank::retry(Class::Background)), 1.0);
    /// assert_eq!(level.share_shed(Rank::retry(Class::Batch)), 0.25);
    /// assert_eq!(level.share_shed(Rank::original(Class::Critical)), 0.0);
    /// ```
    pub fn share_shed(self, rank: Rank) -> f64 {
        let first = Level::position(rank, Cohort::MIN);
        let cohorts = self.0.saturating_sub(first).min(Cohort::COUNT);
        f64::from(cohorts) / f64::from(Cohort::COUNT)
    }

    /// How many positions a (rank, cohort) lies below the level (0 when admitted).
    pub(crate) const fn distance_below(self, rank: Rank, cohort: Cohort) -> u16 {
        self.0.saturating_sub(Level::position(rank, cohort))
    }

    /// The rank the level currently cuts into, and how many of its cohorts are shed.
    ///
    /// ```
    /// use shed_core::{Level, Rank};
    /// assert_eq!(Level::new(130).boundary(), (Rank::ALL[1], 2));
    /// ```
    pub const fn boundary(self) -> (Rank, u16) {
        let rank = (self.0 / Cohort::COUNT) as usize;
        (Rank::ALL[rank], self.0 % Cohort::COUNT)
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Level::NONE {
            return f.write_str("admitting all");
        }
        let (rank, cohorts) = self.boundary();
        if cohorts == 0 {
            write!(f, "shedding below {rank}")
        } else {
            let all = Cohort::COUNT;
            write!(
                f,
                "shedding below {rank}, and {cohorts} of its {all} cohorts"
            )
        }
    }
}
