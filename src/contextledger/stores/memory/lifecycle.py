"""The memory store's lifecycle: erasure, pruning, tombstones, imports, lineage and key rotation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from contextledger.errors import EntryNotFound
from contextledger.model.bundle import ConversationRecords, check_records
from contextledger.model.messages import Message
from contextledger.model.records import LineageLink, Tombstone
from contextledger.stores.capabilities import Swap, swap_in
from contextledger.stores.memory.data import MemoryData, StoredConversation, row_of

__all__ = ["MemoryLifecycle"]


class MemoryLifecycle:
    """The ERASING, transfer, lineage and resealing parts of the store contract."""

    def __init__(self, data: MemoryData) -> None:
        """Work on ``data``."""
        self._d = data

    def erase(self, tombstone: Tombstone, erased: Message, summaries: Mapping[str, str]) -> None:
        """Replace an entry's content by ``erased``, drop its revisions, rewrite ``summaries``, keep ``tombstone``.

        Raises:
            EntryNotFound: The entry or a summary is not in the conversation (nothing changes).
        """
        with self._d.guarded():
            conv = self._d.conversations.get((tombstone.session_id, tombstone.agent_id))
            if conv is None or tombstone.entry_id not in conv.rows:
                raise EntryNotFound(f"no message {tombstone.entry_id} in this conversation")
            missing = [s for s in summaries if s not in conv.summaries]
            if missing:
                raise EntryNotFound(f"no summary {missing[0]} in this conversation")
            row = conv.rows[tombstone.entry_id]
            row.message = erased.with_pin(row.message.pinned)
            row.revision_count = 0
            conv.revisions = [r for r in conv.revisions if r.message_id != tombstone.entry_id]
            for summary_id, text in summaries.items():
                conv.summaries[summary_id] = conv.summaries[summary_id].model_copy(update={"content": text})
            conv.tombstones.append(tombstone)
            # A new version: a conversation opened before the erase conflicts at its next
            # commit and re-reads, instead of planning (summarizing) the erased text it holds.
            conv.state = conv.state.model_copy(update={"version": conv.state.version + 1})

    def prune(self, session_id: str, agent_id: str, entry_ids: Sequence[str], tombstones: Sequence[Tombstone]) -> int:
        """Delete the evicted entries (messages or summaries) ``entry_ids``; keep ``tombstones``.

        Active entries are skipped, never deleted. Returns how many entries were deleted.
        """
        with self._d.guarded():
            conv = self._d.conversations.get((session_id, agent_id))
            if conv is None:
                return 0
            gone: set[str] = set()
            for entry_id in entry_ids:
                if entry_id in conv.rows and conv.rows[entry_id].status == "evicted":
                    del conv.rows[entry_id]
                    gone.add(entry_id)
                elif entry_id in conv.summaries and conv.summaries[entry_id].status == "evicted":
                    del conv.summaries[entry_id]
                    gone.add(entry_id)
            conv.revisions = [r for r in conv.revisions if r.message_id not in gone]
            conv.tombstones += [t for t in tombstones if t.entry_id in gone]
            return len(gone)

    def tombstones(self, session_id: str, agent_id: str | None = None) -> list[Tombstone]:
        """Erased and pruned entries of the session (or one agent), oldest first."""
        with self._d.guarded():
            out = [t for c in self._d.of_session(session_id, agent_id) for t in c.tombstones]
            return sorted(out, key=lambda t: t.erased_at)

    def import_conversation(self, records: ConversationRecords) -> bool:
        """Write one conversation's records as they are; ``False`` (nothing written) if it exists."""
        check_records(records)
        key = (records.session_id, records.agent_id)
        with self._d.guarded():
            if key in self._d.conversations:
                return False
            conv = StoredConversation(state=records.state)
            for h in records.messages:
                conv.rows[h.message.message_id] = row_of(h)
            conv.summaries = {s.summary_id: s for s in records.summaries}
            conv.reductions = list(records.reductions)
            conv.revisions = list(records.revisions)
            conv.pins = list(records.pins)
            conv.tombstones = list(records.tombstones)
            self._d.conversations[key] = conv
            return True

    def add_lineage(self, links: Sequence[LineageLink]) -> int:
        """Record each link under its ancestor conversation when it exists; return how many were new."""
        with self._d.guarded():
            added = 0
            for link in links:
                conv = self._d.conversations.get((link.session_id, link.agent_id))
                if conv is not None and link.key not in conv.lineage:
                    conv.lineage[link.key] = link
                    added += 1
            return added

    def lineage(self, session_id: str, agent_id: str | None = None) -> list[LineageLink]:
        """The links whose ancestor is the session (or the one agent), oldest first."""
        with self._d.guarded():
            out = [link for c in self._d.of_session(session_id, agent_id) for link in c.lineage.values()]
            return sorted(out, key=lambda link: (link.created_at, link.depth, link.key))

    def reseal(self, session_id: str, agent_id: str, swaps: Sequence[Swap]) -> int:
        """Replace sealed tokens where they still are (a key rotation); return how many were."""
        with self._d.guarded():
            conv = self._d.conversations.get((session_id, agent_id))
            return 0 if conv is None else sum(_reseal(conv, sw) for sw in swaps)


def _reseal(conv: StoredConversation, sw: Swap) -> bool:
    """Apply one swap to the conversation; whether its token was there."""
    if sw.where in ("content", "meta"):
        row = conv.rows.get(sw.ident)
        if row is None:
            return False
        record = row.message.to_record()
        field_name = "content" if sw.where == "content" else "metadata"
        value, hit = swap_in(record[field_name], sw.old, sw.new)
        if hit:
            row.message = Message.from_record({**record, field_name: value})
        return hit
    if sw.where == "summary":
        summary = conv.summaries.get(sw.ident)
        if summary is None or summary.content != sw.old:
            return False
        conv.summaries[sw.ident] = summary.model_copy(update={"content": sw.new})
        return True
    if sw.where == "revision":
        for i, rev in enumerate(conv.revisions):
            if rev.message_id == sw.ident and rev.number == sw.number:
                value, hit = swap_in([dict(b) for b in rev.original], sw.old, sw.new)
                if hit:
                    conv.revisions[i] = rev.model_copy(update={"original": value})
                return hit
        return False
    current = conv.state.manager_state if sw.where == "manager_state" else conv.state.agent_state
    value, hit = swap_in(current, sw.old, sw.new)
    if hit:
        conv.state = conv.state.model_copy(update={sw.where: value})
    return hit
