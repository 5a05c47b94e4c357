//! Runtime internals for benchmarks outside this crate, behind the non-default `testing` cargo
//! feature. Applications never enable it: nothing here is part of the public API.

pub use crate::objects::testing::*;
