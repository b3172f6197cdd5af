"""Reads of the Redis store that time travel needs: message entries by id.

:func:`contextledger.history.travel.view_at` reads the active view, the reductions after the
point it rewinds to, and the entries those reductions took out of the view -- never the
whole history. This script reads exactly those entries: their record, their current
content and their mutable facts, for the ids given, in one read-only round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextledger.errors import StoreError
from contextledger.model.records import HistoryEntry
from contextledger.stores.base import AppendedBy
from contextledger.stores.redis.codec import MessageRow
from contextledger.stores.redis.scripts import HMGET

__all__ = ["ENTRIES", "MUT_FIELDS", "decode_entries", "entries_args"]

MUT_FIELDS = ("p", "t", "e", "r")
"""The mutable facts read per entry (pin, tokens, evicted by, revision count), in order."""

ENTRIES = (
    r"""#!lua flags=no-writes
-- Message entries by id, optionally only those appended at or before a cut.
-- KEYS: msg content mut; ARGV: 1 max from_call ('' = any)  2 max version ('' = any), then ids.
-- Returns {ids found, records, contents, {pin, tokens, evicted_by, revision_count} per id}:
-- content and facts are fetched for the admitted entries only.
local max_call, max_version = tonumber(ARGV[1]), tonumber(ARGV[2])
"""
    + HMGET
    + r"""
local wanted = {}
for i = 3, #ARGV do wanted[#wanted + 1] = ARGV[i] end
local records = hmget(KEYS[1], wanted)
local ids, kept, fields = {}, {}, {}
for i, id in ipairs(wanted) do
  local record = records[i]
  if record then
    local admitted = true
    if max_call or max_version then
      -- the stamps are the record's last two fields (rows written before 0.2 have none: 0)
      local call, version = string.match(record, '"from_call":(%d+),"version":(%d+)}$')
      call, version = tonumber(call or '0'), tonumber(version or '0')
      admitted = (not max_call or call <= max_call) and (not max_version or version <= max_version)
    end
    if admitted then
      ids[#ids + 1] = id
      kept[#kept + 1] = record
      fields[#fields + 1] = 'p|' .. id
      fields[#fields + 1] = 't|' .. id
      fields[#fields + 1] = 'e|' .. id
      fields[#fields + 1] = 'r|' .. id
    end
  end
end
if #ids == 0 then return {{}, {}, {}, {}} end
return {ids, kept, hmget(KEYS[2], ids), hmget(KEYS[3], fields)}
"""
)


def entries_args(ids: Sequence[str], appended_by: AppendedBy | None) -> list[str]:
    """The ARGV of :data:`ENTRIES` (a time bound is applied by the caller, not the script)."""
    max_call = "" if appended_by is None or appended_by.from_call is None else str(appended_by.from_call)
    max_version = "" if appended_by is None or appended_by.version is None else str(appended_by.version)
    return [max_call, max_version, *ids]


def decode_entries(
    session_id: str, agent_id: str, reply: Sequence[Any], where: str, appended_by: AppendedBy | None = None
) -> list[HistoryEntry]:
    """The :class:`HistoryEntry` of each entry the reply of :data:`ENTRIES` holds, in seq order.

    A time bound of ``appended_by`` is applied here (the script filters by call and version).

    Raises:
        CorruptRecord: A stored record is damaged.
        StoreError: An entry has a record but no content.
    """
    found, records, contents, muts = reply
    rows: list[MessageRow] = []
    for i, raw_id in enumerate(found):
        entry_id = raw_id.decode("utf-8") if isinstance(raw_id, bytes) else str(raw_id)
        record, content = records[i], contents[i]
        if content is None:
            raise StoreError(f"entry {entry_id} of {session_id}/{agent_id} has no stored content")
        mut = {
            f"{name}|{entry_id}": muts[len(MUT_FIELDS) * i + k]
            for k, name in enumerate(MUT_FIELDS)
            if muts[len(MUT_FIELDS) * i + k] is not None
        }
        rows.append(MessageRow.decode(entry_id, record, content, mut, where))
    out = [r.history_entry(session_id, agent_id) for r in sorted(rows, key=lambda r: r.seq)]
    return out if appended_by is None or appended_by.created_at is None else [h for h in out if appended_by.admits(h)]
