"""Properties of the offline summarizer under the summarizing manager, over random conversations.

Random turns (prompts, tool calls, answers of one or two assistant messages), pins and
unpins, reductions with random options, and undos of the latest reduction. After every
step, each active summary must state exactly what the ledger says it covers, stay within
its budget, and show the newest covered turn whenever the budget has room for one line.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Conversation, MemoryStore, Message, SummarizingConversationManager
from contextledger.errors import UndoConflict
from contextledger.managers.summarizers import ExtractiveSummarizer
from tests.managers.helpers import assert_valid_view
from tests.managers.truth import covered, stated

WORST_DROPPED_LINE = 60
"""Longer than any ``- ... N lines dropped (turns a-b)`` line of these conversations."""
LINE_PREFIX = 60
"""Longer than any line prefix (``- turn N, assistant (beside a pinned message): ``)."""


@dataclass(frozen=True)
class Turn:
    tools: int
    split_answer: bool  # the answer comes as two assistant messages (text, then a tool call)
    words: int


@dataclass(frozen=True)
class Pin:
    position: float
    pinned: bool


@dataclass(frozen=True)
class Reduce:
    ratio: float
    preserve: int
    turns_first: Turn | None  # a turn played right before, so most reductions have something to do


@dataclass(frozen=True)
class Unpin:
    """Unpin every pinned message (so a message a summary left inside its span can be summarized)."""


@dataclass(frozen=True)
class Undo:
    """Undo the latest reduction (the summary it superseded comes back), then maybe reduce again."""

    then: Reduce | None


turn_steps = st.builds(Turn, st.integers(0, 2), st.booleans(), st.integers(1, 30))
reduce_steps = st.builds(
    Reduce, st.sampled_from([0.1, 0.3, 0.5, 1.0]), st.integers(0, 6), st.one_of(st.none(), turn_steps)
)
steps = st.lists(
    st.one_of(
        turn_steps,
        reduce_steps,
        st.builds(Pin, st.floats(0, 0.999), st.booleans()),
        st.just(Unpin()),
        st.builds(Undo, st.one_of(st.none(), reduce_steps)),
    ),
    min_size=8,
    max_size=40,
)


def play_turn(conv: Conversation, n: int, turn: Turn) -> None:
    conv.append(Message.user(f"Prompt {n}: " + " ".join(f"word{n}x{i}." for i in range(turn.words))))
    for k in range(turn.tools):
        tid = f"t{n}-{k}"
        if turn.split_answer:
            conv.append(Message.assistant(f"Let me look {n}-{k} up."))
        conv.append(Message.tool_use(tid, "lookup", {"n": n, "k": k}))
        conv.append(Message.tool_result(tid, f"Result {n}-{k}. Details follow."))
    conv.append(Message.assistant(f"Answer {n}. " + "More. " * turn.words))


def check_summaries(store: MemoryStore, conv: Conversation, summarizer: ExtractiveSummarizer) -> None:
    assert_valid_view(conv)
    for summary in store.summaries("s", "default"):
        if summary.status != "active":
            continue
        truth = covered(store, "s", "default", summary.summary_id)
        text = summary.content
        assert stated(text) == truth, text
        assert len(text) <= summarizer.max_chars
        header, *lines = text.splitlines()
        # Every covered message has its line, shown or counted on the one dropped line.
        gone = [ln for ln in lines if ln.startswith("- ... ")]
        assert len(gone) <= 1, text
        dropped = int(gone[0].split()[2].replace(",", "")) if gone else 0
        assert dropped + len(lines) - len(gone) == truth.messages, text
        room_for_one = len(header) + 1 + LINE_PREFIX + summarizer.sentence_chars + 1 + WORST_DROPPED_LINE
        if truth.last_turn is not None and summarizer.max_chars >= room_for_one:
            assert f"\n- turn {truth.last_turn}, " in text, text


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=steps,
    first=st.integers(0, 2),
    max_chars=st.integers(200, 1500),
    sentence_chars=st.integers(20, 120),
    system=st.booleans(),
)
def test_summaries_state_what_they_cover_keep_the_newest_turn_and_their_budget(
    steps: list[Turn | Pin | Unpin | Reduce | Undo], first: int, max_chars: int, sentence_chars: int, system: bool
) -> None:
    store = MemoryStore()
    summarizer = ExtractiveSummarizer(max_chars=max_chars, sentence_chars=sentence_chars)
    manager = SummarizingConversationManager(summarizer=summarizer, protected_messages={"first": first})
    conv = Conversation(store, "s", manager=manager)
    if system:
        conv.append(Message(role="system", content=[{"text": "You are a support agent."}]))
    turns = 0

    def play(step: Turn | Pin | Unpin | Reduce | Undo) -> None:
        nonlocal turns
        if isinstance(step, Turn):
            turns += 1
            play_turn(conv, turns, step)
        elif isinstance(step, Pin):
            messages = [e for e in conv.view if e.kind == "message"]
            if messages:
                entry = messages[int(step.position * len(messages))]
                conv.pin_index(conv.view.index_of(entry.entry_id) or 0, step.pinned)
        elif isinstance(step, Unpin):
            for entry in list(conv.view):
                if entry.kind == "message" and entry.pinned:
                    conv.unpin(entry.entry_id)
        elif isinstance(step, Reduce):
            if step.turns_first is not None:
                play(step.turns_first)
            manager.summary_ratio = step.ratio
            manager.preserve_recent_messages = step.preserve
            conv.reduce("manual")
        else:
            reductions = store.reductions("s", "default")
            if reductions:
                with contextlib.suppress(UndoConflict):  # nothing to undo is fine here
                    conv.undo(reductions[-1].reduction_id)
            if step.then is not None:
                play(step.then)
        check_summaries(store, conv, summarizer)

    for step in steps:
        play(step)
    # A new manager reads the records back from the committed state and goes on truthfully.
    restored = SummarizingConversationManager(summarizer=summarizer, preserve_recent_messages=0)
    again = Conversation(store, "s", manager=restored)
    assert restored.state == manager.state
    again.append(Message.user("One more prompt."), Message.assistant("One more answer."))
    again.reduce("manual")
    check_summaries(store, again, summarizer)


message_lists = st.lists(
    st.tuples(st.sampled_from(["user", "assistant"]), st.integers(1, 40), st.booleans()),
    min_size=1,
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(spec=message_lists, max_chars=st.integers(200, 2500), sentence_chars=st.integers(20, 200))
def test_the_newest_line_is_kept_whenever_the_budget_has_room_for_it(
    spec: list[tuple[str, int, bool]], max_chars: int, sentence_chars: int
) -> None:
    messages = [
        Message.text(role, f"Fact {i}: " + "x" * words + (". Tail." if tail else ""))  # type: ignore[arg-type]
        for i, (role, words, tail) in enumerate(spec)
    ]
    bounded = ExtractiveSummarizer(max_chars=max_chars, sentence_chars=sentence_chars)(messages)
    whole = ExtractiveSummarizer(max_chars=1_000_000, sentence_chars=sentence_chars)(messages)
    header, *lines = whole.splitlines()
    assert len(bounded) <= max_chars
    assert bounded.splitlines()[0] == header
    if max_chars >= len(header) + 1 + len(lines[-1]) + 1 + WORST_DROPPED_LINE:
        assert bounded.splitlines()[-1] == lines[-1]
    # Every line shown is one of the whole summary's lines, in the same order.
    shown = [ln for ln in bounded.splitlines()[1:] if not ln.startswith("- ... ")]
    positions = [lines.index(ln) for ln in shown]
    assert positions == sorted(positions)
    left_out = len(lines) - len(shown)
    if left_out:
        dropped = [ln for ln in bounded.splitlines() if ln.startswith("- ... ")]
        assert dropped == [f"- ... {left_out:,} line{'' if left_out == 1 else 's'} dropped"]
