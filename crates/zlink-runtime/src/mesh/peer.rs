//! The peer vocabulary a running MeshNode needs (spec 06 §4, §5): its topology, validated
//! `host:port` endpoints and manual peer intents.

use std::fmt;
use std::net::IpAddr;

use zlink_codec::RoutingId;

/// How a MeshNode finds its peers (spec 06 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Topology {
    /// Automatic: the node publishes its descriptor and discovers peers through the Location
    /// Store; its routing id is `<prefix>-<uuid v4>`, new per lifecycle. Needs a Location Store.
    #[default]
    Automatic,
    /// Explicit manual topology: only manual peers; no descriptor, no discovery. The only
    /// topology a fixed routing id may use.
    Manual,
}

/// A validated `host:port` endpoint (port 1..=65535; an IPv6 host without brackets).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerEndpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl PeerEndpoint {
    /// The host (IP address or DNS name; IPv6 without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port, 1..=65535.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl fmt::Display for PeerEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A validated manual peer connect intent (spec 06 §5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualPeer {
    pub(crate) endpoint: PeerEndpoint,
    pub(crate) expected_rid: Option<RoutingId>,
}

impl ManualPeer {
    /// Where to connect.
    pub fn endpoint(&self) -> &PeerEndpoint {
        &self.endpoint
    }

    /// The routing id the handshake must present; `None` lets the handshake determine it.
    pub fn expected_routing_id(&self) -> Option<&RoutingId> {
        self.expected_rid.as_ref()
    }
}

/// Why a `host:port` endpoint text is not valid (spec 06 §5, §23).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// It starts with `[` but is not `[addr]:port`.
    #[error("an IPv6 endpoint is `[addr]:port`")]
    UnclosedIpv6Brackets,
    /// The bracketed part is not an IPv6 address.
    #[error("{addr:?} is not an IPv6 address")]
    NotIpv6 {
        /// The text between the brackets.
        addr: String,
    },
    /// There is no `:port`.
    #[error("missing `:port`")]
    MissingPort,
    /// An IPv6 host without brackets (its colons are ambiguous with the port's).
    #[error("an IPv6 host must be bracketed: `[addr]:port`")]
    UnbracketedIpv6,
    /// The host is neither an IP address nor a DNS host name.
    #[error("host: {0}")]
    Host(#[source] HostProblem),
    /// The port is not a decimal number.
    #[error("port {port:?} is not a decimal number")]
    PortNotDecimal {
        /// The port text.
        port: String,
    },
    /// The port is outside 1..=65535.
    #[error("port {port} is outside 1..=65535")]
    PortOutOfRange {
        /// The port text.
        port: String,
    },
}

/// Why a host is neither an IP address nor a DNS host name of RFC 1123 labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum HostProblem {
    /// The host is empty.
    #[error("empty")]
    Empty,
    /// A host name longer than 253 bytes.
    #[error("a host name longer than 253 bytes")]
    TooLong,
    /// A label is empty or longer than 63 bytes.
    #[error("a host name label is empty or longer than 63 bytes")]
    LabelLength,
    /// A label holds a byte outside `[A-Za-z0-9-]`.
    #[error("neither an IP address nor a host name of [A-Za-z0-9-] labels")]
    LabelCharacters,
    /// A label starts or ends with `-`.
    #[error("a host name label starts or ends with `-`")]
    LabelHyphen,
}

/// Parses `host:port` (IPv6 as `[addr]:port`), port 1..=65535.
pub(crate) fn parse_endpoint(text: &str) -> Result<PeerEndpoint, EndpointError> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (addr, port) = rest
            .split_once("]:")
            .ok_or(EndpointError::UnclosedIpv6Brackets)?;
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(EndpointError::NotIpv6 {
                addr: addr.to_owned(),
            });
        }
        (addr, port)
    } else {
        let (host, port) = text.rsplit_once(':').ok_or(EndpointError::MissingPort)?;
        if host.contains(':') {
            return Err(EndpointError::UnbracketedIpv6);
        }
        if let Some(problem) = host_problem(host) {
            return Err(EndpointError::Host(problem));
        }
        (host, port)
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(EndpointError::PortNotDecimal {
            port: port.to_owned(),
        });
    }
    let port = match port.parse::<u32>() {
        Ok(p @ 1..=65535) => p as u16,
        _ => {
            return Err(EndpointError::PortOutOfRange {
                port: port.to_owned(),
            });
        }
    };
    Ok(PeerEndpoint {
        host: host.to_owned(),
        port,
    })
}

/// Why `host` is neither an IP address nor a DNS host name (RFC 1123 labels), if it is not.
pub(crate) fn host_problem(host: &str) -> Option<HostProblem> {
    if host.is_empty() {
        return Some(HostProblem::Empty);
    }
    if host.parse::<IpAddr>().is_ok() {
        return None;
    }
    if host.len() > 253 {
        return Some(HostProblem::TooLong);
    }
    for label in host.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Some(HostProblem::LabelLength);
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Some(HostProblem::LabelCharacters);
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some(HostProblem::LabelHyphen);
        }
    }
    None
}
