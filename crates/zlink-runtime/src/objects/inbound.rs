//! Object messages arriving from other nodes, and the object commands of the command plane
//! (`zlink.object.create`, `zlink.object.end`; `zlink.spot.activate` is in `instance/`).

use std::sync::Arc;

use bytes::Bytes;
use zlink_codec::RoutingId;
use zlink_codec::keys::AuthorityKind;
use zlink_transport::Envelope;

use super::create::CreateCommand;
use super::held::Held;
use super::host::{ObjectHost, ObjectKey};
use super::live::Completion;
use super::messages::unframe_object_payload;
use super::registration::{MessageContext, ObjectCall};
use crate::mesh::node::{NodeInner, ObjectSink, SPOT_ADDRESS, answer_request, job_cost};
use crate::messaging::{BoxFuture, Metadata, PacketName, PayloadError, RouteKind, ZLinkError};

/// The command-plane name of Destroy (Actor) / Close (Spot) on the owner node.
pub(crate) const END_OBJECT: &str = "zlink.object.end";

impl ObjectSink for ObjectHost {
    fn owners_listed(&self, view: &zlink_location::DiscoveryView) {
        // Both clocks are read now: the monotonic one after the Instant, so the remaining
        // time converted is never longer than the read showed.
        let now = tokio::time::Instant::now();
        let mono = self.location.monotonic_now();
        let margin = self.location.options().owner_lease_fencing_margin;
        for n in &view.nodes {
            if let Some(end) = n.lease_until {
                let left = end.saturating_sub(mono).saturating_sub(margin);
                self.routes.owner_admits_until(&n.run, now + left);
            }
        }
    }

    fn owner_gone(&self, run: zlink_location::HostRun) {
        if Some(&run) == self.location.host_run().as_ref() {
            return;
        }
        let dropped = self.routes.forget_run(&run);
        if dropped > 0 {
            tracing::debug!(owner = %run.owner_id, dropped, "route cache entries of a dead run dropped");
        }
        // Reclaimed like any dead run: restored Instance Spots, then the recovery-sweep.
        tokio::spawn(super::recovery::reclaim_dead_run(
            Arc::clone(&self.location),
            self.instances.host(),
            run,
        ));
    }

    fn projection(&self) -> BoxFuture<'_, Option<super::projection::Projection>> {
        Box::pin(async move {
            match ObjectHost::projection(self).await {
                Ok(p) => Some(p),
                Err(e) => {
                    tracing::debug!(error = %e, "usage projection not read");
                    None
                }
            }
        })
    }

    fn deliver(
        &self,
        node: Arc<NodeInner>,
        peer: RoutingId,
        env: Envelope,
        job: crate::mesh::JobPermit,
        guard: Box<dyn Send>,
    ) -> Option<BoxFuture<'static, ()>> {
        let kind = if env.address() == SPOT_ADDRESS {
            AuthorityKind::Spot
        } else {
            AuthorityKind::Actor
        };
        let (id, mut call, cost) = match prepare(&env) {
            Ok(p) => p,
            Err(e) => {
                // A malformed record returns its permit at once (dropped here).
                answer_request(&node, &peer, &env, Err(e));
                return None;
            }
        };
        call.job = job;
        let key: ObjectKey = (kind, id);
        // A request's turn answers it itself when it ends: no task waits for it.
        let (route, reply) = if env.reply_route().is_none() {
            drop(guard);
            (RouteKind::Send, None)
        } else {
            let done = answering(Arc::clone(&node), peer.clone(), env.clone(), guard);
            (RouteKind::Request, Some(done))
        };
        let mut held = Held {
            route,
            call,
            cost,
            reply,
            origin: None,
        };
        // A relocation holds, follows or queues the message (spec 21 §1.3, §7.3); when none
        // does, it is submitted under the relocation lock (a seal cannot fall in between). The
        // envelope is copied only when a relocation takes the message, decided under that lock
        // (a message from another node is relayed and followed as received).
        // An idle activation's job runs here on the receive loop, like a node-direct handler
        // (`here` module); one that waits is returned to be spawned.
        if let Some(live) = self.live_object(&key) {
            let route = held.route;
            let (submitted, here) = super::here::offered(|| {
                self.interception
                    .submit_unless_taken(&key, held, live.as_ref(), Some(&env))
            });
            if let Err(e) = submitted {
                if route == RouteKind::Send {
                    answer_request(&node, &peer, &env, Err(e));
                }
            }
            return here.and_then(super::here::RunHere::run);
        }
        // Not live here (rare: a target's temporary queue, a follow window, or a stale sender):
        // the envelope goes along whatever takes it.
        held.origin = Some(env.clone());
        let held = self.interception.intercept(&key, held)?;
        let Some(live) = self.live_object(&key) else {
            // No live activation here: answered by the record (the sender's route cache may be
            // stale) — NotFound when it is gone, else Unavailable.
            let (location, judge) = (Arc::clone(&self.location), self.instances.host());
            return Some(Box::pin(async move {
                let e = ObjectHost::not_live(location, key, judge).await;
                match held.reply {
                    Some(done) => done.complete(Err(e)),
                    None => answer_request(&node, &peer, &env, Err(e)),
                }
            }));
        };
        // A refusal of a request is answered through its completion.
        if let Err(e) = live.submit(held.route, held.call, held.cost, held.reply) {
            if held.route == RouteKind::Send {
                answer_request(&node, &peer, &env, Err(e));
            }
        }
        None
    }
}

/// The completion of a request that arrived from `peer` in `env`: answers it (to its original
/// source when that is a Ready peer) when the turn ends, releasing `guard` then.
pub(crate) fn answering(
    node: Arc<NodeInner>,
    peer: RoutingId,
    env: Envelope,
    guard: Box<dyn Send>,
) -> Completion {
    Completion::new(move |out| {
        let _guard = guard;
        let out = match out {
            Ok(Some(reply)) => reply.into_encoded(node.codecs()),
            Ok(None) => Err(ZLinkError::NoReply),
            Err(e) => Err(e),
        };
        answer_request(&node, &peer, &env, out);
    })
}

/// Splits an object message envelope into the object id, the call and its job cost.
pub(crate) fn prepare(
    env: &Envelope,
) -> Result<(zlink_codec::ObjectId, ObjectCall, usize), ZLinkError> {
    let (id, payload) = unframe_object_payload(env.payload())?;
    let packet = PacketName::checked(env.packet_name()).map_err(|reason| {
        ZLinkError::malformed_payload("object message")(PayloadError::PacketName(reason))
    })?;
    let metadata = Metadata::from_bytes(env.metadata())?;
    let cost = job_cost(payload.len(), env.metadata().len());
    let call = ObjectCall {
        content_type: env.content_type_bytes().clone(),
        payload,
        typed_reply: false,
        context: MessageContext {
            id: id.as_str().to_owned(),
            packet,
            metadata,
            relocation: Default::default(),
            node: Default::default(),
            timers: Default::default(),
        },
        job: crate::mesh::JobPermit::none(),
    };
    Ok((id, call, cost))
}

/// The `zlink.object.create` command handler: creates the reserved incarnation the body names
/// (after checking every fence it carries) and answers the creation terminal.
pub(crate) async fn create_command(
    host: Arc<ObjectHost>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let cmd: CreateCommand = serde_json::from_slice(env.payload())
        .map_err(|e| ZLinkError::malformed_payload("create command")(e.into()))?;
    let terminal = host.create_command(cmd, env.source_rid()).await?;
    let bytes = terminal.encode().map_err(|e| ZLinkError::Encode {
        type_name: "CreationTerminal",
        source: std::sync::Arc::new(e).into(),
    })?;
    Ok(Some(Bytes::from(bytes)))
}

/// The `zlink.object.end` command body (our command for 48, Destroy / Close): the
/// incarnation, its AuthorityOwnerGeneration and the StoreVersion the source read, the source
/// and target host run generations and an OperationId. The reply is the one result.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EndCommand {
    /// `actor` or `spot`.
    pub(crate) kind: String,
    pub(crate) id: String,
    pub(crate) generation: String,
    pub(crate) owner_generation: String,
    pub(crate) version: String,
    pub(crate) source_run: String,
    pub(crate) target_run: String,
    pub(crate) operation: String,
}

/// The `zlink.object.end` command handler: ends the named incarnation on this node and
/// answers `true`/`false`.
pub(crate) async fn end_command(
    host: Arc<ObjectHost>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let bad = ZLinkError::malformed_payload("end command");
    let cmd: EndCommand = serde_json::from_slice(env.payload()).map_err(|e| bad(e.into()))?;
    let kind = match cmd.kind.as_str() {
        "actor" => AuthorityKind::Actor,
        "spot" => AuthorityKind::Spot,
        _ => return Err(bad(PayloadError::Format("unknown object kind"))),
    };
    let id = zlink_codec::ObjectId::new(cmd.id).map_err(|e| bad(e.into()))?;
    let number = |t: &str, field: &'static str| {
        t.parse::<u64>()
            .map_err(|source| bad(PayloadError::Number { field, source }))
    };
    let generation = number(&cmd.generation, "generation")?;
    let fence = super::host::EndFence {
        owner_generation: number(&cmd.owner_generation, "ownerGeneration")?,
        version: cmd.version,
        target_run: number(&cmd.target_run, "targetRun")?,
    };
    number(&cmd.source_run, "sourceRun")?;
    let ended = host.end(&(kind, id), generation, Some(&fence)).await?;
    Ok(Some(Bytes::from_static(if ended {
        b"true"
    } else {
        b"false"
    })))
}

/// The command-plane name of a join run on the Actor's owner (same-node, or a cross-node
/// join that moves the Actor from there).
pub(crate) const JOIN_SPOT: &str = "zlink.object.join";

/// The `zlink.object.join` command body: the Actor incarnation and either the User Spot
/// incarnation it joins, or (`entry`) the Entry Spot of the node `entryNode` names (hex
/// RoutingId; absent: the owner's own).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JoinCommand {
    pub(crate) actor: String,
    pub(crate) generation: String,
    #[serde(default)]
    pub(crate) spot: String,
    #[serde(default)]
    pub(crate) spot_generation: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) entry: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) entry_node: Option<String>,
}

/// The `zlink.object.join` command handler: joins on this node (or moves the Actor from
/// here) and answers empty.
pub(crate) async fn join_command(
    host: Arc<ObjectHost>,
    env: Envelope,
) -> Result<Option<Bytes>, ZLinkError> {
    let bad = ZLinkError::malformed_payload("join command");
    let cmd: JoinCommand = serde_json::from_slice(env.payload()).map_err(|e| bad(e.into()))?;
    let number = |t: &str| {
        t.parse::<u64>().map_err(|source| {
            bad(PayloadError::Number {
                field: "generation",
                source,
            })
        })
    };
    let actor = zlink_codec::ObjectId::new(cmd.actor).map_err(|e| bad(e.into()))?;
    let generation = number(&cmd.generation)?;
    if cmd.entry {
        let node = cmd
            .entry_node
            .as_deref()
            .map(zlink_codec::RoutingId::from_hex)
            .transpose()
            .map_err(|e| bad(e.into()))?;
        host.join_entry(&actor, generation, node.as_ref()).await?;
        return Ok(Some(Bytes::new()));
    }
    let spot = zlink_codec::ObjectId::new(cmd.spot).map_err(|e| bad(e.into()))?;
    host.join(&actor, generation, &spot, number(&cmd.spot_generation)?)
        .await?;
    Ok(Some(Bytes::new()))
}
