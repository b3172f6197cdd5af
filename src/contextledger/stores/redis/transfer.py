"""Writing one conversation's complete records (import, copy) to Redis in one script.

The records become the values the commit script would have left (see
:mod:`contextledger.stores.redis.keys`): the state hash, each message's record (its
metadata as it stands now, pin included, so no pin flag is needed) and content, the
mutable facts (reduction that evicted an entry, revision counts, summary evictions,
tombstones), the active view, the summary, reduction, revision and pin lists. An
evicted summary is stored as committed (active) with its eviction in the mutable
facts, as the commit script leaves it, so an ``undo`` can make it active again.

:data:`IMPORT` writes them all in one script -- one atomic step, on one server and on
Cluster alike -- and only when the conversation does not exist.
"""

from __future__ import annotations

from contextledger.model.bundle import ConversationRecords
from contextledger.model.messages import encode_blocks
from contextledger.model.records import SummaryEntry, utcnow
from contextledger.stores.base import EvictedCandidate
from contextledger.stores.redis import eviction_index
from contextledger.stores.redis.codec import dumps, epoch_micros, record_values, time_score
from contextledger.stores.redis.erasure import tombstone_json
from contextledger.stores.redis.events import pin_event_json
from contextledger.stores.redis.keys import view_score
from contextledger.stores.redis.listing import PINS, REDUCTIONS, mark_fields

__all__ = ["IMPORT", "import_args"]

IMPORT = r"""#!lua
-- Create one conversation from its complete records, all at once; 0 if it exists.
-- KEYS: state msg content mut active sum red rev cs pins seq sumat evat evtr [sessions [agents]]
-- ARGV: 1 updated_at (epoch us)  2 session_id  3 agent_id  4 ttl in ms (0 = none), then
--   ten groups: state, msg, content, mut (hashes: #pairs, field value ...), active
--   (#pairs, score member ...), red, rev, pins (lists: #values, value ...), seq
--   (#pairs, seq id ...), sumat (#pairs, created_at in epoch us, summary id ...), evat (#pairs,
--   evicted_at in epoch us, member ...: see eviction_index.py), evtr (#pairs, 0, member ...)
local types = {'hash', 'hash', 'hash', 'hash', 'zset', 'hash', 'list', 'list', 'hash', 'list', 'zset', 'zset', 'zset',
  'zset', 'zset', 'set'}
for i = 1, #KEYS do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t ~= 'none' and t ~= types[i] then
    return redis.error_reply('CLWRONGTYPE key ' .. KEYS[i] .. ' holds a ' .. t .. ', expected a ' .. types[i])
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local pos = 5
local function group(key, command, width)
  local n = tonumber(ARGV[pos])
  pos = pos + 1
  local first, last = pos, pos + n * width - 1
  pos = last + 1
  -- in chunks: unpack() of a huge list would overflow the Lua C stack
  local step = 256 * width
  for i = first, last, step do
    redis.call(command, key, unpack(ARGV, i, math.min(i + step - 1, last)))
  end
end
group(KEYS[1], 'HSET', 2)
group(KEYS[2], 'HSET', 2)
group(KEYS[3], 'HSET', 2)
group(KEYS[4], 'HSET', 2)
group(KEYS[5], 'ZADD', 2)
group(KEYS[6], 'HSET', 2)
group(KEYS[7], 'RPUSH', 1)
group(KEYS[8], 'RPUSH', 1)
group(KEYS[10], 'RPUSH', 1)
group(KEYS[11], 'ZADD', 2)
group(KEYS[12], 'ZADD', 2)
group(KEYS[13], 'ZADD', 2)
group(KEYS[14], 'ZADD', 2)
if #KEYS >= 15 then redis.call('ZADD', KEYS[15], 'GT', ARGV[1], ARGV[2]) end
if #KEYS >= 16 then redis.call('SADD', KEYS[16], ARGV[3]) end
-- With a ttl the index keys expire as a commit makes them expire: the session's agent
-- set (single server) and the sessions index, which drops sessions written more than
-- ttl ago (ARGV[1] is this import's time when there is a ttl).
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  for i = 1, 14 do redis.call('PEXPIRE', KEYS[i], ttl) end
  if #KEYS >= 16 then redis.call('PEXPIRE', KEYS[16], ttl) end
  if #KEYS >= 15 then
    redis.call('ZREMRANGEBYSCORE', KEYS[15], '-inf', '(' .. string.format('%d', tonumber(ARGV[1]) - ttl * 1000))
    redis.call('PEXPIRE', KEYS[15], ttl)
  end
end
return 1
"""


def _stored_summary(summary: SummaryEntry) -> str:
    if summary.evicted_by is None:
        return summary.model_dump_json()
    return summary.model_copy(update={"status": "active", "superseded_by": None, "evicted_by": None}).model_dump_json()


def import_args(records: ConversationRecords, ttl_ms: int = 0) -> list[str]:
    """The ARGV of :data:`IMPORT` for ``records``.

    Raises:
        InvalidMessage: A value cannot be stored as JSON.
    """
    state = records.state
    state_fields: list[str] = [
        "version",
        str(state.version),
        "model_call_count",
        str(state.model_call_count),
        "next_seq",
        str(state.next_seq),
        "created_at",
        state.created_at.isoformat(),
        "updated_at",
        state.updated_at.isoformat(),
    ]
    if state.manager_state is not None:
        state_fields += ["manager_state", dumps(state.manager_state)]
    if state.agent_state is not None:
        state_fields += ["agent_state", dumps(state.agent_state)]
    msg: list[str] = []
    content: list[str] = []
    mut: list[str] = []
    active: list[str] = []
    by_seq: list[str] = []
    for h in records.messages:
        entry_id = h.message.message_id
        record = h.message.to_record()
        blocks = record.pop("content")
        record.update(record_values(h))
        msg += [entry_id, dumps(record)]
        content += [entry_id, dumps(blocks)]
        by_seq += [str(h.seq), entry_id]
        if h.revision_count:
            mut += [f"r|{entry_id}", str(h.revision_count)]
        if h.status == "evicted":
            mut += [f"e|{entry_id}", h.evicted_by or ""]
        else:
            active += [str(view_score(h.seq, summary=False)), f"m:{entry_id}"]
    summaries: list[str] = []
    by_time: list[str] = []
    for s in records.summaries:
        summaries += [s.summary_id, _stored_summary(s)]
        if at := time_score(s.created_at):  # else left out of the index, as the commit leaves it
            by_time += [at, s.summary_id]
        if s.evicted_by is not None:
            mut += [f"se|{s.summary_id}", s.evicted_by]
            if s.superseded_by is not None:
                mut += [f"ss|{s.summary_id}", s.superseded_by]
        elif s.status == "active":
            active += [str(view_score(s.seq, summary=True)), f"s:{s.summary_id}"]
    # One field per tombstone: an entry erased and later pruned has two, and a hash field
    # per entry would keep only one. The newest takes x|<id> (where erase and prune write);
    # older ones get a suffix no id of a file can hold (the id grammar refuses control
    # characters). Listings read every x| field.
    older: dict[str, int] = {}
    for t in reversed(records.tombstones):  # canonical order is oldest first
        n = older.get(t.entry_id, 0)
        older[t.entry_id] = n + 1
        mut += [f"x|{t.entry_id}" if n == 0 else f"x|{t.entry_id}\x1f{n}", tombstone_json(t)]
    reductions = [r.model_dump_json() for r in records.reductions]
    revisions = [
        dumps(
            {
                "number": r.number,
                "original": encode_blocks(r.original),
                "row": {
                    "session_id": r.session_id,
                    "agent_id": r.agent_id,
                    "message_id": r.message_id,
                    "reason": r.reason,
                    "reduction_id": r.reduction_id,
                    "created_at": r.created_at.isoformat(),
                },
            }
        )
        for r in records.revisions
    ]
    pins = [pin_event_json(p) for p in records.pins]
    # the eviction index and its facts, complete at this version (see eviction_index.py)
    index = eviction_index.plan(
        [
            EvictedCandidate(h.message.message_id, "message", h.seq, h.message.role, "", h.evicted_by)
            for h in records.messages
            if h.status == "evicted"
        ]
        + [
            EvictedCandidate(s.summary_id, "summary", s.seq, "user", "", s.evicted_by)
            for s in records.summaries
            if s.evicted_by is not None
        ],
        records.reductions,
        records.summaries,
    )
    mut += index.fields
    if index.complete:
        state_fields += ["ev_v", str(state.version), "et_v", str(state.version)]
    # the lists' order marks, as the commit script would have left them (see listing.py)
    state_fields += mark_fields(REDUCTIONS, reductions, "reductions") + mark_fields(PINS, pins, "pin events")
    # With a ttl the sessions index must rank the conversation by when its keys were
    # written (the index forgets sessions last written more than ttl ago).
    listed = max(state.updated_at, utcnow()) if ttl_ms else state.updated_at
    args: list[str] = [str(epoch_micros(listed)), state.session_id, state.agent_id, str(ttl_ms)]
    for pairs in (state_fields, msg, content, mut, active, summaries):
        args += [str(len(pairs) // 2), *pairs]
    for values in (reductions, revisions, pins):
        args += [str(len(values)), *values]
    args += [str(len(by_seq) // 2), *by_seq]
    args += [str(len(by_time) // 2), *by_time]
    args += [str(len(index.pairs) // 2), *index.pairs]
    args += [str(len(index.lex) // 2), *index.lex]
    return args
