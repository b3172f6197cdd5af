"""Pages of a Redis conversation's summaries read through its creation-time index.

Every summary of a conversation is a member of its ``sumat`` sorted set (see
:mod:`contextledger.stores.redis.keys`), scored by its ``created_at`` in epoch µs and
written by the same script that writes the summary (commit, import; prune removes it,
delete and expiry take the key with the others). The summaries listing is ordered by
``(created_at, agent_id, summary_id)``: within one agent that is the set's own order --
score, then member bytes, and a summary id's UTF-8 bytes sort as its code points do. So
unlike the reductions list (in commit order, whose times can go back along it; see
:mod:`.listing`), a summary planned on a clock that lags is simply ranked where it
belongs: the index needs no order mark.

:data:`PAGE` turns a page's cursors into ranks (``ZCOUNT`` below the cursor's time, plus
the members tied at that time that sort before it -- compared byte by byte, as Lua's own
``<`` follows the server's collation locale), cuts ``limit`` / ``last`` from the rank
range, and reads that range (``ZRANGE`` by rank) and its summaries and their eviction
facts: ``summaries(last=3)`` reads 3 summaries, in one read-only round trip.

A time a double cannot hold exactly (µs beyond 2**53 either side of the epoch: before
1685 or after 2255) is not indexed, so the index then stays short of the summaries.
The index is complete when it has as many members as the ``sum`` hash has fields (the
scripts add a member only with its summary, so it is a subset); otherwise -- a
conversation written before the index existed, or holding such a time -- :data:`PAGE`
says so and the store reads the summaries whole, as before: a read never writes.
``RedisStore.upgrade()`` fills the index in with :func:`reindex_args` and the seq
index's scripts (:data:`~.paging.REINDEX` / :data:`~.paging.UNSTRAY`, which serve any
hash and its index).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from contextledger.errors import CorruptRecord
from contextledger.model.paging import Page
from contextledger.stores.redis.codec import epoch_micros, time_score
from contextledger.stores.redis.listing import as_utc
from contextledger.stores.redis.paging import reindex_chunks
from contextledger.stores.redis.scripts import HMGET, RANK

__all__ = ["PAGE", "page_args", "reindex_args"]

PAGE = (
    r"""#!lua flags=no-writes
-- One page of summaries by creation time. KEYS: sum mut sumat
-- ARGV: 1-3 after: time (epoch us), mode, summary id ('' time = none)  4-6 before: the same
--   mode: '-' the rows at that time are all after the cursor (it is another agent's, ordered
--   before this one), '+' all before it, '=' this agent's: tied rows are ordered by id
--   7 count ('' = the whole range)  8 '1': the last count, else the first
-- Returns false when the index is incomplete, else {ids, summaries, {se, ss} per id}, in order.
if redis.call('ZCARD', KEYS[3]) ~= redis.call('HLEN', KEYS[1]) then return false end
"""
    + HMGET
    + RANK
    + r"""
local lo, hi = 0, redis.call('ZCARD', KEYS[3])
if ARGV[1] ~= '' then lo = rank(KEYS[3], ARGV[1], ARGV[2], ARGV[3], true) end
if ARGV[4] ~= '' then hi = rank(KEYS[3], ARGV[4], ARGV[5], ARGV[6], false) end
local count = tonumber(ARGV[7])
if count then
  if ARGV[8] == '1' then lo = math.max(lo, hi - count) else hi = math.min(hi, lo + count) end
end
if hi <= lo then return {{}, {}, {}} end
local ids = redis.call('ZRANGE', KEYS[3], lo, hi - 1)
local fields = {}
for _, id in ipairs(ids) do
  fields[#fields + 1] = 'se|' .. id
  fields[#fields + 1] = 'ss|' .. id
end
return {ids, hmget(KEYS[1], ids), hmget(KEYS[2], fields)}
"""
)


def _bound(cursor: Any, agent_id: str) -> list[str]:
    """The bound of a summaries cursor ``(created_at, agent_id, summary_id)`` within one agent's index."""
    if cursor is None:
        return ["", "", ""]
    at, other, summary_id = cursor
    mode = "-" if other < agent_id else "+" if other > agent_id else "="
    # a time beyond the exact range still compares rightly with every indexed (exact) score
    return [str(epoch_micros(as_utc(at))), mode, summary_id]


def page_args(page: Page, agent_id: str) -> list[str]:
    """The ARGV of :data:`PAGE` for ``page`` (checked summary cursors) of one agent's index."""
    count = page.limit if page.limit is not None else page.last
    return [
        *_bound(page.after, agent_id),
        *_bound(page.before, agent_id),
        "" if count is None else str(count),
        "1" if page.last is not None else "0",
    ]


def reindex_args(summaries: Iterable[tuple[bytes, bytes]], where: str) -> Iterator[list[str]]:
    """The ARGV of each :data:`~.paging.REINDEX` call that indexes ``summaries`` ((id, stored JSON) pairs).

    A summary whose time cannot be a score is left out (its conversation stays read whole).

    Raises:
        CorruptRecord: A summary is not JSON holding an ISO ``created_at``.
    """
    return reindex_chunks(_times(summaries, where))


def _times(summaries: Iterable[tuple[bytes, bytes]], where: str) -> Iterator[tuple[str, str]]:
    for raw_id, raw in summaries:
        summary_id = raw_id.decode("utf-8")
        try:
            at = time_score(datetime.fromisoformat(json.loads(raw)["created_at"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptRecord(f"damaged summary: {exc}", where=where, record_id=summary_id) from exc
        if at:
            yield at, summary_id
