"""The fast paths give exactly what the general paths give.

* ``Message.from_record`` reads a stored record without pydantic re-validation; the
  message it builds must equal (values, container types, fields set) the one the
  validating constructor builds, and a record it cannot vouch for must fail the same way.
* A view derives its facts (tool ids left unpaired, positions, token totals, projected
  input tokens) once and carries them over when a changeset only appends; they must be
  what a view built from scratch computes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger.errors import InvalidMessage
from contextledger.jsonvalues import decode_shared
from contextledger.messages import FrozenDict, FrozenList, Message, decode_blocks
from contextledger.records import ViewEntry
from contextledger.view import View

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars | st.binary(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.one_of(st.text(max_size=6), st.sampled_from(["__contextledger_bytes__", "~__contextledger_bytes__"])),
            inner,
            max_size=3,
        )
    ),
    max_leaves=12,
)
blocks = st.one_of(
    st.builds(lambda t: {"text": t}, st.text(max_size=20)),
    st.builds(
        lambda i, v: {"toolUse": {"toolUseId": i, "name": "f", "input": v}},
        st.text(min_size=1, max_size=4),
        json_values,
    ),
    st.builds(
        lambda i, t: {"toolResult": {"toolUseId": i, "status": "success", "content": [{"text": t}]}},
        st.text(min_size=1, max_size=4),
        st.text(max_size=10),
    ),
    st.builds(lambda v: {"image": {"format": "png", "source": {"bytes": v}}}, st.binary(max_size=8)),
    st.builds(lambda k, v: {k: v}, st.text(min_size=1, max_size=6), json_values),
)
messages = st.builds(
    lambda role, content, metadata: Message(role=role, content=content, metadata=metadata),
    st.sampled_from(["system", "user", "assistant"]),
    st.lists(blocks, min_size=1, max_size=3),
    st.dictionaries(st.text(max_size=6), json_values, max_size=3),
)


def _validated(record: dict[str, Any]) -> Message:
    """What ``from_record`` built before it had a fast path: the validating constructor."""
    content = record["content"]
    return Message(
        message_id=record["message_id"],
        role=record["role"],
        content=decode_shared(content) if type(content) is list else decode_blocks(content),
        metadata=decode_shared(record.get("metadata") or {}),
    )


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return (type(value), {k: _shape(v) for k, v in value.items()})
    if isinstance(value, list):
        return (type(value), [_shape(v) for v in value])
    return (type(value), value)


@settings(max_examples=150, deadline=None)
@given(messages)
def test_from_record_equals_the_validating_constructor(message: Message) -> None:
    record = json.loads(json.dumps(message.to_record()))
    fast = Message.from_record(record)
    slow = _validated(json.loads(json.dumps(message.to_record())))
    assert fast == slow == message
    assert _shape(fast.content) == _shape(slow.content)
    assert _shape(fast.metadata) == _shape(slow.metadata)
    assert type(fast.content) is FrozenList
    assert type(fast.metadata) is FrozenDict
    assert fast.model_fields_set == slow.model_fields_set
    with pytest.raises(TypeError):
        fast.content[0]["text"] = "changed"


@pytest.mark.parametrize(
    "record",
    [
        {"message_id": "m", "role": "bot", "content": [{"text": "x"}]},
        {"message_id": "m", "role": "user", "content": [{"text": 1}]},
        {"message_id": "m", "role": "user", "content": [{}]},
        {"message_id": "m", "role": "user", "content": [{"toolUse": {"name": "f"}}]},
        {"message_id": "m", "role": "user", "content": [{"text": "lone \ud800"}]},
        {"message_id": "", "role": "user", "content": [{"text": "x"}]},
        {"message_id": "m", "role": "user", "content": [{"text": "x"}], "metadata": [1, 2]},
    ],
)
def test_from_record_refuses_what_the_constructor_refuses(record: dict[str, Any]) -> None:
    with pytest.raises((InvalidMessage, ValueError)) as fast:
        Message.from_record(record)
    with pytest.raises((InvalidMessage, ValueError)) as slow:
        _validated(record)
    assert type(fast.value) is type(slow.value)
    assert str(fast.value) == str(slow.value)


def _entries(start: int, specs: list[tuple[str, str, int]]) -> list[ViewEntry]:
    out = []
    for offset, (kind, tool_id, tokens) in enumerate(specs):
        if kind == "use":
            message = Message.tool_use(tool_id, "f", {})
        elif kind == "result":
            message = Message.tool_result(tool_id, "r")
        elif kind == "usage":
            message = Message.assistant("a", metadata={"usage": {"inputTokens": tokens, "outputTokens": 1}})
        else:
            message = Message.user("q")
        out.append(ViewEntry(entry_id=message.message_id, seq=start + offset, message=message, tokens=tokens))
    return out


kinds = st.sampled_from(["use", "result", "text", "usage"])
steps = st.lists(st.tuples(kinds, st.sampled_from(["a", "b", "c"]), st.integers(0, 50)), max_size=5)


@settings(max_examples=150, deadline=None)
@given(st.lists(steps, min_size=1, max_size=5), st.integers(0, 4))
def test_appended_views_carry_the_facts_a_fresh_view_computes(turns: list[list[Any]], warm: int) -> None:
    view = View(())
    seq = 0
    for number, specs in enumerate(turns):
        if number % 5 < warm:  # some parents computed their facts, some did not
            facts = (view.dangling_tool_uses(), view.index_of("x"), view.tokens, view.projected_input_tokens)
            assert facts[1] is None
        appends = _entries(seq, specs)
        seq += len(appends)
        view = view.project(appends, set(), {}, {}, None)
        fresh = View(view.entries)
        assert view.dangling_tool_uses() == fresh.dangling_tool_uses()
        assert view.orphan_results() == fresh.orphan_results()
        assert view.tokens == fresh.tokens
        assert view.projected_input_tokens == fresh.projected_input_tokens
        assert [view.index_of(e.entry_id) for e in view] == [fresh.index_of(e.entry_id) for e in fresh]
    assert view.project((), set(), {}, {}, None) is view
