//! The goals of a scenario, each judged PASS or MISS from the run's own
//! records and naming what it was judged against (a reference policy
//! measured in the same run, or the calibration).

use crate::report::Table;

/// The outcome of one goal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Met.
    Pass,
    /// Not met.
    Miss,
    /// Could not be judged (a figure or a reference is missing), and why.
    NotJudged(String),
}

impl Verdict {
    /// `Pass` or `Miss`.
    pub fn of(ok: bool) -> Verdict {
        if ok {
            Verdict::Pass
        } else {
            Verdict::Miss
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Miss => "MISS",
            Verdict::NotJudged(_) => "not judged",
        }
    }
}

/// One goal, judged.
#[derive(Clone, Debug)]
pub struct Goal {
    /// The step of the scenario (load multiple, phase).
    pub step: String,
    /// The policy the goal is for.
    pub policy: String,
    /// What is required, in words.
    pub goal: String,
    /// The figure measured.
    pub measured: String,
    /// The reference and the threshold it gives.
    pub against: String,
    /// The outcome.
    pub verdict: Verdict,
}

/// The goals of a scenario, in the order judged.
#[derive(Clone, Debug, Default)]
pub struct Goals(pub Vec<Goal>);

/// A threshold taken from a reference: its label and value, or why it is
/// missing.
pub type Reference = Result<(String, f64), String>;

impl Goals {
    /// Judges `measured >= threshold` (or `<=` when `at_most`), where the
    /// threshold comes from `reference`; `show` formats a figure.
    #[allow(clippy::too_many_arguments)]
    pub fn compare(
        &mut self,
        step: &str,
        policy: &str,
        goal: &str,
        measured: Option<f64>,
        reference: Reference,
        at_most: bool,
        show: impl Fn(f64) -> String,
    ) {
        let measured_label = measured.filter(|m| m.is_finite()).map_or("-".into(), &show);
        let (against, verdict) = match (measured.filter(|m| m.is_finite()), reference) {
            (_, Err(why)) => (why.clone(), Verdict::NotJudged(why)),
            (None, Ok((label, threshold))) => (
                format!("{label} = {}", show(threshold)),
                Verdict::NotJudged("nothing measured".into()),
            ),
            (Some(m), Ok((label, threshold))) => (
                format!("{label} = {}", show(threshold)),
                Verdict::of(if at_most {
                    m <= threshold
                } else {
                    m >= threshold
                }),
            ),
        };
        self.0.push(Goal {
            step: step.to_owned(),
            policy: policy.to_owned(),
            goal: goal.to_owned(),
            measured: measured_label,
            against,
            verdict,
        });
    }

    /// Judges a recovery time (`None`: never recovered, shown as "never")
    /// against `within_secs`, described by `against`.
    pub fn recovery(
        &mut self,
        step: &str,
        goal: &str,
        recovery: Option<std::time::Duration>,
        against: String,
        within_secs: f64,
    ) {
        let measured = recovery.map_or(f64::MAX, |d| d.as_secs_f64());
        let show = |x: f64| format!("{x:.1} s");
        self.compare(
            step,
            "shed",
            goal,
            Some(measured),
            Ok((against, within_secs)),
            true,
            show,
        );
        if recovery.is_none() {
            if let Some(g) = self.0.last_mut() {
                g.measured = "never".into();
            }
        }
    }

    /// The goals as a table.
    pub fn table(&self, title: impl Into<String>) -> Table {
        let mut table = Table::new(
            title,
            &[
                "step",
                "policy",
                "goal",
                "measured",
                "judged against",
                "verdict",
            ],
        );
        for g in &self.0 {
            table.row(vec![
                g.step.clone(),
                g.policy.clone(),
                g.goal.clone(),
                g.measured.clone(),
                g.against.clone(),
                g.verdict.label().into(),
            ]);
        }
        if self.0.is_empty() {
            table.note("no goal judged: the policy the goals are for was not run");
        }
        table
    }

    /// How many passed, and how many were judged.
    pub fn passed(&self) -> (usize, usize) {
        let judged = self
            .0
            .iter()
            .filter(|g| !matches!(g.verdict, Verdict::NotJudged(_)))
            .count();
        let passed = self.0.iter().filter(|g| g.verdict == Verdict::Pass).count();
        (passed, judged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pct(x: f64) -> String {
        format!("{x:.1}%")
    }

    #[test]
    fn goals_compare_against_their_reference() {
        let mut goals = Goals::default();
        let r = |v| Ok(("shed@true - 2 pts".to_owned(), v));
        goals.compare("2x", "shed", "goodput", Some(95.0), r(93.0), false, pct);
        goals.compare("2x", "shed", "goodput", Some(90.0), r(93.0), false, pct);
        goals.compare("2x", "shed", "wasted", Some(1.0), r(2.0), true, pct);
        goals.compare("2x", "shed", "p99", None, r(2.0), true, pct);
        goals.compare(
            "2x",
            "shed",
            "x",
            Some(1.0),
            Err("tower@true not run".into()),
            false,
            pct,
        );
        let verdicts: Vec<_> = goals.0.iter().map(|g| g.verdict.label()).collect();
        assert_eq!(
            verdicts,
            ["PASS", "MISS", "PASS", "not judged", "not judged"]
        );
        assert_eq!(goals.0[0].against, "shed@true - 2 pts = 93.0%");
        assert_eq!(goals.passed(), (2, 3));
    }
}
