"""Lineage and expiry on Redis: links in a conversation's ``mut`` hash, whole idle conversations removed.

A link is an ``l|<key>`` field of its ancestor's ``mut`` hash (JSON without the
ancestor's ids, which are in the key), written by :data:`LINK` only while the ancestor
exists, and given the conversation's expiry when the hash is new. :data:`EXPIRE`
removes one conversation's keys in one script, only while its ``updated_at`` is still the
one read when it was judged idle (so a write that raced with it keeps it).
"""

from __future__ import annotations

import json

from contextledger.model.records import Expiry, LineageLink

__all__ = ["EXPIRE", "LINK", "RESEAL", "expiry_from", "expiry_json", "link_field", "link_from", "link_json"]

RESEAL = r"""#!lua
-- Replace stored values that are still what was read. KEYS: the keys of one conversation.
-- ARGV: groups of 5: key index, h (hash field) | l (list index), field or index, expected, new.
local done = 0
for i = 1, #ARGV, 5 do
  local key = KEYS[tonumber(ARGV[i])]
  local current
  if ARGV[i + 1] == 'h' then current = redis.call('HGET', key, ARGV[i + 2])
  else current = redis.call('LINDEX', key, tonumber(ARGV[i + 2])) end
  if current == ARGV[i + 3] then
    if ARGV[i + 1] == 'h' then redis.call('HSET', key, ARGV[i + 2], ARGV[i + 4])
    else redis.call('LSET', key, tonumber(ARGV[i + 2]), ARGV[i + 4]) end
    done = done + 1
  end
end
return done
"""

LINK = r"""#!lua
-- Record lineage links under one conversation. KEYS: state mut; ARGV: field, json pairs.
-- Returns how many were new; nothing when the conversation does not exist.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local added = 0
for i = 1, #ARGV, 2 do
  added = added + redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1])
end
local left = redis.call('PTTL', KEYS[1])
if left > 0 and redis.call('PTTL', KEYS[2]) == -1 then redis.call('PEXPIRE', KEYS[2], left) end
return added
"""

EXPIRE = r"""#!lua
-- Remove one conversation if it was not written since it was judged idle.
-- KEYS: every key of the conversation, the state first; ARGV: 1 its updated_at as read.
if redis.call('HGET', KEYS[1], 'updated_at') ~= ARGV[1] then return 0 end
redis.call('DEL', unpack(KEYS))
return 1
"""


def link_field(link: LineageLink) -> str:
    """The ``mut`` field that holds ``link``."""
    return f"l|{link.key}"


def link_json(link: LineageLink) -> str:
    """``link`` as stored (its ancestor is in the key)."""
    return link.model_dump_json(exclude={"session_id", "agent_id"})


def link_from(raw: bytes | str, session_id: str, agent_id: str) -> LineageLink:
    """A stored link."""
    return LineageLink.model_validate({**json.loads(raw), "session_id": session_id, "agent_id": agent_id})


def expiry_json(expiry: Expiry) -> str:
    """An expiry as stored (its session is in the key)."""
    return expiry.model_dump_json(exclude={"session_id"})


def expiry_from(raw: bytes | str, session_id: str) -> Expiry:
    """A stored expiry."""
    return Expiry.model_validate({**json.loads(raw), "session_id": session_id})
