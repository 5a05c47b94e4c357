//! Closed value sets of the store records.

use crate::error::CodecError;

macro_rules! closed_set {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The canonical JSON text.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// Parses the canonical text (exact, case-sensitive).
            pub fn parse(text: &str) -> Result<Self, CodecError> {
                match text {
                    $($text => Ok($name::$variant),)+
                    other => Err(CodecError::invalid_argument(
                        stringify!($name),
                        format!("{other:?} is not one of the allowed values"),
                    )),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

closed_set!(
    /// A published host's running state.
    HostState {
        /// `preparing`
        Preparing = "preparing",
        /// `serving`
        Serving = "serving",
        /// `relocating`
        Relocating = "relocating",
        /// `relocated`
        Relocated = "relocated",
        /// `draining`
        Draining = "draining",
        /// `stopped`
        Stopped = "stopped",
        /// `error`
        Error = "error",
    }
);

closed_set!(
    /// A MeshNode's object role.
    ObjectRole {
        /// `none`
        None = "none",
        /// `client`
        Client = "client",
        /// `server`
        Server = "server",
    }
);

closed_set!(
    /// An object kind as stored (Entry Spot is never stored: its Actor counts as `actor`).
    ObjectKind {
        /// `actor`
        Actor = "actor",
        /// `userSpot`
        UserSpot = "userSpot",
        /// `instanceSpot`
        InstanceSpot = "instanceSpot",
    }
);

impl ObjectKind {
    /// Whether this is a Spot kind.
    pub fn is_spot(self) -> bool {
        !matches!(self, Self::Actor)
    }

    /// The authority key segment of this kind.
    pub fn authority_kind(self) -> crate::keys::AuthorityKind {
        if self.is_spot() {
            crate::keys::AuthorityKind::Spot
        } else {
            crate::keys::AuthorityKind::Actor
        }
    }
}

closed_set!(
    /// A registered factory's relocation policy as published.
    RelocationPolicy {
        /// `unspecified`
        Unspecified = "unspecified",
        /// `disabled`
        Disabled = "disabled",
        /// `recreate`
        Recreate = "recreate",
        /// `snapshot`
        Snapshot = "snapshot",
    }
);

closed_set!(
    /// An authority allocation's state.
    AllocationState {
        /// `reserved`
        Reserved = "reserved",
        /// `active`
        Active = "active",
    }
);
