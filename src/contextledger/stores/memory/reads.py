"""The memory store's reads: restore, history, the listings and time travel's entries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

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
    view_entry,
)
from contextledger.stores.base import AppendedBy, EvictedCandidate, assemble_evictions
from contextledger.stores.memory.data import MemoryData, StoredConversation, history_entry

__all__ = ["MemoryReads"]


class MemoryReads:
    """What the ``load``, HISTORY and TIME_TRAVEL parts of the store contract read.

    Copies, never the held rows; a restored view's messages are the held ones themselves,
    which are immutable all the way down (a row takes a new message when it changes).
    """

    def __init__(self, data: MemoryData) -> None:
        """Read ``data``."""
        self._d = data

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        """Return the state and active view, or ``None``."""
        with self._d.guarded():
            conv = self._d.conversations.get((session_id, agent_id))
            if conv is None:
                return None
            # A message is immutable all the way down (see Message.stored_copy): the view
            # shares the held one, as a live view shares the appended ones.
            entries = [
                view_entry(mid, "message", r.seq, r.message, r.tokens)
                for mid, r in conv.rows.items()
                if r.status == "active"
            ]
            entries += [
                ViewEntry(entry_id=s.summary_id, kind="summary", seq=s.seq, message=s.to_message(), tokens=s.tokens)
                for s in conv.summaries.values()
                if s.status == "active"
            ]
            entries.sort(key=lambda e: (e.seq, e.kind != "summary"))
            return Snapshot(state=conv.state, entries=tuple(entries))

    def history(
        self, session_id: str, agent_id: str, *, include_evicted: bool = True, page: Page | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``page`` (default: all) in seq order; only the page's entries are copied."""
        page = page or WHOLE
        with self._d.guarded():
            conv = self._d.conversations.get((session_id, agent_id))
            if conv is None:
                return []
            ranked = sorted(
                (r.seq, mid)
                for mid, r in conv.rows.items()
                if (include_evicted or r.status == "active") and page.admits(r.seq)
            )
            return self._history_of(conv, session_id, agent_id, {mid for _, mid in page.cut(ranked)})

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``ids`` (active or evicted) in seq order; unknown ids are skipped.

        With ``appended_by`` only those appended at or before its cut.
        """
        with self._d.guarded():
            conv = self._d.conversations.get((session_id, agent_id))
            if conv is None:
                return []
            rows = self._history_of(conv, session_id, agent_id, set(ids))
            return rows if appended_by is None else [h for h in rows if appended_by.admits(h)]

    def _history_of(
        self, conv: StoredConversation, session_id: str, agent_id: str, ids: set[str]
    ) -> list[HistoryEntry]:
        out = [history_entry(r, session_id, agent_id) for mid, r in conv.rows.items() if mid in ids]
        return sorted(out, key=lambda h: h.seq)

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
        page: Page | None = None,
    ) -> list[Eviction]:
        """Evicted entries with when, why and which summary replaced them (or one page)."""
        with self._d.guarded():
            out: list[Eviction] = []
            for conv in self._d.of_session(session_id, agent_id):
                candidates = [
                    EvictedCandidate(mid, "message", r.seq, r.message.role, r.message.plain_text, r.evicted_by)
                    for mid, r in conv.rows.items()
                    if r.status == "evicted"
                ]
                candidates += [
                    EvictedCandidate(s.summary_id, "summary", s.seq, "user", s.content, s.evicted_by)
                    for s in conv.summaries.values()
                    if s.status == "evicted"
                ]
                out += assemble_evictions(
                    session_id,
                    conv.state.agent_id,
                    candidates,
                    {r.reduction_id: r for r in conv.reductions},
                    conv.summaries.values(),
                    trigger=trigger,
                    since=since,
                )
            return paged(out, page)

    def reductions(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[Reduction]:
        """Reductions in commit order (or one page)."""
        with self._d.guarded():
            return paged([r for c in self._d.of_session(session_id, agent_id) for r in c.reductions], page)

    def summaries(
        self, session_id: str, agent_id: str | None = None, *, page: Page | None = None
    ) -> list[SummaryEntry]:
        """All summaries, superseded included (or one page)."""
        with self._d.guarded():
            return paged([s for c in self._d.of_session(session_id, agent_id) for s in c.summaries.values()], page)

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """Original contents kept by revisions."""
        with self._d.guarded():
            conv = self._d.conversations.get((session_id, agent_id))
            if conv is None:
                return []
            return [r for r in conv.revisions if message_id is None or r.message_id == message_id]

    def pin_history(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[PinEvent]:
        """Every pin and unpin of the session (or one agent), in commit order (or one page)."""
        with self._d.guarded():
            return paged([e for c in self._d.of_session(session_id, agent_id) for e in c.pins], page)

    def agents(self, session_id: str) -> list[str]:
        """Agent ids of the session."""
        with self._d.guarded():
            return sorted(aid for sid, aid in self._d.conversations if sid == session_id)
