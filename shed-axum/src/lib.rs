#![forbid(unsafe_code)]
pub mod client;
