"""The mapping between LangChain and ledger messages: lossless, refused when it would not be."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage

from contextledger import Ledger, Message
from contextledger.errors import InvalidMessage
from contextledger.integrations.kept import TEXT_DIGEST, fingerprinted
from contextledger.integrations.langchain import (
    ViewRenderer,
    convert,
    from_ledger,
    from_view,
    project,
    to_ledger,
    to_ledgers,
)
from contextledger.integrations.langchain.convert import KEY
from contextledger.managers.repair import INTERRUPTED_TOOL_TEXT
from contextledger.model.jsonvalues import thaw
from contextledger.stores.capabilities import CompleteStore
from tests.langchain.strategies import messages

EVERY_KIND: list[BaseMessage] = [
    HumanMessage(content=["look", {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}], id="h1"),
    AIMessage(
        content=[
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "c1", "name": "lookup", "input": {}},
        ],
        tool_calls=[{"name": "lookup", "args": {"order": "A-1"}, "id": "c1"}],
        additional_kwargs={"refusal": None, "provider": {"n": [1, 2.5, "x"]}},
        response_metadata={"model_name": "m-1", "finish_reason": "tool_calls"},
        usage_metadata={"input_tokens": 120, "output_tokens": 7, "total_tokens": 127},
        name="support",
        id="a1",
    ),
    ToolMessage(content="shipped", tool_call_id="c1", artifact={"rows": [1, 2]}, status="success", id="t1"),
    SystemMessage(content="Be brief.", id="s1"),
    AIMessage(content="Done \u00e9\u2603 \x00", id="a2"),
]


@given(messages)
def test_every_langchain_message_comes_back_equal(message: BaseMessage) -> None:
    stored = to_ledger(message)
    assert from_ledger(stored) == message
    assert type(from_ledger(stored)) is type(message)
    role, content = project(message)
    assert (stored.role, list(stored.content)) == (role, content)


def test_every_kind_comes_back_equal_from_every_backend(store: CompleteStore) -> None:
    ledger = Ledger(store)
    conversation = ledger.conversation("kinds")
    conversation.append(*to_ledgers(EVERY_KIND))
    restored = Ledger(store).conversation("kinds")
    assert from_view(restored.view) == EVERY_KIND
    assert [h.message.message_id for h in ledger.history("kinds")] == ["h1", "a1", "t1", "s1", "a2"]


def test_the_projection_pairs_a_tool_call_with_its_tool_message() -> None:
    call, result = to_ledgers(EVERY_KIND[1:3])
    assert call.role == "assistant"
    assert call.tool_use_ids == ["c1"]
    assert result.role == "user"
    assert result.tool_result_ids == ["c1"]
    assert call.content[0] == {"text": "Checking."}
    assert call.metadata["usage"] == {"inputTokens": 120, "outputTokens": 7}
    error = to_ledger(ToolMessage(content="boom", tool_call_id="c9", status="error"))
    assert error.content[0]["toolResult"]["status"] == "error"
    assert to_ledger(SystemMessage("x")).role == "system"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (RemoveMessage(id="x"), "RemoveMessage"),
        (HumanMessage("hi", additional_kwargs={"at": (1, 2)}), "would not come back equal"),
        (HumanMessage("hi", additional_kwargs={1: "one"}), "would not come back equal"),
        (ToolMessage("r", tool_call_id="c", artifact=object()), "cannot be stored as JSON"),
        (HumanMessage("lone \ud800 surrogate"), "surrogate"),
    ],
)
def test_what_cannot_be_kept_exactly_is_refused(message: BaseMessage, reason: str) -> None:
    with pytest.raises(InvalidMessage, match=reason):
        to_ledger(message)


def test_a_batch_with_one_bad_message_names_it() -> None:
    with pytest.raises(InvalidMessage, match="message 1"):
        to_ledgers([HumanMessage("ok"), "not a message"])  # type: ignore[list-item]


def test_a_revised_tool_result_keeps_the_rest_of_the_tool_message() -> None:
    original = ToolMessage(content="x" * 500, tool_call_id="c1", artifact={"k": 1}, id="t1", name="lookup")
    stored = to_ledger(original)
    revised = stored.with_content(
        [{"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "x" * 20 + " [truncated]"}]}}]
    )
    back = from_ledger(revised)
    assert isinstance(back, ToolMessage)
    assert back.content == "x" * 20 + " [truncated]"
    assert (back.tool_call_id, back.artifact, back.id, back.name) == ("c1", {"k": 1}, "t1", "lookup")


def test_messages_that_never_were_langchain_messages_are_rendered() -> None:
    summary = Message(message_id="sum-1", role="user", content=[{"text": "The customer asked about A-1."}])
    assert from_ledger(summary) == HumanMessage(content="The customer asked about A-1.", id="sum-1")
    repaired = Message.tool_result("c7", INTERRUPTED_TOOL_TEXT, status="error")
    back = from_ledger(repaired)
    assert isinstance(back, ToolMessage)
    assert (back.tool_call_id, back.status, back.content) == ("c7", "error", INTERRUPTED_TOOL_TEXT)
    call = Message.tool_use("c7", "lookup", {"order": "A-1"}, text="Let me check.")
    rendered: Any = from_ledger(call)
    assert isinstance(rendered, AIMessage)
    assert rendered.content == "Let me check."
    assert [(c["id"], c["name"], c["args"]) for c in rendered.tool_calls] == [("c7", "lookup", {"order": "A-1"})]
    rules = Message.system("rules")
    assert from_ledger(rules) == SystemMessage(content="rules", id=rules.message_id)


def test_the_renderer_reuses_what_it_rendered_while_the_entry_is_unchanged() -> None:
    ledger = Ledger.connect("memory://")
    conversation = ledger.conversation("r")
    conversation.append(*to_ledgers(EVERY_KIND))
    render = ViewRenderer()
    first = render(conversation.view)
    assert first == EVERY_KIND
    assert render.known(first[1]) is conversation.view[1].message
    changed = first[4].model_copy(update={"content": "changed"})
    assert render.known(changed) is None
    assert render(conversation.view) == first


def test_a_restored_message_is_known_unchanged_by_its_fingerprint_without_projecting(
    store: CompleteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every backend: PostgreSQL's jsonb hands back other text for the same content, which
    # the fingerprint of the held text misses and the content's own then finds.
    ledger = Ledger(store)
    ledger.conversation("fingerprints").append(*to_ledgers(EVERY_KIND))
    messages = [e.message for e in Ledger(store).conversation("fingerprints").view]
    assert all(fingerprinted(m, KEY) and TEXT_DIGEST in m.metadata[KEY] for m in messages)

    def projected(message: BaseMessage) -> Any:
        raise AssertionError("a kept message was projected again")

    with monkeypatch.context() as patched:
        patched.setattr(convert, "project", projected)
        assert [from_ledger(m) for m in messages] == EVERY_KIND
        revised = messages[2].with_content(
            [{"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "ship [truncated]"}]}}]
        )
        back = from_ledger(revised)
    assert isinstance(back, ToolMessage)
    assert back.content == "ship [truncated]"
    assert back.artifact == {"rows": [1, 2]}


def test_a_message_kept_before_the_fingerprint_is_checked_by_projecting_it_again() -> None:
    for original in EVERY_KIND:
        stored = to_ledger(original)
        metadata = {**thaw(stored.metadata), KEY: {"json": stored.metadata[KEY]["json"]}}  # as 0.2 kept it
        old = Message(message_id=stored.message_id, role=stored.role, content=stored.content, metadata=metadata)
        assert not fingerprinted(old, KEY)
        assert from_ledger(old) == original
        if isinstance(original, ToolMessage):
            revised = old.with_content(
                [{"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "cut"}]}}]
            )
            back = from_ledger(revised)
            assert isinstance(back, ToolMessage)
            assert back.content == "cut"
            assert back.id == original.id
