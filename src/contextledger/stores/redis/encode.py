"""How ledger records become Redis values: an entry's record, JSON text, scores, the commit's ARGV.

An entry's record holds its message but the content (kept apart: revisions replace it),
then every field of :class:`~contextledger.model.records.HistoryEntry` that is neither
the conversation's, nor the message, nor a fact that changes after the append (kept in
the mut hash: ``p|``, ``e|``, ``r|``, ``t|``; the status derived from ``e|``) -- by name,
so a field added to ``HistoryEntry`` is stored and read with nothing else changed. The
stamps come last: the time-travel script reads ``from_call`` and ``version`` at the
record's end. Reading them back: :mod:`~contextledger.stores.redis.codec`.

:func:`commit_args` runs on every append, so the text of a record is put together from
pieces made once: the parts every record of the process shares (its field names, the
defaults) at import, the stamps once per commit, and per message only what is its own
(its id, role, metadata, seq and tokens). The text is the one ``json.dumps`` of the
record's dict gives, byte for byte (a test holds them equal).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from json.encoder import encode_basestring_ascii as _quoted
from typing import Any

from contextledger.core.changeset import Changeset
from contextledger.errors import InvalidMessage
from contextledger.model.jsontext import frozen_text
from contextledger.model.jsonvalues import _BYTES_TAG, FrozenDict, FrozenList, dumps_encoded
from contextledger.model.records import HistoryEntry
from contextledger.stores.redis.keys import view_score

__all__ = [
    "NOT_IN_RECORD",
    "RECORD_FIELDS",
    "commit_args",
    "content_text",
    "dumps",
    "epoch_micros",
    "record_values",
    "time_score",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_MUTABLE = frozenset({"status", "pinned", "evicted_by", "revision_count"})
_STAMPS = ("created_at", "from_call", "version")  # Changeset.stamps, in its order
NOT_IN_RECORD = ("session_id", "agent_id", "message", *sorted(_MUTABLE))
"""The entry fields a record does not hold, in the order a history entry is built with them first."""
RECORD_FIELDS = tuple(name for name in HistoryEntry.model_fields if name not in NOT_IN_RECORD)
"""The entry fields an entry's record holds, in the record's order."""
_RECORD_ORDER = (*(name for name in RECORD_FIELDS if name not in _STAMPS), *_STAMPS)
_APPENDED = ("seq", "tokens")  # from the appended entry; the stamps from the commit; the rest hold their defaults
_APPENDED_DEFAULTS = {
    name: HistoryEntry.model_fields[name].get_default(call_default_factory=True)
    for name in _RECORD_ORDER
    if name not in _APPENDED and name not in _STAMPS
}
for _name in _STAMPS:
    if _name not in RECORD_FIELDS:
        raise TypeError(f"HistoryEntry lacks the stamp {_name}")
if {"message_id", "role", "metadata"} & set(RECORD_FIELDS):  # the message's own fields lead the record
    raise TypeError("a HistoryEntry field shares its name with a field of the message's record")


def record_values(entry: HistoryEntry) -> dict[str, Any]:
    """The record fields of ``entry``, JSON-ready, in the stored order (see :data:`RECORD_FIELDS`)."""
    return {name: _json_value(getattr(entry, name)) for name in _RECORD_ORDER}


def _json_value(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> str:
    """Compact JSON (ASCII-escaped, so any Python string, lone surrogates included, survives).

    Raises:
        InvalidMessage: ``value`` holds something JSON cannot represent (NaN and infinity
            included, as on every other backend).
    """
    text = frozen_text(value, compact=True)  # the same text, without building an encoder per call
    if text is not None:
        return text
    try:  # refused there (or a cycle): the standard encoder raises the standard error
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"value cannot be stored as JSON: {exc}") from exc


def content_text(content: Any) -> str:
    """:func:`dumps` of the JSON-safe copy of a message's content or metadata (bytes tagged; built only if needed).

    Raises:
        InvalidMessage: ``content`` holds something JSON cannot represent.
    """
    try:
        return dumps_encoded(content, compact=True)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"value cannot be stored as JSON: {exc}") from exc


_MICROSECOND = timedelta(microseconds=1)


def epoch_micros(moment: datetime) -> int:
    """Microseconds since the epoch: exact as a sorted-set score (below 2**53)."""
    return (moment - _EPOCH) // _MICROSECOND


_EXACT = 2**53
"""Scores (µs from the epoch) a double holds exactly lie strictly within this either side of 0."""


def time_score(moment: datetime) -> str:
    """``moment`` (naive: UTC) in epoch µs as an exact sorted-set score, or ``''`` when a double cannot hold it.

    That is before 1685 or after 2255: an index leaves such a row out (see
    :mod:`~contextledger.stores.redis.summary_index`).
    """
    micros = epoch_micros(moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC))
    return str(micros) if -_EXACT < micros < _EXACT else ""


def check_id(kind: str, value: str) -> str:
    """``value``, an id sent to the server, if it is valid Unicode text.

    Raises:
        InvalidMessage: ``value`` holds a lone surrogate (it cannot be sent as UTF-8).
    """
    if value.isascii():  # the ids of nearly every commit: nothing to encode to know
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMessage(f"{kind} {value!r} is not valid Unicode text") from exc
    return value


# The record's text between the message's fields and the stamps: every default, by name.
_DEFAULTS_TEXT = "".join(f",{_quoted(name)}:{dumps(value)}" for name, value in _APPENDED_DEFAULTS.items())
_ROLE_TEXT: dict[str, str] = {}  # role -> ',"role":"<role>","metadata":', made once per role


def _role_text(role: str) -> str:
    text = _ROLE_TEXT.get(role)
    if text is None:
        text = f',"role":{_quoted(role)},"metadata":'
        if type(role) is str and len(_ROLE_TEXT) < 16:  # the few roles there are
            _ROLE_TEXT[role] = text
    return text


def _number(value: Any) -> str:
    """An int's JSON text (``str`` is ``json.dumps`` for an exact int); anything else through :func:`dumps`."""
    return str(value) if type(value) is int else dumps(value)


def commit_args(changeset: Changeset, now: datetime) -> list[str]:
    """The ARGV of the commit script for ``changeset`` (see ``scripts.COMMIT``), but its trailing part.

    The trailing part (:func:`~contextledger.stores.redis.events.tail_args`) is added by
    the caller. An appended message's record is ``dumps`` of ``{"message_id", "role",
    "metadata" (bytes tagged), "seq", "tokens", the other record fields' defaults, the
    stamps}``, written from pieces (see the module docstring).

    Raises:
        InvalidMessage: An appended message or revision cannot be stored as JSON, or an
            id is not valid Unicode. Raised before anything is sent.
    """
    cs = changeset
    stamp = now.isoformat()
    reduction = cs.reduction
    summary = cs.summary
    args = [
        str(cs.expected_version),
        stamp,
        str(epoch_micros(now)),
        session_id if (session_id := cs.session_id).isascii() else check_id("session_id", session_id),
        agent_id if (agent_id := cs.agent_id).isascii() else check_id("agent_id", agent_id),
        "" if reduction is None else reduction.reduction_id,
        "" if cs.model_call_count is None else str(cs.model_call_count),
        "" if cs.next_seq is None else str(cs.next_seq),
        "" if cs.manager_state is None else dumps(cs.manager_state),
        "" if cs.agent_state is None else dumps(cs.agent_state),
        str(len(cs.appends)),
        str(len(cs.evict)),
        str(len(cs.pins)),
        str(len(cs.revisions)),
        "0" if summary is None else "1",
        "0" if reduction is None else "1",
    ]
    if cs.appends:
        # the stamps are the same for every record of the commit: their text once, '{' dropped
        tail = _DEFAULTS_TEXT + "," + dumps(cs.stamps(stamp))[1:]
        append = args.append
        for entry in cs.appends:
            message = entry.message
            entry_id = entry.entry_id
            seq = entry.seq
            tokens = entry.tokens
            metadata = message.metadata
            content = message.content
            role = message.role
            append(entry_id if entry_id.isascii() else check_id("entry id", entry_id))
            # view_score(seq, summary=False), inline: four calls a turn
            append(str(seq * 2 + 1) if type(seq) is int else str(view_score(seq, summary=False)))
            append(
                f'{{"message_id":{_quoted(message.message_id)}{_ROLE_TEXT.get(role) or _role_text(role)}'
                f"{'{}' if not metadata and type(metadata) is FrozenDict else content_text(metadata)}"
                f',"seq":{seq if type(seq) is int else _number(seq)}'
                f',"tokens":{tokens if type(tokens) is int else _number(tokens)}{tail}'
            )
            text = frozen_text(content, compact=True) if type(content) is FrozenList else None
            # what content_text returns for it, without its two calls (bytes in it: tagged there)
            append(text if text is not None and _BYTES_TAG not in text else content_text(content))
    if cs.evict:
        args += [check_id("entry id", entry_id) for entry_id in cs.evict]
    for entry_id, pinned in cs.pins.items():
        args += [check_id("entry id", entry_id), "1" if pinned else "0"]
    reduction_id = reduction.reduction_id if reduction is not None else None
    for rev in cs.revisions:
        row = {
            "session_id": cs.session_id,
            "agent_id": cs.agent_id,
            "message_id": rev.message_id,
            "reason": rev.reason,
            "reduction_id": reduction_id,
            "created_at": stamp,
        }
        revised_tokens = "" if rev.tokens is None else str(rev.tokens)
        args += [check_id("message id", rev.message_id), revised_tokens, content_text(rev.content), dumps(row)]
    if summary is not None:
        args += [
            check_id("summary id", summary.summary_id),
            str(view_score(summary.seq, summary=True)),
            "1" if summary.status == "active" else "0",
            summary.model_dump_json(),
            time_score(summary.created_at),
            str(len(summary.replaces)),
            *(check_id("entry id", r) for r in summary.replaces),
        ]
    if reduction is not None:
        args += [reduction.model_dump_json(), reduction.trigger]
    args.append(str(len(cs.restore)))
    for entry in cs.restore:
        is_summary = entry.kind == "summary"
        score = str(view_score(entry.seq, summary=is_summary))
        args += [check_id("entry id", entry.entry_id), "s" if is_summary else "m", score]
    return args
