"""The default token estimate: its shortcut for a one-text-block message counts as the block walk counts."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from contextledger import Message
from contextledger.model.tokens import CharTokenCounter, _measure

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
