-- One page of a snapshot scan.
-- KEYS: [1] sequence, [2] scan index, [3] snapshots, [4] snapshot creation counter.
-- ARGV: [1] snapshot lifetime (ms), [2] record key prefix, [3] hex of the scan prefix,
--   [4] page limit, [5] snapshot id ('' for the first page), [6] index lower bound,
--   [7] nonce for a new snapshot id, [8] page byte bound, [9] most index entries to examine,
--   [10] most stored bytes to decode, [11] most live snapshots.
-- Returns {0, now} when the snapshot is gone or foreign, else
--   {1 (last page) or 2 (more), now, snapshot id, last index member examined, entries...}
--   where each entry is two values: the index member of the key, then either the record
--   member at the snapshot or, for a key the provider cannot read, an integer: 1 when the
--   record key holds another Redis type, 2 when its member is not of the record format.
--   Entries (readable or not) count against the page limit.
local SEQ, INDEX, SNAPS, CREATED = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ttl = tonumber(ARGV[1])
local REC, hp = ARGV[2], ARGV[3]
local limit = tonumber(ARGV[4])
local id, start = ARGV[5], ARGV[6]
local max_page, budget, max_work = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local max_snapshots = tonumber(ARGV[11])
local now = now_ms()
local first = id == ''
local psha = redis.sha1hex(hp)
local boundary, taken

if first then
  boundary = tonumber(redis.call('GET', SEQ) or '0')
  if not boundary then
    return format_error('sequence is not a number')
  end
  taken = now
else
  local _, b, t, _, p = string.match(id, '^(%d+):(%d+):(%d+):(%x+):(%x+)$')
  local expires = redis.call('ZSCORE', SNAPS, id)
  if not b or p ~= psha or not expires or tonumber(expires) <= now then
    return {0, now}
  end
  boundary, taken = tonumber(b), tonumber(t)
end

local out = {1, now, '', ''}
local size, examined, work, count = 0, 0, 0, 0
local more, done = false, false
local chunk = math.min(budget + 1, 256)
local bound = int(boundary)
while not done do
  local members = redis.call('ZRANGEBYLEX', INDEX, start, '+', 'LIMIT', 0, chunk)
  for _, im in ipairs(members) do
    if string.sub(im, 1, #hp) ~= hp then
      done = true
      break
    end
    if count >= limit or examined >= budget or work >= max_work then
      more, done = true, true
      break
    end
    examined = examined + 1
    local rk = REC .. string.sub(im, -64)
    local r = redis.pcall('ZREVRANGEBYSCORE', rk, bound, '-inf', 'LIMIT', 0, 1)
    local m, unreadable = nil, nil
    if r.err then
      if not string.find(r.err, 'WRONGTYPE', 1, true) then
        return r
      end
      unreadable = 1
    else
      m = r[1]
    end
    local klen, blen, version, expires, tombstone
    if m then
      work = work + #m
      klen, blen, version, expires, tombstone = decode(m)
      if not klen then
        unreadable = 2
      end
    end
    if unreadable then
      -- Costs only this key: reported by its index member, beside the page's other items.
      local n = (#im - 65) / 2
      if size + n > max_page then
        more, done = true, true
        break
      end
      size = size + n
      out[5 + 2 * count] = im
      out[6 + 2 * count] = unreadable
      count = count + 1
    elseif m then
      if not tombstone and (expires == 0 or expires > taken) then
        local n = klen + blen + #version
        if size + n > max_page then
          more, done = true, true
          break
        end
        size = size + n
        out[5 + 2 * count] = im
        out[6 + 2 * count] = m
        count = count + 1
      end
    elseif redis.call('EXISTS', rk) == 0 then
      -- The record is gone (deleted or expired when no snapshot could see it any more).
      redis.call('ZREM', INDEX, im)
    end
    out[4] = im
  end
  if #members < chunk then
    break
  end
  start = '(' .. members[#members]
end

if more then
  out[1] = 2
  if first then
    redis.call('ZREMRANGEBYSCORE', SNAPS, '-inf', int(now))
    local live = redis.call('ZCARD', SNAPS)
    if live >= max_snapshots then
      redis.call('ZPOPMIN', SNAPS, live - max_snapshots + 1)
    end
    -- Snapshot ids: {creation number, zero-padded so that ids expiring in the same
    -- millisecond sort oldest first}:{boundary}:{taken at}:{nonce}:{sha1 of the prefix}.
    local created = redis.call('INCR', CREATED)
    id = string.format('%020d', created) .. ':' .. int(boundary) .. ':' .. int(taken) .. ':'
      .. ARGV[7] .. ':' .. psha
    redis.call('ZADD', SNAPS, int(taken + ttl), id)
  end
  out[3] = id
elseif not first then
  redis.call('ZREM', SNAPS, id)
end
return out
