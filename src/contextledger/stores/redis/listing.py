"""Pages of a Redis conversation's reductions and pin events: a range of their list.

Both lists are appended in commit order, so within one conversation the version order
of their rows is the list order. Their listings are ordered by time first
(``(created_at, agent_id, version)`` and ``(at, agent_id, version, position)``): a page
of one conversation is a contiguous range of its list exactly when the rows' times do
not go back along it. A reduction's time is taken when it is planned, a pin event's
when its commit is sent, both on the writer's clock -- two writers with skewed clocks
can break that. So the commit script keeps an order mark per list in the state hash
(``red_at`` / ``pin_at``: the greatest time pushed since the list was empty, ``red_n`` /
``pin_n``: the list's length; a row older than it sets ``red_unordered`` /
``pin_unordered``), and :data:`RANGE` reads a range only of a list whose mark says it is
in order and still counts its length (a version that keeps no marks may have pushed rows
during a rolling upgrade; the next commit then drops the mark, the next upgrade sets
it). Otherwise (out of order, or written before the marks existed and not upgraded
since) it reads the list whole, in the same round trip, and the store cuts the page in
Python as before: a read never writes.

:data:`RANGE` finds the range by bisection over the list (``LINDEX`` of about
``log2(n)`` rows, each decoded with ``cjson`` to compare its time, version and position;
no row is ever re-encoded), then reads the range with one ``LRANGE``: ``last=N`` of a
list reads N rows. ``LINDEX`` walks a list's nodes from the nearer end -- O(n / rows per
node) in the middle -- which for the sizes of these lists (one row per reduction or pin)
costs less than a second key per list would cost every commit.

``RedisStore.upgrade()`` marks the lists of older conversations: :func:`order_mark`
checks a list read whole, and :data:`MARK` sets the mark only if the list is still as
read. Pin event rows written before they stored their ``position`` leave their list
unordered (a range of them could not fill the positions in).

``summaries`` page through a sorted set of their own instead (their times need no order
mark there; see :mod:`.summary_index`). ``evictions`` still read a conversation whole; see
:meth:`~contextledger.stores.redis.queries.RedisQueries.evictions` for why.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from contextledger.errors import CorruptRecord
from contextledger.model.paging import Page
from contextledger.stores.redis.codec import epoch_micros

__all__ = ["MARK", "PINS", "RANGE", "REDUCTIONS", "ListKind", "mark_fields", "order_mark", "range_args"]

RANGE = r"""#!lua flags=no-writes
-- One page of a reductions or pin events list. KEYS: state list
-- ARGV: 1 mark field (red_at | pin_at)  2 unordered field  3 the rows' time field  12 length field
--   4-6 after: time (YYYY-MM-DDTHH:MM:SSffffff, UTC), version, position ('' time = none)
--   7-9 before: the same  10 count ('' = the whole range)  11 '1': the last count, else the first
-- Returns {1, rows} for the page, or {0, rows} with the whole list when it is not known to be
-- in order (or a row's time is not UTC): the caller cuts the page then.
local n = redis.call('LLEN', KEYS[2])
if n == 0 then return {1, {}} end
local marks = redis.call('HMGET', KEYS[1], ARGV[1], ARGV[2], ARGV[12])
if not marks[1] or marks[2] or marks[3] ~= tostring(n) then
  return {0, redis.call('LRANGE', KEYS[2], 0, -1)}
end
local function norm(s)
  if type(s) ~= 'string' then return nil end
  local head, frac, zone = string.match(s, '^(%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d)%.?(%d*)(.*)$')
  if not head or (zone ~= 'Z' and zone ~= '+00:00') then return nil end
  return head .. string.sub(frac .. '000000', 1, 6)
end
local bad = false
local function key(i)
  local ok, row = pcall(cjson.decode, redis.call('LINDEX', KEYS[2], i))
  if not ok or type(row) ~= 'table' then bad = true return {'', 0, 0} end
  local t = norm(row[ARGV[3]])
  if not t then bad = true return {'', 0, 0} end
  return {t, tonumber(row['version']) or 0, tonumber(row['position']) or 0}
end
local function less(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[3] < b[3]
end
-- the first index whose row is not before the bound (strict: not at or before it)
local function first(bound, strict)
  local lo, hi = 0, n
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local k = key(mid)
    local past
    if strict then past = less(bound, k) else past = not less(k, bound) end
    if past then hi = mid else lo = mid + 1 end
  end
  return lo
end
local lo, hi = 0, n
if ARGV[4] ~= '' then lo = first({ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])}, true) end
if ARGV[7] ~= '' then hi = first({ARGV[7], tonumber(ARGV[8]), tonumber(ARGV[9])}, false) end
if bad then return {0, redis.call('LRANGE', KEYS[2], 0, -1)} end
if hi < lo then hi = lo end
local count = tonumber(ARGV[10])
if count then
  if ARGV[11] == '1' then lo = math.max(lo, hi - count) else hi = math.min(hi, lo + count) end
end
if hi <= lo then return {1, {}} end
return {1, redis.call('LRANGE', KEYS[2], lo, hi - 1)}
"""

MARK = r"""#!lua
-- Mark a list's order once (RedisStore.upgrade). KEYS: state list
-- ARGV: 1 mark field  2 unordered field  3 the list's length as checked  4 its greatest time
--   (epoch us)  5 '1': in order  6 length field
-- Returns 1 if marked, 0 if it already was, -1 if the list changed since it was read.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 or redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then return 0 end
if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4], ARGV[6], ARGV[3])
if ARGV[5] ~= '1' then redis.call('HSET', KEYS[1], ARGV[2], '1') end
return 1
"""

_HUGE = 2**53
"""A version above any stored one: a bound past every row of a time."""


@dataclass(frozen=True)
class ListKind:
    """Which list: the state fields of its order mark and the time field of its rows."""

    mark: str
    unordered: str
    length: str
    time_field: str
    positioned: bool
    """Whether its rows (and cursors) carry a ``position`` after the version."""


REDUCTIONS = ListKind("red_at", "red_unordered", "red_n", "created_at", positioned=False)
"""The reductions list: ``(created_at, agent_id, version)``."""
PINS = ListKind("pin_at", "pin_unordered", "pin_n", "at", positioned=True)
"""The pin events list: ``(at, agent_id, version, position)``."""


def as_utc(moment: datetime) -> datetime:
    """``moment`` with a zone: a naive time means UTC, as everywhere in the ledger."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _time(moment: datetime) -> str:
    utc = moment.astimezone(UTC)
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S}{utc.microsecond:06d}"


def _bound(kind: ListKind, cursor: Any, agent_id: str) -> list[str]:
    """The bound of a listing's cursor within one agent's list: time, version, position."""
    if cursor is None:
        return ["", "", ""]
    at, other = cursor[0], cursor[1]
    if other < agent_id:  # every row of this agent at that time is after the cursor
        version, position = -1, -1
    elif other > agent_id:  # ... or before it
        version, position = _HUGE, 0
    else:
        version, position = cursor[2], cursor[3] if kind.positioned else 0
    return [_time(at), str(version), str(position)]


def range_args(kind: ListKind, page: Page, agent_id: str) -> list[str]:
    """The ARGV of :data:`RANGE` for ``page`` (checked cursors of ``kind``'s listing) of one agent's list."""
    count = page.limit if page.limit is not None else page.last
    return [
        kind.mark,
        kind.unordered,
        kind.time_field,
        *_bound(kind, page.after, agent_id),
        *_bound(kind, page.before, agent_id),
        "" if count is None else str(count),
        "1" if page.last is not None else "0",
        kind.length,
    ]


def order_mark(kind: ListKind, rows: Sequence[bytes | str], where: str) -> tuple[int, bool]:
    """The mark of a list read whole: its greatest time (epoch µs), and whether it is in its listing's order.

    Raises:
        CorruptRecord: A row is not JSON holding a time (``where`` names the list).
    """
    keys: list[tuple[int, int, int]] = []
    positioned = True
    for index, raw in enumerate(rows):
        try:
            row = json.loads(raw)
            moment = datetime.fromisoformat(row[kind.time_field])
            at = epoch_micros(as_utc(moment))
            version = int(row.get("version", 0))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptRecord(f"damaged row: {exc}", where=where, record_id=str(index)) from exc
        # RANGE compares the rows' times as written: only UTC ones (with their zone) can be ranged
        utc = moment.tzinfo is not None and moment.utcoffset() == timedelta(0)
        positioned = positioned and utc and (not kind.positioned or "position" in row)
        keys.append((at, version, int(row.get("position", 0))))
    ordered = positioned and all(a <= b for a, b in pairwise(keys))
    return max((k[0] for k in keys), default=0), ordered


def mark_fields(kind: ListKind, rows: Sequence[str], where: str) -> list[str]:
    """The state fields (name, value pairs) that mark a list written whole as ``rows`` (none when empty).

    Raises:
        CorruptRecord: A row is not JSON holding a time.
    """
    if not rows:
        return []  # the first commit that pushes a row marks it
    at, ordered = order_mark(kind, rows, where)
    return [kind.mark, str(at), kind.length, str(len(rows))] + ([] if ordered else [kind.unordered, "1"])
