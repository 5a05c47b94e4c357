//! Location options (guide 10 §3, spec 21 §5 and §7.3, spec 06 §4) and their startup validation.

use std::time::Duration;

use zlink_store_spi::Retention;

/// The smallest gap between `messageFollowDuration` and `routeCacheMaxAge` when both are
/// positive (spec 21 §7.3, 06 §4).
pub const ROUTE_CACHE_FOLLOW_GAP: Duration = Duration::from_secs(5);

/// The default retention of a stored cold-activation envelope (spec 23: 24 h).
pub const DEFAULT_COLD_ACTIVATION_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// The longest `deadRunSweepInterval` (one day): a sweep of dead runs nobody saw leave the list
/// that runs less often than this leaves their capacity held for too long.
pub const MAX_DEAD_RUN_SWEEP_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);

/// A location configuration error, reported at startup before any Store request or socket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// One of the values that must be positive is zero.
    #[error("location option `{option}` must be positive")]
    NotPositive {
        /// The option's name, as the guide spells it.
        option: &'static str,
    },
    /// `renewInterval + renewTimeout < ttl − fencingMargin` does not hold (spec 21 §5).
    #[error(
        "owner lease timing violates renewInterval + renewTimeout < ttl - fencingMargin \
         ({renew_interval_ms} + {renew_timeout_ms} ms vs {ttl_ms} - {fencing_margin_ms} ms)"
    )]
    LeaseTiming {
        /// `ownerLeaseRenewInterval` in milliseconds.
        renew_interval_ms: u128,
        /// `ownerLeaseRenewTimeout` in milliseconds.
        renew_timeout_ms: u128,
        /// `ownerLeaseTtl` in milliseconds.
        ttl_ms: u128,
        /// `ownerLeaseFencingMargin` in milliseconds.
        fencing_margin_ms: u128,
    },
    /// With both positive, `routeCacheMaxAge` must be at least 5 s below
    /// `messageFollowDuration` (spec 21 §7.3).
    #[error(
        "routeCacheMaxAge ({route_cache_max_age_ms} ms) must be at least 5000 ms below \
         messageFollowDuration ({message_follow_duration_ms} ms)"
    )]
    RouteCacheVsFollow {
        /// `routeCacheMaxAge` in milliseconds.
        route_cache_max_age_ms: u128,
        /// `messageFollowDuration` in milliseconds.
        message_follow_duration_ms: u128,
    },
    /// The owner lease TTL is longer than a Store retention can express.
    #[error("ownerLeaseTtl is longer than the longest Store retention")]
    TtlTooLong,
    /// A Relocation Store retention is longer than a retention can express.
    #[error("location option `{option}` is longer than the longest Store retention")]
    RetentionTooLong {
        /// The option's name.
        option: &'static str,
    },
    /// A descriptor is over its size or list bounds (spec 21 §4), or does not encode; nothing
    /// was published. The codec's error says which bound.
    #[error("descriptor rejected at startup")]
    Descriptor(#[source] DescriptorRejected),
    /// A capacity limit or weight outside its range (spec 21 §4, 06 §4).
    #[error("`{option}` = {value} is outside {min}..={max}")]
    OutOfRange {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: i64,
        /// Smallest allowed.
        min: i64,
        /// Largest allowed.
        max: i64,
    },
}

/// Why a descriptor was rejected at startup: the codec's typed error. Two are equal when
/// their kind and message are.
#[derive(Debug, Clone, thiserror::Error)]
#[error(transparent)]
pub struct DescriptorRejected(std::sync::Arc<zlink_codec::CodecError>);

impl DescriptorRejected {
    /// The codec's error.
    pub fn codec_error(&self) -> &zlink_codec::CodecError {
        &self.0
    }
}

impl From<zlink_codec::CodecError> for DescriptorRejected {
    fn from(e: zlink_codec::CodecError) -> Self {
        Self(std::sync::Arc::new(e))
    }
}

impl PartialEq for DescriptorRejected {
    fn eq(&self, other: &Self) -> bool {
        self.0.kind() == other.0.kind() && self.0.to_string() == other.0.to_string()
    }
}

impl Eq for DescriptorRejected {}

/// The location options of one host (guide 10 §3). Build with [`LocationOptions::default`] and
/// the setters, then [`validate`](LocationOptions::validate) (the runtime does it at startup).
///
/// ```
/// use std::time::Duration;
/// use zlink_location::LocationOptions;
/// assert!(LocationOptions::default().validate().is_ok());
/// // 5 + 3 < 8 - 5 is false: a startup error.
/// let bad = LocationOptions::default().owner_lease_ttl(Duration::from_secs(8));
/// assert!(bad.validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocationOptions {
    /// `ownerLeaseRenewInterval` (default 5 s).
    pub owner_lease_renew_interval: Duration,
    /// `ownerLeaseTtl` (default 15 s).
    pub owner_lease_ttl: Duration,
    /// `ownerLeaseRenewTimeout` (default 3 s).
    pub owner_lease_renew_timeout: Duration,
    /// `ownerLeaseFencingMargin` (default 5 s).
    pub owner_lease_fencing_margin: Duration,
    /// `pollingInterval` (default 1 s).
    pub polling_interval: Duration,
    /// `storeFailureGrace` (default 30 s).
    pub store_failure_grace: Duration,
    /// `routeCacheMaxAge` (default 15 s; 0 disables the route cache).
    pub route_cache_max_age: Duration,
    /// `messageFollowDuration` (default 30 s; 0 disables Message Follow).
    pub message_follow_duration: Duration,
    /// How long the Relocation Store keeps a stored Instance Spot cold-activation envelope
    /// (default 24 h, spec 23's default retention). The runtime deletes it once the first
    /// message's handler has completed and the record no longer points at it; an envelope no
    /// record points at (a lost reservation race, a creation that never reached the Location
    /// Store) is gone when this retention ends (spec 21 §7.1, §10).
    pub cold_activation_retention: Duration,
    /// `deadRunSweepInterval` (`None`, the default: three `ownerLeaseTtl`; `Some(0)` disables
    /// it): how often each Object Server looks through the authority rows for owner runs whose
    /// lease is gone though no live peer saw them leave the list (a whole-mesh restart, a
    /// crash nobody observed), and recovery-sweeps them. Each round waits this long plus up to
    /// a quarter more (jitter), and reads a bounded number of pages and lease rows. A value
    /// given is 0 or within `ownerLeaseTtl..=`[`MAX_DEAD_RUN_SWEEP_INTERVAL`] (a run cannot
    /// be found dead sooner than its lease runs out).
    pub dead_run_sweep_interval: Option<Duration>,
    /// How long past a creation's deadline its node keeps trying to end it (retrying an Abort
    /// the Store did not confirm), and after which any node that meets its still-`Reserved`
    /// record may cancel it (default 10 s; spec 21 §7, §10).
    pub creation_cleanup_window: Duration,
    /// Whether this host checks, after each owner-lease renew, that every authority row it
    /// wrote (put or deleted) before that renew was sent is still in the Store, so a Store that
    /// failed over to a replica missing acknowledged writes is noticed as data loss within
    /// about one renew interval (default on; `docs/store-epoch.md`). Per renew interval it
    /// costs one conditional batch without a mutation per 256 distinct rows written (off the
    /// renew path), plus one exact read per row of a batch that conflicted because some row
    /// changed since (another host moved, committed or re-created it); it keeps those rows'
    /// bytes until they are checked. Switch it off only for a Store that never loses an
    /// acknowledged write (synchronous replication, or persistence with failover only to
    /// replicas holding every acknowledged write).
    pub verify_acknowledged_writes: bool,
}

/// The default [`LocationOptions::creation_cleanup_window`].
pub const DEFAULT_CREATION_CLEANUP_WINDOW: Duration = Duration::from_secs(10);

impl Default for LocationOptions {
    fn default() -> Self {
        LocationOptions {
            owner_lease_renew_interval: Duration::from_secs(5),
            owner_lease_ttl: Duration::from_secs(15),
            owner_lease_renew_timeout: Duration::from_secs(3),
            owner_lease_fencing_margin: Duration::from_secs(5),
            polling_interval: Duration::from_secs(1),
            store_failure_grace: Duration::from_secs(30),
            route_cache_max_age: Duration::from_secs(15),
            message_follow_duration: Duration::from_secs(30),
            cold_activation_retention: DEFAULT_COLD_ACTIVATION_RETENTION,
            dead_run_sweep_interval: None,
            creation_cleanup_window: DEFAULT_CREATION_CLEANUP_WINDOW,
            verify_acknowledged_writes: true,
        }
    }
}

impl LocationOptions {
    /// Sets `ownerLeaseRenewInterval`.
    pub fn owner_lease_renew_interval(mut self, d: Duration) -> Self {
        self.owner_lease_renew_interval = d;
        self
    }

    /// Sets `ownerLeaseTtl`.
    pub fn owner_lease_ttl(mut self, d: Duration) -> Self {
        self.owner_lease_ttl = d;
        self
    }

    /// Sets `ownerLeaseRenewTimeout`.
    pub fn owner_lease_renew_timeout(mut self, d: Duration) -> Self {
        self.owner_lease_renew_timeout = d;
        self
    }

    /// Sets `ownerLeaseFencingMargin`.
    pub fn owner_lease_fencing_margin(mut self, d: Duration) -> Self {
        self.owner_lease_fencing_margin = d;
        self
    }

    /// Sets `pollingInterval`.
    pub fn polling_interval(mut self, d: Duration) -> Self {
        self.polling_interval = d;
        self
    }

    /// Sets `storeFailureGrace`.
    pub fn store_failure_grace(mut self, d: Duration) -> Self {
        self.store_failure_grace = d;
        self
    }

    /// Sets `routeCacheMaxAge` (0 disables the route cache).
    pub fn route_cache_max_age(mut self, d: Duration) -> Self {
        self.route_cache_max_age = d;
        self
    }

    /// Sets `messageFollowDuration` (0 disables Message Follow).
    pub fn message_follow_duration(mut self, d: Duration) -> Self {
        self.message_follow_duration = d;
        self
    }

    /// Sets the retention of stored cold-activation envelopes (positive).
    pub fn cold_activation_retention(mut self, d: Duration) -> Self {
        self.cold_activation_retention = d;
        self
    }

    /// Sets `deadRunSweepInterval` (0 disables the periodic sweep of dead runs).
    pub fn dead_run_sweep_interval(mut self, d: Duration) -> Self {
        self.dead_run_sweep_interval = Some(d);
        self
    }

    /// How often the periodic sweep of dead runs runs (`None`: disabled): the value given, or
    /// three `ownerLeaseTtl` by default.
    pub fn dead_run_sweep_period(&self) -> Option<Duration> {
        match self.dead_run_sweep_interval {
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
            None => Some(self.owner_lease_ttl.saturating_mul(3)),
        }
    }

    /// Sets the creation cleanup window (positive).
    pub fn creation_cleanup_window(mut self, d: Duration) -> Self {
        self.creation_cleanup_window = d;
        self
    }

    /// Sets whether acknowledged writes are read back after each renew (see
    /// [`verify_acknowledged_writes`](Self::verify_acknowledged_writes); default on).
    pub fn verify_acknowledged_writes(mut self, on: bool) -> Self {
        self.verify_acknowledged_writes = on;
        self
    }

    /// Checks every rule of spec 21 §5 / §7.3 and guide 10 §3:
    ///
    /// - the four lease values, `pollingInterval` and `storeFailureGrace` are positive;
    /// - `renewInterval + renewTimeout < ttl − fencingMargin`;
    /// - the TTL fits a Store retention;
    /// - when `routeCacheMaxAge` and `messageFollowDuration` are both positive,
    ///   `routeCacheMaxAge + 5 s <= messageFollowDuration` (0 disables either feature);
    /// - the cold-activation retention is positive and fits a Store retention;
    /// - a `deadRunSweepInterval` given is 0 (off) or within `ownerLeaseTtl..=`
    ///   [`MAX_DEAD_RUN_SWEEP_INTERVAL`].
    /// - the creation cleanup window is positive.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let positive = [
            ("ownerLeaseRenewInterval", self.owner_lease_renew_interval),
            ("ownerLeaseTtl", self.owner_lease_ttl),
            ("ownerLeaseRenewTimeout", self.owner_lease_renew_timeout),
            ("ownerLeaseFencingMargin", self.owner_lease_fencing_margin),
            ("pollingInterval", self.polling_interval),
            ("storeFailureGrace", self.store_failure_grace),
            ("coldActivationRetention", self.cold_activation_retention),
            ("creationCleanupWindow", self.creation_cleanup_window),
        ];
        for (option, value) in positive {
            if value.is_zero() {
                return Err(ConfigError::NotPositive { option });
            }
        }
        let lhs = self
            .owner_lease_renew_interval
            .saturating_add(self.owner_lease_renew_timeout);
        let holds = self
            .owner_lease_ttl
            .checked_sub(self.owner_lease_fencing_margin)
            .is_some_and(|rhs| lhs < rhs);
        if !holds {
            return Err(ConfigError::LeaseTiming {
                renew_interval_ms: self.owner_lease_renew_interval.as_millis(),
                renew_timeout_ms: self.owner_lease_renew_timeout.as_millis(),
                ttl_ms: self.owner_lease_ttl.as_millis(),
                fencing_margin_ms: self.owner_lease_fencing_margin.as_millis(),
            });
        }
        if Retention::new(self.owner_lease_ttl).is_err() {
            return Err(ConfigError::TtlTooLong);
        }
        if Retention::new(self.cold_activation_retention).is_err() {
            return Err(ConfigError::RetentionTooLong {
                option: "coldActivationRetention",
            });
        }
        if let Some(sweep) = self.dead_run_sweep_interval.filter(|d| {
            !d.is_zero() && (*d < self.owner_lease_ttl || *d > MAX_DEAD_RUN_SWEEP_INTERVAL)
        }) {
            return Err(ConfigError::OutOfRange {
                option: "deadRunSweepInterval",
                value: i64::try_from(sweep.as_millis()).unwrap_or(i64::MAX),
                min: i64::try_from(self.owner_lease_ttl.as_millis()).unwrap_or(i64::MAX),
                max: i64::try_from(MAX_DEAD_RUN_SWEEP_INTERVAL.as_millis()).unwrap_or(i64::MAX),
            });
        }
        let cache = self.route_cache_max_age;
        let follow = self.message_follow_duration;
        if !cache.is_zero()
            && !follow.is_zero()
            && cache.saturating_add(ROUTE_CACHE_FOLLOW_GAP) > follow
        {
            return Err(ConfigError::RouteCacheVsFollow {
                route_cache_max_age_ms: cache.as_millis(),
                message_follow_duration_ms: follow.as_millis(),
            });
        }
        Ok(())
    }

    /// The cold-activation envelope retention as a Store retention (validated options only).
    pub fn cold_activation_retention_value(&self) -> Result<Retention, ConfigError> {
        Retention::new(self.cold_activation_retention).map_err(|_| ConfigError::RetentionTooLong {
            option: "coldActivationRetention",
        })
    }

    /// The owner lease TTL as a Store retention (validated options only).
    pub fn lease_retention(&self) -> Result<Retention, ConfigError> {
        Retention::new(self.owner_lease_ttl).map_err(|_| ConfigError::TtlTooLong)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn defaults_satisfy_every_rule() {
        assert_eq!(LocationOptions::default().validate(), Ok(()));
    }

    #[test]
    fn lease_inequality_at_the_bound_and_one_past_it() {
        // 5000 + 3000 < 15000 - 6999 = 8001: holds (one millisecond of room).
        let at = LocationOptions::default().owner_lease_fencing_margin(ms(6999));
        assert_eq!(at.validate(), Ok(()));
        // 8000 < 8000 is false.
        let past = LocationOptions::default().owner_lease_fencing_margin(ms(7000));
        assert!(matches!(
            past.validate(),
            Err(ConfigError::LeaseTiming { .. })
        ));
    }

    #[test]
    fn shrinking_only_the_ttl_breaks_the_inequality() {
        let at = LocationOptions::default().owner_lease_ttl(ms(13_001));
        assert_eq!(at.validate(), Ok(()));
        let past = LocationOptions::default().owner_lease_ttl(ms(13_000));
        assert!(matches!(
            past.validate(),
            Err(ConfigError::LeaseTiming { .. })
        ));
        // A margin larger than the TTL is a violation, not an underflow.
        let inverted = LocationOptions::default()
            .owner_lease_ttl(ms(4_000))
            .owner_lease_fencing_margin(ms(5_000));
        assert!(matches!(
            inverted.validate(),
            Err(ConfigError::LeaseTiming { .. })
        ));
    }

    #[test]
    fn every_lease_value_and_interval_must_be_positive() {
        let cases: [(LocationOptions, &str); 6] = [
            (
                LocationOptions::default().owner_lease_renew_interval(Duration::ZERO),
                "ownerLeaseRenewInterval",
            ),
            (
                LocationOptions::default().owner_lease_ttl(Duration::ZERO),
                "ownerLeaseTtl",
            ),
            (
                LocationOptions::default().owner_lease_renew_timeout(Duration::ZERO),
                "ownerLeaseRenewTimeout",
            ),
            (
                LocationOptions::default().owner_lease_fencing_margin(Duration::ZERO),
                "ownerLeaseFencingMargin",
            ),
            (
                LocationOptions::default().polling_interval(Duration::ZERO),
                "pollingInterval",
            ),
            (
                LocationOptions::default().store_failure_grace(Duration::ZERO),
                "storeFailureGrace",
            ),
        ];
        for (options, option) in cases {
            assert_eq!(options.validate(), Err(ConfigError::NotPositive { option }));
        }
        // The smallest positive value is accepted where the inequality allows it.
        let tiny = LocationOptions::default()
            .polling_interval(Duration::from_nanos(1))
            .store_failure_grace(Duration::from_nanos(1));
        assert_eq!(tiny.validate(), Ok(()));
    }

    #[test]
    fn route_cache_must_be_five_seconds_below_follow_when_both_positive() {
        let at = LocationOptions::default()
            .route_cache_max_age(ms(25_000))
            .message_follow_duration(ms(30_000));
        assert_eq!(at.validate(), Ok(()));
        let past = LocationOptions::default()
            .route_cache_max_age(ms(25_001))
            .message_follow_duration(ms(30_000));
        assert!(matches!(
            past.validate(),
            Err(ConfigError::RouteCacheVsFollow { .. })
        ));
    }

    #[test]
    fn zero_disables_route_cache_or_follow_without_the_gap_rule() {
        let no_follow = LocationOptions::default()
            .route_cache_max_age(ms(60_000))
            .message_follow_duration(Duration::ZERO);
        assert_eq!(no_follow.validate(), Ok(()));
        let no_cache = LocationOptions::default()
            .route_cache_max_age(Duration::ZERO)
            .message_follow_duration(ms(1));
        assert_eq!(no_cache.validate(), Ok(()));
        let both_off = LocationOptions::default()
            .route_cache_max_age(Duration::ZERO)
            .message_follow_duration(Duration::ZERO);
        assert_eq!(both_off.validate(), Ok(()));
    }

    #[test]
    fn ttl_must_fit_a_store_retention() {
        let max = Retention::MAX.as_duration();
        let at = LocationOptions::default().owner_lease_ttl(max);
        assert_eq!(at.validate(), Ok(()));
        let past = LocationOptions::default().owner_lease_ttl(max + ms(1));
        assert_eq!(past.validate(), Err(ConfigError::TtlTooLong));
    }

    #[test]
    fn dead_run_sweep_interval_is_off_or_between_the_lease_ttl_and_a_day() {
        let ttl = LocationOptions::default().owner_lease_ttl;
        let default = LocationOptions::default();
        assert_eq!(default.dead_run_sweep_period(), Some(ttl * 3));
        let off = LocationOptions::default().dead_run_sweep_interval(Duration::ZERO);
        assert_eq!(off.validate(), Ok(()));
        assert_eq!(off.dead_run_sweep_period(), None);
        let at_ttl = LocationOptions::default().dead_run_sweep_interval(ttl);
        assert_eq!(at_ttl.validate(), Ok(()));
        let below = LocationOptions::default().dead_run_sweep_interval(ttl - ms(1));
        assert!(matches!(
            below.validate(),
            Err(ConfigError::OutOfRange {
                option: "deadRunSweepInterval",
                value: 14_999,
                min: 15_000,
                ..
            })
        ));
        let at_max =
            LocationOptions::default().dead_run_sweep_interval(MAX_DEAD_RUN_SWEEP_INTERVAL);
        assert_eq!(at_max.validate(), Ok(()));
        let past =
            LocationOptions::default().dead_run_sweep_interval(MAX_DEAD_RUN_SWEEP_INTERVAL + ms(1));
        assert!(matches!(
            past.validate(),
            Err(ConfigError::OutOfRange {
                option: "deadRunSweepInterval",
                ..
            })
        ));
    }

    #[test]
    fn cold_activation_retention_is_positive_and_fits_a_store_retention() {
        let max = Retention::MAX.as_duration();
        let at = LocationOptions::default().cold_activation_retention(max);
        assert_eq!(at.validate(), Ok(()));
        assert_eq!(
            at.cold_activation_retention_value()
                .map(Retention::as_millis),
            Ok(Retention::MAX_MILLIS)
        );
        let past = LocationOptions::default().cold_activation_retention(max + ms(1));
        assert_eq!(
            past.validate(),
            Err(ConfigError::RetentionTooLong {
                option: "coldActivationRetention"
            })
        );
        let zero = LocationOptions::default().cold_activation_retention(Duration::ZERO);
        assert_eq!(
            zero.validate(),
            Err(ConfigError::NotPositive {
                option: "coldActivationRetention"
            })
        );
    }
}
