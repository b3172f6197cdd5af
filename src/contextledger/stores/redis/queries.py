"""The Redis ledger's reads: the view, entries by id, and the queries over history (paged).

A part of :class:`~contextledger.stores.redis.store.RedisStore` over its
:class:`~contextledger.stores.redis.data.RedisData`: :meth:`RedisQueries.load` and
:meth:`RedisQueries.entries` run one read-only script each; the listings that page read a
page through an index or a list range (:mod:`.paging`, :mod:`.summary_index`,
:mod:`.eviction_index`, :mod:`.listing`), else the keys of the conversations they name
through the read-only snapshot script, and decode the rows
(:mod:`~contextledger.stores.redis.codec`); damaged rows raise
:class:`~contextledger.errors.CorruptRecord` naming the key and the id.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, cast

from contextledger.errors import StoreError
from contextledger.model.paging import WHOLE, Page, paged
from contextledger.model.records import (
    Eviction,
    HistoryEntry,
    PinEvent,
    Reduction,
    Revision,
    Snapshot,
    SummaryEntry,
    Trigger,
    ViewEntry,
    pin_positions,
    view_entry,
)
from contextledger.model.trusted import trusted
from contextledger.stores.base import AppendedBy, EvictedCandidate, assemble_evictions
from contextledger.stores.redis import eviction_index, summary_index, travel, trigger_index
from contextledger.stores.redis.codec import (
    MessageRow,
    decode_state,
    flat_hash,
    reduction_from,
    revision_from,
    summary_from,
    text,
    view_entry_of,
)
from contextledger.stores.redis.data import RedisData
from contextledger.stores.redis.events import pin_event_from
from contextledger.stores.redis.keys import ConversationKeys
from contextledger.stores.redis.listing import PINS, REDUCTIONS, range_args
from contextledger.stores.redis.paging import page_args
from contextledger.stores.redis.travel import decode_entries

__all__ = ["RedisQueries"]

logger = logging.getLogger(__name__)


class RedisQueries:
    """The reads: the view, entries by id, history, evictions, reductions, summaries, revisions, pins."""

    def __init__(self, data: RedisData) -> None:
        """Read through ``data``."""
        self._d = data

    def _driver(self, action: str) -> AbstractContextManager[None]:
        return self._d.driver(action)

    def _conversation(self, session_id: str, agent_id: str) -> ConversationKeys:
        return self._d.conversation(session_id, agent_id)

    def _snapshot(self, keys: Sequence[str], ops: Sequence[str]) -> list[Any]:
        return self._d.snapshot(keys, ops)

    def _read_page(self, keys: ConversationKeys, args: list[str]) -> list[Any] | None:
        return self._d.read_page(keys, args)

    def _read_range(self, keys: ConversationKeys, key: str, args: list[str]) -> tuple[bool, list[bytes]]:
        return self._d.read_range(keys, key, args)

    def agents(self, session_id: str) -> list[str]:
        """Agent ids with a conversation in the session."""
        return self._d.agents(session_id)

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        """Return the state and active view (one read-only script), or ``None``."""
        keys = self._conversation(session_id, agent_id)
        with self._driver("load"):
            reply = self._d.scripts.load(keys=[keys.state, keys.msg, keys.content, keys.mut, keys.active, keys.sum])
        if reply is None:
            return None
        state_raw, members, records, contents, muts, summaries = cast(list[list[Any]], reply)
        state = decode_state(session_id, agent_id, flat_hash(state_raw), keys.state)
        entries: list[ViewEntry] = []
        message_index = summary_index = 0
        for member in members:
            entry_id = text(member[2:])
            if member[:1] == b"m":
                i = message_index
                message_index += 1
                record, content = records[i], contents[i]
                if record is None or content is None:
                    raise StoreError(f"active entry {entry_id} of {session_id}/{agent_id} has no stored record")
                entries.append(view_entry_of(entry_id, record, content, muts[2 * i], muts[2 * i + 1], keys.msg))
            else:
                raw = summaries[summary_index]
                summary_index += 1
                if raw is None:
                    raise StoreError(f"active summary {entry_id} of {session_id}/{agent_id} has no stored record")
                summary = summary_from(raw, {}, keys.sum)
                entries.append(
                    view_entry(summary.summary_id, "summary", summary.seq, summary.to_message(), summary.tokens)
                )
        # Every part is a record already: the snapshot is not validated again.
        return trusted(Snapshot, {"state": state, "entries": tuple(entries)})

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``ids`` (active or evicted) in seq order; unknown ids are skipped.

        One read-only script reads those entries only, whatever the length of the history;
        with ``appended_by`` it returns (and reads the content of) only the entries appended
        by a call or version at or before the cut (a time bound is applied to what it returns).
        """
        keys = self._conversation(session_id, agent_id)
        args = travel.entries_args(sorted(set(ids)), appended_by)
        with self._driver("entries"):
            reply = self._d.scripts.entries(keys=[keys.msg, keys.content, keys.mut], args=args)
        return travel.decode_entries(session_id, agent_id, cast(list[Any], reply), keys.msg, appended_by)

    def _rows(
        self, records: dict[str, bytes], contents: dict[str, bytes], mut: dict[str, bytes], where: str
    ) -> list[MessageRow]:
        rows = []
        for entry_id, record in records.items():
            content = contents.get(entry_id)
            if content is None:
                raise StoreError(f"entry {entry_id} has no stored content")
            rows.append(MessageRow.decode(entry_id, record, content, mut, where))
        return sorted(rows, key=lambda r: r.seq)

    def history(
        self, session_id: str, agent_id: str, *, include_evicted: bool = True, page: Page | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``page`` (default: all) in seq order.

        One read-only script walks the conversation's seq index and reads the page's
        entries only (see :mod:`~contextledger.stores.redis.paging`). A conversation
        whose index is incomplete (written before it existed, and not upgraded since)
        is read whole, as before the index, and the page kept: a read never writes.
        """
        page = page or WHOLE
        keys = self._conversation(session_id, agent_id)
        with self._driver("history"):
            reply = self._read_page(keys, page_args(page, include_evicted=include_evicted))
        if reply is not None:
            return decode_entries(session_id, agent_id, reply, keys.msg)
        logger.debug(
            "session_id=<%s>, agent_id=<%s> | history read whole: no seq index yet (db upgrade builds it)",
            session_id,
            agent_id,
        )
        with self._driver("history"):
            records, contents, mut = self._snapshot([keys.msg, keys.content, keys.mut], ["h", "h", "h"])
        rows = self._rows(flat_hash(records), flat_hash(contents), flat_hash(mut), keys.msg)
        ranged = [r for r in rows if (include_evicted or r.evicted_by is None) and page.admits(r.seq)]
        return [r.history_entry(session_id, agent_id) for r in page.cut(ranged)]

    def _agent_ids(self, session_id: str, agent_id: str | None) -> list[str]:
        return [agent_id] if agent_id is not None else self.agents(session_id)

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
        page: Page | None = None,
    ) -> list[Eviction]:
        """Evicted entries with when, why and which summary replaced them (or one page).

        One read-only script per agent reads the page's range of the conversation's index
        of standing evictions and those entries, their reductions and replacing summaries
        only (see :mod:`.eviction_index`); a page filtered by ``trigger`` reads a range of
        the trigger index (that trigger's evictions alone) the same way. A conversation whose
        index is incomplete (written before it, or by a version without it, and not upgraded
        since) is read whole and joined in Python
        (:func:`~contextledger.stores.base.assemble_evictions`), the page kept: a read never writes.
        """
        page = page or WHOLE
        out: list[Eviction] = []
        for aid in self._agent_ids(session_id, agent_id):
            keys = self._conversation(session_id, aid)
            if trigger is None:
                args = eviction_index.page_args(page, aid, since)
            else:
                args = trigger_index.page_args(page, aid, since, trigger)
            with self._driver("evictions"):
                reply = self._d.read_evictions(keys, args, by_trigger=trigger is not None)
            indexed = None if reply is None else eviction_index.decode_page(session_id, aid, reply, keys, trigger)
            if indexed is not None:
                out += indexed
                continue
            logger.debug(
                "session_id=<%s>, agent_id=<%s> | evictions read whole: no complete index (db upgrade builds it)",
                session_id,
                aid,
            )
            out += self._whole_evictions(session_id, aid, keys, trigger=trigger, since=since)
        return paged(out, page)

    def _whole_evictions(
        self,
        session_id: str,
        agent_id: str,
        keys: ConversationKeys,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
    ) -> list[Eviction]:
        """Every eviction of one conversation, read whole and joined in Python."""
        with self._driver("evictions"):
            records, contents, mut_raw, sums, reds = self._snapshot(
                [keys.msg, keys.content, keys.mut, keys.sum, keys.red], ["h", "h", "h", "h", "l"]
            )
        mut = flat_hash(mut_raw)
        reductions = {r.reduction_id: r for r in (reduction_from(raw, keys.red) for raw in reds)}
        summaries = _by_creation(summary_from(raw, mut, keys.sum) for raw in flat_hash(sums).values())
        evicted_records = {mid: rec for mid, rec in flat_hash(records).items() if f"e|{mid}" in mut}
        candidates = [
            EvictedCandidate(r.entry_id, "message", r.seq, r.message.role, r.message.plain_text, r.evicted_by)
            for r in self._rows(evicted_records, flat_hash(contents), mut, keys.msg)
        ]
        candidates += [
            EvictedCandidate(s.summary_id, "summary", s.seq, "user", s.content, s.evicted_by)
            for s in summaries
            if s.status == "evicted"
        ]
        return assemble_evictions(session_id, agent_id, candidates, reductions, summaries, trigger=trigger, since=since)

    def reductions(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[Reduction]:
        """Reductions in commit order (or one page: a range of each agent's list, see :mod:`.listing`)."""
        page = page or WHOLE
        out: list[Reduction] = []
        for aid in self._agent_ids(session_id, agent_id):
            keys = self._conversation(session_id, aid)
            with self._driver("reductions"):
                _, reds = self._read_range(keys, keys.red, range_args(REDUCTIONS, page, aid))
            out += [reduction_from(raw, keys.red) for raw in reds]
        return paged(out, page)

    def summaries(
        self, session_id: str, agent_id: str | None = None, *, page: Page | None = None
    ) -> list[SummaryEntry]:
        """All summaries, superseded included, oldest first (or one page).

        One read-only script per agent reads the page's range of the conversation's
        creation-time index and those summaries only (see :mod:`.summary_index`); a
        conversation whose index is incomplete (written before it, not upgraded since) is
        read whole and the page kept: a read never writes.
        """
        page = page or WHOLE
        out: list[SummaryEntry] = []
        for aid in self._agent_ids(session_id, agent_id):
            keys = self._conversation(session_id, aid)
            with self._driver("summaries"):
                reply = self._d.read_summaries(keys, summary_index.page_args(page, aid))
            if reply is not None:
                out += _indexed_summaries(session_id, aid, reply, keys.sum)
                continue
            logger.debug(
                "session_id=<%s>, agent_id=<%s> | summaries read whole: no time index yet (db upgrade builds it)",
                session_id,
                aid,
            )
            with self._driver("summaries"):
                sums, mut_raw = self._snapshot([keys.sum, keys.mut], ["h", "h"])
            mut = flat_hash(mut_raw)
            out += [summary_from(raw, mut, keys.sum) for raw in flat_hash(sums).values()]
        return paged(out, page)

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """Original contents kept by revisions, oldest first."""
        keys = self._conversation(session_id, agent_id)
        with self._driver("revisions"):
            (rows,) = self._snapshot([keys.rev], ["l"])
        revisions = [revision_from(raw, keys.rev) for raw in rows]
        return [r for r in revisions if message_id is None or r.message_id == message_id]

    def pin_history(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[PinEvent]:
        """Every pin and unpin of the session (or one agent), in commit order (or one page: a range of each list)."""
        page = page or WHOLE
        events: list[PinEvent] = []
        for aid in self._agent_ids(session_id, agent_id):
            keys = self._conversation(session_id, aid)
            with self._driver("pin_history"):
                _, rows = self._read_range(keys, keys.pins, range_args(PINS, page, aid))
            # in commit order; a range is read only of rows that hold their position
            fill = pin_positions()
            events += [pin_event_from(raw, session_id, aid, fill) for raw in rows]
        return paged(events, page)


def _by_creation(summaries: Iterator[SummaryEntry] | Sequence[SummaryEntry]) -> list[SummaryEntry]:
    return sorted(summaries, key=lambda s: (s.created_at, s.seq))


def _indexed_summaries(session_id: str, agent_id: str, reply: list[Any], where: str) -> list[SummaryEntry]:
    """The summaries of a :data:`.summary_index.PAGE` reply, in its order.

    Raises:
        StoreError: An indexed summary has no stored record.
        CorruptRecord: A stored summary is damaged.
    """
    ids, raws, facts = reply
    out = []
    for i, (raw_id, raw) in enumerate(zip(ids, raws, strict=True)):
        summary_id = text(raw_id)
        if raw is None:
            raise StoreError(f"indexed summary {summary_id} of {session_id}/{agent_id} has no stored record")
        mut = {f"se|{summary_id}": facts[2 * i], f"ss|{summary_id}": facts[2 * i + 1]}
        out.append(summary_from(raw, {k: v for k, v in mut.items() if v is not None}, where))
    return out
