"""``dumps_encoded``: the JSON text of the tagged copy, without the copy when nothing needs tagging.

Every store writes content and metadata with it (the SQLite hot path, the Redis codec,
the JSON check of every store), so it must give exactly the text of
``json.dumps(encode_value(value))`` whatever the value holds -- bytes, keys that look like
the codec's tag, strings that contain it -- and refuse what that refuses.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger import Message
from contextledger.errors import InvalidMessage
from contextledger.model.jsonvalues import check_plain_json, dumps_encoded, encode_value, freeze_value

TAG = "__contextledger_bytes__"

_keys = st.one_of(st.text(max_size=6), st.sampled_from([TAG, "~" + TAG, "~~" + TAG, "x" + TAG]))
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from([TAG, "a" + TAG]),
    st.binary(max_size=6),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=20,
)


@given(_values, st.booleans())
def test_the_text_is_that_of_the_tagged_copy(value: Any, compact: bool) -> None:
    separators = (",", ":") if compact else None
    expected = json.dumps(encode_value(value), allow_nan=False, separators=separators)
    assert dumps_encoded(value, compact=compact) == expected
    frozen = freeze_value(value, "value")  # what a message holds
    assert dumps_encoded(frozen, compact=compact) == json.dumps(
        encode_value(frozen), allow_nan=False, separators=separators
    )


@pytest.mark.parametrize("bad", [math.nan, -math.inf, {1, 2}, object()])
def test_what_json_cannot_hold_is_refused_like_the_encoder_refuses_it(bad: Any) -> None:
    value = [{"json": {"x": [bad]}}]
    with pytest.raises((TypeError, ValueError)) as expected:
        json.dumps(encode_value(value), allow_nan=False)
    with pytest.raises(type(expected.value), match=str(expected.value).split(":")[0]):
        dumps_encoded(value)


@pytest.mark.parametrize("compact", [False, True])
def test_a_plain_value_holding_itself_is_refused_as_the_encoder_refuses_it(compact: bool) -> None:
    # Plain containers take the encoder built without the cycle check first: a cycle must
    # still end in json.dumps' own error, not in a RecursionError or a text.
    listed: list[Any] = [{"x": 1}]
    listed.append(listed)
    mapped: dict[str, Any] = {"a": [1]}
    mapped["self"] = mapped
    for value in (listed, mapped, [{"content": mapped}]):
        with pytest.raises(ValueError, match="Circular reference detected"):
            json.dumps(value)
        with pytest.raises(ValueError, match="Circular reference detected"):
            dumps_encoded(value, compact=compact)


def test_a_message_with_an_image_is_written_tagged() -> None:
    message = Message(role="user", content=[{"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}])
    text = dumps_encoded(message.content)
    assert TAG in text
    assert json.loads(text) == encode_value(message.content)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_frozen_value_refuses_what_the_encoder_refuses(bad: float) -> None:
    # A message's own containers take the prebuilt encoder first; its refusal must still be json.dumps'.
    frozen = freeze_value([{"json": {"x": [1, bad]}}], "value")
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        dumps_encoded(frozen)
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        dumps_encoded(frozen, compact=True)


def test_a_frozen_value_holding_bytes_is_tagged() -> None:
    frozen = freeze_value({"image": {"bytes": b"\x00\xff"}}, "value")
    assert dumps_encoded(frozen) == json.dumps(encode_value(frozen), allow_nan=False)
    assert TAG in dumps_encoded(frozen)


# State (manager and host) is checked as plain JSON on every commit that carries it: the
# encoder built once answers first, the standard one only when that one cannot write it.
_state_scalars = st.one_of(
    _scalars,
    st.sampled_from([math.nan, math.inf, -math.inf, 2**70, -0.0]),
    st.builds(bytearray, st.binary(max_size=3)),
)
_states = st.recursive(
    _state_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(_keys, st.integers(), st.booleans(), st.none()), inner, max_size=4),
        st.frozensets(st.integers(), max_size=2),
    ),
    max_leaves=20,
)


@given(_states)
def test_plain_json_is_refused_exactly_where_the_standard_encoder_refuses_or_bytes_stand(value: Any) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        standard: Exception | None = exc
    else:
        standard = None
    if standard is None:
        check_plain_json(value, "state")  # accepted by both
        return
    with pytest.raises(InvalidMessage) as refused:
        check_plain_json(value, "state")
    # The reason named is the standard encoder's (or where the bytes stand).
    message = str(refused.value)
    assert "holds bytes" in message or str(standard) in message


def test_a_state_holding_itself_is_refused_as_the_standard_encoder_refuses_it() -> None:
    cyclic: dict[str, Any] = {"a": 1}
    cyclic["self"] = [cyclic]
    with pytest.raises(InvalidMessage, match="Circular reference detected"):
        check_plain_json(cyclic, "agent state")
