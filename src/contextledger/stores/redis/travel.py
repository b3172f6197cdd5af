"""Reads of the Redis store that time travel needs: message entries by id.

:func:`contextledger.travel.view_at` reads the active view, the reductions after the
point it rewinds to, and the entries those reductions took out of the view -- never the
whole history. This script reads exactly those entries: their record, their current
content and their mutable facts, for the ids given, in one read-only round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextledger.errors import StoreError
from contextledger.records import HistoryEntry
from contextledger.stores.redis.codec import MessageRow

__all__ = ["ENTRIES", "MUT_FIELDS", "decode_entries"]

MUT_FIELDS = ("p", "t", "e", "r")
"""The mutable facts read per entry (pin, tokens, evicted by, revision count), in order."""

ENTRIES = r"""#!lua flags=no-writes
-- Message entries by id. KEYS: msg content mut; ARGV: ids.
-- Returns {records, contents, {pin, tokens, evicted_by, revision_count} per id}.
local ids, fields = {}, {}
for i = 1, #ARGV do
  local id = ARGV[i]
  ids[#ids + 1] = id
  fields[#fields + 1] = 'p|' .. id
  fields[#fields + 1] = 't|' .. id
  fields[#fields + 1] = 'e|' .. id
  fields[#fields + 1] = 'r|' .. id
end
local function hmget(key, names)
  local out = {}
  for i = 1, #names, 256 do
    local chunk = redis.call('HMGET', key, unpack(names, i, math.min(i + 255, #names)))
    for j = 1, #chunk do out[#out + 1] = chunk[j] end
  end
  return out
end
if #ids == 0 then return {{}, {}, {}} end
return {hmget(KEYS[1], ids), hmget(KEYS[2], ids), hmget(KEYS[3], fields)}
"""


def decode_entries(
    session_id: str, agent_id: str, ids: Sequence[str], reply: Sequence[Any], where: str
) -> list[HistoryEntry]:
    """The :class:`HistoryEntry` of each id the reply of :data:`ENTRIES` found, in seq order.

    Raises:
        CorruptRecord: A stored record is damaged.
        StoreError: An entry has a record but no content.
    """
    records, contents, muts = reply
    rows: list[MessageRow] = []
    for i, entry_id in enumerate(ids):
        record, content = records[i], contents[i]
        if record is None:
            continue  # not a message of this conversation
        if content is None:
            raise StoreError(f"entry {entry_id} of {session_id}/{agent_id} has no stored content")
        mut = {
            f"{name}|{entry_id}": muts[len(MUT_FIELDS) * i + k]
            for k, name in enumerate(MUT_FIELDS)
            if muts[len(MUT_FIELDS) * i + k] is not None
        }
        rows.append(MessageRow.decode(entry_id, record, content, mut, where))
    return [r.history_entry(session_id, agent_id) for r in sorted(rows, key=lambda r: r.seq)]
