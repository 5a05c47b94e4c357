-- Conditional atomic batch.
-- KEYS: [1] sequence, [2] scan index, [3] snapshots, [4..] record keys.
-- ARGV: [1] snapshot lifetime (ms), [2] #conditions, [3] #mutations, then per condition
--   {key slot, expected version or '' for Missing}, then per mutation
--   {key slot, 'P' or 'D', original key, index member, bytes, retention ms or 0}.
-- Returns {0, now} for Conflict (nothing written, no sequence issued) or {1, now, version}
-- ({1, now} when there is no mutation).
local SEQ, INDEX, SNAPS = KEYS[1], KEYS[2], KEYS[3]
local ttl = tonumber(ARGV[1])
local nc, nm = tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()

-- 1. Every condition, before anything is written.
local a = 4
for _ = 1, nc do
  local m = redis.call('ZREVRANGE', KEYS[tonumber(ARGV[a])], 0, 0)[1]
  local expected = ARGV[a + 1]
  a = a + 2
  local current = false
  if m then
    local rec, err = decode(m)
    if not rec then
      return format_error(err)
    end
    if not rec[5] and (rec[4] == 0 or rec[4] > now) then
      current = rec[3]
    end
  end
  if expected == '' then
    if current then
      return {0, now}
    end
  elseif current ~= expected then
    return {0, now}
  end
end

-- 2. Every key the mutations write must be a record (or absent), so that no command below
--    can fail half-way through the commit.
local first_mutation = a
for _ = 1, nm do
  local ty = redis.call('TYPE', KEYS[tonumber(ARGV[a])])['ok']
  if ty ~= 'zset' and ty ~= 'none' then
    return format_error('record key holds another type')
  end
  a = a + 6
end
for _, k in ipairs({INDEX, SNAPS}) do
  local ty = redis.call('TYPE', k)['ok']
  if ty ~= 'zset' and ty ~= 'none' then
    return format_error('helper key holds another type')
  end
end

-- A batch of conditions only changes nothing.
if nm == 0 then
  return {1, now}
end

-- 3. Commit: one sequence value for the whole batch, which is also every put's version.
local seq = redis.call('INCR', SEQ)
local ver = int(seq)

-- Live snapshot boundaries, ascending and distinct (nil when there is none).
redis.call('ZREMRANGEBYSCORE', SNAPS, '-inf', int(now))
local bounds = nil
if redis.call('ZCARD', SNAPS) > 0 then
  local seen, list = {}, {}
  for _, id in ipairs(redis.call('ZRANGE', SNAPS, 0, -1)) do
    local b = tonumber(string.match(id, '^%d+:(%d+):'))
    if b and not seen[b] then
      seen[b] = true
      list[#list + 1] = b
    end
  end
  table.sort(list)
  if #list > 0 then
    bounds = list
  end
end

-- Keeps, of one record, the newest member and for every live boundary the newest member at
-- or below it; every other member is a version no live snapshot needs.
local function trim(rk, newest)
  if not bounds then
    redis.call('ZREMRANGEBYSCORE', rk, '-inf', '(' .. int(newest))
    return
  end
  local nb = #bounds
  -- The first boundary with a member at or below it.
  local lo, hi = 1, nb + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if redis.call('ZCOUNT', rk, '-inf', int(bounds[mid])) > 0 then
      hi = mid
    else
      lo = mid + 1
    end
  end
  local total = redis.call('ZCARD', rk)
  local kept = 0
  local prev = '-inf'
  for j = lo, nb do
    if kept >= total - 1 then
      break
    end
    local b = int(bounds[j])
    local c = redis.call('ZCOUNT', rk, prev, b)
    if c > 1 then
      redis.call('ZREMRANGEBYRANK', rk, kept, kept + c - 2)
      total = total - (c - 1)
      c = 1
    end
    kept = kept + c
    prev = '(' .. b
  end
  redis.call('ZREMRANGEBYSCORE', rk, prev, '(' .. int(newest))
end

a = first_mutation
for _ = 1, nm do
  local rk = KEYS[tonumber(ARGV[a])]
  local kind, okey, imember = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  if kind == 'P' then
    local retention = tonumber(ARGV[a + 5])
    local expires = 0
    if retention > 0 then
      expires = now + retention
    end
    redis.call('ZADD', rk, ver, '\1' .. cmsgpack.pack({okey, ARGV[a + 4], ver, expires, false}))
    redis.call('ZADD', INDEX, 0, imember)
    trim(rk, seq)
    -- An expiring record outlives its expiry by one snapshot lifetime: every snapshot that
    -- can still see any of its versions was taken before now and ends by then.
    if expires > 0 then
      redis.call('PEXPIREAT', rk, int(expires + ttl))
    else
      redis.call('PERSIST', rk)
    end
  elseif redis.call('EXISTS', rk) == 1 then
    if bounds then
      redis.call('ZADD', rk, ver, '\1' .. cmsgpack.pack({okey, '', ver, 0, true}))
      trim(rk, seq)
    end
    if not bounds or redis.call('ZCARD', rk) == 1 then
      redis.call('DEL', rk)
      redis.call('ZREM', INDEX, imember)
    else
      redis.call('PEXPIREAT', rk, int(now + ttl))
    end
  else
    redis.call('ZREM', INDEX, imember)
  end
  a = a + 6
end
return {1, now, ver}
