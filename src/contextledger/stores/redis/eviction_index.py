"""Pages of a Redis conversation's evictions read through its index of standing evictions.

Every standing eviction (an entry whose ``e|`` / ``se|`` fact names a reduction that has a
row) is a member of the conversation's ``evat`` sorted set, scored by its reduction's
``created_at`` in epoch µs; the member is :func:`member` -- the entry's seq in 20 digits,
``m`` or ``s``, its id -- so members tied at one time sort by bytes exactly as the listing
orders them, ``(seq, kind, entry_id)`` (a UTF-8 id's bytes sort as its code points do).
Two facts in the ``mut`` hash let a page read only its rows:

* ``rp|<reduction id>`` -- the reduction's position in the ``red`` list (which is only
  ever appended to), so its row is one ``LINDEX``;
* ``rb|<entry id>`` -- ``<at>:<seq>:<summary id>``, the summary that replaced the entry,
  as the whole read finds it: of every summary listing the entry in ``replaces``, the
  one created last (by ``(created_at, seq)``; on a tie the one committed last).

By trigger: the ``evtr`` sorted set holds the same evictions, every score 0 so that it is
ordered by bytes, each as ``<trigger>|<time code><evat member>`` (:func:`trigger_member`;
:func:`time_code` writes the time in 17 bytes that sort as the times do). One trigger's
evictions are then one contiguous range, in the listing's order, and ``ZLEXCOUNT`` of a
cursor gives its rank: a page filtered by ``trigger`` reads only its rows however rare
the trigger (:mod:`.trigger_index`). ``rt|<reduction id>`` holds each reduction's trigger,
so a writer removing an eviction finds its member (its time is its ``evat`` score).

The commit script keeps them (evictions add members, restores remove them, a summary
updates ``rb|``, a reduction writes ``rp|`` and ``rt|``), the import writes them, prune
removes the members of what it deletes, delete/expiry/ttl take the keys with the others.

Complete: the state field ``ev_v`` holds the version at which the index was last known
complete, ``et_v`` the same for the trigger index (a page by trigger needs both: it reads
the ``rb|`` facts too). Every script that bumps the version and knows an index (commit,
erase) moves its mark along when it matched; a writer without it (an earlier version)
bumps the version alone, so the mark no longer matches and pages are read whole -- as is
a conversation written before the index, one whose eviction time a score cannot hold
(before 1685 or after 2255). A read never writes: ``RedisStore.upgrade()`` rebuilds both
(:func:`plan`, :data:`FILL`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contextledger.model.paging import Page
from contextledger.model.records import Eviction, Reduction, SummaryEntry
from contextledger.model.trusted import trusted
from contextledger.stores.base import EvictedCandidate, preview
from contextledger.stores.redis.codec import MessageRow, epoch_micros, reduction_from, summary_from, text, time_score
from contextledger.stores.redis.keys import SEQ_DIGITS, ConversationKeys
from contextledger.stores.redis.listing import as_utc
from contextledger.stores.redis.scripts import RANK

__all__ = [
    "FILL",
    "PAGE",
    "ROWS",
    "Plan",
    "bound",
    "decode_page",
    "member",
    "page_args",
    "plan",
    "replaced_field",
    "replacing",
    "time_code",
    "trigger_member",
]

_KIND = {"message": "m", "summary": "s"}
_EXACT = 2**53

ROWS = r"""
local records, contents, reductions, replaced = {}, {}, {}, {}
for i, m in ipairs(members) do
  local kind, id = string.sub(m, __SEQ__ + 1, __SEQ__ + 1), string.sub(m, __SEQ__ + 2)
  local by
  if kind == 'm' then
    records[i] = redis.call('HGET', KEYS[2], id)
    contents[i] = redis.call('HGET', KEYS[3], id)
    by = redis.call('HGET', KEYS[4], 'e|' .. id)
  else
    records[i] = redis.call('HGET', KEYS[5], id)
    contents[i] = ''
    by = redis.call('HGET', KEYS[4], 'se|' .. id)
  end
  if not records[i] or not contents[i] or not by then return false end
  local at = redis.call('HGET', KEYS[4], 'rp|' .. by)
  local row = at and redis.call('LINDEX', KEYS[6], tonumber(at))
  if not row then return false end
  reductions[i] = row
  replaced[i] = redis.call('HGET', KEYS[4], 'rb|' .. id) or ''
end
return {members, records, contents, reductions, replaced}
"""
"""The Lua reading the rows of ``members`` (``evat`` members): shared with :data:`.trigger_index.PAGE`."""

PAGE = (
    r"""#!lua flags=no-writes
-- One page of evictions. KEYS: state msg content mut sum red evat
-- ARGV: 1-4 after: time (epoch us; '' = none), mode, bound member, inclusive ('1')
--   mode: '-' every row at that time is after the cursor, '+' every one before it,
--   '=' tied rows compare by bytes with the bound member  5-8 before: the same
--   9 since (epoch us, '' = none)  10 count ('' = the whole range)  11 '1': the last count
-- Returns false when the index is incomplete (or a member is stale: read whole), else
--   {members, records, contents, reductions, replacing facts}, in order.
local version = redis.call('HGET', KEYS[1], 'version')
if not version or redis.call('HGET', KEYS[1], 'ev_v') ~= version then return false end
"""
    + RANK
    + r"""
local lo, hi = 0, redis.call('ZCARD', KEYS[7])
if ARGV[1] ~= '' then lo = rank(KEYS[7], ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1') end
if ARGV[5] ~= '' then hi = rank(KEYS[7], ARGV[5], ARGV[6], ARGV[7], ARGV[8] == '1') end
if ARGV[9] ~= '' then lo = math.max(lo, redis.call('ZCOUNT', KEYS[7], '-inf', '(' .. ARGV[9])) end
local count = tonumber(ARGV[10])
if count then
  if ARGV[11] == '1' then lo = math.max(lo, hi - count) else hi = math.min(hi, lo + count) end
end
if hi <= lo then return {{}, {}, {}, {}, {}} end
local members = redis.call('ZRANGE', KEYS[7], lo, hi - 1)
"""
    + ROWS
).replace("__SEQ__", str(SEQ_DIGITS))

FILL = r"""#!lua
-- Rebuild a conversation's eviction indexes (one chunk). KEYS: state mut evat evtr
-- ARGV: 1 the version the plan was read at  2 '1': first chunk (drop the old indexes and
--   the fields to drop)  3 '1': last chunk (mark both complete)  4 #pairs, then (score,
--   member) pairs of evat, then #pairs, (0, member) pairs of evtr, then #fields, (field,
--   value) pairs, then fields to drop.
-- Returns -1 (nothing written) when the version moved since the plan was read.
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[1] then return -1 end
if ARGV[2] == '1' then redis.call('DEL', KEYS[3], KEYS[4]) end
local pos = 4
local pairs_n = 0
for _, key in ipairs({KEYS[3], KEYS[4]}) do
  local n = tonumber(ARGV[pos])
  pos = pos + 1
  for i = pos, pos + 2 * n - 1, 512 do
    redis.call('ZADD', key, unpack(ARGV, i, math.min(i + 511, pos + 2 * n - 1)))
  end
  pos = pos + 2 * n
  pairs_n = pairs_n + n
end
local fields_n = tonumber(ARGV[pos])
pos = pos + 1
for i = pos, pos + 2 * fields_n - 1, 512 do
  redis.call('HSET', KEYS[2], unpack(ARGV, i, math.min(i + 511, pos + 2 * fields_n - 1)))
end
pos = pos + 2 * fields_n
for i = pos, #ARGV, 256 do
  redis.call('HDEL', KEYS[2], unpack(ARGV, i, math.min(i + 255, #ARGV)))
end
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'ev_v', ARGV[1], 'et_v', ARGV[1]) end
local left = redis.call('PTTL', KEYS[1])
if left > 0 then
  for i = 2, 4 do
    if redis.call('PTTL', KEYS[i]) == -1 then redis.call('PEXPIRE', KEYS[i], left) end
  end
end
return pairs_n
"""


def member(seq: int, kind: str, entry_id: str) -> str:
    """The index member of an evicted entry: its seq (:data:`SEQ_DIGITS` digits), ``m``/``s``, its id."""
    return f"{seq:0{SEQ_DIGITS}d}{_KIND[kind]}{entry_id}"


def time_code(micros: int) -> str:
    """An eviction time (epoch µs) as bytes that sort as the times do (:data:`~.scripts.TCODE` in Lua).

    ``p`` and 16 digits from 0 up, ``n`` and 16 digits of ``2**53 + micros`` below 0: 17
    bytes for any time a score holds exactly. A bound beyond those (a cursor's time) is one
    byte, ``m`` below every code or ``q`` above.
    """
    if micros >= 10**16:
        return "q"
    if micros >= 0:
        return f"p{micros:016d}"
    if micros > -_EXACT:
        return f"n{_EXACT + micros:016d}"
    return "m"


def trigger_member(trigger: str, at: str, evat_member: str) -> str:
    """The ``evtr`` member of an eviction: its trigger, ``|``, the code of ``at`` (its score), its ``evat`` member."""
    return f"{trigger}|{time_code(int(at))}{evat_member}"


def replaced_field(summary: SummaryEntry, at: str) -> str:
    """The ``rb|`` value naming ``summary`` (``at``: its creation time as a score)."""
    return f"{at}:{summary.seq}:{summary.summary_id}"


def bound(cursor: Any, agent_id: str, *, after: bool) -> list[str]:
    """The bound of an evictions cursor ``(evicted_at, agent_id, seq, kind, entry_id)`` in one agent's index."""
    if cursor is None:
        return ["", "", "", ""]
    at, other, seq, kind, entry_id = cursor
    stamp = str(epoch_micros(as_utc(at)))
    if other != agent_id:
        return [stamp, "-" if other < agent_id else "+", "", "0"]
    if seq < 0:
        return [stamp, "-", "", "0"]  # every row of this agent at that time comes after
    if seq >= 10**SEQ_DIGITS:
        return [stamp, "+", "", "0"]
    digits = f"{seq:0{SEQ_DIGITS}d}"
    if kind in _KIND:
        return [stamp, "=", member(seq, kind, entry_id), "1" if after else "0"]
    # a kind no entry has: the bound falls between the kinds that are, whatever the id
    if kind < "message":
        return [stamp, "=", digits, "0"]
    return [stamp, "=", digits + ("n" if kind < "summary" else "t"), "0"]


def page_args(page: Page, agent_id: str, since: datetime | None) -> list[str]:
    """The ARGV of :data:`PAGE` for ``page`` (checked eviction cursors) of one agent's index."""
    count = page.limit if page.limit is not None else page.last
    return [
        *bound(page.after, agent_id, after=True),
        *bound(page.before, agent_id, after=False),
        "" if since is None else str(epoch_micros(as_utc(since))),
        "" if count is None else str(count),
        "1" if page.last is not None else "0",
    ]


@dataclass
class Plan:
    """What a conversation's eviction index holds, computed from its rows (upgrade, import).

    Attributes:
        pairs: ``(score, member)`` of each standing eviction, flat.
        lex: ``(0, member)`` of each in the trigger index, flat.
        fields: ``(field, value)`` of the ``rp|``, ``rt|`` and ``rb|`` facts, flat.
        complete: Whether every standing eviction and replacing summary has a time a score holds.
    """

    pairs: list[str] = field(default_factory=list)
    lex: list[str] = field(default_factory=list)
    fields: list[str] = field(default_factory=list)
    complete: bool = True


def plan(
    candidates: Iterable[EvictedCandidate], reductions: Sequence[Reduction], summaries: Iterable[SummaryEntry]
) -> Plan:
    """The index of the evictions the whole read would list from these rows.

    ``candidates`` are the evicted entries (their ``evicted_by`` set), ``reductions`` the
    reductions list in its stored order, ``summaries`` every summary.
    """
    out = Plan()
    summaries = list(summaries)
    by_id: dict[str, Reduction] = {}
    for position, red in enumerate(reductions):
        by_id[red.reduction_id] = red
        out.fields += [f"rp|{red.reduction_id}", str(position), f"rt|{red.reduction_id}", red.trigger]
    for c in candidates:
        evicting = by_id.get(c.evicted_by or "")
        if evicting is None:
            continue  # the listing shows no eviction without its reduction
        at = time_score(evicting.created_at)
        if not at:
            out.complete = False
            continue
        name = member(c.seq, c.kind, c.entry_id)
        out.pairs += [at, name]
        out.lex += ["0", trigger_member(evicting.trigger, at, name)]
    replaced = replacing(summaries)
    if replaced is None:
        out.complete = False
        replaced = replacing(s for s in summaries if time_score(s.created_at))
    for rid, value in (replaced or {}).items():
        out.fields += [f"rb|{rid}", value]
    return out


def replacing(summaries: Iterable[SummaryEntry]) -> dict[str, str] | None:
    """The ``rb|`` value of each entry some of ``summaries`` replace; ``None`` if one's time is not a score.

    Of the summaries listing an entry in ``replaces``, the one created last by
    ``(created_at, seq)``, a tie going to the later in ``summaries``.
    """
    replaced: dict[str, str] = {}
    for s in sorted(summaries, key=lambda s: (s.created_at, s.seq)):
        at = time_score(s.created_at)
        if not at:
            return None
        for rid in s.replaces:
            replaced[rid] = replaced_field(s, at)
    return replaced


def decode_page(
    session_id: str, agent_id: str, reply: list[Any], keys: ConversationKeys, trigger: str | None = None
) -> list[Eviction] | None:
    """The evictions of a :data:`PAGE` (or :data:`.trigger_index.PAGE`, ``trigger``) reply, in its order.

    ``None`` if a member is stale (it no longer names the entry as it stands, or one of
    ``trigger`` an eviction by another): the caller reads whole.

    Raises:
        CorruptRecord: A stored entry, summary or reduction is damaged.
    """
    members, records, contents, rows, replaced = reply
    out = []
    reductions: dict[bytes, Reduction] = {}
    digits = SEQ_DIGITS
    for raw_member, record, content, row, by in zip(members, records, contents, rows, replaced, strict=True):
        name = text(raw_member)
        entry_id = name[digits + 1 :]
        if name[digits] == "m":
            entry = MessageRow.decode(entry_id, record, content, {}, keys.msg)
            kind, seq, role, plain = "message", entry.seq, entry.message.role, entry.message.plain_text
        else:
            summary = summary_from(record, {}, keys.sum)
            kind, seq, role, plain = "summary", summary.seq, "user", summary.content
        red = reductions.get(row)
        if red is None:  # a reduction evicts many: each row is decoded once
            red = reductions[row] = reduction_from(row, keys.red)
        if seq != int(name[:digits]) or (trigger is not None and red.trigger != trigger):
            return None  # the member no longer names this entry as it stands: read whole
        replacing = text(by).split(":", 2)[2] if by else None
        out.append(
            trusted(
                Eviction,
                {
                    "session_id": session_id,
                    "agent_id": agent_id,
                    "entry_id": entry_id,
                    "kind": kind,
                    "seq": seq,
                    "role": role,
                    "preview": preview(plain),
                    "evicted_at": red.created_at,
                    "trigger": red.trigger,
                    "strategy": red.strategy,
                    "reduction_id": red.reduction_id,
                    "replaced_by_summary": replacing,
                    "error": red.error,
                },
            )
        )
    return out
