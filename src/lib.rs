//! shed: admission control and load shedding for axum and tower HTTP services.
//!
//! This facade re-exports the engine ([`core`], the `shed-core` crate) and the
//! middleware ([`axum`], the `shed-axum` crate). See the README for a tour.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use shed_axum as axum;
pub use shed_core as core;

/// The README's examples, compiled and run as doctests so they cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
