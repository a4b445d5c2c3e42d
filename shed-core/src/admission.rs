//! The verdict at the door, and a future that sees it through.
//!
//! ```
//! use futures_executor::block_on;
//! use shed_core::{Arrival, Class, Shedder};
//!
//! let shedder = Shedder::builder().limit(8).build()?;
//! // `Admission` is `IntoFuture`: await it to get a permit or a rejection.
//! let permit = block_on(async { shedder.admit(&Arrival::new(Class::Interactive)).await });
//! assert!(permit.is_ok());
//! # Ok::<(), shed_core::ConfigError>(())
//! ```

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::{Permit, Rejection, Waiter};

/// What the door decided for one request.
#[derive(Debug)]
#[must_use = "a permit or waiter is released as soon as it is dropped"]
pub enum Admission {
    /// A slot was free: serve the request while holding the permit.
    Admitted(Permit),
    /// No slot was free: the request waits in its rank's queue.
    Queued(Waiter),
    /// The request is refused.
    Rejected(Rejection),
}

impl IntoFuture for Admission {
    type Output = Result<Permit, Rejection>;
    type IntoFuture = Admit;

    fn into_future(self) -> Admit {
        Admit {
            state: match self {
                Admission::Admitted(permit) => State::Ready(Some(Ok(permit))),
                Admission::Rejected(rejection) => State::Ready(Some(Err(rejection))),
                Admission::Queued(waiter) => State::Waiting(waiter),
            },
        }
    }
}

/// The future of an [`Admission`]: ready at once, or waiting in the queue.
///
/// # Cancel safety
///
/// As for [`Waiter`]: dropping it never loses a slot.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Admit {
    state: State,
}

#[derive(Debug)]
enum State {
    Ready(Option<Result<Permit, Rejection>>),
    Waiting(Waiter),
}

impl Future for Admit {
    type Output = Result<Permit, Rejection>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().state {
            State::Ready(verdict) => {
                Poll::Ready(verdict.take().expect("Admit polled after it completed"))
            }
            State::Waiting(waiter) => Pin::new(waiter).poll(cx),
        }
    }
}
