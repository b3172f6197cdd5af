"""Erase and prune on Redis: one script each, so the change is atomic on one server and on Cluster.

Tombstones live in the conversation's ``mut`` hash as ``x|<entry id>`` fields (JSON), so
no key is added to a conversation's layout. The scripts never parse JSON: the client
reads what it needs, builds the new records, and the script checks (the entry is there;
for a prune, it is not active; each revision position still holds a revision of that
entry) before it writes anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.model.messages import Message
from contextledger.model.records import SummaryEntry, Tombstone
from contextledger.stores.redis.scripts import TCODE

__all__ = ["ERASE", "PRUNE", "erase_args", "tombstone_from", "tombstone_json"]

ERASE = r"""#!lua
-- The newest tombstone of an entry takes x|<id>; one already there moves to the first free
-- x|<id>\31<n> (an id cannot hold a control character), so an entry erased and later
-- pruned keeps both, as the SQL stores and an import keep them.
local function keep_tombstone(mut, id, json)
  local field = 'x|' .. id
  local prev = redis.call('HGET', mut, field)
  if prev then
    local n = 1
    while redis.call('HEXISTS', mut, field .. '\31' .. n) == 1 do n = n + 1 end
    redis.call('HSET', mut, field .. '\31' .. n, prev)
  end
  redis.call('HSET', mut, field, json)
end
-- Erase one message entry. KEYS: msg content mut rev sum state
-- ARGV: 1 id  2 record json  3 content json  4 tombstone json  5 #revision positions
--   then positions (0-based), then #summaries, then (summary id, summary json) pairs
local id = ARGV[1]
if redis.call('HEXISTS', KEYS[1], id) == 0 then
  return redis.error_reply('CLNOTFOUND no message ' .. id .. ' in this conversation')
end
local pos = 5
local function take() pos = pos + 1 return ARGV[pos] end
local positions = {}
for _ = 1, tonumber(ARGV[5]) do positions[#positions + 1] = tonumber(take()) end
local summaries = {}
for _ = 1, tonumber(take()) do summaries[#summaries + 1] = {take(), take()} end
local needle = '"message_id":"' .. id .. '"'
for _, p in ipairs(positions) do
  local row = redis.call('LINDEX', KEYS[4], p)
  if not row or not string.find(row, needle, 1, true) then
    return redis.error_reply('CLCONFLICT the revisions of ' .. id .. ' moved; retry')
  end
end
for _, s in ipairs(summaries) do
  if redis.call('HEXISTS', KEYS[5], s[1]) == 0 then
    return redis.error_reply('CLNOTFOUND no summary ' .. s[1] .. ' in this conversation')
  end
end
redis.call('HSET', KEYS[1], id, ARGV[2])
redis.call('HSET', KEYS[2], id, ARGV[3])
redis.call('HDEL', KEYS[3], 'r|' .. id)
for _, p in ipairs(positions) do redis.call('LSET', KEYS[4], p, '__erased__') end
if #positions > 0 then redis.call('LREM', KEYS[4], 0, '__erased__') end
for _, s in ipairs(summaries) do redis.call('HSET', KEYS[5], s[1], s[2]) end
keep_tombstone(KEYS[3], id, ARGV[4])
-- a new version: a conversation opened before the erase conflicts at its next commit and
-- re-reads, instead of planning (summarizing) the erased text it holds
-- (the eviction indexes are untouched: each stays complete if it was)
local was = redis.call('HGET', KEYS[6], 'version')
local complete = redis.call('HGET', KEYS[6], 'ev_v') == was
local tcomplete = redis.call('HGET', KEYS[6], 'et_v') == was
local version = redis.call('HINCRBY', KEYS[6], 'version', 1)
if complete then redis.call('HSET', KEYS[6], 'ev_v', version) end
if tcomplete then redis.call('HSET', KEYS[6], 'et_v', version) end
return 1
"""

PRUNE = r"""#!lua
__TCODE__
-- The newest tombstone of an entry takes x|<id>; one already there moves to the first free
-- x|<id>\31<n> (an id cannot hold a control character), so an entry erased and later
-- pruned keeps both, as the SQL stores and an import keep them.
local function keep_tombstone(mut, id, json)
  local field = 'x|' .. id
  local prev = redis.call('HGET', mut, field)
  if prev then
    local n = 1
    while redis.call('HEXISTS', mut, field .. '\31' .. n) == 1 do n = n + 1 end
    redis.call('HSET', mut, field .. '\31' .. n, prev)
  end
  redis.call('HSET', mut, field, json)
end
-- Delete evicted entries. KEYS: msg content mut rev sum active seq sumat evat state evtr
-- ARGV: #messages, ids..., #summaries, ids..., #revision positions, positions...,
--   #tombstones, (id, json) pairs, #members, (id, eviction index member) pairs,
--   #summaries, (summary id, #replaces, replaces...), the version those were read at, #next,
--   (entry id, rb| value or '' for none) pairs: the replacing summary of each entry the
--   pruned summaries replaced, found among the others as read. Active entries are skipped;
--   returns how many went.
local pos = 0
local function take() pos = pos + 1 return ARGV[pos] end
local messages, summaries, positions, tombs = {}, {}, {}, {}
for _ = 1, tonumber(take()) do messages[#messages + 1] = take() end
for _ = 1, tonumber(take()) do summaries[#summaries + 1] = take() end
for _ = 1, tonumber(take()) do positions[#positions + 1] = tonumber(take()) end
for _ = 1, tonumber(take()) do tombs[#tombs + 1] = {take(), take()} end
local members, replaces = {}, {}
for _ = 1, tonumber(take()) do local id = take() members[id] = take() end
local asked = 0
for _ = 1, tonumber(take()) do
  local id, list = take(), {}
  for _ = 1, tonumber(take()) do list[#list + 1] = take() end
  replaces[id] = list
  asked = asked + 1
end
local read_at, nexts = take(), {}
for _ = 1, tonumber(take()) do local id = take() nexts[id] = take() end
local gone, by = {}, {}
for _, id in ipairs(messages) do
  if redis.call('HEXISTS', KEYS[1], id) == 1 and redis.call('ZSCORE', KEYS[6], 'm:' .. id) == false then
    gone[id] = true
    by[id] = redis.call('HGET', KEYS[3], 'e|' .. id)
  end
end
for _, p in ipairs(positions) do
  local row = redis.call('LINDEX', KEYS[4], p)
  local ok = false
  if row then
    for id, _ in pairs(gone) do
      if string.find(row, '"message_id":"' .. id .. '"', 1, true) then ok = true end
    end
  end
  if not ok then return redis.error_reply('CLCONFLICT the revisions moved; retry') end
end
local count = 0
for id, _ in pairs(gone) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[7], id)
  redis.call('HDEL', KEYS[3], 'p|' .. id, 't|' .. id, 'e|' .. id, 'r|' .. id)
  count = count + 1
end
for _, p in ipairs(positions) do redis.call('LSET', KEYS[4], p, '__pruned__') end
if #positions > 0 then redis.call('LREM', KEYS[4], 0, '__pruned__') end
for _, id in ipairs(summaries) do
  if redis.call('HEXISTS', KEYS[5], id) == 1 and redis.call('ZSCORE', KEYS[6], 's:' .. id) == false then
    by[id] = redis.call('HGET', KEYS[3], 'se|' .. id)
    redis.call('HDEL', KEYS[5], id)
    redis.call('ZREM', KEYS[8], id)
    redis.call('HDEL', KEYS[3], 'se|' .. id, 'ss|' .. id)
    gone[id] = true
    count = count + 1
  end
end
for _, t in ipairs(tombs) do
  if gone[t[1]] then keep_tombstone(KEYS[3], t[1], t[2]) end
end
-- the eviction index: what went leaves it; an entry left whose replacing summary went is
-- now replaced by the next one, as read -- if nothing was committed since, every summary
-- asked for went, and that one is still there; else the index is marked incomplete
for id, _ in pairs(gone) do
  local m = members[id]
  local at = m and redis.call('ZSCORE', KEYS[9], m)
  if at then
    -- its member of the trigger index: the trigger of the reduction that evicted it
    local trig = by[id] and redis.call('HGET', KEYS[3], 'rt|' .. by[id])
    if trig then
      redis.call('ZREM', KEYS[11], trig .. '|' .. tcode(at) .. m)
    else
      redis.call('HDEL', KEYS[10], 'et_v')
    end
    redis.call('ZREM', KEYS[9], m)
  end
  redis.call('HDEL', KEYS[3], 'rb|' .. id)
end
local went = 0
for id, _ in pairs(replaces) do
  if gone[id] then went = went + 1 end
end
local current = went == asked and redis.call('HGET', KEYS[10], 'version') == read_at
local function known(value)
  if not current or value == nil then return false end
  if value == '' then return true end
  local sid = string.match(value, '^[^:]*:[^:]*:(.*)$')
  return sid ~= nil and not gone[sid] and redis.call('HEXISTS', KEYS[5], sid) == 1
end
for id, list in pairs(replaces) do
  if gone[id] then
    local tail = ':' .. id
    for _, rid in ipairs(list) do
      local by = redis.call('HGET', KEYS[3], 'rb|' .. rid)
      if by and string.sub(by, -#tail) == tail then
        local value = nexts[rid]
        if known(value) and value ~= '' then
          redis.call('HSET', KEYS[3], 'rb|' .. rid, value)
        else
          redis.call('HDEL', KEYS[3], 'rb|' .. rid)
          if not known(value) then redis.call('HDEL', KEYS[10], 'ev_v') end
        end
      end
    end
  end
end
return count
""".replace("__TCODE__", TCODE.rstrip("\n"))


def tombstone_json(tombstone: Tombstone) -> str:
    """A tombstone as stored (session and agent are in the key)."""
    return tombstone.model_dump_json(exclude={"session_id", "agent_id"})


def tombstone_from(raw: bytes | str, session_id: str, agent_id: str) -> Tombstone:
    """A stored tombstone."""
    data = json.loads(raw)
    return Tombstone.model_validate({**data, "session_id": session_id, "agent_id": agent_id})


def erase_args(
    entry_id: str,
    record: Mapping[str, Any],
    erased: Message,
    tombstone: Tombstone,
    positions: Sequence[int],
    summaries: Mapping[str, SummaryEntry],
) -> list[str]:
    """ARGV of :data:`ERASE` (the record keeps seq, tokens, stamps; its metadata is the erased one's)."""
    new_record = dict(record)
    erased_record = erased.to_record()
    new_record["metadata"] = erased_record["metadata"]
    args = [
        entry_id,
        json.dumps(new_record, separators=(",", ":"), ensure_ascii=False),
        json.dumps(erased_record["content"], separators=(",", ":"), ensure_ascii=False),
        tombstone_json(tombstone),
        str(len(positions)),
        *(str(p) for p in positions),
        str(len(summaries)),
    ]
    for summary_id, summary in summaries.items():
        args += [summary_id, summary.model_dump_json()]
    return args
