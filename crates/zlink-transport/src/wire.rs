//! Frame kinds, limits and the handshake/control frame layouts (`docs/transport.md`).

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::LengthDelimitedCodec;
use zlink_codec::{ChannelName, Generation, MeshName, RoutingId};

use crate::error::{HandshakeRejection, TransportError};

/// The largest frame body (the bytes after the 4-byte length prefix) this transport sends or
/// accepts: 16 MiB + 64 KiB, so a 16 MiB payload plus the largest envelope header fits. Fixed,
/// not an option; a sender gets [`TransportError::FrameTooLarge`] past it and a receiver closes
/// the connection with a protocol error.
pub const MAX_FRAME_LEN: usize = 16 * 1024 * 1024 + 64 * 1024;

/// The protocol version byte every `HELLO` carries.
pub const PROTOCOL_VERSION: u8 = 1;

/// A sender writes a `HEARTBEAT` when it wrote nothing else for this long.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);

/// A connection that received no frame for this long is down with
/// [`crate::DownReason::TimedOut`] (a half-open or stalled peer).
pub const LIVENESS_TIMEOUT: Duration = Duration::from_millis(2_000);

/// The whole handshake (connect excluded) must finish within this time.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(2_000);

pub(crate) const MAGIC: &[u8; 4] = b"ZLMT";

/// The one-byte frame kinds (first byte of every frame body).
pub(crate) mod kind {
    pub(crate) const HELLO: u8 = 0x01;
    pub(crate) const REJECT: u8 = 0x02;
    pub(crate) const CONFIRM: u8 = 0x03;
    pub(crate) const COMMIT: u8 = 0x04;
    pub(crate) const HEARTBEAT: u8 = 0x10;
    pub(crate) const GOODBYE: u8 = 0x11;
    pub(crate) const CREDIT: u8 = 0x12;
    pub(crate) const APP: u8 = 0x20;
    pub(crate) const CONTROL: u8 = 0x21;
    pub(crate) const REPLY: u8 = 0x22;
}

/// Plane codes of a `CREDIT` frame.
pub(crate) const PLANE_APP: u8 = 1;
pub(crate) const PLANE_CONTROL: u8 = 2;

/// The codec of every connection: 4-byte big-endian length prefix, at most [`MAX_FRAME_LEN`].
pub(crate) fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .big_endian()
        .max_frame_length(MAX_FRAME_LEN)
        .new_codec()
}

/// A receive window one side grants the other for one plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Frames the remote may have delivered but not yet consumed.
    pub count: u32,
    /// Frame bytes the remote may have delivered but not yet consumed (one frame larger than
    /// this still passes when nothing is outstanding).
    pub bytes: u64,
}

/// What one side says about itself in `HELLO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) version: u8,
    pub(crate) mesh: MeshName,
    pub(crate) rid: RoutingId,
    pub(crate) generation: Generation,
    pub(crate) app_window: Window,
    pub(crate) control_window: Window,
    pub(crate) channels: BTreeSet<ChannelName>,
}

fn malformed(why: impl Into<String>) -> HandshakeRejection {
    HandshakeRejection::Malformed(why.into())
}

fn take_u8(b: &mut Bytes) -> Result<u8, HandshakeRejection> {
    if b.remaining() < 1 {
        return Err(malformed("truncated"));
    }
    Ok(b.get_u8())
}

fn take_u16(b: &mut Bytes) -> Result<u16, HandshakeRejection> {
    if b.remaining() < 2 {
        return Err(malformed("truncated"));
    }
    Ok(b.get_u16())
}

fn take_u32(b: &mut Bytes) -> Result<u32, HandshakeRejection> {
    if b.remaining() < 4 {
        return Err(malformed("truncated"));
    }
    Ok(b.get_u32())
}

fn take_u64(b: &mut Bytes) -> Result<u64, HandshakeRejection> {
    if b.remaining() < 8 {
        return Err(malformed("truncated"));
    }
    Ok(b.get_u64())
}

fn take_slice(b: &mut Bytes, len: usize) -> Result<Bytes, HandshakeRejection> {
    if b.remaining() < len {
        return Err(malformed("truncated"));
    }
    Ok(b.split_to(len))
}

fn take_str8(b: &mut Bytes) -> Result<String, HandshakeRejection> {
    let len = usize::from(take_u8(b)?);
    let raw = take_slice(b, len)?;
    String::from_utf8(raw.to_vec()).map_err(|_| malformed("a name is not UTF-8"))
}

fn take_str16(b: &mut Bytes) -> Result<String, HandshakeRejection> {
    let len = usize::from(take_u16(b)?);
    let raw = take_slice(b, len)?;
    Ok(String::from_utf8_lossy(&raw).into_owned())
}

fn put_str8(out: &mut BytesMut, s: &[u8]) {
    // Every name written here is validated to at most 255 bytes.
    out.put_u8(s.len().min(255) as u8);
    out.put_slice(&s[..s.len().min(255)]);
}

fn put_str16(out: &mut BytesMut, s: &str) {
    let s = &s.as_bytes()[..s.len().min(1024)];
    out.put_u16(s.len() as u16);
    out.put_slice(s);
}

impl Hello {
    pub(crate) fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(64);
        out.put_u8(kind::HELLO);
        out.put_slice(MAGIC);
        out.put_u8(self.version);
        put_str8(&mut out, self.mesh.as_str().as_bytes());
        put_str8(&mut out, self.rid.as_bytes());
        out.put_u64(self.generation.get());
        out.put_u32(self.app_window.count);
        out.put_u64(self.app_window.bytes);
        out.put_u32(self.control_window.count);
        out.put_u64(self.control_window.bytes);
        out.put_u16(self.channels.len().min(usize::from(u16::MAX)) as u16);
        for c in self.channels.iter().take(usize::from(u16::MAX)) {
            put_str8(&mut out, c.as_str().as_bytes());
        }
        out.freeze()
    }

    /// Decodes a `HELLO` body (kind byte included). A version other than
    /// [`PROTOCOL_VERSION`] is reported before anything after it is read.
    pub(crate) fn decode(mut b: Bytes) -> Result<Self, HandshakeRejection> {
        if take_u8(&mut b)? != kind::HELLO {
            return Err(malformed("expected HELLO"));
        }
        let magic = take_slice(&mut b, 4)?;
        if magic.as_ref() != MAGIC {
            return Err(malformed("bad magic"));
        }
        let version = take_u8(&mut b)?;
        if version != PROTOCOL_VERSION {
            return Err(HandshakeRejection::ProtocolVersion {
                ours: PROTOCOL_VERSION,
                theirs: version,
            });
        }
        let mesh = MeshName::new(take_str8(&mut b)?).map_err(|e| malformed(e.to_string()))?;
        let rid_len = usize::from(take_u8(&mut b)?);
        let rid = RoutingId::new(take_slice(&mut b, rid_len)?.to_vec())
            .map_err(|e| malformed(e.to_string()))?;
        let generation =
            Generation::new(take_u64(&mut b)?).map_err(|e| malformed(e.to_string()))?;
        let app_window = Window {
            count: take_u32(&mut b)?,
            bytes: take_u64(&mut b)?,
        };
        let control_window = Window {
            count: take_u32(&mut b)?,
            bytes: take_u64(&mut b)?,
        };
        if app_window.count == 0 || control_window.count == 0 {
            return Err(malformed("a receive window of 0 frames"));
        }
        let n = take_u16(&mut b)?;
        let mut channels = BTreeSet::new();
        for _ in 0..n {
            let c = ChannelName::new(take_str8(&mut b)?).map_err(|e| malformed(e.to_string()))?;
            if !channels.insert(c) {
                return Err(malformed("duplicate ChannelName"));
            }
        }
        if b.has_remaining() {
            return Err(malformed("trailing bytes after HELLO"));
        }
        Ok(Self {
            version,
            mesh,
            rid,
            generation,
            app_window,
            control_window,
            channels,
        })
    }
}

fn join_names(names: &[String]) -> String {
    names.join("\0")
}

fn split_names(joined: &str) -> Vec<String> {
    if joined.is_empty() {
        Vec::new()
    } else {
        joined.split('\0').map(str::to_owned).collect()
    }
}

/// `REJECT`: kind, code, then the rejection's expected and found values as two u16-length
/// UTF-8 strings (empty when the rejection has none).
pub(crate) fn encode_reject(r: &HandshakeRejection) -> Bytes {
    let (expected, found) = match r {
        HandshakeRejection::ProtocolVersion { ours, theirs } => {
            (ours.to_string(), theirs.to_string())
        }
        HandshakeRejection::MeshName { expected, found }
        | HandshakeRejection::RoutingId { expected, found }
        | HandshakeRejection::SecurityIdentity { expected, found } => {
            (expected.clone(), found.clone())
        }
        HandshakeRejection::LifecycleGeneration { expected, found } => {
            (expected.to_string(), found.to_string())
        }
        HandshakeRejection::StaleGeneration { current, found } => {
            (current.to_string(), found.to_string())
        }
        HandshakeRejection::ChannelSet { expected, found } => {
            (join_names(expected), join_names(found))
        }
        HandshakeRejection::Malformed(why) => (String::new(), why.clone()),
        HandshakeRejection::SameRoutingId | HandshakeRejection::Duplicate => {
            (String::new(), String::new())
        }
    };
    let mut out = BytesMut::with_capacity(8 + expected.len() + found.len());
    out.put_u8(kind::REJECT);
    out.put_u8(r.code());
    put_str16(&mut out, &expected);
    put_str16(&mut out, &found);
    out.freeze()
}

pub(crate) fn decode_reject(mut b: Bytes) -> Result<HandshakeRejection, HandshakeRejection> {
    if take_u8(&mut b)? != kind::REJECT {
        return Err(malformed("expected REJECT"));
    }
    let code = take_u8(&mut b)?;
    let expected = take_str16(&mut b)?;
    let found = take_str16(&mut b)?;
    let num = |s: &str| {
        s.parse::<u64>()
            .map_err(|_| malformed("bad number in REJECT"))
    };
    Ok(match code {
        1 => HandshakeRejection::ProtocolVersion {
            ours: num(&expected)?.min(255) as u8,
            theirs: num(&found)?.min(255) as u8,
        },
        2 => HandshakeRejection::MeshName { expected, found },
        3 => HandshakeRejection::RoutingId { expected, found },
        4 => HandshakeRejection::SameRoutingId,
        5 => HandshakeRejection::LifecycleGeneration {
            expected: num(&expected)?,
            found: num(&found)?,
        },
        6 => HandshakeRejection::StaleGeneration {
            current: num(&expected)?,
            found: num(&found)?,
        },
        7 => HandshakeRejection::ChannelSet {
            expected: split_names(&expected),
            found: split_names(&found),
        },
        8 => HandshakeRejection::Duplicate,
        9 => HandshakeRejection::Malformed(found),
        10 => HandshakeRejection::SecurityIdentity { expected, found },
        other => HandshakeRejection::Malformed(format!("unknown REJECT code {other}")),
    })
}

/// A frame with only its kind byte.
pub(crate) fn bare(kind: u8) -> Bytes {
    Bytes::copy_from_slice(&[kind])
}

/// `GOODBYE`: kind, reason byte (0 = shutdown or local close, 2 = superseded).
pub(crate) fn goodbye(reason: u8) -> Bytes {
    Bytes::copy_from_slice(&[kind::GOODBYE, reason])
}

/// `CREDIT`: kind, plane, count u32, bytes u64.
pub(crate) fn credit(plane: u8, count: u32, bytes: u64) -> Bytes {
    let mut out = BytesMut::with_capacity(14);
    out.put_u8(kind::CREDIT);
    out.put_u8(plane);
    out.put_u32(count);
    out.put_u64(bytes);
    out.freeze()
}

pub(crate) fn decode_credit(mut b: Bytes) -> Result<(u8, u32, u64), TransportError> {
    if b.len() != 14 {
        return Err(TransportError::Protocol(
            "CREDIT frame of the wrong size".into(),
        ));
    }
    b.advance(1);
    Ok((b.get_u8(), b.get_u32(), b.get_u64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            mesh: MeshName::new("play").unwrap(),
            rid: RoutingId::new(vec![1, 2, 3]).unwrap(),
            generation: Generation::new(7).unwrap(),
            app_window: Window {
                count: 10,
                bytes: 1000,
            },
            control_window: Window {
                count: 20,
                bytes: 2000,
            },
            channels: ["a", "b"]
                .into_iter()
                .map(|c| ChannelName::new(c).unwrap())
                .collect(),
        }
    }

    #[test]
    fn hello_round_trips() {
        let h = hello();
        assert_eq!(Hello::decode(h.encode()).unwrap(), h);
    }

    #[test]
    fn hello_of_another_version_is_a_version_rejection() {
        let mut h = hello();
        h.version = 2;
        assert_eq!(
            Hello::decode(h.encode()).unwrap_err(),
            HandshakeRejection::ProtocolVersion {
                ours: PROTOCOL_VERSION,
                theirs: 2
            }
        );
    }

    #[test]
    fn truncated_hello_is_malformed() {
        let full = hello().encode();
        for cut in 0..full.len() {
            let r = Hello::decode(full.slice(..cut)).unwrap_err();
            assert!(
                matches!(r, HandshakeRejection::Malformed(_)),
                "cut {cut}: {r:?}"
            );
        }
    }

    #[test]
    fn every_rejection_round_trips_through_reject() {
        let all = [
            HandshakeRejection::ProtocolVersion { ours: 1, theirs: 9 },
            HandshakeRejection::MeshName {
                expected: "a".into(),
                found: "b".into(),
            },
            HandshakeRejection::RoutingId {
                expected: "01".into(),
                found: "02".into(),
            },
            HandshakeRejection::SameRoutingId,
            HandshakeRejection::LifecycleGeneration {
                expected: 3,
                found: 4,
            },
            HandshakeRejection::StaleGeneration {
                current: 5,
                found: 4,
            },
            HandshakeRejection::ChannelSet {
                expected: vec!["x".into(), "y".into()],
                found: vec![],
            },
            HandshakeRejection::Duplicate,
            HandshakeRejection::Malformed("why".into()),
        ];
        for r in all {
            assert_eq!(decode_reject(encode_reject(&r)).unwrap(), r);
        }
    }
}
