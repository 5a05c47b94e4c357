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
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PacketName(String);

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
        Ok(Self(name))
    }

    /// The packet name of the message type `M`.
    pub fn of<M: Message>() -> Result<Self, ZLinkError> {
        Self::new(M::PACKET)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
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

impl fmt::Display for PacketName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for PacketName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PacketName({:?})", self.0)
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

    #[test]
    fn packet_names_are_compared_byte_for_byte() {
        assert_ne!(
            PacketName::new("Ping").unwrap(),
            PacketName::new("ping").unwrap()
        );
    }
}
