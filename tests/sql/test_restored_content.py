"""A restored view holds each message's content as its stored JSON text until first use.

Decoded, the content blocks of a short message cost several times its text (a frozen
dict and list per block); the text they were read from is the smaller form of the same
values. These tests hold the restore to that (nothing decoded by opening a conversation,
nor by the view's tool-pair rules and an idle ``before_model_call``) and every public way
of reading a restored message to the values a live one gives: equal, immutable, pickled,
copied, dumped and shown alike.
"""

from __future__ import annotations

import copy
import pickle
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from contextledger import Ledger, Message, ReductionPlan
from contextledger.conversation.conversation import Conversation
from tests.soak import examples

# Test-only look beneath Message's __dict__ property: whether the content was decoded yet.
_raw = BaseModel.__dict__["__dict__"].__get__


def decoded(message: Message) -> bool:
    """Whether ``message`` holds its content decoded (a live one always does)."""
    return "content" in _raw(message)


def turn(n: int) -> list[Message]:
    """A turn touching every kind the codec treats specially: tools, bytes, an escaped key, non-ASCII text."""
    tool = f"tool-{n}"
    return [
        Message.user(f"question {n} \N{SNOWMAN} caf\u00e9", metadata={"custom": {"tag": n}}),
        Message.tool_use(tool, "lookup", {"query": f"q{n}", "__contextledger_bytes__": "not a tag"}, text="looking"),
        Message(
            role="user",
            content=[
                {
                    "toolResult": {
                        "toolUseId": tool,
                        "status": "success",
                        "content": [
                            {"text": f"result {n}"},
                            {"image": {"format": "png", "source": {"bytes": b"PNG\x00"}}},
                        ],
                    }
                }
            ],
        ),
        Message.assistant(f"answer {n}", metadata={"usage": {"inputTokens": 10 + n, "outputTokens": 2}}),
    ]


def build(ledger: Ledger, session: str, turns: int = 3) -> list[Message]:
    conversation = ledger.conversation(session, "agent")
    sent = [m for n in range(turns) for m in turn(n)]
    conversation.append(*sent)
    return sent


@pytest.fixture
def ledger(ledger_url: str) -> Any:
    """A ledger on each SQL engine (SQLite, PostgreSQL); every open restores from the rows (no view is shared)."""
    opened = Ledger.connect(ledger_url, shared_views=0)
    yield opened
    opened.close()


def test_opening_decodes_no_content(ledger: Ledger) -> None:
    build(ledger, "s")
    restored = ledger.conversation("s", "agent")
    messages = [e.message for e in restored.view]
    assert messages
    assert not any(decoded(m) for m in messages)


def test_history_holds_the_content_as_text_until_read(ledger: Ledger) -> None:
    sent = build(ledger, "s")
    ledger.conversation("s", "agent").apply_plan(
        lambda view: ReductionPlan(strategy="test", evict=tuple(view.ids[:3])), trigger="manual"
    )
    entries = ledger.history("s", "agent")
    assert {e.status for e in entries} == {"evicted", "active"}  # the view rules widen the plan to whole turns
    assert not any(decoded(e.message) for e in entries)  # listed, previewed by id and status: nothing decoded
    assert [e.message for e in entries] == sent  # compared by value: the stored texts against the live content
    assert [e.message.content for e in entries] == [m.content for m in sent]
    assert all(decoded(e.message) for e in entries)  # read: decoded once, held decoded


def test_tool_pair_rules_and_an_idle_model_call_decode_nothing(ledger: Ledger) -> None:
    sent = build(ledger, "s")
    restored: Conversation = ledger.conversation("s", "agent")
    view = restored.view
    assert view.dangling_tool_uses() == []
    assert view.orphan_results() == []
    assert view.groups == [[0], [1, 2], [3], [4], [5, 6], [7], [8], [9, 10], [11]]
    assert [e.message.tool_use_ids for e in view] == [m.tool_use_ids for m in sent]
    assert [e.message.tool_result_ids for e in view] == [m.tool_result_ids for m in sent]
    assert [e.message.tool_ids for e in view] == [m.tool_ids for m in sent]
    assert [e.message.pinned for e in view] == [False] * len(sent)
    assert view.projected_input_tokens > 0
    restored.before_model_call()
    assert not any(decoded(e.message) for e in restored.view)


def test_a_restored_message_reads_as_the_live_one(ledger: Ledger) -> None:
    sent = build(ledger, "s")
    for read in (
        lambda m: m,
        lambda m: m.content,
        lambda m: m.model_dump(),
        lambda m: m.model_dump_json(),
        lambda m: m.to_record(),
        lambda m: repr(m),
        lambda m: list(m),
        lambda m: list(m.__dict__),
        lambda m: pickle.loads(pickle.dumps(m)),
        lambda m: copy.deepcopy(m),
        lambda m: copy.copy(m),
        lambda m: m.plain_text,
        lambda m: m.with_pin(True),
        lambda m: m.model_copy(update={"role": "user"}),
    ):
        # A fresh restore for each reading, so each one is the first use of the content.
        restored = [e.message for e in ledger.conversation("s", "agent").view]
        assert not any(decoded(m) for m in restored)
        assert [read(m) for m in restored] == [read(m) for m in sent]
        assert all(decoded(m) for m in restored)


def test_to_strands_of_plain_text_gives_a_copy_and_decodes_nothing(ledger: Ledger) -> None:
    sent = build(ledger, "s")
    restored = [e.message for e in ledger.conversation("s", "agent").view]
    given = [m.to_strands() for m in restored]
    assert given == [m.to_strands() for m in sent]
    # The ASCII answers were parsed from their text; the others (non-ASCII, bytes, an
    # escaped key) take the decoded content.
    assert [decoded(m) for m in restored] == [n % 4 != 3 for n in range(len(sent))]
    given[3]["content"][0]["text"] = "changed"  # a copy: the message keeps its content
    assert restored[3].content == sent[3].content
    assert restored[3].to_strands()["content"] == [{"text": "answer 0"}]


def test_peek_content_reads_plain_text_and_decodes_nothing(ledger: Ledger) -> None:
    sent = build(ledger, "s")
    restored = [e.message for e in ledger.conversation("s", "agent").view]
    assert [m.peek_content() for m in restored] == [m.content for m in sent]
    # As to_strands: the ASCII answers were parsed from their text and stay undecoded.
    assert [decoded(m) for m in restored] == [n % 4 != 3 for n in range(len(sent))]
    # A message holding its content decoded (every live one) gives that content itself.
    assert all(m.peek_content() is m.content for m in sent)
    assert restored[0].peek_content() is restored[0].content


def test_iterating_a_restored_view_yields_what_the_view_held_when_it_began(ledger: Ledger) -> None:
    sent = build(ledger, "s")
    conversation = ledger.conversation("s", "agent")
    view = conversation.view
    walking = iter(view)  # entries built one at a time as the walk reaches them
    first = next(walking)
    conversation.append(Message.user("after the walk began"))  # extends the list the view shares
    rest = list(walking)
    assert [e.message for e in [first, *rest]] == sent
    assert [e.entry_id for e in [first, *rest]] == view.ids
    assert list(view) == list(view.entries)


def test_entries_dump_and_compare_decoded(ledger_url: str) -> None:
    # Pydantic's serializer reads a nested message through its __dict__ as well.
    with Ledger.connect(ledger_url) as ledger:
        build(ledger, "s")
        live = ledger.conversation("s", "agent").view.entries
    with Ledger.connect(ledger_url) as ledger:
        restored = ledger.conversation("s", "agent").view.entries
        assert not any(decoded(e.message) for e in restored)
        assert [e.model_dump() for e in restored] == [e.model_dump() for e in live]
        assert [e.model_dump_json() for e in restored] == [e.model_dump_json() for e in live]
        assert list(restored) == list(live)


def test_decoded_content_is_held_once_and_stays_read_only(ledger: Ledger) -> None:
    build(ledger, "s")
    message = ledger.conversation("s", "agent").view[2].message
    content = message.content
    assert message.content is content
    assert message.model_dump()["content"] == content
    assert message.content is content  # dumping did not decode a second copy
    with pytest.raises(TypeError):
        content.append({"text": "x"})
    with pytest.raises(TypeError):
        content[0]["toolResult"]["content"][0]["text"] = "changed"


def test_threads_decoding_at_once_share_one_content(ledger: Ledger) -> None:
    build(ledger, "s", turns=20)
    messages = [e.message for e in ledger.conversation("s", "agent").view]
    seen: list[list[Any]] = [[], []]
    barrier = threading.Barrier(2)

    def read(slot: int) -> None:
        barrier.wait()
        seen[slot].extend(m.content for m in messages)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert all(a is b for a, b in zip(*seen, strict=True))
    assert all(m.content is c for m, c in zip(messages, seen[0], strict=True))


KINDS = ("text", "toolUse", "toolResult", "cl_encrypted")  # block keys whose shape the ledger checks
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | texts | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
blocks = st.one_of(
    st.builds(lambda t: {"text": t}, texts),
    st.builds(
        lambda i, v: {"toolUse": {"toolUseId": f"t{i}", "name": "f", "input": v}}, st.integers(0, 3), json_values
    ),
    st.builds(lambda i: {"toolResult": {"toolUseId": f"t{i}", "content": [{"text": "r"}]}}, st.integers(0, 3)),
    st.dictionaries(texts.filter(lambda k: k not in KINDS), json_values, min_size=1, max_size=2),
)


@settings(max_examples=examples(40), deadline=None)
@given(contents=st.lists(st.lists(blocks, min_size=1, max_size=3), min_size=1, max_size=4))
def test_any_content_restores_equal(
    tmp_path_factory: pytest.TempPathFactory, contents: list[list[dict[str, Any]]]
) -> None:
    directory = tmp_path_factory.mktemp("restore")
    with Ledger.connect(f"sqlite:///{directory / 'ledger.db'}") as ledger:
        sent = [Message(role="user", content=c) for c in contents]
        ledger.conversation("s", "agent").append(*sent)
        restored = [e.message for e in ledger.conversation("s", "agent").view]
        assert [m.tool_ids for m in restored] == [m.tool_ids for m in sent]
        assert restored == sent
        assert [m.model_dump() for m in restored] == [m.model_dump() for m in sent]
