-- Shared helpers (prepended to the write and scan scripts).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Integers as command arguments, always in plain decimal.
local function int(n)
  return string.format('%d', n)
end

-- Decodes a stored member: the 0x01 tag, then the cmsgpack five-element array
-- {originalKey, rawBytes, version, expiresAtMs, tombstone}. Returns the array,
-- or nil and the reason it is not a record of this format.
local function decode(m)
  if string.byte(m, 1) ~= 1 then
    return nil, 'unknown record format tag'
  end
  if string.byte(m, 2) ~= 149 then
    return nil, 'record is not a five-element array'
  end
  -- One object from the second byte on; `rest` is -1 when it ends the member exactly.
  local ok, rest, rec = pcall(cmsgpack.unpack_one, m, 1)
  if not ok or rest ~= -1 or type(rec) ~= 'table' then
    return nil, 'malformed record'
  end
  if type(rec[1]) ~= 'string' or type(rec[2]) ~= 'string' or type(rec[3]) ~= 'string'
      or type(rec[4]) ~= 'number' or rec[4] < 0 or type(rec[5]) ~= 'boolean' then
    return nil, 'malformed record'
  end
  return rec
end

local function format_error(reason)
  return redis.error_reply('ZLINK-FORMAT ' .. reason)
end
