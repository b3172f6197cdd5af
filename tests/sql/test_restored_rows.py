"""A restored view holds one compact row per message and builds its records when read.

Two pydantic records per entry (a ``ViewEntry`` and its ``Message``, each with an
instance dict) cost more than the text of a typical message. These tests hold the
restore to building none of them until the view is read -- nor for its facts (ids,
tokens, pins, tool pairs) nor for an idle model call -- and every way of reading a
restored view to what the live view gives.
"""

from __future__ import annotations

import gc
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger import Ledger, Message, ReductionPlan, SlidingWindowConversationManager
from contextledger.core.view import View
from contextledger.errors import InvalidPlan
from contextledger.model.records import ViewEntry
from tests.soak import examples
from tests.sql.test_restored_content import build, decoded


def records() -> Counter[str]:
    """How many ``ViewEntry`` and ``Message`` objects the process holds (after a full collection)."""
    gc.collect()
    return Counter(type(o).__name__ for o in gc.get_objects() if type(o) is ViewEntry or type(o) is Message)


@pytest.fixture
def ledger(ledger_url: str) -> Any:
    """A ledger on each SQL engine (SQLite, PostgreSQL); every open restores from the rows (no view is shared)."""
    opened = Ledger.connect(ledger_url, shared_views=0)
    yield opened
    opened.close()


def test_an_open_conversation_builds_no_record_until_read(ledger: Ledger) -> None:
    build(ledger, "s")  # 12 messages, tool pairs among them
    before = records()
    restored = ledger.conversation("s", "agent", manager=SlidingWindowConversationManager(per_turn=True))
    view = restored.view
    # What the view's rules and an idle turn ask: answered from the rows.
    assert len(view) == 12
    assert view.ids == [e for e in view.ids if e]
    assert view.tokens > 0
    assert view.projected_input_tokens > 0
    assert view.groups == [[0], [1, 2], [3], [4], [5, 6], [7], [8], [9, 10], [11]]
    assert view.dangling_tool_uses() == view.orphan_results() == []
    assert not any(view.is_pinned(i) for i in range(len(view)))
    assert view.index_of(view.id_at(-1)) == 11
    assert view.tool_result_ids_at(2) == ["tool-0"]
    restored.before_model_call()
    restored.before_model_call()
    assert records() == before
    entries = view.entries  # read: built now, and only now
    built = records() - before
    assert built == Counter({"ViewEntry": 12, "Message": 12})
    assert view.entries == entries
    del entries
    assert records() == before  # the view kept none of them


def test_two_reads_of_a_restored_message_compare_without_decoding(ledger: Ledger) -> None:
    sent = build(ledger, "s")
    view = ledger.conversation("s", "agent").view
    first, second = view.messages, view.messages
    assert not any(a is b for a, b in zip(first, second, strict=True))  # built anew on each read
    assert first == second
    assert not any(decoded(m) for m in [*first, *second])  # the stored texts were compared
    assert [m.with_pin(True) for m in first] != second  # a different message still differs
    assert first == sent  # against a live message: compared by value, as before


def test_an_eviction_keeps_the_rows_it_leaves_and_a_view_without_rows_keeps_its_entries(ledger: Ledger) -> None:
    build(ledger, "s")  # 12 restored messages
    restored = ledger.conversation("s", "agent", repair=False)
    before = records()
    restored.apply_plan(lambda v: ReductionPlan(strategy="test", evict=(v.ids[0],)), trigger="manual")
    left = len(restored.view)
    assert 0 < left < 12  # the first turn evicted (the view rules take its whole turn)
    assert records() == before  # the view after it holds the rest as rows, as before
    assert restored.view.entries is not restored.view.entries  # built on each read, never kept
    restored.append(Message.user("new"), Message.assistant("answer"))
    old = tuple(restored.view.ids[:left])
    restored.apply_plan(lambda _v: ReductionPlan(strategy="test", evict=old), trigger="manual")
    view = restored.view
    assert [m.plain_text for m in view.messages] == ["new", "answer"]
    assert view.entries is view.entries  # no row left: its entries are built once and kept


@settings(max_examples=examples(30), deadline=None)
@given(
    turns=st.lists(
        st.lists(
            st.tuples(
                st.sampled_from(["user", "assistant", "call", "result", "usage"]),
                st.integers(0, 3),
                st.booleans(),
            ),
            min_size=1,
            max_size=4,
        ),
        min_size=1,
        max_size=4,
    ),
    evict=st.integers(0, 3),
)
def test_a_lazily_built_view_equals_the_live_one(
    tmp_path_factory: pytest.TempPathFactory, turns: list[list[tuple[str, int, bool]]], evict: int
) -> None:
    def message(kind: str, n: int, pinned: bool) -> Message:
        made = {
            "user": lambda: Message.user(f"question {n} caf\u00e9"),
            "assistant": lambda: Message.assistant(f"answer {n}"),
            "call": lambda: Message.tool_use(f"t{n}", "lookup", {"q": n}),
            "result": lambda: Message.tool_result(f"t{n}", f"result {n}"),
            "usage": lambda: Message.assistant("used", metadata={"usage": {"inputTokens": 7 * n, "outputTokens": 1}}),
        }[kind]()
        return made.with_pin(True) if pinned else made

    def same(live: View, restored: View) -> None:
        assert restored.entries == live.entries
        assert list(restored) == list(live)
        assert [restored[i] for i in range(-len(live), len(live))] == [live[i] for i in range(-len(live), len(live))]
        assert restored.messages == live.messages
        assert restored.built().entries == live.entries
        for read in (
            lambda v: v.ids,
            lambda v: v.tokens,
            lambda v: v.projected_input_tokens,
            lambda v: v.groups,
            lambda v: v.dangling_tool_uses(),
            lambda v: v.orphan_results(),
            lambda v: [v.is_pinned(i) for i in range(len(v))],
            lambda v: [v.tool_result_ids_at(i) for i in range(len(v))],
            lambda v: [v.index_of(e) for e in v.ids],
        ):
            assert read(restored) == read(live)

    # The live view: the memory store shares the appended messages, nothing is restored.
    directory = tmp_path_factory.mktemp("rows")
    with Ledger.connect("memory://") as memory, Ledger.connect(f"sqlite:///{directory / 'ledger.db'}") as sqlite:
        live = memory.conversation("s", "agent", repair=False)
        for turn in turns:
            sent = [message(*m) for m in turn]
            live.append(*sent)
            sqlite.conversation("s", "agent", repair=False).append(*sent)
        restored = sqlite.conversation("s", "agent", repair=False)
        same(live.view, restored.view)
        # Rows followed by live entries, then a reduction: both views move alike.
        more = [message("user", 9, False), message("assistant", 9, False)]
        live.append(*more)
        restored.append(*more)
        same(live.view, restored.view)
        victims = tuple(live.view.ids[:evict])
        if victims:
            outcomes = []
            for conversation in (live, restored):
                try:  # a plan the view rules refuse is refused alike
                    conversation.apply_plan(lambda _v: ReductionPlan(strategy="test", evict=victims), trigger="manual")
                    outcomes.append("committed")
                except InvalidPlan as exc:
                    outcomes.append(str(exc))
            assert outcomes[0] == outcomes[1]
            same(live.view, restored.view)
            same(live.view, sqlite.conversation("s", "agent", repair=False).view)
        with pytest.raises(IndexError):
            restored.view[len(restored.view)]
