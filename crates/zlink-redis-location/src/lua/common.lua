-- Shared helpers (prepended to the write and scan scripts).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Integers as command arguments, always in plain decimal.
local function int(n)
  return string.format('%d', n)
end

-- The str-family header (fixstr, str8, str16, str32; never bin) at byte i of m: the string's
-- length and the position of its first byte, or nil.
local function str_at(m, i)
  local b = string.byte(m, i)
  if not b then
    return nil
  elseif b >= 0xa0 and b <= 0xbf then
    return b - 0xa0, i + 1
  elseif b == 0xd9 then
    local l = string.byte(m, i + 1)
    if l then
      return l, i + 2
    end
  elseif b == 0xda then
    local h, l = string.byte(m, i + 1, i + 2)
    if l then
      return h * 256 + l, i + 3
    end
  elseif b == 0xdb then
    local b1, b2, b3, b4 = string.byte(m, i + 1, i + 4)
    if b4 then
      return ((b1 * 256 + b2) * 256 + b3) * 256 + b4, i + 5
    end
  end
  return nil
end

-- Big-endian unsigned integer of the n bytes after byte i of m, or nil if m ends first.
local function be_at(m, i, n)
  if i + n > #m then
    return nil
  end
  local v = 0
  for j = i + 1, i + n do
    v = v * 256 + string.byte(m, j)
  end
  return v
end

-- Reads a stored member strictly without copying its key or bytes: the 0x01 tag, then the
-- cmsgpack five-element array {originalKey, rawBytes, version, expiresAtMs, tombstone} of
-- three str-family strings, an unsigned integer (positive fixint, uint8/16/32/64) and a
-- boolean, with nothing after it. Returns the key length, the bytes length, the version, the
-- expiry and the tombstone flag; or nil and the reason it is not a record of this format.
local function decode(m)
  if string.byte(m, 1) ~= 1 then
    return nil, 'unknown record format tag'
  end
  if string.byte(m, 2) ~= 0x95 then
    return nil, 'record is not a five-element array'
  end
  local klen, i = str_at(m, 3)
  if not klen then
    return nil, 'malformed record'
  end
  local blen, j = str_at(m, i + klen)
  if not blen then
    return nil, 'malformed record'
  end
  local vlen, k = str_at(m, j + blen)
  if not vlen then
    return nil, 'malformed record'
  end
  local version = string.sub(m, k, k + vlen - 1)
  k = k + vlen
  local b = string.byte(m, k)
  local expires
  if not b then
    return nil, 'malformed record'
  elseif b <= 0x7f then
    expires = b
  elseif b == 0xcc then
    expires, k = be_at(m, k, 1), k + 1
  elseif b == 0xcd then
    expires, k = be_at(m, k, 2), k + 2
  elseif b == 0xce then
    expires, k = be_at(m, k, 4), k + 4
  elseif b == 0xcf then
    expires, k = be_at(m, k, 8), k + 8
  end
  if not expires then
    return nil, 'malformed record'
  end
  local t = string.byte(m, k + 1)
  if k + 1 ~= #m or (t ~= 0xc2 and t ~= 0xc3) then
    return nil, 'malformed record'
  end
  return klen, blen, version, expires, t == 0xc3
end

local function format_error(reason)
  return redis.error_reply('ZLINK-FORMAT ' .. reason)
end
