"""The fast paths give exactly what the general paths give.

* ``Message.from_record`` reads a stored record without pydantic re-validation; the
  message it builds must equal (values, container types, fields set) the one the
  validating constructor builds, and a record it cannot vouch for must fail the same way.
* ``message_from_json`` / ``message_from_stored_content`` build that message straight
  from the stored JSON text, and ``view_entry`` / ``trusted`` build records without
  validation: the same values, types and fields set, and the same errors for damaged rows.
* A view derives its facts (tool ids left unpaired, positions, token totals, projected
  input tokens) once and carries them over when a changeset only appends; they must be
  what a view built from scratch computes.
"""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from contextledger.core.view import View
from contextledger.errors import CorruptRecord, InvalidMessage
from contextledger.model.jsonvalues import MAX_DEPTH, decode_shared
from contextledger.model.messages import FrozenDict, FrozenList, Message, decode_blocks
from contextledger.model.records import (
    ConversationState,
    HistoryEntry,
    Snapshot,
    ViewEntry,
    history_entry,
    view_entry,
)
from contextledger.model.restored import (
    message_from_json,
    message_from_stored_content,
    restored_message,
    restored_record_message,
)
from contextledger.model.stored import Unusual, load_frozen, load_json_text
from contextledger.model.trusted import trusted
from contextledger.stores.sql import encoding
from tests.soak import examples
from tests.turns import paired_tool_turn

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


@settings(max_examples=examples(150), deadline=None)
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


def _same(fast: Message, slow: Message) -> None:
    """Equal values, the same container types all the way down, the same fields set and order."""
    assert fast == slow
    assert type(fast) is type(slow) is Message
    assert _shape(fast.content) == _shape(slow.content)
    assert _shape(fast.metadata) == _shape(slow.metadata)
    assert fast.model_fields_set == slow.model_fields_set
    assert list(fast.__dict__) == list(slow.__dict__)
    assert (fast.__pydantic_extra__, fast.__pydantic_private__) == (slow.__pydantic_extra__, slow.__pydantic_private__)


def _outcome(build: Any) -> Message | type[BaseException]:
    try:
        result: Message = build()
    except Exception as exc:  # the type is what is compared
        return type(exc)
    return result


# How each store writes the JSON text: SQLite and the hot path, Redis (compact, bytes);
# PostgreSQL's (escaped NUL) is checked in the test.
writers = st.sampled_from(
    [
        json.dumps,
        lambda v: json.dumps(v, separators=(",", ":")),
        lambda v: json.dumps(v, separators=(",", ":")).encode(),
    ]
)


@settings(max_examples=examples(150), deadline=None)
@given(messages, writers)
def test_message_from_json_equals_the_validating_constructor(message: Message, write: Any) -> None:
    record = message.to_record()
    content, metadata = write(record["content"]), write(record["metadata"])
    fast = message_from_json(message.message_id, message.role, content, metadata)
    slow = _validated({**record, "content": json.loads(content), "metadata": json.loads(metadata)})
    _same(fast, slow)
    assert fast == message
    stored = message_from_stored_content({k: v for k, v in record.items() if k != "content"}, content)
    _same(stored, slow)
    # What a restore builds: the content held as its text, decoded to the same values on use.
    _same(restored_message(message.message_id, message.role, content, metadata), slow)
    _same(restored_record_message({k: v for k, v in record.items() if k != "content"}, content), slow)
    # PostgreSQL's text is json.loads's unless it holds an escaped string: the store checks that.
    pg_content, pg_metadata = encoding.dumps(record["content"]), encoding.dumps(record["metadata"])
    if not encoding.holds_escapes(pg_content) and not encoding.holds_escapes(pg_metadata):
        _same(message_from_json(message.message_id, message.role, pg_content, pg_metadata), slow)


# Arbitrary JSON where a message's content and metadata are stored: valid messages, damaged
# rows and everything between, written with and without white space around the value.
any_json = st.recursive(
    json_scalars | st.sampled_from(["\ud800", "x\u00e9", "__contextledger_bytes__"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)
stored_content = st.one_of(
    st.lists(blocks, max_size=3).map(
        lambda b: Message(role="user", content=b or [{"text": ""}]).to_record()["content"]
    ),
    st.lists(st.dictionaries(st.sampled_from(["text", "toolUse", "toolResult", "image"]), any_json), max_size=3),
    any_json,
)
json_texts = st.builds(
    lambda value, pad: pad[0] + json.dumps(value) + pad[1],
    stored_content,
    st.sampled_from([("", ""), (" ", ""), ("", "\n"), ("", "x")]),
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.sampled_from(["m", "", "é", "x" * 256, "a\ud800"]),
    st.sampled_from(["user", "assistant", "bot"]),
    json_texts,
    st.one_of(st.none(), st.just("{}"), st.just("null"), st.just("[]"), json_texts),
)
def test_message_from_json_gives_or_refuses_what_the_general_path_does(
    message_id: str, role: str, content: str, metadata: str | None
) -> None:
    def general() -> Message:
        record: dict[str, Any] = {"message_id": message_id, "role": role, "content": json.loads(content)}
        if metadata is not None:
            record["metadata"] = json.loads(metadata)
        return _validated(record)

    fast = _outcome(lambda: message_from_json(message_id, role, content, metadata))
    slow = _outcome(general)
    restored = _outcome(lambda: restored_message(message_id, role, content, metadata))
    if isinstance(fast, Message) and isinstance(slow, Message) and isinstance(restored, Message):
        assert (restored.tool_use_ids, restored.tool_result_ids) == (slow.tool_use_ids, slow.tool_result_ids)
        assert restored.to_strands() == {**slow.to_strands(), "tracking_id": restored.message_id}
        _same(fast, slow)
        _same(restored, slow)
    else:
        # The same exception type (InvalidMessage, CorruptRecord, JSONDecodeError), raised
        # by a restore at once, never later by the first use of the content.
        assert fast == slow == restored


@pytest.mark.parametrize(
    ("content", "metadata", "error"),
    [
        ('[{"text": 1}]', None, InvalidMessage),
        ("[{}]", None, InvalidMessage),
        ('[{"toolUse": {"name": "f"}}]', None, InvalidMessage),
        ('[{"text": "lone \\ud800"}]', None, InvalidMessage),
        ('{"text": "x"}', None, InvalidMessage),
        ('[{"text": "x"}]', "[1, 2]", InvalidMessage),
        ('[{"text": "x"}]', '"meta"', InvalidMessage),
        ('[{"x": {"__contextledger_bytes__": "not base64!"}}]', None, CorruptRecord),
        ("[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2), None, InvalidMessage),
        ('[{"text": "x"}', None, json.JSONDecodeError),
        (b'[{"text": "\xff"}]', None, UnicodeDecodeError),
    ],
)
def test_message_from_json_refuses_damaged_rows_with_the_typed_error(
    content: str | bytes, metadata: str | None, error: type[Exception]
) -> None:
    with pytest.raises(error) as fast:
        message_from_json("m", "user", content, metadata)
    with pytest.raises(error):
        restored_message("m", "user", content, metadata)
    slow = _outcome(lambda: _validated({"message_id": "m", "role": "user", "content": json.loads(content)}))
    if metadata is None:
        assert type(fast.value) is slow


@settings(max_examples=examples(200), deadline=None)
@given(any_json)
def test_load_json_text_freezes_what_json_loads_parses(value: Any) -> None:
    text = json.dumps(value)
    fast = _outcome(lambda: load_json_text(text))
    slow = _outcome(lambda: load_frozen(json.loads(text)))
    if fast is Unusual and isinstance(slow, type):
        return  # refused either way: the caller's general path names the error (a lone surrogate, say)
    assert (_shape(fast) if not isinstance(fast, type) else fast) == (
        _shape(slow) if not isinstance(slow, type) else slow
    )
    with pytest.raises(Unusual):
        load_json_text(" " + text)


def _record_attributes(record: Any) -> tuple[Any, ...]:
    return (
        type(record),
        list(record.__dict__.items()),
        record.__pydantic_fields_set__,
        record.__pydantic_extra__,
        record.__pydantic_private__,
    )


def test_trusted_builds_what_model_construct_builds() -> None:
    message = Message.user("hi")
    entry = {"entry_id": "e", "kind": "summary", "seq": 3, "message": message, "tokens": 7}
    state = ConversationState(session_id="s", agent_id="a")
    for model, values in (
        (Message, dict(message.__dict__)),
        (ViewEntry, entry),
        (Snapshot, {"state": state, "entries": ()}),
    ):
        assert _record_attributes(trusted(model, dict(values))) == _record_attributes(model.model_construct(**values))


@settings(max_examples=examples(100), deadline=None)
@given(
    st.one_of(st.text(max_size=3), st.integers(0, 3), st.none()),
    st.sampled_from(["message", "summary", "other", 1]),
    st.one_of(st.integers(-3, 3), st.booleans(), st.text(max_size=2), st.floats(0, 2)),
    st.one_of(st.integers(0, 9), st.just("4"), st.none()),
)
def test_view_entry_equals_the_validating_constructor(entry_id: Any, kind: Any, seq: Any, tokens: Any) -> None:
    message = Message.user("q")
    try:
        slow = ViewEntry(entry_id=entry_id, kind=kind, seq=seq, message=message, tokens=tokens)
    except ValidationError:
        with pytest.raises(ValidationError):
            view_entry(entry_id, kind, seq, message, tokens)
        return
    fast = view_entry(entry_id, kind, seq, message, tokens)
    assert _record_attributes(fast) == _record_attributes(slow)
    assert fast.message is message


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


@settings(max_examples=examples(150), deadline=None)
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


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10), steps, st.booleans()), min_size=1, max_size=8))
def test_views_sharing_a_tail_never_see_each_others_appends(branches: list[tuple[int, list[Any], bool]]) -> None:
    """Any view of a tree of appends (siblings included) answers as a fresh view of its own entries."""
    views = [View(())]
    expected: list[list[ViewEntry]] = [[]]
    seq = 0
    for pick, specs, warm in branches:
        parent = pick % len(views)
        if warm:  # a parent whose facts are computed hands them on (and shares its index)
            views[parent].dangling_tool_uses(), views[parent].index_of("x"), views[parent].tokens
        appends = _entries(seq, specs) or _entries(seq, [("text", "a", 1)])
        seq += len(appends)
        views.append(views[parent].project(appends, set(), {}, {}, None))
        expected.append([*expected[parent], *appends])
    for view, entries in zip(views, expected, strict=True):
        fresh = View(entries)
        assert list(view) == entries
        assert len(view) == len(entries)
        assert [view[i] for i in range(-len(entries), len(entries))] == [*entries, *entries]
        assert view.dangling_tool_uses() == fresh.dangling_tool_uses()
        assert view.orphan_results() == fresh.orphan_results()
        assert view.tokens == fresh.tokens
        assert [view.index_of(e.entry_id) for e in entries] == list(range(len(entries)))
        assert all(view.index_of(e.entry_id) is None for other in expected for e in other if e not in entries)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(steps, st.lists(st.integers(0, 30), max_size=6)), min_size=1, max_size=6), st.booleans())
def test_evicting_views_carry_the_facts_a_fresh_view_computes(
    turns: list[tuple[list[Any], list[int]]], warm: bool
) -> None:
    """A view after removals (and appends in the same changeset) answers as a fresh view of its entries.

    Tool ids repeat across entries and removals split pairs, so both the carried facts
    and the cases that must be computed afresh are reached.
    """
    view = View(())
    seq = 0
    for specs, picks in turns:
        if warm:
            view.dangling_tool_uses()
        entries = list(view)
        removed = {entries[p % len(entries)].entry_id for p in picks} if entries else set()
        appends = _entries(seq, specs)
        seq += len(appends)
        view = view.project(appends, removed, {}, {}, None)
        fresh = View(view.entries)
        assert [e.entry_id for e in view] == [e.entry_id for e in entries if e.entry_id not in removed] + [
            e.entry_id for e in appends
        ]
        assert view.dangling_tool_uses() == fresh.dangling_tool_uses()
        assert view.orphan_results() == fresh.orphan_results()


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 20),
            st.integers(0, 6),
            st.lists(st.integers(0, 30), max_size=3),
            steps,
            st.booleans(),
            st.integers(0, 8),
        ),
        min_size=1,
        max_size=10,
    )
)
@example(  # an eviction from a view whose tail a child took: the child's ids must not ride into the index
    [
        (0, 0, [], [("text", "a", 1)] * 5, True, 0),
        (1, 0, [], [("text", "a", 1)], True, 0),
        (1, 2, [], [], False, 0),
        (3, 0, [], [("text", "a", 1)], False, 0),
    ]
)
def test_views_after_evictions_index_as_a_fresh_view(
    branches: list[tuple[int, int, list[int], list[Any], bool, int]],
) -> None:
    """Any view of a tree of appends and evictions finds each id where a fresh view of its entries does.

    Evictions of the oldest entries carry the position index over (with an origin);
    others, and evictions of a view whose tail a child took, index afresh. Siblings
    branch from every kind of view, so an index shared down a chain of appends, copied
    for a sibling, and carried past an eviction are all reached. Some entries come with
    older seqs (``back``), as an undo's restored entries do, and take their place by seq.
    """
    views = [View(())]
    expected: list[list[ViewEntry]] = [[]]
    seq = 0
    for pick, oldest, others, specs, warm, back in branches:
        parent = pick % len(views)
        entries = expected[parent]
        if warm:  # an index computed (or carried) before the child is made
            assert views[parent].index_of("x") is None
        removed = {e.entry_id for e in entries[:oldest]}
        removed |= {entries[p % len(entries)].entry_id for p in others if entries}
        appends = _entries(max(0, seq - back), specs)
        seq = max(seq, max(0, seq - back) + len(appends))
        views.append(views[parent].project(appends, removed, {}, {}, None))
        # In seq order, the entries kept before the appends of equal seq (as a stable sort keeps them).
        expected.append(sorted([*(e for e in entries if e.entry_id not in removed), *appends], key=lambda e: e.seq))
    everything = {e.entry_id for entries in expected for e in entries}
    for view, entries in zip(views, expected, strict=True):
        assert [e.entry_id for e in view] == [e.entry_id for e in entries]
        assert [view.index_of(e.entry_id) for e in entries] == list(range(len(entries)))
        held = {e.entry_id for e in entries}
        assert all(view.index_of(i) is None for i in everything - held)
        messages = [e.message for e in entries]
        if messages:  # every message found where it is: a retry of the whole view
            assert view.stored_as(messages) == messages
        assert view.stored_as([Message.user("new")]) is None


def test_evicting_the_oldest_entries_carries_the_position_index() -> None:
    """A sliding window's eviction hands its index on, so the next append reads no entry of the window to index it."""
    view = View(_entries(0, [("text", "q", 1)] * 8))
    assert view.index_of("x") is None  # the index computed
    kept = list(view)[3:]
    child = view.project(_entries(8, [("text", "q", 1)]), {e.entry_id for e in list(view)[:3]}, {}, {}, None)
    assert "_positions" in child.__dict__
    assert child._origin == 3
    assert [child.index_of(e.entry_id) for e in kept] == list(range(5))
    grandchild = child.project(_entries(9, [("text", "q", 1)]), set(), {}, {}, None)  # an append shares it
    assert grandchild._positions is child._positions
    assert grandchild.index_of(list(grandchild)[-1].entry_id) == 6
    assert child.index_of(list(grandchild)[-1].entry_id) is None
    middle = view.project((), {list(view)[4].entry_id}, {}, {}, None)  # not the oldest: indexed afresh
    assert "_positions" not in middle.__dict__
    assert middle.index_of(list(view)[5].entry_id) == 4


def test_a_pair_safe_eviction_carries_the_tool_facts() -> None:
    """Evicting whole tool pairs from a view whose facts are known hands them on (no recount over the window)."""
    view = View(_entries(0, [("text", "q", 1), ("use", "a", 1), ("result", "a", 1), ("use", "b", 1), ("text", "q", 1)]))
    assert view.dangling_tool_uses() == ["b"]
    evicted = {e.entry_id for e in list(view)[:3]}  # the question and the pair a
    child = view.project(_entries(5, [("result", "b", 1)]), evicted, {}, {}, None)
    assert "_tool_facts" in child.__dict__  # carried, not left to be computed afresh
    assert child.dangling_tool_uses() == []
    assert child.orphan_results() == []
    split = view.project((), {list(view)[2].entry_id}, {}, {}, None)  # the result of a, its call stays
    assert "_tool_facts" not in split.__dict__
    assert split.dangling_tool_uses() == ["a", "b"]


def test_appending_to_a_view_copies_no_entry() -> None:
    """A chain of appends shares one list and one index: each view costs O(appended), not O(window)."""
    parent = View(())
    for n in range(50):
        parent = parent.project(_entries(n * 2, [("text", "a", 1), ("text", "a", 1)]), set(), {}, {}, None)
        assert parent.index_of("x") is None
    child = parent.project(_entries(100, [("text", "a", 1)]), set(), {}, {}, None)
    assert child._items is parent._items
    assert child._positions is parent._positions
    sibling = parent.project(_entries(200, [("text", "a", 1)]), set(), {}, {}, None)  # a second branch copies
    assert sibling._items is not parent._items
    assert len(parent) == 100
    assert len(child) == len(sibling) == 101
    assert child[-1] != sibling[-1]
    with pytest.raises(IndexError):
        parent[100]


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.sampled_from(["q", "a", "use", "result"]), min_size=1, max_size=6),
    st.integers(0, 5),
    st.booleans(),
    st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
)
def test_an_appending_changeset_equals_the_validated_one(
    kinds: list[str], version: int, count_changed: bool, manager_state: dict[str, Any] | None
) -> None:
    """The changeset of a plain append is built without validation: it must equal the validated one."""
    from contextledger.core.building import build_changeset
    from contextledger.core.changeset import Changeset, Edit
    from contextledger.model.tokens import CharTokenCounter

    made = {
        "q": lambda: Message.user("q"),
        "a": lambda: Message.assistant("a"),
        "use": lambda: Message.tool_use("t", "f", {"x": 1}),
        "result": lambda: Message.tool_result("t", "r"),
    }
    messages = tuple(made[k]() for k in kinds)
    state = ConversationState(session_id="s", agent_id="a", version=version, next_seq=version * 3)
    changeset, _ = build_changeset(
        state,
        View(()),
        Edit(appends=messages),
        counter=CharTokenCounter(),
        model_call_count=version,
        count_changed=count_changed,
        manager_state=manager_state,
    )
    validated = Changeset.model_validate(changeset.model_dump())
    assert changeset == validated
    assert changeset.model_fields_set == set(Changeset.model_fields)  # as the constructor given every field
    assert [e.message for e in changeset.appends] == list(messages)


def test_an_append_counts_each_message_once_and_encodes_its_json_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """A turn of four messages: four token counts, and each content and metadata encoded once (SQLite hot path)."""
    from contextledger import Ledger
    from contextledger.model import jsonvalues
    from contextledger.stores.sql.write import sqlite_hot

    counted: list[str] = []

    class Counting:
        def count(self, message: Message) -> int:
            counted.append(message.message_id)
            return 1

    encoded: list[int] = []
    dumps = jsonvalues.dumps_encoded

    def counting_dumps(value: Any, *, compact: bool = False) -> str:
        encoded.append(id(value))
        return dumps(value, compact=compact)

    ledger = Ledger.connect(f"sqlite:///{tmp_path / 'once.db'}")
    conversation = ledger.conversation("s", "a", token_counter=Counting())
    conversation.append(Message.user("creates the conversation"))
    counted.clear()
    monkeypatch.setattr(sqlite_hot, "dumps_encoded", counting_dumps)
    turn = paired_tool_turn()
    conversation.append(*turn)
    ledger.close()
    assert counted == [m.message_id for m in turn]
    assert sorted(encoded) == sorted(id(v) for m in turn for v in (m.content, m.metadata))


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_an_open_conversation_holds_appended_text_once(url: str, tmp_path: Any) -> None:
    """The view shares the appended messages (and their text): the ledger keeps no copy, encoded or not."""
    from contextledger import Ledger

    ledger = Ledger.connect(url if url != "sqlite" else f"sqlite:///{tmp_path / 'once.db'}")
    conversation = ledger.conversation("s", "a")
    turns = [[Message.user(f"q{n}" * 50), Message.assistant(f"a{n}" * 50)] for n in range(20)]
    for turn in turns:
        conversation.append(*turn)
    appended = [m for turn in turns for m in turn]
    view = conversation.view
    assert all(entry.message is message for entry, message in zip(view, appended, strict=True))
    # One list of entries for the open conversation, whatever number of commits made it.
    assert len(view._items) == len(appended)
    ledger.close()


def test_a_restored_view_holds_each_name_once(tmp_path: Any) -> None:
    """What every restored entry has in common is one object, not a copy per entry.

    The fields-set of each record class, the role, every key of the content blocks and
    an empty metadata are the same objects across the whole view (SQLite's rows, and
    the decode Redis uses), so what a restored conversation holds grows with its text,
    not with a copy of the names per message.
    """
    from contextledger import Ledger

    ledger = Ledger.connect(f"sqlite:///{tmp_path / 'names.db'}")
    conversation = ledger.conversation("s", "a")
    for n in range(3):
        conversation.append(
            Message.user(f"q{n}"),
            Message.tool_use(f"t{n}", "lookup", {"query": f"x{n}"}),
            Message.tool_result(f"t{n}", f"r{n}"),
            Message.assistant(f"a{n}"),
        )
    view = ledger.conversation("s", "a").view
    ledger.close()
    records = [e.message.to_record() for e in view]
    stored = [message_from_stored_content(r, json.dumps(r["content"])) for r in records]
    for messages in ([e.message for e in view], stored):
        assert len({id(m.__pydantic_fields_set__) for m in messages}) == 1
        assert messages[0].__pydantic_fields_set__ == set(Message.model_fields)
        assert len({id(m.metadata) for m in messages}) == 1
        assert messages[0].metadata == {}
        assert len({id(m.role) for m in messages if m.role == "user"}) == 1
        keys: dict[str, set[int]] = {}
        for m in messages:
            for block in m.content:
                for body in (block, *(v for v in block.values() if isinstance(v, dict))):
                    for key in body:
                        keys.setdefault(key, set()).add(id(key))
        assert {"text", "toolUse", "toolUseId", "toolResult", "input"} <= keys.keys()
        assert all(len(ids) == 1 for ids in keys.values()), keys
    assert len({id(e.__pydantic_fields_set__) for e in view}) == 1


@settings(max_examples=examples(100), deadline=None)
@given(
    st.one_of(st.text(max_size=2), st.none()),
    st.one_of(st.integers(-3, 3), st.booleans(), st.just("2")),
    st.sampled_from(["active", "evicted", "other", 1]),
    st.one_of(st.booleans(), st.integers(0, 1), st.just("yes")),
    st.one_of(st.datetimes(timezones=st.just(UTC)), st.datetimes(), st.just("2026-01-02T03:04:05+00:00"), st.none()),
    st.one_of(st.none(), st.text(max_size=2), st.integers(0, 1)),
    st.one_of(st.integers(0, 3), st.floats(0, 2), st.just("1")),
)
def test_history_entry_equals_the_validating_constructor(
    agent_id: Any, seq: Any, status: Any, pinned: Any, created_at: Any, evicted_by: Any, version: Any
) -> None:
    """A history row taken as it is builds exactly what validation builds, and refuses what it refuses."""
    message = Message.user("q")
    values = ("s", agent_id, seq, message, status, pinned, 4, created_at, evicted_by, 0, 1, version)
    try:
        slow = HistoryEntry(**dict(zip(HistoryEntry.model_fields, values, strict=True)))
    except ValidationError:
        with pytest.raises(ValidationError):
            history_entry(*values)
        return
    fast = history_entry(*values)
    assert _record_attributes(fast) == _record_attributes(slow)
    assert fast.message is message
