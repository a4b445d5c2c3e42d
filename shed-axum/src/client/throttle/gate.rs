//! How the retry policy asks a throttle below it about a retry before it
//! spends budget on it.
//!
//! The retrier takes a retry's credit when it grants the retry, before the
//! retry is sent; a retry the throttle then refused would have spent budget
//! on a request nobody received. So the throttle puts a [`RetryGate`] on
//! each failed answer it passes up, the policy asks it whether the retry
//! would be refused before asking the retrier, and marks a retry it sends
//! [`JudgedByGate`] so the throttle does not judge it twice.

use std::fmt;

use super::judge::{Call, Throttle};

/// A failed answer's way back to the throttle that saw it.
#[derive(Clone)]
pub(crate) struct RetryGate {
    throttle: Throttle,
    call: Call,
}

/// The mark of a retry the throttle judged through its gate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct JudgedByGate;

impl RetryGate {
    pub(super) fn new(throttle: Throttle, call: Call) -> RetryGate {
        RetryGate { throttle, call }
    }

    /// Whether the throttle refuses attempt `attempt` of the call (counted
    /// and traced as a local refusal if so).
    pub(crate) fn refuses(&self, attempt: u32) -> bool {
        self.throttle.judge(&self.call, attempt).is_some()
    }
}

impl fmt::Debug for RetryGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryGate")
            .field("authority", &self.call.key)
            .finish_non_exhaustive()
    }
}
