#!lua flags=no-writes
-- Exact read: the provider clock and the newest member of one record, in one step.
-- KEYS[1] record key. Returns {seconds, microseconds[, member]}, or
-- {seconds, microseconds, nil, 1} when the key holds another Redis type.
local t = redis.call('TIME')
local m = redis.pcall('ZREVRANGE', KEYS[1], 0, 0)
if m.err then
  if string.find(m.err, 'WRONGTYPE', 1, true) then
    return {t[1], t[2], false, 1}
  end
  return m
end
return {t[1], t[2], m[1]}
