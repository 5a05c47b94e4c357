//! Loopback tests of the running transport (bounded: every wait has a timeout).

mod handshake;
mod liveness;
mod planes;
mod support;
mod tls;
