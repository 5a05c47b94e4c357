//! `RedisRelocationStore`: the Relocation Store SPI on Redis (single node or Redis Cluster).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fred::clients::Pool;
use fred::error::{Error as FredError, ErrorKind as FredErrorKind};
use fred::interfaces::{ClientLike, LuaInterface};
use fred::types::config::{Options, ReconnectPolicy};
use fred::types::{Builder, Value};
use tokio::time::Instant;
use zlink_store_spi::{
    BlobReadResult, BlobRef, Deleted, FailureKind, PutResult, RelocationStore, RenewResult,
    Retention, StoreError, StoreResult, StoreTime, check_blob_len,
};

use crate::options::RedisRelocationOptions;
use crate::scripts;

/// The versioned key space of blobs (the Redis Cluster hashtag of the whole blob domain).
const NAMESPACE: &str = "{zlink-relocation-v1}";

/// Extra time the outer guard waits past the operation deadline for the client's own
/// per-command timeout to fire first (so a command not yet written is never written late).
const GUARD_GRACE: Duration = Duration::from_millis(50);

/// The Redis key of a blob: `{prefix}:{zlink-relocation-v1}:blob:{reference}` (the versioned
/// storage format of golden fixture vector `relocationBlob`); the value is the raw bytes.
pub(crate) fn blob_key(prefix: &str, reference: &BlobRef) -> String {
    let mut key = String::with_capacity(prefix.len() + NAMESPACE.len() + 7 + reference.len());
    key.push_str(prefix);
    key.push(':');
    key.push_str(NAMESPACE);
    key.push_str(":blob:");
    key.push_str(reference.as_str());
    key
}

/// A script and the SHA-1 Redis knows it by.
struct LoadedScript {
    lua: &'static str,
    sha: String,
}

struct Inner {
    pool: Pool,
    key_prefix: String,
    timeout: Duration,
    put: LoadedScript,
    read: LoadedScript,
    renew: LoadedScript,
    delete: LoadedScript,
    options: RedisRelocationOptions,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Close the connections of the last handle (best effort, needs a runtime).
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let pool = self.pool.clone();
            handle.spawn(async move {
                let _ = pool.quit().await;
            });
        }
    }
}

/// The official Redis Relocation Store provider (spec 23).
///
/// Each blob is one Redis string under [`blob_key`], holding the payload's raw bytes, with a
/// Redis expiry set from the Redis clock (`TIME`). Every operation is one Lua script (loaded
/// once, called by SHA-1, reloaded when Redis answers `NOSCRIPT`) on that single key, so `put`
/// decides `Stored` / `AlreadyStored` / `Conflict` atomically, also on Redis Cluster.
///
/// Every operation is bounded by the operation timeout of its options, connection acquisition
/// included; on expiry it fails with [`StoreError::TimedOut`] and a write already sent may
/// still apply (reconstruct it with `read`, or `put` the same bytes again: `AlreadyStored`).
///
/// Cloning is cheap and shares the connections; they close when the last clone is dropped or on
/// [`close`](Self::close). Requires Redis 7.0 or later (`PEXPIRETIME`).
#[derive(Clone)]
pub struct RedisRelocationStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for RedisRelocationStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRelocationStore")
            .field("options", &self.inner.options)
            .finish()
    }
}

/// Maps a client error to the SPI error (the client error stays reachable as `source`).
fn map_error(e: FredError) -> StoreError {
    let kind = match e.kind() {
        FredErrorKind::Timeout => return StoreError::TimedOut,
        FredErrorKind::Canceled => return StoreError::Cancelled,
        FredErrorKind::IO
        | FredErrorKind::Routing
        | FredErrorKind::Cluster
        | FredErrorKind::Config
        | FredErrorKind::Url
        | FredErrorKind::Tls
        | FredErrorKind::Backpressure
        | FredErrorKind::Sentinel => FailureKind::Unavailable,
        FredErrorKind::Protocol | FredErrorKind::Parse => FailureKind::Format,
        _ => FailureKind::Backend,
    };
    StoreError::failure(kind, e)
}

/// A reply that does not have the shape the scripts produce.
#[derive(Debug, thiserror::Error)]
#[error("unexpected reply shape from the relocation store script")]
struct UnexpectedReply;

/// A blob key that holds a value this provider did not write (no expiry).
#[derive(Debug, thiserror::Error)]
#[error("the blob key holds a value without an expiry")]
struct ForeignValue;

fn format_error<E>(e: E) -> StoreError
where
    E: std::error::Error + Send + Sync + 'static,
{
    StoreError::failure(FailureKind::Format, e)
}

/// A script reply: status, expires_at, store_now and, for reads, the bytes.
struct Reply {
    status: i64,
    expires_at: StoreTime,
    store_now: StoreTime,
    bytes: Option<Bytes>,
}

fn millis(value: &Value) -> StoreResult<StoreTime> {
    match value {
        Value::Integer(n) if *n >= 0 => Ok(StoreTime::from_millis(*n as u64)),
        _ => Err(format_error(UnexpectedReply)),
    }
}

fn parse_reply(value: Value) -> StoreResult<Reply> {
    let Value::Array(items) = value else {
        return Err(format_error(UnexpectedReply));
    };
    let mut items = items.into_iter();
    let (Some(Value::Integer(status)), Some(expires_at), Some(store_now)) =
        (items.next(), items.next(), items.next())
    else {
        return Err(format_error(UnexpectedReply));
    };
    let bytes = match items.next() {
        None => None,
        Some(Value::Bytes(b)) => Some(b),
        Some(Value::String(s)) => Some(s.into_inner()),
        Some(_) => return Err(format_error(UnexpectedReply)),
    };
    if status == scripts::NO_EXPIRY {
        return Err(format_error(ForeignValue));
    }
    Ok(Reply {
        status,
        expires_at: millis(&expires_at)?,
        store_now: millis(&store_now)?,
        bytes,
    })
}

async fn load(pool: &Pool, lua: &'static str, timeout: Duration) -> StoreResult<LoadedScript> {
    let sha: String = pool
        .next()
        .with_options(&Options {
            timeout: Some(timeout),
            ..Options::default()
        })
        .script_load(lua)
        .await
        .map_err(map_error)?;
    Ok(LoadedScript { lua, sha })
}

impl RedisRelocationStore {
    /// Connects (bounded by the operation timeout) and loads the scripts.
    ///
    /// Fails with [`StoreError::TimedOut`] if the connection is not established within the
    /// operation timeout, or with a `Failure` if Redis refuses it.
    pub async fn connect(options: RedisRelocationOptions) -> StoreResult<Self> {
        let timeout = options.operation_timeout;
        let mut builder = Builder::from_config(options.config.clone());
        builder
            .with_connection_config(|c| {
                c.connection_timeout = timeout;
                c.internal_command_timeout = timeout;
            })
            .with_performance_config(|p| {
                p.default_command_timeout = timeout;
            })
            // Reconnect forever; each operation's timeout bounds how long it waits for that.
            .set_policy(ReconnectPolicy::new_exponential(0, 50, 2_000, 2));
        let pool = builder.build_pool(options.pool_size).map_err(map_error)?;
        let connected = tokio::time::timeout(timeout, async {
            pool.init().await.map_err(map_error)?;
            Ok::<_, StoreError>((
                load(&pool, scripts::PUT, timeout).await?,
                load(&pool, scripts::READ, timeout).await?,
                load(&pool, scripts::RENEW, timeout).await?,
                load(&pool, scripts::DELETE, timeout).await?,
            ))
        })
        .await
        .unwrap_or(Err(StoreError::TimedOut));
        match connected {
            Ok((put, read, renew, delete)) => Ok(RedisRelocationStore {
                inner: Arc::new(Inner {
                    pool,
                    key_prefix: options.key_prefix.clone(),
                    timeout,
                    put,
                    read,
                    renew,
                    delete,
                    options,
                }),
            }),
            Err(e) => {
                let _ = tokio::time::timeout(Duration::from_secs(1), pool.quit()).await;
                Err(e)
            }
        }
    }

    /// Closes the connections (other clones stop working too). Idempotent.
    pub async fn close(&self) {
        let _ = tokio::time::timeout(self.inner.timeout, self.inner.pool.quit()).await;
    }

    /// The options this store was connected with.
    pub fn options(&self) -> &RedisRelocationOptions {
        &self.inner.options
    }

    fn key(&self, reference: &BlobRef) -> String {
        blob_key(&self.inner.key_prefix, reference)
    }

    /// Runs one script on the blob key within the operation timeout: `EVALSHA`, and on
    /// `NOSCRIPT` (script cache flushed, fail-over, a cluster node that never saw it) `EVAL`,
    /// which also caches it again.
    async fn run(
        &self,
        script: &LoadedScript,
        key: String,
        args: Vec<Value>,
    ) -> StoreResult<Reply> {
        let deadline = Instant::now() + self.inner.timeout;
        let attempt = async {
            let client = self.inner.pool.next();
            let remaining = || {
                // The client's own timeout is what keeps a command that was not yet written from
                // being written after the deadline; the outer guard only backs it up.
                deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1))
            };
            let first = client
                .with_options(&Options {
                    timeout: Some(remaining()),
                    ..Options::default()
                })
                .evalsha::<Value, _, _, _>(script.sha.as_str(), key.as_str(), args.clone())
                .await;
            let value = match first {
                Err(e) if e.details().starts_with("NOSCRIPT") => {
                    tracing::debug!("relocation store script not cached on the node; reloading");
                    client
                        .with_options(&Options {
                            timeout: Some(remaining()),
                            ..Options::default()
                        })
                        .eval::<Value, _, _, _>(script.lua, key.as_str(), args)
                        .await
                }
                other => other,
            }
            .map_err(map_error)?;
            parse_reply(value)
        };
        match tokio::time::timeout_at(deadline + GUARD_GRACE, attempt).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::TimedOut),
        }
    }
}

fn retention_arg(retention: Retention) -> Value {
    // At most 100 years in milliseconds: fits an i64.
    Value::Integer(retention.as_millis() as i64)
}

impl RelocationStore for RedisRelocationStore {
    async fn put(
        &self,
        reference: &BlobRef,
        payload: &Bytes,
        retention: Retention,
    ) -> StoreResult<PutResult> {
        check_blob_len(payload.len())?;
        let key = self.key(reference);
        // `Bytes` is immutable: the client holding a clone until the write completes cannot see
        // a change, and nothing is kept after it.
        let args = vec![Value::Bytes(payload.clone()), retention_arg(retention)];
        let reply = self.run(&self.inner.put, key, args).await?;
        match reply.status {
            0 => Ok(PutResult::Stored {
                expires_at: reply.expires_at,
                store_now: reply.store_now,
            }),
            1 => Ok(PutResult::AlreadyStored {
                expires_at: reply.expires_at,
                store_now: reply.store_now,
            }),
            2 => Ok(PutResult::Conflict {
                store_now: reply.store_now,
            }),
            _ => Err(format_error(UnexpectedReply)),
        }
    }

    async fn read(&self, reference: &BlobRef) -> StoreResult<BlobReadResult> {
        let key = self.key(reference);
        let reply = self.run(&self.inner.read, key, Vec::new()).await?;
        match (reply.status, reply.bytes) {
            (0, None) => Ok(BlobReadResult::Missing {
                store_now: reply.store_now,
            }),
            (1, Some(bytes)) => Ok(BlobReadResult::Found {
                bytes,
                expires_at: reply.expires_at,
                store_now: reply.store_now,
            }),
            _ => Err(format_error(UnexpectedReply)),
        }
    }

    async fn renew(&self, reference: &BlobRef, retention: Retention) -> StoreResult<RenewResult> {
        let key = self.key(reference);
        let reply = self
            .run(&self.inner.renew, key, vec![retention_arg(retention)])
            .await?;
        match reply.status {
            0 => Ok(RenewResult::Missing {
                store_now: reply.store_now,
            }),
            1 => Ok(RenewResult::Renewed {
                expires_at: reply.expires_at,
                store_now: reply.store_now,
            }),
            _ => Err(format_error(UnexpectedReply)),
        }
    }

    async fn delete(&self, reference: &BlobRef) -> StoreResult<Deleted> {
        let key = self.key(reference);
        let reply = self.run(&self.inner.delete, key, Vec::new()).await?;
        match reply.status {
            1 => Ok(Deleted {
                store_now: reply.store_now,
            }),
            _ => Err(format_error(UnexpectedReply)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_key_matches_the_golden_vector() {
        let fixture: serde_json::Value = serde_json::from_str(include_str!(
            "../../../fixtures/golden/store-record-v1.json"
        ))
        .unwrap();
        let vector = &fixture["relocationBlob"];
        let prefix = fixture["prefixExample"].as_str().unwrap();
        let reference = BlobRef::new(vector["reference"].as_str().unwrap()).unwrap();
        assert_eq!(
            blob_key(prefix, &reference),
            vector["redisKey"].as_str().unwrap()
        );
    }
}
