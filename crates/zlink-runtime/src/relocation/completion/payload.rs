//! The bytes of a stored completion payload and of one delivery (`zlink.relocation.completion`):
//! `zc1`, the RelocationId, the entry count, then each completion result with its source
//! request information.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use zlink_codec::RoutingId;
use zlink_transport::{OperationId, Reply, ReplyRouteId, ReplyStatus};

use super::Entry;
use zlink_location::HostRun;

/// The tag of a stored completion payload.
const PAYLOAD_TAG: &[u8] = b"zc1";

/// One entry's header in a stored payload or a delivery.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EntryHead {
    operation: String,
    reply_route: String,
    ok: bool,
    content_type: String,
    requester: String,
    requester_generation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    requester_owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    requester_lease: Option<String>,
}

/// `zc1`, the RelocationId (16 bytes), the entry count (u32), then per entry a u16 header
/// length, the JSON header, a u32 payload length and the reply payload.
pub(super) fn encode_entries(relocation: u128, entries: &[Entry]) -> Bytes {
    let mut out = BytesMut::new();
    out.put_slice(PAYLOAD_TAG);
    out.put_u128(relocation);
    out.put_u32(entries.len() as u32);
    for e in entries {
        let head = EntryHead {
            operation: e.reply.operation_id().get().to_string(),
            reply_route: e.reply.reply_route().get().to_string(),
            ok: e.reply.status() == ReplyStatus::Ok,
            content_type: e.reply.content_type().to_owned(),
            requester: e.requester.to_hex(),
            requester_generation: e.requester_generation.to_string(),
            requester_owner: e
                .requester_run
                .as_ref()
                .map(|r| r.owner_id.as_str().to_owned()),
            requester_lease: e
                .requester_run
                .as_ref()
                .map(|r| r.lease_generation.get().to_string()),
        };
        let head = serde_json::to_vec(&head).unwrap_or_default();
        out.put_u16(head.len() as u16);
        out.put_slice(&head);
        out.put_u32(e.reply.payload().len() as u32);
        out.put_slice(e.reply.payload());
    }
    out.freeze()
}

pub(super) fn decode_entries(bytes: &[u8]) -> Option<(u128, Vec<Entry>)> {
    let mut b = Bytes::copy_from_slice(bytes.strip_prefix(PAYLOAD_TAG)?);
    if b.remaining() < 20 {
        return None;
    }
    let relocation = b.get_u128();
    let count = b.get_u32() as usize;
    let mut entries = Vec::with_capacity(count.min(4096));
    for _ in 0..count {
        if b.remaining() < 2 {
            return None;
        }
        let len = usize::from(b.get_u16());
        if b.remaining() < len + 4 {
            return None;
        }
        let head: EntryHead = serde_json::from_slice(&b.split_to(len)).ok()?;
        let plen = b.get_u32() as usize;
        if b.remaining() < plen {
            return None;
        }
        let payload = b.split_to(plen);
        let op = OperationId::new(head.operation.parse().ok()?).ok()?;
        let route = ReplyRouteId::new(head.reply_route.parse().ok()?)?;
        let status = if head.ok {
            ReplyStatus::Ok
        } else {
            ReplyStatus::Error
        };
        let mut reply = Reply::new(status, op, route, payload);
        if !head.content_type.is_empty() {
            reply = reply.with_content_type(&head.content_type).ok()?;
        }
        let requester_run = match (head.requester_owner, head.requester_lease) {
            (Some(o), Some(l)) => Some(HostRun {
                owner_id: zlink_codec::OwnerId::new(o).ok()?,
                lease_generation: zlink_location::OwnerLeaseGeneration::new(l.parse().ok()?)?,
            }),
            _ => None,
        };
        entries.push(Entry {
            requester: RoutingId::from_hex(&head.requester).ok()?,
            requester_generation: head.requester_generation.parse().ok()?,
            requester_run,
            reply,
        });
    }
    (!b.has_remaining()).then_some((relocation, entries))
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(op: u64, ok: bool, payload: &'static [u8]) -> Entry {
        let status = if ok {
            ReplyStatus::Ok
        } else {
            ReplyStatus::Error
        };
        let reply = Reply::new(
            status,
            OperationId::new(u128::from(op)).expect("op"),
            ReplyRouteId::new(op + 100).expect("route"),
            Bytes::from_static(payload),
        )
        .with_content_type("application/json")
        .expect("content type");
        Entry {
            requester: RoutingId::from_hex("0102030405060708090a0b0c0d0e0f10").expect("rid"),
            requester_generation: 7,
            requester_run: None,
            reply,
        }
    }

    #[test]
    fn completion_payloads_round_trip_every_result_in_order() {
        let all = vec![
            entry(1, true, b"1"),
            entry(2, false, b"err"),
            entry(3, true, b""),
        ];
        let bytes = encode_entries(42, &all);
        let (relocation, back) = decode_entries(&bytes).expect("decodes");
        assert_eq!(relocation, 42);
        assert_eq!(back.len(), 3);
        for (a, b) in all.iter().zip(&back) {
            assert_eq!(a.reply, b.reply);
            assert_eq!(a.requester, b.requester);
            assert_eq!(a.requester_generation, b.requester_generation);
        }
    }

    #[test]
    fn a_truncated_or_extended_completion_payload_does_not_decode() {
        let bytes = encode_entries(42, &[entry(1, true, b"12345")]);
        assert!(decode_entries(&bytes[..bytes.len() - 1]).is_none());
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(decode_entries(&longer).is_none());
        assert!(decode_entries(b"zc0").is_none());
    }
}
