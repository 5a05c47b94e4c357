//! The command-plane messages of a live relocation (our commands for spec 21 §1.3 steps 4–6):
//! the Restore declaration (one-way, then its chunks one-way, in order on the same peer
//! connection), the prepare request answered relay-ready, and the cutover request answered
//! when the target's NewOwner committed.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use zlink_codec::{Generation, RoutingId};
use zlink_transport::{Envelope, OperationId, ReplyRouteId};

use super::follow::{FollowChain, Hop, MAX_FOLLOW_HOPS};
use crate::messaging::{InternalError, PayloadError, ZLinkError};
use zlink_location::ReservationWire;

/// The Restore declaration (one-way): what moves and the transfer header.
pub(crate) const RESTORE: &str = "zlink.relocation.restore";
/// One payload chunk (one-way; the body is the chunk's own byte layout).
pub(crate) const CHUNK: &str = "zlink.relocation.chunk";
/// Prepare (request): assemble, verify, build the instance, queue early messages; the reply
/// is relay-ready.
pub(crate) const PREPARE: &str = "zlink.relocation.prepare";
/// Cutover (request): run NewOwner and open dispatch; the reply ([`CutoverReply`]) says it
/// committed and at which record version (a conflict is a `stale` error).
pub(crate) const CUTOVER: &str = "zlink.relocation.cutover";
/// Ready (request, after the source recorded `Prepared`): the target takes the reservation
/// now expecting the `Prepared` record's version (its NewOwner is conditioned on it), starts
/// its cutover wait, and answers relay-ready.
pub(crate) const READY: &str = "zlink.relocation.ready";
/// Abort (one-way, a move cancelled before relay-ready): the target discards the Restore's
/// assembly, its prepared instance and its temporary queue (queued requests get
/// `Unavailable`). A move already ended there is left as it is.
pub(crate) const ABORT: &str = "zlink.relocation.abort";

/// The body of [`READY`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReadyCommand {
    /// The RelocationId, decimal.
    pub(crate) relocation: String,
    /// The reservation as the `Prepared` record carried it.
    pub(crate) reservation: ReservationWire,
}

/// The reply to [`CUTOVER`] when NewOwner applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CutoverReply {
    /// The record's StoreVersion after NewOwner.
    pub(crate) version: String,
    /// The AuthorityOwnerGeneration NewOwner issued to the target, decimal (the source's
    /// follow record keeps it, spec 21 §7.3).
    pub(crate) owner_generation: String,
}

/// How the target builds the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Rebuild {
    /// RecreateOnRelocation: the factory, no payload.
    Recreate,
    /// PreserveStateWith: the factory, then the adapter restores the payload.
    Preserve,
}

/// The body of [`RESTORE`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RestoreCommand {
    /// The transfer header (`RestoreHeader::encode`).
    pub(crate) header: Vec<u8>,
    pub(crate) id: String,
    pub(crate) stable_type: String,
    /// The ObjectGeneration, decimal.
    pub(crate) generation: String,
    pub(crate) rebuild: Rebuild,
    pub(crate) reservation: ReservationWire,
    /// What moves (absent: an Actor).
    #[serde(default)]
    pub(crate) kind: MovedKind,
    /// The `PerActor` User Spot move this unit belongs to (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) per_actor: Option<PerActorPart>,
    /// The cross-node join this move is (absent: none): the target's NewOwner writes the
    /// membership it names (docs/formats.md §15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) join: Option<JoinPart>,
    /// The object's timers as the source's capture left them (docs/formats.md, *Timers in
    /// the Restore*; absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) timers: Vec<crate::objects::timer::wire::TimerWire>,
    /// The move's deadline, in milliseconds after the source sent this command
    /// (docs/formats.md §14): the target waits for the
    /// source's ready no longer than that. Absent: no deadline was given (the target's own
    /// longest wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) deadline_ms: Option<u64>,
}

/// Which part of a `PerActor` User Spot move a unit is (spec 21 §8.2): the Spot authority
/// transition (`members` set: the member count its move record starts with) or one member
/// Actor (`members` absent). The target's NewOwner then writes the move record with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PerActorPart {
    /// The User Spot's id.
    pub(crate) spot: String,
    /// The relocation operation id of the whole move, decimal.
    pub(crate) operation: String,
    /// The Spot authority transition: the member count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) members: Option<u32>,
}

impl PerActorPart {
    /// The relocation operation id.
    pub(crate) fn operation(&self) -> Result<u128, ZLinkError> {
        self.operation
            .parse()
            .map_err(number("per-actor move part", "operation"))
    }
}

/// The Spot a cross-node Actor join makes the moving Actor a member of (spec 21 §1.3, §8.2):
/// a User Spot live on the target (`spot` and its ObjectGeneration), or, both absent, the
/// target's Entry Spot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JoinPart {
    /// The User Spot's id (absent: the target's Entry Spot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) spot: Option<String>,
    /// The User Spot's ObjectGeneration, decimal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) spot_generation: Option<String>,
}

impl JoinPart {
    /// The part of a join of `target`.
    pub(crate) fn of(target: &crate::objects::join::JoinTarget) -> Self {
        match target {
            crate::objects::join::JoinTarget::Spot { id, generation } => Self {
                spot: Some(id.as_str().to_owned()),
                spot_generation: Some(generation.to_string()),
            },
            crate::objects::join::JoinTarget::Entry => Self {
                spot: None,
                spot_generation: None,
            },
        }
    }

    /// The User Spot joined and its ObjectGeneration (`None`: the target's Entry Spot).
    pub(crate) fn spot(&self) -> Result<Option<(zlink_codec::ObjectId, u64)>, ZLinkError> {
        let (Some(spot), Some(generation)) = (&self.spot, &self.spot_generation) else {
            return Ok(None);
        };
        let id = zlink_codec::ObjectId::new(spot.as_str())
            .map_err(|e| malformed("join part")(e.into()))?;
        let generation = generation
            .parse()
            .map_err(number("join part", "spotGeneration"))?;
        Ok(Some((id, generation)))
    }
}

/// The kind of object one unit moves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum MovedKind {
    /// An Entry Spot member Actor (spec 28 §5 "Entry member Actor").
    #[default]
    Actor,
    /// An Instance Spot (spec 28 §5 "Instance Spot"): one Spot, no membership.
    InstanceSpot,
    /// The authority of a `PerActor` User Spot (spec 28 §5 "`PerActor` Spot authority
    /// transition"): an empty Spot shell, no state.
    UserSpot,
}

impl MovedKind {
    /// The record kind.
    pub(crate) fn object_kind(self) -> zlink_codec::records::ObjectKind {
        match self {
            Self::Actor => zlink_codec::records::ObjectKind::Actor,
            Self::InstanceSpot => zlink_codec::records::ObjectKind::InstanceSpot,
            Self::UserSpot => zlink_codec::records::ObjectKind::UserSpot,
        }
    }

    /// The authority key kind (and the live-set key).
    pub(crate) fn authority_kind(self) -> zlink_codec::keys::AuthorityKind {
        match self {
            Self::Actor => zlink_codec::keys::AuthorityKind::Actor,
            Self::InstanceSpot | Self::UserSpot => zlink_codec::keys::AuthorityKind::Spot,
        }
    }

    /// The kind of `record`'s object, if a unit of this runtime moves it.
    pub(crate) fn of(kind: zlink_codec::records::ObjectKind) -> Option<Self> {
        match kind {
            zlink_codec::records::ObjectKind::Actor => Some(Self::Actor),
            zlink_codec::records::ObjectKind::InstanceSpot => Some(Self::InstanceSpot),
            zlink_codec::records::ObjectKind::UserSpot => Some(Self::UserSpot),
        }
    }
}

/// The body of [`PREPARE`] and [`CUTOVER`]: the move they are for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MoveRef {
    /// The RelocationId, decimal.
    pub(crate) relocation: String,
}

impl MoveRef {
    pub(crate) fn of(relocation: u128) -> Self {
        Self {
            relocation: relocation.to_string(),
        }
    }

    pub(crate) fn id(&self) -> Result<u128, ZLinkError> {
        self.relocation
            .parse()
            .map_err(number("relocation command", "relocation"))
    }
}

/// A malformed relocation payload `what` (`ProtocolError`), with what is wrong with it.
pub(crate) fn malformed(what: &'static str) -> impl Fn(PayloadError) -> ZLinkError + Copy {
    ZLinkError::malformed_payload(what)
}

/// A malformed relocation payload `what` whose layout breaks the rule `rule`.
pub(crate) fn broken(what: &'static str, rule: &'static str) -> ZLinkError {
    malformed(what)(PayloadError::Format(rule))
}

/// A decimal `field` of the relocation payload `what` that does not parse.
pub(crate) fn number(
    what: &'static str,
    field: &'static str,
) -> impl Fn(std::num::ParseIntError) -> ZLinkError + Copy {
    move |source| malformed(what)(PayloadError::Number { field, source })
}

/// Encodes a JSON body.
pub(crate) fn encode<T: Serialize>(body: &T) -> Result<Bytes, ZLinkError> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(|e| ZLinkError::Internal(InternalError::json("relocation command")(e)))
}

/// Decodes a JSON body.
pub(crate) fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ZLinkError> {
    serde_json::from_slice(bytes).map_err(|e| malformed("relocation command")(e.into()))
}

/// One held message relayed to the target before the cutover (one-way, in hold order, on the
/// command plane of the same peer connection the cutover follows): the RelocationId and the
/// message's envelope as it reached the source — OperationId, reply route, original source
/// and its generation, address, packet name, content type, metadata and payload — so the
/// target answers the original source itself.
pub(crate) const RELAY: &str = "zlink.relocation.relay";

/// The envelope fields of a [`RELAY`] or [`FOLLOW`] head.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvelopeHead {
    operation: String,
    reply_route: Option<u64>,
    source: String,
    source_generation: u64,
    address: String,
    packet: String,
    content_type: String,
    metadata_len: usize,
}

impl EnvelopeHead {
    fn of(env: &Envelope) -> Self {
        Self {
            operation: env.operation_id().get().to_string(),
            reply_route: env.reply_route().map(|r| r.get()),
            source: env.source_rid().to_hex(),
            source_generation: env.source_generation().get(),
            address: env.address().to_owned(),
            packet: env.packet_name().to_owned(),
            content_type: env.content_type().to_owned(),
            metadata_len: env.metadata().len(),
        }
    }
}

/// The head of a [`RELAY`] body (JSON), followed by the metadata and payload bytes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RelayHead {
    relocation: String,
    #[serde(flatten)]
    env: EnvelopeHead,
}

/// Encodes a [`RELAY`] body: `u32` head length (big-endian), the head, metadata, payload.
pub(crate) fn encode_relay(relocation: u128, env: &Envelope) -> Result<Bytes, ZLinkError> {
    let head = RelayHead {
        relocation: relocation.to_string(),
        env: EnvelopeHead::of(env),
    };
    framed(&head, env)
}

/// `u32` head length (big-endian), the JSON head, the envelope's metadata and payload.
fn framed<H: Serialize>(head: &H, env: &Envelope) -> Result<Bytes, ZLinkError> {
    let head = serde_json::to_vec(head)
        .map_err(|e| ZLinkError::Internal(InternalError::json("relay head")(e)))?;
    let len = u32::try_from(head.len()).map_err(|_| broken("relay head", "over 4 GiB"))?;
    let mut out = Vec::with_capacity(4 + head.len() + env.metadata().len() + env.payload().len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(env.metadata());
    out.extend_from_slice(env.payload());
    Ok(Bytes::from(out))
}

/// Decodes a [`RELAY`] body into the RelocationId and the envelope as the source received it.
pub(crate) fn decode_relay(body: &Bytes) -> Result<(u128, Envelope), ZLinkError> {
    let (head, env) = unframe::<RelayHead>(body, "relayed message", |h| &h.env)?;
    let relocation: u128 = head
        .relocation
        .parse()
        .map_err(number("relayed message", "relocation"))?;
    Ok((relocation, env))
}

/// Splits a framed body into its head and the envelope it describes.
fn unframe<H: serde::de::DeserializeOwned>(
    body: &Bytes,
    what: &'static str,
    fields: impl Fn(&H) -> &EnvelopeHead,
) -> Result<(H, Envelope), ZLinkError> {
    let bad = |rule: &'static str| broken(what, rule);
    let wrong = malformed(what);
    let len_bytes: [u8; 4] = body
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| bad("too short"))?;
    let len = u32::from_be_bytes(len_bytes) as usize;
    let head_end = 4usize.checked_add(len).filter(|&e| e <= body.len());
    let head_end = head_end.ok_or_else(|| bad("head past the end"))?;
    let head: H = serde_json::from_slice(&body[4..head_end]).map_err(|e| wrong(e.into()))?;
    let f = fields(&head);
    let meta_end = head_end
        .checked_add(f.metadata_len)
        .filter(|&e| e <= body.len())
        .ok_or_else(|| bad("metadata past the end"))?;
    let operation = f
        .operation
        .parse::<u128>()
        .ok()
        .and_then(|o| OperationId::new(o).ok())
        .ok_or_else(|| bad("operationId is not a nonzero decimal u128"))?;
    let source = RoutingId::from_hex(&f.source).map_err(|e| wrong(e.into()))?;
    let generation = Generation::new(f.source_generation).map_err(|e| wrong(e.into()))?;
    let payload = body.slice(meta_end..);
    let env = match f.reply_route {
        Some(r) => {
            let route = ReplyRouteId::new(r).ok_or_else(|| bad("replyRouteId is zero"))?;
            Envelope::request(operation, route, &source, generation, payload)
        }
        None => Envelope::one_way(operation, &source, generation, payload),
    };
    let t = |e: zlink_transport::TransportError| wrong(e.into());
    let env = env
        .with_address(&f.address)
        .map_err(t)?
        .with_packet_name(&f.packet)
        .map_err(t)?
        .with_content_type(&f.content_type)
        .map_err(t)?
        .with_metadata(body.slice(head_end..meta_end))
        .map_err(t)?;
    Ok((head, env))
}

/// One message the previous owner of an Actor follows to its new owner (spec 21 §7.3;
/// one-way, on the command plane, in the order the follow window took them): the message's
/// envelope as this node received it — OperationId, reply route, original source, address,
/// packet, content type, metadata and payload unchanged — and its [`FollowChain`], so the
/// next node answers the original source itself, or checks the chain and follows it on.
/// The spec fixes the rules, not a wire: this command is internal to this runtime.
pub(crate) const FOLLOW: &str = "zlink.relocation.follow";

/// One owner on a followed message's path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HopWire {
    /// Node RoutingId, lowercase hex.
    node: String,
    /// Its AuthorityOwnerGeneration, decimal.
    owner_generation: String,
}

/// The head of a [`FOLLOW`] body (JSON), followed by the metadata and payload bytes.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FollowHead {
    /// The followed incarnation's ObjectGeneration, decimal.
    object_generation: String,
    /// The previous owner the message first reached, then each owner it was forwarded to.
    path: Vec<HopWire>,
    #[serde(flatten)]
    env: EnvelopeHead,
}

/// Encodes a [`FOLLOW`] body: `u32` head length (big-endian), the head, metadata, payload.
pub(crate) fn encode_follow(chain: &FollowChain, env: &Envelope) -> Result<Bytes, ZLinkError> {
    let head = FollowHead {
        object_generation: chain.object_generation.to_string(),
        path: chain
            .path
            .iter()
            .map(|h| HopWire {
                node: h.node.to_hex(),
                owner_generation: h.owner_generation.to_string(),
            })
            .collect(),
        env: EnvelopeHead::of(env),
    };
    framed(&head, env)
}

/// Decodes a [`FOLLOW`] body into the chain and the envelope as the first owner received it.
/// A chain without its first owner, or longer than the hop bound allows, is a protocol error.
pub(crate) fn decode_follow(body: &Bytes) -> Result<(FollowChain, Envelope), ZLinkError> {
    let (head, env) = unframe::<FollowHead>(body, "followed message", |h| &h.env)?;
    const WHAT: &str = "followed message";
    if head.path.is_empty() || head.path.len() > MAX_FOLLOW_HOPS + 1 {
        return Err(broken(
            WHAT,
            "the path is empty or longer than the hop bound",
        ));
    }
    let object_generation = head
        .object_generation
        .parse()
        .map_err(number(WHAT, "objectGeneration"))?;
    let path = head
        .path
        .iter()
        .map(|h| {
            Ok(Hop {
                node: RoutingId::from_hex(&h.node).map_err(|e| malformed(WHAT)(e.into()))?,
                owner_generation: h
                    .owner_generation
                    .parse()
                    .map_err(number(WHAT, "ownerGeneration"))?,
            })
        })
        .collect::<Result<Vec<_>, ZLinkError>>()?;
    Ok((
        FollowChain {
            object_generation,
            path,
        },
        env,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_relocation_payload_is_a_protocol_error_with_its_typed_cause() {
        let e = decode_relay(&Bytes::from_static(b"\0\0")).expect_err("too short");
        assert_eq!(e.kind(), crate::messaging::ErrorKind::ProtocolError);
        assert!(
            matches!(
                e,
                ZLinkError::MalformedPayload {
                    what: "relayed message",
                    source: PayloadError::Format(_)
                }
            ),
            "{e:?}"
        );
        let e = MoveRef {
            relocation: "x".into(),
        }
        .id()
        .expect_err("not a number");
        assert!(
            matches!(
                e,
                ZLinkError::MalformedPayload {
                    source: PayloadError::Number {
                        field: "relocation",
                        ..
                    },
                    ..
                }
            ),
            "{e:?}"
        );
        let e = decode::<MoveRef>(b"{").expect_err("not JSON");
        assert!(
            matches!(
                e,
                ZLinkError::MalformedPayload {
                    source: PayloadError::Json(_),
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn a_relayed_message_keeps_its_envelope() {
        let source = RoutingId::from_hex("0a0b0c0d0e0f10111213141516171819").expect("rid");
        let op = OperationId::new(7 << 64 | 9).expect("op");
        let route = ReplyRouteId::new(42).expect("route");
        let generation = Generation::new(3).expect("generation");
        let env = Envelope::request(op, route, &source, generation, Bytes::from_static(b"pay"))
            .with_address("actor")
            .and_then(|e| e.with_packet_name("Incr"))
            .and_then(|e| e.with_content_type("application/json"))
            .and_then(|e| e.with_metadata(Bytes::from_static(b"meta")))
            .expect("envelope");
        let body = encode_relay(5, &env).expect("encode");
        let (relocation, back) = decode_relay(&body).expect("decode");
        assert_eq!(relocation, 5);
        assert_eq!(back, env);
        let one_way = Envelope::one_way(op, &source, generation, Bytes::new());
        let (_, back) = decode_relay(&encode_relay(5, &one_way).expect("encode")).expect("decode");
        assert_eq!(back, one_way);
        assert!(
            decode_relay(&body.slice(..body.len().min(6))).is_err(),
            "truncated"
        );
    }

    #[test]
    fn a_followed_message_keeps_its_envelope_and_carries_its_chain() {
        let source = RoutingId::from_hex("0a0b0c0d0e0f10111213141516171819").expect("rid");
        let node = RoutingId::from_hex("1a1b1c1d1e1f20212223242526272829").expect("rid");
        let op = OperationId::new(11).expect("op");
        let route = ReplyRouteId::new(4).expect("route");
        let generation = Generation::new(2).expect("generation");
        let env = Envelope::request(op, route, &source, generation, Bytes::from_static(b"pay"))
            .with_address("actor")
            .and_then(|e| e.with_packet_name("Incr"))
            .and_then(|e| e.with_metadata(Bytes::from_static(b"meta")))
            .expect("envelope");
        let chain = FollowChain {
            object_generation: 9,
            path: vec![
                Hop {
                    node: source.clone(),
                    owner_generation: u64::MAX - 1,
                },
                Hop {
                    node,
                    owner_generation: u64::MAX,
                },
            ],
        };
        let body = encode_follow(&chain, &env).expect("encode");
        let (back_chain, back) = decode_follow(&body).expect("decode");
        assert_eq!((back_chain, back), (chain.clone(), env.clone()));
        let mut long = chain.clone();
        long.path = vec![chain.path[0].clone(); MAX_FOLLOW_HOPS + 1];
        assert!(decode_follow(&encode_follow(&long, &env).expect("encode")).is_ok());
        long.path.push(chain.path[0].clone());
        assert!(
            decode_follow(&encode_follow(&long, &env).expect("encode")).is_err(),
            "a path no forward could have made"
        );
        let mut empty = chain;
        empty.path.clear();
        assert!(decode_follow(&encode_follow(&empty, &env).expect("encode")).is_err());
    }
}
