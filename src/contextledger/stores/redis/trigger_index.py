"""Pages of one trigger's evictions of a Redis conversation, read through its trigger index.

The ``evtr`` sorted set (see :mod:`.eviction_index`) holds every standing eviction as
``<trigger>|<time code><evat member>``, every score 0, so Redis orders it by bytes: one
trigger's evictions are one contiguous range, in the listing's order, and ``ZLEXCOUNT``
of a cursor (in the same form) is its rank. A page reads that range and the rows of its
members only, the same rows a page of :data:`.eviction_index.PAGE` reads, however rare
the trigger (a walk of ``evat`` skipping the other triggers would read the whole index
for a trigger of few evictions).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from contextledger.model.paging import Page
from contextledger.stores.redis.codec import epoch_micros
from contextledger.stores.redis.eviction_index import ROWS, bound, time_code
from contextledger.stores.redis.keys import SEQ_DIGITS
from contextledger.stores.redis.listing import as_utc

__all__ = ["PAGE", "page_args"]

_RANGE = r"""#!lua flags=no-writes
-- One page of one trigger's evictions. KEYS: state msg content mut sum red evtr
-- ARGV: 1 the trigger's prefix ('<trigger>|')  2 where its members end ('<trigger>}')
--   3-4 after: the greatest byte string before the page (evtr form; '' = none), '1': inclusive
--   5-6 before: the least one after it, '1': inclusive  7 since (evtr form, '' = none)
--   8 count ('' = the whole range)  9 '1': the last count
-- Returns false when either index is incomplete (or a member is stale: read whole), else
--   what PAGE returns (members in evat form).
local version = redis.call('HGET', KEYS[1], 'version')
if not version or redis.call('HGET', KEYS[1], 'ev_v') ~= version or redis.call('HGET', KEYS[1], 'et_v') ~= version then
  return false
end
-- every score is 0: ranks are byte order, and ZLEXCOUNT counts the members below a bound
local function rank(bound, inclusive)
  return redis.call('ZLEXCOUNT', KEYS[7], '-', (inclusive and '[' or '(') .. bound)
end
local lo, hi = rank(ARGV[1], false), rank(ARGV[2], false)
if ARGV[3] ~= '' then lo = math.max(lo, rank(ARGV[3], ARGV[4] == '1')) end
if ARGV[5] ~= '' then hi = math.min(hi, rank(ARGV[5], ARGV[6] == '1')) end
if ARGV[7] ~= '' then lo = math.max(lo, rank(ARGV[7], false)) end
local count = tonumber(ARGV[8])
if count then
  if ARGV[9] == '1' then lo = math.max(lo, hi - count) else hi = math.min(hi, lo + count) end
end
if hi <= lo then return {{}, {}, {}, {}, {}} end
local members = redis.call('ZRANGE', KEYS[7], lo, hi - 1)
-- strip '<trigger>|' and the 17 bytes of the time code: the evat member is left
for i, m in ipairs(members) do members[i] = string.sub(m, #ARGV[1] + 18) end
"""

PAGE = (_RANGE + ROWS).replace("__SEQ__", str(SEQ_DIGITS))
"""One page of one trigger's evictions (read-only)."""


def _lex_bound(cursor: Any, agent_id: str, prefix: str, *, after: bool) -> list[str]:
    """:func:`.eviction_index.bound` in the byte order of the trigger index: ``[bound, inclusive]``."""
    if cursor is None:
        return ["", "0"]
    stamp, mode, edge, inclusive = bound(cursor, agent_id, after=after)
    code = prefix + time_code(int(stamp))
    if mode == "-":
        return [code, "0"]
    if mode == "+":
        return [code + ":", "0"]  # after every member at that time: its seq digits sort below ':'
    return [code + edge, inclusive]


def page_args(page: Page, agent_id: str, since: datetime | None, trigger: str) -> list[str]:
    """The ARGV of :data:`PAGE` for ``page`` (checked eviction cursors) of ``trigger``'s evictions."""
    prefix = f"{trigger}|"
    count = page.limit if page.limit is not None else page.last
    return [
        prefix,
        f"{trigger}}}",  # '}' follows '|': the first byte string after every member of the trigger
        *_lex_bound(page.after, agent_id, prefix, after=True),
        *_lex_bound(page.before, agent_id, prefix, after=False),
        "" if since is None else prefix + time_code(epoch_micros(as_utc(since))),
        "" if count is None else str(count),
        "1" if page.last is not None else "0",
    ]
