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

/// Parses `host:port` (IPv6 as `[addr]:port`), port 1..=65535.
pub(crate) fn parse_endpoint(text: &str) -> Result<PeerEndpoint, String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (addr, port) = rest
            .split_once("]:")
            .ok_or_else(|| "an IPv6 endpoint is `[addr]:port`".to_owned())?;
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{addr:?} is not an IPv6 address"));
        }
        (addr, port)
    } else {
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| "missing `:port`".to_owned())?;
        if host.contains(':') {
            return Err("an IPv6 host must be bracketed: `[addr]:port`".to_owned());
        }
        if let Some(reason) = host_problem(host) {
            return Err(format!("host: {reason}"));
        }
        (host, port)
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("port {port:?} is not a decimal number"));
    }
    let port = match port.parse::<u32>() {
        Ok(p @ 1..=65535) => p as u16,
        _ => return Err(format!("port {port} is outside 1..=65535")),
    };
    Ok(PeerEndpoint {
        host: host.to_owned(),
        port,
    })
}

/// Why `host` is neither an IP address nor a DNS host name (RFC 1123 labels), if it is not.
pub(crate) fn host_problem(host: &str) -> Option<&'static str> {
    if host.is_empty() {
        return Some("empty");
    }
    if host.parse::<IpAddr>().is_ok() {
        return None;
    }
    if host.len() > 253 {
        return Some("a host name longer than 253 bytes");
    }
    for label in host.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Some("a host name label is empty or longer than 63 bytes");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Some("neither an IP address nor a host name of [A-Za-z0-9-] labels");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some("a host name label starts or ends with `-`");
        }
    }
    None
}
