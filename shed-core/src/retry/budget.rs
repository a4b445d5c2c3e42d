//! A retry budget shared by every operation of a client.
//!
//! ```
//! use shed_core::retry::RetryBudget;
//!
//! let budget = RetryBudget::default(); // 2 retries to start, at most 4 banked
//! assert!(budget.try_withdraw());
//! assert!(budget.try_withdraw());
//! assert!(!budget.try_withdraw()); // spent: retries now wait for originals
//!
//! for _ in 0..10 {
//!     budget.deposit(); // ten admitted originals earn one retry
//! }
//! assert!(budget.try_withdraw());
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

/// Tenths of a retry earned by one admitted original.
pub(crate) const EARN_TENTHS: u64 = 1;

/// Tenths of a retry spent by one retry.
pub(crate) const RETRY_COST_TENTHS: u64 = 10;

/// A token bucket of retries, counted in integer tenths, shared by every
/// operation of a client: a [`Retrier`](super::Retrier) holds one in an
/// [`Arc`](std::sync::Arc), which
/// [`RetrierBuilder::budget`](super::RetrierBuilder::budget) shares with
/// other retriers.
///
/// Every admitted original [deposits](Self::deposit) one tenth; every retry
/// [withdraws](Self::try_withdraw) ten. The balance starts at
/// `initial_retries` retries and never exceeds `max_retries` retries: credit
/// earned above the cap is discarded.
///
/// # The bound
///
/// With `O` originals deposited, the number of retries `R` granted by one
/// budget that started with `b` tenths is at most
///
/// ```text
/// R <= floor((b + O) / 10)     (= initial_retries + floor(O / 10) for b = 10 * initial_retries)
/// ```
///
/// because the balance only grows by deposits, never goes below zero, and
/// each retry removes ten tenths. Credit discarded at the cap only lowers `R`.
/// Against a complete outage, the extra load retries add is therefore a tenth
/// of the originals, plus a constant. The constant is per budget: a fleet of
/// processes, each with its own, and every restart adds one; see
/// [the bound across a fleet](super#the-bound-across-a-fleet) and
/// [`fleet_share`](Self::fleet_share).
///
/// # Memory ordering
///
/// The balance is one `AtomicU64`, changed only by read-modify-write
/// operations (`fetch_update`). All read-modify-writes of one atomic form a
/// single total order (its modification order) whatever their ordering
/// argument, so two withdrawals can never both spend the same credit and the
/// balance can never go below zero. The budget publishes no other memory, so
/// `Relaxed` is enough everywhere; the balance read by
/// [`balance_tenths`](Self::balance_tenths) is a snapshot that may be stale
/// by the time the caller looks at it.
///
/// ```
/// use std::sync::Arc;
/// use shed_core::retry::RetryBudget;
///
/// let budget = Arc::new(RetryBudget::new(2, 4));
/// let shared = Arc::clone(&budget);
/// std::thread::spawn(move || shared.deposit()).join().unwrap();
/// assert_eq!(budget.balance_tenths(), 21);
/// ```
#[derive(Debug)]
pub struct RetryBudget {
    balance: AtomicU64,
    initial: u64,
    cap: u64,
}

impl RetryBudget {
    /// A budget holding `initial_retries` retries, never more than
    /// `max_retries`. An initial balance above the cap is lowered to the cap.
    ///
    /// ```
    /// use shed_core::retry::RetryBudget;
    ///
    /// let budget = RetryBudget::new(1, 3);
    /// assert_eq!(budget.balance_tenths(), 10);
    /// for _ in 0..100 {
    ///     budget.deposit();
    /// }
    /// assert_eq!(budget.balance_tenths(), 30, "three retries at most");
    /// ```
    #[must_use]
    pub fn new(initial_retries: u32, max_retries: u32) -> Self {
        Self::from_tenths(
            u64::from(initial_retries) * RETRY_COST_TENTHS,
            u64::from(max_retries) * RETRY_COST_TENTHS,
        )
    }

    /// A budget starting with `initial` tenths, never more than `cap`; an
    /// initial balance above the cap is lowered to the cap.
    pub(super) fn from_tenths(initial: u64, cap: u64) -> Self {
        let initial = initial.min(cap);
        Self {
            balance: AtomicU64::new(initial),
            initial,
            cap,
        }
    }

    /// Credits one admitted original with a tenth of a retry, up to the cap.
    ///
    /// Call it once per original that was actually sent (as
    /// [`Retrier::begin`](super::Retrier::begin) does); never for retries,
    /// and never for work refused before it was sent.
    ///
    /// ```
    /// use shed_core::retry::RetryBudget;
    ///
    /// let budget = RetryBudget::new(0, 1);
    /// budget.deposit();
    /// assert_eq!(budget.balance_tenths(), 1);
    /// ```
    pub fn deposit(&self) {
        self.credit(EARN_TENTHS);
    }

    /// Spends ten tenths for one retry if the balance holds them;
    /// returns whether it did. Never overdraws, whatever the contention.
    ///
    /// ```
    /// use shed_core::retry::RetryBudget;
    ///
    /// let budget = RetryBudget::new(1, 4);
    /// assert!(budget.try_withdraw());
    /// assert!(!budget.try_withdraw());
    /// assert_eq!(budget.balance_tenths(), 0);
    /// ```
    #[must_use = "a retry may only be sent when the withdrawal succeeded"]
    pub fn try_withdraw(&self) -> bool {
        self.balance
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |balance| {
                balance.checked_sub(RETRY_COST_TENTHS)
            })
            .is_ok()
    }

    /// Gives back the ten tenths of a retry that was granted and then never
    /// sent, up to the cap.
    pub(super) fn refund(&self) {
        self.credit(RETRY_COST_TENTHS);
    }

    /// Takes back the tenth an original earned when it turned out never to
    /// be sent, if the balance still holds it (a tenth already spent stays
    /// spent: the bound counts it as earned).
    pub(super) fn take_back_earning(&self) {
        let _ = self
            .balance
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |balance| {
                balance.checked_sub(EARN_TENTHS)
            });
    }

    fn credit(&self, tenths: u64) {
        let cap = self.cap;
        // The closure never returns `None`, so the update cannot fail.
        let _ = self
            .balance
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |balance| {
                Some(balance.saturating_add(tenths).min(cap))
            });
    }

    /// The current balance in tenths of a retry (a snapshot).
    ///
    /// ```
    /// use shed_core::retry::RetryBudget;
    ///
    /// assert_eq!(RetryBudget::default().balance_tenths(), 20);
    /// ```
    #[must_use]
    pub fn balance_tenths(&self) -> u64 {
        self.balance.load(Ordering::Relaxed)
    }

    /// The balance the budget started with, in tenths.
    #[must_use]
    pub fn initial_tenths(&self) -> u64 {
        self.initial
    }

    /// The most the balance can hold, in tenths.
    #[must_use]
    pub fn cap_tenths(&self) -> u64 {
        self.cap
    }
}

impl Default for RetryBudget {
    /// Two retries to start with, at most four banked.
    fn default() -> Self {
        Self::new(2, 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_retry_costs_ten_originals() {
        let budget = RetryBudget::new(0, 4);
        for _ in 0..9 {
            budget.deposit();
        }
        assert!(!budget.try_withdraw());
        budget.deposit();
        assert!(budget.try_withdraw());
        assert_eq!(budget.balance_tenths(), 0);
    }

    #[test]
    fn credit_above_the_cap_is_discarded() {
        let budget = RetryBudget::new(4, 4);
        for _ in 0..100 {
            budget.deposit();
        }
        assert_eq!(budget.balance_tenths(), 40);
    }

    #[test]
    fn initial_balance_above_the_cap_is_lowered_to_the_cap() {
        let budget = RetryBudget::new(9, 2);
        assert_eq!(budget.balance_tenths(), 20);
    }

    #[test]
    fn extreme_limits_do_not_overflow() {
        let budget = RetryBudget::new(u32::MAX, u32::MAX);
        budget.deposit();
        assert!(budget.try_withdraw());
    }

    #[test]
    fn retries_granted_never_exceed_initial_plus_a_tenth_of_originals() {
        for initial in 0..4u32 {
            for originals in 0..250u64 {
                // A cap high enough that nothing is discarded: the bound is tight.
                let budget = RetryBudget::new(initial, 1_000);
                let mut retries = 0u64;
                for _ in 0..originals {
                    budget.deposit();
                    while budget.try_withdraw() {
                        retries += 1;
                    }
                }
                while budget.try_withdraw() {
                    retries += 1;
                }
                assert_eq!(retries, u64::from(initial) + originals / 10);
            }
        }
    }

    #[test]
    fn many_threads_drawing_on_one_budget_never_overdraw_it() {
        const THREADS: u64 = 8;
        const ROUNDS: u64 = 5_000;
        let budget = Arc::new(RetryBudget::new(2, 1_000_000));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let budget = Arc::clone(&budget);
                std::thread::spawn(move || {
                    let mut granted = 0u64;
                    for _ in 0..ROUNDS {
                        budget.deposit();
                        for _ in 0..3 {
                            if budget.try_withdraw() {
                                granted += 1;
                            }
                        }
                    }
                    granted
                })
            })
            .collect();
        let mut granted: u64 = handles
            .into_iter()
            .map(|handle| handle.join().unwrap_or(0))
            .sum();
        assert!(granted <= 2 + THREADS * ROUNDS / 10);
        let originals = THREADS * ROUNDS;
        let earned = budget.initial_tenths() + originals * EARN_TENTHS;
        assert_eq!(
            granted * RETRY_COST_TENTHS + budget.balance_tenths(),
            earned,
            "every tenth is accounted for exactly once"
        );
        while budget.try_withdraw() {
            granted += 1;
        }
        assert_eq!(granted, 2 + originals / 10, "and the bound is reached");
    }
}
