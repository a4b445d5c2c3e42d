//! What the algorithm reads: one interval's samples, a throughput that can
//! be pooled, and streaks of rounds that said the same thing.

/// What the engine measured over one controller interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct IntervalSamples {
    /// Length of the interval, in nanoseconds.
    pub(crate) elapsed: u64,
    /// Whether the controller found the interval overloaded (see
    /// [`Closed`](crate::controller::Closed)); a round of several intervals
    /// is when any of them was.
    pub(crate) overloaded: bool,
    /// Whether the admission level shed some rank in the interval (in a
    /// round: in any of its intervals): arrivals were refused at the door
    /// whatever the slots, so a round whose queue ran dry measured what
    /// the level let in, not what the load asks.
    pub(crate) shedding: bool,
    /// Whether arrivals outran completions by a quarter or more on the
    /// controller's two-second averages (see
    /// [`Closed`](crate::controller::Closed)); a round of several intervals
    /// is when any of them did.
    pub(crate) outrun: bool,
    /// Arrivals that found no free slot (the limit was binding).
    pub(crate) blocked: u64,
    /// Permits given back, whenever they were admitted.
    pub(crate) released: u64,
    /// Of those, the censored ones (cut at a deadline or abandoned): given
    /// back, but not finished by the service.
    pub(crate) released_censored: u64,
    /// Of those, the ones whose slot went straight to a waiting request:
    /// while nearly all do, the service is kept full and its throughput is
    /// its capacity at this limit, not the arrival rate.
    pub(crate) handed_off: u64,
    /// Permits given back that were admitted in the current epoch.
    pub(crate) samples: u64,
    /// Their total hold time, nanoseconds.
    pub(crate) hold: u64,
    /// Of those, the ones that completed (not cut at a deadline nor
    /// abandoned by their caller).
    pub(crate) completed: u64,
    /// The completed ones' total hold time, nanoseconds.
    pub(crate) completed_hold: u64,
    /// Of those, the censored ones: cut at a deadline or abandoned.
    pub(crate) censored: u64,
}

impl IntervalSamples {
    /// Whether no permit of the current epoch completed: every one was
    /// given up on (or none came back), so the round measured no service
    /// time and no throughput to hold a probe against.
    pub(super) fn none_completed(&self) -> bool {
        self.completed == 0
    }

    /// Whether the current epoch's own permits make up at least `share` of
    /// the permits given back: those admitted under an older limit have
    /// drained, and the hold times measured describe the limit in force.
    pub(crate) fn settled(&self, share: f64) -> bool {
        self.released > 0 && self.samples as f64 >= share * self.released as f64
    }

    pub(super) fn add(&mut self, other: &IntervalSamples) {
        self.elapsed = self.elapsed.saturating_add(other.elapsed);
        self.overloaded |= other.overloaded;
        self.shedding |= other.shedding;
        self.outrun |= other.outrun;
        self.blocked = self.blocked.saturating_add(other.blocked);
        self.released = self.released.saturating_add(other.released);
        self.released_censored = (self.released_censored).saturating_add(other.released_censored);
        self.handed_off = self.handed_off.saturating_add(other.handed_off);
        self.samples = self.samples.saturating_add(other.samples);
        self.hold = self.hold.saturating_add(other.hold);
        self.completed = self.completed.saturating_add(other.completed);
        self.completed_hold = self.completed_hold.saturating_add(other.completed_hold);
        self.censored = self.censored.saturating_add(other.censored);
    }
}

/// A throughput (permits the service finished: released, less the
/// censored ones) and how many permits it was measured over, so that
/// measurements of the same thing can be pooled.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Throughput {
    finished: u64,
    elapsed: u64,
}

impl Throughput {
    pub(super) fn of(round: &IntervalSamples) -> Throughput {
        Throughput {
            finished: round.released.saturating_sub(round.released_censored),
            elapsed: round.elapsed,
        }
    }

    pub(super) fn pooled(self, other: Throughput) -> Throughput {
        Throughput {
            finished: self.finished.saturating_add(other.finished),
            elapsed: self.elapsed.saturating_add(other.elapsed),
        }
    }

    /// Permits per second.
    pub(super) fn rate(self) -> f64 {
        self.finished as f64 / (self.elapsed.max(1) as f64 / 1e9)
    }
}

/// Rounds pooled, with the limit in force in each: what a limit that moved
/// a slot up and down between them delivered on average.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Pooled {
    pub(super) rounds: IntervalSamples,
    /// The limit in force times the length of each round, summed.
    slot_nanos: f64,
}

impl Pooled {
    pub(super) fn add(&mut self, round: &IntervalSamples, limit: u32) {
        self.rounds.add(round);
        self.slot_nanos += f64::from(limit) * round.elapsed as f64;
    }

    /// The limit in force, averaged over the pooled rounds' time.
    pub(super) fn mean_limit(&self) -> f64 {
        self.slot_nanos / self.rounds.elapsed.max(1) as f64
    }
}

/// What a round's hold times said, when they said something.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Signal {
    /// Well above the baseline: work queues inside, or the service slowed.
    Inflated,
    /// Well below it: the service got faster.
    Faster,
}

/// Rounds in a row that gave the same signal, and their throughput.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Streak {
    signal: Option<Signal>,
    rounds: u32,
    pub(super) throughput: Throughput,
}

impl Streak {
    /// Adds a round that gave `signal`; returns the rounds in the streak.
    pub(super) fn extend(&mut self, signal: Signal, round: &IntervalSamples) -> u32 {
        if self.signal != Some(signal) {
            *self = Streak {
                signal: Some(signal),
                ..Streak::default()
            };
        }
        self.rounds += 1;
        self.throughput = self.throughput.pooled(Throughput::of(round));
        self.rounds
    }
}

/// `total / count` as a float; zero when nothing was counted.
pub(super) fn mean(total: u64, count: u64) -> f64 {
    if count == 0 {
        0.0
    } else {
        total as f64 / count as f64
    }
}
