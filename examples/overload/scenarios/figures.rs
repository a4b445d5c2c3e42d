//! Figures every scenario reads from its trials: windows of a trial,
//! goodput by completion, the server's work and the engine's limit over a
//! window (from the samples), and the series of the plots.

use std::time::Duration;

use crate::{
    class::Class,
    metrics::{self, Summary, Window},
    plot::Series,
    policy::Policy,
    report::Table,
    trial::{Trial, TrialSpec},
    work::ClassStats,
};

/// `[from, end of the load)`: a single-phase trial after its warm-up.
pub fn after(spec: &TrialSpec, from: Duration) -> Window {
    Window {
        start: from.min(spec.duration()),
        end: spec.duration(),
    }
}

/// The whole load of a trial.
pub fn whole(spec: &TrialSpec) -> Window {
    after(spec, Duration::ZERO)
}

/// Phase `i` of a trial.
pub fn phase(spec: &TrialSpec, i: usize) -> Window {
    let start = spec.phase_start(i);
    Window {
        start,
        end: start + spec.phases[i].duration,
    }
}

/// "achieved (target)" offered rate over `w`.
pub fn offered(t: &Trial, s: &Summary, w: Window) -> String {
    format!(
        "{:.0} ({:.0})",
        s.offered_rate,
        t.spec.target_rate(w.start, w.end, None)
    )
}

/// Goodput (successes by completion time) over `[from, from + span)`, per second.
pub fn goodput_between(t: &Trial, from: Duration, span: Duration) -> f64 {
    let to = from + span;
    let n = t
        .records
        .iter()
        .filter(|r| r.success && from <= r.end && r.end < to)
        .count();
    n as f64 / span.as_secs_f64().max(f64::EPSILON)
}

/// The first time from `from` on (in `step`s, up to `until` less `window`)
/// from which the goodput over the next `window` is at least `level`, as an
/// offset from `from`.
pub fn recovery(
    t: &Trial,
    from: Duration,
    until: Duration,
    window: Duration,
    level: f64,
) -> Option<Duration> {
    let step = Duration::from_millis(100);
    let last = until.saturating_sub(window);
    (0..)
        .map(|i| from + step * i)
        .take_while(|&at| at <= last)
        .find(|&at| goodput_between(t, at, window) >= level)
        .map(|at| at - from)
}

/// A recovery time as a table cell: seconds, or "never".
pub fn recovery_cell(recovery: Option<Duration>) -> String {
    recovery.map_or("never".into(), |d| format!("{:.1} s", d.as_secs_f64()))
}

/// The start and end, in seconds, of phase `i` of the first trial (every
/// trial of a scenario has the same phases); zeros without trials.
pub fn phase_secs(trials: &[Trial], i: usize) -> (f64, f64) {
    trials.first().map_or((0.0, 0.0), |t| {
        let w = phase(&t.spec, i);
        (w.start.as_secs_f64(), w.end.as_secs_f64())
    })
}

/// The last sample taken at or before `at` seconds, else the first.
fn sample_at(t: &Trial, at: f64) -> Option<&crate::server::ServerSample> {
    t.samples
        .iter()
        .take_while(|(when, _)| *when <= at)
        .last()
        .or(t.samples.first())
        .map(|(_, s)| s)
}

/// The server's work counters over `w` (the difference of the samples at
/// its ends; the final counters when the window reaches the end).
pub fn work_in(t: &Trial, w: Window) -> ClassStats {
    let total = |s: &crate::server::ServerSample| s.total();
    let start = sample_at(t, w.start.as_secs_f64())
        .map(total)
        .unwrap_or_default();
    let end = if w.end >= t.spec.duration() {
        t.server.total()
    } else {
        sample_at(t, w.end.as_secs_f64())
            .map(total)
            .unwrap_or_default()
    };
    ClassStats {
        submitted: end.submitted.saturating_sub(start.submitted),
        completed: end.completed.saturating_sub(start.completed),
        cancelled: end.cancelled.saturating_sub(start.cancelled),
        work_us: end.work_us.saturating_sub(start.work_us),
        wasted_us: end.wasted_us.saturating_sub(start.wasted_us),
        past_deadline_us: end.past_deadline_us.saturating_sub(start.past_deadline_us),
        late: end.late.saturating_sub(start.late),
        abandoned: end.abandoned.saturating_sub(start.abandoned),
    }
}

/// Share of the server's work over `w` that was wasted.
pub fn wasted_in(t: &Trial, w: Window) -> f64 {
    metrics::wasted_ratio(&work_in(t, w))
}

/// The shed engine's mean limit over the samples in `w`, under shed.
pub fn mean_limit(t: &Trial, w: Window) -> Option<f64> {
    let (from, to) = (w.start.as_secs_f64(), w.end.as_secs_f64());
    let limits: Vec<f64> = t
        .samples
        .iter()
        .filter(|(at, _)| from <= *at && *at < to)
        .filter_map(|(_, s)| s.engine.map(|e| f64::from(e.limit)))
        .collect();
    (!limits.is_empty()).then(|| limits.iter().sum::<f64>() / limits.len() as f64)
}

/// The mean limit as a table cell (`-` without an engine).
pub fn limit_cell(t: &Trial, w: Window) -> String {
    mean_limit(t, w).map_or("-".into(), |l| format!("{l:.1}"))
}

/// The trial of `policy` labelled `label`.
pub fn find<'a>(trials: &'a [Trial], policy: Policy, label: &str) -> Option<&'a Trial> {
    trials
        .iter()
        .find(|t| t.policy == policy && t.spec.label == label)
}

/// The policies of `trials`, in first-run order.
pub fn policies(trials: &[Trial]) -> Vec<Policy> {
    let mut seen = Vec::new();
    for t in trials {
        if !seen.contains(&t.policy) {
            seen.push(t.policy);
        }
    }
    seen
}

/// Notes whether the generator kept up with its Poisson schedule, per
/// policy. It kept up when no send was 100 ms late: then no backlog built up
/// and the offered rate over any 1 s window is off by at most a tenth.
pub fn generator_check(table: &mut Table, trials: &[Trial]) {
    for policy in policies(trials) {
        let records = trials
            .iter()
            .filter(|t| t.policy == policy)
            .flat_map(|t| &t.records);
        let (p99, max) = metrics::send_lag_ms(records);
        if p99.is_finite() {
            let state = if max < 100.0 {
                "kept up"
            } else {
                "FELL BEHIND"
            };
            table.note(format!(
                "{policy}: generator {state} (no send 100 ms late): send lag behind the arrival schedule \
                 p99 {p99:.1} ms, max {max:.1} ms"
            ));
        }
    }
}

/// Notes a child server's panic or failed exit, per trial.
pub fn child_check(table: &mut Table, trials: &[Trial]) {
    for t in trials {
        if let Some(exit) = &t.child {
            if exit.panicked() {
                let line = exit
                    .stderr
                    .lines()
                    .find(|l| l.contains("panicked"))
                    .unwrap_or_default();
                table.note(format!(
                    "{} {}: THE SERVER PANICKED: {line}",
                    t.policy, t.spec.label
                ));
            }
        }
    }
}

/// Goodput per policy over time (by completion), plus the offered load,
/// which is the same for every policy (same seeds), for the trials labelled
/// `label` (all when `None`).
pub fn goodput_over_time(
    trials: &[Trial],
    label: Option<&str>,
    bucket: Duration,
    class: Option<Class>,
) -> Vec<Series> {
    let chosen: Vec<&Trial> = trials
        .iter()
        .filter(|t| label.is_none_or(|l| t.spec.label == l))
        .collect();
    let series = |t: &Trial| metrics::time_series(&t.records, bucket, t.spec.duration(), class);
    let mut lines: Vec<Series> = chosen
        .iter()
        .map(|t| Series {
            name: format!("{} goodput", t.policy),
            points: series(t).iter().map(|b| (b.t, b.goodput)).collect(),
        })
        .collect();
    if let Some(t) = chosen.first() {
        lines.push(Series {
            name: "offered".into(),
            points: series(t).iter().map(|b| (b.t, b.offered)).collect(),
        });
    }
    lines
}

/// The shed engine's limit over time, for the trials labelled `label` that
/// ran a shed engine.
pub fn limit_over_time(trials: &[Trial], label: Option<&str>) -> Vec<Series> {
    trials
        .iter()
        .filter(|t| label.is_none_or(|l| t.spec.label == l))
        .filter(|t| t.samples.iter().any(|(_, s)| s.engine.is_some()))
        .map(|t| Series {
            name: format!("{} limit", t.policy),
            points: t
                .samples
                .iter()
                .filter(|(at, _)| *at <= t.spec.duration().as_secs_f64())
                .filter_map(|(at, s)| s.engine.map(|e| (*at, f64::from(e.limit))))
                .collect(),
        })
        .collect()
}

/// Percentage points of capacity, as a cell.
pub fn points(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}%")
    } else {
        "-".into()
    }
}
