-- Conditional atomic batch.
-- KEYS: [1] sequence, [2] scan index, [3] snapshots, [4..] record keys.
-- ARGV: [1] snapshot lifetime (ms), [2] #conditions, [3] #mutations, then per condition its
--   expected version ('' for Missing) — the conditions name distinct keys, so condition i is
--   about KEYS[3 + i] — then per mutation {key slot, 'D' for a delete or the put's retention
--   in ms (0 for none), member head, index member}. The member head is
--   the stored member up to its version: the tag 0x01, fixarray 0x95, then originalKey and
--   rawBytes ('' for a delete's tombstone) as cmsgpack str-family strings; the script appends
--   the version, the expiry and the tombstone flag exactly as cmsgpack.pack writes them.
-- Returns {0, now} for Conflict (nothing written, no sequence issued) or {1, now, version}
-- ({1, now} when there is no mutation), or {2, now, slot, reason} when the record key in that
-- KEYS slot cannot be read — reason 1: it holds another Redis type, 2: its newest member is
-- not of the record format — found before anything is written.
local SEQ, INDEX, SNAPS = KEYS[1], KEYS[2], KEYS[3]
local ttl = tonumber(ARGV[1])
local nc, nm = tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()

-- What the script knows of each record key it writes, by KEYS slot: ABSENT (no key), HELD (a
-- record), or DURABLE (a record whose newest member is a live value without expiry: its last
-- write was a durable put, which left the key without a Redis TTL).
local ABSENT, HELD, DURABLE = 1, 2, 3
local state = {}

-- A record key holding another Redis type: {2, now, slot, 1}; any other error as it is.
local function foreign(slot, r)
  if string.find(r.err, 'WRONGTYPE', 1, true) then
    return {2, now, slot, 1}
  end
  return r
end

-- 1. Every condition, before anything is written. A key of another type or a member not of
--    the record format is reported here, before any write.
for i = 1, nc do
  local slot = 3 + i
  local r = redis.pcall('ZREVRANGE', KEYS[slot], 0, 0)
  if r.err then
    return foreign(slot, r)
  end
  local m = r[1]
  local expected = ARGV[3 + i]
  local current = false
  if m then
    local klen, blen, version, expires, tombstone = decode(m)
    if not klen then
      return {2, now, slot, 2}
    end
    if tombstone then
      state[slot] = HELD
    elseif expires == 0 then
      current = version
      state[slot] = DURABLE
    else
      if expires > now then
        current = version
      end
      state[slot] = HELD
    end
  else
    state[slot] = ABSENT
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
--    can fail half-way through the commit: ZCARD, which counts a record's members, fails on a
--    key of another type, here, before any write (reported as its slot). A key a condition
--    read is known already.
local first_mutation = 4 + nc
local a = first_mutation
-- {0, member, 0, member, ...}: the index members of the records this batch creates.
local created = {}
local uses_index, uses_history = false, false
for _ = 1, nm do
  local slot = tonumber(ARGV[a])
  local s = state[slot]
  if not s then
    local n = redis.pcall('ZCARD', KEYS[slot])
    if type(n) == 'table' and n.err then
      return foreign(slot, n)
    end
    if n == 0 then
      s = ABSENT
    else
      s = HELD
    end
    state[slot] = s
  end
  if ARGV[a + 1] == 'D' then
    -- A delete may remove the index member.
    uses_index = true
  elseif s == ABSENT then
    -- A put of a new record adds its index member.
    uses_index = true
    created[#created + 1] = 0
    created[#created + 1] = ARGV[a + 3]
  end
  if s ~= ABSENT then
    -- Writing a record that exists trims its history by the live snapshots.
    uses_history = true
  end
  a = a + 4
end
if uses_index then
  redis.call('ZCARD', INDEX)
end

-- Live snapshot boundaries, ascending and distinct (nil when there is none), read only when a
-- record that exists is written: a new record has one member, which every snapshot may keep.
-- The registry exists only while it holds snapshots; reading it fails here, before any write,
-- if it holds another type.
local bounds = nil
local prune = false
if uses_history and redis.call('EXISTS', SNAPS) == 1 then
  prune = true
  local live = redis.call('ZRANGEBYSCORE', SNAPS, '(' .. int(now), '+inf')
  if #live > 0 then
    local seen, list = {}, {}
    for _, id in ipairs(live) do
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
end

-- A batch of conditions only changes nothing.
if nm == 0 then
  return {1, now}
end

-- 3. Commit: one sequence value for the whole batch, which is also every put's version.
local seq = redis.call('INCR', SEQ)
local ver = int(seq)
-- The version as cmsgpack writes it (a fixstr: at most 19 digits), and the score bound of
-- every older member.
local packed_ver = string.char(0xa0 + #ver) .. ver
local older = '(' .. ver
if prune then
  -- Expired snapshots go when the registry is read (it goes with the last of them).
  redis.call('ZREMRANGEBYSCORE', SNAPS, '-inf', int(now))
end
-- The index members of new records, in one command.
if #created > 0 then
  redis.call('ZADD', INDEX, unpack(created))
end
-- The index members of deleted records, removed in one command at the end.
local removed = {}

-- Keeps, of one record, the newest member and for every live boundary the newest member at
-- or below it; every other member is a version no live snapshot needs.
local function trim(rk)
  if not bounds then
    redis.call('ZREMRANGEBYSCORE', rk, '-inf', older)
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
  redis.call('ZREMRANGEBYSCORE', rk, prev, older)
end

a = first_mutation
for _ = 1, nm do
  local slot = tonumber(ARGV[a])
  local rk, s = KEYS[slot], state[slot]
  local kind, head, imember = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  if kind ~= 'D' then
    local retention = tonumber(kind)
    local expires = 0
    if retention > 0 then
      expires = now + retention
      redis.call('ZADD', rk, ver, head .. packed_ver .. cmsgpack.pack(expires) .. '\194')
    else
      redis.call('ZADD', rk, ver, head .. packed_ver .. '\0\194')
    end
    -- A new key (its index member added above) has no older member to trim and no Redis TTL
    -- to clear; a key that exists has its index member already (every script keeps one for
    -- each record key that exists).
    if s ~= ABSENT then
      trim(rk)
    end
    -- An expiring record outlives its expiry by one snapshot lifetime: every snapshot that
    -- can still see any of its versions was taken before now and ends by then.
    if expires > 0 then
      redis.call('PEXPIREAT', rk, int(expires + ttl))
    elseif s == HELD then
      redis.call('PERSIST', rk)
    end
  elseif s ~= ABSENT then
    if bounds then
      redis.call('ZADD', rk, ver, head .. packed_ver .. '\0\195')
      trim(rk)
    end
    if not bounds or redis.call('ZCARD', rk) == 1 then
      redis.call('DEL', rk)
      removed[#removed + 1] = imember
    else
      redis.call('PEXPIREAT', rk, int(now + ttl))
    end
  else
    removed[#removed + 1] = imember
  end
  a = a + 4
end
if #removed > 0 then
  redis.call('ZREM', INDEX, unpack(removed))
end
return {1, now, ver}
