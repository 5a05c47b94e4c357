#!lua flags=no-writes
-- Exact reads of many records in one step: the provider clock and the newest member of each.
-- KEYS[i] record keys (each one of the store's, all on its hashtag's slot). Returns
-- {seconds, microseconds, e1, e2, ...} with one entry per key, in order: the newest member,
-- false (nil) when the key holds none, or 1 when it holds another Redis type.
local t = redis.call('TIME')
local out = {t[1], t[2]}
for i = 1, #KEYS do
  local m = redis.pcall('ZREVRANGE', KEYS[i], 0, 0)
  if m.err then
    if string.find(m.err, 'WRONGTYPE', 1, true) then
      out[i + 2] = 1
    else
      return m
    end
  else
    out[i + 2] = m[1] or false
  end
end
return out
