"""What a summary covers according to the ledger itself, and the header a summary states.

The ledger keeps every message (``history``, evicted ones included) and each summary
names the entries it replaced, earlier summaries among them; so what a summary covers
is a plain walk over those rows, independent of how the summarizing manager counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contextledger.model.records import HistoryEntry
from contextledger.stores.capabilities import CompleteStore


@dataclass(frozen=True)
class Covered:
    """Counts of what a summary covers.

    Attributes:
        messages: Messages covered, through earlier summaries too.
        prompts: User prompts among them (user messages that are not only tool results).
        calls: Model answers among them (an assistant message that does not follow another).
        first_turn: The oldest turn (prompts so far in the ledger) of a covered message, if any.
        last_turn: The newest one.
    """

    messages: int
    prompts: int
    calls: int
    first_turn: int | None
    last_turn: int | None


def is_prompt(entry: HistoryEntry) -> bool:
    """A user message that is not only tool results."""
    m = entry.message
    return m.role == "user" and any("toolResult" not in block for block in m.content)


def covered_ids(store: CompleteStore, session_id: str, agent_id: str, summary_id: str) -> set[str]:
    """The message ids ``summary_id`` covers, through the summaries it replaced."""
    summaries = {s.summary_id: s for s in store.summaries(session_id, agent_id)}
    out: set[str] = set()
    pending = [summary_id]
    while pending:
        for entry_id in summaries[pending.pop()].replaces:
            if entry_id in summaries:
                pending.append(entry_id)
            else:
                out.add(entry_id)
    return out


def covered(store: CompleteStore, session_id: str, agent_id: str, summary_id: str) -> Covered:
    """What ``summary_id`` covers, counted over the whole history in ledger order."""
    ids = covered_ids(store, session_id, agent_id, summary_id)
    turn, previous_assistant = 0, False
    messages = prompts = calls = 0
    turns: list[int] = []
    for entry in store.history(session_id, agent_id):
        assistant = entry.message.role == "assistant"
        prompt = is_prompt(entry)
        turn += prompt
        if entry.message.message_id in ids:
            messages += 1
            prompts += prompt
            calls += assistant and not previous_assistant
            if turn:
                turns.append(turn)
        previous_assistant = assistant
    return Covered(messages, prompts, calls, min(turns, default=None), max(turns, default=None))


HEADER = re.compile(
    r"^Summary of (?P<m>[\d,]+) messages?(?: from turns? (?P<a>[\d,]+)(?:-(?P<b>[\d,]+))?)?"
    r" \((?P<p>[\d,]+) user prompts?, (?P<c>[\d,]+) model calls?[,)]"
)


def stated(content: str) -> Covered | None:
    """The counts a summary's header states, or ``None`` when it states none."""
    match = HEADER.match(content)
    if match is None:
        return None

    def number(key: str) -> int | None:
        value = match[key]
        return int(value.replace(",", "")) if value else None

    first = number("a")
    last = number("b") or first
    return Covered(number("m") or 0, number("p") or 0, number("c") or 0, first, last)
