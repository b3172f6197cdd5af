"""``normalize_json``, ``freeze_value`` and ``thaw``: the fast paths for exact types give what the general rules give.

Every message built validates its content and metadata through them, so the shortcuts
for ``str``, ``dict``, ``list`` and the scalars must change nothing: the same values of
the same types, the same containers, the same refusals.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextledger import Message
from contextledger.errors import InvalidMessage
from contextledger.model.jsonvalues import MAX_DEPTH, FrozenDict, FrozenList, check_text, normalize_json, thaw
from tests.soak import examples


class Text(str):
    pass


class Number(int):
    pass


class Ratio(float):
    pass


def _reference(value: Any, what: str, depth: int, coerce: bool, freeze: bool) -> Any:
    """The rules, as written before the fast paths: one isinstance chain for every value."""
    if isinstance(value, str):
        return check_text(value, what)
    if value is None or value is True or value is False:
        return value
    if isinstance(value, int):
        return value if type(value) is int else int(value)
    if isinstance(value, float):
        return value if type(value) is float else float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if depth >= MAX_DEPTH:
        raise InvalidMessage(f"{what} is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, Mapping):
        items = {}
        for k, v in value.items():
            if isinstance(k, str):
                key = check_text(k, what)
            elif coerce and (k is None or isinstance(k, int | float)):
                key = str(k)
            else:
                raise InvalidMessage(f"{what} has a {type(k).__name__} key {k!r:.40}; keys must be strings")
            items[key] = _reference(v, what, depth + 1, coerce, freeze)
        return FrozenDict(items) if freeze else items
    if isinstance(value, list | tuple):
        seq = [_reference(v, what, depth + 1, coerce, freeze) for v in value]
        return FrozenList(seq) if freeze else seq
    return value


def _typed(value: Any) -> Any:
    """``value`` with every container's and scalar's exact type spelled out."""
    if isinstance(value, dict):
        return (type(value), [(type(k), k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return (type(value), [_typed(v) for v in value])
    return (type(value), value if value == value else "nan")


def _outcome(run: Any) -> Any:
    try:
        return _typed(run())
    except InvalidMessage as exc:
        return (InvalidMessage, str(exc))


_texts = st.one_of(
    st.text(max_size=6),
    st.text(max_size=6).map(Text),
    # Around the surrogates: lone ones are refused, pairs joined (hypothesis leaves them out by default).
    st.text(alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010, categories=None), max_size=3),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers().map(Number),
    st.floats(),
    st.floats(allow_nan=False).map(Ratio),
    _texts,
    st.binary(max_size=4),
    st.binary(max_size=4).map(bytearray),
    st.frozensets(st.integers(), max_size=2),  # kept as it is, for the store's JSON check to name
)
_keys = st.one_of(_texts, st.integers(), st.floats(allow_nan=False), st.none(), st.booleans())
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.lists(inner, max_size=3).map(FrozenList),
        st.dictionaries(_keys, inner, max_size=3),
        st.dictionaries(st.text(max_size=4), inner, max_size=3).map(OrderedDict),
        st.dictionaries(st.text(max_size=4), inner, max_size=3).map(FrozenDict),
    ),
    max_leaves=20,
)


@settings(max_examples=examples(400), deadline=None)
@given(_values, st.booleans(), st.booleans())
def test_it_gives_what_the_general_rules_give(value: Any, coerce: bool, freeze: bool) -> None:
    fast = _outcome(lambda: normalize_json(value, "value", coerce_keys=coerce, freeze=freeze))
    slow = _outcome(lambda: _reference(value, "value", 0, coerce, freeze))
    assert fast == slow


@pytest.mark.parametrize("container", [dict, list, tuple])
def test_nesting_to_the_limit_is_taken_and_past_it_refused_by_either_path(container: type) -> None:
    value: Any = "leaf"
    for _ in range(MAX_DEPTH):
        value = {"k": value} if container is dict else container([value])
    assert _typed(normalize_json(value)) == _typed(_reference(value, "value", 0, False, False))
    deeper = {"k": value} if container is dict else container([value])
    with pytest.raises(InvalidMessage, match="nested more than"):
        normalize_json(deeper)
    with pytest.raises(InvalidMessage, match="nested more than"):
        _reference(deeper, "value", 0, False, False)


def test_a_strands_message_shares_nothing_with_the_dict_it_came_from() -> None:
    given_dict: dict[str, Any] = {
        "role": "assistant",
        "content": [{"toolUse": {"toolUseId": "t1", "name": "lookup", "input": {"ids": [1, 2], "q": "x"}}}],
        "metadata": {"usage": {"inputTokens": 3}},
    }
    message = Message.from_strands(given_dict)
    before = message.to_strands()
    given_dict["content"][0]["toolUse"]["input"]["ids"].append(3)
    given_dict["content"][0]["toolUse"]["input"]["q"] = "changed"
    given_dict["content"].append({"text": "more"})
    given_dict["metadata"]["usage"]["inputTokens"] = 99
    assert message.to_strands() == before
    assert message.content[0]["toolUse"]["input"] == {"ids": [1, 2], "q": "x"}


def test_a_value_kept_as_it_is_still_counts_toward_the_nesting_limit() -> None:
    # A set is kept for the store's JSON check to name, but not past the nesting limit.
    value: Any = frozenset({1})
    for _ in range(MAX_DEPTH):
        value = [value]
    with pytest.raises(InvalidMessage, match="nested more than"):
        normalize_json(value)
    with pytest.raises(InvalidMessage, match="nested more than"):
        _reference(value, "value", 0, False, False)
    shallower: Any = value[0]
    assert _typed(normalize_json(shallower)) == _typed(_reference(shallower, "value", 0, False, False))


def _thawed_reference(value: Any) -> Any:
    """``thaw`` as written before its fast paths: any mapping a ``dict``, any list or tuple a ``list``."""
    if isinstance(value, Mapping):
        return {k: _thawed_reference(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_thawed_reference(v) for v in value]
    return value


def _containers(value: Any) -> list[int]:
    if isinstance(value, Mapping):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list | tuple):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


@settings(max_examples=examples(400), deadline=None)
@given(_values)
def test_thaw_gives_what_the_general_rule_gives_and_shares_no_container(value: Any) -> None:
    # A host is handed thawed items it may change: the same values of the same types, in
    # new containers, whatever mix of frozen, plain and other containers they came in.
    thawed = thaw(value)
    assert _typed(thawed) == _typed(_thawed_reference(value))
    assert not set(_containers(thawed)) & set(_containers(value))
