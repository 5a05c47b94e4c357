//! Tests of the relocation unit state machine (`zlink_relocation::unit`): one named test per
//! transition rule (`rules`) and property tests over random event sequences (`properties`).

#![allow(clippy::unwrap_used)] // Test code: a failed unwrap is a failed test.

mod properties;
mod rules;
mod support;
mod target;
