//! The Lua scripts behind the four operations. Each touches exactly one key (the blob key, which
//! carries the `{zlink-relocation-v1}` hashtag), reads the clock with `TIME` and judges expiry by
//! that clock only: a blob is live while its `PEXPIRETIME` is after `TIME`.
//!
//! Every script answers an array whose first element is a status code and whose last-but-one
//! and last integer elements are `expires_at` and `store_now` in milliseconds (the read script
//! appends the bytes after them).

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

/// `put(KEYS[1]=blob key, ARGV[1]=payload, ARGV[2]=retention ms)`:
/// `{0, expires_at, now}` stored, `{1, expires_at, now}` byte-identical payload already live,
/// `{2, 0, now}` different payload live. An expired blob is replaced.
pub(crate) const PUT: &str = with_clock!(
    "if exp > now then\n\
       if redis.call('STRLEN', key) == string.len(ARGV[1]) and redis.call('GET', key) == ARGV[1] then\n\
         return {1, exp, now}\n\
       end\n\
       return {2, 0, now}\n\
     end\n\
     local expires = now + tonumber(ARGV[2])\n\
     redis.call('SET', key, ARGV[1], 'PXAT', string.format('%.0f', expires))\n\
     return {0, expires, now}\n"
);

/// `read(KEYS[1]=blob key)`: `{1, expires_at, now, bytes}` live, `{0, 0, now}` absent or expired.
pub(crate) const READ: &str = with_clock!(
    "if exp <= now then return {0, 0, now} end\n\
     return {1, exp, now, redis.call('GET', key)}\n"
);

/// `renew(KEYS[1]=blob key, ARGV[1]=retention ms)`: `{1, expires_at, now}` renewed,
/// `{0, 0, now}` absent or expired.
pub(crate) const RENEW: &str = with_clock!(
    "if exp <= now then return {0, 0, now} end\n\
     local expires = now + tonumber(ARGV[1])\n\
     redis.call('PEXPIREAT', key, string.format('%.0f', expires))\n\
     return {1, expires, now}\n"
);

/// `delete(KEYS[1]=blob key)`: `{1, 0, now}`; the key is unlinked (freed off the main thread).
pub(crate) const DELETE: &str = "local t = redis.call('TIME')\n\
     local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n\
     redis.call('UNLINK', KEYS[1])\n\
     return {1, 0, now}\n";
