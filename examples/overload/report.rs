//! Plain-text tables for stdout and CSV files for the time series.

use std::{fmt::Write as _, fs, io, path::Path};

use crate::{class::Class, metrics, trial::Trial};

/// A table with a title, a header row and right-aligned cells.
pub struct Table {
    title: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    notes: Vec<String>,
}

impl Table {
    /// An empty table with these column names.
    pub fn new(title: impl Into<String>, header: &[&str]) -> Self {
        Table {
            title: title.into(),
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Appends a row; it must have one cell per column.
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.header.len());
        self.rows.push(cells);
    }

    /// Appends a line printed under the table.
    pub fn note(&mut self, line: impl Into<String>) {
        self.notes.push(line.into());
    }

    /// Writes the rows (without title and notes) as CSV.
    pub fn write_csv(&self, path: &Path) -> io::Result<()> {
        let mut out = String::new();
        for line in std::iter::once(&self.header).chain(&self.rows) {
            let cells: Vec<String> = line.iter().map(|c| csv_cell(c)).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        fs::write(path, out)
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|i| {
                std::iter::once(&self.header)
                    .chain(&self.rows)
                    .map(|r| r[i].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        writeln!(f, "{}", self.title)?;
        let line = |f: &mut std::fmt::Formatter<'_>, cells: &[String]| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:>w$}"))
                .collect();
            writeln!(f, "  {}", padded.join("  "))
        };
        line(f, &self.header)?;
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        line(f, &rule)?;
        for row in &self.rows {
            line(f, row)?;
        }
        for note in &self.notes {
            writeln!(f, "  {note}")?;
        }
        Ok(())
    }
}

fn csv_cell(cell: &str) -> String {
    if cell.contains([',', '"', '\n']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.to_owned()
    }
}

/// A number with `digits` decimals, or `-` when it is not finite.
pub fn num(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{x:.digits$}")
    } else {
        "-".into()
    }
}

/// A ratio as a percentage with `digits` decimals, or `-`.
pub fn pct(x: f64, digits: usize) -> String {
    if x.is_finite() {
        format!("{:.digits$}%", x * 100.0)
    } else {
        "-".into()
    }
}

/// Writes the client-side time series of `trials`, per class and for all
/// classes, and the downstream samples, as two CSV files.
pub fn write_time_series(
    dir: &Path,
    scenario: &str,
    trials: &[Trial],
    bucket: std::time::Duration,
) -> io::Result<Vec<std::path::PathBuf>> {
    let mut clients = String::from("scenario,policy,label,t_s,class,offered_per_s,attempts_per_s,goodput_per_s,shed_per_s,timeouts_per_s\n");
    let mut servers = String::from(
        "scenario,policy,label,t_s,queued,busy,slowdown_pct,work_ms,wasted_work_ms,shed_limit,shed_in_flight,shed_queue_len,shed_phase,shed_knee,shed_baseline_ms,shed_probes,shed_back_offs,shed_level,shed_drain_per_s,shed_refused,shed_would_refuse\n",
    );
    for trial in trials {
        let horizon = trial.spec.duration() + trial.spec.client.deadline;
        let classes = std::iter::once(None).chain(Class::ALL.map(Some));
        for class in classes {
            let name = class.map_or("all", Class::name);
            for b in metrics::time_series(&trial.records, bucket, horizon, class) {
                let _ = writeln!(
                    clients,
                    "{scenario},{},{},{:.2},{name},{:.1},{:.1},{:.1},{:.1},{:.1}",
                    trial.policy,
                    trial.spec.label,
                    b.t,
                    b.offered,
                    b.attempts,
                    b.goodput,
                    b.shed,
                    b.timeouts
                );
            }
        }
        for (t, s) in &trial.samples {
            let total = s.total();
            let engine = s.engine.map_or(",,,,,,,,,,,".into(), |e| {
                let number = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.2}"));
                format!(
                    "{},{},{},{},{},{},{},{},{},{},{},{}",
                    e.limit,
                    e.in_flight,
                    e.queue_len,
                    e.phase,
                    number(e.knee),
                    number(e.baseline_ms),
                    e.probes,
                    e.back_offs,
                    e.level,
                    number(e.drain_rate),
                    e.refusals.total(),
                    e.would.total()
                )
            });
            let _ = writeln!(
                servers,
                "{scenario},{},{},{t:.2},{},{},{},{},{},{engine}",
                trial.policy,
                trial.spec.label,
                s.queued,
                s.busy,
                s.slowdown_pct,
                total.work_us / 1000,
                total.wasted_us / 1000
            );
        }
    }
    let client_path = dir.join(format!("{scenario}_timeseries.csv"));
    let server_path = dir.join(format!("{scenario}_server.csv"));
    fs::write(&client_path, clients)?;
    fs::write(&server_path, servers)?;
    Ok(vec![client_path, server_path])
}
