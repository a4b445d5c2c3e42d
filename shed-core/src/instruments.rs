//! The engine's measurements, reported through the `metrics` facade when
//! the `metrics` feature is on, and nowhere without it. The names, labels
//! and units are documented in one table, in the crate docs (`# Metrics`).
//!
//! Every instrument is registered once, when the engine is built, so a
//! request only increments a handle.

use crate::{Level, Rank, Stats};

/// What a gauge update reports (read only with the feature).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) struct Gauges {
    pub(crate) limit: u32,
    pub(crate) in_flight: u32,
    pub(crate) queued: [u32; Rank::COUNT],
    pub(crate) level: Level,
}

impl Gauges {
    /// The gauges of a stats snapshot.
    pub(crate) fn of(stats: &Stats) -> Gauges {
        Gauges {
            limit: stats.limit,
            in_flight: stats.in_flight,
            queued: stats.queued,
            level: stats.level,
        }
    }
}

#[cfg(feature = "metrics")]
pub(crate) use reported::Instruments;
#[cfg(not(feature = "metrics"))]
pub(crate) use silent::Instruments;

#[cfg(feature = "metrics")]
mod reported {
    use std::fmt;

    use metrics::{
        counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
        Gauge, Histogram, Unit,
    };

    use super::Gauges;
    use crate::stats::{Outcome, OUTCOMES};
    use crate::{Class, Rank};

    /// Handles registered with the recorder installed when the engine was
    /// built.
    pub(crate) struct Instruments {
        requests: [[Counter; OUTCOMES]; Class::COUNT],
        would: [[Counter; OUTCOMES]; Class::COUNT],
        bypassed: Counter,
        limit: Gauge,
        in_flight: Gauge,
        queue_length: [Gauge; Rank::COUNT],
        level: Gauge,
        queue_duration: [Histogram; Class::COUNT],
        service_duration: [Histogram; Class::COUNT],
    }

    impl Instruments {
        pub(crate) fn new() -> Instruments {
            describe();
            let by_class = |make: fn(Class) -> Histogram| Class::ALL.map(make);
            Instruments {
                requests: Class::ALL.map(|class| {
                    Outcome::ALL.map(|outcome| {
                        counter!("shed.requests", "class" => class.as_str(), "outcome" => outcome.as_str())
                    })
                }),
                // Only what shadow mode does not act on: it admits and
                // completes for real, in `shed.requests`.
                would: Class::ALL.map(|class| {
                    Outcome::ALL.map(|outcome| {
                        if Outcome::WOULD.contains(&outcome) {
                            counter!("shed.shadow.requests", "class" => class.as_str(), "outcome" => outcome.as_str())
                        } else {
                            Counter::noop()
                        }
                    })
                }),
                bypassed: counter!("shed.requests.bypassed"),
                limit: gauge!("shed.limit"),
                in_flight: gauge!("shed.in_flight"),
                queue_length: Rank::ALL.map(|rank| {
                    let attempt = if rank.is_retry() { "retry" } else { "original" };
                    gauge!("shed.queue.length", "class" => rank.class().as_str(), "attempt" => attempt)
                }),
                level: gauge!("shed.admission.level"),
                queue_duration: by_class(|class| {
                    histogram!("shed.queue.duration", "class" => class.as_str())
                }),
                service_duration: by_class(|class| {
                    histogram!("shed.service.duration", "class" => class.as_str())
                }),
            }
        }

        #[inline]
        pub(crate) fn count(&self, class: Class, outcome: Outcome) {
            self.requests[class.index()][outcome as usize].increment(1);
        }

        #[inline]
        pub(crate) fn count_would(&self, class: Class, outcome: Outcome) {
            self.would[class.index()][outcome as usize].increment(1);
        }

        #[inline]
        pub(crate) fn count_bypassed(&self) {
            self.bypassed.increment(1);
        }

        /// A request's wait for its slot and the time it held it, in
        /// nanoseconds.
        #[inline]
        pub(crate) fn record_times(&self, class: Class, queued: u64, held: u64) {
            self.queue_duration[class.index()].record(queued as f64 * 1e-9);
            self.service_duration[class.index()].record(held as f64 * 1e-9);
        }

        /// Sets the gauges to what `gauges` reads now.
        pub(crate) fn set_gauges(&self, gauges: impl FnOnce() -> Gauges) {
            let gauges = gauges();
            self.limit.set(f64::from(gauges.limit));
            self.in_flight.set(f64::from(gauges.in_flight));
            for (gauge, queued) in self.queue_length.iter().zip(gauges.queued) {
                gauge.set(f64::from(queued));
            }
            self.level.set(f64::from(gauges.level.get()));
        }
    }

    impl Default for Instruments {
        fn default() -> Instruments {
            Instruments::new()
        }
    }

    impl fmt::Debug for Instruments {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("Instruments").finish_non_exhaustive()
        }
    }

    /// Names the units and meanings, for exporters that show them.
    fn describe() {
        describe_counter!(
            "shed.requests",
            Unit::Count,
            "Requests by class and outcome, at each step they take"
        );
        describe_counter!(
            "shed.shadow.requests",
            Unit::Count,
            "In shadow mode, what enforcing mode would have done with requests served"
        );
        describe_counter!(
            "shed.requests.bypassed",
            Unit::Count,
            "Requests let through unjudged"
        );
        describe_gauge!("shed.limit", Unit::Count, "The concurrency limit");
        describe_gauge!("shed.in_flight", Unit::Count, "Requests holding a slot");
        describe_gauge!(
            "shed.queue.length",
            Unit::Count,
            "Requests waiting for a slot, per rank"
        );
        describe_gauge!(
            "shed.admission.level",
            Unit::Count,
            "The admission level; 0 sheds nothing"
        );
        describe_histogram!(
            "shed.queue.duration",
            Unit::Seconds,
            "How long admitted requests waited for a slot"
        );
        describe_histogram!(
            "shed.service.duration",
            Unit::Seconds,
            "How long requests held their slot"
        );
    }
}

#[cfg(not(feature = "metrics"))]
mod silent {
    use super::Gauges;
    use crate::stats::Outcome;
    use crate::Class;

    /// Nothing to report to: every call compiles to nothing.
    #[derive(Debug, Default)]
    pub(crate) struct Instruments;

    impl Instruments {
        #[inline(always)]
        pub(crate) fn count(&self, _class: Class, _outcome: Outcome) {}

        #[inline(always)]
        pub(crate) fn count_would(&self, _class: Class, _outcome: Outcome) {}

        #[inline(always)]
        pub(crate) fn count_bypassed(&self) {}

        #[inline(always)]
        pub(crate) fn record_times(&self, _class: Class, _queued: u64, _held: u64) {}

        #[inline(always)]
        pub(crate) fn set_gauges(&self, _gauges: impl FnOnce() -> Gauges) {}
    }
}
