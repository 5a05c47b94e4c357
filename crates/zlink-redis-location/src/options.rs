//! [`RedisLocationOptions`]: connection, key prefix, operation timeout and durability.

use std::fmt;
use std::time::Duration;

use fred::types::config::{Config, ServerConfig};
use zlink_store_spi::{FailureKind, StoreError, StoreResult};

use zlink_redis_tls::RedisTlsConfig;

use crate::durability::{Durability, DurabilityBound};

/// Why options were rejected (reachable through [`std::error::Error::source`] of the
/// [`StoreError`] the option setters return).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum OptionsError {
    /// The URL scheme is not one of `redis`, `rediss`, `redis-cluster`, `rediss-cluster`.
    #[error(
        "unsupported connection URL scheme (use redis://, rediss://, redis-cluster:// or rediss-cluster://)"
    )]
    Scheme,
    /// The URL could not be parsed.
    #[error("invalid connection URL: {0}")]
    Url(String),
    /// A cluster seed is not `host:port`.
    #[error("cluster seed `{0}` is not host:port")]
    Seed(String),
    /// No cluster seed was given.
    #[error("at least one cluster seed node is required")]
    NoSeeds,
    /// The key prefix is empty.
    #[error("the key prefix must not be empty")]
    EmptyPrefix,
    /// The key prefix contains `{` or `}` (it would change the Redis Cluster hashtag).
    #[error("the key prefix must not contain `{{` or `}}`")]
    BraceInPrefix,
    /// The operation timeout is zero.
    #[error("the operation timeout must be positive")]
    ZeroTimeout,
    /// The reconnect delays are zero, out of order, or beyond `u32` milliseconds.
    #[error("the reconnect delays must satisfy 0 < first <= longest <= u32::MAX ms")]
    ReconnectDelay,
    /// `Durability::Replicas` with zero replicas.
    #[error("durability needs at least one replica (Durability::Master waits for none)")]
    DurabilityReplicas,
    /// The durability timeout is below 1 ms or above half the operation timeout.
    #[error(
        "the durability timeout must be at least 1 ms and at most half the operation timeout ({max:?})"
    )]
    DurabilityTimeout {
        /// Half the operation timeout.
        max: Duration,
    },
}

impl From<DurabilityBound> for OptionsError {
    fn from(b: DurabilityBound) -> Self {
        match b {
            DurabilityBound::NoReplica => OptionsError::DurabilityReplicas,
            DurabilityBound::Timeout { max } => OptionsError::DurabilityTimeout { max },
        }
    }
}

fn rejected(e: OptionsError) -> StoreError {
    StoreError::failure(FailureKind::Configuration, e)
}

/// How a [`RedisLocationStore`](crate::RedisLocationStore) connects and names its keys.
///
/// - **Connection**: a single server by URL (`redis://[user[:password]@]host[:port][/db]`,
///   `rediss://…` for TLS) or a Redis Cluster by seed nodes ([`cluster`](Self::cluster), or a
///   `redis-cluster://` / `rediss-cluster://` URL with `?node=host:port` seeds).
/// - **TLS** ([`with_tls_config`](Self::with_tls_config)): a CA bundle, optionally a client
///   certificate and a server name, for the server or every cluster node.
/// - **Key prefix** (default [`DEFAULT_KEY_PREFIX`](Self::DEFAULT_KEY_PREFIX)): the namespace
///   of every Redis key of the store; non-empty, without `{` or `}`. Stores with different
///   prefixes on one Redis are independent.
/// - **Operation timeout** (default 5 s): bounds each operation as a whole, acquiring the
///   connection included; past it the operation fails with
///   [`StoreError::TimedOut`](zlink_store_spi::StoreError::TimedOut) and, if it had been sent,
///   may or may not have committed.
/// - **Reconnect delay** (default 50 ms doubling up to 250 ms, plus up to 25 ms of jitter):
///   how soon a lost connection is dialled again, well inside the owner lease's fencing
///   margin so a short Redis restart costs no lease renewal.
/// - **Durability** (default [`Durability::Master`]): whether a write is acknowledged once the
///   master applied it, or only once `WAIT` confirmed it on `N` replicas
///   ([`with_durability`](Self::with_durability)).
///
/// `Debug` never shows the password.
///
/// ```
/// use std::time::Duration;
/// use zlink_redis_location::RedisLocationOptions;
///
/// let options = RedisLocationOptions::from_url("redis://app:secret@127.0.0.1:6379/0")?
///     .with_key_prefix("app1")?
///     .with_operation_timeout(Duration::from_secs(2))?;
/// assert!(!format!("{options:?}").contains("secret"));
/// assert!(RedisLocationOptions::cluster(["127.0.0.1:7101", "127.0.0.1:7102"]).is_ok());
/// // Braces would move the keys out of the store's single hash slot.
/// assert!(options.clone().with_key_prefix("{app1}").is_err());
/// assert!(options.with_key_prefix("").is_err());
/// # Ok::<(), zlink_store_spi::StoreError>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct RedisLocationOptions {
    pub(crate) config: Config,
    pub(crate) key_prefix: String,
    pub(crate) operation_timeout: Duration,
    pub(crate) reconnect_delay: (Duration, Duration),
    /// The TLS settings given to [`with_tls_config`](Self::with_tls_config), if any.
    pub(crate) tls: Option<RedisTlsConfig>,
    pub(crate) durability: Durability,
}

impl RedisLocationOptions {
    /// The key prefix used unless another is set.
    pub const DEFAULT_KEY_PREFIX: &'static str = "zlink";
    /// The operation timeout used unless another is set.
    pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(5);
    /// The first reconnect delay used unless another is set.
    pub const DEFAULT_RECONNECT_DELAY_FIRST: Duration = Duration::from_millis(50);
    /// The longest reconnect delay used unless another is set.
    pub const DEFAULT_RECONNECT_DELAY_LONGEST: Duration = Duration::from_millis(250);

    fn with_config(config: Config) -> Self {
        RedisLocationOptions {
            config,
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
            operation_timeout: Self::DEFAULT_OPERATION_TIMEOUT,
            reconnect_delay: (
                Self::DEFAULT_RECONNECT_DELAY_FIRST,
                Self::DEFAULT_RECONNECT_DELAY_LONGEST,
            ),
            tls: None,
            durability: Durability::Master,
        }
    }

    /// Connects by URL: `redis://` or `rediss://` (TLS) for one server, with optional
    /// `user:password@` and `/db`; `redis-cluster://` or `rediss-cluster://` for a cluster
    /// (`?node=host:port` adds seeds).
    pub fn from_url(url: &str) -> StoreResult<Self> {
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or_default();
        let config = match scheme {
            "redis" | "rediss" => Config::from_url_centralized(url),
            "redis-cluster" | "rediss-cluster" => Config::from_url_clustered(url),
            _ => return Err(rejected(OptionsError::Scheme)),
        }
        .map_err(|e| rejected(OptionsError::Url(redact(url, e.details()))))?;
        Ok(Self::with_config(config))
    }

    /// Connects to a Redis Cluster through the given seed nodes (`host:port` each); the other
    /// nodes are discovered. Use [`with_credentials`](Self::with_credentials) for ACLs.
    pub fn cluster<I, S>(seeds: I) -> StoreResult<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut hosts = Vec::new();
        for seed in seeds {
            let seed = seed.as_ref().trim();
            let parsed =
                parse_seed(seed).ok_or_else(|| rejected(OptionsError::Seed(seed.to_owned())))?;
            hosts.push(parsed);
        }
        if hosts.is_empty() {
            return Err(rejected(OptionsError::NoSeeds));
        }
        Ok(Self::with_config(Config {
            server: ServerConfig::new_clustered(hosts),
            ..Config::default()
        }))
    }

    /// Sets the ACL user (or `None` for the default user) and password.
    pub fn with_credentials(mut self, username: Option<&str>, password: &str) -> Self {
        self.config.username = username.map(str::to_owned);
        self.config.password = Some(password.to_owned());
        self
    }

    /// Connects over TLS with these settings (CA bundle, optional client certificate, optional
    /// server name), for a single server or every node of a cluster; replaces the system trust
    /// store a `rediss://` URL would use. Works on `redis://` URLs and cluster seeds too.
    pub fn with_tls_config(mut self, tls: RedisTlsConfig) -> Self {
        tls.apply(&mut self.config);
        self.tls = Some(tls);
        self
    }

    /// Sets the key prefix: non-empty, without `{` or `}`.
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> StoreResult<Self> {
        let prefix = prefix.into();
        if prefix.is_empty() {
            return Err(rejected(OptionsError::EmptyPrefix));
        }
        if prefix.contains(['{', '}']) {
            return Err(rejected(OptionsError::BraceInPrefix));
        }
        self.key_prefix = prefix;
        Ok(self)
    }

    /// Sets the operation timeout (positive, and at least twice the durability timeout when
    /// [`Durability::Replicas`] is set).
    pub fn with_operation_timeout(mut self, timeout: Duration) -> StoreResult<Self> {
        if timeout.is_zero() {
            return Err(rejected(OptionsError::ZeroTimeout));
        }
        self.durability
            .check(timeout)
            .map_err(|b| rejected(b.into()))?;
        self.operation_timeout = timeout;
        Ok(self)
    }

    /// Sets when a write is acknowledged: [`Durability::Master`] (the default) once the master
    /// applied it; [`Durability::Replicas`] once `WAIT` also confirmed it on `replicas`
    /// replicas (at least 1) within `timeout` (at least 1 ms, at most half the operation
    /// timeout, so the `WAIT` answers before the operation times out).
    pub fn with_durability(mut self, durability: Durability) -> StoreResult<Self> {
        durability
            .check(self.operation_timeout)
            .map_err(|b| rejected(b.into()))?;
        self.durability = durability;
        Ok(self)
    }

    /// When a write is acknowledged.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Sets the reconnect delays: a lost connection is dialled again after `first`, each
    /// further attempt waiting twice as long up to `longest` (plus a jitter of up to half of
    /// `first`), forever. `0 < first <= longest`, both within `u32::MAX` milliseconds.
    pub fn with_reconnect_delay(mut self, first: Duration, longest: Duration) -> StoreResult<Self> {
        let ms = |d: Duration| u32::try_from(d.as_millis()).ok();
        match (ms(first), ms(longest)) {
            (Some(f), Some(l)) if f > 0 && f <= l => {}
            _ => return Err(rejected(OptionsError::ReconnectDelay)),
        }
        self.reconnect_delay = (first, longest);
        Ok(self)
    }

    /// The reconnect delays: the first and the longest.
    pub fn reconnect_delay(&self) -> (Duration, Duration) {
        self.reconnect_delay
    }

    /// fred's reconnect policy for these options (validated delays).
    pub(crate) fn reconnect_policy(&self) -> fred::types::config::ReconnectPolicy {
        let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        let (first, longest) = (ms(self.reconnect_delay.0), ms(self.reconnect_delay.1));
        let mut policy =
            fred::types::config::ReconnectPolicy::new_exponential(0, first, longest, 2);
        policy.set_jitter(first / 2);
        policy
    }

    /// The key prefix.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// The operation timeout.
    pub fn operation_timeout(&self) -> Duration {
        self.operation_timeout
    }

    /// Whether the options name a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.config.server, ServerConfig::Clustered { .. })
    }

    /// The servers, `host:port` separated by commas, without credentials.
    pub(crate) fn servers(&self) -> String {
        let hosts = match &self.config.server {
            ServerConfig::Centralized { server } => vec![server],
            ServerConfig::Clustered { hosts, .. } => hosts.iter().collect(),
            _ => Vec::new(),
        };
        hosts
            .iter()
            .map(|s| format!("{}:{}", s.host, s.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub(crate) fn tls(&self) -> bool {
        self.config.tls.is_some()
    }
}

/// `host:port` (an IPv6 host may be bracketed), or `None`.
fn parse_seed(seed: &str) -> Option<(String, u16)> {
    let (host, port) = seed.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    Some((host.to_owned(), port.parse().ok()?))
}

/// Removes the password of a URL from a parser message that may quote it.
fn redact(url: &str, message: &str) -> String {
    let secret = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .and_then(|(userinfo, _)| userinfo.split_once(':').map(|(_, p)| p).or(Some(userinfo)))
        .filter(|p| !p.is_empty());
    match secret {
        Some(p) => message.replace(p, "<redacted>"),
        None => message.to_owned(),
    }
}

impl fmt::Debug for RedisLocationOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLocationOptions")
            .field("servers", &self.servers())
            .field("cluster", &self.is_cluster())
            .field("tls", &self.tls())
            .field("database", &self.config.database)
            .field("username", &self.config.username)
            .field(
                "password",
                &self.config.password.as_ref().map(|_| "<redacted>"),
            )
            .field("key_prefix", &self.key_prefix)
            .field("operation_timeout", &self.operation_timeout)
            .field("reconnect_delay", &self.reconnect_delay)
            .field("durability", &self.durability)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    fn reason(e: StoreError) -> String {
        e.source().map(|s| s.to_string()).unwrap_or_default()
    }

    #[test]
    fn debug_hides_passwords() {
        let o = RedisLocationOptions::from_url("redis://user:hunter2@127.0.0.1:6379/2").unwrap();
        let d = format!("{o:?}");
        assert!(!d.contains("hunter2"), "{d}");
        assert!(d.contains("<redacted>") && d.contains("user") && d.contains("127.0.0.1:6379"));
        let o = RedisLocationOptions::cluster(["127.0.0.1:7101"])
            .unwrap()
            .with_credentials(Some("u"), "s3cr3t-pw");
        assert!(!format!("{o:?}").contains("s3cr3t-pw"));
        let o = RedisLocationOptions::from_url("rediss://:pw-only@localhost:6380").unwrap();
        assert!(!format!("{o:?}").contains("pw-only"));
        assert!(o.tls());
    }

    #[test]
    fn accepts_single_node_and_cluster_forms() {
        let o = RedisLocationOptions::from_url("redis://127.0.0.1").unwrap();
        assert!(!o.is_cluster());
        assert_eq!(o.servers(), "127.0.0.1:6379");
        let o = RedisLocationOptions::from_url(
            "redis-cluster://127.0.0.1:7101?node=127.0.0.1:7102&node=127.0.0.1:7103",
        )
        .unwrap();
        assert!(o.is_cluster());
        let o = RedisLocationOptions::cluster(["127.0.0.1:7101", " 127.0.0.1:7102 "]).unwrap();
        assert_eq!(o.servers(), "127.0.0.1:7101,127.0.0.1:7102");
        let o = RedisLocationOptions::cluster(["[::1]:7101"]).unwrap();
        assert_eq!(o.servers(), "::1:7101");
    }

    #[test]
    fn rejects_bad_connections() {
        for url in [
            "http://x",
            "127.0.0.1:6379",
            "redis-sentinel://x:1",
            "unix:///tmp/s",
        ] {
            assert!(RedisLocationOptions::from_url(url).is_err(), "{url}");
        }
        let e = RedisLocationOptions::cluster(Vec::<String>::new()).unwrap_err();
        assert!(reason(e).contains("seed"));
        assert!(RedisLocationOptions::cluster(["localhost"]).is_err());
        assert!(RedisLocationOptions::cluster([":7000"]).is_err());
        assert!(RedisLocationOptions::cluster(["h:70000"]).is_err());
        assert!(RedisLocationOptions::cluster([""]).is_err());
        assert!(RedisLocationOptions::cluster(["[]:7000"]).is_err());
    }

    #[test]
    fn key_prefix_must_be_non_empty_and_brace_free() {
        let o = RedisLocationOptions::from_url("redis://127.0.0.1").unwrap();
        assert_eq!(o.key_prefix(), RedisLocationOptions::DEFAULT_KEY_PREFIX);
        assert_eq!(o.clone().with_key_prefix("a").unwrap().key_prefix(), "a");
        assert_eq!(
            o.clone().with_key_prefix("app:1/x").unwrap().key_prefix(),
            "app:1/x"
        );
        for bad in ["", "{", "}", "a{b", "app}", "{zlink-location-v3}"] {
            let e = o.clone().with_key_prefix(bad).unwrap_err();
            assert_eq!(e.kind(), zlink_store_spi::StoreErrorKind::Failure);
            assert!(reason(e).contains("prefix"), "{bad}");
        }
    }

    #[test]
    fn operation_timeout_must_be_positive() {
        let o = RedisLocationOptions::from_url("redis://127.0.0.1").unwrap();
        assert_eq!(
            o.operation_timeout(),
            RedisLocationOptions::DEFAULT_OPERATION_TIMEOUT
        );
        let o = o.with_operation_timeout(Duration::from_millis(1)).unwrap();
        assert_eq!(o.operation_timeout(), Duration::from_millis(1));
        assert!(o.with_operation_timeout(Duration::ZERO).is_err());
    }

    #[test]
    fn reconnect_delays_default_well_under_a_second_and_are_checked() {
        let o = RedisLocationOptions::from_url("redis://127.0.0.1").unwrap();
        assert_eq!(
            o.reconnect_delay(),
            (Duration::from_millis(50), Duration::from_millis(250))
        );
        let ms = Duration::from_millis;
        let o = o.with_reconnect_delay(ms(10), ms(10)).unwrap();
        assert_eq!(o.reconnect_delay(), (ms(10), ms(10)));
        for (first, longest) in [
            (ms(0), ms(10)),
            (ms(20), ms(10)),
            (ms(1), Duration::from_secs(u64::from(u32::MAX))),
        ] {
            let e = o.clone().with_reconnect_delay(first, longest).unwrap_err();
            assert!(reason(e).contains("reconnect"), "{first:?} {longest:?}");
        }
    }

    #[test]
    fn durability_defaults_to_the_master_and_its_bounds_are_checked_both_ways() {
        let ms = Duration::from_millis;
        let o = RedisLocationOptions::from_url("redis://127.0.0.1")
            .unwrap()
            .with_operation_timeout(ms(1_000))
            .unwrap();
        assert_eq!(o.durability(), Durability::Master);
        let replicas = |replicas, timeout| Durability::Replicas { replicas, timeout };
        // At the bounds: one replica, 1 ms, half the operation timeout.
        for d in [
            replicas(1, ms(1)),
            replicas(1, ms(500)),
            replicas(3, ms(200)),
        ] {
            assert_eq!(o.clone().with_durability(d).unwrap().durability(), d);
        }
        // Past them: nothing set, a typed reason.
        for (d, why) in [
            (replicas(0, ms(100)), "at least one replica"),
            (replicas(1, Duration::ZERO), "durability timeout"),
            (
                replicas(1, Duration::from_micros(999)),
                "durability timeout",
            ),
            (replicas(1, ms(501)), "durability timeout"),
        ] {
            let e = o.clone().with_durability(d).unwrap_err();
            assert_eq!(e.kind(), zlink_store_spi::StoreErrorKind::Failure);
            assert!(reason(e).contains(why), "{d:?}");
        }
        // The operation timeout cannot fall below twice a durability timeout already set.
        let o = o.with_durability(replicas(1, ms(500))).unwrap();
        assert!(o.clone().with_operation_timeout(ms(1_000)).is_ok());
        let e = o.clone().with_operation_timeout(ms(999)).unwrap_err();
        assert!(reason(e).contains("durability timeout"));
        assert_eq!(o.operation_timeout(), ms(1_000));
        assert!(format!("{o:?}").contains("Replicas"));
    }

    #[test]
    fn url_errors_never_quote_the_password() {
        assert_eq!(
            redact("redis://u:pw@h", "bad pw here"),
            "bad <redacted> here"
        );
        assert_eq!(redact("redis://pw@h", "pw"), "<redacted>");
        assert_eq!(redact("redis://h", "msg"), "msg");
    }
}
