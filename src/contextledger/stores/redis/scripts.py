"""Lua sources run by the Redis ledger store.

Why Lua: a changeset touches up to eight keys of one conversation (and the index that
lists its session by last update) and must apply all-or-nothing after checking the
version and every id it references. One script does that in one round trip, on one
server and on Redis Cluster alike (there all its keys share a hash slot). Redis does
not roll back a script that fails half-way, so :data:`COMMIT` checks everything -- key
types included -- before its first write, and the ``#!lua`` header makes Redis refuse
the whole script up front when it is out of memory instead of failing at a later write.

The scripts never parse JSON: content, metadata and records are opaque strings they
copy, so no value can be altered by a Lua JSON round trip (numbers, empty objects vs
arrays, escapes). Numbers they store arrive as decimal strings for the same reason.
"""

from __future__ import annotations

from contextledger.stores.redis.keys import CHANGESET_LOG_SIZE, SEQ_DIGITS

__all__ = ["ALIGN_TTL", "COMMIT", "COMMIT_FIXED_ARGS", "ERROR_PREFIXES", "LOAD", "READ_BACK", "SNAPSHOT", "TCODE"]

COMMIT_FIXED_ARGS = 16
"""ARGV slots before the variable part of :data:`COMMIT` (see its header comment)."""

ERROR_PREFIXES = ("CLCONFLICT", "CLDELETED", "CLDUPLICATE", "CLNOTFOUND", "CLWRONGTYPE")
"""Error replies :data:`COMMIT` raises; the store maps them to typed errors."""

TCODE = r"""-- an eviction time (epoch us, |at| < 2^53) as 17 bytes that sort as the times do: 'p' and
-- 16 digits from 0 up, 'n' and 16 digits of 2^53 + at below 0 (eviction_index.time_code)
local function tcode(at)
  local x = tonumber(at)
  if x >= 0 then return 'p' .. string.format('%016d', x) end
  return 'n' .. string.format('%016d', 9007199254740992 + x)
end
"""
"""``tcode(at)`` for the scripts keeping the trigger index of evictions (see :mod:`.eviction_index`)."""

COMMIT = r"""#!lua
-- Apply one changeset to one conversation, all or nothing.
-- KEYS: state msg content mut active sum red rev cs pins seq sumat evat evtr [sessions [agents [owner]]]
--   sessions: the sorted set listing the session by last update -- the global one on a
--   single server, on Cluster the one of the conversation's slot; agents: the session's
--   agent set, owner: the hash naming its app and user, both only on a single server (on
--   Cluster they live in another slot); the script only refreshes the owner's ttl
-- ARGV: 1 expected_version  2 now (ISO)  3 now (epoch us)  4 session_id  5 agent_id
--   6 reduction_id  7 model_call_count  8 next_seq  9 manager_state  10 agent_state
--   ('' = keep the stored value)  11 #appends  12 #evict  13 #pins  14 #revisions
--   15 has summary  16 has reduction, then:
--   appends:   id score record content   (per append)
--   evict:     id
--   pins:      id flag
--   revisions: id tokens|'' content row
--   summary:   id score active json at #replaces replaces...  (at: its created_at in epoch us,
--              '' = not indexed: see summary_index.py)
--   reduction: json trigger
--   restore:   #restore, then id kind(m|s) score   (per entry made active again; always sent)
--   and last (read from the end): one pin event row (JSON) per pin, the reduction's
--   created_at in epoch us ('' = none), the ttl in ms ('0' = none), the changeset id.
-- Order marks: state fields red_at / pin_at hold the greatest time pushed onto the
-- reductions / pin events list since it was empty, red_n / pin_n its length; a row older
-- than that sets red_unordered / pin_unordered (the list is then no longer in its
-- listing's order, and a page of it is read whole; see listing.py). A length that does
-- not match says a writer without marks pushed rows: the marks go (db upgrade sets them).
-- TTL: with a ttl every key of the conversation (and, on a single server, the session's
-- agent set) expires ttl ms after this commit, and the sessions index drops the
-- sessions last updated more than ttl ago (all their conversations have expired).
-- Exactly once: the cs hash maps each version to the changeset that produced it; a
-- changeset sent again after it applied (its reply was lost, or the client retried)
-- finds itself there and returns its version, changing nothing: it only writes its own
-- log entry again, so that the write reaches the replication stream and a WAIT that
-- follows on this connection counts the replicas holding the original commit too.
local K_STATE, K_MSG, K_CONTENT, K_MUT, K_ACTIVE, K_SUM, K_RED, K_REV, K_CS, K_PINS, K_SEQ, K_SUMAT, K_EVAT, K_EVTR =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12],
  KEYS[13], KEYS[14]
local LOG_SIZE = __LOG_SIZE__

local types = {'hash', 'hash', 'hash', 'hash', 'zset', 'hash', 'list', 'list', 'hash', 'list', 'zset',
  'zset', 'zset', 'zset', 'zset', 'set', 'hash'}
for i = 1, #KEYS do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t ~= 'none' and t ~= types[i] then
    return redis.error_reply('CLWRONGTYPE key ' .. KEYS[i] .. ' holds a ' .. t .. ', expected a ' .. types[i])
  end
end

local changeset_id = ARGV[#ARGV]
local ttl = tonumber(ARGV[#ARGV - 1])
local new_version = tonumber(ARGV[1]) + 1
if redis.call('HGET', K_CS, tostring(new_version)) == changeset_id then
  redis.call('HSET', K_CS, tostring(new_version), changeset_id)
  return new_version
end
local current = redis.call('HGET', K_STATE, 'version') or '0'
if current == '0' and ARGV[1] ~= '0' then
  return redis.error_reply('CLDELETED the conversation was deleted (expected version ' .. ARGV[1] .. ')')
end
if current ~= ARGV[1] then
  return redis.error_reply('CLCONFLICT ' .. current)
end
-- the eviction index (eviction_index.py) stays complete only if it was so at this version
local indexed = current == '0' or redis.call('HGET', K_STATE, 'ev_v') == current
-- and its by-trigger twin (evtr) only if that was complete too (mark et_v)
local tindexed = current == '0' or redis.call('HGET', K_STATE, 'et_v') == current

local pos = 17
local function take()
  local value = ARGV[pos]
  pos = pos + 1
  return value
end

local appends, appended = {}, {}
local duplicate = false
for _ = 1, tonumber(ARGV[11]) do
  local a = {take(), take(), take(), take()}
  if appended[a[1]] then duplicate = true end
  appended[a[1]] = true
  appends[#appends + 1] = a
end
local evict = {}
for _ = 1, tonumber(ARGV[12]) do evict[#evict + 1] = take() end
local pins = {}
for _ = 1, tonumber(ARGV[13]) do pins[#pins + 1] = {take(), take()} end
local revisions = {}
for _ = 1, tonumber(ARGV[14]) do revisions[#revisions + 1] = {take(), take(), take(), take()} end
local summary = nil
local replaced = {}
if ARGV[15] == '1' then
  summary = {take(), take(), take(), take(), take()}
  for _ = 1, tonumber(take()) do
    local id = take()
    replaced[id] = true
    evict[#evict + 1] = id
  end
end
local reduction, trigger = nil, nil
if ARGV[16] == '1' then reduction, trigger = take(), take() end
local reduction_id = ARGV[6]
local restore, restored = {}, {}
for _ = 1, tonumber(take()) do
  local r = {take(), take(), take()}
  restore[#restore + 1] = r
  restored[r[2] .. ':' .. r[1]] = true
end

-- validate everything before the first write
if duplicate then
  return redis.error_reply('CLDUPLICATE a changeset appends the same entry id twice')
end
for _, a in ipairs(appends) do
  if redis.call('HEXISTS', K_MSG, a[1]) == 1 or redis.call('HEXISTS', K_SUM, a[1]) == 1 then
    return redis.error_reply('CLDUPLICATE entry ' .. a[1] .. ' already exists in this conversation')
  end
end
for _, r in ipairs(restore) do
  local key = (r[2] == 'm') and K_MSG or K_SUM
  if redis.call('HEXISTS', key, r[1]) == 0 or redis.call('ZSCORE', K_ACTIVE, r[2] .. ':' .. r[1]) ~= false then
    return redis.error_reply('CLNOTFOUND cannot restore ' .. r[1] .. ': not an evicted entry')
  end
end
local function active_message(id)
  return appended[id] or restored['m:' .. id] or redis.call('ZSCORE', K_ACTIVE, 'm:' .. id) ~= false
end
local evicted, seen = {}, {}
for _, id in ipairs(evict) do
  if not seen[id] then
    seen[id] = true
    evicted[#evicted + 1] = id
    if not (active_message(id) or restored['s:' .. id] or redis.call('ZSCORE', K_ACTIVE, 's:' .. id) ~= false) then
      return redis.error_reply('CLNOTFOUND cannot evict ' .. id .. ': not an active entry')
    end
  end
end
for _, r in ipairs(revisions) do
  if not active_message(r[1]) then
    return redis.error_reply('CLNOTFOUND cannot revise ' .. r[1] .. ': not an active message')
  end
end
for _, p in ipairs(pins) do
  if not active_message(p[1]) then
    return redis.error_reply('CLNOTFOUND cannot pin ' .. p[1] .. ': not an active message')
  end
end

__TCODE__
-- an evicted entry's member in the eviction index: seq in __SEQ__ digits, m|s, id (ordered as the listing)
local function ev_member(view_score, kind, id)
  return string.format('%0__SEQ__d', math.floor(tonumber(view_score) / 2)) .. kind .. id
end
local red_at = ARGV[#ARGV - 2]
local red_exact = reduction ~= nil and red_at ~= '' and math.abs(tonumber(red_at)) < 9007199254740992
local function index_eviction(view_score, kind, id)
  local m = ev_member(view_score, kind, id)
  if red_exact then
    redis.call('ZADD', K_EVAT, red_at, m)
    if tindexed then redis.call('ZADD', K_EVTR, 0, trigger .. '|' .. tcode(red_at) .. m) end
  else
    -- no reduction row: the listing shows no such eviction; a time a score cannot hold: read whole
    redis.call('ZREM', K_EVAT, m)
    if reduction then indexed = false end
  end
end
-- apply, in the order the reference store does (restores first: a restored message may be revised)
for _, r in ipairs(restore) do
  redis.call('ZADD', K_ACTIVE, r[3], r[2] .. ':' .. r[1])
  local m = ev_member(r[3], r[2], r[1])
  if tindexed then
    local at = redis.call('ZSCORE', K_EVAT, m)
    if at then
      local by = redis.call('HGET', K_MUT, (r[2] == 'm' and 'e|' or 'se|') .. r[1])
      local trig = by and redis.call('HGET', K_MUT, 'rt|' .. by)
      if trig then redis.call('ZREM', K_EVTR, trig .. '|' .. tcode(at) .. m) else tindexed = false end
    end
  end
  redis.call('ZREM', K_EVAT, m)
  if r[2] == 'm' then
    redis.call('HDEL', K_MUT, 'e|' .. r[1])
  else
    redis.call('HDEL', K_MUT, 'se|' .. r[1], 'ss|' .. r[1])
  end
end
for _, a in ipairs(appends) do
  redis.call('HSET', K_MSG, a[1], a[3])
  redis.call('HSET', K_CONTENT, a[1], a[4])
  redis.call('ZADD', K_ACTIVE, a[2], 'm:' .. a[1])
  -- a message's view score is 2 * seq + 1 (keys.view_score): the seq index scores it by seq
  redis.call('ZADD', K_SEQ, (tonumber(a[2]) - 1) / 2, a[1])
end
local function mark(list, stem, at, pushes)
  local n = redis.call('LLEN', list)
  local last = redis.call('HGET', K_STATE, stem .. 'at')
  if last and redis.call('HGET', K_STATE, stem .. 'n') ~= tostring(n) then
    -- a writer that keeps no marks (an older version) pushed rows since: order unknown again
    redis.call('HDEL', K_STATE, stem .. 'at', stem .. 'n', stem .. 'unordered')
  elseif last then
    if tonumber(at) < tonumber(last) then
      redis.call('HSET', K_STATE, stem .. 'unordered', '1')
    else
      redis.call('HSET', K_STATE, stem .. 'at', at)
    end
    redis.call('HSET', K_STATE, stem .. 'n', n + pushes)
  elseif n == 0 then
    redis.call('HSET', K_STATE, stem .. 'at', at, stem .. 'n', pushes)
  end
end
local first_pin_row = #ARGV - 2 - #pins
if #pins > 0 then mark(K_PINS, 'pin_', ARGV[3], #pins) end
for i, p in ipairs(pins) do
  redis.call('HSET', K_MUT, 'p|' .. p[1], p[2])
  redis.call('RPUSH', K_PINS, ARGV[first_pin_row + i - 1])
end
for _, r in ipairs(revisions) do
  local number = redis.call('HINCRBY', K_MUT, 'r|' .. r[1], 1)
  local original = redis.call('HGET', K_CONTENT, r[1])
  redis.call('RPUSH', K_REV, '{"number":' .. number .. ',"original":' .. original .. ',"row":' .. r[4] .. '}')
  redis.call('HSET', K_CONTENT, r[1], r[3])
  if r[2] ~= '' then redis.call('HSET', K_MUT, 't|' .. r[1], r[2]) end
end
for _, id in ipairs(evicted) do
  if redis.call('HEXISTS', K_MSG, id) == 1 then
    index_eviction(redis.call('ZSCORE', K_ACTIVE, 'm:' .. id), 'm', id)
    redis.call('ZREM', K_ACTIVE, 'm:' .. id)
    redis.call('HSET', K_MUT, 'e|' .. id, reduction_id)
  else
    index_eviction(redis.call('ZSCORE', K_ACTIVE, 's:' .. id), 's', id)
    redis.call('ZREM', K_ACTIVE, 's:' .. id)
    redis.call('HSET', K_MUT, 'se|' .. id, reduction_id)
    if summary and replaced[id] then
      redis.call('HSET', K_MUT, 'ss|' .. id, summary[1])
    else
      redis.call('HDEL', K_MUT, 'ss|' .. id)
    end
  end
end
if summary then
  redis.call('HSET', K_SUM, summary[1], summary[4])
  -- the creation-time index holds exactly the summaries whose time a score holds exactly
  if summary[5] ~= '' then
    redis.call('ZADD', K_SUMAT, summary[5], summary[1])
  else
    redis.call('ZREM', K_SUMAT, summary[1])
  end
  redis.call('HDEL', K_MUT, 'se|' .. summary[1], 'ss|' .. summary[1])
  -- rb|<id>: the summary that replaced id, the one created last (created_at, seq) as the listing finds it
  if summary[5] == '' then
    indexed = false
  else
    local at, seq = tonumber(summary[5]), math.floor(tonumber(summary[2]) / 2)
    local value = summary[5] .. ':' .. seq .. ':' .. summary[1]
    for id, _ in pairs(replaced) do
      local prev = redis.call('HGET', K_MUT, 'rb|' .. id)
      local p_at, p_seq = nil, nil
      if prev then p_at, p_seq = string.match(prev, '^(%-?%d+):(%-?%d+):') end
      if not p_at or at > tonumber(p_at) or (at == tonumber(p_at) and seq >= tonumber(p_seq)) then
        redis.call('HSET', K_MUT, 'rb|' .. id, value)
      end
    end
  end
  if summary[3] == '1' then
    redis.call('ZADD', K_ACTIVE, summary[2], 's:' .. summary[1])
  else
    redis.call('ZREM', K_ACTIVE, 's:' .. summary[1])
  end
end
if reduction then
  mark(K_RED, 'red_', ARGV[#ARGV - 2], 1)
  -- rp|<id>: its position in the list (only ever appended to), for a page of evictions
  redis.call('HSET', K_MUT, 'rp|' .. reduction_id, redis.call('LLEN', K_RED))
  -- rt|<id>: its trigger, to find an eviction's member of the trigger index when it goes
  redis.call('HSET', K_MUT, 'rt|' .. reduction_id, trigger)
  redis.call('RPUSH', K_RED, reduction)
end

local version = redis.call('HINCRBY', K_STATE, 'version', 1)
redis.call('HSET', K_CS, tostring(version), changeset_id)
if version > LOG_SIZE then redis.call('HDEL', K_CS, tostring(version - LOG_SIZE)) end
if indexed then redis.call('HSET', K_STATE, 'ev_v', version) else redis.call('HDEL', K_STATE, 'ev_v') end
if indexed and tindexed then
  redis.call('HSET', K_STATE, 'et_v', version)
else
  redis.call('HDEL', K_STATE, 'et_v')
end
redis.call('HSET', K_STATE, 'updated_at', ARGV[2])
redis.call('HSETNX', K_STATE, 'created_at', ARGV[2])
local fields = {'model_call_count', 'next_seq', 'manager_state', 'agent_state'}
for i, name in ipairs(fields) do
  if ARGV[6 + i] ~= '' then redis.call('HSET', K_STATE, name, ARGV[6 + i]) end
end
if #KEYS >= 15 then redis.call('ZADD', KEYS[15], 'GT', ARGV[3], ARGV[4]) end
if #KEYS >= 16 then redis.call('SADD', KEYS[16], ARGV[5]) end
if ttl > 0 then
  for i = 1, 14 do redis.call('PEXPIRE', KEYS[i], ttl) end
  if #KEYS >= 16 then redis.call('PEXPIRE', KEYS[16], ttl) end
  if #KEYS >= 17 then redis.call('PEXPIRE', KEYS[17], ttl) end
  if #KEYS >= 15 then
    redis.call('ZREMRANGEBYSCORE', KEYS[15], '-inf', '(' .. string.format('%d', tonumber(ARGV[3]) - ttl * 1000))
    redis.call('PEXPIRE', KEYS[15], ttl)
  end
end
return version
"""
COMMIT = (
    COMMIT.replace("__TCODE__", TCODE.rstrip("\n"))
    .replace("__LOG_SIZE__", str(CHANGESET_LOG_SIZE))
    .replace("__SEQ__", str(SEQ_DIGITS))
)

HMGET = r"""-- HMGET in chunks: unpack() of a huge window would overflow the Lua C stack
local function hmget(key, fields)
  local out = {}
  for i = 1, #fields, 256 do
    local chunk = redis.call('HMGET', key, unpack(fields, i, math.min(i + 255, #fields)))
    for j = 1, #chunk do out[#out + 1] = chunk[j] end
  end
  return out
end
"""
"""``hmget(key, fields)`` for the read scripts: one definition, spliced into each that reads hashes by many fields."""


RANK = r"""-- byte order (Lua's string < uses the server's collation locale; Redis orders members by bytes)
local function before(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
-- how many members of the sorted set ``key`` sort before a cursor: every one below its time
-- ``at``; of those tied at it, none (mode '-'), all ('+'), or ('=') those whose bytes sort
-- before ``bound`` (and, ``inclusive``, the member equal to it)
local function rank(key, at, mode, bound, inclusive)
  local below = redis.call('ZCOUNT', key, '-inf', '(' .. at)
  if mode == '-' then return below end
  local tied = redis.call('ZRANGEBYSCORE', key, at, at)
  if mode == '+' then return below + #tied end
  for _, member in ipairs(tied) do
    if before(member, bound) or (inclusive and member == bound) then below = below + 1 end
  end
  return below
end
"""
"""``rank(key, at, mode, bound, inclusive)`` for the scripts paging through a time-scored index."""


LOAD = (
    r"""#!lua flags=no-writes
-- Read the state and the active view of one conversation: O(window), never O(history).
-- KEYS: state msg content mut active sum
-- Returns nil for an unknown conversation, else
--   {state (flat hash), members, records, contents, {pin, tokens} per message, summaries}
local state = redis.call('HGETALL', KEYS[1])
if #state == 0 then return false end
local members = redis.call('ZRANGE', KEYS[5], 0, -1)
local mids, mfields, sids = {}, {}, {}
for i = 1, #members do
  local member = members[i]
  local id = string.sub(member, 3)
  if string.sub(member, 1, 1) == 'm' then
    mids[#mids + 1] = id
    mfields[#mfields + 1] = 'p|' .. id
    mfields[#mfields + 1] = 't|' .. id
  else
    sids[#sids + 1] = id
  end
end
"""
    + HMGET
    + r"""
return {state, members, hmget(KEYS[2], mids), hmget(KEYS[3], mids), hmget(KEYS[4], mfields), hmget(KEYS[6], sids)}
"""
)

READ_BACK = r"""#!lua flags=no-writes
-- Did a changeset apply? KEYS: state cs; ARGV: the version it would have produced.
-- Returns {current version or false, id of the changeset that produced that version or false}.
return {redis.call('HGET', KEYS[1], 'version'), redis.call('HGET', KEYS[2], ARGV[1])}
"""

SNAPSHOT = r"""#!lua flags=no-writes
-- Read whole keys of one conversation atomically (for history and audit queries).
-- ARGV[i] says how to read KEYS[i]: h = HGETALL, l = LRANGE 0 -1, z = ZRANGE 0 -1,
-- hl = HLEN, zc = ZCARD.
local out = {}
for i = 1, #KEYS do
  local op, key = ARGV[i], KEYS[i]
  if op == 'h' then out[i] = redis.call('HGETALL', key)
  elseif op == 'l' then out[i] = redis.call('LRANGE', key, 0, -1)
  elseif op == 'z' then out[i] = redis.call('ZRANGE', key, 0, -1)
  elseif op == 'hl' then out[i] = redis.call('HLEN', key)
  elseif op == 'zc' then out[i] = redis.call('ZCARD', key)
  else return redis.error_reply('CLBADOP ' .. tostring(op)) end
end
return out
"""

ALIGN_TTL = r"""#!lua
-- After an erase or a prune on a ledger with a ttl: give a key of the conversation that
-- has no expiry (one those scripts created) the expiry of its state key.
-- KEYS: state, then the other keys of the conversation.
local left = redis.call('PTTL', KEYS[1])
if left <= 0 then return 0 end
local fixed = 0
for i = 2, #KEYS do
  if redis.call('PTTL', KEYS[i]) == -1 then
    redis.call('PEXPIRE', KEYS[i], left)
    fixed = fixed + 1
  end
end
return fixed
"""
