//! One process's share of a retry budget stated for a whole fleet.
//!
//! ```
//! use std::sync::Arc;
//! use shed_core::retry::{Retrier, RetryBudget};
//!
//! // The fleet: 8 client processes, 10 retries to start with, 40 banked at most.
//! let share = RetryBudget::fleet_share(10, 40, 8)?;
//! assert_eq!(share.initial_tenths(), 12, "10 retries over 8 processes: 1.25, rounded down");
//! assert_eq!(share.cap_tenths(), 50);
//! let retrier = Retrier::builder().budget(Arc::new(share)).build()?;
//! # let _ = retrier;
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use super::budget::RETRY_COST_TENTHS;
use super::RetryBudget;
use crate::ConfigError;

impl RetryBudget {
    /// One process's share of a budget stated for a fleet of `processes`
    /// client processes that share nothing: together they start with at
    /// most `fleet_initial_retries` retries and bank at most
    /// `fleet_max_retries`.
    ///
    /// Each share is the fleet's number divided by `processes`, counted in
    /// tenths of a retry and rounded down, so the shares of `processes`
    /// processes never add up to more than the stated number (up to
    /// `processes - 1` tenths of it are left unassigned). Retries are earned
    /// as with [`new`](Self::new), a tenth per original of the process's
    /// own; earnings add up across the fleet with nothing to divide.
    ///
    /// Count the most processes the fleet runs at once (an autoscaler's
    /// maximum): fewer hold less than stated, but every process beyond the
    /// count adds a share, and so does every restart, which starts a process
    /// with its share again. [The bound across a
    /// fleet](super#the-bound-across-a-fleet) says exactly how many retries
    /// that allows.
    ///
    /// ```
    /// use shed_core::retry::RetryBudget;
    ///
    /// // 2 retries to start with and 4 banked, stated for 3 processes.
    /// let share = RetryBudget::fleet_share(2, 4, 3)?;
    /// assert_eq!(share.initial_tenths(), 6); // 20 tenths / 3, rounded down
    /// assert_eq!(share.cap_tenths(), 13); // 40 tenths / 3, rounded down
    /// // The fleet holds at most 18 of the 20 tenths stated, and banks 39 of 40.
    ///
    /// // A share must be able to bank one whole retry, or it never retries.
    /// let error = RetryBudget::fleet_share(2, 4, 8).unwrap_err();
    /// assert_eq!(
    ///     error.to_string(),
    ///     "invalid fleet_share: fleet_max_retries 4 over 8 processes leaves each 5 tenths \
    ///      of a retry, and a process must bank a whole retry to retry at all; set \
    ///      fleet_max_retries to at least 8 (one per process)"
    /// );
    /// # Ok::<(), shed_core::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] (setting `fleet_share`) when `processes` is 0, when
    /// a share of `fleet_max_retries` is less than one retry (no process
    /// could ever retry), or when a nonzero `fleet_initial_retries` rounds
    /// down to nothing per process (state 0 to mean that).
    pub fn fleet_share(
        fleet_initial_retries: u32,
        fleet_max_retries: u32,
        processes: u32,
    ) -> Result<Self, ConfigError> {
        if processes == 0 {
            return Err(share_error(
                "processes is 0; count the client processes that each hold a share (at least 1)"
                    .to_string(),
            ));
        }
        let share = |retries: u32| u64::from(retries) * RETRY_COST_TENTHS / u64::from(processes);
        let cap = share(fleet_max_retries);
        if cap < RETRY_COST_TENTHS {
            return Err(share_error(format!(
                "fleet_max_retries {fleet_max_retries} over {processes} processes leaves each \
                 {cap} tenths of a retry, and a process must bank a whole retry to retry at all; \
                 set fleet_max_retries to at least {processes} (one per process)"
            )));
        }
        let initial = share(fleet_initial_retries);
        if fleet_initial_retries > 0 && initial == 0 {
            let least = processes.div_ceil(10);
            return Err(share_error(format!(
                "fleet_initial_retries {fleet_initial_retries} over {processes} processes rounds \
                 down to 0 tenths each (shares are rounded down, so the fleet never holds more \
                 than stated); set it to 0 to start every process empty, or to at least {least}"
            )));
        }
        Ok(Self::from_tenths(initial, cap))
    }
}

fn share_error(problem: String) -> ConfigError {
    ConfigError::new("fleet_share", problem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_of_the_fleet_never_add_up_to_more_than_stated() {
        for processes in 1..=40u32 {
            for fleet_max in processes..=processes + 30 {
                for fleet_initial in [0, fleet_max / 2, fleet_max] {
                    let Ok(share) = RetryBudget::fleet_share(fleet_initial, fleet_max, processes)
                    else {
                        continue;
                    };
                    let fleet = u64::from(processes);
                    assert!(share.initial_tenths() * fleet <= u64::from(fleet_initial) * 10);
                    assert!(share.cap_tenths() * fleet <= u64::from(fleet_max) * 10);
                    assert!(
                        (share.cap_tenths() + 1) * fleet > u64::from(fleet_max) * 10,
                        "rounded down by less than a tenth"
                    );
                }
            }
        }
    }

    #[test]
    fn a_fleet_of_one_gets_the_whole_budget() {
        let share = RetryBudget::fleet_share(2, 4, 1).unwrap();
        let whole = RetryBudget::new(2, 4);
        assert_eq!(share.initial_tenths(), whole.initial_tenths());
        assert_eq!(share.cap_tenths(), whole.cap_tenths());
    }

    #[test]
    fn a_share_starts_with_the_balance_it_was_given() {
        let share = RetryBudget::fleet_share(3, 8, 2).unwrap();
        assert_eq!(share.balance_tenths(), 15);
    }

    #[test]
    fn an_initial_share_above_the_cap_share_is_lowered_to_it() {
        let share = RetryBudget::fleet_share(9, 4, 2).unwrap();
        assert_eq!(share.initial_tenths(), 20);
    }

    #[test]
    fn zero_processes_are_refused() {
        let error = RetryBudget::fleet_share(2, 4, 0).unwrap_err();
        assert_eq!(error.setting(), "fleet_share");
        assert!(error.to_string().contains("processes is 0"), "{error}");
    }

    #[test]
    fn a_cap_share_below_one_retry_is_refused_with_the_least_that_works() {
        let error = RetryBudget::fleet_share(0, 9, 10).unwrap_err();
        assert!(error.to_string().contains("at least 10"), "{error}");
        assert!(RetryBudget::fleet_share(0, 10, 10).is_ok());
    }

    #[test]
    fn a_stated_initial_balance_that_rounds_to_nothing_is_refused() {
        let error = RetryBudget::fleet_share(1, 40, 11).unwrap_err();
        assert!(error.to_string().contains("at least 2"), "{error}");
        assert!(RetryBudget::fleet_share(2, 40, 11).is_ok());
        let empty = RetryBudget::fleet_share(0, 40, 11).unwrap();
        assert_eq!(
            empty.initial_tenths(),
            0,
            "0 says every process starts empty"
        );
    }

    #[test]
    fn extreme_numbers_do_not_overflow() {
        let share = RetryBudget::fleet_share(u32::MAX, u32::MAX, 1).unwrap();
        assert_eq!(share.cap_tenths(), u64::from(u32::MAX) * 10);
        let share = RetryBudget::fleet_share(u32::MAX, u32::MAX, u32::MAX).unwrap();
        assert_eq!(share.cap_tenths(), 10);
    }
}
