"""A view's tool groups: the connected parts of its entries linked by shared tool ids.

The groups are read on every reduction (the view rules keep a group whole), so they are
computed in one pass over each message's tool ids; these properties hold that pass, and
the shortcut the rules take through :meth:`View.groups_touching`, to their definitions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger import Conversation, Edit, Message, ReductionPlan, View
from contextledger.managers.policy import evictable_groups
from contextledger.model.metadata import LINKS_KEY, links_in
from contextledger.stores.memory import MemoryStore
from tests.soak import examples

TOOL_IDS = [f"t{i}" for i in range(6)]
T = TypeVar("T")


@st.composite
def tool_messages(draw: st.DrawFn) -> Message:
    """A message with any mix of text, calls, results and linked ids (any order, ids reused)."""
    blocks: list[dict[str, Any]] = []
    for kind in draw(st.lists(st.sampled_from(["text", "use", "result"]), max_size=3)):
        if kind == "text":
            blocks.append({"text": draw(st.text(max_size=5))})
        elif kind == "use":
            blocks.append({"toolUse": {"toolUseId": draw(st.sampled_from(TOOL_IDS)), "name": "f", "input": {}}})
        else:
            tool_use_id = draw(st.sampled_from(TOOL_IDS))
            blocks.append({"toolResult": {"toolUseId": tool_use_id, "status": "success", "content": [{"text": "r"}]}})
    metadata: dict[str, Any] = {}
    links = draw(st.none() | st.lists(st.sampled_from(TOOL_IDS), max_size=2))
    if links is not None:
        metadata[LINKS_KEY] = links
    if draw(st.booleans()):
        metadata["other"] = draw(st.integers())
    if draw(st.integers(0, 4)) == 0:
        metadata["custom"] = {"pinned": True}  # appended pinned
    role = draw(st.sampled_from(["user", "assistant"]))
    return Message(role=role, content=blocks or [{"text": "x"}], metadata=metadata)


def _given(value: T) -> Callable[[View], T]:
    """A planner answering ``value`` whatever the view."""
    return lambda _view: value


def _view(messages: list[Message]) -> View:
    conversation = Conversation(MemoryStore(), "s")
    conversation.append(*messages)
    return conversation.view


def _components(view: View) -> list[list[int]]:
    """The definition: indexes joined when their messages share a tool id, by a closure to a fixed point."""
    ids = [entry.message.tool_ids for entry in view]
    groups = [{i} for i in range(len(ids))]
    merged = True
    while merged:
        merged = False
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                if {t for i in groups[a] for t in ids[i]} & {t for i in groups[b] for t in ids[i]}:
                    groups[a] |= groups.pop(b)
                    merged = True
                    break
            if merged:
                break
    return sorted((sorted(g) for g in groups), key=lambda g: g[0])


@settings(max_examples=examples(150), deadline=None)
@given(messages=st.lists(tool_messages(), max_size=9))
def test_a_messages_tool_ids_are_its_calls_results_and_links(messages: list[Message]) -> None:
    for message in messages:
        expected = set(message.tool_use_ids) | set(message.tool_result_ids) | links_in(message.metadata)
        assert message.tool_ids == expected


@settings(max_examples=examples(150), deadline=None)
@given(messages=st.lists(tool_messages(), max_size=9), data=st.data())
def test_groups_are_the_linked_parts_in_order_and_touching_picks_the_ones_named(
    messages: list[Message], data: st.DataObject
) -> None:
    view = _view(messages)
    assert view.groups == _components(view)
    for index in range(len(view)):
        assert view.group_of(index) == next(g for g in view.groups if index in g)
    indexes = data.draw(st.sets(st.integers(0, max(len(view) - 1, 0))) if len(view) else st.just(set()))
    assert view.groups_touching(indexes) == [g for g in view.groups if set(g) & indexes]


@settings(max_examples=examples(150), deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.lists(tool_messages(), min_size=1, max_size=3)),
            st.tuples(st.just("evict_oldest_groups"), st.integers(1, 4)),
            st.tuples(st.just("evict_oldest_entries"), st.integers(1, 4)),
            st.tuples(st.just("evict_a_group"), st.integers(0, 8)),
            st.tuples(st.just("append_and_evict"), st.lists(tool_messages(), min_size=1, max_size=3)),
            st.tuples(st.just("pin"), st.integers(0, 8)),
            st.tuples(st.just("unpin"), st.integers(0, 8)),
            st.tuples(st.just("pin_and_evict"), st.integers(0, 8)),
        ),
        max_size=12,
    )
)
def test_groups_and_pins_carried_from_view_to_view_equal_those_computed_afresh(steps: list[tuple[str, Any]]) -> None:
    """Each commit's view derives its groups and pins from its parent's (read at every step, so each one carries).

    The plans are kept as given (a host's own), so an eviction may also split a group:
    then the groups are computed afresh.
    """
    conversation = Conversation(MemoryStore(), "s")
    for kind, arg in steps:
        view = conversation.view
        assert view.groups == _components(view), (kind, arg)
        assert view.pinned_indexes == {i for i, entry in enumerate(view) if entry.message.pinned}, (kind, arg)
        kept = {i for i, entry in enumerate(view) if entry.message.pinned} | {0}
        assert evictable_groups(view, {0}) == [g for g in view.groups if not kept & set(g)]
        groups = view.groups
        if kind == "append":
            conversation.append(*arg)
            continue
        if not len(view):
            continue
        if kind in ("pin", "unpin"):
            conversation.pin_index(arg % len(view), kind == "pin")
            continue
        if kind == "pin_and_evict":  # one commit evicting the oldest group and flipping a kept entry's pin
            oldest = groups[0]
            rest = [i for i in range(len(view)) if i not in oldest]
            plan = ReductionPlan(strategy="test", evict=tuple(view[i].entry_id for i in oldest))
            pins = {view[rest[arg % len(rest)]].entry_id: not view[rest[arg % len(rest)]].pinned} if rest else {}
            conversation.edit(_given(Edit(plan=plan, pins=pins, trigger="manual", as_given=True)))
            continue
        if kind == "evict_oldest_groups":
            ids = tuple(view[i].entry_id for group in groups[:arg] for i in group)
        elif kind == "evict_oldest_entries":
            ids = tuple(view.ids[:arg])
        elif kind == "evict_a_group":
            ids = tuple(view[i].entry_id for i in groups[arg % len(groups)])
        else:  # a turn's answer committed with the eviction of the oldest group (a Strands turn's shape)
            plan = ReductionPlan(strategy="test", evict=tuple(view[i].entry_id for i in groups[0]))
            edit = Edit(appends=tuple(arg), plan=plan, trigger="manual", as_given=True)
            conversation.edit(_given(edit))
            continue
        plan = ReductionPlan(strategy="test", evict=ids)
        conversation.apply_plan(_given(plan), trigger="manual", as_given=True)
    view = conversation.view
    assert view.groups == _components(view)
    assert view.groups == View(list(view)).groups
    assert view.pinned_indexes == View(list(view)).pinned_indexes
