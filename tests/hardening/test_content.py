"""Hostile content round-trips exactly or is refused with a typed error, on every backend.

Each test reopens the conversation from the store (a restore) and compares it with the
live one: what the live view holds must be what the store gives back.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from contextledger import Conversation, Message, ReductionPlan, SummarizingConversationManager
from contextledger.core.changeset import ContentRevision
from contextledger.errors import ConfigurationError, ContextWindowOverflowError, InvalidMessage
from contextledger.model.messages import MAX_DEPTH, MAX_ID_LENGTH
from contextledger.model.tokens import CharTokenCounter
from contextledger.stores.capabilities import CompleteStore

TAG = "__contextledger_bytes__"


def _restored(store: CompleteStore, conv: Conversation) -> Conversation:
    return Conversation(store, conv.session_id, conv.agent_id)


def _messages(conv: Conversation) -> list[Message]:
    return [e.message for e in conv.view]


def _assert_round_trip(store: CompleteStore, conv: Conversation) -> None:
    again = _restored(store, conv)
    assert _messages(again) == _messages(conv)
    assert [m.to_strands() for m in _messages(again)] == [m.to_strands() for m in _messages(conv)]
    history = store.history(conv.session_id, conv.agent_id)
    assert [h.message for h in history if h.status == "active"] == [e.message for e in conv.view if e.kind == "message"]


# -- 1. the internal bytes tag -------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        {TAG: "not base64 at all!"},
        {TAG: "aGk="},
        {"~" + TAG: "x", "~~" + TAG: [1]},
        {TAG: "x", "other": 1},
        {"nested": [{TAG: {TAG: "deep"}}]},
    ],
    ids=["invalid-base64", "valid-base64", "escaped-looking", "with-other-keys", "nested"],
)
def test_user_data_holding_the_bytes_tag_round_trips(store: CompleteStore, payload: dict[str, Any]) -> None:
    conv = Conversation(store, "s")
    call = Message.tool_use("t1", "lookup", payload)
    result = Message.tool_result("t1", [{"json": payload}])
    noted = Message(role="user", content=[{"text": "hi"}], metadata={"custom": copy.deepcopy(payload)})
    binary = Message(role="user", content=[{"image": {"format": "png", "source": {"bytes": b"\x89PNG\x00"}}}])
    conv.append(call, result, noted, binary)
    again = _restored(store, conv)
    assert again.view[0].message.content[0]["toolUse"]["input"] == payload
    assert again.view[1].message.content[0]["toolResult"]["content"][0]["json"] == payload
    assert again.view[2].message.metadata["custom"] == payload
    assert again.view[3].message.content[0]["image"]["source"]["bytes"] == b"\x89PNG\x00"
    _assert_round_trip(store, conv)


def test_data_written_by_0_1_still_reads() -> None:
    # 0.1 wrote bytes as {TAG: base64} and every other key verbatim.
    record = {
        "message_id": "m1",
        "role": "user",
        "content": [{"document": {"name": "d", "source": {"bytes": {TAG: "AAEC"}}}}, {"text": "~x"}],
        "metadata": {"custom": {"k": {"~y": 1}}},
    }
    message = Message.from_record(record)
    assert message.content[0]["document"]["source"]["bytes"] == b"\x00\x01\x02"
    assert message.content[1] == {"text": "~x"}
    assert message.metadata == {"custom": {"k": {"~y": 1}}}
    assert Message.from_record(message.to_record()) == message


# -- 2. NUL characters ------------------------------------------------------------------------


def _nul_summarizer(messages: list[Message]) -> str:
    return "summary quoting \x00 and " + " | ".join(m.plain_text for m in messages)


def test_nul_is_stored_losslessly_everywhere(store: CompleteStore) -> None:
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2, summarizer=_nul_summarizer)
    conv = Conversation(store, "se\x00ssion", "ag\x00ent", manager=manager)
    msgs = [
        Message.user("a\x00b", message_id="id\x00one"),
        Message.tool_use("t\x00", "lo\x00okup", {"k\x00": "v\x00"}),
        Message.tool_result("t\x00", "r\x00"),
        Message(role="assistant", content=[{"text": "\x00"}], metadata={"custom": {"n\x00": "\x00"}}),
        Message.user("next \x00"),
        Message.assistant("done \x00"),
    ]
    conv.append(*msgs)
    conv.pin("id\x00one")
    conv.set_agent_state({"state\x00": "v\x00"})
    _assert_round_trip(store, conv)
    reduction = conv.reduce("manual")
    assert reduction is not None
    assert reduction.summary_id is not None
    (summary,) = store.summaries("se\x00ssion", "ag\x00ent")
    assert summary.content.startswith("summary quoting \x00")
    _assert_round_trip(store, conv)
    # A reactive reduction records an error message quoting NUL.
    conv.append(Message.user("more \x00"), Message.assistant("again"), Message.user("last"))
    conv.before_model_call()
    conv.after_model_call(error=ContextWindowOverflowError("too long: \x00 quoted"))
    reactive = [r for r in store.reductions("se\x00ssion", "ag\x00ent") if r.trigger == "reactive"]
    assert reactive
    assert reactive[-1].error is not None
    assert "\x00" in reactive[-1].error
    _assert_round_trip(store, conv)
    again = _restored(store, conv)
    assert again.agent_state == {"state\x00": "v\x00"}
    assert again.view.ids == conv.view.ids
    assert {e.entry_id for e in store.evictions("se\x00ssion", "ag\x00ent")}
    assert store.sessions()[0].session_id == "se\x00ssion"
    assert store.agents("se\x00ssion") == ["ag\x00ent"]


# -- 3. lone surrogates ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: Message.user("truncated emoji \ud83d"),
        lambda: Message.tool_use("t", "n", {"k": "\udcff"}),
        lambda: Message.tool_use("t", "n", {"\ud800": 1}),
        lambda: Message(role="user", content=[{"text": "x"}], metadata={"custom": {"k": "\udc80"}}),
        lambda: Message.user("x", message_id="id\ud800"),
        lambda: Message.tool_result("t\udfff", "x"),
    ],
    ids=["text", "tool-input", "key", "metadata", "message-id", "tool-use-id"],
)
def test_lone_surrogates_are_refused_at_the_boundary(build: Any) -> None:
    with pytest.raises(InvalidMessage, match="surrogate"):
        build()


def test_lone_surrogates_in_ids_and_state_are_refused(store: CompleteStore) -> None:
    for session_id, agent_id in (("s\ud800", "a"), ("s", "a\udfff")):
        with pytest.raises(ConfigurationError, match="surrogate"):
            Conversation(store, session_id, agent_id)
    conv = Conversation(store, "s")
    conv.append(Message.user("canary"))
    with pytest.raises(InvalidMessage, match="surrogate"):
        conv.set_agent_state({"k": "\ud800"})
    assert [m.plain_text for m in _messages(_restored(store, conv))] == ["canary"]


# -- 4. the live view equals a restored view, and cannot be changed in place -------------------


def test_live_view_equals_restored_view(store: CompleteStore) -> None:
    conv = Conversation(store, "s")
    odd = Message.tool_use("t", "n", {"by_int": {1: "one", 2: (3, 4)}, "pair": "\ud83d\ude00", "tuple": (1, (2, 3))})
    conv.append(odd, Message.tool_result("t", [{"json": {7: [(8,)]}}]))
    live = _messages(conv)
    assert live[0].content[0]["toolUse"]["input"] == {
        "by_int": {"1": "one", "2": [3, 4]},
        "pair": "\U0001f600",
        "tuple": [1, [2, 3]],
    }
    assert live[1].content[0]["toolResult"]["content"][0]["json"] == {"7": [[8]]}
    _assert_round_trip(store, conv)


def test_view_and_messages_are_not_mutable_in_place(store: CompleteStore) -> None:
    conv = Conversation(store, "s")
    conv.append(Message.tool_use("t", "n", {"q": ["a"]}), Message.tool_result("t", "ok"))
    before = [m.to_strands() for m in _messages(conv)]
    message = conv.view[0].message
    attempts: list[Callable[[], object]] = [
        lambda: message.content[0].__setitem__("text", "x"),
        lambda: message.content.append({"text": "x"}),
        lambda: message.content[0]["toolUse"]["input"]["q"].append("b"),
        lambda: message.metadata.update({"x": 1}),
        lambda: conv.view[1].message.content[0]["toolResult"]["content"].clear(),
    ]
    for attempt in attempts:
        with pytest.raises(TypeError):
            attempt()
    with pytest.raises(Exception, match="frozen"):
        message.role = "user"  # type: ignore[misc]
    assert [m.to_strands() for m in _messages(conv)] == before
    assert [m.to_strands() for m in _messages(_restored(store, conv))] == before
    # What a host gets to edit is a copy, and editing it changes nothing in the ledger.
    host = message.to_strands()
    host["content"][0]["toolUse"]["input"]["q"].append("b")
    mutable = copy.deepcopy(message.content)
    mutable[0]["toolUse"]["name"] = "other"
    assert [m.to_strands() for m in _messages(conv)] == before


# -- 5. typed errors for deep nesting, bad state keys and bad settings -------------------------


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": [value]}
    return value


def test_deep_nesting_is_a_typed_error(store: CompleteStore) -> None:
    conv = Conversation(store, "s")
    with pytest.raises(InvalidMessage, match="nested"):
        conv.append(Message.tool_use("t", "n", _nested(1000)))
    with pytest.raises(InvalidMessage, match="nested"):
        conv.set_agent_state({"deep": _nested(1000)})
    ok = Message.tool_use("t", "n", _nested(MAX_DEPTH // 2 - 4))
    conv.append(ok, Message.tool_result("t", "ok"))
    _assert_round_trip(store, conv)


def test_agent_state_with_a_non_string_key_is_a_typed_error(store: CompleteStore) -> None:
    conv = Conversation(store, "s")
    conv.append(Message.user("canary"))
    for bad in ({1: "a"}, {None: "a"}, {("t",): 1}):
        with pytest.raises(InvalidMessage, match="keys are strings"):
            conv.set_agent_state(bad)  # type: ignore[arg-type]
    conv.set_agent_state({"k": {1: (2,)}})
    assert conv.agent_state == {"k": {"1": [2]}}
    assert _restored(store, conv).agent_state == conv.agent_state


@pytest.mark.parametrize(
    "options",
    [
        {"per_message": -5},
        {"per_media": -1},
        {"chars_per_token": 0},
        {"chars_per_token": float("nan")},
        {"per_message": 1.5},
    ],
)
def test_token_counter_settings_are_checked(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        CharTokenCounter(**options)
    assert CharTokenCounter(per_message=0).count(Message.user("")) == 0


def test_a_revision_original_is_not_mutable_in_place(store: CompleteStore) -> None:
    conv = Conversation(store, "s")
    conv.append(Message.tool_use("t", "n", {"q": ["a"]}), Message.tool_result("t", "long output " * 20))
    result_id = conv.view[1].entry_id
    conv.apply_plan(
        lambda view: ReductionPlan(
            strategy="trim", revisions=(ContentRevision(message_id=result_id, content=[{"text": "cut"}]),)
        ),
        trigger="manual",
    )
    (revision,) = store.revisions("s", "default", result_id)
    before = copy.deepcopy(revision.original)
    attempts: list[Callable[[], object]] = [
        lambda: revision.original.append({"text": "x"}),
        lambda: revision.original[0].__setitem__("text", "x"),
        lambda: revision.original[0]["toolResult"]["content"].clear(),
    ]
    for attempt in attempts:
        with pytest.raises(TypeError):
            attempt()
    assert revision.original == before
    assert store.revisions("s", "default", result_id)[0].original == before


@pytest.mark.parametrize("length", [MAX_ID_LENGTH, 10_000])
def test_long_ids_behave_the_same_on_every_backend(store: CompleteStore, length: int) -> None:
    long = "i" * length
    if length > MAX_ID_LENGTH:
        for session, agent in ((long, "a"), ("s", long)):
            with pytest.raises(ConfigurationError, match="at most 255"):
                Conversation(store, session, agent)
        with pytest.raises(InvalidMessage, match="at most 255"):
            Message.user("hi", message_id=long)
        assert store.sessions() == []
        return
    conv = Conversation(store, long, long)
    conv.append(Message.user("hi", message_id=long))
    restored = Conversation(store, long, long)
    assert restored.view.ids == [long]
    assert [h.message.message_id for h in store.history(long, long)] == [long]
