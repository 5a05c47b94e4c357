//! `creation-operation-terminal-v1`: the stored final result of one Create/GetOrCreate
//! operation (spec 21 §7, 06 §17).
//!
//! The value is stored as-is under the key
//! [`LogicalKey::creation_terminal`](crate::LogicalKey::creation_terminal) (source node RID,
//! source host run generation, OperationId), with a retention of 5 minutes past the original
//! deadline. It carries no network correlation and no reply route: a re-response is built
//! fresh with the current connection's correlation and route. The byte layout is defined in
//! `docs/formats.md`:
//!
//! ```text
//! tag 0x01 | outcome u8 | objectKind u8 | flags u8 | requestSha256 [32]
//! | objectGeneration u64 | id (u8 len) | meshName (u8 len) | nodeRid (u8 len)
//! | [Failed: failure (u16 len)] | [flags bit 0: reply (u32 len)] | digest [32]
//! ```
//!
//! Integers are big-endian; `digest` is the SHA-256 of every preceding byte. The whole value
//! is at most 1,048,576 bytes.
//!
//! ```
//! use zlink_codec::records::ObjectKind;
//! use zlink_codec::terminal::{CreationOutcome, CreationTerminal, ObjectRef};
//! use zlink_codec::{Generation, MeshName, ObjectId, RoutingId};
//!
//! let terminal = CreationTerminal {
//!     outcome: CreationOutcome::Created,
//!     object_ref: ObjectRef {
//!         object_kind: ObjectKind::Actor,
//!         id: ObjectId::new("user:42")?,
//!         object_generation: Generation::new(7)?,
//!         mesh_name: MeshName::new("main")?,
//!         node_rid: RoutingId::new(vec![1, 2, 3, 4])?,
//!     },
//!     request_sha256: zlink_codec::inline_ref::sha256(b"request"),
//!     reply: Some(b"welcome".to_vec()),
//! };
//! let bytes = terminal.encode()?;
//! assert_eq!(CreationTerminal::decode(&bytes)?, terminal);
//! # Ok::<(), zlink_codec::CodecError>(())
//! ```

use sha2::{Digest, Sha256};

use crate::error::CodecError;
use crate::ids::{Generation, MeshName, ObjectId, RoutingId};
use crate::records::ObjectKind;

/// Format name used in errors.
const FORMAT: &str = "creation-operation-terminal-v1";

/// The format tag (first byte).
pub const FORMAT_TAG: u8 = 0x01;

/// Largest encoded terminal: 1,048,576 bytes.
pub const MAX_TERMINAL_BYTES: usize = 1_048_576;

/// Largest failure description (UTF-8 bytes).
pub const MAX_FAILURE_BYTES: usize = 4_096;

const FLAG_REPLY: u8 = 0x01;
const DIGEST_LEN: usize = 32;

/// The result of a creation operation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CreationOutcome {
    /// A Ready incarnation of the same type already existed (GetOrCreate).
    Existing,
    /// The factory approved: the object is Ready.
    Created,
    /// The application normally declined.
    Rejected,
    /// The creation callback failed (typed failure; the text describes it).
    Failed {
        /// A description of the failure (at most 4,096 UTF-8 bytes).
        failure: String,
    },
}

impl CreationOutcome {
    fn code(&self) -> u8 {
        match self {
            Self::Existing => 1,
            Self::Created => 2,
            Self::Rejected => 3,
            Self::Failed { .. } => 4,
        }
    }
}

/// The ref a creation returns: global id, ObjectGeneration, and the location at the time.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// The object kind.
    pub object_kind: ObjectKind,
    /// The global ActorId or SpotId.
    pub id: ObjectId,
    /// The ObjectGeneration.
    pub object_generation: Generation,
    /// The MeshName at the time.
    pub mesh_name: MeshName,
    /// The node's RoutingId at the time.
    pub node_rid: RoutingId,
}

/// A stored creation final result.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CreationTerminal {
    /// Existing, Created, Rejected or Failed.
    pub outcome: CreationOutcome,
    /// The ref.
    pub object_ref: ObjectRef,
    /// SHA-256 of the creation request bytes: only the same request may read this terminal.
    pub request_sha256: [u8; 32],
    /// The optional application reply bytes.
    pub reply: Option<Vec<u8>>,
}

fn kind_code(k: ObjectKind) -> u8 {
    match k {
        ObjectKind::Actor => 1,
        ObjectKind::UserSpot => 2,
        ObjectKind::InstanceSpot => 3,
    }
}

fn malformed(reason: impl Into<String>) -> CodecError {
    CodecError::Envelope {
        format: FORMAT,
        reason: reason.into(),
    }
}

impl CreationTerminal {
    /// Whether a resend carrying this request SHA-256 may read this terminal.
    pub fn matches_request(&self, request_sha256: &[u8; 32]) -> bool {
        &self.request_sha256 == request_sha256
    }

    /// Encodes the value; fails if it would pass 1,048,576 bytes or the failure text passes
    /// 4,096 bytes.
    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        let r = &self.object_ref;
        let failure = match &self.outcome {
            CreationOutcome::Failed { failure } => Some(failure.as_bytes()),
            _ => None,
        };
        if let Some(f) = failure {
            if f.len() > MAX_FAILURE_BYTES {
                return Err(CodecError::TooLarge {
                    what: "creation failure description",
                    actual: f.len(),
                    max: MAX_FAILURE_BYTES,
                });
            }
        }
        let len = 4
            + 32
            + 8
            + 1
            + r.id.as_str().len()
            + 1
            + r.mesh_name.as_str().len()
            + 1
            + r.node_rid.as_bytes().len()
            + failure.map_or(0, |f| 2 + f.len())
            + self.reply.as_ref().map_or(0, |a| 4 + a.len())
            + DIGEST_LEN;
        if len > MAX_TERMINAL_BYTES {
            return Err(CodecError::TooLarge {
                what: FORMAT,
                actual: len,
                max: MAX_TERMINAL_BYTES,
            });
        }
        let mut out = Vec::with_capacity(len);
        out.push(FORMAT_TAG);
        out.push(self.outcome.code());
        out.push(kind_code(r.object_kind));
        out.push(if self.reply.is_some() { FLAG_REPLY } else { 0 });
        out.extend_from_slice(&self.request_sha256);
        out.extend_from_slice(&r.object_generation.get().to_be_bytes());
        // Names and routing ids are bounded to 255 bytes by their types.
        for part in [
            r.id.as_str().as_bytes(),
            r.mesh_name.as_str().as_bytes(),
            r.node_rid.as_bytes(),
        ] {
            out.push(part.len() as u8);
            out.extend_from_slice(part);
        }
        if let Some(f) = failure {
            out.extend_from_slice(&(f.len() as u16).to_be_bytes());
            out.extend_from_slice(f);
        }
        if let Some(a) = &self.reply {
            // Bounded by MAX_TERMINAL_BYTES above.
            out.extend_from_slice(&(a.len() as u32).to_be_bytes());
            out.extend_from_slice(a);
        }
        let digest = Sha256::digest(&out);
        out.extend_from_slice(&digest);
        debug_assert_eq!(out.len(), len);
        Ok(out)
    }

    /// Decodes and verifies a value (tag, digest, every field).
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        if bytes.len() > MAX_TERMINAL_BYTES {
            return Err(CodecError::TooLarge {
                what: FORMAT,
                actual: bytes.len(),
                max: MAX_TERMINAL_BYTES,
            });
        }
        let Some(&tag) = bytes.first() else {
            return Err(malformed("empty"));
        };
        if tag != FORMAT_TAG {
            return Err(CodecError::UnsupportedFormatTag {
                format: FORMAT,
                tag,
            });
        }
        if bytes.len() < 4 + 32 + 8 + 3 + DIGEST_LEN {
            return Err(malformed("truncated"));
        }
        let (body, digest) = bytes.split_at(bytes.len() - DIGEST_LEN);
        if Sha256::digest(body).as_slice() != digest {
            return Err(malformed("digest mismatch"));
        }
        let mut rd = Reader { b: body, i: 1 };
        let outcome_code = rd.u8()?;
        let object_kind = match rd.u8()? {
            1 => ObjectKind::Actor,
            2 => ObjectKind::UserSpot,
            3 => ObjectKind::InstanceSpot,
            k => return Err(malformed(format!("unknown object kind {k}"))),
        };
        let flags = rd.u8()?;
        if flags & !FLAG_REPLY != 0 {
            return Err(malformed(format!("unknown flags 0x{flags:02x}")));
        }
        let request_sha256: [u8; 32] = rd
            .take(32)?
            .try_into()
            .map_err(|_| malformed("truncated"))?;
        let generation =
            u64::from_be_bytes(rd.take(8)?.try_into().map_err(|_| malformed("truncated"))?);
        let object_generation =
            Generation::new(generation).map_err(|e| malformed(e.to_string()))?;
        let id = rd.short_str()?;
        let id = ObjectId::new(id).map_err(|e| malformed(e.to_string()))?;
        let mesh = rd.short_str()?;
        let mesh_name = MeshName::new(mesh).map_err(|e| malformed(e.to_string()))?;
        let rid_len = usize::from(rd.u8()?);
        let node_rid = RoutingId::new(rd.take(rid_len)?).map_err(|e| malformed(e.to_string()))?;
        let outcome = match outcome_code {
            1 => CreationOutcome::Existing,
            2 => CreationOutcome::Created,
            3 => CreationOutcome::Rejected,
            4 => {
                let n = usize::from(u16::from_be_bytes([rd.u8()?, rd.u8()?]));
                if n > MAX_FAILURE_BYTES {
                    return Err(malformed("failure description over 4,096 bytes"));
                }
                let failure = std::str::from_utf8(rd.take(n)?)
                    .map_err(|_| malformed("failure description is not UTF-8"))?
                    .to_owned();
                CreationOutcome::Failed { failure }
            }
            o => return Err(malformed(format!("unknown outcome {o}"))),
        };
        let reply = if flags & FLAG_REPLY != 0 {
            let n = u32::from_be_bytes(rd.take(4)?.try_into().map_err(|_| malformed("truncated"))?);
            Some(rd.take(n as usize)?.to_vec())
        } else {
            None
        };
        if rd.i != body.len() {
            return Err(malformed("trailing bytes"));
        }
        Ok(Self {
            outcome,
            object_ref: ObjectRef {
                object_kind,
                id,
                object_generation,
                mesh_name,
                node_rid,
            },
            request_sha256,
            reply,
        })
    }
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .i
            .checked_add(n)
            .filter(|e| *e <= self.b.len())
            .ok_or_else(|| malformed("truncated"))?;
        let s = &self.b[self.i..end];
        self.i = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }

    fn short_str(&mut self) -> Result<String, CodecError> {
        let n = usize::from(self.u8()?);
        let s = self.take(n)?;
        std::str::from_utf8(s)
            .map(str::to_owned)
            .map_err(|_| malformed("a name is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terminal(outcome: CreationOutcome, reply: Option<Vec<u8>>) -> CreationTerminal {
        CreationTerminal {
            outcome,
            object_ref: ObjectRef {
                object_kind: ObjectKind::UserSpot,
                id: ObjectId::new("room:1").unwrap(),
                object_generation: Generation::new(12).unwrap(),
                mesh_name: MeshName::new("main").unwrap(),
                node_rid: RoutingId::new(vec![1, 2, 3, 4]).unwrap(),
            },
            request_sha256: [0x58; 32],
            reply,
        }
    }

    #[test]
    fn every_outcome_round_trips() {
        for (o, reply) in [
            (CreationOutcome::Existing, None),
            (CreationOutcome::Created, Some(b"hi".to_vec())),
            (CreationOutcome::Created, Some(vec![])),
            (CreationOutcome::Rejected, Some(b"no".to_vec())),
            (
                CreationOutcome::Failed {
                    failure: "boom".into(),
                },
                None,
            ),
        ] {
            let t = terminal(o, reply);
            assert_eq!(CreationTerminal::decode(&t.encode().unwrap()).unwrap(), t);
        }
    }

    #[test]
    fn layout_starts_with_tag_outcome_kind_flags_and_request_sha() {
        let b = terminal(CreationOutcome::Created, Some(b"x".to_vec()))
            .encode()
            .unwrap();
        assert_eq!(&b[..4], &[0x01, 0x02, 0x02, 0x01]);
        assert_eq!(&b[4..36], &[0x58; 32]);
        assert_eq!(&b[36..44], &12u64.to_be_bytes());
        assert_eq!(
            &b[b.len() - 32..],
            Sha256::digest(&b[..b.len() - 32]).as_slice()
        );
    }

    #[test]
    fn one_mib_terminal_is_accepted_and_one_byte_more_rejected() {
        let base = terminal(CreationOutcome::Created, Some(vec![]))
            .encode()
            .unwrap()
            .len();
        let fit = terminal(
            CreationOutcome::Created,
            Some(vec![7; MAX_TERMINAL_BYTES - base]),
        );
        let bytes = fit.encode().unwrap();
        assert_eq!(bytes.len(), MAX_TERMINAL_BYTES);
        assert_eq!(CreationTerminal::decode(&bytes).unwrap(), fit);
        let over = terminal(
            CreationOutcome::Created,
            Some(vec![7; MAX_TERMINAL_BYTES - base + 1]),
        );
        assert!(matches!(over.encode(), Err(CodecError::TooLarge { .. })));
        let mut too_long = bytes;
        too_long.push(0);
        assert!(matches!(
            CreationTerminal::decode(&too_long),
            Err(CodecError::TooLarge { .. })
        ));
    }

    #[test]
    fn failure_text_bound_is_4096_bytes() {
        let ok = terminal(
            CreationOutcome::Failed {
                failure: "f".repeat(MAX_FAILURE_BYTES),
            },
            None,
        );
        assert!(ok.encode().is_ok());
        let over = terminal(
            CreationOutcome::Failed {
                failure: "f".repeat(MAX_FAILURE_BYTES + 1),
            },
            None,
        );
        assert!(over.encode().is_err());
    }

    #[test]
    fn unknown_tag_is_an_explicit_error() {
        let mut b = terminal(CreationOutcome::Existing, None).encode().unwrap();
        b[0] = 0x02;
        assert!(matches!(
            CreationTerminal::decode(&b),
            Err(CodecError::UnsupportedFormatTag { tag: 0x02, .. })
        ));
    }

    #[test]
    fn any_flipped_byte_is_rejected() {
        let b = terminal(CreationOutcome::Rejected, Some(b"why".to_vec()))
            .encode()
            .unwrap();
        for i in 0..b.len() {
            let mut t = b.clone();
            t[i] ^= 0x01;
            assert!(CreationTerminal::decode(&t).is_err(), "byte {i}");
        }
        assert!(CreationTerminal::decode(&b[..b.len() - 1]).is_err());
        assert!(CreationTerminal::decode(&[]).is_err());
    }

    #[test]
    fn matches_only_the_same_request() {
        let t = terminal(CreationOutcome::Created, None);
        assert!(t.matches_request(&[0x58; 32]));
        assert!(!t.matches_request(&[0x59; 32]));
    }
}
