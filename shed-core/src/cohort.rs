//! Cohorts: slices of a rank, so shedding can be gradual.
//!
//! Each rank is split into 128 cohorts. The admission level sheds a rank one
//! cohort at a time, so the engine can refuse 5% of batch traffic instead of all
//! of it. A request with a caller key (user, tenant, API key) always lands in the
//! same cohort for an hour, so one caller is consistently admitted or refused
//! across the calls of one task (as in DAGOR); without a key, requests are
//! spread evenly.
//!
//! ```
//! use shed_core::Cohort;
//! let a = Cohort::from_key(42, 7);
//! assert_eq!(a, Cohort::from_key(42, 7)); // same key, same hour: same cohort
//! assert!(a.get() <= Cohort::MAX.get());
//! ```

use crate::random;

/// One of the 128 slices of a rank, `0..=127`. Lower cohorts are shed first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cohort(u8);

impl Cohort {
    /// The number of cohorts in a rank.
    pub const COUNT: u16 = 128;
    /// The first cohort shed in a rank.
    pub const MIN: Cohort = Cohort(0);
    /// The last cohort shed in a rank.
    pub const MAX: Cohort = Cohort(127);

    /// A cohort by number; `None` above 127.
    ///
    /// ```
    /// assert!(shed_core::Cohort::new(127).is_some());
    /// assert!(shed_core::Cohort::new(128).is_none());
    /// ```
    pub const fn new(value: u8) -> Option<Cohort> {
        if value < Cohort::COUNT as u8 {
            Some(Cohort(value))
        } else {
            None
        }
    }

    /// The cohort's number, `0..=127`.
    pub const fn get(self) -> u8 {
        self.0
    }

    /// The cohort of a caller key in a rotation period (the engine uses the hour).
    ///
    /// The same key and period always give the same cohort; a new period
    /// reshuffles callers so that nobody is refused first forever.
    pub const fn from_key(key: u64, period: u64) -> Cohort {
        // A hash, not a draw: the generator's mixing function, so a key's
        // cohort is the same in every process of a fleet.
        let mixed = random::mix(key ^ period.wrapping_mul(random::GAMMA));
        Cohort((mixed % Cohort::COUNT as u64) as u8)
    }

    /// A cohort drawn evenly, from a per-thread generator (no lock, no shared state).
    pub(crate) fn spread() -> Cohort {
        Cohort((random::next_u64() % Cohort::COUNT as u64) as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_spread_over_all_cohorts() {
        let mut seen = [false; 128];
        for key in 0..10_000u64 {
            seen[Cohort::from_key(key, 0).get() as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn a_new_period_reshuffles_keys() {
        let moved = (0..1_000u64)
            .filter(|key| Cohort::from_key(*key, 1) != Cohort::from_key(*key, 2))
            .count();
        assert!(moved > 900, "only {moved} of 1000 keys changed cohort");
    }

    #[test]
    fn a_keys_cohort_is_pinned_across_releases() {
        // A fleet's processes must agree, old and new builds alike: these
        // are the cohorts of the hash as shipped, not to be changed.
        let pinned: Vec<u8> = (0..6u64)
            .map(|key| Cohort::from_key(key, 7).get())
            .collect();
        assert_eq!(
            pinned,
            [60, 100, 5, 47, 82, 22],
            "computed with 0.1's splitmix64"
        );
    }
}
