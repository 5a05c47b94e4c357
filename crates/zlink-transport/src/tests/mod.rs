//! Loopback tests of the running transport (bounded: every wait has a timeout).

mod handshake;
mod liveness;
mod network;
mod planes;
mod support;
mod tls;
