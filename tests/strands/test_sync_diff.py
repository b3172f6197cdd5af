"""What a sync of a Strands agent compares: pins and revisions as one message at a time finds them, and its shape.

Every sync compares the agent's messages with the whole window. ``plan_sync`` compares
every kept entry's content at once and looks closer only at an entry whose content
changed or whose metadata carries ``custom`` on either side; whatever the agent did to
its messages, the pins and revisions must be those the comparison one message at a
time finds. :class:`~contextledger.integrations.strands.shape.Shape` tells "nothing
moved" by identity, holding the objects it compares.
"""

from __future__ import annotations

import copy
import gc
import weakref
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.core.view import View
from contextledger.errors import InvalidMessage
from contextledger.integrations.strands.convert import is_pinned_dict, render_entry
from contextledger.integrations.strands.diff import plan_sync
from contextledger.integrations.strands.shape import Shape
from contextledger.model.messages import Message
from contextledger.model.records import ViewEntry
from tests.soak import examples

# What a message's metadata can be, in the view and in the agent: none, Strands' usage,
# a pin (True, and 1, which equals True but is no pin), something else under "custom".
METADATA: list[dict[str, Any] | None] = [
    None,
    {"usage": {"inputTokens": 10, "outputTokens": 2}},
    {"custom": {"pinned": True}},
    {"custom": {"pinned": 1}},
    {"custom": {"note": "x"}},
    {"usage": {"inputTokens": 10, "outputTokens": 2}, "custom": {"pinned": True}},
]


def _view(specs: list[tuple[str, int]]) -> View:
    entries = []
    for seq, (text, meta) in enumerate(specs):
        role = "user" if seq % 2 == 0 else "assistant"
        message = Message(role=role, content=[{"text": text}], metadata=METADATA[meta] or {})
        entries.append(ViewEntry(entry_id=message.message_id, seq=seq, message=message, tokens=1))
    return View(entries)


def _one_at_a_time(view: View, messages: list[dict[str, Any]]) -> tuple[dict[str, bool], list[tuple[str, Any]]]:
    """The pins and revisions of the agent's messages, compared with each kept entry in turn (as before)."""
    position = {m["tracking_id"]: i for i, m in enumerate(messages)}
    pins: dict[str, bool] = {}
    revisions: list[tuple[str, Any]] = []
    for entry in view.entries:
        if entry.entry_id not in position:
            continue
        current = messages[position[entry.entry_id]]
        pinned = current.get("metadata") is not None and is_pinned_dict(current)
        message = entry.message
        if pinned != (bool(message.metadata) and message.pinned):
            pins[entry.entry_id] = pinned
        if current.get("content") != message.content:
            revisions.append((entry.entry_id, current["content"]))
    return pins, revisions


@st.composite
def syncs(draw: st.DrawFn) -> tuple[View, list[dict[str, Any]]]:
    """A view, and the agent's messages made from it: some edited in place, some dropped, one added."""
    specs = draw(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, len(METADATA) - 1)), max_size=8))
    view = _view(specs)
    messages = [render_entry(entry) for entry in view.entries]
    for message in messages:
        edit = draw(st.sampled_from(["none", "none", "text", "metadata", "drop metadata", "block"]))
        if edit == "text":
            message["content"][0]["text"] += "!"  # in place, as a Strands manager truncates a result
        elif edit == "metadata":
            message["metadata"] = copy.deepcopy(METADATA[draw(st.integers(1, len(METADATA) - 1))])
        elif edit == "drop metadata":
            message.pop("metadata", None)
        elif edit == "block":
            message["content"].append({"text": "more"})
    if draw(st.booleans()) and messages:
        del messages[draw(st.integers(0, len(messages) - 1))]
    if draw(st.booleans()):
        messages.append({"role": "user", "content": [{"text": "new"}], "tracking_id": "new-message"})
    return view, messages


@settings(max_examples=examples(300), deadline=None)
@given(syncs())
def test_pins_and_revisions_are_those_one_message_at_a_time_finds(case: tuple[View, list[dict[str, Any]]]) -> None:
    view, messages = case
    edit = plan_sync(view, messages, trigger="manual", strategy="test", next_seq=len(view))
    pins, revisions = _one_at_a_time(view, messages)
    found = [] if edit is None or edit.plan is None else [(r.message_id, r.content) for r in edit.plan.revisions]
    assert (edit.pins if edit is not None else {}) == pins
    assert found == revisions


def test_a_pin_of_one_is_no_pin_though_it_equals_true() -> None:
    view = _view([("a", 2)])  # pinned in the ledger
    messages = [render_entry(entry) for entry in view.entries]
    messages[0]["metadata"]["custom"]["pinned"] = 1  # equal to True, but Strands' pin is `is True`
    edit = plan_sync(view, messages, trigger="manual", strategy="test", next_seq=1)
    assert edit is not None
    assert edit.pins == {view.ids[0]: False}


def test_a_kept_message_without_a_content_list_is_refused() -> None:
    view = _view([("a", 0), ("b", 1)])
    messages = [render_entry(entry) for entry in view.entries]
    messages[1]["content"] = "b"
    with pytest.raises(InvalidMessage, match="no content list"):
        plan_sync(view, messages, trigger="manual", strategy="test", next_seq=2)


def _messages() -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"text": f"m{i}"}], "tracking_id": f"t{i}"} for i in range(3)]


def test_a_shape_holds_the_same_objects_in_order_only() -> None:
    messages = _messages()
    shape = Shape(messages)
    assert shape.holds(list(messages))  # another list of the same dicts
    messages[0]["content"][0]["text"] = "edited in place"
    assert shape.holds(messages)  # by identity: the next full sync sees this edit
    assert not shape.holds(copy.deepcopy(messages))  # equal dicts, not the same ones
    assert not shape.holds(messages[:2])
    assert not shape.holds([*messages, {"role": "user", "content": []}])
    assert not shape.holds([messages[1], messages[0], messages[2]])
    replaced: list[Mapping[str, Any]] = list(messages)
    replaced[1] = {**messages[1], "content": list(messages[1]["content"])}
    assert not shape.holds(replaced)
    messages[2]["content"] = [{"text": "a new content list"}]
    assert not shape.holds(messages)


class _Message(dict[str, Any]):
    """A message dict that a weak reference can follow."""


def test_a_shape_keeps_what_it_compares_alive() -> None:
    # An id is reused once its object is gone: a shape that kept ids only could take a
    # message made in a dropped one's place for it.
    messages = [_Message(role="user", content=[{"text": "m"}], tracking_id="t")]
    shape = Shape(messages)
    watched = weakref.ref(messages[0])
    messages.clear()
    gc.collect()
    assert watched() is not None
    assert not shape.holds(messages)
