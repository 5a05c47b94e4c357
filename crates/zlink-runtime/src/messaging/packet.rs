//! Typed messages and packet names (spec 06 §6, §9).
//!
//! Applications send business objects, never raw frames. A message type names its packet once
//! ([`Message::PACKET`]); the codec never takes part in choosing it (spec 06 §9).

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::ZLinkError;
use super::error_parts::InvalidText;

/// A typed message: a business object with a fixed packet name.
///
/// ```
/// use zlink_runtime::Message;
/// use zlink_runtime::Request;
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Ping { n: u32 }
/// impl Message for Ping { const PACKET: &'static str = "Ping"; }
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Pong { n: u32 }
/// impl Request for Ping { type Reply = Pong; }
/// ```
pub trait Message: Serialize + DeserializeOwned + Send + 'static {
    /// The packet name (validated as a [`PacketName`] when a handler is registered or the
    /// message is encoded).
    const PACKET: &'static str;
}

/// A message that expects a typed reply.
pub trait Request: Message {
    /// The reply's business type.
    type Reply: Serialize + DeserializeOwned + Send + 'static;
}

/// A validated packet name: 1..=[`PacketName::MAX_LEN`] (255) bytes of UTF-8 without control
/// characters, compared byte for byte.
///
/// 255 bytes matches the other names of a dispatch key (`MeshName`, `ChannelName`), so a
/// whole key stays small and every part fits a one-byte length prefix.
///
/// ```
/// use zlink_runtime::handler::PacketName;
/// assert!(PacketName::new("game.Move").is_ok());
/// assert!(PacketName::new("").is_err());
/// assert!(PacketName::new("a\nb").is_err());
/// ```
///
/// A clone does not allocate: the name of a message type is its `&'static str`, any other
/// name shared text.
#[derive(Clone)]
pub struct PacketName(Name);

#[derive(Clone)]
enum Name {
    /// A message type's [`Message::PACKET`].
    Static(&'static str),
    /// Any other validated name.
    Shared(std::sync::Arc<str>),
}

impl PacketName {
    /// Largest length in UTF-8 bytes.
    pub const MAX_LEN: usize = 255;

    /// Validates a packet name.
    pub fn new(name: impl Into<String>) -> Result<Self, ZLinkError> {
        Self::checked(name).map_err(|reason| ZLinkError::InvalidPacketName { reason })
    }

    /// Validates a packet name, saying only why it is invalid (for names read from a
    /// runtime-internal payload, where an invalid one is a protocol error).
    pub(crate) fn checked(name: impl Into<String>) -> Result<Self, InvalidText> {
        let name = name.into();
        check(&name)?;
        Ok(Self(Name::Shared(std::sync::Arc::from(name))))
    }

    /// The packet name of the message type `M`.
    pub fn of<M: Message>() -> Result<Self, ZLinkError> {
        check(M::PACKET).map_err(|reason| ZLinkError::InvalidPacketName { reason })?;
        Ok(Self(Name::Static(M::PACKET)))
    }

    /// A message type's name: `Some` static str (no copy, no UTF-8 check on send).
    pub(crate) fn as_static(&self) -> Option<&'static str> {
        match &self.0 {
            Name::Static(s) => Some(s),
            Name::Shared(_) => None,
        }
    }

    /// The name as shared bytes (no copy for a message type's name).
    pub(crate) fn to_bytes(&self) -> bytes::Bytes {
        match &self.0 {
            Name::Static(s) => bytes::Bytes::from_static(s.as_bytes()),
            Name::Shared(s) => bytes::Bytes::copy_from_slice(s.as_bytes()),
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Name::Static(s) => s,
            Name::Shared(s) => s,
        }
    }
}

fn check(name: &str) -> Result<(), InvalidText> {
    if name.is_empty() {
        return Err(InvalidText::Empty);
    }
    if name.len() > PacketName::MAX_LEN {
        return Err(InvalidText::TooLong {
            actual: name.len(),
            max: PacketName::MAX_LEN,
        });
    }
    if name.chars().any(char::is_control) {
        return Err(InvalidText::ControlCharacter);
    }
    Ok(())
}

impl PartialEq for PacketName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for PacketName {}

impl PartialOrd for PacketName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PacketName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for PacketName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Display for PacketName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for PacketName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PacketName({:?})", self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messaging::ErrorKind;

    #[test]
    fn packet_name_of_255_bytes_is_accepted_and_256_rejected() {
        assert_eq!(
            PacketName::new("p".repeat(255)).unwrap().as_str().len(),
            255
        );
        let err = PacketName::new("p".repeat(256)).unwrap_err();
        assert!(matches!(
            err,
            ZLinkError::InvalidPacketName {
                reason: InvalidText::TooLong {
                    actual: 256,
                    max: 255
                }
            }
        ));
        assert_eq!(err.kind(), ErrorKind::InvalidOperation);
    }

    #[test]
    fn empty_and_control_character_packet_names_are_rejected() {
        assert!(matches!(
            PacketName::new(""),
            Err(ZLinkError::InvalidPacketName {
                reason: InvalidText::Empty
            })
        ));
        for bad in ["a\0b", "tab\there", "line\n"] {
            assert!(matches!(
                PacketName::new(bad),
                Err(ZLinkError::InvalidPacketName {
                    reason: InvalidText::ControlCharacter
                })
            ));
        }
    }

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Ping;
    impl Message for Ping {
        const PACKET: &'static str = "Ping";
    }

    #[test]
    fn a_message_types_packet_name_equals_the_same_text_built_at_run_time() {
        let of = PacketName::of::<Ping>().unwrap();
        let built = PacketName::new(String::from("Ping")).unwrap();
        assert_eq!(of, built);
        let hash = |p: &PacketName| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            p.hash(&mut h);
            h.finish()
        };
        assert_eq!(hash(&of), hash(&built));
        assert_eq!(of.to_bytes(), built.to_bytes());
    }

    #[test]
    fn a_message_types_packet_name_is_sent_without_a_copy() {
        let of = PacketName::of::<Ping>().unwrap();
        assert_eq!(of.to_bytes().as_ptr(), Ping::PACKET.as_ptr());
    }

    #[test]
    fn packet_names_are_compared_byte_for_byte() {
        assert_ne!(
            PacketName::new("Ping").unwrap(),
            PacketName::new("ping").unwrap()
        );
    }
}
