//! The relocation settings of the root (spec 06 §3, 28 §5), validated at startup before any
//! socket binds. They apply to new relocation admission; the runtime never
//! tunes them by observing round-trip time or load.

use std::time::Duration;

use zlink_relocation::TransferSettings;
use zlink_relocation::transfer::{
    DEFAULT_CHUNK_LIMIT, DEFAULT_NODE_IN_FLIGHT_BUDGET, DEFAULT_PAYLOAD_MEMORY_CAP,
    DEFAULT_PEER_IN_FLIGHT_BUDGET,
};

/// The default Relocate deadline (spec 28 §2): a host Relocate's, and a SpotWide move's when
/// none is given.
pub const DEFAULT_RELOCATE_DEADLINE: Duration = Duration::from_secs(30);

/// A relocation setting outside its range, reported at startup before any Store request or
/// socket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RelocationConfigError {
    /// One of the values that must be positive is zero.
    #[error("relocation option `{option}` must be positive")]
    NotPositive {
        /// The option's name, as the spec spells it.
        option: &'static str,
    },
    /// A transfer setting outside its range (spec 06 §3, 28 §5): the chunk limit above the
    /// transport frame limit (less the envelope allowance) or below one data byte, or a zero
    /// payload memory cap.
    #[error("relocation transfer setting: {0}")]
    Transfer(#[source] zlink_relocation::transfer::SettingsError),
}

/// The relocation settings (spec 06 §3 transfer settings, 28 §5 unit and callback caps).
///
/// ```
/// use zlink_runtime::relocate::RelocationOptions;
/// let options = RelocationOptions::default().payload_chunk_limit(64 * 1024);
/// assert!(options.validate().is_ok());
/// // Above the transport frame limit (less the envelope allowance): a startup error.
/// let bad = RelocationOptions::default().payload_chunk_limit(17 * 1024 * 1024);
/// assert!(bad.validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelocationOptions {
    /// `RelocationPayloadChunkLimit`: the cap on one encoded chunk (default 256 KiB; 47 B up
    /// to the transport frame limit less its 64 KiB envelope allowance, 16 MiB).
    pub payload_chunk_limit: usize,
    /// `RelocationInFlightPayloadBudget`: chunk bytes one source node transmits at once on one
    /// peer connection (default 16 MiB; 0 = not applied).
    pub in_flight_payload_budget: u64,
    /// `RelocationNodeInFlightPayloadBudget`: the same sum for the whole source node (default
    /// 0 = not applied).
    pub node_in_flight_payload_budget: u64,
    /// `RelocationCutoverWaitTimeout`: how long the target waits for cutover after its
    /// relay-ready reply, and how long the source keeps the cutover copy (default 1,000 ms;
    /// positive).
    pub cutover_wait_timeout: Duration,
    /// `MaxActiveOutboundRelocations`: units the source moves at once (default 64; positive).
    pub max_active_outbound: u32,
    /// `MaxActiveInboundRelocations`: units the target restores at once (default 64;
    /// positive).
    pub max_active_inbound: u32,
    /// `MaxRelocationPayloadInFlightBytes`: encoded payload held per process (default
    /// 256 MiB; positive).
    pub max_payload_in_flight_bytes: u64,
    /// `MaxConcurrentRelocationCaptures`: concurrent `Capture` callbacks (default 8; positive).
    pub max_concurrent_captures: u32,
    /// `MaxConcurrentRelocationRestores`: concurrent `Restore` callbacks (default 8; positive).
    pub max_concurrent_restores: u32,
}

impl Default for RelocationOptions {
    fn default() -> Self {
        RelocationOptions {
            payload_chunk_limit: DEFAULT_CHUNK_LIMIT,
            in_flight_payload_budget: DEFAULT_PEER_IN_FLIGHT_BUDGET,
            node_in_flight_payload_budget: DEFAULT_NODE_IN_FLIGHT_BUDGET,
            cutover_wait_timeout: Duration::from_millis(1000),
            max_active_outbound: 64,
            max_active_inbound: 64,
            max_payload_in_flight_bytes: DEFAULT_PAYLOAD_MEMORY_CAP,
            max_concurrent_captures: 8,
            max_concurrent_restores: 8,
        }
    }
}

impl RelocationOptions {
    /// Sets `RelocationPayloadChunkLimit` (bytes of one encoded chunk).
    pub fn payload_chunk_limit(mut self, bytes: usize) -> Self {
        self.payload_chunk_limit = bytes;
        self
    }

    /// Sets `RelocationInFlightPayloadBudget` (0 = not applied).
    pub fn in_flight_payload_budget(mut self, bytes: u64) -> Self {
        self.in_flight_payload_budget = bytes;
        self
    }

    /// Sets `RelocationNodeInFlightPayloadBudget` (0 = not applied).
    pub fn node_in_flight_payload_budget(mut self, bytes: u64) -> Self {
        self.node_in_flight_payload_budget = bytes;
        self
    }

    /// Sets `RelocationCutoverWaitTimeout`.
    pub fn cutover_wait_timeout(mut self, d: Duration) -> Self {
        self.cutover_wait_timeout = d;
        self
    }

    /// Sets `MaxActiveOutboundRelocations`.
    pub fn max_active_outbound(mut self, n: u32) -> Self {
        self.max_active_outbound = n;
        self
    }

    /// Sets `MaxActiveInboundRelocations`.
    pub fn max_active_inbound(mut self, n: u32) -> Self {
        self.max_active_inbound = n;
        self
    }

    /// Sets `MaxRelocationPayloadInFlightBytes`.
    pub fn max_payload_in_flight_bytes(mut self, bytes: u64) -> Self {
        self.max_payload_in_flight_bytes = bytes;
        self
    }

    /// Sets `MaxConcurrentRelocationCaptures`.
    pub fn max_concurrent_captures(mut self, n: u32) -> Self {
        self.max_concurrent_captures = n;
        self
    }

    /// Sets `MaxConcurrentRelocationRestores`.
    pub fn max_concurrent_restores(mut self, n: u32) -> Self {
        self.max_concurrent_restores = n;
        self
    }

    /// Checks every setting: the chunk limit within its range, the cutover wait and the five
    /// caps positive (budgets may be 0 = not applied).
    pub fn validate(&self) -> Result<(), RelocationConfigError> {
        self.transfer()?;
        if self.cutover_wait_timeout.is_zero() {
            return Err(RelocationConfigError::NotPositive {
                option: "relocationCutoverWaitTimeout",
            });
        }
        let positive = [
            ("maxActiveOutboundRelocations", self.max_active_outbound),
            ("maxActiveInboundRelocations", self.max_active_inbound),
            (
                "maxConcurrentRelocationCaptures",
                self.max_concurrent_captures,
            ),
            (
                "maxConcurrentRelocationRestores",
                self.max_concurrent_restores,
            ),
        ];
        for (option, value) in positive {
            if value == 0 {
                return Err(RelocationConfigError::NotPositive { option });
            }
        }
        Ok(())
    }

    /// The direct-transfer settings these options give (chunk limit, budgets, payload memory).
    pub fn transfer(&self) -> Result<TransferSettings, RelocationConfigError> {
        TransferSettings::new(
            self.payload_chunk_limit,
            self.in_flight_payload_budget,
            self.node_in_flight_payload_budget,
            self.max_payload_in_flight_bytes,
        )
        .map_err(RelocationConfigError::Transfer)
    }
}

#[cfg(test)]
mod tests {
    use zlink_relocation::transfer::{MAX_CHUNK_LIMIT, MIN_CHUNK_LIMIT};

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn defaults_are_the_specified_values_and_valid() {
        let d = RelocationOptions::default();
        assert_eq!(d.payload_chunk_limit, 256 * 1024);
        assert_eq!(d.in_flight_payload_budget, 16 * 1024 * 1024);
        assert_eq!(d.node_in_flight_payload_budget, 0);
        assert_eq!(d.cutover_wait_timeout, ms(1000));
        assert_eq!((d.max_active_outbound, d.max_active_inbound), (64, 64));
        assert_eq!(d.max_payload_in_flight_bytes, 256 * 1024 * 1024);
        assert_eq!(
            (d.max_concurrent_captures, d.max_concurrent_restores),
            (8, 8)
        );
        assert_eq!(d.validate(), Ok(()));
    }

    #[test]
    fn chunk_limit_up_to_the_frame_bound_is_accepted_and_one_byte_more_is_refused() {
        let at = RelocationOptions::default().payload_chunk_limit(MAX_CHUNK_LIMIT);
        assert_eq!(at.validate(), Ok(()));
        let past = RelocationOptions::default().payload_chunk_limit(MAX_CHUNK_LIMIT + 1);
        assert!(matches!(
            past.validate(),
            Err(RelocationConfigError::Transfer(_))
        ));
        let smallest = RelocationOptions::default().payload_chunk_limit(MIN_CHUNK_LIMIT);
        assert_eq!(smallest.validate(), Ok(()));
        let below = RelocationOptions::default().payload_chunk_limit(MIN_CHUNK_LIMIT - 1);
        assert!(matches!(
            below.validate(),
            Err(RelocationConfigError::Transfer(_))
        ));
    }

    #[test]
    fn in_flight_budgets_accept_zero_as_not_applied() {
        let off = RelocationOptions::default()
            .in_flight_payload_budget(0)
            .node_in_flight_payload_budget(0);
        assert_eq!(off.validate(), Ok(()));
        let on = RelocationOptions::default()
            .in_flight_payload_budget(1)
            .node_in_flight_payload_budget(u64::MAX);
        let transfer = on.transfer().expect("valid");
        assert_eq!(transfer.peer_in_flight_budget(), 1);
        assert_eq!(transfer.node_in_flight_budget(), u64::MAX);
    }

    #[test]
    fn cutover_wait_and_caps_must_be_positive() {
        let at = RelocationOptions::default()
            .cutover_wait_timeout(Duration::from_nanos(1))
            .max_active_outbound(1)
            .max_active_inbound(1)
            .max_payload_in_flight_bytes(1)
            .max_concurrent_captures(1)
            .max_concurrent_restores(1);
        assert_eq!(at.validate(), Ok(()));
        let zero = |o: RelocationOptions| o.validate();
        let base = RelocationOptions::default;
        assert_eq!(
            zero(base().cutover_wait_timeout(Duration::ZERO)),
            Err(RelocationConfigError::NotPositive {
                option: "relocationCutoverWaitTimeout"
            })
        );
        for (options, option) in [
            (
                base().max_active_outbound(0),
                "maxActiveOutboundRelocations",
            ),
            (base().max_active_inbound(0), "maxActiveInboundRelocations"),
            (
                base().max_concurrent_captures(0),
                "maxConcurrentRelocationCaptures",
            ),
            (
                base().max_concurrent_restores(0),
                "maxConcurrentRelocationRestores",
            ),
        ] {
            assert_eq!(
                zero(options),
                Err(RelocationConfigError::NotPositive { option })
            );
        }
        assert!(matches!(
            zero(base().max_payload_in_flight_bytes(0)),
            Err(RelocationConfigError::Transfer(_))
        ));
    }
}
