//! What a client knows of one replica (one authority): the ranks its
//! answers say it sheds, and how many of the requests sent it accepted.

use std::time::{Duration, Instant};

use shed_core::wire::LoadReport;
use shed_core::Rank;

use super::window::Window;
use super::LocalReason;

/// How long a load report counts: its shares fade linearly to nothing over
/// this time, so a replica the client stopped sending to (every request
/// refused locally) gets traffic back within it, and answers that bring no
/// report hand the replica over to the adaptive throttle.
pub(super) const REPORT_LIFETIME: Duration = Duration::from_secs(1);

/// The weight of each new report in the shares: answers through a proxy
/// come from several replicas, so the shares are an average of the recent
/// reports (about the last eight), not the latest alone.
const REPORT_WEIGHT: f64 = 0.25;

/// The state of one replica, behind its lock.
#[derive(Debug)]
pub(super) struct Replica {
    /// The share of each rank the recent reports say is shed, as of
    /// `reported_at`.
    shares: [f64; Rank::COUNT],
    reported_at: Option<Instant>,
    /// The requests this client sent or throttled, and those accepted.
    window: Window,
    /// The last pushback the replica asked of each rank, and when.
    pushback: [Option<(Duration, Instant)>; Rank::COUNT],
}

/// How an answer went, for the throttle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Answer {
    /// Served, or refused for a reason that is not overload.
    Accepted,
    /// Refused for overload, with the pushback it asked for (zero if none).
    Overloaded(Duration),
    /// The transport failed: counted as not accepted.
    Failed,
}

impl Replica {
    pub(super) fn new(window: Duration, now: Instant) -> Replica {
        Replica {
            shares: [0.0; Rank::COUNT],
            reported_at: None,
            window: Window::new(window, now),
            pushback: [None; Rank::COUNT],
        }
    }

    /// Whether a request of `rank` is refused here rather than sent: by the
    /// replica's reported level while a report counts, else by the adaptive
    /// throttle. `draw` is uniform in `[0, 1)`. A request the throttle
    /// refuses counts as a request of its window, as the SRE book counts
    /// them; one sent is counted when it is ([`sent`](Self::sent)).
    pub(super) fn judge(
        &mut self,
        rank: Rank,
        now: Instant,
        draw: f64,
        k: f64,
    ) -> Option<LocalReason> {
        if let Some(shares) = self.current_shares(now) {
            return (draw < shares[rank.index()]).then_some(LocalReason::Shed);
        }
        if draw < self.window.refusal_chance(now, k) {
            self.window.count_request(now);
            return Some(LocalReason::Throttled);
        }
        None
    }

    /// Counts a request sent to the replica.
    pub(super) fn sent(&mut self, now: Instant) {
        self.window.count_request(now);
    }

    /// Counts an answer to a request of `rank` sent to the replica.
    pub(super) fn answered(&mut self, rank: Rank, answer: Answer, now: Instant) {
        match answer {
            Answer::Accepted => self.window.count_accept(now),
            Answer::Overloaded(pushback) if !pushback.is_zero() => {
                self.pushback[rank.index()] = Some((pushback, now));
            }
            Answer::Overloaded(_) | Answer::Failed => {}
        }
    }

    /// Folds a report into the shares.
    pub(super) fn reported(&mut self, report: &LoadReport, now: Instant) {
        let shed = Rank::ALL.map(|rank| report.level.share_shed(rank));
        self.shares = match self.current_shares(now) {
            Some(current) => {
                std::array::from_fn(|i| current[i] + REPORT_WEIGHT * (shed[i] - current[i]))
            }
            None => shed,
        };
        self.reported_at = Some(now);
    }

    /// How long a request of `rank` refused here should wait: the last
    /// pushback the replica asked of that rank within the window, and at
    /// least a second (the server's own floor).
    pub(super) fn retry_after(&self, rank: Rank, now: Instant, window: Duration) -> Duration {
        let recent = self.pushback[rank.index()]
            .filter(|(_, at)| now.saturating_duration_since(*at) < window)
            .map_or(Duration::ZERO, |(pushback, _)| pushback);
        recent.max(Duration::from_secs(1))
    }

    /// The shares as faded to `now`, while the last report counts.
    fn current_shares(&self, now: Instant) -> Option<[f64; Rank::COUNT]> {
        let age = now.saturating_duration_since(self.reported_at?);
        let left = 1.0 - age.as_secs_f64() / REPORT_LIFETIME.as_secs_f64();
        (left > 0.0).then(|| self.shares.map(|share| share * left))
    }

    /// Whether forgetting this replica at `now` changes nothing: no report
    /// counts, the throttle would refuse nothing whatever its `K` (at least
    /// 1), and no pushback is recent.
    pub(super) fn is_stale(&self, now: Instant, window: Duration) -> bool {
        self.current_shares(now).is_none()
            && self.window.refusal_chance(now, 1.0) == 0.0
            && self
                .pushback
                .iter()
                .flatten()
                .all(|(_, at)| now.saturating_duration_since(*at) >= window)
    }
}

#[cfg(test)]
mod tests {
    use shed_core::{Class, Level};

    use super::*;

    const K: f64 = 2.0;

    fn shedding(ranks: u16) -> LoadReport {
        LoadReport {
            level: Level::new(ranks * 128),
            in_flight: 8,
            limit: 8,
            queued: 0,
        }
    }

    fn batch() -> Rank {
        Rank::original(Class::Batch)
    }

    #[test]
    fn a_first_report_is_taken_whole() {
        let now = Instant::now();
        let mut replica = Replica::new(Duration::from_secs(1), now);
        replica.reported(&shedding(6), now);
        assert_eq!(
            replica.judge(batch(), now, 0.999, K),
            Some(LocalReason::Shed)
        );
        assert_eq!(
            replica.judge(Rank::original(Class::Interactive), now, 0.0, K),
            None
        );
    }

    #[test]
    fn reports_from_replicas_that_disagree_average_out() {
        let now = Instant::now();
        let mut replica = Replica::new(Duration::from_secs(1), now);
        for _ in 0..50 {
            replica.reported(&shedding(6), now);
            replica.reported(&shedding(0), now);
        }
        let share = replica.current_shares(now).unwrap()[batch().index()];
        assert!((0.3..0.7).contains(&share), "{share}");
    }

    #[test]
    fn a_report_fades_to_nothing_within_its_lifetime() {
        let now = Instant::now();
        let mut replica = Replica::new(Duration::from_secs(1), now);
        replica.reported(&shedding(6), now);
        let half = now + REPORT_LIFETIME / 2;
        assert_eq!(replica.current_shares(half).unwrap()[batch().index()], 0.5);
        assert!(replica.current_shares(now + REPORT_LIFETIME).is_none());
    }

    #[test]
    fn a_refusals_pushback_is_the_floor_of_a_local_refusals_wait() {
        let now = Instant::now();
        let window = Duration::from_secs(1);
        let mut replica = Replica::new(window, now);
        assert_eq!(
            replica.retry_after(batch(), now, window),
            Duration::from_secs(1)
        );
        replica.answered(batch(), Answer::Overloaded(Duration::from_secs(4)), now);
        assert_eq!(
            replica.retry_after(batch(), now, window),
            Duration::from_secs(4)
        );
        assert_eq!(
            replica.retry_after(batch(), now + window, window),
            Duration::from_secs(1)
        );
    }
}
