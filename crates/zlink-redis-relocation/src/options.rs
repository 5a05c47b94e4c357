//! Public options of the Redis Relocation Store: connection, key prefix, operation timeout.

use std::fmt;
use std::time::Duration;

use fred::types::config::{Config, ServerConfig, TlsConnector};

/// Why a [`RedisRelocationOptions`] value could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// The connection URL could not be parsed (the URL itself is not repeated: it may hold a
    /// password).
    #[error("invalid Redis connection URL")]
    InvalidUrl,
    /// The URL scheme is not one of `redis`, `rediss`, `redis-cluster`, `rediss-cluster`.
    #[error(
        "unsupported Redis URL scheme `{0}` (use redis, rediss, redis-cluster or rediss-cluster)"
    )]
    UnsupportedScheme(String),
    /// A cluster seed is not `host:port`.
    #[error("invalid cluster seed `{0}` (expected host:port)")]
    InvalidSeed(String),
    /// A cluster needs at least one seed.
    #[error("a cluster connection needs at least one seed")]
    NoSeeds,
    /// The key prefix is empty.
    #[error("the key prefix must not be empty")]
    EmptyPrefix,
    /// The key prefix contains `{` or `}` (it would change the Redis Cluster hash slot).
    #[error("the key prefix must not contain `{{` or `}}`")]
    BracedPrefix,
    /// The operation timeout is zero.
    #[error("the operation timeout must be positive")]
    ZeroTimeout,
    /// The connection pool size is outside 1..=64.
    #[error("the connection pool size {0} is outside 1..=64")]
    PoolSize(usize),
    /// TLS could not be set up (the system trust store could not be loaded).
    #[error("TLS could not be configured")]
    Tls,
}

/// How to reach Redis and where to keep blobs.
///
/// Build it from a URL ([`from_url`](Self::from_url)) or from cluster seeds
/// ([`cluster`](Self::cluster)), then adjust it with the `with_*` methods. `Debug` never prints
/// the password.
///
/// ```
/// use std::time::Duration;
/// use zlink_redis_relocation::RedisRelocationOptions;
///
/// let options = RedisRelocationOptions::from_url("redis://app:secret@127.0.0.1:6379", "app1")
///     .unwrap()
///     .with_operation_timeout(Duration::from_secs(2))
///     .unwrap();
/// assert!(!format!("{options:?}").contains("secret"));
/// // Braces would move the blob domain out of its Redis Cluster hash slot.
/// assert!(RedisRelocationOptions::from_url("redis://127.0.0.1", "a{b}").is_err());
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct RedisRelocationOptions {
    pub(crate) config: Config,
    pub(crate) key_prefix: String,
    pub(crate) operation_timeout: Duration,
    pub(crate) pool_size: usize,
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
            .finish()
    }
}

fn check_prefix(prefix: &str) -> Result<(), OptionsError> {
    if prefix.is_empty() {
        return Err(OptionsError::EmptyPrefix);
    }
    if prefix.contains(['{', '}']) {
        return Err(OptionsError::BracedPrefix);
    }
    Ok(())
}

fn parse_seed(seed: &str) -> Result<(String, u16), OptionsError> {
    let bad = || OptionsError::InvalidSeed(seed.to_string());
    let (host, port) = seed.trim().rsplit_once(':').ok_or_else(bad)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad());
    }
    let port: u16 = port.parse().map_err(|_| bad())?;
    Ok((host.to_string(), port))
}

impl RedisRelocationOptions {
    /// The default operation timeout (connection acquisition plus the command): 10 s.
    pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default number of pooled connections.
    pub const DEFAULT_POOL_SIZE: usize = 4;
    /// The largest connection pool.
    pub const MAX_POOL_SIZE: usize = 64;

    /// Options from a URL: `redis://[[user:]password@]host[:port][/db]`, `rediss://...` (TLS
    /// with the system trust store), or `redis-cluster://host:port?node=host:port&...` /
    /// `rediss-cluster://...` for a Redis Cluster. `key_prefix` must be non-empty and free of
    /// braces.
    pub fn from_url(url: &str, key_prefix: impl Into<String>) -> Result<Self, OptionsError> {
        let key_prefix = key_prefix.into();
        check_prefix(&key_prefix)?;
        let scheme = url
            .split_once("://")
            .map(|(s, _)| s.to_ascii_lowercase())
            .ok_or(OptionsError::InvalidUrl)?;
        match scheme.as_str() {
            "redis" | "rediss" | "redis-cluster" | "rediss-cluster" => {}
            other => return Err(OptionsError::UnsupportedScheme(other.to_string())),
        }
        let config = Config::from_url(url).map_err(|e| {
            if scheme.starts_with("rediss") && matches!(e.kind(), fred::error::ErrorKind::Tls) {
                OptionsError::Tls
            } else {
                OptionsError::InvalidUrl
            }
        })?;
        Ok(RedisRelocationOptions {
            config,
            key_prefix,
            operation_timeout: Self::DEFAULT_OPERATION_TIMEOUT,
            pool_size: Self::DEFAULT_POOL_SIZE,
        })
    }

    /// Options for a Redis Cluster reached through `seeds` (`host:port` each; one reachable
    /// seed suffices, the rest of the cluster is discovered).
    pub fn cluster<I, S>(seeds: I, key_prefix: impl Into<String>) -> Result<Self, OptionsError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let key_prefix = key_prefix.into();
        check_prefix(&key_prefix)?;
        let hosts = seeds
            .into_iter()
            .filter(|s| !s.as_ref().trim().is_empty())
            .map(|s| parse_seed(s.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        if hosts.is_empty() {
            return Err(OptionsError::NoSeeds);
        }
        let config = Config {
            server: ServerConfig::new_clustered(hosts),
            ..Config::default()
        };
        Ok(RedisRelocationOptions {
            config,
            key_prefix,
            operation_timeout: Self::DEFAULT_OPERATION_TIMEOUT,
            pool_size: Self::DEFAULT_POOL_SIZE,
        })
    }

    /// Authenticates with `password` (and an ACL `username`, if given), replacing any
    /// credentials from the URL.
    pub fn with_credentials(mut self, username: Option<&str>, password: &str) -> Self {
        self.config.username = username.map(str::to_string);
        self.config.password = Some(password.to_string());
        self
    }

    /// Turns TLS (system trust store) on or off, e.g. for cluster seeds.
    pub fn with_tls(mut self, on: bool) -> Result<Self, OptionsError> {
        self.config.tls = if on {
            Some(
                TlsConnector::default_rustls()
                    .map_err(|_| OptionsError::Tls)?
                    .into(),
            )
        } else {
            None
        };
        Ok(self)
    }

    /// Sets the operation timeout: one bound over connection acquisition and the command.
    /// When it expires the operation fails with `StoreError::TimedOut`; a write already sent
    /// may still apply.
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Result<Self, OptionsError> {
        if timeout.is_zero() {
            return Err(OptionsError::ZeroTimeout);
        }
        self.operation_timeout = timeout;
        Ok(self)
    }

    /// Sets how many connections (per Redis node) operations are spread over (1..=64).
    pub fn with_pool_size(mut self, size: usize) -> Result<Self, OptionsError> {
        if !(1..=Self::MAX_POOL_SIZE).contains(&size) {
            return Err(OptionsError::PoolSize(size));
        }
        self.pool_size = size;
        Ok(self)
    }

    /// The key prefix.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// The operation timeout.
    pub fn operation_timeout(&self) -> Duration {
        self.operation_timeout
    }

    /// Whether the connection is to a Redis Cluster.
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

    #[test]
    fn debug_never_prints_the_password() {
        let o =
            RedisRelocationOptions::from_url("redis://user:hunter2@127.0.0.1:6379/2", "p").unwrap();
        let text = format!("{o:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
        assert!(text.contains("user"), "{text}");
        let o = RedisRelocationOptions::cluster(["127.0.0.1:7101"], "p")
            .unwrap()
            .with_credentials(Some("admin"), "s3cr3t-pw");
        let text = format!("{o:?}");
        assert!(!text.contains("s3cr3t-pw"), "{text}");
    }

    #[test]
    fn url_credentials_and_database_are_parsed() {
        let o = RedisRelocationOptions::from_url("redis://user:pw@127.0.0.1:6390/3", "p").unwrap();
        assert_eq!(o.config.username.as_deref(), Some("user"));
        assert_eq!(o.config.password.as_deref(), Some("pw"));
        assert_eq!(o.config.database, Some(3));
        assert!(!o.is_cluster());
        let o = RedisRelocationOptions::from_url(
            "redis-cluster://127.0.0.1:7101?node=127.0.0.1:7102",
            "p",
        )
        .unwrap();
        assert!(o.is_cluster());
    }

    #[test]
    fn rediss_url_turns_tls_on() {
        // The system trust store may be unavailable in a sandbox; then the error is typed.
        match RedisRelocationOptions::from_url("rediss://:pw@127.0.0.1:6380", "p") {
            Ok(o) => assert!(o.config.tls.is_some()),
            Err(e) => assert_eq!(e, OptionsError::Tls),
        }
    }

    #[test]
    fn prefix_must_be_non_empty_and_brace_free() {
        assert_eq!(
            RedisRelocationOptions::from_url("redis://127.0.0.1", "").unwrap_err(),
            OptionsError::EmptyPrefix
        );
        for bad in ["{a", "a}", "a{b}c"] {
            assert_eq!(
                RedisRelocationOptions::cluster(["127.0.0.1:7101"], bad).unwrap_err(),
                OptionsError::BracedPrefix
            );
        }
        assert!(RedisRelocationOptions::from_url("redis://127.0.0.1", "a:b/c").is_ok());
    }

    #[test]
    fn unsupported_schemes_and_bad_seeds_are_rejected() {
        assert!(matches!(
            RedisRelocationOptions::from_url("redis-sentinel://127.0.0.1", "p"),
            Err(OptionsError::UnsupportedScheme(_))
        ));
        assert!(matches!(
            RedisRelocationOptions::from_url("not a url", "p"),
            Err(OptionsError::InvalidUrl)
        ));
        assert!(matches!(
            RedisRelocationOptions::cluster(["127.0.0.1"], "p"),
            Err(OptionsError::InvalidSeed(_))
        ));
        assert_eq!(
            RedisRelocationOptions::cluster(Vec::<String>::new(), "p").unwrap_err(),
            OptionsError::NoSeeds
        );
    }

    #[test]
    fn timeout_and_pool_size_are_bounded() {
        let o = RedisRelocationOptions::from_url("redis://127.0.0.1", "p").unwrap();
        assert_eq!(
            o.clone()
                .with_operation_timeout(Duration::ZERO)
                .unwrap_err(),
            OptionsError::ZeroTimeout
        );
        assert!(o.clone().with_pool_size(64).is_ok());
        assert_eq!(
            o.clone().with_pool_size(65).unwrap_err(),
            OptionsError::PoolSize(65)
        );
        assert_eq!(o.with_pool_size(0).unwrap_err(), OptionsError::PoolSize(0));
    }
}
