"""How Redis values become ledger records again (how records become values: :mod:`.encode`).

Messages are stored with :meth:`Message.to_record` (bytes tagged, so they survive JSON),
split in two: the immutable part (role, metadata as appended, seq, tokens, created_at)
and the content, which revisions replace. The pin flag is kept apart and applied with
:meth:`Message.with_pin` when read: applying only the last pin change gives the same
message as applying every change in turn, so storing the last one is exact.

The names of :mod:`.encode` (:func:`commit_args`, :func:`dumps`, :func:`epoch_micros`,
:func:`time_score`, :func:`record_values`, :data:`RECORD_FIELDS`) stay importable from here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contextledger.errors import CorruptRecord
from contextledger.model.messages import Message, restored_record_message
from contextledger.model.records import (
    ConversationState,
    HistoryEntry,
    Reduction,
    Revision,
    SummaryEntry,
    ViewEntry,
    view_entry,
)
from contextledger.model.stored import parse_json
from contextledger.model.trusted import builder
from contextledger.stores.base import decoding
from contextledger.stores.redis.encode import (
    NOT_IN_RECORD,
    RECORD_FIELDS,
    commit_args,
    dumps,
    epoch_micros,
    record_values,
    time_score,
)

__all__ = [
    "RECORD_FIELDS",
    "MessageRow",
    "commit_args",
    "decode_state",
    "dumps",
    "epoch_micros",
    "flat_hash",
    "loads",
    "record_values",
    "reduction_from",
    "revision_from",
    "summary_from",
    "text",
    "time_score",
    "view_entry_of",
]

_history_entry = builder(HistoryEntry, NOT_IN_RECORD)  # then the record fields, in the record's order


def _field_decoder(name: str) -> Any:
    """How the record's JSON value of the field ``name`` becomes the field's (the builder checks the result)."""
    annotation = HistoryEntry.model_fields[name].annotation
    if annotation is int:
        return int
    if annotation is datetime:
        return datetime.fromisoformat
    return lambda value: value


_DECODERS = tuple(
    (name, _field_decoder(name), HistoryEntry.model_fields[name].is_required(), HistoryEntry.model_fields[name].default)
    for name in RECORD_FIELDS
)


def _decoded_fields(base: Mapping[str, Any]) -> list[Any]:
    """The record fields of a stored record, decoded, in :data:`RECORD_FIELDS` order (a missing one: its default).

    Raises:
        KeyError: A field without a default is missing.
    """
    return [
        decode(base[name]) if required else (default if (value := base.get(name)) is None else decode(value))
        for name, decode, required, default in _DECODERS
    ]


def loads(raw: bytes | str, where: str | None = None, record_id: str | None = None) -> Any:
    """Parse JSON written by :func:`dumps`.

    Raises:
        CorruptRecord: The stored value is not valid JSON (the data was changed outside
            contextledger); it names ``where`` (the key) and ``record_id``.
    """
    try:
        return parse_json(raw)
    except ValueError as exc:
        raise CorruptRecord(f"invalid JSON value: {exc}", where=where, record_id=record_id) from exc


def text(raw: bytes | str) -> str:
    """A reply value as ``str`` (the client does not decode, so bytes stay exact)."""
    return raw.decode("utf-8") if isinstance(raw, bytes) else raw


def flat_hash(items: Sequence[bytes]) -> dict[str, bytes]:
    """``HGETALL`` as returned by a script (a flat field/value list) as a dict."""
    return {text(items[i]): items[i + 1] for i in range(0, len(items), 2)}


def decode_state(
    session_id: str, agent_id: str, raw: Mapping[str, bytes], where: str = "conversation state"
) -> ConversationState:
    """The conversation state from its hash.

    Raises:
        CorruptRecord: A field of the hash is damaged (names the key and the conversation).
    """
    with decoding(where, f"{session_id}/{agent_id}"):
        return _decode_state(session_id, agent_id, raw)


def _decode_state(session_id: str, agent_id: str, raw: Mapping[str, bytes]) -> ConversationState:
    manager_state = raw.get("manager_state")
    agent_state = raw.get("agent_state")
    return ConversationState(
        session_id=session_id,
        agent_id=agent_id,
        version=int(raw["version"]),
        model_call_count=int(raw.get("model_call_count", b"0")),
        next_seq=int(raw.get("next_seq", b"0")),
        manager_state=loads(manager_state) if manager_state is not None else None,
        agent_state=loads(agent_state) if agent_state is not None else None,
        created_at=datetime.fromisoformat(text(raw["created_at"])),
        updated_at=datetime.fromisoformat(text(raw["updated_at"])),
    )


@dataclass(frozen=True)
class MessageRow:
    """One message entry as stored, with its mutable facts merged in.

    Attributes:
        fields: The record fields (:data:`RECORD_FIELDS`), decoded, in that order.
    """

    entry_id: str
    message: Message
    evicted_by: str | None
    revision_count: int
    fields: tuple[Any, ...]

    @property
    def seq(self) -> int:
        """The entry's seq."""
        seq: int = self.fields[_SEQ]
        return seq

    @property
    def tokens(self) -> int:
        """The entry's token estimate (the last one set)."""
        tokens: int = self.fields[_TOKENS]
        return tokens

    @classmethod
    def decode(
        cls,
        entry_id: str,
        record: bytes,
        content: bytes,
        mut: Mapping[str, bytes],
        where: str = "message entry",
    ) -> MessageRow:
        """Rebuild a row from its record, content and the ``mut`` fields of its id.

        Raises:
            CorruptRecord: The record, content or a mutable field is damaged.
        """
        with decoding(where, entry_id):
            return cls._decode(entry_id, record, content, mut)

    @classmethod
    def _decode(cls, entry_id: str, record: bytes, content: bytes, mut: Mapping[str, bytes]) -> MessageRow:
        base = loads(record)
        try:  # the content held as its text until read, as a restore holds it (see view_entry_of)
            message = restored_record_message(base, content)
        except Exception:  # reported by the general decode, as it always has been
            message = Message.from_record({**base, "content": loads(content)})
        pin = mut.get(f"p|{entry_id}")
        if pin is not None:
            message = message.with_pin(pin == b"1")
        fields = _decoded_fields(base)
        tokens = mut.get(f"t|{entry_id}")
        if tokens is not None:
            fields[_TOKENS] = int(tokens)
        evicted_by = mut.get(f"e|{entry_id}")
        return cls(
            entry_id=entry_id,
            message=message,
            evicted_by=text(evicted_by) if evicted_by is not None else None,
            revision_count=int(mut.get(f"r|{entry_id}", b"0")),
            fields=tuple(fields),
        )

    def view_entry(self) -> ViewEntry:
        """The row as an entry of the active view."""
        return view_entry(self.entry_id, "message", self.seq, self.message, self.tokens)

    def history_entry(self, session_id: str, agent_id: str) -> HistoryEntry:
        """The row as a history entry."""
        return _history_entry(
            session_id,
            agent_id,
            self.message,
            self.evicted_by,
            self.message.pinned,
            self.revision_count,
            "evicted" if self.evicted_by is not None else "active",
            self.fields,
        )


_SEQ = RECORD_FIELDS.index("seq")
_TOKENS = RECORD_FIELDS.index("tokens")


def view_entry_of(
    entry_id: str, record: bytes, content: bytes, pin: bytes | None, tokens: bytes | None, where: str
) -> ViewEntry:
    """The view entry of an active message: ``MessageRow.decode(...).view_entry()`` in fewer steps.

    A restore reads many; each value is decoded and checked as :meth:`MessageRow.decode`
    does, without building the row. Anything that fails is decoded again by
    :meth:`MessageRow.decode`, which reports it.

    Raises:
        CorruptRecord: The record, content or a mutable field is damaged.
    """
    try:
        base = parse_json(record)
        message = restored_record_message(base, content)  # content held as its text until used
        if pin is not None:
            message = message.with_pin(pin == b"1")
        # Checked as MessageRow.decode checks them, though a view entry holds but two of them.
        fields = _decoded_fields(base)
        if entry_id == message.message_id:
            entry_id = message.message_id  # one string for both ids, as a SQL restore holds
        return view_entry(
            entry_id, "message", fields[_SEQ], message, int(tokens) if tokens is not None else fields[_TOKENS]
        )
    except Exception:  # reported, located, by the general decode below
        mut = {f"p|{entry_id}": pin, f"t|{entry_id}": tokens}
        present = {k: v for k, v in mut.items() if v is not None}
        return MessageRow.decode(entry_id, record, content, present, where).view_entry()


def summary_from(raw: bytes, mut: Mapping[str, bytes], where: str = "summary") -> SummaryEntry:
    """A summary as committed, with a later eviction (and its superseder) merged in.

    Raises:
        CorruptRecord: The stored summary is damaged.
    """
    with decoding(where, _id_in(raw, "summary_id")):
        summary = SummaryEntry.model_validate_json(raw)
    evicted_by = mut.get(f"se|{summary.summary_id}")
    if evicted_by is None:
        return summary
    superseded_by = mut.get(f"ss|{summary.summary_id}")
    return summary.model_copy(
        update={
            "status": "evicted",
            "superseded_by": text(superseded_by) if superseded_by is not None else None,
            "evicted_by": text(evicted_by),
        }
    )


def revision_from(raw: bytes, where: str = "revision") -> Revision:
    """A revision row as the commit script wrote it.

    Raises:
        CorruptRecord: The stored revision is damaged.
    """
    with decoding(where, _id_in(raw, "message_id")):
        envelope = loads(raw)
        return Revision.model_validate(
            {**envelope["row"], "number": envelope["number"], "original": envelope["original"]}
        )


def reduction_from(raw: bytes, where: str = "reduction") -> Reduction:
    """A reduction as committed.

    Raises:
        CorruptRecord: The stored reduction is damaged.
    """
    with decoding(where, _id_in(raw, "reduction_id")):
        return Reduction.model_validate_json(raw)


def _id_in(raw: bytes | str, field: str) -> str | None:
    # The id of a damaged record, when enough of it is left to tell.
    match = re.search(rf'"{field}":"([^"\\]*)"'.encode(), raw if isinstance(raw, bytes) else raw.encode())
    return match.group(1).decode("utf-8", "replace") if match else None
