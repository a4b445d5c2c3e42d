//! The checks shed's fuzz targets run; see [`check`].
#![forbid(unsafe_code)]

pub mod check;
