//! The admission engine of shed.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod retry;
pub mod wire;
