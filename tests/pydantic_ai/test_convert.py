"""The mapping between Pydantic AI messages and ledger messages: what the adapter gives back, exactly."""

from __future__ import annotations

import asyncio
import hashlib
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
from contextledger.integrations.kept import TEXT_DIGEST, unchanged
from contextledger.integrations.pydantic_ai import (
    RENDERED_AT,
    LedgerHistory,
    convert,
    dump,
    from_ledger,
    from_view,
    project,
    to_ledger,
)
from contextledger.integrations.pydantic_ai.convert import KEY, from_ledgers, tool_names
from contextledger.managers.repair import INTERRUPTED_TOOL_TEXT
from contextledger.model.pending import held_text, raw_fields
from contextledger.model.restored import holding_text

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


def _kept_history() -> list[ModelMessage]:
    """A turn with a tool call, its arguments and result of several keys (fixed times: compared across calls)."""
    return [
        ModelRequest(parts=[UserPromptPart("Where is A-1?", timestamp=_AT)]),
        ModelResponse(parts=[ToolCallPart("lookup", {"order": "A-1", "note": "zz"}, tool_call_id="c1")], timestamp=_AT),
        ModelRequest(parts=[ToolReturnPart("lookup", {"b": 1, "a": [2, 3]}, tool_call_id="c1", timestamp=_AT)]),
        ModelResponse(parts=[TextPart("Shipped.")], timestamp=_AT),
    ]


_AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_a_restored_kept_message_is_known_unchanged_by_hashing_its_held_text(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written now, a kept message's fingerprint is that of the text the stores write: a
    # restored message holding that text is recognized without reading its content.
    url = f"sqlite:///{tmp_path}/held.db"
    history = _kept_history()

    def unread(self: Message) -> Any:
        raise AssertionError("the content was read")

    async def restore() -> tuple[list[Message], list[bool]]:
        async with await AsyncLedger.connect(url) as ledger:
            conversation = await ledger.conversation("held")
            await conversation.append(*(to_ledger(d, f"m{n}") for n, d in enumerate(dump(history))))
        async with await AsyncLedger.connect(url) as ledger:
            messages = [e.message for e in (await ledger.conversation("held")).view]
            assert all(held_text(m) is not None for m in messages)
            with monkeypatch.context() as patched:
                patched.setattr(Message, "peek_content", unread)
                known = [unchanged(m, KEY) for m in messages]
            # Checked here: asyncio shows a finished task's result with repr, which decodes.
            assert all(held_text(m) is not None for m in messages)  # nothing decoded them
            return messages, known

    messages, known = asyncio.run(restore())
    assert known == [True] * len(history)
    assert all(TEXT_DIGEST in m.metadata[KEY] and "digest" not in m.metadata[KEY] for m in messages)
    # A revision (a manager's truncation) holds other content: not unchanged.
    revised = messages[2].with_content([{"text": "[truncated]"}])
    assert not unchanged(revised, KEY)
    assert from_ledgers([*messages[:2], revised], tool_names(messages))[2] != adapter_round_trip(history[2])


def test_a_held_text_other_than_the_written_one_is_checked_by_its_content() -> None:
    # A store may hand back other text for the same content (PostgreSQL's jsonb orders keys
    # its own way): the hash of the held text then misses, and the content decides.
    for n, dumped in enumerate(dump(_kept_history())):
        stored = to_ledger(dumped, f"m{n}")
        content = json.loads(json.dumps(stored.to_record()["content"]))
        for text in (
            json.dumps(content, separators=(",", ":")),  # the same content, other text
            json.dumps([{k: b[k] for k in sorted(b, reverse=True)} for b in content]),
        ):
            restored = holding_text(stored.message_id, stored.role, stored.metadata, text)
            assert held_text(restored) == text
            assert unchanged(restored, KEY)
        other = holding_text(stored.message_id, stored.role, stored.metadata, json.dumps([{"text": "other"}]))
        assert not unchanged(other, KEY)


def test_a_message_kept_before_the_text_digest_is_checked_by_its_compact_digest() -> None:
    # Ledgers written before 0.3 keep the fingerprint of the content's compact text.
    (dumped, *_) = dump(_kept_history())
    stored = to_ledger(dumped, "m0")
    compact = json.dumps(stored.to_record()["content"], separators=(",", ":"))
    legacy = hashlib.blake2b(compact.encode(), digest_size=12).hexdigest()
    old = Message(
        message_id="m0", role=stored.role, content=stored.content, metadata={KEY: {"json": dumped, "digest": legacy}}
    )
    assert unchanged(old, KEY)
    assert from_ledger(old) == adapter_round_trip(_kept_history()[0])
    wrong = Message(
        message_id="m0", role=stored.role, content=stored.content, metadata={KEY: {"json": dumped, "digest": "0" * 24}}
    )
    assert not unchanged(wrong, KEY)
    assert not unchanged(Message.user("no kept message"), KEY)


def test_a_view_of_unchanged_kept_messages_looks_up_no_tool_name(monkeypatch: pytest.MonkeyPatch) -> None:
    kept_messages = [to_ledger(d, f"m{n}") for n, d in enumerate(dump(_kept_history()))]

    def unread(messages: Any) -> dict[str, str]:
        raise AssertionError("tool names were looked up")

    with monkeypatch.context() as patched:
        patched.setattr(convert, "tool_names", unread)
        assert from_ledgers(kept_messages, convert.tool_names_of(kept_messages)) == [
            adapter_round_trip(m) for m in _kept_history()
        ]
    # A tool result rendered from its blocks finds its tool's name among the messages.
    plain = [Message.tool_use("c9", "lookup", {"order": "B-2"}), Message.tool_result("c9", "shipped")]
    (part,) = from_ledgers(plain, convert.tool_names_of(plain))[1].parts
    assert isinstance(part, ToolReturnPart)
    assert part.tool_name == "lookup"
    assert len(convert.tool_names_of(plain)) == 1
    assert dict(convert.tool_names_of(plain)) == {"c9": "lookup"}
