//! The rehearsed queue of a shadow engine: who would be waiting now.
//!
//! In [shadow mode](crate::Mode::Shadow) a request that would have waited
//! for a slot is served at once, but an entry stands in for it here for as
//! long as it would have waited. The enforcing door it stands for is
//! replayed as the door measures itself: with every slot busy, a slot frees
//! every slot time (the service time at the limit over the limit), and at
//! most `limit` slots stand idle. A request that finds a freed slot takes it
//! at once; otherwise it waits, and each slot that frees goes to a waiting
//! entry in the door's serve order (the most important first in an
//! overload, else the longest waiting), as the real queue's slots would.
//! An entry whose expiry (its deadline or its maximum wait) comes before it
//! gets a slot is refused then; entries of the ranks the admission level
//! sheds are refused as the level rises. Later arrivals are judged behind
//! the entries, and their waits feed the controller, so the shadow engine
//! sees the queue the enforcing one would have had.
//!
//! The replay runs whenever a shadow request arrives or an interval closes,
//! handing out every slot that freed since, in time order.

use std::collections::VecDeque;

use crate::{Cohort, Level, Rank, RejectReason};

/// A request that would be waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rehearsed {
    pub(crate) rank: Rank,
    pub(crate) cohort: Cohort,
    /// When it would have joined the queue (nanoseconds since the epoch).
    pub(crate) enqueued_at: u64,
    /// When it would have been refused unserved, and why.
    pub(crate) expires_at: u64,
    pub(crate) expiry: RejectReason,
}

/// How an entry left the rehearsed queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Departure {
    pub(crate) entry: Rehearsed,
    /// When it left.
    pub(crate) at: u64,
    /// `None`: it would have had a slot then; else refused for this reason.
    pub(crate) refused: Option<RejectReason>,
}

impl Departure {
    /// How long it would have waited.
    pub(crate) fn sojourn(&self) -> u64 {
        self.at.saturating_sub(self.entry.enqueued_at)
    }
}

/// The requests that would be waiting, per rank in arrival order.
#[derive(Debug, Default)]
pub(crate) struct RehearsedQueue {
    ranks: [VecDeque<Rehearsed>; Rank::COUNT],
    /// The level the entries were last purged at.
    purged_level: Level,
    /// When the replayed door last handed out a slot.
    tail: u64,
}

impl RehearsedQueue {
    /// Entries of `rank`.
    pub(crate) fn len(&self, rank: Rank) -> u32 {
        self.ranks[rank.index()].len() as u32
    }

    /// When the next slot nobody has taken frees (at or before `now`: one
    /// stands idle), a slot freeing every `slot_time` and at most `limit`
    /// standing idle.
    pub(crate) fn next_slot(&self, now: u64, slot_time: u64, limit: u32) -> u64 {
        let idle_since = now.saturating_sub(slot_time.saturating_mul(u64::from(limit)));
        self.tail.max(idle_since).saturating_add(slot_time)
    }

    /// A request takes the slot that freed at `at` (found idle on arrival).
    pub(crate) fn take_slot(&mut self, at: u64) {
        self.tail = self.tail.max(at);
    }

    /// A request joins its rank's queue.
    pub(crate) fn push(&mut self, entry: Rehearsed) {
        self.ranks[entry.rank.index()].push_back(entry);
    }

    /// Replays the door up to `now`: every slot that freed (one each
    /// `slot_time` after the last handed out) goes to the next waiting entry
    /// (by importance, else by arrival), and entries whose expiry came first
    /// are refused. Each departure is passed to `depart`, in time order per
    /// slot. With no slot time known, every entry is served now.
    pub(crate) fn replay(
        &mut self,
        now: u64,
        slot_time: u64,
        by_importance: bool,
        mut depart: impl FnMut(Departure),
    ) {
        loop {
            let slot_frees = if slot_time == 0 {
                now
            } else {
                self.tail.saturating_add(slot_time)
            };
            if slot_frees > now {
                break;
            }
            self.expire(slot_frees, &mut depart);
            let Some(entry) = self.pop_next(by_importance) else {
                break;
            };
            self.tail = slot_frees;
            depart(Departure {
                entry,
                at: slot_frees,
                refused: None,
            });
        }
        self.expire(now, &mut depart);
    }

    /// Refuses every entry whose expiry is at or before `at`.
    fn expire(&mut self, at: u64, depart: &mut impl FnMut(Departure)) {
        for queue in &mut self.ranks {
            queue.retain(|entry| {
                let expired = entry.expires_at <= at;
                if expired {
                    depart(Departure {
                        entry: *entry,
                        at: entry.expires_at,
                        refused: Some(entry.expiry),
                    });
                }
                !expired
            });
        }
    }

    /// The entry the next slot goes to.
    fn pop_next(&mut self, by_importance: bool) -> Option<Rehearsed> {
        let rank = if by_importance {
            // The most important rank is the last.
            self.ranks.iter().rposition(|queue| !queue.is_empty())?
        } else {
            (0..Rank::COUNT)
                .filter_map(|rank| Some((self.ranks[rank].front()?.enqueued_at, rank)))
                .min()?
                .1
        };
        self.ranks[rank].pop_front()
    }

    /// Takes out every entry `level` sheds, once per rise of the level.
    pub(crate) fn drain_shed(&mut self, level: Level, mut shed: impl FnMut(Rehearsed)) {
        let risen = level > self.purged_level;
        self.purged_level = level;
        if !risen {
            return;
        }
        for queue in &mut self.ranks {
            queue.retain(|entry| {
                let keep = !level.sheds(entry.rank, entry.cohort);
                if !keep {
                    shed(*entry);
                }
                keep
            });
        }
    }

    /// Forgets every entry (enforcing mode resumed: their requests were served).
    pub(crate) fn clear(&mut self) {
        self.ranks.iter_mut().for_each(VecDeque::clear);
        self.purged_level = Level::NONE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Class;

    const BATCH: Rank = Rank::original(Class::Batch);
    const CRITICAL: Rank = Rank::original(Class::Critical);

    fn entry(rank: Rank, enqueued_at: u64, expires_at: u64) -> Rehearsed {
        Rehearsed {
            rank,
            cohort: Cohort::MAX,
            enqueued_at,
            expires_at,
            expiry: RejectReason::QueueTimeout,
        }
    }

    fn replay(queue: &mut RehearsedQueue, now: u64, by_importance: bool) -> Vec<Departure> {
        let mut departures = Vec::new();
        queue.replay(now, 10, by_importance, |departure| {
            departures.push(departure)
        });
        departures
    }

    #[test]
    fn slots_free_one_slot_time_apart_and_at_most_the_limit_stand_idle() {
        let mut queue = RehearsedQueue::default();
        assert_eq!(
            queue.next_slot(100, 10, 4),
            70,
            "idle for long: one is free"
        );
        for at in [70, 80, 90, 100] {
            queue.take_slot(at);
        }
        assert_eq!(
            queue.next_slot(100, 10, 4),
            110,
            "four taken: wait for the next"
        );
        assert_eq!(queue.next_slot(500, 10, 4), 470, "drained long ago");
    }

    #[test]
    fn each_freed_slot_goes_to_the_next_entry_in_arrival_order() {
        let mut queue = RehearsedQueue::default();
        queue.take_slot(100);
        queue.push(entry(BATCH, 101, 1_000));
        queue.push(entry(CRITICAL, 102, 1_000));
        assert!(replay(&mut queue, 109, false).is_empty());
        let departures = replay(&mut queue, 125, false);
        let served: Vec<(Rank, u64)> = departures.iter().map(|d| (d.entry.rank, d.at)).collect();
        assert_eq!(served, [(BATCH, 110), (CRITICAL, 120)]);
        assert_eq!(departures[0].sojourn(), 9);
        assert_eq!(queue.next_slot(125, 10, 4), 130);
    }

    #[test]
    fn in_an_overload_the_most_important_entry_takes_the_slot() {
        let mut queue = RehearsedQueue::default();
        queue.take_slot(100);
        queue.push(entry(BATCH, 101, 1_000));
        queue.push(entry(CRITICAL, 102, 1_000));
        let departures = replay(&mut queue, 110, true);
        assert_eq!(departures.len(), 1);
        assert_eq!(departures[0].entry.rank, CRITICAL);
        assert_eq!(queue.len(BATCH), 1);
    }

    #[test]
    fn an_entry_whose_expiry_comes_before_its_slot_is_refused_at_its_expiry() {
        let mut queue = RehearsedQueue::default();
        queue.take_slot(100);
        queue.push(entry(CRITICAL, 101, 1_000));
        queue.push(entry(BATCH, 101, 115));
        let departures = replay(&mut queue, 200, true);
        let refused: Vec<_> = departures.iter().filter(|d| d.refused.is_some()).collect();
        assert_eq!(refused.len(), 1);
        assert_eq!((refused[0].entry.rank, refused[0].at), (BATCH, 115));
        assert_eq!(queue.len(BATCH) + queue.len(CRITICAL), 0);
    }

    #[test]
    fn with_no_slot_time_known_every_entry_is_served_now() {
        let mut queue = RehearsedQueue::default();
        queue.push(entry(BATCH, 1, 1_000));
        let mut departures = Vec::new();
        queue.replay(5, 0, true, |departure| departures.push(departure));
        assert_eq!(departures.len(), 1);
        assert_eq!(departures[0].at, 5);
    }

    #[test]
    fn a_rising_level_takes_out_the_entries_it_sheds_once() {
        let mut queue = RehearsedQueue::default();
        queue.push(entry(BATCH, 0, 30));
        queue.push(entry(CRITICAL, 0, 30));
        let level = Level::new(Level::position(BATCH, Cohort::MAX) + 1);
        let mut shed = Vec::new();
        queue.drain_shed(level, |e| shed.push(e.rank));
        assert_eq!(shed, [BATCH]);
        assert_eq!((queue.len(BATCH), queue.len(CRITICAL)), (0, 1));
        queue.push(entry(BATCH, 1, 31));
        queue.drain_shed(level, |e| shed.push(e.rank));
        assert_eq!(shed, [BATCH], "the level did not rise: no second purge");
    }

    #[test]
    fn clearing_forgets_every_entry() {
        let mut queue = RehearsedQueue::default();
        queue.push(entry(BATCH, 0, 30));
        queue.clear();
        assert_eq!(queue.len(BATCH), 0);
    }
}
