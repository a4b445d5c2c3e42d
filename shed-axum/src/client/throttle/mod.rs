//! The client throttle: refuse locally, before sending, what a replica
//! would refuse.
//!
//! See [`ShedThrottleLayer`] for what it decides, how it forgets, how
//! reports through a proxy combine, and where it goes among the layers.

mod gate;
mod judge;
mod layer;
mod refusal;
mod replica;
mod replicas;
mod service;
mod stats;
mod window;

pub(crate) use gate::{JudgedByGate, RetryGate};
pub(crate) use judge::TrailerReader;
pub use layer::ShedThrottleLayer;
pub use refusal::{LocalReason, RefusedLocally};
pub use service::{ShedThrottle, ThrottleFuture};
pub use stats::ThrottleStats;
