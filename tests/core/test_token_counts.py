"""The default token estimate: its shortcut for a one-text-block message counts as the block walk counts."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from contextledger import Message
from contextledger.model.tokens import CharTokenCounter, _measure
from tests.turns import paired_tool_turn

_text = st.text(max_size=200).filter(lambda t: all(not 0xD800 <= ord(c) <= 0xDFFF for c in t))


@given(_text, st.sampled_from(["user", "assistant"]), st.floats(min_value=0.5, max_value=8), st.integers(0, 9))
def test_one_text_block_counts_as_the_walk_counts(text: str, role: str, per_token: float, per_message: int) -> None:
    counter = CharTokenCounter(chars_per_token=per_token, per_message=per_message)
    message = Message(role=role, content=[{"text": text}])
    chars, media = _measure(message.content)
    assert (chars, media) == (len(text), 0)
    assert counter.count(message) == per_message + math.ceil(len(text) / per_token)


@given(st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=8), st.none()), max_size=4))
def test_a_tool_input_counts_its_json_text(tool_input: dict[str, object]) -> None:
    message = Message(role="assistant", content=[{"toolUse": {"toolUseId": "t", "name": "f", "input": tool_input}}])
    expected = len("f") + len(json.dumps(tool_input, default=str))
    assert _measure(message.content) == (expected, 0)
    assert CharTokenCounter().count(message) == 4 + math.ceil(expected / 4)


_short = st.text(max_size=30).filter(lambda t: all(not 0xD800 <= ord(c) <= 0xDFFF for c in t))
_inner_blocks = st.one_of(
    st.builds(lambda t: {"text": t}, _short),
    st.builds(lambda v: {"json": v}, st.dictionaries(_short, st.integers(), max_size=2)),
    st.just({"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}),
)
_blocks = st.one_of(
    _inner_blocks,
    st.builds(
        lambda i, n, v: {"toolUse": {"toolUseId": i, "name": n, "input": v}},
        st.sampled_from(["t1", "t2"]),
        _short,
        st.one_of(st.none(), st.integers(), _short, st.dictionaries(_short, _short, max_size=3)),
    ),
    st.builds(
        lambda i, c: {"toolResult": {"toolUseId": i, "status": "success", "content": c}},
        st.sampled_from(["t1", "t2"]),
        st.lists(_inner_blocks, max_size=3),
    ),
    st.builds(lambda i: {"toolResult": {"toolUseId": i}}, st.sampled_from(["t1", "t2"])),  # no content at all
    st.builds(lambda t: {"reasoningContent": {"reasoningText": {"text": t}}}, _short),
    st.just({"document": {"format": "txt", "name": "d", "source": {"bytes": b"doc"}}}),
)


@example([{"text": "abc"}], 1.0, 4, 1000)
@example([{"toolUse": {"toolUseId": "t1", "name": "f", "input": {"q": "abc"}}}], 1.0, 4, 1000)
@example([{"toolResult": {"toolUseId": "t1", "status": "success", "content": [{"text": "abc"}]}}], 1.0, 4, 1000)
@example([{"toolResult": {"toolUseId": "t1", "status": "success", "content": [{"json": {"a": 1}}]}}], 1.0, 4, 1000)
@example([{"toolResult": {"toolUseId": "t1"}}], 1.0, 4, 1000)
@example([{"image": {"format": "png", "source": {"bytes": b"x"}}}], 1.0, 4, 1000)
@given(
    st.lists(_blocks, min_size=1, max_size=3),
    st.floats(min_value=0.5, max_value=8),
    st.integers(0, 9),
    st.integers(0, 2000),
)
def test_every_message_counts_as_the_block_walk_counts(
    blocks: list[dict[str, object]], per_token: float, per_message: int, per_media: int
) -> None:
    """The shortcuts for one-block messages (a text, a tool call, a tool result of one text) count as the walk."""
    counter = CharTokenCounter(chars_per_token=per_token, per_message=per_message, per_media=per_media)
    message = Message(role="assistant", content=blocks)
    chars, media = _measure(message.content)
    assert counter.count(message) == per_message + media * per_media + math.ceil(chars / per_token)


@given(
    st.lists(st.lists(_blocks, min_size=1, max_size=3), min_size=1, max_size=5),
    st.floats(min_value=0.5, max_value=8),
    st.integers(0, 9),
    st.integers(0, 2000),
)
def test_a_turn_counts_as_its_messages_one_by_one(
    turn: list[list[dict[str, object]]], per_token: float, per_message: int, per_media: int
) -> None:
    """``counts`` (an append's one call for its turn) gives each message's own estimate, in order."""
    counter = CharTokenCounter(chars_per_token=per_token, per_message=per_message, per_media=per_media)
    messages = [Message(role="assistant", content=blocks) for blocks in turn]
    expected = []
    for message in messages:
        chars, media = _measure(message.content)
        expected.append(per_message + media * per_media + math.ceil(chars / per_token))
    assert counter.counts(messages) == expected == [counter.count(m) for m in messages]


def test_an_append_counts_its_turn_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default counter is asked once per append, for the whole turn; its entries carry those counts."""
    from contextledger import Ledger

    calls: list[list[str]] = []
    counts = CharTokenCounter.counts

    def counting(self: CharTokenCounter, messages: Sequence[Message]) -> list[int]:
        calls.append([m.message_id for m in messages])
        return counts(self, messages)

    ledger = Ledger.connect("memory://")
    conversation = ledger.conversation("s", "a")
    conversation.append(Message.user("creates the conversation"))
    monkeypatch.setattr(CharTokenCounter, "counts", counting)
    turn = paired_tool_turn()
    conversation.append(*turn)
    entries = conversation.transaction.view.entries[-4:]
    ledger.close()
    assert calls == [[m.message_id for m in turn]]
    assert [e.tokens for e in entries] == counts(CharTokenCounter(), turn)
