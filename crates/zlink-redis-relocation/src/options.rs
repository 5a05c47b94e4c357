//! [`RedisRelocationOptions`]: connection, key prefix, operation timeout and pool size.

use std::fmt;
use std::time::Duration;

use fred::types::config::{Config, ServerConfig, TlsConnector};
use zlink_store_spi::{FailureKind, StoreError, StoreResult};

use zlink_redis_tls::RedisTlsConfig;

/// Why options were rejected (reachable through [`std::error::Error::source`] of the
/// [`StoreError`] the constructors and setters return).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum OptionsError {
    /// The URL scheme is not one of `redis`, `rediss`, `redis-cluster`, `rediss-cluster`.
    #[error(
        "unsupported connection URL scheme (use redis://, rediss://, redis-cluster:// or rediss-cluster://)"
    )]
    Scheme,
    /// The URL could not be parsed (the parser's message, password removed).
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
    /// The connection pool size is outside 1..=64.
    #[error("the connection pool size {0} is outside 1..=64")]
    PoolSize(usize),
    /// The reconnect delays are zero, out of order, or beyond `u32` milliseconds.
    #[error("the reconnect delays must satisfy 0 < first <= longest <= u32::MAX ms")]
    ReconnectDelay,
    /// TLS could not be set up (the system trust store could not be loaded).
    #[error("TLS could not be configured")]
    Tls,
}

fn rejected(e: OptionsError) -> StoreError {
    StoreError::failure(FailureKind::Configuration, e)
}

/// How a [`RedisRelocationStore`](crate::RedisRelocationStore) connects and names its keys.
///
/// - **Connection**: a single server by URL (`redis://[user[:password]@]host[:port][/db]`,
///   `rediss://…` for TLS with the system trust store) or a Redis Cluster by seed nodes
///   ([`cluster`](Self::cluster), or a `redis-cluster://` / `rediss-cluster://` URL with
///   `?node=host:port` seeds).
/// - **TLS** ([`with_tls_config`](Self::with_tls_config)): a CA bundle, optionally a client
///   certificate and a server name, for the server or every cluster node.
/// - **Key prefix** (default [`DEFAULT_KEY_PREFIX`](Self::DEFAULT_KEY_PREFIX)): the namespace
///   of every Redis key of the store; non-empty, without `{` or `}`.
/// - **Operation timeout** (default 10 s): one bound over connection acquisition and the
///   command; past it the operation fails with
///   [`StoreError::TimedOut`](zlink_store_spi::StoreError::TimedOut) and a write already sent
///   may still apply.
/// - **Pool size** (default 4, at most [`MAX_POOL_SIZE`](Self::MAX_POOL_SIZE)).
/// - **Reconnect delay** (default 50 ms doubling up to 250 ms, plus up to 25 ms of jitter):
///   how soon a lost connection is dialled again, forever.
///
/// Every rejected value is a [`StoreError::Failure`] of kind
/// [`FailureKind::Configuration`], whose `source` says which option. `Debug` never shows the
/// password.
///
/// ```
/// use std::time::Duration;
/// use zlink_redis_relocation::RedisRelocationOptions;
///
/// let options = RedisRelocationOptions::from_url("redis://app:secret@127.0.0.1:6379")?
///     .with_key_prefix("app1")?
///     .with_operation_timeout(Duration::from_secs(2))?;
/// assert!(!format!("{options:?}").contains("secret"));
/// assert!(RedisRelocationOptions::cluster(["127.0.0.1:7101", "127.0.0.1:7102"]).is_ok());
/// // Braces would move the blob domain out of its Redis Cluster hash slot.
/// assert!(options.clone().with_key_prefix("a{b}").is_err());
/// assert!(options.with_key_prefix("").is_err());
/// # Ok::<(), zlink_store_spi::StoreError>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct RedisRelocationOptions {
    pub(crate) config: Config,
    pub(crate) key_prefix: String,
    pub(crate) operation_timeout: Duration,
    pub(crate) pool_size: usize,
    pub(crate) reconnect_delay: (Duration, Duration),
    /// The TLS settings given to [`with_tls_config`](Self::with_tls_config), if any.
    pub(crate) tls: Option<RedisTlsConfig>,
}

impl fmt::Debug for RedisRelocationOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let servers: Vec<String> = match &self.config.server {
            ServerConfig::Centralized { server } => vec![server.to_string()],
            ServerConfig::Clustered { hosts, .. } => hosts.iter().map(|s| s.to_string()).collect(),
            _ => vec!["<other>".to_string()],
        };
        f.debug_struct("RedisRelocationOptions")
            .field("cluster", &self.config.server.is_clustered())
            .field("servers", &servers)
            .field("tls", &self.config.tls.is_some())
            .field("database", &self.config.database)
            .field("username", &self.config.username)
            .field(
                "password",
                &self.config.password.as_ref().map(|_| "<redacted>"),
            )
            .field("key_prefix", &self.key_prefix)
            .field("operation_timeout", &self.operation_timeout)
            .field("pool_size", &self.pool_size)
            .field("reconnect_delay", &self.reconnect_delay)
            .finish()
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
    Some((host.to_string(), port.parse().ok()?))
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

impl RedisRelocationOptions {
    /// The key prefix used unless another is set.
    pub const DEFAULT_KEY_PREFIX: &'static str = "zlink";
    /// The default operation timeout (connection acquisition plus the command): 10 s.
    pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default number of pooled connections.
    pub const DEFAULT_POOL_SIZE: usize = 4;
    /// The largest connection pool.
    pub const MAX_POOL_SIZE: usize = 64;
    /// The first reconnect delay used unless another is set.
    pub const DEFAULT_RECONNECT_DELAY_FIRST: Duration = Duration::from_millis(50);
    /// The longest reconnect delay used unless another is set.
    pub const DEFAULT_RECONNECT_DELAY_LONGEST: Duration = Duration::from_millis(250);

    fn with_config(config: Config) -> Self {
        RedisRelocationOptions {
            config,
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
            operation_timeout: Self::DEFAULT_OPERATION_TIMEOUT,
            pool_size: Self::DEFAULT_POOL_SIZE,
            reconnect_delay: (
                Self::DEFAULT_RECONNECT_DELAY_FIRST,
                Self::DEFAULT_RECONNECT_DELAY_LONGEST,
            ),
            tls: None,
        }
    }

    /// Connects by URL: `redis://` or `rediss://` (TLS with the system trust store) for one
    /// server, with optional `user:password@` and `/db`; `redis-cluster://` or
    /// `rediss-cluster://` for a cluster (`?node=host:port` adds seeds).
    pub fn from_url(url: &str) -> StoreResult<Self> {
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or_default();
        let config = match scheme {
            "redis" | "rediss" => Config::from_url_centralized(url),
            "redis-cluster" | "rediss-cluster" => Config::from_url_clustered(url),
            _ => return Err(rejected(OptionsError::Scheme)),
        }
        .map_err(|e| {
            if scheme.starts_with("rediss") && matches!(e.kind(), fred::error::ErrorKind::Tls) {
                rejected(OptionsError::Tls)
            } else {
                rejected(OptionsError::Url(redact(url, e.details())))
            }
        })?;
        Ok(Self::with_config(config))
    }

    /// Connects to a Redis Cluster through the given seed nodes (`host:port` each; one
    /// reachable seed suffices, the other nodes are discovered). Use
    /// [`with_credentials`](Self::with_credentials) for ACLs and [`with_tls`](Self::with_tls)
    /// for TLS.
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

    /// Sets the ACL user (or `None` for the default user) and password, replacing any
    /// credentials from the URL.
    pub fn with_credentials(mut self, username: Option<&str>, password: &str) -> Self {
        self.config.username = username.map(str::to_owned);
        self.config.password = Some(password.to_owned());
        self
    }

    /// Turns TLS (system trust store) on or off, e.g. for cluster seeds.
    pub fn with_tls(mut self, on: bool) -> StoreResult<Self> {
        self.tls = None;
        self.config.tls = if on {
            Some(
                TlsConnector::default_rustls()
                    .map_err(|_| rejected(OptionsError::Tls))?
                    .into(),
            )
        } else {
            None
        };
        Ok(self)
    }

    /// Connects over TLS with these settings (CA bundle, optional client certificate, optional
    /// server name), for a single server or every node of a cluster; replaces the system trust
    /// store of a `rediss://` URL or [`with_tls`](Self::with_tls). Works on `redis://` URLs
    /// and cluster seeds too.
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

    /// Sets the operation timeout (positive): one bound over connection acquisition and the
    /// command.
    pub fn with_operation_timeout(mut self, timeout: Duration) -> StoreResult<Self> {
        if timeout.is_zero() {
            return Err(rejected(OptionsError::ZeroTimeout));
        }
        self.operation_timeout = timeout;
        Ok(self)
    }

    /// Sets how many connections (per Redis node) operations are spread over (1..=64).
    pub fn with_pool_size(mut self, size: usize) -> StoreResult<Self> {
        if !(1..=Self::MAX_POOL_SIZE).contains(&size) {
            return Err(rejected(OptionsError::PoolSize(size)));
        }
        self.pool_size = size;
        Ok(self)
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
        self.config.server.is_clustered()
    }

    /// The number of pooled connections.
    pub fn pool_size(&self) -> usize {
        self.pool_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// The reason of a rejection, which must be a configuration failure.
    fn reason(e: StoreError) -> OptionsError {
        assert!(
            matches!(
                e,
                StoreError::Failure {
                    kind: FailureKind::Configuration,
                    ..
                }
            ),
            "{e:?}"
        );
        e.source()
            .and_then(|s| s.downcast_ref::<OptionsError>())
            .cloned()
            .expect("an OptionsError source")
    }

    fn local() -> RedisRelocationOptions {
        RedisRelocationOptions::from_url("redis://127.0.0.1").unwrap()
    }

    #[test]
    fn debug_never_prints_the_password() {
        let o = RedisRelocationOptions::from_url("redis://user:hunter2@127.0.0.1:6379/2").unwrap();
        let text = format!("{o:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
        assert!(text.contains("user"), "{text}");
        let o = RedisRelocationOptions::cluster(["127.0.0.1:7101"])
            .unwrap()
            .with_credentials(Some("admin"), "s3cr3t-pw");
        let text = format!("{o:?}");
        assert!(!text.contains("s3cr3t-pw"), "{text}");
    }

    #[test]
    fn url_credentials_and_database_are_parsed() {
        let o = RedisRelocationOptions::from_url("redis://user:pw@127.0.0.1:6390/3").unwrap();
        assert_eq!(o.config.username.as_deref(), Some("user"));
        assert_eq!(o.config.password.as_deref(), Some("pw"));
        assert_eq!(o.config.database, Some(3));
        assert!(!o.is_cluster());
        let o =
            RedisRelocationOptions::from_url("redis-cluster://127.0.0.1:7101?node=127.0.0.1:7102")
                .unwrap();
        assert!(o.is_cluster());
    }

    #[test]
    fn rediss_url_turns_tls_on() {
        // The system trust store may be unavailable in a sandbox; then the error is typed.
        match RedisRelocationOptions::from_url("rediss://:pw@127.0.0.1:6380") {
            Ok(o) => assert!(o.config.tls.is_some()),
            Err(e) => assert_eq!(reason(e), OptionsError::Tls),
        }
    }

    #[test]
    fn key_prefix_defaults_and_must_be_non_empty_and_brace_free() {
        assert_eq!(
            local().key_prefix(),
            RedisRelocationOptions::DEFAULT_KEY_PREFIX
        );
        assert_eq!(local().with_key_prefix("a").unwrap().key_prefix(), "a");
        assert_eq!(
            local().with_key_prefix("a:b/c").unwrap().key_prefix(),
            "a:b/c"
        );
        assert_eq!(
            reason(local().with_key_prefix("").unwrap_err()),
            OptionsError::EmptyPrefix
        );
        for bad in ["{a", "a}", "a{b}c", "{zlink-relocation-v1}"] {
            assert_eq!(
                reason(local().with_key_prefix(bad).unwrap_err()),
                OptionsError::BraceInPrefix,
                "{bad}"
            );
        }
    }

    #[test]
    fn unsupported_schemes_and_bad_urls_are_rejected_without_the_password() {
        for url in ["redis-sentinel://127.0.0.1", "http://x", "127.0.0.1:6379"] {
            assert_eq!(
                reason(RedisRelocationOptions::from_url(url).unwrap_err()),
                OptionsError::Scheme,
                "{url}"
            );
        }
        let e = RedisRelocationOptions::from_url("redis://u:pw-secret@host:notaport").unwrap_err();
        let source = e.source().map(|s| s.to_string()).unwrap_or_default();
        let text = format!("{e} {e:?} {source}");
        assert!(!text.contains("pw-secret"), "{text}");
        assert!(matches!(reason(e), OptionsError::Url(_)));
        assert_eq!(
            redact("redis://u:pw@h", "bad pw here"),
            "bad <redacted> here"
        );
        assert_eq!(redact("redis://pw@h", "pw"), "<redacted>");
        assert_eq!(redact("redis://h", "msg"), "msg");
    }

    #[test]
    fn cluster_seeds_must_be_host_and_port() {
        let o = RedisRelocationOptions::cluster(["127.0.0.1:7101", " [::1]:7102 "]).unwrap();
        assert!(o.is_cluster());
        for bad in ["127.0.0.1", ":7000", "h:70000", ""] {
            assert_eq!(
                reason(RedisRelocationOptions::cluster([bad]).unwrap_err()),
                OptionsError::Seed(bad.to_owned()),
                "{bad}"
            );
        }
        assert_eq!(
            reason(RedisRelocationOptions::cluster(Vec::<String>::new()).unwrap_err()),
            OptionsError::NoSeeds
        );
    }

    #[test]
    fn reconnect_delays_default_well_under_a_second_and_are_checked() {
        let ms = Duration::from_millis;
        assert_eq!(local().reconnect_delay(), (ms(50), ms(250)));
        let o = local().with_reconnect_delay(ms(10), ms(10)).unwrap();
        assert_eq!(o.reconnect_delay(), (ms(10), ms(10)));
        for (first, longest) in [
            (ms(0), ms(10)),
            (ms(20), ms(10)),
            (ms(1), Duration::from_secs(u64::from(u32::MAX))),
        ] {
            assert_eq!(
                reason(local().with_reconnect_delay(first, longest).unwrap_err()),
                OptionsError::ReconnectDelay,
                "{first:?} {longest:?}"
            );
        }
    }

    #[test]
    fn timeout_and_pool_size_are_bounded() {
        assert_eq!(
            local().operation_timeout(),
            RedisRelocationOptions::DEFAULT_OPERATION_TIMEOUT
        );
        assert_eq!(
            reason(local().with_operation_timeout(Duration::ZERO).unwrap_err()),
            OptionsError::ZeroTimeout
        );
        let o = local()
            .with_operation_timeout(Duration::from_millis(1))
            .unwrap();
        assert_eq!(o.operation_timeout(), Duration::from_millis(1));
        assert_eq!(
            local().pool_size(),
            RedisRelocationOptions::DEFAULT_POOL_SIZE
        );
        assert_eq!(local().with_pool_size(1).unwrap().pool_size(), 1);
        assert_eq!(local().with_pool_size(64).unwrap().pool_size(), 64);
        assert_eq!(
            reason(local().with_pool_size(65).unwrap_err()),
            OptionsError::PoolSize(65)
        );
        assert_eq!(
            reason(local().with_pool_size(0).unwrap_err()),
            OptionsError::PoolSize(0)
        );
    }
}
