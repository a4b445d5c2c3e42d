//! The wait queues: one bounded FIFO per rank, behind one `parking_lot` mutex.
//!
//! Only the slow path comes here: a request that found no free slot, a
//! completion that found somebody waiting, a waiter that gives up. Each
//! waiting request owns a [`WaitCell`] where the engine leaves its verdict
//! (a slot, or a rejection) and the waker to call.
//!
//! Lock order: the queue lock, then a cell's lock. Entries in the queue are
//! always in the [`CellState::Waiting`] state: whoever changes a cell's state
//! away from waiting removes its entry in the same critical section.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::Waker;

use parking_lot::Mutex;

use crate::{Cohort, Level, Rank, RejectReason, Rejection};

/// Where a waiting request's verdict is left.
#[derive(Debug)]
pub(crate) struct WaitCell {
    pub(crate) state: Mutex<CellState>,
}

/// The verdict of a waiting request.
#[derive(Debug)]
pub(crate) enum CellState {
    /// Still in the queue; the waker to call when that changes.
    Waiting(Option<Waker>),
    /// A slot was handed over at `at`, after waiting `sojourn` (nanoseconds).
    Granted { at: u64, sojourn: u64 },
    /// Refused while waiting.
    Rejected(Rejection),
    /// The verdict was taken (or the waiter gave up).
    Finished,
}

impl WaitCell {
    fn new() -> Arc<WaitCell> {
        Arc::new(WaitCell {
            state: Mutex::new(CellState::Waiting(None)),
        })
    }

    /// Leaves a verdict for a waiting request and wakes it.
    pub(crate) fn settle(&self, verdict: CellState) {
        let previous = std::mem::replace(&mut *self.state.lock(), verdict);
        if let CellState::Waiting(Some(waker)) = previous {
            waker.wake();
        }
    }
}

/// One waiting request.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) id: u64,
    pub(crate) cell: Arc<WaitCell>,
    pub(crate) cohort: Cohort,
    pub(crate) enqueued_at: u64,
    pub(crate) expires_at: u64,
    /// Why the request is refused if it is still waiting at `expires_at`.
    pub(crate) expiry: RejectReason,
}

/// The queues of every rank.
#[derive(Debug)]
pub(crate) struct WaitQueues {
    ranks: [VecDeque<Entry>; Rank::COUNT],
    next_id: u64,
    /// The level whose shed ranks were last removed from the queues.
    purged_level: Level,
}

/// A request taken off a queue, with its rank.
pub(crate) struct Taken {
    pub(crate) rank: Rank,
    pub(crate) entry: Entry,
}

impl WaitQueues {
    pub(crate) fn new() -> WaitQueues {
        WaitQueues {
            ranks: Default::default(),
            next_id: 0,
            purged_level: Level::NONE,
        }
    }

    pub(crate) fn len(&self, rank: Rank) -> usize {
        self.ranks[rank.index()].len()
    }

    /// Adds a waiting request at the back of its rank's queue.
    pub(crate) fn push(
        &mut self,
        rank: Rank,
        cohort: Cohort,
        enqueued_at: u64,
        expires_at: u64,
        expiry: RejectReason,
    ) -> (u64, Arc<WaitCell>) {
        let id = self.next_id;
        self.next_id += 1;
        let cell = WaitCell::new();
        self.ranks[rank.index()].push_back(Entry {
            id,
            cell: Arc::clone(&cell),
            cohort,
            enqueued_at,
            expires_at,
            expiry,
        });
        (id, cell)
    }

    /// Takes the first request of the most important non-empty rank.
    pub(crate) fn pop_most_important(&mut self) -> Option<Taken> {
        Rank::ALL.iter().rev().find_map(|rank| {
            self.ranks[rank.index()]
                .pop_front()
                .map(|entry| Taken { rank: *rank, entry })
        })
    }

    /// Takes a particular request out of its rank's queue.
    pub(crate) fn remove(&mut self, rank: Rank, id: u64) -> Option<Entry> {
        let queue = &mut self.ranks[rank.index()];
        let index = queue.iter().position(|entry| entry.id == id)?;
        queue.remove(index)
    }

    /// Takes out every waiting request that `level` sheds, once per change of level.
    pub(crate) fn drain_shed(&mut self, level: Level, mut shed: impl FnMut(Rank, Entry)) {
        if level <= self.purged_level {
            self.purged_level = level;
            return;
        }
        self.purged_level = level;
        for rank in Rank::ALL {
            let queue = &mut self.ranks[rank.index()];
            let mut kept = 0;
            while kept < queue.len() {
                if !level.sheds(rank, queue[kept].cohort) {
                    kept += 1;
                } else if let Some(entry) = queue.remove(kept) {
                    shed(rank, entry);
                }
            }
        }
    }
}
