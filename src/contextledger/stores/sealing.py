"""Sealing and opening the values of a store's records, bound to where each belongs.

:class:`Sealing` is the half of :class:`~contextledger.stores.encrypted.EncryptedStore`
that turns messages, summary texts, state and changesets into sealed ones and back; each
value is bound (its authenticated data) to its :func:`place`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextledger.core.changeset import Changeset, ContentRevision
from contextledger.encryption import SEALED, Sealer, sealed_token
from contextledger.model.messages import Message
from contextledger.model.records import HistoryEntry, SummaryEntry, ViewEntry, view_entry

__all__ = ["Sealing", "place"]


def place(session_id: str, agent_id: str, what: str, ident: str = "") -> str:
    """What a sealed value is bound to (its authenticated data): the conversation, the field, the id."""
    return "\x1f".join((session_id, agent_id, what, ident))


class Sealing:
    """Seals and opens record values with ``sealer`` (the store that uses it sets it)."""

    sealer: Sealer

    def _seal_message(self, sid: str, aid: str, message: Message) -> Message:
        meta = message.with_pin(False).metadata
        # Empty metadata (the common case) holds nothing to hide: kept as it is, one token less to open.
        metadata: dict[str, Any] = (
            self.sealer.seal_mapping(meta, place(sid, aid, "meta", message.message_id)) if meta else {}
        )
        sealed = Message(
            message_id=message.message_id,
            role=message.role,
            content=self.sealer.seal_content(list(message.content), place(sid, aid, "content", message.message_id)),
            metadata=metadata,
        )
        return sealed.with_pin(True) if message.pinned else sealed

    def _open_message(self, sid: str, aid: str, message: Message) -> Message:
        token = sealed_token(message.content)
        meta_token = message.metadata.get(SEALED)
        if token is None and not isinstance(meta_token, str):
            return message  # written before the ledger was encrypted
        mid = message.message_id
        record = message.to_record()
        # The opened JSON is what to_record() gave when it was sealed: Message.from_record
        # rebuilds the message from it on its fast path (no second validation).
        if token is not None:
            record["content"] = self.sealer.open_json(token, place(sid, aid, "content", mid))
        if isinstance(meta_token, str):
            record["metadata"] = self.sealer.open_json(meta_token, place(sid, aid, "meta", mid))
        if message.pinned:  # the pin flag is kept clear, beside the sealed metadata
            metadata = dict(record["metadata"])
            metadata["custom"] = {**dict(metadata.get("custom") or {}), "pinned": True}
            record["metadata"] = metadata
        return Message.from_record(record)

    def _seal_text(self, sid: str, aid: str, summary_id: str, text: str) -> str:
        return self.sealer.seal_text(text, place(sid, aid, "summary", summary_id))

    def _open_text(self, sid: str, aid: str, summary_id: str, text: str) -> str:
        if not text.startswith("clenc1."):
            return text
        return self.sealer.open_text(text, place(sid, aid, "summary", summary_id))

    def _seal_state(self, sid: str, aid: str, which: str, value: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else self.sealer.seal_mapping(value, place(sid, aid, which))

    def _open_state(self, sid: str, aid: str, which: str, value: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else self.sealer.open_mapping(value, place(sid, aid, which))

    def _open_summary(self, s: SummaryEntry) -> SummaryEntry:
        text = self._open_text(s.session_id, s.agent_id, s.summary_id, s.content)
        return s if text is s.content else s.model_copy(update={"content": text})

    def _open_history(self, h: HistoryEntry) -> HistoryEntry:
        message = self._open_message(h.session_id, h.agent_id, h.message)
        return h if message is h.message else h.model_copy(update={"message": message})

    def _open_entry(self, sid: str, aid: str, entry: ViewEntry) -> ViewEntry:
        if entry.kind == "summary":
            text = entry.message.plain_text
            opened = self._open_text(sid, aid, entry.entry_id, text)
            if opened is text:
                return entry
            message = Message(message_id=entry.message.message_id, role=entry.message.role, content=[{"text": opened}])
        else:
            message = self._open_message(sid, aid, entry.message)
            if message is entry.message:
                return entry
        return view_entry(entry.entry_id, entry.kind, entry.seq, message, entry.tokens)

    def _seal_changeset(self, cs: Changeset) -> Changeset:
        sid, aid = cs.session_id, cs.agent_id
        update: dict[str, Any] = {}
        if cs.appends:
            update["appends"] = tuple(
                e.model_copy(update={"message": self._seal_message(sid, aid, e.message)}) for e in cs.appends
            )
        if cs.revisions:
            update["revisions"] = tuple(
                ContentRevision.model_construct(
                    **{
                        **dict(r),
                        "content": self.sealer.seal_content(list(r.content), place(sid, aid, "content", r.message_id)),
                    }
                )
                for r in cs.revisions
            )
        if cs.summary is not None:
            text = self._seal_text(sid, aid, cs.summary.summary_id, cs.summary.content)
            update["summary"] = cs.summary.model_copy(update={"content": text})
        if cs.manager_state is not None:
            update["manager_state"] = self._seal_state(sid, aid, "manager_state", cs.manager_state)
        if cs.agent_state is not None:
            update["agent_state"] = self._seal_state(sid, aid, "agent_state", cs.agent_state)
        return cs.model_copy(update=update) if update else cs
