"""The mapping between Pydantic AI messages and ledger messages: what the adapter gives back, exactly."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from contextledger import Message
from contextledger.aio import AsyncLedger
from contextledger.errors import InvalidMessage
from contextledger.integrations.pydantic_ai import (
    RENDERED_AT,
    LedgerHistory,
    dump,
    from_ledger,
    from_view,
    project,
    to_ledger,
)
from contextledger.integrations.pydantic_ai.convert import from_ledgers, tool_names
from contextledger.managers.repair import INTERRUPTED_TOOL_TEXT
from contextledger.model.pending import raw_fields

text = st.text(max_size=20)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=10)
moments = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | text
json_values = st.recursive(
    json_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=6
)
user_content = st.lists(
    text
    | st.builds(ImageUrl, url=st.just("https://example.com/a.png"))
    | st.builds(BinaryContent, data=st.binary(max_size=8), media_type=st.sampled_from(["image/png", "audio/wav"])),
    max_size=3,
)
request_parts: st.SearchStrategy[Any] = st.one_of(
    st.builds(SystemPromptPart, content=text, timestamp=moments),
    st.builds(UserPromptPart, content=text | user_content, timestamp=moments),
    st.builds(
        ToolReturnPart,
        tool_name=ids,
        content=json_values,
        tool_call_id=ids,
        timestamp=moments,
        outcome=st.sampled_from(["success", "failed", "denied"]),
    ),
)
response_parts: st.SearchStrategy[Any] = st.one_of(
    st.builds(TextPart, content=text),
    st.builds(ThinkingPart, content=text, signature=st.none() | text),
    st.builds(ToolCallPart, tool_name=ids, args=st.dictionaries(ids, json_values, max_size=2) | text, tool_call_id=ids),
    st.builds(NativeToolCallPart, tool_name=ids, args=st.dictionaries(ids, json_values, max_size=2), tool_call_id=ids),
)
model_messages: st.SearchStrategy[ModelMessage] = st.one_of(
    st.builds(
        ModelRequest,
        parts=st.lists(request_parts, min_size=1, max_size=3),
        timestamp=moments,
        instructions=st.none() | text,
        run_id=st.none() | ids,
    ),
    st.builds(
        ModelResponse,
        parts=st.lists(response_parts, min_size=1, max_size=3),
        usage=st.builds(RequestUsage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**6)),
        model_name=st.none() | text,
        timestamp=moments,
        provider_details=st.none() | st.dictionaries(ids, json_values, max_size=2),
    ),
)


def adapter_round_trip(message: ModelMessage) -> ModelMessage:
    """What Pydantic AI's own persistence gives back for ``message``."""
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json([message]))[0]


@given(model_messages, ids)
def test_every_message_comes_back_as_the_adapter_gives_it_back(message: ModelMessage, message_id: str) -> None:
    (dumped,) = dump([message])
    stored = to_ledger(dumped, message_id)
    back = from_ledger(stored)
    assert back == adapter_round_trip(message)
    assert dump([back]) == [dumped]
    assert (stored.role, list(stored.content)) == project(json.loads(dumped))


def test_a_history_comes_back_equal_from_a_store() -> None:
    history: list[ModelMessage] = [
        ModelRequest(
            parts=[
                SystemPromptPart("Be brief."),
                UserPromptPart(["Look", BinaryContent(b"\x89PNG", media_type="image/png")]),
            ]
        ),
        ModelResponse(
            parts=[ThinkingPart("hmm"), ToolCallPart("lookup", {"order": "A-1"}, tool_call_id="c1")],
            usage=RequestUsage(input_tokens=40, output_tokens=3),
        ),
        ModelRequest(parts=[ToolReturnPart("lookup", {"status": "shipped"}, tool_call_id="c1")]),
        ModelResponse(parts=[TextPart("Shipped.")]),
    ]

    async def main() -> list[ModelMessage]:
        async with await AsyncLedger.connect("memory://") as ledger:
            conversation = await ledger.conversation("round")
            await conversation.append(*(to_ledger(d, f"m{n}") for n, d in enumerate(dump(history))))
            return from_view(conversation.view)

    restored = asyncio.run(main())
    assert restored == [adapter_round_trip(m) for m in history]


def test_the_projection_pairs_a_tool_call_with_its_return() -> None:
    call, result, system = (
        to_ledger(d, f"m{n}")
        for n, d in enumerate(
            dump(
                [
                    ModelResponse(
                        parts=[TextPart("Checking."), ToolCallPart("lookup", {"order": "A-1"}, tool_call_id="c1")],
                        usage=RequestUsage(input_tokens=9, output_tokens=2),
                    ),
                    ModelRequest(parts=[ToolReturnPart("lookup", "gone", tool_call_id="c1", outcome="failed")]),
                    ModelRequest(parts=[SystemPromptPart("rules")]),
                ]
            )
        )
    )
    assert (call.role, call.tool_use_ids, call.content[0]) == ("assistant", ["c1"], {"text": "Checking."})
    assert call.metadata["usage"] == {"inputTokens": 9, "outputTokens": 2}
    assert (result.role, result.tool_result_ids) == ("user", ["c1"])
    assert result.content[0]["toolResult"]["status"] == "error"
    assert system.role == "system"


def test_a_revised_tool_return_keeps_the_rest_of_the_request() -> None:
    (dumped,) = dump(
        [ModelRequest(parts=[ToolReturnPart("lookup", "x" * 500, tool_call_id="c1")], instructions="Be brief.")]
    )
    stored = to_ledger(dumped, "m1")
    revised = stored.with_content(
        [{"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "x" * 20 + " [truncated]"}]}}]
    )
    back: Any = from_ledger(revised)
    assert back.instructions == "Be brief."
    (part,) = back.parts
    assert isinstance(part, ToolReturnPart)
    assert (part.content, part.tool_name, part.tool_call_id) == ("x" * 20 + " [truncated]", "lookup", "c1")


def test_messages_that_never_were_pydantic_ai_messages_are_rendered_the_same_every_time() -> None:
    summary = Message(message_id="sum-1", role="user", content=[{"text": "The customer asked about A-1."}])
    assert from_ledger(summary) == from_ledger(summary)
    rendered: Any = from_ledger(summary)
    assert rendered.parts == [UserPromptPart("The customer asked about A-1.", timestamp=RENDERED_AT)]
    repaired: Any = from_ledger(Message.tool_result("c7", INTERRUPTED_TOOL_TEXT, status="error"), {"c7": "lookup"})
    (part,) = repaired.parts
    assert (part.tool_name, part.tool_call_id, part.outcome, part.content) == (
        "lookup",
        "c7",
        "failed",
        INTERRUPTED_TOOL_TEXT,
    )
    answer: Any = from_ledger(Message.tool_use("c7", "lookup", {"order": "A-1"}, text="Checking."))
    assert answer.parts == [TextPart("Checking."), ToolCallPart("lookup", {"order": "A-1"}, tool_call_id="c7")]


def test_what_is_not_a_dumped_message_is_refused() -> None:
    with pytest.raises(InvalidMessage, match="not a dumped"):
        to_ledger(json.dumps({"kind": "other", "parts": []}), "m1")
    with pytest.raises(InvalidMessage, match="not a dumped"):
        to_ledger("[1, 2", "m1")
    with pytest.raises(InvalidMessage, match="surrogate"):
        to_ledger(
            json.dumps(
                {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "\ud800"}]}, ensure_ascii=False
            ),
            "m1",
        )


def test_a_restored_history_is_rendered_from_its_stored_text_without_decoding_it(tmp_path: Any) -> None:
    # The kept messages are recognized unchanged (their digest) and their tools named by
    # parsing each message's stored text once: the restored messages keep holding the text,
    # so a restore leaves no decoded blocks alive (fewer objects for the collector to walk).
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Where is A-1?")]),
        ModelResponse(parts=[ToolCallPart("lookup", {"order": "A-1"}, tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart("lookup", "shipped", tool_call_id="c1")]),
        ModelResponse(parts=[TextPart("Shipped.")]),
    ]
    url = f"sqlite:///{tmp_path}/pai.db"

    async def main() -> tuple[list[bool], list[ModelMessage]]:
        async with await AsyncLedger.connect(url) as ledger:
            conversation = await ledger.conversation("round")
            await conversation.append(*(to_ledger(d, f"m{n}") for n, d in enumerate(dump(history))))
        async with await AsyncLedger.connect(url) as ledger:
            view = (await ledger.conversation("round")).view
            messages = [e.message for e in view]
            rendered = from_ledgers(messages, tool_names(messages))
            # Read here: asyncio shows a finished task's result (these messages) with repr, which decodes.
            decoded = ["content" in raw_fields(m) for m in messages]
            # The host's own entry point renders the same history (its view read once).
            assert await LedgerHistory("round", ledger=ledger).messages() == rendered
            return decoded, rendered

    decoded, restored = asyncio.run(main())
    assert restored == [adapter_round_trip(m) for m in history]
    assert decoded == [False] * len(history)  # each still holds its stored text
