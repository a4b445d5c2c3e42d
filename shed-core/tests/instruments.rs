//! The `metrics` feature: what the engine reports through the `metrics`
//! facade, under the names, labels and units of the crate docs' `# Metrics`
//! table.
//!
//! Each test builds its engine inside a recorder of its own (the engine
//! registers its instruments when it is built), on a manual clock, and reads
//! the recorder once: a reading takes the values it returns (counters and
//! gauges read 0 afterwards, histograms empty).
#![cfg(feature = "metrics")]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{admitted, build, ms, queued, ready};
use metrics::Unit;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::{CompositeKey, MetricKind};
use shed_core::{
    Arrival, Class, Cohort, Level, ManualClock, Rank, RejectReason, Shedder, ShedderBuilder,
};

/// One row of the crate docs' `# Metrics` table.
struct Documented {
    name: &'static str,
    kind: MetricKind,
    /// As the table writes it.
    unit: &'static str,
    labels: &'static [&'static str],
    /// The label values it lists, other than the classes.
    values: &'static [&'static str],
}

const TABLE: [Documented; 9] = [
    Documented {
        name: "shed.requests",
        kind: MetricKind::Counter,
        unit: "requests",
        labels: &["class", "outcome"],
        values: &OUTCOMES,
    },
    Documented {
        name: "shed.shadow.requests",
        kind: MetricKind::Counter,
        unit: "requests",
        labels: &["class", "outcome"],
        values: &[
            "queued",
            "shed",
            "shed_by_deadline",
            "queue_full",
            "dropped_from_queue",
            "expired",
            "cut_at_deadline",
        ],
    },
    Documented {
        name: "shed.requests.bypassed",
        kind: MetricKind::Counter,
        unit: "requests",
        labels: &[],
        values: &[],
    },
    Documented {
        name: "shed.limit",
        kind: MetricKind::Gauge,
        unit: "requests",
        labels: &[],
        values: &[],
    },
    Documented {
        name: "shed.in_flight",
        kind: MetricKind::Gauge,
        unit: "requests",
        labels: &[],
        values: &[],
    },
    Documented {
        name: "shed.queue.length",
        kind: MetricKind::Gauge,
        unit: "requests",
        labels: &["class", "attempt"],
        values: &["original", "retry"],
    },
    Documented {
        name: "shed.admission.level",
        kind: MetricKind::Gauge,
        unit: "1",
        labels: &[],
        values: &[],
    },
    Documented {
        name: "shed.queue.duration",
        kind: MetricKind::Histogram,
        unit: "seconds",
        labels: &["class"],
        values: &[],
    },
    Documented {
        name: "shed.service.duration",
        kind: MetricKind::Histogram,
        unit: "seconds",
        labels: &["class"],
        values: &[],
    },
];

/// The `outcome` labels the table lists, in its order.
const OUTCOMES: [&str; 10] = [
    "admitted",
    "queued",
    "shed",
    "shed_by_deadline",
    "queue_full",
    "dropped_from_queue",
    "expired",
    "completed",
    "abandoned",
    "cut_at_deadline",
];

/// The unit a recorder is told for a unit as the table writes it.
fn reported_unit(documented: &str) -> Unit {
    match documented {
        "seconds" => Unit::Seconds,
        "requests" | "1" => Unit::Count,
        other => panic!("no unit {other:?} in the table"),
    }
}

fn kind_name(kind: MetricKind) -> &'static str {
    match kind {
        MetricKind::Counter => "counter",
        MetricKind::Gauge => "gauge",
        MetricKind::Histogram => "histogram",
    }
}

/// An engine on a manual clock, reporting to a recorder of the test's own.
fn recorded(builder: ShedderBuilder) -> (Shedder, ManualClock, Snapshotter) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let (shedder, clock) = metrics::with_local_recorder(&recorder, || build(builder));
    (shedder, clock, snapshotter)
}

/// One series as the recorder holds it.
struct Series {
    kind: MetricKind,
    name: String,
    labels: BTreeMap<String, String>,
    unit: Option<Unit>,
    value: DebugValue,
}

impl Series {
    fn of(key: CompositeKey, unit: Option<Unit>, value: DebugValue) -> Series {
        let (kind, key) = key.into_parts();
        Series {
            kind,
            name: key.name().to_owned(),
            labels: key
                .labels()
                .map(|label| (label.key().to_owned(), label.value().to_owned()))
                .collect(),
            unit,
            value,
        }
    }

    /// Its label keys, sorted.
    fn label_keys(&self) -> Vec<&str> {
        self.labels.keys().map(String::as_str).collect()
    }
}

/// Everything the recorder holds, read once.
struct Reading(Vec<Series>);

impl Reading {
    fn take(snapshotter: &Snapshotter) -> Reading {
        let series = snapshotter.snapshot().into_vec();
        Reading(
            series
                .into_iter()
                .map(|(key, unit, _description, value)| Series::of(key, unit, value))
                .collect(),
        )
    }

    /// The value of the series `name` whose labels are exactly `labels`.
    #[track_caller]
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> &DebugValue {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        let found = self
            .0
            .iter()
            .find(|series| series.name == name && series.labels == labels);
        match found {
            Some(series) => &series.value,
            None => panic!("no {name} {labels:?} among {:?}", self.names()),
        }
    }

    #[track_caller]
    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        match self.value(name, labels) {
            DebugValue::Counter(count) => *count,
            other => panic!("{name} is not a counter: {other:?}"),
        }
    }

    #[track_caller]
    fn gauge(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        match self.value(name, labels) {
            DebugValue::Gauge(value) => value.0,
            other => panic!("{name} is not a gauge: {other:?}"),
        }
    }

    #[track_caller]
    fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
        match self.value(name, labels) {
            DebugValue::Histogram(values) => values.iter().map(|value| value.0).collect(),
            other => panic!("{name} is not a histogram: {other:?}"),
        }
    }

    /// The `shed.requests` series that counted anything, by class and
    /// outcome.
    fn requests_counted(&self) -> BTreeMap<(String, String), u64> {
        self.0
            .iter()
            .filter(|series| series.name == "shed.requests")
            .filter_map(|series| match series.value {
                DebugValue::Counter(0) => None,
                DebugValue::Counter(count) => Some((
                    (
                        series.labels["class"].clone(),
                        series.labels["outcome"].clone(),
                    ),
                    count,
                )),
                ref other => panic!("shed.requests is not a counter: {other:?}"),
            })
            .collect()
    }

    /// The values of one label key across the series named `name`.
    fn label_values(&self, name: &str, key: &str) -> BTreeSet<String> {
        self.0
            .iter()
            .filter(|series| series.name == name)
            .filter_map(|series| series.labels.get(key).cloned())
            .collect()
    }

    fn names(&self) -> BTreeSet<&str> {
        self.0.iter().map(|series| series.name.as_str()).collect()
    }
}

/// `(class, outcome)` counts, as [`Reading::requests_counted`] returns them.
fn counts<const N: usize>(counts: [(&str, &str, u64); N]) -> BTreeMap<(String, String), u64> {
    counts
        .into_iter()
        .map(|(class, outcome, count)| ((class.to_owned(), outcome.to_owned()), count))
        .collect()
}

/// Asserts durations in seconds, to well under a nanosecond.
#[track_caller]
fn assert_seconds(recorded: &[f64], expected: &[f64]) {
    assert_eq!(recorded.len(), expected.len(), "{recorded:?}");
    for (recorded, expected) in recorded.iter().zip(expected) {
        assert!(
            (recorded - expected).abs() < 1e-12,
            "{recorded} s recorded, {expected} s expected"
        );
    }
}

#[test]
fn the_crate_docs_table_lists_every_instrument_with_its_kind_unit_and_labels() {
    let docs = include_str!("../src/lib.rs");
    let rows: Vec<Vec<&str>> = docs
        .lines()
        .filter(|line| line.starts_with("//! | `shed."))
        .map(|line| line.split('|').map(str::trim).collect())
        .collect();
    let names: Vec<&str> = rows.iter().map(|row| row[1]).collect();
    let documented_names = TABLE.map(|row| format!("`{}`", row.name));
    assert_eq!(names, documented_names);
    for (row, documented) in rows.iter().zip(&TABLE) {
        assert_eq!(row[2], kind_name(documented.kind), "{}", documented.name);
        assert_eq!(row[3], documented.unit, "{}", documented.name);
        // The label keys, before any list of their values in parentheses.
        let keys = row[4].split('(').next().unwrap_or_default();
        let keys: Vec<&str> = keys
            .split(',')
            .map(|key| key.trim().trim_matches('`'))
            .filter(|key| !key.is_empty())
            .collect();
        assert_eq!(keys, documented.labels, "{}", documented.name);
        let listed = row[4..].join("|");
        for value in documented.values {
            let value = format!("`{value}`");
            assert!(listed.contains(&value), "{} {value}", documented.name);
        }
    }
    let classes = Class::ALL.map(|class| format!("`{}`", class.as_str()));
    let classes = format!("`class` is one of {}.", classes.join(", "));
    assert!(docs.contains(&classes), "{classes}");
}

#[test]
fn building_the_engine_registers_every_documented_instrument_with_its_unit() {
    let (_shedder, _clock, snapshotter) = recorded(Shedder::builder());
    let reading = Reading::take(&snapshotter);

    let registered: BTreeSet<(&str, &str, Vec<&str>)> = reading
        .0
        .iter()
        .map(|series| {
            (
                kind_name(series.kind),
                series.name.as_str(),
                series.label_keys(),
            )
        })
        .collect();
    let documented: BTreeSet<(&str, &str, Vec<&str>)> = TABLE
        .iter()
        .map(|row| {
            let mut keys = row.labels.to_vec();
            keys.sort_unstable();
            (kind_name(row.kind), row.name, keys)
        })
        .collect();
    assert_eq!(registered, documented);
    for series in &reading.0 {
        let row = TABLE.iter().find(|row| row.name == series.name).unwrap();
        assert_eq!(
            series.unit,
            Some(reported_unit(row.unit)),
            "{}",
            series.name
        );
    }
}

#[test]
fn every_class_outcome_and_attempt_has_its_series_from_the_start() {
    let (_shedder, _clock, snapshotter) = recorded(Shedder::builder());
    let reading = Reading::take(&snapshotter);

    let classes: BTreeSet<String> = Class::ALL.map(|class| class.as_str().to_owned()).into();
    for name in [
        "shed.requests",
        "shed.queue.length",
        "shed.queue.duration",
        "shed.service.duration",
    ] {
        assert_eq!(reading.label_values(name, "class"), classes, "{name}");
    }
    let outcomes: BTreeSet<String> = OUTCOMES.map(str::to_owned).into();
    assert_eq!(reading.label_values("shed.requests", "outcome"), outcomes);
    for class in Class::ALL {
        for outcome in OUTCOMES {
            let labels = [("class", class.as_str()), ("outcome", outcome)];
            assert_eq!(reading.counter("shed.requests", &labels), 0);
        }
    }
    let attempts: BTreeSet<String> = ["original", "retry"].map(str::to_owned).into();
    assert_eq!(
        reading.label_values("shed.queue.length", "attempt"),
        attempts
    );
}

#[test]
fn a_request_served_at_once_counts_as_admitted_then_completed_in_its_class() {
    let (shedder, _clock, snapshotter) = recorded(Shedder::builder().limit(4));
    drop(admitted(shedder.admit(&Arrival::new(Class::Interactive))));

    let reading = Reading::take(&snapshotter);
    assert_eq!(
        reading.requests_counted(),
        counts([
            ("interactive", "admitted", 1),
            ("interactive", "completed", 1),
        ])
    );
}

#[test]
fn a_refused_request_counts_under_the_outcome_of_its_reason_in_its_class() {
    let (shedder, _clock, snapshotter) = recorded(Shedder::builder().limit(1));
    let _busy = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    let refused = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap_err();
    assert_eq!(refused.reason(), RejectReason::QueueFull);

    let reading = Reading::take(&snapshotter);
    assert_eq!(
        reading.requests_counted(),
        counts([("critical", "admitted", 1), ("batch", "queue_full", 1)])
    );
}

#[test]
fn a_request_that_waited_counts_as_queued_then_admitted_then_completed() {
    let (shedder, _clock, snapshotter) = recorded(Shedder::builder().limit(1));
    let busy = admitted(shedder.admit(&Arrival::new(Class::Interactive)));
    let mut waiting = queued(shedder.admit(&Arrival::new(Class::Batch)));
    drop(busy);
    drop(ready(&mut waiting).unwrap());

    let reading = Reading::take(&snapshotter);
    assert_eq!(
        reading.requests_counted(),
        counts([
            ("interactive", "admitted", 1),
            ("interactive", "completed", 1),
            ("batch", "queued", 1),
            ("batch", "admitted", 1),
            ("batch", "completed", 1),
        ])
    );
}

#[test]
fn in_shadow_mode_a_request_is_served_and_its_would_be_refusal_counted_apart() {
    let (shedder, _clock, snapshotter) =
        recorded(Shedder::builder().limit(1).mode(shed_core::Mode::Shadow));
    let _busy = shedder.try_admit(&Arrival::new(Class::Critical)).unwrap();
    let _served = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();

    let reading = Reading::take(&snapshotter);
    assert_eq!(
        reading.requests_counted(),
        counts([("critical", "admitted", 1), ("batch", "admitted", 1)])
    );
    let shadow = [("class", "batch"), ("outcome", "queue_full")];
    assert_eq!(reading.counter("shed.shadow.requests", &shadow), 1);
}

#[test]
fn a_request_let_through_unjudged_counts_as_bypassed_and_in_no_class() {
    let (shedder, _clock, snapshotter) = recorded(Shedder::builder());
    shedder.count_bypassed();
    shedder.count_bypassed();

    let reading = Reading::take(&snapshotter);
    assert_eq!(reading.counter("shed.requests.bypassed", &[]), 2);
    assert_eq!(reading.requests_counted(), counts([]));
}

#[test]
fn reading_the_stats_sets_the_limit_in_flight_and_queue_length_of_every_rank() {
    let (shedder, _clock, snapshotter) = recorded(Shedder::builder().limit(2));
    let _serving = [(); 2].map(|()| admitted(shedder.admit(&Arrival::new(Class::Critical))));
    let _batch = [(); 2].map(|()| queued(shedder.admit(&Arrival::new(Class::Batch))));
    let _retry = queued(shedder.admit(&Arrival::new(Class::Interactive).with_attempt(2)));
    shedder.stats();

    let reading = Reading::take(&snapshotter);
    assert_eq!(reading.gauge("shed.limit", &[]), 2.0);
    assert_eq!(reading.gauge("shed.in_flight", &[]), 2.0);
    for rank in Rank::ALL {
        let attempt = if rank.is_retry() { "retry" } else { "original" };
        let labels = [("class", rank.class().as_str()), ("attempt", attempt)];
        let expected = match (rank.class(), rank.is_retry()) {
            (Class::Batch, false) => 2.0,
            (Class::Interactive, true) => 1.0,
            _ => 0.0,
        };
        let length = reading.gauge("shed.queue.length", &labels);
        assert_eq!(length, expected, "{labels:?}");
    }
}

#[test]
fn an_interval_that_raises_the_level_sets_the_level_gauge() {
    // One slot and a standing queue of batch requests, each waiting 10 ms or
    // more, twice the default target: the interval's close raises the level.
    let (shedder, clock, snapshotter) = recorded(Shedder::builder().limit(1));
    let batch = || Arrival::new(Class::Batch).with_cohort(Cohort::MAX);
    let mut serving = admitted(shedder.admit(&Arrival::new(Class::Critical)));
    let mut waiting: Vec<_> = (0..20).map(|_| queued(shedder.admit(&batch()))).collect();
    for mut next in waiting.drain(..10) {
        clock.advance(ms(10));
        drop(serving);
        serving = ready(&mut next).unwrap();
    }
    let level = shedder.level(); // reads without setting the gauges
    assert!(level > Level::NONE);

    let reading = Reading::take(&snapshotter);
    assert_eq!(
        reading.gauge("shed.admission.level", &[]),
        f64::from(level.get())
    );
}

#[test]
fn a_finished_request_records_its_wait_and_its_service_in_seconds() {
    let (shedder, clock, snapshotter) = recorded(Shedder::builder().limit(1));
    let first = admitted(shedder.admit(&Arrival::new(Class::Interactive)));
    let mut second = queued(shedder.admit(&Arrival::new(Class::Interactive)));
    clock.advance(ms(30));
    drop(first); // waited 0 s, served 0.030 s; the slot goes to the second
    let second = ready(&mut second).unwrap();
    clock.advance(ms(45));
    drop(second); // waited 0.030 s, served 0.045 s

    let reading = Reading::take(&snapshotter);
    let interactive = [("class", "interactive")];
    assert_seconds(
        &reading.histogram("shed.queue.duration", &interactive),
        &[0.0, 0.030],
    );
    assert_seconds(
        &reading.histogram("shed.service.duration", &interactive),
        &[0.030, 0.045],
    );
    for class in [Class::Background, Class::Batch, Class::Critical] {
        let labels = [("class", class.as_str())];
        assert!(reading.histogram("shed.queue.duration", &labels).is_empty());
        assert!(reading
            .histogram("shed.service.duration", &labels)
            .is_empty());
    }
}
