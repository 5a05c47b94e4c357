//! The demo's Instance Spots: `Room`s created by their first message (cold activation),
//! joined from two roots and found from a third.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use zlink_codec::RoutingId;
use zlink_runtime::{Message, Request, Spot, SpotManager, ZLinkHost, config::SpotType};

use super::{Config, bar, parallel};

/// The registered Instance Spot type.
pub(super) const ROOM: &str = "room";

/// A room Instance Spot, created by its first message: `Join` adds a member.
pub(super) struct Room {
    members: u64,
}
impl Spot for Room {}

/// Joins the room; replies with the number of members.
#[derive(Debug, Serialize, Deserialize)]
struct Join;
impl Message for Join {
    const PACKET: &'static str = "Join";
}
impl Request for Join {
    type Reply = u64;
}

/// The `room` type: created empty, never relocated, `Join` adds a member.
pub(super) fn room_type(t: SpotType<Room>) -> SpotType<Room> {
    t.factory(|_ctx| async { Ok(Room { members: 0 }) })
        .disable_relocation()
        .on_request::<Join, _>(|r, _join, _ctx| {
            Box::pin(async move {
                r.members += 1;
                Ok(r.members)
            })
        })
}

fn room_id(i: usize) -> String {
    format!("room-{i}")
}

/// Creates `cfg.instances` rooms by a first `Join` by global id with Instance intent (on a
/// node chosen by weight, answered by the new room: 1 member), joins each again from another
/// root (2 members) and finds it from a third; returns where each room lives and the seconds
/// it took.
pub(super) async fn activate(
    cfg: &Config,
    hosts: &[ZLinkHost],
) -> Result<(Vec<(usize, RoutingId)>, f64), String> {
    let spot_managers: Arc<Vec<SpotManager>> = Arc::new(
        hosts
            .iter()
            .map(|h| h.spots().map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?,
    );
    let bar_spots = bar(cfg, cfg.instances, "activate");
    let t = Instant::now();
    let spot_nodes = {
        let (managers, pb) = (Arc::clone(&spot_managers), bar_spots.clone());
        parallel(cfg.concurrency, cfg.instances, move |i| {
            let (m, pb) = (managers.clone(), pb.clone());
            async move {
                let id = room_id(i);
                let first = m[i % m.len()]
                    .instance(&id)
                    .stable_type(ROOM)
                    .request(&Join)
                    .await
                    .map_err(|e| format!("first Join {id}: {e}"))?;
                let second = m[(i + 1) % m.len()]
                    .instance(&id)
                    .request(&Join)
                    .await
                    .map_err(|e| format!("second Join {id}: {e}"))?;
                if (first, second) != (1, 2) {
                    return Err(format!("{id}: Joins answered {first} then {second}"));
                }
                let found = m[(i + 2) % m.len()]
                    .find(&id)
                    .await
                    .map_err(|e| format!("find {id}: {e}"))?
                    .ok_or(format!("{id} is not Ready"))?;
                pb.inc(1);
                Ok(found.node)
            }
        })
        .await?
    };
    let spot_secs = t.elapsed().as_secs_f64();
    bar_spots.finish_and_clear();
    println!(
        "activated {} instance spots by their first message in {spot_secs:.2} s",
        spot_nodes.len()
    );
    Ok((spot_nodes, spot_secs))
}
