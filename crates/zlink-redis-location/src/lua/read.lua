#!lua flags=no-writes
-- Exact read: the provider clock and the newest member of one record, in one step.
-- KEYS[1] record key. Returns {seconds, microseconds[, member]}.
local t = redis.call('TIME')
local m = redis.call('ZREVRANGE', KEYS[1], 0, 0)
return {t[1], t[2], m[1]}
