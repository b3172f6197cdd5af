"""Pages of a Redis conversation's history read through its seq index.

Every message of a conversation is a member of its ``seq`` sorted set (see
:mod:`contextledger.stores.redis.keys`), scored by its seq and written by the same
script that writes the message. :data:`PAGE` walks a score range of it -- from the
front for ``limit``, from the back for ``last`` -- and reads the record, content and
mutable facts of the page's entries only, in one read-only round trip: a page of N
entries reads N entries (plus, without evicted entries, the evicted ones it steps over).

An index is complete when it has as many members as the ``msg`` hash has fields: the
scripts add and remove a member exactly where they add and remove a message, so it never
holds an id that is not a message, and equal counts mean equal sets. A conversation
written before the index existed (or only partly indexed since) has fewer -- or, pruned
by such a version after it was indexed, members that are no message; :data:`PAGE`
says so instead of answering (the store then reads the history whole: a read never
writes), and ``RedisStore.upgrade()`` fills the index in once with :func:`reindex_args`
/ :data:`REINDEX` (each id added only while its message still exists, so a prune racing
with it wins) and drops the strays with :data:`UNSTRAY`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from contextledger.errors import CorruptRecord
from contextledger.model.paging import Page
from contextledger.stores.redis.scripts import HMGET

__all__ = ["PAGE", "REINDEX", "REINDEX_CHUNK", "UNSTRAY", "page_args", "reindex_args", "reindex_chunks"]

PAGE = (
    r"""#!lua flags=no-writes
-- One page of message entries by seq. KEYS: msg content mut seq
-- ARGV: 1 after ('' = none)  2 before ('' = none)  3 count ('' = the whole range)
--   4 '1': count from the end (last), else from the start  5 '1': evicted entries too
-- Returns false when the seq index is incomplete, else
--   {ids, records, contents, {pin, tokens, evicted_by, revision_count} per id}, in seq order.
if redis.call('ZCARD', KEYS[4]) ~= redis.call('HLEN', KEYS[1]) then return false end
local lo = ARGV[1] == '' and '-inf' or '(' .. ARGV[1]
local hi = ARGV[2] == '' and '+inf' or '(' .. ARGV[2]
local count = tonumber(ARGV[3])
local backwards, all = ARGV[4] == '1', ARGV[5] == '1'
"""
    + HMGET
    + r"""
local ids = {}
if count == 0 then return {{}, {}, {}, {}} end
-- read the range in batches, each starting after the last seq read (keyset, no offset);
-- without evicted entries, the batch's evicted ones are stepped over
local batch = count and math.max(count, 16) or 1024
while true do
  local got
  if backwards then
    got = redis.call('ZREVRANGEBYSCORE', KEYS[4], hi, lo, 'WITHSCORES', 'LIMIT', 0, batch)
  else
    got = redis.call('ZRANGEBYSCORE', KEYS[4], lo, hi, 'WITHSCORES', 'LIMIT', 0, batch)
  end
  local evicted = {}
  if not all and #got > 0 then
    local fields = {}
    for i = 1, #got, 2 do fields[#fields + 1] = 'e|' .. got[i] end
    evicted = hmget(KEYS[3], fields)
  end
  for i = 1, #got, 2 do
    if all or not evicted[(i + 1) / 2] then
      ids[#ids + 1] = got[i]
      if count and #ids >= count then break end
    end
  end
  if (count and #ids >= count) or #got < 2 * batch then break end
  if backwards then hi = '(' .. got[#got] else lo = '(' .. got[#got] end
end
if backwards then
  for i = 1, math.floor(#ids / 2) do ids[i], ids[#ids + 1 - i] = ids[#ids + 1 - i], ids[i] end
end
if #ids == 0 then return {{}, {}, {}, {}} end
local fields = {}
for _, id in ipairs(ids) do
  fields[#fields + 1] = 'p|' .. id
  fields[#fields + 1] = 't|' .. id
  fields[#fields + 1] = 'e|' .. id
  fields[#fields + 1] = 'r|' .. id
end
return {ids, hmget(KEYS[1], ids), hmget(KEYS[2], ids), hmget(KEYS[3], fields)}
"""
)

REINDEX = r"""#!lua
-- Fill in a conversation's seq index (or its summaries' time index: the same with sum sumat).
-- KEYS: state msg seq; ARGV: seq, id pairs.
-- Each id is added only while its message exists (a prune since it was read wins); with a
-- ttl the index gets the conversation's expiry. Returns how many were new.
local added = 0
for i = 1, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[2], ARGV[i + 1]) == 1 then
    added = added + redis.call('ZADD', KEYS[3], ARGV[i], ARGV[i + 1])
  end
end
local left = redis.call('PTTL', KEYS[1])
if left > 0 and redis.call('PTTL', KEYS[3]) == -1 then redis.call('PEXPIRE', KEYS[3], left) end
return added
"""

UNSTRAY = r"""#!lua
-- Drop index members that are no message (an earlier version pruned without the index).
-- KEYS: msg seq (or sum sumat); ARGV: member ids. Each goes only while its message is absent; returns how many went.
local removed = 0
for i = 1, #ARGV do
  if redis.call('HEXISTS', KEYS[1], ARGV[i]) == 0 then
    removed = removed + redis.call('ZREM', KEYS[2], ARGV[i])
  end
end
return removed
"""

REINDEX_CHUNK = 1000
"""Messages per :data:`REINDEX` call (so no call is a huge script run blocking the server)."""


def page_args(page: Page, *, include_evicted: bool) -> list[str]:
    """The ARGV of :data:`PAGE` for ``page`` (a checked page of seq cursors)."""
    count = page.limit if page.limit is not None else page.last
    return [
        "" if page.after is None else str(page.after),
        "" if page.before is None else str(page.before),
        "" if count is None else str(count),
        "1" if page.last is not None else "0",
        "1" if include_evicted else "0",
    ]


def reindex_args(records: Iterable[tuple[bytes, bytes]], where: str) -> Iterator[list[str]]:
    """The ARGV of each :data:`REINDEX` call that indexes ``records`` ((message id, record) pairs).

    Raises:
        CorruptRecord: A record is not JSON holding an integer ``seq``.
    """
    return reindex_chunks(_seqs(records, where))


def _seqs(records: Iterable[tuple[bytes, bytes]], where: str) -> Iterator[tuple[str, str]]:
    for raw_id, record in records:
        entry_id = raw_id.decode("utf-8")
        try:
            seq = json.loads(record)["seq"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecord(f"damaged record: {exc}", where=where, record_id=entry_id) from exc
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise CorruptRecord(f"damaged record: seq {seq!r}", where=where, record_id=entry_id)
        yield str(seq), entry_id


def reindex_chunks(scored: Iterable[tuple[str, str]]) -> Iterator[list[str]]:
    """The ARGV of each :data:`REINDEX` call for ``scored`` ((score, member) pairs), :data:`REINDEX_CHUNK` a call."""
    chunk: list[str] = []
    for score, member in scored:
        chunk += [score, member]
        if len(chunk) >= 2 * REINDEX_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
