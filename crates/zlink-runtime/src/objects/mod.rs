//! Actors and Spots (spec 06 §11, §15–§18; 21 §7), being built on the MeshNode layer. Today it
//! holds the activation core: one object's state behind a count- and bytes-bounded mailbox,
//! run one job at a time with a bounded slice ([`activation`]). Registration, managers,
//! messaging by global id and the route cache are not built yet; nothing here is public.

// The managers (not built yet) are the first callers outside the tests.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod activation;
