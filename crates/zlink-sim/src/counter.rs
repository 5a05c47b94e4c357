//! The counter Actor every simulated host serves: each activation takes a serial number from
//! the world when its factory runs, counts the `Probe`s it handles and reports each one to the
//! checker with the virtual time and the request it answers. When the seed draws moves the
//! type is `RecreateOnRelocation` (a moved counter is a new activation on its new owner, so
//! the checker sees the old one end before the new one begins), otherwise
//! `DisableRelocation`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use zlink_runtime::{Actor, Message, Request, config::ActorType};

use crate::world::World;

/// The registered Actor type.
pub(crate) const COUNTER: &str = "counter";

/// One activation of a counter.
#[derive(Debug)]
pub(crate) struct Counter {
    id: String,
    serial: u64,
    host: usize,
    n: u64,
}
impl Actor for Counter {}

/// Adds one to a counter; replies with the activation and its count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Probe {
    /// The request (the checker's number; 0 for the final probe).
    pub(crate) req: u64,
}
impl Message for Probe {
    const PACKET: &'static str = "Probe";
}
impl Request for Probe {
    type Reply = ProbeReply;
}

/// Which activation answered a [`Probe`] and its count after it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ProbeReply {
    /// The activation's serial number (unique in the run).
    pub(crate) serial: u64,
    /// The count after this probe.
    pub(crate) count: u64,
}

/// The counter type's registration on host `host`.
pub(crate) fn counter_type(
    world: Arc<World>,
    host: usize,
) -> impl FnOnce(ActorType<Counter>) -> ActorType<Counter> {
    let moves = world.config.moves > 0;
    move |t| {
        let for_factory = Arc::clone(&world);
        let t = t
            .factory(move |ctx| {
                let serial = for_factory.next_serial();
                for_factory.note(format!(
                    "h{host} activates {} as activation {serial}",
                    ctx.id
                ));
                async move {
                    Ok(Counter {
                        id: ctx.id,
                        serial,
                        host,
                        n: 0,
                    })
                }
            })
            .on_request::<Probe, _>(move |c, probe, _ctx| {
                c.n += 1;
                world.handled(&c.id, c.serial, c.host, c.n, probe.req);
                let reply = ProbeReply {
                    serial: c.serial,
                    count: c.n,
                };
                Box::pin(async move { Ok(reply) })
            });
        if moves {
            t.recreate_on_relocation()
        } else {
            t.disable_relocation()
        }
    }
}
