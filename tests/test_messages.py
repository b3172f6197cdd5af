from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from contextledger import Message
from contextledger.errors import InvalidMessage
from contextledger.model.messages import decode_blocks, encode_blocks

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\xff"
PDF = b"%PDF-1.7\n\x00\x01\x02binary"

BLOCKS: dict[str, dict[str, Any]] = {
    "text": {"text": "Hello, world."},
    "toolUse": {"toolUse": {"toolUseId": "tooluse_1", "name": "calc", "input": {"expr": "2+2", "n": [1, 2.5, None]}}},
    "toolResult": {
        "toolResult": {
            "toolUseId": "tooluse_1",
            "status": "success",
            "content": [{"text": "4"}, {"json": {"value": 4}}, {"image": {"format": "png", "source": {"bytes": PNG}}}],
        }
    },
    "toolResult-error": {"toolResult": {"toolUseId": "tooluse_2", "status": "error", "content": [{"text": "boom"}]}},
    "image": {"image": {"format": "png", "source": {"bytes": PNG}}},
    "document": {"document": {"format": "pdf", "name": "report", "source": {"bytes": PDF}}},
    "video": {"video": {"format": "mp4", "source": {"s3Location": {"uri": "s3://bucket/v.mp4"}}}},
    "reasoningContent": {"reasoningContent": {"reasoningText": {"text": "Let me think.", "signature": "sig=="}}},
    "reasoningContent-redacted": {"reasoningContent": {"redactedContent": b"\x00\x01opaque"}},
    "cachePoint": {"cachePoint": {"type": "default"}},
    "guardContent": {"guardContent": {"text": {"text": "checked", "qualifiers": ["grounding_source"]}}},
    "unknown": {"someFutureBlock": {"nested": [{"deep": b"\x07bytes"}, 1, "two"], "flag": True}},
}


def _message(kind: str, **extra: Any) -> dict[str, Any]:
    role = "assistant" if kind in ("toolUse", "reasoningContent", "reasoningContent-redacted") else "user"
    return {"role": role, "content": [copy.deepcopy(BLOCKS[kind])], **extra}


@pytest.mark.parametrize("kind", sorted(BLOCKS))
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"tracking_id": "2f0b0c4e-6c1f-4c51-9d0c-3f8f5b1f9c11"},
        {"metadata": {}},
        {"metadata": {"usage": {"inputTokens": 10, "outputTokens": 2}, "custom": {"pinned": True}}},
        {"tracking_id": "id-1", "metadata": {"metrics": {"latencyMs": 12}}},
    ],
    ids=["bare", "tracking_id", "empty-metadata", "metadata", "both"],
)
def test_from_strands_to_strands_round_trips(kind: str, extra: dict[str, Any]) -> None:
    original = _message(kind, **extra)
    snapshot = copy.deepcopy(original)
    message = Message.from_strands(original)
    # The ledger form: the tracking_id (given or new) and the metadata are always there.
    assert message.to_strands() == {"tracking_id": message.message_id, "metadata": {}, **snapshot}
    assert message.message_id == snapshot.get("tracking_id", message.message_id)
    assert Message.from_strands(message.to_strands()) == message
    # Bytes stay bytes, and the result does not alias the input.
    assert message.to_strands() is not original
    with pytest.raises(TypeError):
        message.content[0].clear()  # a message is read-only
    converted = message.to_strands()
    converted["content"][0].clear()  # what to_strands returns is the host's to change
    assert original == snapshot
    assert message.to_strands() == {"tracking_id": message.message_id, "metadata": {}, **snapshot}


def test_all_block_kinds_in_one_message_round_trip() -> None:
    original = {"role": "user", "content": [copy.deepcopy(b) for b in BLOCKS.values()], "tracking_id": "t-1"}
    assert Message.from_strands(original).to_strands() == {**original, "metadata": {}}


@pytest.mark.parametrize("kind", sorted(BLOCKS))
def test_storage_codec_is_json_safe_and_lossless(kind: str) -> None:
    message = Message.from_strands(_message(kind, metadata={"custom": {"blob": b"\xff\x00"}}))
    record = message.to_record()
    decoded = Message.from_record(json.loads(json.dumps(record)))
    assert decoded.content == message.content
    assert decoded.metadata == message.metadata
    assert decode_blocks(encode_blocks(message.content)) == message.content


def test_pin_state_survives_the_round_trip() -> None:
    original = _message("text", metadata={"custom": {"pinned": True, "note": "keep"}})
    message = Message.from_strands(original)
    assert message.pinned
    assert message.with_pin(False).to_strands()["metadata"] == {"custom": {"note": "keep"}}
    assert message.with_pin(True).to_strands() == {**original, "tracking_id": message.message_id}


def test_tool_ids_and_text_views() -> None:
    message = Message.from_strands(
        {"role": "user", "content": [BLOCKS["toolResult"], BLOCKS["toolResult-error"], BLOCKS["text"]]}
    )
    assert message.tool_result_ids == ["tooluse_1", "tooluse_2"]
    assert message.tool_use_ids == []
    assert message.tool_ids == {"tooluse_1", "tooluse_2"}
    assert message.plain_text.split("\n") == ["4", "boom", "Hello, world."]


@pytest.mark.parametrize(
    "bad",
    [
        {"content": [{"text": "no role"}]},
        {"role": "robot", "content": [{"text": "x"}]},
        {"role": "user"},
        {"role": "user", "content": "not a list"},
        {"role": "user", "content": [{}]},
        {"role": "user", "content": ["text"]},
        {"role": "user", "content": [], "surprise": 1},
    ],
)
def test_invalid_strands_messages_raise_invalid_message(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidMessage):
        Message.from_strands(bad)


@pytest.mark.parametrize("bad", ["hello", 5, None, [{"role": "user", "content": []}]])
def test_from_strands_rejects_what_is_not_a_dict(bad: Any) -> None:
    with pytest.raises(InvalidMessage, match="expected a dict"):
        Message.from_strands(bad)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("hello", "content must be a list"),
        ({"text": "hello"}, "content must be a list"),
        ([{"text": 5}], "text block holds a string"),
        ([{"text": b"bytes"}], "text block holds a string"),
        ([{"toolUse": {"name": "calc", "input": {}}}], "toolUse block needs a non-empty string toolUseId"),
        ([{"toolUse": "calc"}], "toolUse block holds a mapping"),
        ([{"toolResult": {"toolUseId": "", "content": []}}], "toolResult block needs a non-empty string toolUseId"),
        ([{"toolResult": {"toolUseId": "t", "content": "done"}}], "content of toolResult 't' must be a list"),
        ([{"toolResult": {"toolUseId": "t", "status": "ok", "content": []}}], "status is 'success' or 'error'"),
    ],
)
def test_malformed_content_is_an_invalid_message(content: Any, match: str) -> None:
    # Both doors: a Strands dict and the Message constructor, with a one-line message.
    with pytest.raises(InvalidMessage, match=match) as from_dict:
        Message.from_strands({"role": "user", "content": content})
    with pytest.raises(InvalidMessage, match=match) as constructed:
        Message(role="user", content=content)
    assert str(from_dict.value).startswith("not a Strands message: ")
    for error in (from_dict.value, constructed.value):
        assert "\n" not in str(error)


def test_constructor_errors_are_typed_and_one_line() -> None:
    with pytest.raises(InvalidMessage, match=r"role: Input should be 'system', 'user' or 'assistant' \(got 'robot'\)"):
        Message(role="robot", content=[{"text": "x"}])
    with pytest.raises(InvalidMessage, match=r"not a Strands message: role: .*'robot'") as error:
        Message.from_strands({"role": "robot", "content": [{"text": "x"}]})
    assert "\n" not in str(error.value)
    with pytest.raises(InvalidMessage, match="text block holds a string"):
        Message.user(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid message"):  # still a ValueError for callers that catch that
        Message(role="user", content=[{}])


def test_tool_result_needs_text_or_blocks() -> None:
    with pytest.raises(InvalidMessage, match="text or a list of content blocks"):
        Message.tool_result("t", 5)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match="status is 'success' or 'error'"):
        Message.tool_result("t", "done", status="ok")  # type: ignore[arg-type]
