"""The invariants one conversation's records hold, checked before an import or a copy writes anything.

A ledger's own records always hold them; a file may not (it was edited, truncated,
crafted). :func:`check_conversation` refuses, with
:class:`~contextledger.errors.InvalidExport` naming the record and the field, whatever
would corrupt the target or fail half-way in a store:

* every record belongs to the conversation, and its ids are ids (at most 255 characters;
  with ``strict_ids`` the grammar of :mod:`contextledger.model.ids`: no markup, no control
  characters);
* message seqs are unique, not negative, and below ``next_seq``; entry, summary and
  reduction ids are unique;
* every reference names a record of the conversation (or an erased or pruned entry's
  tombstone): ``evicted_by`` a reduction, a summary's ``replaces``, ``supersedes`` and
  ``superseded_by`` entries, a reduction's evicted, revised and restored entries and its
  summary, a revision's message and reduction, a pin's entry;
* an active entry has no ``evicted_by`` and an evicted one names its reduction; an
  entry's ``pinned`` is its message's pin flag (``metadata.custom.pinned``);
* counts and versions are not negative and fit every backend's columns (tokens and
  counts below 2**31, seqs, versions and calls below 2**53), a record's version is at
  most the conversation's, and no reduction counts more model calls than the conversation;
* timestamps carry a timezone and fall within the years 1-9999 in UTC; names (strategy,
  summarizer, pin source, revision reason) fit their columns and hold no control
  character; every text is valid Unicode, and host and manager state are plain JSON no
  deeper than :data:`~contextledger.model.jsonvalues.MAX_DEPTH`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from contextledger.errors import InvalidExport, InvalidMessage
from contextledger.model.ids import id_problem, name_problem
from contextledger.model.jsonvalues import MAX_ID_LENGTH, check_plain_json, normalize_json
from contextledger.model.records import (
    ConversationState,
    HistoryEntry,
    PinEvent,
    Reduction,
    Revision,
    SummaryEntry,
    Tombstone,
    record_json,
)

if TYPE_CHECKING:
    from pydantic import BaseModel


__all__ = ["MAX_COUNT", "MAX_SEQ", "Records", "check_conversation"]


class Records(Protocol):
    """One conversation's records (a :class:`~contextledger.model.bundle.ConversationRecords`), named, not imported."""

    @property
    def state(self) -> ConversationState:
        """The conversation state."""
        ...

    @property
    def messages(self) -> tuple[HistoryEntry, ...]:
        """Every message entry."""
        ...

    @property
    def summaries(self) -> tuple[SummaryEntry, ...]:
        """Every summary."""
        ...

    @property
    def reductions(self) -> tuple[Reduction, ...]:
        """Every reduction."""
        ...

    @property
    def revisions(self) -> tuple[Revision, ...]:
        """Every revision."""
        ...

    @property
    def pins(self) -> tuple[PinEvent, ...]:
        """Every pin event."""
        ...

    @property
    def tombstones(self) -> tuple[Tombstone, ...]:
        """Every tombstone."""
        ...


MAX_COUNT = 2**31 - 1
"""Largest token count, revision number or message count (a 32-bit column on SQL)."""
MAX_SEQ = 2**53 - 1
"""Largest seq, version, call number or token total (exact as a Redis score and a Lua number)."""
_CHANGESET_ID_LENGTH = 64
_PIN_SOURCE_LENGTH = 32


class _Checker:
    """One conversation's records, checked record by record (each error names its record and field)."""

    def __init__(self, records: Records, strict_ids: bool) -> None:
        self.records = records
        self.strict = strict_ids
        self.where = f"conversation {records.state.session_id}/{records.state.agent_id}"
        self.version = records.state.version
        self.messages = {m.message.message_id for m in records.messages}
        self.summaries = {s.summary_id for s in records.summaries}
        self.reductions = {r.reduction_id for r in records.reductions}
        self.gone = {t.entry_id for t in records.tombstones}

    def fail(self, record: BaseModel, field: str | None, problem: str) -> InvalidExport:
        kind = type(record).__name__
        label = {"HistoryEntry": "message", "SummaryEntry": "summary", "ConversationState": "conversation"}
        name = label.get(kind, kind.lower().replace("pinevent", "pin"))
        key = _key_of(record)
        what = f"{name} {key!r}" if key is not None else name
        text = f"{self.where}: {what}: " + (f"{field} {problem}" if field else problem)
        return InvalidExport(text, field=field, record=record)

    def ident(self, record: BaseModel, field: str, value: Any, *, max_length: int = MAX_ID_LENGTH) -> None:
        if self.strict:
            problem = id_problem(value, max_length=max_length)
        elif not isinstance(value, str) or not value or len(value) > max_length:
            problem = id_problem(value, max_length=max_length)  # empty, too long: no store takes it
        else:
            problem = None
        if problem is not None:
            raise self.fail(record, field, problem)

    def name(self, record: BaseModel, field: str, value: Any, *, max_length: int = MAX_ID_LENGTH) -> None:
        problem = name_problem(value, max_length=max_length)
        if problem is not None:
            raise self.fail(record, field, problem)

    def count(self, record: BaseModel, field: str, value: int, top: int = MAX_COUNT) -> None:
        if value < 0:
            raise self.fail(record, field, f"is negative ({value})")
        if value > top:
            raise self.fail(record, field, f"is {value}, above the largest a store holds ({top})")

    def stamp(self, record: BaseModel, field: str) -> None:
        value = getattr(record, field)
        if not isinstance(value, datetime):
            return
        if value.tzinfo is None:
            raise self.fail(record, field, f"has no timezone ({value.isoformat()}); write it in UTC (+00:00)")
        try:
            value.astimezone(UTC)  # every store keeps UTC
        except OverflowError:
            raise self.fail(record, field, f"is {value.isoformat()}, outside the years 1-9999 in UTC") from None

    def at_most_version(self, record: BaseModel, version: int) -> None:
        self.count(record, "version", version, MAX_SEQ)
        if version > self.version:
            raise self.fail(record, "version", f"is {version}, after the conversation's version {self.version}")

    def refers(self, record: BaseModel, field: str, value: str | None, known: Iterable[set[str]], what: str) -> None:
        if value is None:
            return
        if not any(value in ids for ids in known):
            raise self.fail(record, field, f"names no {what} of the conversation ({value!r:.80})")

    def state_json(self, record: BaseModel, field: str, value: Any) -> None:
        if value is None:
            return
        try:
            normalize_json(value, field.replace("_", " "))
            check_plain_json(value, field.replace("_", " "))
        except InvalidMessage as exc:
            raise self.fail(record, field, str(exc).removeprefix(field.replace("_", " ")).strip()) from exc

    def run(self) -> None:
        records = self.records
        state = records.state
        self.ident(state, "session_id", state.session_id)
        self.ident(state, "agent_id", state.agent_id)
        if state.version < 1:
            raise self.fail(state, "version", f"must be >= 1, got {state.version}")
        for field in ("version", "model_call_count", "next_seq"):
            self.count(state, field, getattr(state, field), MAX_SEQ)
        for field in ("created_at", "updated_at"):
            self.stamp(state, field)
        self.state_json(state, "manager_state", state.manager_state)
        self.state_json(state, "agent_state", state.agent_state)
        self.owned()
        self.defined_ids()
        self.unique()
        for message in records.messages:
            self.message(message)
        for summary in records.summaries:
            self.summary(summary)
        for reduction in records.reductions:
            self.reduction(reduction)
        numbers: set[tuple[str, int]] = set()
        for revision in records.revisions:
            self.revision(revision, numbers)
        for pin in records.pins:
            self.pin(pin)
        for tombstone in records.tombstones:
            self.tombstone(tombstone)
        self.storable()

    def owned(self) -> None:
        records = self.records
        owned: list[HistoryEntry | SummaryEntry | Reduction | Revision | PinEvent | Tombstone] = [
            *records.messages,
            *records.summaries,
            *records.reductions,
            *records.revisions,
            *records.pins,
            *records.tombstones,
        ]
        state = records.state
        for record in owned:
            if (record.session_id, record.agent_id) != (state.session_id, state.agent_id):
                raise self.fail(record, None, f"belongs to {record.session_id}/{record.agent_id}")

    def defined_ids(self) -> None:
        """The ids records are known by, before any reference to them is followed (the error names the right line)."""
        for message in self.records.messages:
            self.ident(message, "message_id", message.message.message_id)
        for summary in self.records.summaries:
            self.ident(summary, "summary_id", summary.summary_id)
        for reduction in self.records.reductions:
            self.ident(reduction, "reduction_id", reduction.reduction_id)
        for tombstone in self.records.tombstones:
            self.ident(tombstone, "entry_id", tombstone.entry_id)

    def unique(self) -> None:
        seen: set[str] = set()
        for record, value in [
            *((m, m.message.message_id) for m in self.records.messages),
            *((s, s.summary_id) for s in self.records.summaries),
        ]:
            if value in seen:
                raise self.fail(record, "id", f"{value!r:.80}: entry id appears twice")
            seen.add(value)
        reductions: set[str] = set()
        for reduction in self.records.reductions:
            if reduction.reduction_id in reductions:
                raise self.fail(
                    reduction, "reduction_id", f"{reduction.reduction_id!r:.80}: reduction id appears twice"
                )
            reductions.add(reduction.reduction_id)
        seqs: set[int] = set()
        for message in self.records.messages:
            if message.seq in seqs:
                raise self.fail(message, "seq", f"{message.seq} is the seq of another message")
            seqs.add(message.seq)

    def message(self, entry: Any) -> None:
        self.ident(entry, "message_id", entry.message.message_id)
        self.count(entry, "seq", entry.seq, MAX_SEQ)
        if entry.seq >= self.records.state.next_seq:
            raise self.fail(
                entry, "seq", f"{entry.seq} is not below the conversation's next_seq {self.records.state.next_seq}"
            )
        self.count(entry, "tokens", entry.tokens)
        self.count(entry, "revision_count", entry.revision_count)
        self.count(entry, "from_call", entry.from_call, MAX_SEQ)
        self.at_most_version(entry, entry.version)
        self.stamp(entry, "created_at")
        if entry.pinned != entry.message.pinned:  # the flag is the message's metadata.custom.pinned
            raise self.fail(
                entry, "pinned", f"is {entry.pinned} but the message's metadata says {entry.message.pinned}"
            )
        self.evicted(entry)

    def evicted(self, entry: Any) -> None:
        if entry.status == "active" and entry.evicted_by is not None:
            raise self.fail(entry, "evicted_by", f"is set ({entry.evicted_by!r:.80}) on an active entry")
        if entry.status == "evicted" and entry.evicted_by is None:
            raise self.fail(entry, "evicted_by", "is missing: an evicted entry names the reduction that evicted it")
        self.refers(entry, "evicted_by", entry.evicted_by, [self.reductions], "reduction")

    def summary(self, summary: Any) -> None:
        entries = [self.messages, self.summaries, self.gone]
        self.ident(summary, "summary_id", summary.summary_id)
        self.count(summary, "seq", summary.seq, MAX_SEQ)
        self.count(summary, "tokens", summary.tokens)
        self.name(summary, "summarizer", summary.summarizer)
        self.stamp(summary, "created_at")
        self.refers(summary, "reduction_id", summary.reduction_id, [self.reductions], "reduction")
        if not summary.replaces:
            raise self.fail(summary, "replaces", "is empty: a summary replaces at least one entry")
        for replaced in summary.replaces:
            if replaced == summary.summary_id:
                raise self.fail(summary, "replaces", "names the summary itself")
            self.refers(summary, "replaces", replaced, entries, "entry")
        self.refers(summary, "supersedes", summary.supersedes, [self.summaries, self.gone], "summary")
        self.refers(summary, "superseded_by", summary.superseded_by, [self.summaries, self.gone], "summary")
        if summary.status == "active" and summary.evicted_by is not None:
            raise self.fail(summary, "evicted_by", f"is set ({summary.evicted_by!r:.80}) on an active summary")
        self.refers(summary, "evicted_by", summary.evicted_by, [self.reductions], "reduction")

    def reduction(self, reduction: Any) -> None:
        entries = [self.messages, self.summaries, self.gone]
        self.ident(reduction, "reduction_id", reduction.reduction_id)
        self.name(reduction, "strategy", reduction.strategy)
        self.stamp(reduction, "created_at")
        for field in ("messages_before", "messages_after"):
            self.count(reduction, field, getattr(reduction, field))
        for field in ("tokens_before", "tokens_after", "from_call"):
            self.count(reduction, field, getattr(reduction, field), MAX_SEQ)
        self.count(reduction, "model_call_count", reduction.model_call_count, MAX_SEQ)
        if reduction.model_call_count > self.records.state.model_call_count:
            raise self.fail(
                reduction,
                "model_call_count",
                f"is {reduction.model_call_count}, more than the conversation's {self.records.state.model_call_count}",
            )
        self.at_most_version(reduction, reduction.version)
        for field in ("evicted", "restored"):
            for entry_id in getattr(reduction, field):
                self.refers(reduction, field, entry_id, entries, "entry")
        for entry_id in reduction.revised:
            self.refers(reduction, "revised", entry_id, [self.messages, self.gone], "message")
        self.refers(reduction, "summary_id", reduction.summary_id, [self.summaries, self.gone], "summary")

    def revision(self, revision: Any, numbers: set[tuple[str, int]]) -> None:
        if revision.message_id not in self.messages:
            raise self.fail(revision, "message_id", f"names unknown message {revision.message_id!r:.80}")
        if revision.number < 1:
            raise self.fail(revision, "number", f"must be >= 1, got {revision.number}")
        self.count(revision, "number", revision.number)
        if (revision.message_id, revision.number) in numbers:
            raise self.fail(revision, "number", f"{revision.number}: a revision number repeats")
        numbers.add((revision.message_id, revision.number))
        self.name(revision, "reason", revision.reason)
        self.refers(revision, "reduction_id", revision.reduction_id, [self.reductions], "reduction")
        self.stamp(revision, "created_at")
        try:
            normalize_json(list(revision.original), "original")
        except InvalidMessage as exc:
            raise self.fail(revision, "original", str(exc).removeprefix("original").strip()) from exc

    def pin(self, pin: Any) -> None:
        self.ident(pin, "entry_id", pin.entry_id)
        self.refers(pin, "entry_id", pin.entry_id, [self.messages, self.gone], "message")
        self.name(pin, "source", pin.source, max_length=_PIN_SOURCE_LENGTH)
        self.ident(pin, "changeset_id", pin.changeset_id, max_length=_CHANGESET_ID_LENGTH)
        self.count(pin, "from_call", pin.from_call, MAX_SEQ)
        self.at_most_version(pin, pin.version)
        self.stamp(pin, "at")

    def tombstone(self, tombstone: Any) -> None:
        self.ident(tombstone, "entry_id", tombstone.entry_id)
        self.stamp(tombstone, "erased_at")
        for summary_id in tombstone.summaries:
            self.refers(tombstone, "summaries", summary_id, [self.summaries, self.gone], "summary")

    def storable(self) -> None:
        """Every text of every record is valid Unicode and every number finite (what every store writes)."""
        records = self.records
        for record in (
            records.state,
            *records.messages,
            *records.summaries,
            *records.reductions,
            *records.revisions,
            *records.pins,
            *records.tombstones,
        ):
            data = record_json(record)
            try:
                json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8")
            except (TypeError, ValueError) as exc:
                field = next((k for k, v in data.items() if not _storable(v)), None)
                problem = "holds a lone surrogate (not valid Unicode text)"
                if isinstance(exc, ValueError) and not isinstance(exc, UnicodeError):
                    problem = "holds NaN or infinity (not JSON)"
                raise self.fail(record, field, problem if field else f"cannot be stored: {problem}") from exc


def _storable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError):
        return False
    return True


def _key_of(record: Any) -> str | None:
    for field in ("summary_id", "reduction_id", "entry_id", "message_id"):
        value = getattr(record, field, None)
        if isinstance(value, str):
            return value[:80]
    message = getattr(record, "message", None)
    return getattr(message, "message_id", None)


def check_conversation(records: Records, *, strict_ids: bool = False) -> None:
    """Check ``records`` against the ledger's invariants (see the module docstring).

    Args:
        records: One conversation's records.
        strict_ids: Hold ids to the grammar of :mod:`contextledger.model.ids` (what a file
            import does); without it, ids only need to fit the stores.

    Raises:
        InvalidExport: The first record that breaks one, with its ``field`` and ``record``.
    """
    _Checker(records, strict_ids).run()
