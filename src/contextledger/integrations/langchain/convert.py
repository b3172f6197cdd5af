"""Lossless mapping between LangChain messages and ledger messages.

Each LangChain message becomes one :class:`~contextledger.Message` whose content is the
message's *projection* into Converse blocks -- what every manager, token counter and
summarizer understands -- and which keeps the message itself, as LangChain's own
``message_to_dict`` gives it, in ``metadata["langchain"]["message"]``:

=========================  ==========  ==============================================
LangChain message          role        content blocks
=========================  ==========  ==============================================
``HumanMessage``           user        ``text`` per text part; any other part as ``json``
``AIMessage`` (and chunk)  assistant   the same, then ``toolUse`` per tool call with an id
``ToolMessage``            user        one ``toolResult`` (``toolUseId = tool_call_id``)
``SystemMessage``          system      ``text`` / ``json``
``ChatMessage``            its role    (``human``/``ai``/``developer`` mapped; others user)
``FunctionMessage``        user        ``text``
=========================  ==========  ==============================================

A tool call and its ``ToolMessage`` share a ``toolUseId``, so every manager evicts,
pins and summarizes them together. The model's reported usage (``usage_metadata``)
is kept as ``metadata["usage"]`` for projected-token management. The message id is the
LangChain ``id`` (a fresh one when it has none; the kept message still says ``None``).

Back (:func:`from_ledger`): a message whose content is still the one it was stored with
returns its kept message exactly -- told by the content's fingerprint kept beside it
(:func:`~contextledger.integrations.kept.unchanged`; for a message kept before 0.3, by
projecting the kept message again) -- so ``to_ledger -> from_ledger`` is the identity
(:func:`to_ledger` checks it and refuses what would not come back equal). A message
whose content a manager revised (a truncated tool result) is the kept message with the
revised content; a message that never was a LangChain message (a summary, the result a
crash repair appended, one another host wrote) is rendered from its blocks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.messages.tool import tool_call

from contextledger.core.view import View
from contextledger.errors import InvalidMessage
from contextledger.integrations.kept import fingerprinted, kept, kept_text, unchanged
from contextledger.model.jsonvalues import thaw
from contextledger.model.messages import ContentBlock, Message, Role, new_message_id
from contextledger.model.stored import parse_json

__all__ = ["KEY", "ViewRenderer", "from_ledger", "from_view", "kept_message", "project", "to_ledger", "to_ledgers"]

logger = logging.getLogger(__name__)

KEY = "langchain"
"""``Message.metadata[KEY]["json"]`` holds the LangChain message as ``message_to_dict`` gives it, as JSON text."""

_CHAT_ROLES: dict[str, Role] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
    "developer": "system",
}


# -- LangChain -> ledger -------------------------------------------------------------------


def project(message: BaseMessage) -> tuple[Role, list[ContentBlock]]:
    """The role and content blocks a LangChain message stands for in the ledger (a pure function).

    Raises:
        InvalidMessage: ``message`` is a ``RemoveMessage`` (an instruction to a graph, not a message).
    """
    if isinstance(message, RemoveMessage):
        raise InvalidMessage("a RemoveMessage is an instruction to the graph state, not a message to store")
    blocks = _blocks(message.content)
    if isinstance(message, ToolMessage):
        status = "error" if message.status == "error" else "success"
        body = {"toolUseId": message.tool_call_id, "status": status, "content": blocks or [{"text": ""}]}
        return "user", [{"toolResult": body}]
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            if call.get("id"):
                blocks.append({"toolUse": {"toolUseId": call["id"], "name": call["name"], "input": call["args"]}})
        return "assistant", blocks or [{"text": ""}]
    if isinstance(message, SystemMessage):
        role: Role = "system"
    elif isinstance(message, ChatMessage):
        role = _CHAT_ROLES.get(message.role.lower(), "user")
    elif isinstance(message, HumanMessage | FunctionMessage):
        role = "user"
    else:
        role = _CHAT_ROLES.get(message.type.lower(), "user")
    return role, blocks or [{"text": ""}]


def to_ledger(message: BaseMessage) -> Message:
    """The ledger message for one LangChain message; the message is kept whole in its metadata.

    Raises:
        InvalidMessage: ``message`` is not a LangChain message, is a ``RemoveMessage``,
            holds a value JSON cannot store, or would not come back equal from the ledger
            (a tuple, a non-string key, a set in ``additional_kwargs`` or an artifact).
    """
    if not isinstance(message, BaseMessage):
        raise InvalidMessage(f"expected a LangChain message, got {type(message).__name__}")
    role, content = project(message)
    try:
        text = json.dumps(message_to_dict(message), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:  # an object, bytes, a set or NaN: not JSON
        raise InvalidMessage(f"{message.type} message {message.id!r} cannot be stored as JSON: {exc}") from exc
    metadata: dict[str, Any] = {KEY: kept(text, content)}
    usage = getattr(message, "usage_metadata", None)
    if usage:
        metadata["usage"] = {"inputTokens": usage.get("input_tokens", 0), "outputTokens": usage.get("output_tokens", 0)}
    message_id = message.id if isinstance(message.id, str) and message.id else new_message_id()
    stored = Message(message_id=message_id, role=role, content=content, metadata=metadata)
    if kept_message(stored) != message:
        raise InvalidMessage(
            f"{message.type} message {message.id!r} would not come back equal from the ledger:"
            " keep its fields to JSON values (no tuples, non-string keys or lone surrogates)"
        )
    return stored


def to_ledgers(messages: Iterable[BaseMessage]) -> list[Message]:
    """Map ``messages`` in order with :func:`to_ledger`; nothing is built if one is invalid.

    Raises:
        InvalidMessage: A message is invalid (its index is named).
    """
    out = []
    for index, message in enumerate(messages):
        try:
            out.append(to_ledger(message))
        except InvalidMessage as exc:
            raise InvalidMessage(f"message {index}: {exc}") from exc
    return out


# -- ledger -> LangChain -------------------------------------------------------------------


def kept_message(message: Message) -> BaseMessage | None:
    """The LangChain message kept in ``message``'s metadata, rebuilt, or ``None`` when it has none."""
    text = kept_text(message, KEY)
    if text is None:
        return None
    try:
        return messages_from_dict([parse_json(text)])[0]
    except (ValueError, TypeError, KeyError) as exc:  # pydantic's ValidationError is a ValueError
        logger.warning(
            "message_id=<%s> | the kept LangChain message is unreadable, rendered from blocks: %s",
            message.message_id,
            exc,
        )
        return None


def from_ledger(message: Message) -> BaseMessage:
    """The LangChain message a ledger message stands for (see the module docstring)."""
    kept_one = kept_message(message)
    if kept_one is None:
        return _render(message)
    if fingerprinted(message, KEY):
        if unchanged(message, KEY):  # a restored message: its held text hashed, not parsed
            return kept_one
    else:  # kept before 0.3, without a fingerprint: the kept message projected again
        try:
            if project(kept_one) == (message.role, message.peek_content()):
                return kept_one
        except InvalidMessage:
            pass  # a kept message of a kind that projects to nothing: render the revision
    return kept_one.model_copy(update={"content": _revised_content(kept_one, message)})


class ViewRenderer:
    """Renders views as LangChain messages, reusing what it rendered for an unchanged entry.

    A view is rendered before every model call, and most of its entries are the same
    messages as the call before (the same objects, or equal ones after a re-read), so each
    entry's rendering is kept while an equal message stands in the view. :meth:`known` gives the entry a
    LangChain message still stands for unchanged, so a caller can skip converting it back.
    """

    def __init__(self) -> None:
        self._cache: dict[str, tuple[Message, BaseMessage]] = {}
        self._last: tuple[View, list[BaseMessage]] | None = None  # the view rendered last (immutable)

    def __call__(self, view: View) -> list[BaseMessage]:
        """The view's entries as LangChain messages, in order (shallow copies the caller may keep).

        The same view object asked again (a read of a conversation nothing moved: its
        refresh keeps the view it holds) is not walked again.
        """
        last = self._last
        if last is not None and last[0] is view:
            return [m.model_copy() for m in last[1]]
        out: list[BaseMessage] = []
        cache: dict[str, tuple[Message, BaseMessage]] = {}
        for entry in view:
            hit = self._cache.get(entry.entry_id)
            if hit is not None and (hit[0] is entry.message or hit[0] == entry.message):
                rendered = hit[1]  # an equal message (a re-read gives new objects) renders the same
            else:
                rendered = from_ledger(entry.message)
            cache[entry.entry_id] = (entry.message, rendered)
            out.append(rendered)
        self._cache = cache  # entries that left the view are dropped
        self._last = (view, out)
        return [m.model_copy() for m in out]  # copies: a graph may set fields on the messages it holds

    def known(self, message: BaseMessage) -> Message | None:
        """The ledger message ``message`` was rendered from, when it is still equal to that rendering."""
        hit = self._cache.get(message.id) if isinstance(message.id, str) else None
        return hit[0] if hit is not None and hit[1] == message else None


def from_view(view: View) -> list[BaseMessage]:
    """The active view as LangChain messages, in order (summaries as ``HumanMessage``)."""
    return [from_ledger(entry.message) for entry in view]


def _blocks(content: str | list[str | dict[str, Any]]) -> list[ContentBlock]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    out: list[ContentBlock] = []
    for part in content:
        if isinstance(part, str):
            out.append({"text": part})
        elif isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
            out.append({"text": part["text"]})
        else:
            out.append({"json": part})
    return out


def _texts(blocks: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(b["text"] for b in blocks if isinstance(b.get("text"), str))


def _revised_content(kept: BaseMessage, message: Message) -> str | list[str | dict[str, Any]]:
    """The content a revised ledger message gives the kept LangChain message."""
    blocks: Sequence[Mapping[str, Any]] = message.content
    results = [b["toolResult"] for b in blocks if "toolResult" in b]
    if isinstance(kept, ToolMessage) and results:
        blocks = results[0].get("content", [])
    parts = [b for b in blocks if "toolUse" not in b]
    if all(isinstance(b.get("text"), str) for b in parts):
        return _texts(parts)
    return [b["text"] if isinstance(b.get("text"), str) else thaw(b.get("json", b)) for b in parts]


def _render(message: Message) -> BaseMessage:
    """A LangChain message for a ledger message that never was one."""
    results = [b["toolResult"] for b in message.content if "toolResult" in b]
    if message.role == "user" and results:
        first = results[0]
        if len(results) > 1:
            logger.debug(
                "message_id=<%s> | several tool results in one message: the first is rendered", message.message_id
            )
        return ToolMessage(
            content=_texts(first.get("content", [])),
            tool_call_id=first["toolUseId"],
            status="error" if first.get("status") == "error" else "success",
            id=message.message_id,
        )
    text = _texts([b for b in message.content if "toolUse" not in b])
    if message.role == "system":
        return SystemMessage(content=text, id=message.message_id)
    if message.role == "user":
        return HumanMessage(content=text, id=message.message_id)
    calls = [
        tool_call(name=b["toolUse"]["name"], args=thaw(b["toolUse"].get("input") or {}), id=b["toolUse"]["toolUseId"])
        for b in message.content
        if "toolUse" in b
    ]
    return AIMessage(content=text, tool_calls=calls, id=message.message_id)
