"""Moving a ledger: a conversation's complete records, exported and loaded back exactly.

:class:`ConversationRecords` is everything one (session, agent) conversation holds:
its state (version, ``model_call_count``, manager and host state, timestamps), every
message entry (active or evicted, with its id, seq, tokens, time-travel stamps and the
reduction that evicted it), every summary (the superseded ones too), every reduction
(a fork's origin is one), every revision, every pin event and every tombstone.

:func:`read_conversation` reads them from any store in one canonical order;
:func:`write_conversation` writes them to any store in one atomic commit through
:meth:`~contextledger.stores.base.LedgerStore.import_conversation`, and is idempotent:
when the target conversation already holds exactly these records nothing is written,
when it holds different ones :class:`~contextledger.errors.ConversationExists` is raised
and nothing is written. :func:`copy_sessions` moves sessions between two stores with it.

The export format (``contextledger export``) is JSON lines, one record per line, each
with a ``type``: ``conversation``, ``message``, ``summary``, ``reduction``,
``revision``, ``pin`` and ``tombstone`` (see :func:`conversation_lines` and
:func:`records_from_lines`). What does not move: the exactly-once commit log (the ids of
the changesets that produced each version) -- a commit in flight against the source is
resolved against the source, never against a copy.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

from contextledger.errors import (
    ConcurrencyConflict,
    ConversationExists,
    InvalidExport,
    InvalidMessage,
    SessionNotFound,
)
from contextledger.model.bundle import ConversationRecords, check_records
from contextledger.model.ids import id_problem
from contextledger.model.messages import Message, decode_blocks
from contextledger.model.records import (
    ConversationState,
    HistoryEntry,
    PinEvent,
    Reduction,
    Revision,
    SummaryEntry,
    Tombstone,
    pin_positions,
    record_json,
)
from contextledger.stores.capabilities import ERASURE, HISTORY, SESSIONS, TRANSFER

if TYPE_CHECKING:
    from contextledger.stores.base import LedgerStore

__all__ = [
    "LINE_TYPES",
    "ConversationRecords",
    "CopyReport",
    "ImportOutcome",
    "check_records",
    "conversation_lines",
    "copy_sessions",
    "dump_lines",
    "import_lines",
    "json_line",
    "list_sessions",
    "read_conversation",
    "record_json",
    "records_from_lines",
    "write_conversation",
]

logger = logging.getLogger(__name__)

ImportOutcome = Literal["imported", "unchanged"]
"""What :func:`write_conversation` did: wrote the conversation, or found it already there."""

LINE_TYPES = ("conversation", "message", "summary", "reduction", "revision", "pin", "tombstone")
"""The ``type`` of each export line, in the order a conversation's lines are written."""

_READ_ATTEMPTS = 5


# -- reading and writing through any store ---------------------------------------------------


def read_conversation(store: LedgerStore, session_id: str, agent_id: str) -> ConversationRecords | None:
    """Every record of one conversation, in canonical order, or ``None`` when it does not exist.

    The reads are several queries; they are retried (a bounded number of times) until the
    conversation's version is the same before and after them, so the records are one
    committed state.

    Raises:
        ConcurrencyConflict: The conversation kept changing while it was read.
    """
    for _ in range(_READ_ATTEMPTS):
        before = store.load(session_id, agent_id)
        if before is None:
            return None
        records = ConversationRecords(
            state=before.state,
            messages=tuple(HISTORY.of(store, "transfer").history(session_id, agent_id)),
            summaries=tuple(HISTORY.of(store, "transfer").summaries(session_id, agent_id)),
            reductions=tuple(HISTORY.of(store, "transfer").reductions(session_id, agent_id)),
            revisions=tuple(HISTORY.of(store, "transfer").revisions(session_id, agent_id)),
            pins=tuple(HISTORY.of(store, "transfer").pin_history(session_id, agent_id)),
            tombstones=tuple(ERASURE.of(store, "transfer").tombstones(session_id, agent_id)),
        )
        after = store.load(session_id, agent_id)
        if after is not None and after.state.version == before.state.version:
            return records.canonical()
    raise ConcurrencyConflict(
        f"session_id={session_id} agent_id={agent_id}: the conversation kept changing while it was read"
    )


def write_conversation(store: LedgerStore, records: ConversationRecords, *, strict_ids: bool = True) -> ImportOutcome:
    """Write ``records`` to ``store`` in one atomic commit, exactly as they are.

    Idempotent: when the conversation already exists holding exactly these records,
    nothing is written and ``"unchanged"`` is returned.

    Args:
        store: The target.
        records: One conversation's records.
        strict_ids: Hold every id to the id grammar (:mod:`contextledger.model.ids`), as an import
            does; a copy between ledgers passes ``False`` (its ids are the source's).

    Raises:
        InvalidExport: The records are inconsistent (see :meth:`ConversationRecords.check`)
            or an id breaks the grammar (nothing is written).
        ConversationExists: The conversation exists with different records (nothing is written).
        InvalidMessage: A value cannot be stored as JSON (nothing is written).
    """
    records = records.canonical()
    check_records(records, strict_ids=strict_ids)
    if TRANSFER.of(store, "transfer").import_conversation(records):
        logger.info(
            "session_id=<%s>, agent_id=<%s>, messages=<%d>, version=<%d> | imported conversation",
            records.session_id,
            records.agent_id,
            len(records.messages),
            records.state.version,
        )
        return "imported"
    existing = read_conversation(store, records.session_id, records.agent_id)
    if existing is not None and conversation_lines(existing) == conversation_lines(records):
        logger.debug("session_id=<%s>, agent_id=<%s> | already imported", records.session_id, records.agent_id)
        return "unchanged"
    raise ConversationExists(
        f"session_id={records.session_id} agent_id={records.agent_id}: the target already holds this conversation"
        " with different records (delete it first to replace it)"
    )


def import_lines(store: LedgerStore, lines: Iterable[str]) -> list[tuple[ConversationRecords, ImportOutcome]]:
    """Load a whole export into ``store``: check everything first, then write each conversation atomically.

    Nothing is written unless the whole file is valid (:func:`records_from_lines`) and no
    conversation in it is already held with different records; then each conversation is
    one commit (:func:`write_conversation`), and one already held exactly is left as it is.

    Raises:
        InvalidExport: The file is wrong somewhere (the error names the line and field).
        ConversationExists: The store holds one of the conversations with different records.
    """
    conversations = records_from_lines(lines)
    for records in conversations:  # refuse before the first write
        existing = read_conversation(store, records.session_id, records.agent_id)
        if existing is not None and conversation_lines(existing) != conversation_lines(records):
            raise ConversationExists(
                f"{store.url} already holds {records.session_id}/{records.agent_id} with different records;"
                " nothing was imported"
            )
    return [(records, write_conversation(store, records)) for records in conversations]


@dataclass(frozen=True)
class CopyReport:
    """What :func:`copy_sessions` did, per conversation: ``(session_id, agent_id, outcome)``."""

    conversations: tuple[tuple[str, str, ImportOutcome], ...]

    def count(self, outcome: ImportOutcome) -> int:
        """How many conversations had ``outcome``."""
        return sum(1 for c in self.conversations if c[2] == outcome)


def list_sessions(store: LedgerStore, page: int = 500) -> list[str]:
    """Every session id of ``store`` (paged through :meth:`LedgerStore.sessions`)."""
    out: list[str] = []
    seen: set[str] = set()
    offset = 0
    while True:
        infos = SESSIONS.of(store, "transfer").sessions(limit=page, offset=offset)
        for info in infos:
            if info.session_id not in seen:
                seen.add(info.session_id)
                out.append(info.session_id)
        if len(infos) < page:
            return out
        offset += page


def copy_sessions(
    source: LedgerStore,
    target: LedgerStore,
    session_ids: Iterable[str] | None = None,
    *,
    on_conversation: Callable[[str, str, ImportOutcome], None] | None = None,
) -> CopyReport:
    """Copy sessions (default: all) from ``source`` to ``target``, each conversation one atomic commit.

    Idempotent: copying again changes nothing. ``on_conversation`` is called after each
    conversation (for a progress bar).

    Raises:
        SessionNotFound: A session named in ``session_ids`` is not in ``source``.
        ConversationExists: The target holds one of the conversations with different
            records (the conversations copied before it stay copied).
    """
    ids = list(session_ids) if session_ids is not None else list_sessions(source)
    done: list[tuple[str, str, ImportOutcome]] = []
    for session_id in ids:
        agents = HISTORY.of(source, "copy").agents(session_id)
        if not agents and session_ids is not None:
            raise SessionNotFound(f"no session {session_id!r} in {source.url}")
        for agent_id in agents:
            records = read_conversation(source, session_id, agent_id)
            if records is None:  # deleted while copying
                continue
            outcome = write_conversation(target, records, strict_ids=False)
            done.append((session_id, agent_id, outcome))
            if on_conversation is not None:
                on_conversation(session_id, agent_id, outcome)
    return CopyReport(tuple(done))


# -- the export format -----------------------------------------------------------------------


def conversation_lines(records: ConversationRecords) -> list[dict[str, Any]]:
    """The export lines of one conversation (JSON-safe dicts, each with its ``type``), in canonical order."""
    records = records.canonical()
    lines: list[dict[str, Any]] = [{"type": "conversation", **record_json(records.state)}]
    groups: list[tuple[str, Iterable[BaseModel]]] = [
        ("message", records.messages),
        ("summary", records.summaries),
        ("reduction", records.reductions),
        ("revision", records.revisions),
        ("pin", records.pins),
        ("tombstone", records.tombstones),
    ]
    for kind, rows in groups:
        lines += [{"type": kind, **record_json(row)} for row in rows]
    return lines


def _message_entry(data: Mapping[str, Any]) -> HistoryEntry:
    message = data.get("message")
    if not isinstance(message, Mapping):
        raise InvalidExport(f"message is {type(message).__name__}, not an object", field="message")
    problem = id_problem(message.get("message_id"))
    if problem is not None:
        raise InvalidExport(f"message_id {problem}", field="message.message_id")
    try:
        parsed = Message.from_record(message)
    except (InvalidMessage, KeyError, TypeError, ValueError) as exc:
        raise InvalidExport(f"invalid message: {' '.join(str(exc).split())[:300]}", field="message") from exc
    return HistoryEntry.model_validate({**data, "message": parsed})


def _revision(data: Mapping[str, Any]) -> Revision:
    original = data.get("original")
    if not isinstance(original, list):
        raise InvalidExport(f"original is {type(original).__name__}, not a list of blocks", field="original")
    return Revision.model_validate({**data, "original": decode_blocks(original)})


_PARSERS: dict[str, Callable[[Mapping[str, Any]], BaseModel]] = {
    "conversation": ConversationState.model_validate,
    "message": _message_entry,
    "summary": SummaryEntry.model_validate,
    "reduction": Reduction.model_validate,
    "revision": _revision,
    "pin": PinEvent.model_validate,
    "tombstone": Tombstone.model_validate,
}
_FIELDS = {
    "message": "messages",
    "summary": "summaries",
    "reduction": "reductions",
    "revision": "revisions",
    "pin": "pins",
    "tombstone": "tombstones",
}


def records_from_lines(lines: Iterable[str]) -> list[ConversationRecords]:
    """Parse an export (JSON lines) into the records of each conversation it holds, in file order.

    The whole file is read and checked before this returns, so an import that writes its
    result writes nothing from a file that is wrong anywhere: every line must hold a valid
    record (finite numbers, text that is valid Unicode, JSON nested at most
    :data:`~contextledger.model.jsonvalues.MAX_DEPTH` deep in messages and state), every id must
    follow the id grammar (:mod:`contextledger.model.ids`), and every conversation must hold the
    ledger's invariants (:mod:`contextledger.history.consistency`: unique seqs below ``next_seq``,
    references that name records of the conversation, counts that are not negative...).

    Blank lines are skipped. A file written before pin and tombstone lines existed loads
    with none of them; pin lines written before pin events had a ``position`` get their
    index among the lines of their changeset.

    Raises:
        InvalidExport: The first problem, naming its line (``.line``) and, where it is one
            field of a record, the field (``.field``).
    """
    states: dict[tuple[str, str], ConversationState] = {}
    rows: dict[tuple[str, str], dict[str, list[BaseModel]]] = {}
    line_of: dict[int, int] = {}  # id(record) -> its line, to name the line of a later check's error
    positioned = pin_positions()  # an export written before 0.3 has pin events without their position
    for number, line in _numbered(lines):
        data = _parse_line(number, line)
        kind = data.pop("type", None)
        if kind == "pin":
            data = positioned(data)
        parser = _PARSERS.get(kind) if isinstance(kind, str) else None
        if parser is None:
            raise InvalidExport(
                f"unknown record type {kind!r:.40} (expected one of {', '.join(LINE_TYPES)})", line=number, field="type"
            )
        try:
            record = parser(data)
        except InvalidExport as exc:
            raise InvalidExport(f"invalid {kind} record: {exc.detail}", line=number, field=exc.field) from exc
        except (ValidationError, InvalidMessage, KeyError, TypeError, ValueError, RecursionError) as exc:
            field = _first_field(exc)
            detail = " ".join(str(exc).split())[:300]
            raise InvalidExport(f"invalid {kind} record: {detail}", line=number, field=field) from exc
        line_of[id(record)] = number
        key = (getattr(record, "session_id"), getattr(record, "agent_id"))  # noqa: B009 - every record type has both
        if isinstance(record, ConversationState):
            if key in states:
                first = line_of[id(states[key])]
                raise InvalidExport(
                    f"conversation {key[0]!r:.80}/{key[1]!r:.80} appears twice (first on line {first})", line=number
                )
            states[key] = record
            rows.setdefault(key, {})
        else:
            rows.setdefault(key, {}).setdefault(_FIELDS[kind], []).append(record)
    out: list[ConversationRecords] = []
    for key, fields in rows.items():
        state = states.get(key)
        if state is None:
            first = min(line_of[id(r)] for values in fields.values() for r in values)
            raise InvalidExport(f"records of {key[0]!r:.80}/{key[1]!r:.80} have no conversation line", line=first)
        try:
            records = ConversationRecords(state=state, **{name: tuple(values) for name, values in fields.items()})
        except ValidationError as exc:  # pragma: no cover - the parsers validated each record
            raise InvalidExport(f"conversation {key[0]}/{key[1]}: {exc}") from exc
        try:
            check_records(records, strict_ids=True)
        except InvalidExport as exc:
            at = line_of.get(id(exc.record)) if exc.record is not None else None
            raise InvalidExport(exc.detail, line=at, field=exc.field, record=exc.record) from exc
        except InvalidMessage as exc:  # a value no store can hold as JSON: name the conversation's line
            raise InvalidExport(str(exc), line=line_of[id(state)]) from exc
        out.append(records)
    return out


def _parse_line(number: int, line: str) -> dict[str, Any]:
    """One line's JSON object; NaN, infinity and nesting deeper than the parser's stack are refused typed."""
    try:
        data = json.loads(line, parse_constant=_no_constant)
    except RecursionError as exc:
        raise InvalidExport("JSON nested too deep to read", line=number) from exc
    except ValueError as exc:
        raise InvalidExport(f"not JSON ({exc})", line=number) from exc
    if not isinstance(data, dict):
        raise InvalidExport(f"expected a JSON object, got {type(data).__name__}", line=number)
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _first_field(exc: BaseException) -> str | None:
    """The field a pydantic error is about (``seq``, ``message.role``...), if it names one."""
    if isinstance(exc, ValidationError):
        for error in exc.errors():
            location = [str(part) for part in error.get("loc", ())]
            if location:
                return ".".join(location)
    return None


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield number, line


def dump_lines(records: Iterable[ConversationRecords]) -> str:
    """The export text of ``records``: one compact JSON object per line.

    Every character ``str.splitlines`` would break a line at is escaped inside the JSON
    (``\u2028``, ``\u2029``, ``\u0085``; JSON escapes the control characters anyway), so
    the text splits into its records however it is read back, line by line.
    """
    return "".join(json_line(line) + "\n" for conv in records for line in conversation_lines(conv))


_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def json_line(document: Mapping[str, Any]) -> str:
    """One compact JSON line: UTF-8 text as it is, but no character that ends a line (see :func:`dump_lines`)."""
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    return text.translate(_LINE_BREAKS) if not text.isascii() else text
