//! [`RedisLocationStore`]: the Location Store SPI on Redis.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fred::clients::Client;
use fred::error::{Error as RedisError, ErrorKind as RedisErrorKind};
use fred::interfaces::{ClientLike, LuaInterface};
use fred::types::config::Options;
use fred::types::scripts::Script;
use fred::types::{Builder, ClusterHash, CustomCommand, Key, Value};
use zlink_store_spi::{
    Condition, FailureKind, LocationStore, MAX_PAGE_ENCODED_LEN, Mutation, ReadResult, ScanItem,
    ScanPage, ScanRequest, ScanResult, StoreError, StoreKey, StoreResult, StoreTime, StoreVersion,
    UnreadableKey, UnreadableKind, WriteRequest, WriteResult,
};

use crate::cursor::{decode_cursor, encode_cursor, nonce};
use crate::durability::{Durability, not_replicated, wait_command};
use crate::layout::{
    Layout, hex, index_member_of, index_resume_after, index_start, key_of_index_member, sha256_hex,
};
use crate::options::RedisLocationOptions;
use crate::record::{FormatError, decode_member, member_head};
use zlink_redis_tls::Observer;

mod read_many;

/// How long a scan snapshot lives after its first page, by the Redis clock. Records keep the
/// versions a live snapshot needs for this long at most, and an expiring record's key outlives
/// its expiry by this much.
const SNAPSHOT_TTL_MS: u64 = 60_000;
/// The most live snapshots per store; a new one beyond this ends the least recently created.
const MAX_SNAPSHOTS: u64 = 256;
/// Index entries one scan page may examine beyond twice its limit.
const SCAN_EXTRA_ENTRIES: usize = 64;
/// Stored bytes one scan page may decode.
const SCAN_MAX_WORK: usize = 2 * MAX_PAGE_ENCODED_LEN;
/// The error prefix the scripts use for records they cannot read.
const FORMAT_ERROR_PREFIX: &str = "ZLINK-FORMAT";
/// What the read and scan scripts answer for a record key holding another Redis type.
const UNREADABLE_FOREIGN_TYPE: i64 = 1;
/// What the scan script answers for a record member not of the record format.
const UNREADABLE_CORRUPT: i64 = 2;

const READ_LUA: &str = include_str!("lua/read.lua");
const WRITE_LUA: &str = concat!(
    "#!lua\n",
    include_str!("lua/common.lua"),
    include_str!("lua/write.lua")
);
const SCAN_LUA: &str = concat!(
    "#!lua\n",
    include_str!("lua/common.lua"),
    include_str!("lua/scan.lua")
);

/// A script: its source, and the fred handle carrying its SHA-1 once loaded.
struct LuaScript {
    name: &'static str,
    lua: &'static str,
    script: Script,
}

impl LuaScript {
    async fn load(client: &Client, name: &'static str, lua: &'static str) -> StoreResult<Self> {
        let sha: String = client.script_load(lua).await.map_err(map_redis)?;
        Ok(LuaScript {
            name,
            lua,
            script: Script::from_hash(sha),
        })
    }
}

/// Errors of this provider, as the `source` of a [`StoreError`] (for logs).
#[derive(Debug, thiserror::Error)]
enum ProviderError {
    #[error("redis: {0}")]
    Redis(#[from] RedisError),
    #[error("stored record: {0}")]
    Format(#[from] FormatError),
}

fn map_redis(e: RedisError) -> StoreError {
    if *e.kind() == RedisErrorKind::Timeout {
        return StoreError::TimedOut;
    }
    let kind = match e.kind() {
        // A record the scripts cannot read, or a key of the store's namespace holding another
        // Redis type: stored data in a format this provider does not know.
        _ if e.details().contains(FORMAT_ERROR_PREFIX) || e.details().contains("WRONGTYPE") => {
            FailureKind::Format
        }
        RedisErrorKind::IO
        | RedisErrorKind::Canceled
        | RedisErrorKind::Routing
        | RedisErrorKind::Cluster
        | RedisErrorKind::Tls
        | RedisErrorKind::Auth
        | RedisErrorKind::Backpressure => FailureKind::Unavailable,
        RedisErrorKind::Parse | RedisErrorKind::Protocol => FailureKind::Format,
        _ => FailureKind::Backend,
    };
    StoreError::failure(kind, ProviderError::Redis(e))
}

fn format_error(e: FormatError) -> StoreError {
    StoreError::failure(FailureKind::Format, ProviderError::Format(e))
}

pub(crate) fn reply_error(what: &'static str) -> StoreError {
    format_error(FormatError::Reply(what))
}

struct Inner {
    client: Client,
    connection: std::sync::Mutex<Option<fred::types::ConnectHandle>>,
    layout: Layout,
    /// The sequence, scan index and snapshots keys, the first three `KEYS` of the write and
    /// scan scripts (built once; a clone shares the bytes).
    helper_keys: [Key; 3],
    read: LuaScript,
    write: LuaScript,
    scan: LuaScript,
    read_many: LuaScript,
    timeout: Duration,
    servers: String,
    cluster: bool,
    durability: Durability,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone and no operation can be running (each borrows the store):
        // stop the connection task, which would otherwise keep reconnecting forever.
        if let Ok(mut guard) = self.connection.lock() {
            if let Some(task) = guard.take() {
                task.abort();
            }
        }
    }
}

/// The official Redis Location Store (spec 22).
///
/// Implements [`LocationStore`] on one Redis server or a Redis Cluster through `fred`. Cheap to
/// clone (clones share one connection); the connection closes when the last clone is dropped
/// or on [`close`](Self::close).
///
/// Each operation is one Lua script call (`EVALSHA`, reloaded on `NOSCRIPT`): an exact read,
/// a whole conditional batch, one scan page, or every exact read of one `read_many`; StoreNow
/// is Redis `TIME` read inside it.
/// Every operation, waiting for the connection included, is bounded by the operation timeout
/// of [`RedisLocationOptions`]; a write that times out or loses its connection after being
/// sent may or may not have committed (reconstruct with an exact read), and is never retried
/// by the provider.
#[derive(Clone)]
pub struct RedisLocationStore {
    inner: Arc<Inner>,
}

impl fmt::Debug for RedisLocationStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLocationStore")
            .field("servers", &self.inner.servers)
            .field("cluster", &self.inner.cluster)
            .field("key_prefix", &self.inner.layout.prefix())
            .field("operation_timeout", &self.inner.timeout)
            .finish()
    }
}

impl RedisLocationStore {
    /// Connects and loads the scripts, within the operation timeout.
    ///
    /// Fails with [`StoreError::TimedOut`] if the server does not answer in time, or a
    /// [`StoreError::Failure`] if it refuses (authentication, TLS, an unreachable cluster).
    pub async fn connect(options: RedisLocationOptions) -> StoreResult<Self> {
        let timeout = options.operation_timeout;
        let mut config = options.config.clone();
        // This store's own TLS connector, so a refused handshake is told apart below.
        let observer = match &options.tls {
            Some(tls) => Some(tls.observe(&mut config)?),
            None => None,
        };
        let mut builder = Builder::from_config(config);
        builder
            .with_performance_config(|p| {
                // fred's own per-command timer: a command still queued (waiting for a
                // connection) when it fires is dropped, never written late.
                p.default_command_timeout = timeout;
            })
            .with_connection_config(|c| {
                // A command is sent at most once: a write whose connection broke may have
                // committed, and resending it could apply it twice.
                c.max_command_attempts = 1;
                c.connection_timeout = timeout;
                c.internal_command_timeout = timeout;
            })
            // Reconnect forever, promptly (each operation's timeout bounds how long it waits).
            .set_policy(options.reconnect_policy());
        let client = builder.build().map_err(map_redis)?;
        // The connection task runs until the store is dropped or closed; if setting up fails
        // or times out it is aborted here, so nothing keeps reconnecting in the background.
        let connection = client.connect();
        let setup = async {
            client.wait_for_connect().await.map_err(map_redis)?;
            let read = LuaScript::load(&client, "read", READ_LUA).await?;
            let write = LuaScript::load(&client, "write", WRITE_LUA).await?;
            let scan = LuaScript::load(&client, "scan", SCAN_LUA).await?;
            let many = LuaScript::load(&client, "read_many", read_many::READ_MANY_LUA).await?;
            Ok::<_, StoreError>((read, write, scan, many))
        };
        let (read, write, scan, read_many) = match tokio::time::timeout(timeout, setup).await {
            Ok(Ok(scripts)) => scripts,
            Ok(Err(e)) => {
                connection.abort();
                return Err(Observer::explain(observer.as_deref(), e));
            }
            Err(_) => {
                connection.abort();
                return Err(StoreError::TimedOut);
            }
        };
        tracing::debug!(servers = %options.servers(), prefix = %options.key_prefix, "connected");
        let layout = Layout::new(&options.key_prefix);
        let helper_keys = [
            Key::from(layout.seq_key()),
            Key::from(layout.index_key()),
            Key::from(layout.snapshots_key()),
        ];
        Ok(RedisLocationStore {
            inner: Arc::new(Inner {
                client,
                connection: std::sync::Mutex::new(Some(connection)),
                layout,
                helper_keys,
                read,
                write,
                scan,
                read_many,
                timeout,
                servers: options.servers(),
                cluster: options.is_cluster(),
                durability: options.durability,
            }),
        })
    }

    /// Closes the connection after the commands already sent are answered (waiting at most the
    /// operation timeout). Operations issued afterwards fail. Closing again does nothing more;
    /// dropping the last clone closes it too.
    pub async fn close(&self) {
        match tokio::time::timeout(self.inner.timeout, self.inner.client.quit()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(error = %e, "closing the Redis connection"),
            Err(_) => tracing::debug!("closing the Redis connection timed out"),
        }
    }

    /// Runs one operation within the operation timeout. Each command carries the timeout itself
    /// (so a command that never left the queue is dropped); this outer bound, a little longer,
    /// only guards the rare operation of two commands (a script sent again after `NOSCRIPT`).
    async fn bounded<T>(&self, op: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
        let t = self.inner.timeout;
        let guard = t + (t / 20).max(Duration::from_millis(50));
        match tokio::time::timeout(guard, op).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::TimedOut),
        }
    }

    /// `EVALSHA`; on `NOSCRIPT` (a restarted or failed-over server, `SCRIPT FLUSH`) the script
    /// is sent whole with `EVAL`, which also caches it on the node that owns the keys. Neither
    /// is ever resent after it may have run.
    ///
    /// `command` builds the keys and arguments; it runs again only for the rare second send.
    async fn eval(
        &self,
        s: &LuaScript,
        command: impl Fn() -> (Vec<Key>, Vec<Value>),
    ) -> StoreResult<Value> {
        let client = &self.inner.client;
        let (keys, args) = command();
        match s.script.evalsha::<Value, _, _, _>(client, keys, args).await {
            Err(e) if e.details().starts_with("NOSCRIPT") => {
                tracing::debug!(
                    script = s.name,
                    "script not cached on the server; sending it"
                );
                let (keys, args) = command();
                client.eval(s.lua, keys, args).await.map_err(map_redis)
            }
            other => other.map_err(map_redis),
        }
    }

    /// The write script with `WAIT replicas timeout` pipelined right behind it: both are
    /// written to one connection in one turn of fred's router (`WAIT` counts only the writes
    /// of its own connection; a reconnect between them would make it count nothing), to the
    /// node of the store's slot, and the script follows no redirection (a `MOVED` or `ASK`
    /// fails the write, as the `WAIT` went to the node the script was first sent to). On
    /// `NOSCRIPT` the pair is sent again with `EVAL`. A batch that applied but that fewer than
    /// `replicas` replicas confirmed fails with [`NotReplicated`](crate::NotReplicated) as
    /// its source; a conflict or an unreadable key wrote nothing and is returned as is.
    async fn eval_replicated(
        &self,
        request: &WriteRequest,
        replicas: u32,
        timeout: Duration,
    ) -> StoreResult<Value> {
        let s = &self.inner.write;
        let slot = fred::util::redis_keyslot(crate::layout::HASHTAG.as_bytes());
        let send = |name: &'static str, script: &str| {
            let (keys, args) = self.write_command(request);
            let mut all: Vec<Value> = Vec::with_capacity(2 + keys.len() + args.len());
            all.push(Value::from(script));
            all.push(Value::Integer(keys.len() as i64));
            all.extend(keys.into_iter().map(|k| Value::Bytes(k.into_bytes())));
            all.extend(args);
            let pipeline = self.inner.client.pipeline();
            let no_redirect = Options {
                max_redirections: Some(0),
                ..Options::default()
            };
            async move {
                let script = CustomCommand::new_static(name, ClusterHash::Custom(slot), false);
                let queued = pipeline.with_options(&no_redirect);
                queued
                    .custom::<Value, Value>(script, all)
                    .await
                    .map_err(map_redis)?;
                let (wait, wait_args) = wait_command(replicas, timeout);
                pipeline
                    .custom::<Value, Value>(wait, wait_args)
                    .await
                    .map_err(map_redis)?;
                let mut replies = pipeline.try_all::<Value>().await.into_iter();
                let reply = replies
                    .next()
                    .ok_or_else(|| reply_error("no script reply"))?;
                Ok::<_, StoreError>((reply, replies.next()))
            }
        };
        let (reply, wait) = match send("EVALSHA", s.script.sha1()).await? {
            (Err(e), _) if e.details().starts_with("NOSCRIPT") => {
                tracing::debug!(
                    script = s.name,
                    "script not cached on the server; sending it"
                );
                send("EVAL", s.lua).await?
            }
            other => other,
        };
        let reply = reply.map_err(map_redis)?;
        let applied =
            matches!(&reply, Value::Array(a) if matches!(a.first(), Some(Value::Integer(1))));
        if !applied {
            return Ok(reply);
        }
        let confirmed = match wait {
            Some(Ok(Value::Integer(n))) => u32::try_from(n.max(0)).unwrap_or(u32::MAX),
            Some(Ok(_)) | None => 0,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "WAIT failed after an applied write");
                0
            }
        };
        if confirmed < replicas {
            tracing::debug!(
                confirmed,
                replicas,
                "an applied write was not confirmed by enough replicas"
            );
            return Err(not_replicated(confirmed, replicas, timeout));
        }
        Ok(reply)
    }

    /// The helper keys, with room for `more` keys after them.
    fn helper_keys(&self, more: usize) -> Vec<Key> {
        let mut keys = Vec::with_capacity(3 + more);
        keys.extend(self.inner.helper_keys.iter().cloned());
        keys
    }

    async fn do_read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        let record_key = Key::from(self.inner.layout.record_key(key));
        let reply = self
            .eval(&self.inner.read, || (vec![record_key.clone()], Vec::new()))
            .await?;
        let mut parts = array(reply)?.into_iter();
        let now = parse_time(parts.next(), parts.next())?;
        let member = match parts.next() {
            None => return Ok(ReadResult::Missing { store_now: now }),
            Some(Value::Null) => {
                return match parts.next() {
                    None => Ok(ReadResult::Missing { store_now: now }),
                    Some(Value::Integer(UNREADABLE_FOREIGN_TYPE)) => {
                        Err(unreadable(key, UnreadableKind::ForeignType))
                    }
                    Some(_) => Err(reply_error("unknown read status")),
                };
            }
            Some(v) => bulk(v)?,
        };
        read_many::member_read(key, &member, now)
    }

    /// The keys and arguments of the write script for `request` (see `lua/write.lua`): each
    /// record key once, each put's member head (the member up to its version) built here.
    fn write_command(&self, request: &WriteRequest) -> (Vec<Key>, Vec<Value>) {
        let layout = &self.inner.layout;
        let unique = request.unique_keys();
        let mut keys = self.helper_keys(unique);
        let mut slots: HashMap<&StoreKey, i64> = HashMap::with_capacity(unique);
        // `sha256hex` of each record key, by slot (slot 4 first).
        let mut shas: Vec<String> = Vec::with_capacity(unique);
        let mut args: Vec<Value> =
            Vec::with_capacity(3 + request.conditions().len() + 4 * request.mutations().len());
        args.push(Value::Integer(SNAPSHOT_TTL_MS as i64));
        args.push(Value::Integer(request.conditions().len() as i64));
        args.push(Value::Integer(request.mutations().len() as i64));
        for c in request.conditions() {
            // The conditions name distinct keys (`WriteRequest::new` checks), so condition `i`
            // gets slot `4 + i`, which the script knows without being told.
            key_slot(layout, &mut slots, &mut shas, &mut keys, c.key());
            args.push(match c {
                Condition::Missing(_) => Value::from_static_str(""),
                Condition::Version(_, v) => Value::from(v.as_str()),
            });
        }
        for m in request.mutations() {
            let slot = key_slot(layout, &mut slots, &mut shas, &mut keys, m.key());
            let sha = usize::try_from(slot - 4)
                .ok()
                .and_then(|i| shas.get(i))
                .map_or("", String::as_str);
            let member = Value::from(index_member_of(m.key(), sha));
            args.push(Value::Integer(slot));
            match m {
                Mutation::Put {
                    key,
                    bytes,
                    retention,
                } => {
                    let ms = retention.map_or(0, |r| r.as_millis());
                    // Retention is bounded far below i64::MAX by the SPI.
                    args.push(Value::Integer(i64::try_from(ms).unwrap_or(i64::MAX)));
                    args.push(Value::Bytes(member_head(key, bytes)));
                    args.push(member);
                }
                Mutation::Delete(key) => {
                    args.push(Value::from_static_str("D"));
                    args.push(Value::Bytes(member_head(key, b"")));
                    args.push(member);
                }
            }
        }
        (keys, args)
    }

    async fn do_write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        let reply = match self.inner.durability {
            Durability::Replicas { replicas, timeout } => {
                self.eval_replicated(request, replicas, timeout).await?
            }
            _ => {
                self.eval(&self.inner.write, || self.write_command(request))
                    .await?
            }
        };
        let mut parts = array(reply)?.into_iter();
        let applied = integer(parts.next())?;
        let now = millis(parts.next())?;
        match applied {
            0 => Ok(WriteResult::Conflict { store_now: now }),
            1 if request.put_count() == 0 => Ok(WriteResult::Applied {
                put_versions: Vec::new(),
                store_now: now,
            }),
            1 => {
                let version = parts.next().ok_or_else(|| reply_error("no version"))?;
                let version = StoreVersion::from_utf8(&bulk(version)?)
                    .map_err(|_| reply_error("version out of bounds"))?;
                Ok(WriteResult::Applied {
                    put_versions: vec![version; request.put_count()],
                    store_now: now,
                })
            }
            2 => {
                let slot = integer(parts.next())?;
                let kind = match integer(parts.next())? {
                    UNREADABLE_FOREIGN_TYPE => UnreadableKind::ForeignType,
                    UNREADABLE_CORRUPT => UnreadableKind::Corrupt,
                    _ => return Err(reply_error("unknown unreadable reason")),
                };
                let key = key_of_slot(request, slot)
                    .ok_or_else(|| reply_error("unreadable key slot out of range"))?;
                Err(unreadable(key, kind))
            }
            _ => Err(reply_error("unknown write status")),
        }
    }

    async fn do_scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        let layout = &self.inner.layout;
        let prefix_hex = hex(request.prefix.as_bytes());
        let (snapshot, start, resume_key) = match &request.cursor {
            None => (String::new(), index_start(&prefix_hex), None),
            Some(cursor) => match decode_cursor(cursor, &request.prefix) {
                Some((snapshot, after)) => (snapshot, index_resume_after(&after), Some(after)),
                None => return Ok(ScanResult::Expired),
            },
        };
        let limit = request.limit.get();
        let args: Vec<Value> = vec![
            Value::Integer(SNAPSHOT_TTL_MS as i64),
            Value::from(layout.record_prefix()),
            Value::from(prefix_hex),
            Value::Integer(limit as i64),
            Value::from(snapshot),
            Value::from(start),
            Value::from(nonce()),
            Value::Integer(MAX_PAGE_ENCODED_LEN as i64),
            Value::Integer((2 * limit + SCAN_EXTRA_ENTRIES) as i64),
            Value::Integer(SCAN_MAX_WORK as i64),
            Value::Integer(MAX_SNAPSHOTS as i64),
        ];
        let mut keys = self.helper_keys(1);
        keys.push(Key::from(layout.snapshot_counter_key()));
        let reply = self
            .eval(&self.inner.scan, || (keys.clone(), args.clone()))
            .await?;
        let mut parts = array(reply)?.into_iter();
        let status = integer(parts.next())?;
        let now = millis(parts.next())?;
        if status == 0 {
            return Ok(ScanResult::Expired);
        }
        if status != 1 && status != 2 {
            return Err(reply_error("unknown scan status"));
        }
        let snapshot = bulk(parts.next().ok_or_else(|| reply_error("no snapshot id"))?)?;
        let last = bulk(
            parts
                .next()
                .ok_or_else(|| reply_error("no scan position"))?,
        )?;
        let mut items = Vec::with_capacity(parts.len() / 2);
        let mut unreadable = Vec::new();
        let mut size = 0usize;
        while let Some(member) = parts.next() {
            let key = key_of_index_member(&bulk(member)?)
                .ok_or_else(|| reply_error("malformed scan index member"))?;
            if !request.prefix.matches(&key) {
                return Err(reply_error("scanned key outside the prefix"));
            }
            let entry = parts
                .next()
                .ok_or_else(|| reply_error("scan entry without its record"))?;
            let kind = match entry {
                Value::Integer(UNREADABLE_FOREIGN_TYPE) => UnreadableKind::ForeignType,
                Value::Integer(UNREADABLE_CORRUPT) => UnreadableKind::Corrupt,
                Value::Integer(_) => return Err(reply_error("unknown scan entry status")),
                v => match decode_member(&bulk(v)?) {
                    Ok(record) if record.key == key => {
                        let item = ScanItem {
                            key: record.key,
                            bytes: record.bytes,
                            version: record.version,
                            expires_at: record.expires_at,
                        };
                        size += item.encoded_len();
                        items.push(item);
                        continue;
                    }
                    Ok(_) => {
                        tracing::debug!(%key, "scanned record names another key");
                        UnreadableKind::Corrupt
                    }
                    Err(e) => {
                        tracing::debug!(%key, error = %e, "scanned record undecodable");
                        UnreadableKind::Corrupt
                    }
                },
            };
            size += key.len();
            unreadable.push(UnreadableKey::new(key, kind));
        }
        if items.len() + unreadable.len() > limit || size > MAX_PAGE_ENCODED_LEN {
            return Err(reply_error("scan page over its bounds"));
        }
        let next_cursor = if status == 2 {
            let after = if last.is_empty() {
                resume_key
            } else {
                Some(
                    key_of_index_member(&last)
                        .ok_or_else(|| reply_error("malformed scan index member"))?,
                )
            };
            let after = after.ok_or_else(|| reply_error("no scan position"))?;
            let snapshot =
                std::str::from_utf8(&snapshot).map_err(|_| reply_error("snapshot id not UTF-8"))?;
            Some(encode_cursor(snapshot, &after)?)
        } else {
            None
        };
        Ok(ScanResult::Page(ScanPage {
            items,
            unreadable,
            next_cursor,
            store_now: now,
        }))
    }
}

impl LocationStore for RedisLocationStore {
    async fn read(&self, key: &StoreKey) -> StoreResult<ReadResult> {
        self.bounded(self.do_read(key)).await
    }

    async fn write(&self, request: &WriteRequest) -> StoreResult<WriteResult> {
        self.bounded(self.do_write(request)).await
    }

    async fn scan(&self, request: &ScanRequest) -> StoreResult<ScanResult> {
        self.bounded(self.do_scan(request)).await
    }

    async fn read_many(&self, keys: &[StoreKey]) -> StoreResult<Vec<ReadResult>> {
        self.bounded(self.do_read_many(keys)).await
    }

    async fn close(&self) {
        RedisLocationStore::close(self).await;
    }
}

/// The KEYS slot (1-based, as Lua sees it) of logical key `k`, adding its record key (and its
/// `sha256hex`, computed once per key, to `shas`) on first use.
fn key_slot<'a>(
    layout: &Layout,
    slots: &mut HashMap<&'a StoreKey, i64>,
    shas: &mut Vec<String>,
    keys: &mut Vec<Key>,
    k: &'a StoreKey,
) -> i64 {
    match slots.entry(k) {
        Entry::Occupied(e) => *e.get(),
        Entry::Vacant(e) => {
            // At most 3 + 2,048 slots.
            let slot = i64::try_from(keys.len() + 1).unwrap_or(i64::MAX);
            let sha = sha256_hex(k.as_bytes());
            keys.push(Key::from(layout.record_key_of_sha(&sha)));
            shas.push(sha);
            *e.insert(slot)
        }
    }
}

/// The logical key of `KEYS` slot `slot` (1-based) of the write script for `request`: slots
/// 4 and up hold each key once, in order of first use across the conditions, then the
/// mutations (see [`key_slot`]).
fn key_of_slot(request: &WriteRequest, slot: i64) -> Option<&StoreKey> {
    let index = usize::try_from(slot.checked_sub(4)?).ok()?;
    let mut seen = std::collections::HashSet::new();
    request
        .conditions()
        .iter()
        .map(Condition::key)
        .chain(request.mutations().iter().map(Mutation::key))
        .filter(|k| seen.insert(*k))
        .nth(index)
}

/// `key` cannot be read: a typed per-key error, no Redis text.
fn unreadable(key: &StoreKey, kind: UnreadableKind) -> StoreError {
    StoreError::Unreadable(UnreadableKey::new(key.clone(), kind))
}

fn array(v: Value) -> StoreResult<Vec<Value>> {
    match v {
        Value::Array(a) => Ok(a),
        _ => Err(reply_error("expected an array")),
    }
}

fn bulk(v: Value) -> StoreResult<Bytes> {
    match v {
        Value::Bytes(b) => Ok(b),
        Value::String(s) => Ok(s.into_inner()),
        _ => Err(reply_error("expected a bulk string")),
    }
}

fn integer(v: Option<Value>) -> StoreResult<i64> {
    match v {
        Some(Value::Integer(i)) => Ok(i),
        _ => Err(reply_error("expected an integer")),
    }
}

fn millis(v: Option<Value>) -> StoreResult<StoreTime> {
    let ms = u64::try_from(integer(v)?).map_err(|_| reply_error("negative time"))?;
    Ok(StoreTime::from_millis(ms))
}

/// Redis `TIME` (seconds, microseconds) as whole milliseconds.
fn parse_time(secs: Option<Value>, micros: Option<Value>) -> StoreResult<StoreTime> {
    let number = |v: Option<Value>| -> StoreResult<u64> {
        let b = bulk(v.ok_or_else(|| reply_error("no time"))?)?;
        std::str::from_utf8(&b)
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| reply_error("time is not a number"))
    };
    let (s, us) = (number(secs)?, number(micros)?);
    let ms = s
        .checked_mul(1000)
        .and_then(|ms| ms.checked_add(us / 1000))
        .ok_or_else(|| reply_error("time out of range"))?;
    Ok(StoreTime::from_millis(ms))
}
