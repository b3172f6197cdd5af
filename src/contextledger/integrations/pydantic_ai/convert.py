"""Lossless mapping between Pydantic AI's ``ModelMessage`` and ledger messages.

Each ``ModelRequest`` / ``ModelResponse`` becomes one :class:`~contextledger.Message`
whose content is the message's *projection* into Converse blocks -- what every manager,
token counter and summarizer understands -- and which keeps the message, as Pydantic
AI's own ``ModelMessagesTypeAdapter`` dumps it, as JSON text in ``metadata["pydantic_ai"]``
(see :mod:`contextledger.integrations.kept`):

===============================================  ==========  ==============================
part (``part_kind``)                             role        content block
===============================================  ==========  ==============================
``system-prompt``                                system [1]  ``text``
``user-prompt``                                  user        ``text`` per string, ``json``
                                                             per other content (images...)
``tool-return`` and its kinds, ``retry-prompt``  user        ``toolResult`` (``toolUseId =
for a tool call                                              tool_call_id``; failed, denied,
                                                             interrupted or retried: error)
``text``                                         assistant   ``text``
``thinking``                                     assistant   ``reasoningContent``
``tool-call`` and its kinds                      assistant   ``toolUse``
anything else (built-in tools, files, ...)       its side    ``json`` holding the part
===============================================  ==========  ==============================

[1] A request is ``system`` only when every part is a system prompt; otherwise ``user``.

A tool call and its return share a ``toolUseId``, so every manager evicts, pins and
summarizes them together. The response's ``usage`` is kept as ``metadata["usage"]``
for projected-token management.

Back (:func:`from_ledger`): a message whose content still equals its kept message's
projection comes back exactly as ``ModelMessagesTypeAdapter`` reads the kept JSON --
equal to what Pydantic AI's own persistence gives back. A message whose tool return a
manager revised (truncated) is the kept message with the revised content; a message
that never was a Pydantic AI message (a summary, the result a crash repair appended, one
another host wrote) is rendered from its blocks with :data:`RENDERED_AT` as its
timestamps, so rendering it twice gives equal messages.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from contextledger.core.view import View
from contextledger.errors import InvalidMessage
from contextledger.integrations.kept import kept, kept_text, unchanged
from contextledger.model.jsonvalues import thaw
from contextledger.model.messages import ContentBlock, Message, Role
from contextledger.model.stored import parse_json

__all__ = [
    "KEY",
    "RENDERED_AT",
    "dump",
    "from_ledger",
    "from_ledgers",
    "from_view",
    "load",
    "project",
    "rendered",
    "to_ledger",
    "tool_names",
    "tool_names_of",
]

logger = logging.getLogger(__name__)

KEY = "pydantic_ai"
"""``Message.metadata[KEY]["json"]`` holds the message as ``ModelMessagesTypeAdapter`` dumps it (JSON text)."""

RENDERED_AT = datetime(1970, 1, 1, tzinfo=UTC)
"""The timestamp of a message rendered from blocks (it has none of its own)."""

_FAILED = frozenset({"failed", "denied", "interrupted", "retried"})
_CALL_KINDS = frozenset({"tool-call", "tool-search-call", "capability-load-call"})
_RETURN_KINDS = frozenset({"tool-return", "tool-search-return", "capability-load-return", "retry-prompt"})


def dump(messages: Sequence[ModelMessage]) -> list[str]:
    """Each of ``messages`` as the JSON text ``ModelMessagesTypeAdapter`` writes for it.

    Raises:
        InvalidMessage: A message holds a value the adapter cannot dump.
    """
    try:
        return [ModelMessagesTypeAdapter.dump_json([m]).decode()[1:-1] for m in messages]
    except Exception as exc:  # pydantic_core raises its own serialization errors
        raise InvalidMessage(f"Pydantic AI messages cannot be dumped to JSON: {exc}") from exc


def load(texts: Sequence[str]) -> list[ModelMessage]:
    """The messages ``texts`` (see :func:`dump`) stand for, read by ``ModelMessagesTypeAdapter`` in one call."""
    return ModelMessagesTypeAdapter.validate_json("[" + ",".join(texts) + "]")


# -- Pydantic AI -> ledger -------------------------------------------------------------------


def project(dumped: Mapping[str, Any]) -> tuple[Role, list[ContentBlock]]:
    """The role and content blocks a dumped message stands for in the ledger (a pure function).

    Raises:
        InvalidMessage: ``dumped`` is not a dumped request or response.
    """
    kind = dumped.get("kind")
    parts = dumped.get("parts")
    if kind not in ("request", "response") or not isinstance(parts, list):
        raise InvalidMessage(f"not a dumped Pydantic AI message: kind {kind!r}")
    blocks: list[ContentBlock] = []
    for part in parts:
        blocks.extend(_request_part(part) if kind == "request" else _response_part(part))
    if kind == "response":
        return "assistant", blocks or [{"text": ""}]
    system = bool(parts) and all(p.get("part_kind") == "system-prompt" for p in parts)
    return ("system" if system else "user"), blocks or [{"text": ""}]


def to_ledger(text: str, message_id: str) -> Message:
    """The ledger message for one message's JSON text (see :func:`dump`), kept whole in its metadata.

    Raises:
        InvalidMessage: ``text`` is not a dumped message, or holds text no backend can store.
    """
    try:
        dumped = parse_json(text)
    except ValueError as exc:
        raise InvalidMessage(f"not a dumped Pydantic AI message: {exc}") from exc
    if not isinstance(dumped, Mapping):
        raise InvalidMessage(f"not a dumped Pydantic AI message: a JSON {type(dumped).__name__}")
    role, content = project(dumped)
    metadata: dict[str, Any] = {KEY: kept(text, content)}
    usage = dumped.get("usage") if dumped.get("kind") == "response" else None
    if isinstance(usage, Mapping):
        metadata["usage"] = {"inputTokens": usage.get("input_tokens", 0), "outputTokens": usage.get("output_tokens", 0)}
    return Message(message_id=message_id, role=role, content=content, metadata=metadata)


# -- ledger -> Pydantic AI -------------------------------------------------------------------


def from_ledger(message: Message, tool_names: Mapping[str, str] | None = None) -> ModelMessage:
    """The Pydantic AI message a ledger message stands for (see the module docstring).

    Args:
        message: A ledger message.
        tool_names: toolUseId -> tool name, for a tool result rendered from blocks (a
            Pydantic AI tool return names its tool).
    """
    return from_ledgers([message], tool_names)[0]


def from_ledgers(messages: Sequence[Message], tool_names: Mapping[str, str] | None = None) -> list[ModelMessage]:
    """:func:`from_ledger` for many messages; the unchanged ones are read by the adapter in one call."""
    return [model_message for model_message, _ in rendered(messages, tool_names)]


def rendered(
    messages: Sequence[Message], tool_names: Mapping[str, str] | None = None
) -> list[tuple[ModelMessage, str]]:
    """Each message as a Pydantic AI message, with the JSON text the adapter writes for it.

    The unchanged kept messages are read by the adapter in one call and their text is the
    kept one; a revised or rendered message is dumped.
    """
    out: list[tuple[ModelMessage, str] | None] = [None] * len(messages)
    texts: dict[int, str] = {}
    names: Mapping[str, str] = {} if tool_names is None else tool_names  # not `or`: a lazy mapping stays unread
    for index, message in enumerate(messages):
        text = kept_text(message, KEY)
        if text is not None and unchanged(message, KEY):
            texts[index] = text
        else:
            model_message = _revised_or_rendered(message, text, names)
            out[index] = (model_message, dump([model_message])[0])
    if texts:
        try:
            loaded = load(list(texts.values()))
        except ValueError as exc:  # pydantic's ValidationError: read them one by one to find the damaged one
            logger.debug("kept Pydantic AI messages unreadable as one list, read one by one: %s", exc)
            loaded = [_revised_or_rendered(messages[i], texts[i], names) for i in texts]
        for (index, text), model_message in zip(texts.items(), loaded, strict=True):
            out[index] = (model_message, text)
    return [pair for pair in out if pair is not None]


def from_view(view: View) -> list[ModelMessage]:
    """The active view as Pydantic AI messages, in order (a summary as a user prompt)."""
    messages = view.messages  # once: a restored view builds its messages anew on every read
    return from_ledgers(messages, tool_names_of(messages))


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    """The tool name of every toolUseId called among ``messages``."""
    return {
        b["toolUse"]["toolUseId"]: b["toolUse"]["name"] for m in messages for b in m.peek_content() if "toolUse" in b
    }


def tool_names_of(messages: Sequence[Message]) -> Mapping[str, str]:
    """:func:`tool_names` of ``messages``, found on the first lookup.

    Only a message rendered from its blocks looks a tool name up; a view of unchanged
    kept messages never reads the content for it.
    """
    return _ToolNames(messages)


class _ToolNames(Mapping[str, str]):
    """:func:`tool_names` of some messages, found when first read."""

    __slots__ = ("_messages", "_names")

    def __init__(self, messages: Sequence[Message]) -> None:
        self._messages = messages
        self._names: dict[str, str] | None = None

    def _found(self) -> dict[str, str]:
        if self._names is None:
            self._names = tool_names(self._messages)
        return self._names

    def __getitem__(self, key: str) -> str:
        return self._found()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._found())

    def __len__(self) -> int:
        return len(self._found())


def _revised_or_rendered(message: Message, text: str | None, tool_names: Mapping[str, str]) -> ModelMessage:
    """A message a manager revised, as its kept message with the revised content; else rendered from blocks."""
    if text is not None:
        try:
            revised = _revised(parse_json(text), message) if not unchanged(message, KEY) else parse_json(text)
            if revised is not None:
                return ModelMessagesTypeAdapter.validate_python([revised])[0]
        except (ValueError, InvalidMessage) as exc:  # pydantic's ValidationError is a ValueError
            logger.warning(
                "message_id=<%s> | the kept Pydantic AI message is unreadable, rendered from blocks: %s",
                message.message_id,
                exc,
            )
    return _render(message, tool_names)


def _text_or_json(value: Any) -> ContentBlock:
    return {"text": value} if isinstance(value, str) else {"json": value}


def _request_part(part: Mapping[str, Any]) -> list[ContentBlock]:
    kind = part.get("part_kind")
    call_id = part.get("tool_call_id")
    if kind in _RETURN_KINDS and isinstance(call_id, str) and call_id and part.get("tool_name") is not None:
        failed = kind == "retry-prompt" or part.get("outcome") in _FAILED
        body = {
            "toolUseId": call_id,
            "status": "error" if failed else "success",
            "content": [_text_or_json(part.get("content"))],
        }
        return [{"toolResult": body}]
    content = part.get("content")
    if kind == "user-prompt" and isinstance(content, list):
        return [_text_or_json(item) for item in content]
    if kind in ("system-prompt", "user-prompt") and isinstance(content, str):
        return [{"text": content}]
    return [{"json": dict(part)}]


def _response_part(part: Mapping[str, Any]) -> list[ContentBlock]:
    kind = part.get("part_kind")
    call_id = part.get("tool_call_id")
    if kind in _CALL_KINDS and isinstance(call_id, str) and call_id:
        return [{"toolUse": {"toolUseId": call_id, "name": part.get("tool_name"), "input": part.get("args")}}]
    if kind == "text" and isinstance(part.get("content"), str):
        return [{"text": part["content"]}]
    if kind == "thinking" and isinstance(part.get("content"), str):
        return [{"reasoningContent": {"reasoningText": {"text": part["content"]}}}]
    return [{"json": dict(part)}]


def _texts(blocks: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(b["text"] for b in blocks if isinstance(b.get("text"), str))


def _revised(kept: dict[str, Any], message: Message) -> dict[str, Any] | None:
    """The kept message with its parts' content replaced by the revised blocks, part by part.

    Each part stands for the blocks it projects to, in order; a part whose blocks changed
    takes the revised ones (a tool return its result's text, a prompt or text part its
    text, a tool call its input, a part kept whole as ``json`` that value). ``None`` when
    the revised content no longer lines up with the parts (then it is rendered from blocks).
    """
    project_part = _request_part if kept.get("kind") == "request" else _response_part
    parts: list[dict[str, Any]] = kept.get("parts", [])
    spans = [len(project_part(part)) for part in parts]
    if sum(spans) != len(message.content) and not (sum(spans) == 0 and len(message.content) == 1):
        return None
    at = 0
    for index, (part, span) in enumerate(zip(parts, spans, strict=True)):
        before, after = project_part(part), [thaw(b) for b in message.content[at : at + span]]
        at += span
        if before != after:
            parts[index] = _part_with(part, after)
    return kept


def _part_with(part: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """``part`` carrying ``blocks`` (the blocks it projects to, revised)."""
    if (
        len(blocks) == 1
        and "json" in blocks[0]
        and isinstance(blocks[0]["json"], dict)
        and "part_kind" in blocks[0]["json"]
    ):
        return dict(blocks[0]["json"])  # a part kept whole
    revised = dict(part)
    if "toolResult" in blocks[0]:
        inner = blocks[0]["toolResult"].get("content", [])
        revised["content"] = _texts(inner) if all("text" in b for b in inner) else _value(inner[0])
    elif "toolUse" in blocks[0]:
        revised["args"] = blocks[0]["toolUse"].get("input")
    elif "reasoningContent" in blocks[0]:
        revised["content"] = blocks[0]["reasoningContent"]["reasoningText"]["text"]
    elif isinstance(part.get("content"), list):
        revised["content"] = [_value(b) for b in blocks]
    else:
        revised["content"] = _texts(blocks)
    return revised


def _value(block: Mapping[str, Any]) -> Any:
    return block["text"] if isinstance(block.get("text"), str) else block.get("json")


def _render(message: Message, tool_names: Mapping[str, str]) -> ModelMessage:
    """A Pydantic AI message for a ledger message that never was one."""
    if message.role == "assistant":
        response_parts: list[ModelResponsePart] = []
        text = _texts(message.content)
        if text:
            response_parts.append(TextPart(content=text))
        for block in message.content:
            if "toolUse" in block:
                use = block["toolUse"]
                args = thaw(use.get("input"))
                response_parts.append(
                    ToolCallPart(
                        tool_name=use["name"],
                        args=args if isinstance(args, str | dict) else None,
                        tool_call_id=use["toolUseId"],
                    )
                )
        return ModelResponse(parts=response_parts, timestamp=RENDERED_AT)
    request_parts: list[ModelRequestPart] = []
    for block in message.content:
        if "toolResult" in block:
            result = block["toolResult"]
            request_parts.append(
                ToolReturnPart(
                    tool_name=tool_names.get(result["toolUseId"], "unknown"),
                    content=_texts(result.get("content", [])),
                    tool_call_id=result["toolUseId"],
                    outcome="failed" if result.get("status") == "error" else "success",
                    timestamp=RENDERED_AT,
                )
            )
        elif isinstance(block.get("text"), str):
            part_type = SystemPromptPart if message.role == "system" else UserPromptPart
            request_parts.append(part_type(content=block["text"], timestamp=RENDERED_AT))
    return ModelRequest(parts=request_parts or [UserPromptPart(content="", timestamp=RENDERED_AT)])
