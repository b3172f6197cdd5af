"""``apply_plan()`` and ``edit()`` hold plans to the same view rules as ``reduce()``.

A host mirroring its own reductions marks its edit ``as_given`` and is recorded as it is.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Conversation, Edit, Message, ReductionPlan, SummaryDraft, View
from contextledger.errors import InvalidPlan
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from tests.core.helpers import rule_violations
from tests.managers.helpers import chat, tool_turn
from tests.soak import examples


def texts(conv: Conversation) -> list[str]:
    return [e.message.plain_text.split(".")[0] if e.kind == "message" else "S" for e in conv.view]


def evict_first(view: View) -> ReductionPlan:
    return ReductionPlan(strategy="custom", evict=(view.ids[0],))


def test_apply_plan_advances_an_eviction_boundary_to_the_next_prompt(store: CompleteStore) -> None:
    conv = Conversation(store, "s")
    conv.append(*chat(6))  # u0 a1 u2 a3 u4 a5
    before = conv.view
    reduction = conv.apply_plan(evict_first, trigger="manual")
    assert reduction is not None
    # Evicting u0 alone would open the view on a1: the boundary moved on to u2.
    assert texts(conv) == ["m2", "m3", "m4", "m5"]
    assert reduction.evicted == tuple(before.ids[:2])
    assert rule_violations(before, conv.view) == []
    assert Conversation(store, "s").view.ids == conv.view.ids


def test_edit_holds_its_plan_to_the_rules_too(store: CompleteStore) -> None:
    conv = Conversation(store, "s")
    turn = tool_turn("t")  # u, toolUse, toolResult, answer
    conv.append(*turn, *chat(2, prefix="n"))
    before = conv.view
    conv.edit(lambda view: Edit(plan=ReductionPlan(strategy="custom", evict=(turn[1].message_id,))))
    # The call took its result with it: no toolResult is left without its call.
    assert texts(conv) == ["Please do t", "Done with t", "n0", "n1"]
    assert conv.view.orphan_results() == []
    assert rule_violations(before, conv.view) == []


def test_a_plan_removing_only_what_must_stay_is_refused_and_writes_nothing(store: CompleteStore) -> None:
    conv = Conversation(store, "s")
    conv.append(*chat(3))  # u0 a1 u2: u2 is the newest prompt
    conv.pin(conv.view.ids[0])
    version = conv.version
    pinned, newest = conv.view.ids[0], conv.view.ids[2]
    with pytest.raises(InvalidPlan, match="must stay"):
        conv.apply_plan(lambda view: ReductionPlan(strategy="custom", evict=(newest,)), trigger="manual")
    with pytest.raises(InvalidPlan, match="must stay"):
        conv.edit(lambda view: Edit(plan=ReductionPlan(strategy="custom", evict=(view.ids[0],))))
    everything = ReductionPlan(strategy="custom", evict=tuple(conv.view.ids))
    conv.apply_plan(lambda view: everything, trigger="manual")  # corrected: the newest prompt stays
    assert conv.view.ids == [pinned, newest]
    assert conv.version == version + 1
    assert len(store.reductions("s", "default")) == 1


def test_a_summary_leaving_a_message_inside_its_span_is_refused(store: CompleteStore) -> None:
    conv = Conversation(store, "s")
    conv.append(*chat(6))
    version = conv.version

    def gap(view: View) -> ReductionPlan:
        return ReductionPlan(
            strategy="gap", summary=SummaryDraft(content="s", summarizer="x", replaces=(view.ids[0], view.ids[2]))
        )

    with pytest.raises(InvalidPlan, match="separate"):
        conv.apply_plan(gap, trigger="manual")
    assert conv.version == version
    assert store.reductions("s", "default") == []


def test_a_summary_is_placed_after_the_pinned_entries_it_spans(memory_store: CompleteStore) -> None:
    conv = Conversation(memory_store, "s")
    names = ["q1", "a1", "q2", "a2", "q3", "a3", "q4", "a4"]
    conv.append(*(Message.user(f"{n}.") if n[0] == "q" else Message.assistant(f"{n}.") for n in names))
    conv.pin(conv.view.ids[2])
    before = conv.view
    replaces = tuple(before.ids[i] for i in (0, 1, 3, 4))
    conv.apply_plan(
        lambda view: ReductionPlan(strategy="s", summary=SummaryDraft(content="S", summarizer="x", replaces=replaces)),
        trigger="manual",
    )
    (summary,) = memory_store.summaries("s", "default")
    assert texts(conv) == ["q2", "S", "a3", "q4", "a4"]
    assert rule_violations(before, conv.view, summary.summary_id, summary.replaces) == []


def test_an_as_given_edit_is_recorded_exactly(memory_store: CompleteStore) -> None:
    # A host that already trimmed its own messages (a Strands manager) is mirrored as it is.
    conv = Conversation(memory_store, "s")
    conv.append(*chat(4))
    first = conv.view.ids[0]
    conv.edit(lambda view: Edit(plan=ReductionPlan(strategy="host", evict=(first,)), as_given=True))
    assert texts(conv) == ["m1", "m2", "m3"]


plans = st.tuples(
    st.lists(st.integers(0, 11), max_size=6),  # indexes to evict
    st.one_of(st.none(), st.tuples(st.integers(0, 11), st.integers(1, 5))),  # summary start, length
    st.lists(st.integers(0, 11), max_size=2),  # indexes to pin first
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=plans, tools=st.booleans())
def test_random_direct_plans_commit_only_valid_views(spec: tuple[Any, ...], tools: bool) -> None:
    evict, summary, pins = spec
    store = MemoryStore()
    conv = Conversation(store, "s")
    conv.append(*(tool_turn("a") if tools else []), *chat(12 - (4 if tools else 0)))
    for index in pins:
        conv.pin(conv.view.ids[index])
    before, version = conv.view, conv.version

    def plan(view: View) -> ReductionPlan:
        draft = None
        if summary is not None:
            start, length = summary
            ids = view.ids[start : start + length]
            draft = SummaryDraft(content="S", summarizer="x", replaces=tuple(ids)) if ids else None
        return ReductionPlan(strategy="random", evict=tuple(view.ids[i] for i in evict), summary=draft)

    try:
        conv.apply_plan(plan, trigger="manual")
    except InvalidPlan:
        assert conv.version == version
        assert Conversation(store, "s").view.ids == before.ids
        return
    summaries = store.summaries("s", "default")
    made = summaries[-1] if summaries and conv.version > version else None
    violations = rule_violations(before, conv.view, made.summary_id if made else None, made.replaces if made else ())
    assert violations == []
    assert Conversation(store, "s").view.ids == conv.view.ids
