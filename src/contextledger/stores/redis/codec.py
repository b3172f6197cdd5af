"""How ledger records become Redis values and back.

Messages are stored with :meth:`Message.to_record` (bytes tagged, so they survive JSON),
split in two: the immutable part (role, metadata as appended, seq, tokens, created_at)
and the content, which revisions replace. The pin flag is kept apart and applied with
:meth:`Message.with_pin` when read: applying only the last pin change gives the same
message as applying every change in turn, so storing the last one is exact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from contextledger.core.changeset import Changeset
from contextledger.errors import CorruptRecord, InvalidMessage
from contextledger.model.jsonvalues import dumps_encoded, encode_value
from contextledger.model.messages import Message, message_from_stored_content, restored_record_message
from contextledger.model.records import (
    ConversationState,
    HistoryEntry,
    Reduction,
    Revision,
    SummaryEntry,
    ViewEntry,
    view_entry,
)
from contextledger.model.stored import Unusual, parse_json_text
from contextledger.model.trusted import builder
from contextledger.stores.base import decoding
from contextledger.stores.redis.keys import view_score

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

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# An entry's record holds its message but the content (kept apart: revisions replace it),
# then every field of HistoryEntry that is neither the conversation's, nor the message,
# nor a fact that changes after the append (kept in the mut hash: p|, e|, r|, t|, status
# derived from e|) -- by name, so a field added to HistoryEntry is stored and read with
# nothing else changed. The stamps come last: the time-travel script reads from_call and
# version at the record's end.
_MUTABLE = frozenset({"status", "pinned", "evicted_by", "revision_count"})
_STAMPS = ("created_at", "from_call", "version")  # Changeset.stamps, in its order
_OUTSIDE = ("session_id", "agent_id", "message", *sorted(_MUTABLE))
RECORD_FIELDS = tuple(name for name in HistoryEntry.model_fields if name not in _OUTSIDE)
"""The entry fields an entry's record holds, in the record's order."""
_RECORD_ORDER = (*(name for name in RECORD_FIELDS if name not in _STAMPS), *_STAMPS)
_APPENDED = ("seq", "tokens")  # from the appended entry; the stamps from the commit; the rest hold their defaults
_APPENDED_DEFAULTS = {
    name: HistoryEntry.model_fields[name].get_default(call_default_factory=True)
    for name in _RECORD_ORDER
    if name not in _APPENDED and name not in _STAMPS
}
_history_entry = builder(HistoryEntry, _OUTSIDE)  # then the record fields, in the record's order


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
for _name in _STAMPS:
    if _name not in RECORD_FIELDS:
        raise TypeError(f"HistoryEntry lacks the stamp {_name}")


def record_values(entry: HistoryEntry) -> dict[str, Any]:
    """The record fields of ``entry``, JSON-ready, in the stored order (see :data:`RECORD_FIELDS`)."""
    return {name: _json_value(getattr(entry, name)) for name in _RECORD_ORDER}


def _json_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _decoded_fields(base: Mapping[str, Any]) -> list[Any]:
    """The record fields of a stored record, decoded, in :data:`RECORD_FIELDS` order (a missing one: its default).

    Raises:
        KeyError: A field without a default is missing.
    """
    return [
        decode(base[name]) if required else (default if (value := base.get(name)) is None else decode(value))
        for name, decode, required, default in _DECODERS
    ]


def dumps(value: Any) -> str:
    """Compact JSON (ASCII-escaped, so any Python string, lone surrogates included, survives).

    Raises:
        InvalidMessage: ``value`` holds something JSON cannot represent (NaN and infinity
            included, as on every other backend).
    """
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"value cannot be stored as JSON: {exc}") from exc


_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)  # json.dumps would build one per call


def _content_text(content: Any) -> str:
    """:func:`dumps` of the content's JSON-safe blocks (built only when bytes need tagging)."""
    try:
        return dumps_encoded(content, compact=True)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"value cannot be stored as JSON: {exc}") from exc


def loads(raw: bytes | str, where: str | None = None, record_id: str | None = None) -> Any:
    """Parse JSON written by :func:`dumps`.

    Raises:
        CorruptRecord: The stored value is not valid JSON (the data was changed outside
            contextledger); it names ``where`` (the key) and ``record_id``.
    """
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise CorruptRecord(f"invalid JSON value: {exc}", where=where, record_id=record_id) from exc


def text(raw: bytes | str) -> str:
    """A reply value as ``str`` (the client does not decode, so bytes stay exact)."""
    return raw.decode("utf-8") if isinstance(raw, bytes) else raw


def flat_hash(items: Sequence[bytes]) -> dict[str, bytes]:
    """``HGETALL`` as returned by a script (a flat field/value list) as a dict."""
    return {text(items[i]): items[i + 1] for i in range(0, len(items), 2)}


def epoch_micros(moment: datetime) -> int:
    """Microseconds since the epoch: exact as a sorted-set score (below 2**53)."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


_EXACT = 2**53
"""Scores (µs from the epoch) a double holds exactly lie strictly within this either side of 0."""


def time_score(moment: datetime) -> str:
    """``moment`` (naive: UTC) in epoch µs as an exact sorted-set score, or ``''`` when a double cannot hold it.

    That is before 1685 or after 2255: an index leaves such a row out (see
    :mod:`~contextledger.stores.redis.summary_index`).
    """
    micros = epoch_micros(moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC))
    return str(micros) if -_EXACT < micros < _EXACT else ""


def _check_id(kind: str, value: str) -> str:
    if value.isascii():  # the ids of nearly every commit: nothing to encode to know
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMessage(f"{kind} {value!r} is not valid Unicode text") from exc
    return value


def commit_args(changeset: Changeset, now: datetime) -> list[str]:
    """The ARGV of the commit script for ``changeset`` (see ``scripts.COMMIT``).

    Raises:
        InvalidMessage: An appended message or revision cannot be stored as JSON, or an
            id is not valid Unicode. Raised before anything is sent.
    """
    cs = changeset
    stamp = now.isoformat()
    args = [
        str(cs.expected_version),
        stamp,
        str(epoch_micros(now)),
        _check_id("session_id", cs.session_id),
        _check_id("agent_id", cs.agent_id),
        cs.reduction.reduction_id if cs.reduction is not None else "",
        "" if cs.model_call_count is None else str(cs.model_call_count),
        "" if cs.next_seq is None else str(cs.next_seq),
        "" if cs.manager_state is None else dumps(cs.manager_state),
        "" if cs.agent_state is None else dumps(cs.agent_state),
        str(len(cs.appends)),
        str(len(cs.evict)),
        str(len(cs.pins)),
        str(len(cs.revisions)),
        "1" if cs.summary is not None else "0",
        "1" if cs.reduction is not None else "0",
    ]
    stamps = cs.stamps(stamp)
    defaults = _APPENDED_DEFAULTS
    for entry in cs.appends:
        message = entry.message
        record = {  # the message's record (see Message.to_record) but its content, then the record fields by name
            "message_id": message.message_id,
            "role": message.role,
            "metadata": encode_value(message.metadata),
            "seq": entry.seq,
            "tokens": entry.tokens,
            **defaults,
            **stamps,  # last: the time-travel script reads from_call and version at the record's end
        }
        args += [
            _check_id("entry id", entry.entry_id),
            str(view_score(entry.seq, summary=False)),
            dumps(record),
            _content_text(message.content),
        ]
    args += [_check_id("entry id", entry_id) for entry_id in cs.evict]
    for entry_id, pinned in cs.pins.items():
        args += [_check_id("entry id", entry_id), "1" if pinned else "0"]
    reduction_id = cs.reduction.reduction_id if cs.reduction is not None else None
    for rev in cs.revisions:
        row = {
            "session_id": cs.session_id,
            "agent_id": cs.agent_id,
            "message_id": rev.message_id,
            "reason": rev.reason,
            "reduction_id": reduction_id,
            "created_at": stamp,
        }
        tokens = "" if rev.tokens is None else str(rev.tokens)
        args += [_check_id("message id", rev.message_id), tokens, _content_text(rev.content), dumps(row)]
    if cs.summary is not None:
        summary = cs.summary
        args += [
            _check_id("summary id", summary.summary_id),
            str(view_score(summary.seq, summary=True)),
            "1" if summary.status == "active" else "0",
            summary.model_dump_json(),
            time_score(summary.created_at),
            str(len(summary.replaces)),
            *(_check_id("entry id", r) for r in summary.replaces),
        ]
    if cs.reduction is not None:
        args += [cs.reduction.model_dump_json(), cs.reduction.trigger]
    args.append(str(len(cs.restore)))
    for entry in cs.restore:
        is_summary = entry.kind == "summary"
        score = str(view_score(entry.seq, summary=is_summary))
        args += [_check_id("entry id", entry.entry_id), "s" if is_summary else "m", score]
    return args


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
        try:  # the content text parsed straight into the message, as a restore does (see view_entry_of)
            message = message_from_stored_content(base, content)
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
        try:
            base = parse_json_text(record)
        except Unusual:
            base = json.loads(record)
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
