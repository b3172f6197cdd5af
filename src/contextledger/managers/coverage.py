"""What a summary covers: messages, turns and model calls, counted from the ledger's order.

A summary replaces entries of the view, and an earlier summary among them brings
everything *it* covered. To say truthfully what a summary covers, each message handed
to a summarizer carries a :class:`Stamp` -- its turn (the user prompts up to and
including it), whether it opens a model call's answer, whether it sits beside a pinned
message -- and each earlier summary carries its :class:`Coverage`. Both ride in the
copy's ``metadata["custom"]["contextledger"]`` (:func:`stamp_of`,
:func:`summary_coverage`); :func:`coverage_of` adds them up. A summarizer of your own can
open its text with ``coverage_of(messages).header()``.

Where the stamps come from (:func:`ledger_facts`) is pure: the summarizing manager walks
the active view in ledger order (an entry's ``seq`` is its position among the messages
ever appended), and steps over each earlier summary with the :class:`SummaryRecord` it
kept in its committed state when it wrote that summary: the span of positions it
covers, the turn count at its end, and the stamps of the pinned messages left inside
it. Nothing is read from a store. Where the walk cannot account for a position -- a
message evicted without a summary, a summary whose record is not kept -- the turn
numbers after it are unknown (``None``) until the next summary with a record, and a
coverage says so rather than guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from contextledger.core.view import View
from contextledger.model.messages import Message
from contextledger.model.records import ViewEntry

__all__ = [
    "COVERAGE_KEY",
    "LEDGER_KEY",
    "STAMP_KEY",
    "SUMMARY_MARK",
    "Coverage",
    "LedgerFacts",
    "Stamp",
    "SummaryRecord",
    "coverage_of",
    "is_summary",
    "ledger_facts",
    "stamp_of",
    "stamped",
    "summary_coverage",
]

LEDGER_KEY = "contextledger"
"""The key under ``metadata["custom"]`` that holds what the ledger tells a summarizer."""
SUMMARY_MARK = "summary_of"
"""Key under ``metadata["custom"]["contextledger"]`` marking a message that renders an earlier summary."""
COVERAGE_KEY = "coverage"
"""Key under ``metadata["custom"]["contextledger"]`` holding an earlier summary's :class:`Coverage`."""
STAMP_KEY = "stamp"
"""Key under ``metadata["custom"]["contextledger"]`` holding a message's :class:`Stamp`."""

_FROZEN = ConfigDict(frozen=True, extra="forbid", defer_build=True)


@dataclass(frozen=True, slots=True)
class Stamp:
    """Where one message stands in its conversation.

    A plain dataclass: the walk makes one per message of the view on every summarizing
    plan (pydantic validates it where it is stored, in :class:`SummaryRecord`).

    Attributes:
        turn: The user prompts in the conversation up to and including this message
            (0 before the first prompt); ``None`` when the ledger cannot tell.
        answer: Whether the message opens a model call's answer (an assistant message
            that does not follow another assistant message).
        near_pin: Whether the message sits right beside a pinned message in the ledger.
    """

    turn: Annotated[int, Field(ge=0)] | None = None
    answer: bool = False
    near_pin: bool = False


_STAMP: TypeAdapter[Stamp] = TypeAdapter(Stamp)


class Coverage(BaseModel):
    """What a summary covers, earlier summaries it replaced included.

    Attributes:
        messages: Messages of the ledger it covers.
        prompts: User prompts among them.
        calls: Model calls whose answers it covers (a call that failed left no answer).
        first_turn: The oldest turn one of its messages belongs to (``None``: unknown, or none).
        last_turn: The newest turn one of its messages belongs to.
        numbered: Whether every covered message had a known turn (else no range is given).
        summaries: Earlier summaries folded in, transitively.
        unknown: Of those, summaries whose coverage was not recorded (then ``messages``,
            ``prompts`` and ``calls`` are lower bounds).
    """

    model_config = _FROZEN

    messages: int = Field(default=0, ge=0)
    prompts: int = Field(default=0, ge=0)
    calls: int = Field(default=0, ge=0)
    first_turn: int | None = Field(default=None, ge=1)
    last_turn: int | None = Field(default=None, ge=1)
    numbered: bool = True
    summaries: int = Field(default=0, ge=0)
    unknown: int = Field(default=0, ge=0)

    @property
    def exact(self) -> bool:
        """Whether the counts are exact (no earlier summary of unknown coverage)."""
        return self.unknown == 0

    def header(self) -> str:
        """One line saying what is covered.

        For example ``Summary of 12 messages from turns 3-6 (4 user prompts, 5 model calls):``;
        ``at least`` and ``N of unknown extent`` when an earlier summary's coverage was not
        recorded, no turn range when the turns are not numbered.
        """
        bound = "" if self.exact else "at least "
        text = f"Summary of {bound}{_count(self.messages, 'message')}"
        if self.first_turn is not None and self.last_turn is not None:
            if self.first_turn == self.last_turn:
                text += f" from turn {self.first_turn:,}"
            else:
                text += f" from turns {self.first_turn:,}-{self.last_turn:,}"
        details = [_count(self.prompts, "user prompt"), _count(self.calls, "model call")]
        if self.summaries:
            details.append("folding in " + _count(self.summaries, "earlier summary", "earlier summaries"))
        if self.unknown:
            details.append(f"{self.unknown:,} of unknown extent")
        return f"{text} ({', '.join(details)}):"


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


class SummaryRecord(BaseModel):
    """What the summarizing manager keeps of a summary it wrote, to walk past it later.

    Attributes:
        coverage: What the summary covers.
        first_seq: The ledger position of the oldest message it covers (or evicted with it).
        last_seq: The ledger position of the newest one.
        turn_after: User prompts in the conversation through ``last_seq`` (``None``: unknown).
        ends_in_answer: Whether the message at ``last_seq`` is an assistant message.
        holes: Messages inside the span that stayed in the view (pinned): their stamps.
    """

    model_config = _FROZEN

    coverage: Coverage
    first_seq: int = Field(ge=0)
    last_seq: int = Field(ge=0)
    turn_after: int | None = Field(default=None, ge=0)
    ends_in_answer: bool | None = None
    holes: dict[str, Stamp] = Field(default_factory=dict)


# -- what rides in a message copy's metadata ---------------------------------------------------


def _ledger_meta(message: Message) -> Mapping[str, Any] | None:
    custom = message.metadata.get("custom")
    ledger = custom.get(LEDGER_KEY) if isinstance(custom, Mapping) else None
    return ledger if isinstance(ledger, Mapping) else None


def is_summary(message: Message) -> bool:
    """Whether ``message`` is an earlier summary handed to a summarizer (see :data:`SUMMARY_MARK`)."""
    ledger = _ledger_meta(message)
    return ledger is not None and SUMMARY_MARK in ledger


def stamp_of(message: Message) -> Stamp | None:
    """The :class:`Stamp` a message handed to a summarizer carries, or ``None`` (none, or not valid)."""
    ledger = _ledger_meta(message)
    raw = ledger.get(STAMP_KEY) if ledger is not None else None
    if not isinstance(raw, Mapping):
        return None
    try:
        return _STAMP.validate_python(dict(raw))
    except ValidationError:
        return None


def summary_coverage(message: Message) -> Coverage | None:
    """The :class:`Coverage` of an earlier summary handed to a summarizer, or ``None`` when not recorded."""
    ledger = _ledger_meta(message)
    raw = ledger.get(COVERAGE_KEY) if ledger is not None and SUMMARY_MARK in ledger else None
    if not isinstance(raw, Mapping):
        return None
    try:
        return Coverage.model_validate(dict(raw))
    except ValidationError:
        return None


def stamped(entry: ViewEntry, facts: LedgerFacts | None = None) -> Message:
    """The message a summarizer is handed for ``entry``: a copy carrying its stamp or coverage.

    An earlier summary is marked as one (:func:`is_summary`) and carries its coverage
    when ``facts`` has a record of it; a message keeps its own metadata and gains its
    stamp when ``facts`` has one.
    """
    message = entry.message
    if entry.kind == "summary":
        record = facts.records.get(entry.entry_id) if facts is not None else None
        ledger: dict[str, Any] = {SUMMARY_MARK: entry.entry_id}
        if record is not None:
            ledger[COVERAGE_KEY] = record.coverage.model_dump(mode="json")
        return message.model_copy(update={"metadata": {"custom": {LEDGER_KEY: ledger}}})
    stamp = facts.stamps.get(entry.entry_id) if facts is not None else None
    if stamp is None:
        return message
    # A shallow merge: the copy the summarizer gets is made deep once, by summarize_texts.
    metadata = message.metadata
    custom = metadata.get("custom")
    custom = dict(custom) if isinstance(custom, Mapping) else {}
    own = custom.get(LEDGER_KEY)
    custom[LEDGER_KEY] = {**(own if isinstance(own, Mapping) else {}), STAMP_KEY: asdict(stamp)}
    return message.model_copy(update={"metadata": {**metadata, "custom": custom}})


def _is_prompt(message: Message) -> bool:
    return message.role == "user" and any("toolResult" not in block for block in message.content)


class _Tally:
    """Adds up what a sequence of messages and earlier summaries covers (the one place that counts)."""

    def __init__(self) -> None:
        self.messages = self.prompts = self.calls = self.summaries = self.unknown = 0
        self.numbered = True
        self.first: int | None = None
        self.last: int | None = None
        self.previous_assistant = False

    def summary(self, known: Coverage | None) -> None:
        """An earlier summary: it counts once, on top of what it folded in; unrecorded, it is unknown."""
        self.summaries += 1
        self.previous_assistant = False
        if known is None:
            self.unknown += 1
            self.numbered = False
            return
        self.messages += known.messages
        self.prompts += known.prompts
        self.calls += known.calls
        self.summaries += known.summaries
        self.unknown += known.unknown
        self.numbered = self.numbered and known.numbered
        self._turns(known.first_turn, known.last_turn)

    def message(self, message: Message, stamp: Stamp | None) -> None:
        """A message, with its stamp (without one: counted from the sequence, turns unknown)."""
        assistant = message.role == "assistant"
        self.messages += 1
        self.prompts += _is_prompt(message)
        self.calls += stamp.answer if stamp is not None else assistant and not self.previous_assistant
        if stamp is None or stamp.turn is None:
            self.numbered = False
        elif stamp.turn:
            self._turns(stamp.turn, stamp.turn)
        self.previous_assistant = assistant

    def _turns(self, first: int | None, last: int | None) -> None:
        if first is not None:
            self.first = first if self.first is None else min(self.first, first)
        if last is not None:
            self.last = last if self.last is None else max(self.last, last)

    def coverage(self) -> Coverage:
        numbered = self.numbered
        return Coverage(
            messages=self.messages,
            prompts=self.prompts,
            calls=self.calls,
            first_turn=self.first if numbered else None,
            last_turn=self.last if numbered else None,
            numbered=numbered,
            summaries=self.summaries,
            unknown=self.unknown,
        )


def coverage_of(messages: Sequence[Message]) -> Coverage:
    """What ``messages`` (as handed to a summarizer, in order) cover together.

    Each earlier summary counts for its :func:`summary_coverage` (or as one summary of
    unknown extent); each other message counts once, with its :func:`stamp_of`. A
    message without a stamp (a list built by hand) is counted from the list itself:
    a prompt is a user message that is not only tool results, an answer opens with an
    assistant message after a non-assistant one, and turns are not numbered.
    """
    tally = _Tally()
    for message in messages:
        if is_summary(message):
            tally.summary(summary_coverage(message))
        else:
            tally.message(message, stamp_of(message))
    return tally.coverage()


# -- the walk over the view, in ledger order -----------------------------------------------------


@dataclass(frozen=True)
class LedgerFacts:
    """Stamps of a view's messages, and the turn count after each entry (see :func:`ledger_facts`).

    Attributes:
        records: The records the walk used, by summary id.
        stamps: Message entry id -> its stamp.
        after: Entry id -> (turns through it, whether it ends in an assistant message);
            ``None`` where unknown.
        spans: Entry id -> the ledger positions it stands for (a message: its own seq;
            a summary: the span of its record, or up to its own seq when unrecorded).
    """

    records: Mapping[str, SummaryRecord]
    stamps: Mapping[str, Stamp]
    after: Mapping[str, tuple[int | None, bool | None]]
    spans: Mapping[str, tuple[int, int]]

    def record_for(self, view: View, replaces: Iterable[str], removed: Iterable[str]) -> SummaryRecord:
        """The record of a summary of ``replaces``, written by a reduction that removes ``removed``."""
        covered = [view[i] for i in sorted(i for i in (view.index_of(r) for r in replaces) if i is not None)]
        gone = {r for r in removed if r in self.spans} | {e.entry_id for e in covered}
        first = min(self.spans[r][0] for r in gone)
        newest = max(gone, key=lambda r: self.spans[r][1])
        last = self.spans[newest][1]
        turn_after, ends_in_answer = self.after[newest]
        holes = {
            e.entry_id: Stamp(self.stamps[e.entry_id].turn, self.stamps[e.entry_id].answer, False)
            for e in view
            if e.kind == "message" and e.entry_id not in gone and first < e.seq < last and e.entry_id in self.stamps
        }
        # Counted as coverage_of counts the stamped copies the summarizer is handed.
        tally = _Tally()
        for entry in covered:
            if entry.kind == "summary":
                record = self.records.get(entry.entry_id)
                tally.summary(record.coverage if record is not None else None)
            else:
                tally.message(entry.message, self.stamps.get(entry.entry_id))
        return SummaryRecord(
            coverage=tally.coverage(),
            first_seq=first,
            last_seq=last,
            turn_after=turn_after,
            ends_in_answer=ends_in_answer,
            holes=holes,
        )


def ledger_facts(view: View, records: Mapping[str, SummaryRecord]) -> LedgerFacts:
    """Walk ``view`` in ledger order and stamp each message (pure; see the module docstring).

    Ledger positions start at 0 and each appended message takes the next one, so the walk
    expects them in sequence; a summary with a record jumps past its span and restores
    the turn count it had there, one without a record (or a position nobody accounts
    for) leaves the turn numbers unknown until the next recorded summary.
    """
    pinned = {
        view[i].seq
        for group in view.groups
        if not view.pinned_indexes.isdisjoint(group)
        for i in group
        if view[i].kind == "message"
    }
    spans: dict[str, tuple[int, int]] = {}
    holes: dict[str, Stamp] = {}
    # A summary sorts before a message of equal seq (the view's own order rule).
    order: list[tuple[int, int, ViewEntry]] = []
    for entry in view:
        if entry.kind == "summary":
            record = records.get(entry.entry_id)
            if record is None:
                # It stands right before the oldest entry kept after what it covers; where
                # that span begins is not known.
                before = max(entry.seq - 1, 0)
                spans[entry.entry_id] = (before, before)
                order.append((entry.seq, 0, entry))
            else:
                spans[entry.entry_id] = (record.first_seq, record.last_seq)
                order.append((record.first_seq, 0, entry))
                holes.update(record.holes)
        else:
            spans[entry.entry_id] = (entry.seq, entry.seq)
            order.append((entry.seq, 1, entry))
    order.sort(key=lambda item: (item[0], item[1]))
    recorded = {e_id: span for e_id, span in spans.items() if e_id in records}

    def enclosed(entry_id: str, lo: int, hi: int) -> bool:
        """Whether positions ``lo..hi`` lie inside another recorded summary's span."""
        return any(a <= lo and hi <= b and (a, b) != (lo, hi) for e_id, (a, b) in recorded.items() if e_id != entry_id)

    stamps: dict[str, Stamp] = {}
    after: dict[str, tuple[int | None, bool | None]] = {}
    turn: int | None = 0
    expected: int | None = 0
    previous: bool | None = False
    for _, _, entry in order:
        if entry.kind == "summary":
            record = records.get(entry.entry_id)
            if record is None:
                turn, expected, previous = None, None, None
            elif enclosed(entry.entry_id, record.first_seq, record.last_seq):
                # A summary of a message that was left inside an older summary's span (a
                # pin since lifted): the older one accounts for those positions.
                after[entry.entry_id] = (record.turn_after, record.ends_in_answer)
                continue
            else:
                turn, expected, previous = record.turn_after, record.last_seq + 1, record.ends_in_answer
            after[entry.entry_id] = (turn, previous)
            continue
        seq, role = entry.seq, entry.message.role
        near = seq not in pinned and (seq - 1 in pinned or seq + 1 in pinned)
        if enclosed(entry.entry_id, seq, seq):
            # Left inside a summary's span: its stamp was taken when the summary was written.
            kept = holes.get(entry.entry_id) or Stamp(None, role == "assistant", False)
            stamps[entry.entry_id] = Stamp(kept.turn, kept.answer, near)
            after[entry.entry_id] = (kept.turn, role == "assistant")
            continue
        if seq != expected:
            turn, previous = None, None
        if turn is not None and entry.kind == "message" and _is_prompt(entry.message):
            turn += 1
        stamps[entry.entry_id] = Stamp(turn, role == "assistant" and previous is not True, near)
        expected, previous = seq + 1, role == "assistant"
        after[entry.entry_id] = (turn, previous)
    return LedgerFacts(records=dict(records), stamps=stamps, after=after, spans=spans)
