//! Waiting for a slot: a cancel-safe future that needs no particular runtime.
//!
//! ```
//! use futures_executor::block_on;
//! use shed_core::{Admission, Arrival, Class, Shedder};
//!
//! let shedder = Shedder::builder().limit(1).build()?;
//! let first = shedder.try_admit(&Arrival::new(Class::Batch)).unwrap();
//! let Admission::Queued(waiter) = shedder.admit(&Arrival::new(Class::Batch)) else {
//!     unreachable!("the only slot is taken");
//! };
//! drop(first); // the slot goes to the waiter
//! let permit = block_on(waiter).unwrap();
//! assert_eq!(shedder.in_flight(), 1);
//! # drop(permit);
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use std::fmt;
use std::future::Future;
use std::mem;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use crate::engine::Engine;
use crate::queue::{CellState, QueueKey, WaitCell};
use crate::{Permit, Rank, Rejection};

/// A request waiting in its rank's queue for a slot.
///
/// Resolves to a [`Permit`] when a slot is handed over, or to a [`Rejection`]
/// when the request is dropped from the queue: shed by the controller, its
/// class's maximum wait exceeded, or its deadline too close.
///
/// The engine has no timer of its own: a waiter notices that its time ran out
/// when it is polled or when a slot frees up. Hosts with a timer (shed-axum
/// uses tokio's) should poll it again at [`expires_at`](Waiter::expires_at).
///
/// # Cancel safety
///
/// Dropping a waiter at any point is safe and loses nothing: if it is still
/// queued it leaves the queue; if a slot was already handed to it but it was
/// not polled since, the slot goes on to the next waiter. A dropped waiter
/// never consumes a slot.
#[must_use = "a waiter leaves the queue as soon as it is dropped"]
pub struct Waiter {
    engine: Arc<Engine>,
    cell: Arc<WaitCell>,
    key: QueueKey,
    rank: Rank,
    deadline: Option<u64>,
    finished: bool,
}

impl Waiter {
    pub(crate) fn new(
        engine: Arc<Engine>,
        cell: Arc<WaitCell>,
        key: QueueKey,
        rank: Rank,
        deadline: Option<u64>,
    ) -> Waiter {
        Waiter {
            engine,
            cell,
            key,
            rank,
            deadline,
            finished: false,
        }
    }

    /// The waiting request's rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// When the request leaves the queue unserved if no slot came: the end of
    /// its class's maximum wait (no longer than callers of its class are seen
    /// to wait, less the work), or its deadline less the minimum useful
    /// window.
    ///
    /// It is set when the request queues, and only ever comes sooner: a
    /// request that reaches the front of the queue after waiting longer than
    /// callers of its class were seen to wait meanwhile (as a spike begins,
    /// before any had hung up) is refused then, since served it would likely
    /// be abandoned half-way, and its expiry reads as that moment.
    pub fn expires_at(&self) -> Instant {
        self.engine.instant(self.cell.expires_at())
    }

    fn take_verdict(&mut self) -> Result<Permit, Rejection> {
        let verdict = mem::replace(&mut *self.cell.state.lock(), CellState::Finished);
        self.finished = true;
        match verdict {
            CellState::Granted { at, sojourn } => Ok(Permit::new(
                Arc::clone(&self.engine),
                self.rank,
                at,
                sojourn,
                self.deadline,
            )),
            CellState::Rejected(rejection) => Err(rejection),
            CellState::Waiting(_) | CellState::Finished => {
                unreachable!("a waiter takes its verdict once, after one was left")
            }
        }
    }
}

impl Future for Waiter {
    type Output = Result<Permit, Rejection>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(!this.finished, "Waiter polled after it completed");
        let mut state = this.cell.state.lock();
        if let CellState::Waiting(waker) = &mut *state {
            let now = this.engine.now();
            if now < this.cell.expires_at() {
                match waker {
                    Some(waker) if waker.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                return Poll::Pending;
            }
            drop(state);
            if let Some(rejection) = this.engine.expire(this.rank, this.key, now) {
                this.finished = true;
                return Poll::Ready(Err(rejection));
            }
            // Somebody took us off the queue first and left a verdict.
        } else {
            drop(state);
        }
        Poll::Ready(this.take_verdict())
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let waiting = matches!(*self.cell.state.lock(), CellState::Waiting(_));
        if waiting && self.engine.withdraw(self.rank, self.key) {
            return;
        }
        let verdict = mem::replace(&mut *self.cell.state.lock(), CellState::Finished);
        if let CellState::Granted { .. } = verdict {
            // Granted but never taken: the slot goes on to the next waiter.
            self.engine.give_back(self.engine.now());
        }
    }
}

impl fmt::Debug for Waiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waiter")
            .field("rank", &self.rank)
            .field("expires_at", &self.expires_at())
            .finish_non_exhaustive()
    }
}
