//! The Lua scripts of the store (none of them carries payload bytes). Each touches exactly one
//! key (the blob key, which carries the `{zlink-relocation-v1}` hashtag), reads the clock with
//! `TIME` and judges expiry by that clock only: a blob is live while its `PEXPIRETIME` is after
//! `TIME`.
//!
//! `renew` and `delete` answer `{status, expires_at, store_now}` (milliseconds); `meta` answers
//! the expiry and the clock after a put.
//!
//! Payload bytes never pass through Lua: Redis copies a value passed into or out of a script
//! (the argument into a Lua string, a reply back through a buffer grown 1 MiB at a time), which
//! costs over 100 ms for a 64 MiB blob on Redis 7.0 where a plain `SET` or `GET` costs
//! 0.01-35 ms. A put is decided by one plain `SET ... NX GET`; a read is a MULTI/EXEC of plain
//! commands (see `store.rs`).

/// Status: the key holds a string without an expiry (not written by this provider).
pub(crate) const NO_EXPIRY: i64 = 3;

/// The clock prelude shared by every script: `now` in whole milliseconds of the Redis clock.
macro_rules! with_clock {
    ($body:expr) => {
        concat!(
            "local t = redis.call('TIME')\n",
            "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n",
            "local key = KEYS[1]\n",
            "local exp = redis.call('PEXPIRETIME', key)\n",
            "if exp == -1 then return {3, 0, now} end\n",
            $body
        )
    };
}

/// `renew(KEYS[1]=blob key, ARGV[1]=retention ms)`: `{1, expires_at, now}` renewed,
/// `{0, 0, now}` absent or expired.
pub(crate) const RENEW: &str = with_clock!(
    "if exp <= now then return {0, 0, now} end\n\
     local expires = now + tonumber(ARGV[1])\n\
     redis.call('PEXPIREAT', key, string.format('%.0f', expires))\n\
     return {1, expires, now}\n"
);

/// `meta(KEYS[1]=blob key)`: `{expiry, now}` — the key's `PEXPIRETIME` (-2 absent, -1 no
/// expiry) and the Redis clock. Sent right behind a put's `SET` on the same connection.
pub(crate) const META: &str = "local t = redis.call('TIME')\n\
     local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n\
     return {redis.call('PEXPIRETIME', KEYS[1]), now}\n";

/// `delete(KEYS[1]=blob key)`: `{1, 0, now}`; the key is unlinked (freed off the main thread).
pub(crate) const DELETE: &str = "local t = redis.call('TIME')\n\
     local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n\
     redis.call('UNLINK', KEYS[1])\n\
     return {1, 0, now}\n";
