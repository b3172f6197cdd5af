"""Message pinning: helpers, and a ``pin_message`` tool an agent can call.

A pinned message (and its tool-pair partner) is never evicted or summarized by any
manager. The flag lives in ``metadata["custom"]["pinned"]``, where Strands keeps it, so
it survives a round trip through the host. Pins made through a
:class:`~contextledger.Conversation` are committed at once.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol, overload

from contextledger.conversation.transaction import Transaction
from contextledger.core.building import pin_edit
from contextledger.core.view import View
from contextledger.errors import ContextLedgerError, PinError
from contextledger.model.messages import Message
from contextledger.model.records import ViewEntry

__all__ = [
    "PIN_MESSAGE_TOOL_NAME",
    "PIN_MESSAGE_TOOL_SPEC",
    "PinTarget",
    "Pins",
    "handle_pin_message_tool",
    "is_pinned",
    "pin_message",
    "unpin_message",
]

PIN_MESSAGE_TOOL_NAME: Final = "pin_message"

PIN_MESSAGE_TOOL_SPEC: Final[dict[str, Any]] = {
    "name": PIN_MESSAGE_TOOL_NAME,
    "description": (
        "Pin (or unpin) a message of this conversation so that it is never removed or summarized "
        "when the context window is reduced. Pin facts you must remember; unpin them when no longer needed."
    ),
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "index": {
                    "type": "integer",
                    "description": "0-based position of the message in the conversation; negative counts from the end.",
                },
                "action": {
                    "type": "string",
                    "enum": ["pin", "unpin"],
                    "default": "pin",
                    "description": "'pin' (the default) or 'unpin'.",
                },
            },
            "required": ["index"],
            "additionalProperties": False,
        }
    },
}
"""The tool's spec in the Converse/Strands ``toolSpec`` shape."""


@overload
def pin_message(message: Message) -> Message: ...
@overload
def pin_message(message: Mapping[str, Any]) -> dict[str, Any]: ...
def pin_message(message: Message | Mapping[str, Any]) -> Message | dict[str, Any]:
    """Return a pinned copy of ``message`` (a :class:`Message` or a Strands message dict).

    Raises:
        TypeError: ``message`` is neither.
    """
    return _with_pin(message, True)


@overload
def unpin_message(message: Message) -> Message: ...
@overload
def unpin_message(message: Mapping[str, Any]) -> dict[str, Any]: ...
def unpin_message(message: Message | Mapping[str, Any]) -> Message | dict[str, Any]:
    """Return an unpinned copy of ``message`` (the flag is removed, other metadata kept).

    Raises:
        TypeError: ``message`` is neither a :class:`Message` nor a message dict.
    """
    return _with_pin(message, False)


@overload
def is_pinned(message: Message | Mapping[str, Any], /) -> bool: ...
@overload
def is_pinned(messages: Sequence[Message | Mapping[str, Any]], index: int, /) -> bool: ...
def is_pinned(
    target: Message | Mapping[str, Any] | Sequence[Message | Mapping[str, Any]],
    index: int | None = None,
    /,
) -> bool:
    """Whether a message is pinned.

    ``is_pinned(message)`` checks the flag. ``is_pinned(messages, index)`` also counts a
    pinned tool-pair partner (matched by toolUseId), since managers keep pairs together.

    Raises:
        PinError: ``index`` is out of range.
        TypeError: The arguments match neither form.
    """
    if index is None:
        if isinstance(target, Message | Mapping):
            return _flag(target)
        raise TypeError("is_pinned(message) takes one message; use is_pinned(messages, index) for a list")
    if isinstance(target, Message | Mapping | str | bytes):
        raise TypeError("is_pinned(messages, index) takes a sequence of messages")
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"index must be an int, got {index!r}")
    size = len(target)
    if not -size <= index < size:
        raise PinError(f"index {index} is out of range for {size} messages")
    view = View([ViewEntry(entry_id=str(i), seq=i, message=_as_message(m)) for i, m in enumerate(target)])
    return view.is_pinned(index % size)


class Pins:
    """The pin API of a conversation: each change is one commit of its :class:`Transaction`.

    Attributes:
        transaction: Commits each pin change.
    """

    def __init__(self, transaction: Transaction) -> None:
        """Pin entries of ``transaction``'s conversation."""
        self.transaction = transaction

    def pin(self, entry_id: str, *, source: str = "api") -> None:
        """Pin an active message (persisted at once, recorded as a pin event from ``source``).

        Raises:
            PinError: ``entry_id`` is not an active message (summaries cannot be pinned).
        """
        self.set(entry_id, True, source)

    def unpin(self, entry_id: str, *, source: str = "api") -> None:
        """Unpin an active message (persisted at once, recorded as a pin event from ``source``).

        Raises:
            PinError: ``entry_id`` is not an active message.
        """
        self.set(entry_id, False, source)

    def pin_index(self, index: int, pinned: bool = True, *, source: str = "api") -> str:
        """Pin or unpin the message at ``index`` of the view and return its id.

        ``source`` says who asked (``api``, ``model`` for the ``pin_message`` tool, ``host``).

        Raises:
            PinError: ``index`` is not an int, is out of range or names a summary.
        """
        with self.transaction.lock:
            entry_id = self.transaction.view.id_at(index)
            self.set(entry_id, pinned, source)
            return entry_id

    def set(self, entry_id: str, pinned: bool, source: str = "api") -> None:
        """Commit ``entry_id``'s pin flag (nothing when it already has it).

        Raises:
            PinError: ``entry_id`` is not an active message.
        """
        self.transaction.edit(lambda view: pin_edit(view, entry_id, pinned, source))


class PinTarget(Protocol):
    """What the ``pin_message`` tool needs of a conversation."""

    @property
    def view(self) -> View:
        """The active view."""
        ...

    def pin_index(self, index: int, pinned: bool = True, *, source: str = "api") -> str:
        """Pin or unpin the message at ``index``; its id."""
        ...


def handle_pin_message_tool(
    conversation: PinTarget,
    tool_input: Mapping[str, Any] | Any,
    *,
    tool_use_id: str | None = None,
) -> dict[str, Any]:
    """Run the ``pin_message`` tool against ``conversation``; never raises at the agent.

    The pin is committed at once (:meth:`Conversation.pin_index`).

    Args:
        conversation: The conversation the agent is in.
        tool_input: ``{"index": int, "action": "pin" | "unpin"}`` (``action`` defaults to pin).
        tool_use_id: Included in the result when given.

    Returns:
        A toolResult body: ``{"status": "success" | "error", "content": [{"text": ...}]}``.
    """
    try:
        index, action = _parse_tool_input(tool_input)
        view = conversation.view
        size = len(view)
        if not -size <= index < size:
            return _tool_result(
                "error",
                f"index {index} is out of range: the conversation has {size} messages (valid: 0..{size - 1})"
                if size
                else f"index {index} is out of range: the conversation has no messages",
                tool_use_id,
            )
        if view[index].kind == "summary":
            return _tool_result(
                "error", f"message {index} is a summary; summaries cannot be pinned or unpinned", tool_use_id
            )
        entry_id = conversation.pin_index(index, action == "pin", source="model")
    except ContextLedgerError as exc:
        return _tool_result("error", str(exc), tool_use_id)
    verb = "pinned" if action == "pin" else "unpinned"
    return _tool_result("success", f"message {index} ({entry_id}) {verb}", tool_use_id)


def _parse_tool_input(tool_input: object) -> tuple[int, str]:
    if not isinstance(tool_input, Mapping):
        raise PinError(f"pin_message expects an object {{'index': int, 'action': 'pin'|'unpin'}}, got {tool_input!r}")
    unknown = set(tool_input) - {"index", "action"}
    if unknown:
        raise PinError(f"pin_message: unknown argument(s) {sorted(map(str, unknown))}; expected 'index' and 'action'")
    if "index" not in tool_input:
        raise PinError("pin_message: 'index' is required")
    index = tool_input["index"]
    if isinstance(index, bool) or not isinstance(index, int):
        raise PinError(f"pin_message: 'index' must be an integer, got {index!r}")
    action = tool_input.get("action", "pin")
    if action not in ("pin", "unpin"):
        raise PinError(f"pin_message: 'action' must be 'pin' or 'unpin', got {action!r}")
    return index, str(action)


def _tool_result(status: str, text: str, tool_use_id: str | None) -> dict[str, Any]:
    result: dict[str, Any] = {"status": status, "content": [{"text": text}]}
    if tool_use_id is not None:
        result["toolUseId"] = tool_use_id
    return result


def _flag(message: Message | Mapping[str, Any]) -> bool:
    if isinstance(message, Message):
        return message.pinned
    metadata = message.get("metadata")
    custom = metadata.get("custom") if isinstance(metadata, Mapping) else None
    return isinstance(custom, Mapping) and custom.get("pinned") is True


def _as_message(message: Message | Mapping[str, Any]) -> Message:
    if isinstance(message, Message):
        return message
    if isinstance(message, Mapping):
        return Message.from_strands(message)
    raise TypeError(f"not a message: {message!r}")


def _with_pin(message: Message | Mapping[str, Any], pinned: bool) -> Message | dict[str, Any]:
    if isinstance(message, Message):
        return message.with_pin(pinned)
    if isinstance(message, Mapping):
        out = copy.deepcopy(dict(message))
        metadata = dict(out.get("metadata") or {})
        custom = dict(metadata.get("custom") or {})
        if pinned:
            custom["pinned"] = True
        else:
            custom.pop("pinned", None)
        if custom:
            metadata["custom"] = custom
        else:
            metadata.pop("custom", None)
        if metadata or "metadata" in message:
            out["metadata"] = metadata
        return out
    raise TypeError(f"not a message: {message!r}")
