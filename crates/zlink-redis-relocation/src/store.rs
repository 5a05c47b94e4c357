//! `RedisRelocationStore`: the Relocation Store SPI on Redis (single node or Redis Cluster).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fred::clients::Pool;
use fred::error::{Error as FredError, ErrorKind as FredErrorKind};
use fred::interfaces::{ClientLike, KeysInterface, LuaInterface, TransactionInterface};
use fred::types::config::Options;
use fred::types::{Builder, ClusterHash, CustomCommand, Expiration, SetOptions, Value};
use tokio::time::Instant;
use zlink_store_spi::{
    BlobReadResult, BlobRef, Deleted, FailureKind, PutResult, RelocationStore, RenewResult,
    Retention, StoreError, StoreResult, StoreTime, check_blob_len,
};

use crate::options::RedisRelocationOptions;
use crate::scripts;
use zlink_redis_tls::Observer;

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
    renew: LoadedScript,
    delete: LoadedScript,
    meta: LoadedScript,
    options: RedisRelocationOptions,
    /// Whether `close` quit the connections already (quitting again only makes fred warn
    /// once per pool connection).
    closed: std::sync::atomic::AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
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
/// Each blob is one Redis string under `{prefix}:{zlink-relocation-v1}:blob:{reference}`,
/// holding the payload's raw bytes, with a Redis expiry set by the Redis clock. Every operation
/// is atomic on that single key (also on Redis Cluster: the hashtag pins the blob domain to one
/// slot): a `put` is decided by one `SET ... NX PX GET` (`Stored` / `AlreadyStored` /
/// `Conflict`), a `read` is one MULTI/EXEC of `TIME`, `PEXPIRETIME` and `GET`, and `renew` and
/// `delete` are Lua scripts (loaded once, called by SHA-1, reloaded when Redis answers
/// `NOSCRIPT`). Expiry is judged by the Redis clock only: `TIME`, and the clock Redis applies
/// `PX` and key expiry with.
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

/// A script reply: status, expires_at, store_now.
struct Reply {
    status: i64,
    expires_at: StoreTime,
    store_now: StoreTime,
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
    let [Value::Integer(status), expires_at, store_now] =
        <[Value; 3]>::try_from(items).map_err(|_| format_error(UnexpectedReply))?
    else {
        return Err(format_error(UnexpectedReply));
    };
    if status == scripts::NO_EXPIRY {
        return Err(format_error(ForeignValue));
    }
    Ok(Reply {
        status,
        expires_at: millis(&expires_at)?,
        store_now: millis(&store_now)?,
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
        let mut config = options.config.clone();
        // This store's own TLS connector, so a refused handshake is told apart below.
        let observer = match &options.tls {
            Some(tls) => Some(tls.observe(&mut config)?),
            None => None,
        };
        let mut builder = Builder::from_config(config);
        builder
            .with_connection_config(|c| {
                c.connection_timeout = timeout;
                c.internal_command_timeout = timeout;
            })
            .with_performance_config(|p| {
                p.default_command_timeout = timeout;
            })
            // Reconnect forever, promptly; each operation's timeout bounds how long it waits.
            .set_policy(options.reconnect_policy());
        let pool = builder.build_pool(options.pool_size).map_err(map_error)?;
        let connected = tokio::time::timeout(timeout, async {
            pool.init().await.map_err(map_error)?;
            Ok::<_, StoreError>((
                load(&pool, scripts::RENEW, timeout).await?,
                load(&pool, scripts::DELETE, timeout).await?,
                load(&pool, scripts::META, timeout).await?,
            ))
        })
        .await
        .unwrap_or(Err(StoreError::TimedOut));
        match connected {
            Ok((renew, delete, meta)) => Ok(RedisRelocationStore {
                inner: Arc::new(Inner {
                    pool,
                    key_prefix: options.key_prefix.clone(),
                    timeout,
                    renew,
                    delete,
                    meta,
                    options,
                    closed: std::sync::atomic::AtomicBool::new(false),
                }),
            }),
            Err(e) => {
                let _ = tokio::time::timeout(Duration::from_secs(1), pool.quit()).await;
                Err(Observer::explain(observer.as_deref(), e))
            }
        }
    }

    /// Closes the connections (other clones stop working too). Idempotent.
    pub async fn close(&self) {
        if self
            .inner
            .closed
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let _ = tokio::time::timeout(self.inner.timeout, self.inner.pool.quit()).await;
    }

    /// The options this store was connected with.
    pub fn options(&self) -> &RedisRelocationOptions {
        &self.inner.options
    }

    fn key(&self, reference: &BlobRef) -> String {
        blob_key(&self.inner.key_prefix, reference)
    }

    /// Runs `op` within the operation timeout. Each command inside also carries the time left
    /// as its client-side timeout ([`command_options`]), which is what keeps a command not yet
    /// written from being written after the deadline; this outer guard only backs it up.
    async fn within<T>(
        &self,
        deadline: Instant,
        op: impl Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        match tokio::time::timeout_at(deadline + GUARD_GRACE, op).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::TimedOut),
        }
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.inner.timeout
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
        let deadline = self.deadline();
        self.within(deadline, async {
            let client = self.inner.pool.next();
            let first = client
                .with_options(&command_options(deadline))
                .evalsha::<Value, _, _, _>(script.sha.as_str(), key.as_str(), args.clone())
                .await;
            let value = match first {
                Err(e) if e.details().starts_with("NOSCRIPT") => {
                    tracing::debug!("relocation store script not cached on the node; reloading");
                    client
                        .with_options(&command_options(deadline))
                        .eval::<Value, _, _, _>(script.lua, key.as_str(), args)
                        .await
                }
                other => other,
            }
            .map_err(map_error)?;
            parse_reply(value)
        })
        .await
    }
}

/// Per-command client options: the time left until `deadline`.
fn command_options(deadline: Instant) -> Options {
    Options {
        timeout: Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ),
        ..Options::default()
    }
}

fn pexpiretime() -> CustomCommand {
    CustomCommand::new_static("PEXPIRETIME", ClusterHash::FirstKey, false)
}

fn time() -> CustomCommand {
    CustomCommand::new_static("TIME", ClusterHash::Random, false)
}

/// The reply of `TIME` as whole milliseconds.
fn time_reply(value: &Value) -> StoreResult<StoreTime> {
    let Value::Array(parts) = value else {
        return Err(format_error(UnexpectedReply));
    };
    let number = |v: Option<&Value>| -> StoreResult<u64> {
        match v {
            Some(Value::Integer(n)) if *n >= 0 => Ok(*n as u64),
            Some(Value::String(s)) => s.parse().map_err(|_| format_error(UnexpectedReply)),
            Some(Value::Bytes(b)) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format_error(UnexpectedReply)),
            _ => Err(format_error(UnexpectedReply)),
        }
    };
    let secs = number(parts.first())?;
    let micros = number(parts.get(1))?;
    Ok(StoreTime::from_millis(secs * 1000 + micros / 1000))
}

/// A string value of a reply: `None` for nil.
fn bytes_reply(value: Value) -> StoreResult<Option<Bytes>> {
    match value {
        Value::Null => Ok(None),
        Value::Bytes(b) => Ok(Some(b)),
        Value::String(s) => Ok(Some(s.into_inner())),
        _ => Err(format_error(UnexpectedReply)),
    }
}

fn integer_reply(value: &Value) -> StoreResult<i64> {
    match value {
        Value::Integer(n) => Ok(*n),
        _ => Err(format_error(UnexpectedReply)),
    }
}

/// The replies of an EXEC, exactly `N` of them.
fn exec_replies<const N: usize>(value: Value) -> StoreResult<[Value; N]> {
    match value {
        Value::Array(items) => items.try_into().map_err(|_| format_error(UnexpectedReply)),
        _ => Err(format_error(UnexpectedReply)),
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
        // At most 100 years in milliseconds: fits an i64.
        let retention_ms = retention.as_millis() as i64;
        let deadline = self.deadline();
        // `SET NX PX GET` decides atomically: it either stores the blob with an expiry of the
        // Redis clock plus the retention (answering nil), or changes nothing and answers the
        // live bytes, which are compared here. The metadata script is sent right behind it on
        // the same connection for the expiry and the clock. Both are plain commands carrying the
        // time left as their client timeout, so neither is sent after the deadline. `Bytes` is
        // immutable: the client holding a clone until the write completes cannot see a change,
        // and nothing is kept after it.
        let client = self.inner.pool.next();
        let (previous, meta) = self
            .within(deadline, async {
                let options = command_options(deadline);
                let (setter, describer) =
                    (client.with_options(&options), client.with_options(&options));
                let set = setter.set::<Value, _, _>(
                    key.as_str(),
                    Value::Bytes(payload.clone()),
                    Some(Expiration::PX(retention_ms)),
                    Some(SetOptions::NX),
                    true,
                );
                let meta = describer.evalsha::<Value, _, _, _>(
                    self.inner.meta.sha.as_str(),
                    key.as_str(),
                    Vec::<Value>::new(),
                );
                let (previous, meta) = tokio::join!(set, meta);
                let previous = previous.map_err(map_error)?;
                let meta = match meta {
                    Err(e) if e.details().starts_with("NOSCRIPT") => client
                        .with_options(&command_options(deadline))
                        .eval::<Value, _, _, _>(
                            self.inner.meta.lua,
                            key.as_str(),
                            Vec::<Value>::new(),
                        )
                        .await
                        .map_err(map_error)?,
                    other => other.map_err(map_error)?,
                };
                Ok((previous, meta))
            })
            .await?;
        let [expiry, now] = exec_replies::<2>(meta)?;
        let expiry = integer_reply(&expiry)?;
        let store_now = millis(&now)?;
        // The key's expiry as seen right after the SET; a blob deleted in between has none, and
        // is reported as expiring now.
        let expires_at = if expiry >= 0 {
            StoreTime::from_millis(expiry as u64)
        } else {
            store_now
        };
        match bytes_reply(previous)? {
            None => Ok(PutResult::Stored {
                expires_at,
                // Redis set the expiry to its clock at the SET plus the retention.
                store_now: if expiry >= 0 {
                    StoreTime::from_millis((expiry as u64).saturating_sub(retention_ms as u64))
                } else {
                    store_now
                },
            }),
            Some(_) if expiry == -1 => Err(format_error(ForeignValue)),
            Some(existing) if existing == *payload => Ok(PutResult::AlreadyStored {
                expires_at,
                store_now,
            }),
            Some(_) => Ok(PutResult::Conflict { store_now }),
        }
    }

    async fn read(&self, reference: &BlobRef) -> StoreResult<BlobReadResult> {
        let key = self.key(reference);
        let deadline = self.deadline();
        let replies = self
            .within(deadline, async {
                let trx = self.inner.pool.next().multi();
                let _: Value = trx
                    .with_options(&command_options(deadline))
                    .custom(time(), Vec::<Value>::new())
                    .await
                    .map_err(map_error)?;
                let _: Value = trx
                    .custom(pexpiretime(), vec![key.as_str()])
                    .await
                    .map_err(map_error)?;
                let _: Value = trx.get(key.as_str()).await.map_err(map_error)?;
                trx.exec::<Value>(true).await.map_err(map_error)
            })
            .await?;
        let [now, expiry, value] = exec_replies::<3>(replies)?;
        let store_now = time_reply(&now)?;
        let expiry = integer_reply(&expiry)?;
        match bytes_reply(value)? {
            None => Ok(BlobReadResult::Missing { store_now }),
            Some(_) if expiry == -1 => Err(format_error(ForeignValue)),
            // Live while its expiry is after the Redis clock.
            Some(_) if expiry <= store_now.as_millis() as i64 => {
                Ok(BlobReadResult::Missing { store_now })
            }
            Some(bytes) => Ok(BlobReadResult::Found {
                bytes,
                expires_at: StoreTime::from_millis(expiry as u64),
                store_now,
            }),
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

    async fn close(&self) {
        RedisRelocationStore::close(self).await;
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
