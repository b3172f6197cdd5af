"""The rows ``benchmarks/driver_calls.py`` builds by hand are the ledger's rows, and its check says when they are not.

Its ``rows built by hand`` lane times a plain Python writer of an append's entry rows;
the lane says what any writer of these rows pays only while they are the ledger's rows. The run
compares them after every step; these tests hold the comparison to what the ledger sent
and show that it refuses a row that differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from contextledger import CharTokenCounter, Ledger, Message  # noqa: E402
from contextledger.stores.sql import SQLStore  # noqa: E402
from driver_calls import check_hand_built, entries_call, hand_built_rows  # noqa: E402
from floor import AGENT, Call, RecordingSQLite, recording  # noqa: E402


def _recorded_append(path: Path, messages: list[Message]) -> list[Call]:
    """The driver calls of appending ``messages`` to a conversation that exists (the hot path's)."""
    ledger = Ledger(SQLStore.from_url(f"sqlite:///{path}", connect_args={"factory": RecordingSQLite}))
    try:
        conversation = ledger.conversation("rows", AGENT)
        conversation.append(Message.user("the first turn creates the conversation"))
        with recording() as calls:
            conversation.append(*messages)
        return calls
    finally:
        ledger.close()


def _turn() -> list[Message]:
    call = Message(
        role="assistant", content=[{"toolUse": {"toolUseId": "t-1", "name": "lookup", "input": {"q": "rain"}}}]
    )
    result = Message(
        role="user", content=[{"toolResult": {"toolUseId": "t-1", "status": "success", "content": [{"text": "wet"}]}}]
    )
    return [Message.user("is it raining?"), call, result, Message.assistant("yes", metadata={"source": "t-1"})]


def _kept(rows: list[object]) -> list[object]:
    """What ``send_hand_built`` keeps: the commit's time and id (not compared), then the rows."""
    return [("time", "id"), *rows]


def test_the_rows_built_by_hand_are_the_ones_the_ledger_sent(tmp_path: Path) -> None:
    messages = _turn()
    calls = _recorded_append(tmp_path / "ledger.db", messages)
    first_seq = calls[entries_call(calls)][2][4]
    check_hand_built(calls, _kept(hand_built_rows(messages, first_seq)))


def test_a_row_that_differs_fails_the_run(tmp_path: Path) -> None:
    messages = _turn()
    calls = _recorded_append(tmp_path / "ledger.db", messages)
    first_seq = calls[entries_call(calls)][2][4]
    other = [*messages[:3], Message.assistant("no", message_id=messages[3].message_id)]
    with pytest.raises(AssertionError, match="differ from the ledger's"):
        check_hand_built(calls, _kept(hand_built_rows(other, first_seq)))
    with pytest.raises(AssertionError, match="differ from the ledger's"):
        check_hand_built(calls, _kept(hand_built_rows(messages, first_seq + 1)))


_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=300)
_INPUT = st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), _TEXT, st.booleans(), st.none()), max_size=5)


@given(text=_TEXT, name=st.text(min_size=1, max_size=20), tool_input=_INPUT)
def test_the_token_counts_built_by_hand_are_the_default_counters(
    text: str, name: str, tool_input: dict[str, object]
) -> None:
    messages = [
        Message.user(text),
        Message(role="assistant", content=[{"toolUse": {"toolUseId": "t", "name": name, "input": tool_input}}]),
        Message(
            role="user", content=[{"toolResult": {"toolUseId": "t", "status": "success", "content": [{"text": text}]}}]
        ),
    ]
    tokens = hand_built_rows(messages, 1)[6::7]  # each row's token count, its seventh value
    assert tokens == CharTokenCounter().counts(messages)
