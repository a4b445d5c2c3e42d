//! The wait queues: one bounded FIFO per rank, behind one mutex.
//!
//! In an overload, slots go to the most important rank first
//! ([`WaitQueues::pop_most_important`]); below one, to the request that has
//! waited longest ([`WaitQueues::pop_oldest`]).
//!
//! Only the slow path comes here: a request that found no free slot, a
//! completion that found somebody waiting, a waiter that gives up. Each
//! waiting request owns a [`WaitCell`] where the engine leaves its verdict
//! (a slot, or a rejection) and the waker to call.
//!
//! Every operation is O(1) but the purge of shed ranks, which visits the
//! queues once per rise of the level: entries live in one slab, linked into
//! a doubly linked list per rank, and a waiter knows its entry's slot, so a
//! waiter that gives up leaves its queue without a search, however deep the
//! queue (a storm of cancellations stays linear in the number of them).
//!
//! Lock order: the queue lock, then a cell's lock. Entries in the queue are
//! always in the [`CellState::Waiting`] state: whoever changes a cell's state
//! away from waiting removes its entry in the same critical section. Settling
//! a cell hands back its waker instead of calling it: wakers run after the
//! queue lock is released (see [`WakeList`](crate::wake_list::WakeList)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;

use crate::sync::{Mutex, MutexGuard};
use crate::{Cohort, Level, Rank, RejectReason, Rejection};

/// The queue lock, held. Operations that must run under it take it as a
/// parameter (as tokio's semaphore does with `add_permits_locked`), so
/// holding the lock is checked by the compiler, not left to a comment.
pub(crate) type QueueGuard<'a> = MutexGuard<'a, WaitQueues>;

/// Where a waiting request's verdict is left.
#[derive(Debug)]
pub(crate) struct WaitCell {
    pub(crate) state: Mutex<CellState>,
    /// When the request leaves the queue unserved (nanoseconds since the
    /// engine's epoch). Set when it queues; brought forward only as it
    /// leaves the queue, under the queue lock, by a refusal for the
    /// patience the engine learnt meanwhile (see `Engine::refuse_if_out_of_time`).
    /// Read by its waiter under the cell's lock; `Relaxed`, since the cell
    /// lock orders it.
    expires_at: AtomicU64,
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
    fn new(expires_at: u64) -> Arc<WaitCell> {
        Arc::new(WaitCell {
            state: Mutex::new(CellState::Waiting(None)),
            expires_at: AtomicU64::new(expires_at),
        })
    }

    /// When the request leaves the queue unserved, in nanoseconds since the
    /// engine's epoch.
    pub(crate) fn expires_at(&self) -> u64 {
        self.expires_at.load(Ordering::Relaxed)
    }

    /// Leaves a refusal for time that came sooner than the expiry set when
    /// the request queued: its expiry becomes `at`, so that its waiter (and
    /// whoever asks it) sees when its time ran out. Returns the waker.
    #[must_use = "the waiter must be woken after the queue lock is released"]
    pub(crate) fn settle_expired_at(&self, at: u64, rejection: Rejection) -> Option<Waker> {
        let mut state = self.state.lock();
        self.expires_at.fetch_min(at, Ordering::Relaxed);
        match std::mem::replace(&mut *state, CellState::Rejected(rejection)) {
            CellState::Waiting(waker) => waker,
            _ => None,
        }
    }

    /// Leaves a verdict for a waiting request; returns the waker to call
    /// once the queue lock is released.
    #[must_use = "the waiter must be woken after the queue lock is released"]
    pub(crate) fn settle(&self, verdict: CellState) -> Option<Waker> {
        match std::mem::replace(&mut *self.state.lock(), verdict) {
            CellState::Waiting(waker) => waker,
            _ => None,
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

/// Where a waiting request's entry is: its slab slot and its id (a slot is
/// reused once its entry leaves, so the id tells a stale key from a live one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueueKey {
    slot: usize,
    id: u64,
}

/// The end of a list, or no slot.
const NIL: usize = usize::MAX;

/// A slab slot: a queued entry linked into its rank's list, or a free slot
/// linked into the free list (through `next`).
#[derive(Debug)]
struct Node {
    entry: Option<Entry>,
    rank: Rank,
    prev: usize,
    next: usize,
}

/// One rank's FIFO: the ends of its list and its length.
#[derive(Clone, Copy, Debug)]
struct List {
    head: usize,
    tail: usize,
    len: usize,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

/// The queues of every rank.
#[derive(Debug)]
pub(crate) struct WaitQueues {
    nodes: Vec<Node>,
    free: usize,
    ranks: [List; Rank::COUNT],
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
            nodes: Vec::new(),
            free: NIL,
            ranks: [List::EMPTY; Rank::COUNT],
            next_id: 0,
            purged_level: Level::NONE,
        }
    }

    pub(crate) fn len(&self, rank: Rank) -> usize {
        self.ranks[rank.index()].len
    }

    /// Adds a waiting request at the back of its rank's queue.
    pub(crate) fn push(
        &mut self,
        rank: Rank,
        cohort: Cohort,
        enqueued_at: u64,
        expires_at: u64,
        expiry: RejectReason,
    ) -> (QueueKey, Arc<WaitCell>) {
        let id = self.next_id;
        self.next_id += 1;
        let cell = WaitCell::new(expires_at);
        let entry = Entry {
            id,
            cell: Arc::clone(&cell),
            cohort,
            enqueued_at,
            expires_at,
            expiry,
        };
        let list = self.ranks[rank.index()];
        let node = Node {
            entry: Some(entry),
            rank,
            prev: list.tail,
            next: NIL,
        };
        let slot = if self.free == NIL {
            self.nodes.push(node);
            self.nodes.len() - 1
        } else {
            let slot = self.free;
            self.free = self.nodes[slot].next;
            self.nodes[slot] = node;
            slot
        };
        match list.tail {
            NIL => self.ranks[rank.index()].head = slot,
            tail => self.nodes[tail].next = slot,
        }
        let list = &mut self.ranks[rank.index()];
        list.tail = slot;
        list.len += 1;
        (QueueKey { slot, id }, cell)
    }

    /// Takes the first request of the most important non-empty rank.
    pub(crate) fn pop_most_important(&mut self) -> Option<Taken> {
        let rank = *Rank::ALL.iter().rev().find(|rank| self.len(**rank) > 0)?;
        Some(self.pop_front(rank))
    }

    /// Takes the request that has waited longest, whatever its rank: the
    /// first queued (ids are given in the order requests join).
    pub(crate) fn pop_oldest(&mut self) -> Option<Taken> {
        let rank = Rank::ALL
            .into_iter()
            .filter(|rank| self.len(*rank) > 0)
            .min_by_key(|rank| self.front(*rank).id)?;
        Some(self.pop_front(rank))
    }

    /// The first request of a non-empty rank's queue.
    fn front(&self, rank: Rank) -> &Entry {
        let head = self.ranks[rank.index()].head;
        self.nodes[head]
            .entry
            .as_ref()
            .expect("only live slots are linked into a rank's list")
    }

    /// Takes the first request of a non-empty rank's queue.
    fn pop_front(&mut self, rank: Rank) -> Taken {
        let entry = self.unlink(self.ranks[rank.index()].head);
        Taken { rank, entry }
    }

    /// Takes a particular request out of its rank's queue, if it is still there.
    pub(crate) fn remove(&mut self, rank: Rank, key: QueueKey) -> Option<Entry> {
        let node = self.nodes.get(key.slot)?;
        let live = node.rank == rank && node.entry.as_ref().is_some_and(|e| e.id == key.id);
        live.then(|| self.unlink(key.slot))
    }

    /// Takes out every waiting request that `level` sheds, once per rise of
    /// the level; lower levels shed nothing new.
    pub(crate) fn drain_shed(&mut self, level: Level, mut shed: impl FnMut(Rank, Entry)) {
        if level <= self.purged_level {
            self.purged_level = level;
            return;
        }
        self.purged_level = level;
        for rank in Rank::ALL {
            let mut slot = self.ranks[rank.index()].head;
            while slot != NIL {
                let next = self.nodes[slot].next;
                let cohort = self.nodes[slot].entry.as_ref().map(|entry| entry.cohort);
                if cohort.is_some_and(|cohort| level.sheds(rank, cohort)) {
                    shed(rank, self.unlink(slot));
                }
                slot = next;
            }
        }
    }

    /// Unlinks a live slot from its rank's list and frees it.
    fn unlink(&mut self, slot: usize) -> Entry {
        let Node {
            entry,
            rank,
            prev,
            next,
        } = std::mem::replace(
            &mut self.nodes[slot],
            Node {
                entry: None,
                rank: Rank::ALL[0],
                prev: NIL,
                next: self.free,
            },
        );
        self.free = slot;
        let list = &mut self.ranks[rank.index()];
        match prev {
            NIL => list.head = next,
            prev => self.nodes[prev].next = next,
        }
        let list = &mut self.ranks[rank.index()];
        match next {
            NIL => list.tail = prev,
            next => self.nodes[next].prev = prev,
        }
        list.len -= 1;
        entry.expect("only live slots are linked into a rank's list")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Class;

    const BATCH: Rank = Rank::original(Class::Batch);
    const CRITICAL: Rank = Rank::original(Class::Critical);

    fn push(queues: &mut WaitQueues, rank: Rank, cohort: u8) -> QueueKey {
        let cohort = Cohort::new(cohort).unwrap();
        queues
            .push(rank, cohort, 0, u64::MAX, RejectReason::QueueTimeout)
            .0
    }

    fn ids(queues: &mut WaitQueues) -> Vec<u64> {
        std::iter::from_fn(|| queues.pop_most_important().map(|taken| taken.entry.id)).collect()
    }

    #[test]
    fn pops_the_most_important_rank_first_and_each_rank_in_order() {
        let mut queues = WaitQueues::new();
        push(&mut queues, BATCH, 0);
        push(&mut queues, CRITICAL, 0);
        push(&mut queues, BATCH, 0);
        push(&mut queues, CRITICAL, 0);
        assert_eq!(ids(&mut queues), [1, 3, 0, 2]);
    }

    #[test]
    fn pops_the_longest_waiting_first_across_ranks_skipping_removed_ones() {
        let mut queues = WaitQueues::new();
        push(&mut queues, BATCH, 0);
        let gone = push(&mut queues, CRITICAL, 0);
        push(&mut queues, CRITICAL, 0);
        push(&mut queues, BATCH, 0);
        assert!(queues.remove(CRITICAL, gone).is_some());
        let order: Vec<_> = std::iter::from_fn(|| {
            queues
                .pop_oldest()
                .map(|taken| (taken.entry.id, taken.rank))
        })
        .collect();
        assert_eq!(order, [(0, BATCH), (2, CRITICAL), (3, BATCH)]);
    }

    #[test]
    fn removes_from_the_front_the_middle_and_the_back() {
        let mut queues = WaitQueues::new();
        let keys: Vec<_> = (0..5).map(|_| push(&mut queues, BATCH, 0)).collect();
        for index in [2, 0, 4] {
            assert_eq!(
                queues.remove(BATCH, keys[index]).map(|e| e.id),
                Some(index as u64)
            );
        }
        assert_eq!(queues.len(BATCH), 2);
        assert_eq!(ids(&mut queues), [1, 3]);
    }

    #[test]
    fn a_stale_key_removes_nothing_once_its_slot_is_reused() {
        let mut queues = WaitQueues::new();
        let gone = push(&mut queues, BATCH, 0);
        assert!(queues.remove(BATCH, gone).is_some());
        let reused = push(&mut queues, BATCH, 0);
        assert_eq!(reused.slot, gone.slot, "the freed slot is reused");
        assert!(queues.remove(BATCH, gone).is_none());
        assert!(queues.remove(CRITICAL, reused).is_none(), "wrong rank");
        assert_eq!(queues.len(BATCH), 1);
    }

    #[test]
    fn the_slab_never_grows_beyond_the_most_entries_queued_at_once() {
        let mut queues = WaitQueues::new();
        for _ in 0..1_000 {
            let keys: Vec<_> = (0..3).map(|_| push(&mut queues, BATCH, 0)).collect();
            for key in keys.into_iter().rev() {
                queues.remove(BATCH, key).unwrap();
            }
        }
        assert_eq!(queues.nodes.len(), 3);
    }

    #[test]
    fn draining_a_level_removes_only_the_shed_positions() {
        let mut queues = WaitQueues::new();
        push(&mut queues, BATCH, 10);
        push(&mut queues, BATCH, 100);
        push(&mut queues, CRITICAL, 0);
        let level = Level::new(Level::position(BATCH, Cohort::new(50).unwrap()));
        let mut shed = Vec::new();
        queues.drain_shed(level, |rank, entry| shed.push((rank, entry.id)));
        assert_eq!(shed, [(BATCH, 0)]);
        assert_eq!(ids(&mut queues), [2, 1]);
    }
}
