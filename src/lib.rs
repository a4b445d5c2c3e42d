#![forbid(unsafe_code)]
pub use shed_axum as axum;
pub use shed_core as core;
