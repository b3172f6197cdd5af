"""Ledger messages back to OpenAI Responses input items: what each message renders as.

Back from messages (:func:`messages_to_items`): a message whose content is still the one
it was stored with returns the kept item exactly, so ``items -> messages -> items`` is
the identity. That is told by the fingerprint (a restored message's content is hashed as
the text it was read as, not decoded:
:func:`~contextledger.integrations.kept.unchanged`), or, for an item kept without one
(before 0.3), by projecting the item again. A message whose content a manager revised (a
truncated tool result) is rendered from its blocks into the kept item's shape, for the
output types whose output is text (``function_call_output``,
``custom_tool_call_output``, ``local_shell_call_output``, ``apply_patch_call_output``);
the others return the kept item unchanged (the revision stays in the ledger but does not
reach the host). A message that never was an item (a summary, the result a crash repair
appended, a message written by another host) is rendered from its blocks.

:class:`ItemRenderer` renders a view again and again (each ``get_items``, each model
call's input): it remembers which of the view's (immutable) messages render as their
kept item unrevised, so the fingerprint of each is checked once, not on every rendering.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.core.view import View
from contextledger.errors import ConfigurationError, InvalidMessage
from contextledger.integrations.kept import fingerprinted, unchanged
from contextledger.integrations.openai_agents.items import CALL_OUTPUT_TYPES, ITEM_KEY, project_item
from contextledger.integrations.openai_agents.render import output_value, render_message
from contextledger.model.jsonvalues import thaw
from contextledger.model.messages import Message

__all__ = [
    "ItemRenderer",
    "call_types_of",
    "is_opaque",
    "item_groups",
    "kept_item",
    "message_to_items",
    "messages_to_items",
    "newest_messages",
    "unrevised_item",
]

logger = logging.getLogger(__name__)

_TEXT_OUTPUTS = {
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "apply_patch_call_output",
}


def is_opaque(message: Message) -> bool:
    """Whether ``message`` keeps an item with neither ``type`` nor ``role`` (a wrapper's envelope)."""
    item = kept_item(message)
    return item is not None and "type" not in item and "role" not in item


def kept_item(message: Message) -> dict[str, Any] | None:
    """The original item a message was made from, or ``None`` (not a copy: do not mutate)."""
    box = message.metadata.get(ITEM_KEY)
    item = box.get("item") if isinstance(box, Mapping) else None
    return item if isinstance(item, dict) else None


def messages_to_items(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The items for ``messages``, in order (fresh copies).

    The inverse of :func:`items_to_messages`: messages made from items and not revised
    since give back exactly those items. A tool result without an item is rendered as
    the output type that answers its call (looked up among ``messages``).
    """
    return [item for group in item_groups(messages) for item in group]


def item_groups(messages: Sequence[Message]) -> list[list[dict[str, Any]]]:
    """The items of each message of ``messages`` (see :func:`messages_to_items`), one list per message."""
    call_types = call_types_of(messages)
    return [message_to_items(message, call_types) for message in messages]


def call_types_of(messages: Sequence[Message]) -> dict[str, str]:
    """ToolUseId -> the type of the call item each tool use of ``messages`` was (``function_call`` when unknown)."""
    call_types = {}
    for message in messages:
        item = kept_item(message)
        kind = item.get("type") if item is not None else None
        for tool_use_id in message.tool_use_ids:
            call_types[tool_use_id] = kind if kind in CALL_OUTPUT_TYPES else "function_call"
    return call_types


def newest_messages(view: View, limit: int | None) -> list[Message]:
    """The newest ``limit`` messages of ``view`` (all when ``None``), never half a tool pair.

    A tool group cut by the limit (a call kept without its output, or an output whose
    call falls before the cut) is left out whole, so at most ``limit`` messages come back
    and every call among them has its output. This is ``Session.get_items(limit)``.

    Raises:
        ConfigurationError: ``limit`` is not ``None`` or an int >= 0.
    """
    if limit is None:
        return list(view.messages)  # messages are immutable: the view's own, not copies
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ConfigurationError(f"limit must be None or an int >= 0, got {limit!r}")
    start = max(len(view) - limit, 0)
    keep = [i for i in range(start, len(view)) if view.group_of(i)[0] >= start]
    return [view[i].message for i in keep]


def message_to_items(message: Message, call_types: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The items one message stands for (usually one; a foreign message may give several).

    Args:
        message: A ledger message.
        call_types: toolUseId -> the call item type, used to give a rendered tool result
            the output type that answers its call (default ``function_call``).
    """
    item = unrevised_item(message)
    if item is not None:
        return [thaw(item)]
    item = kept_item(message)
    if item is not None:
        revised = _revised_output(item, message)
        if revised is not None:
            return [revised]
        logger.debug("item_type=<%s> | content revised but the item type cannot carry it; kept", item.get("type"))
        return [thaw(item)]
    return render_message(message, call_types or {})


def unrevised_item(message: Message) -> dict[str, Any] | None:
    """The kept item of ``message`` when its content is still the one stored with it (not a copy), else ``None``.

    Told by the fingerprint (a restored message's held text hashed, not decoded) or, for
    an item kept without one (before 0.3), by projecting the item again.
    """
    item = kept_item(message)
    if item is None:
        return None
    if fingerprinted(message, ITEM_KEY):
        return item if unchanged(message, ITEM_KEY) else None
    try:
        return item if project_item(item) == (message.role, message.content) else None
    except InvalidMessage:
        return None


def _revised_output(item: Mapping[str, Any], message: Message) -> dict[str, Any] | None:
    """The kept output item with its output replaced by the message's revised result."""
    results = [b["toolResult"] for b in message.content if "toolResult" in b]
    if item.get("type") not in _TEXT_OUTPUTS or len(results) != 1 or len(message.content) != 1:
        return None
    revised = copy.deepcopy(dict(item))
    revised["output"] = output_value(results[0].get("content", []), text_only=item["type"] != "function_call_output")
    return revised


class ItemRenderer:
    """Renders views as items (fresh copies each time), remembering what it rendered.

    Two memories, both safe because views and their messages are immutable:

    * the view rendered last (the same object, with the same ``limit``): asked again, as
      each ``get_items`` of a session nothing moved asks (a refresh keeps the view it
      holds), its items are copied from what was rendered, with no message built again;
    * the messages found unrevised (the fingerprint checked, see :func:`unrevised_item`):
      while an equal message stands in the views rendered, it renders as its kept item
      without the check. Each rendering keeps only the messages it met, so what is
      remembered never outgrows the view.

    Safe to share between threads: a rendering reads each memory once and replaces it
    whole. Besides the view it holds, the renderer keeps the rendered items of messages
    that never were an item (the kept ones are the view's own, shared).
    """

    def __init__(self) -> None:
        """Remember nothing yet."""
        self._unrevised: dict[str, Message] = {}
        self._last: tuple[View, int | None, list[Any]] | None = None

    def view_items(self, view: View, limit: int | None = None) -> list[dict[str, Any]]:
        """The items of :func:`newest_messages` (``view``, ``limit``), oldest first.

        Raises:
            ConfigurationError: ``limit`` is not ``None`` or an int >= 0.
        """
        last = self._last
        if last is None or last[0] is not view or last[1] != limit:
            sources = [item for group in self._sources(newest_messages(view, limit)) for item in group]
            last = (view, limit, sources)
            self._last = last
        return [thaw(item) for item in last[2]]

    def groups(self, messages: Sequence[Message]) -> list[list[dict[str, Any]]]:
        """:func:`item_groups` of ``messages``."""
        return [[thaw(item) for item in group] for group in self._sources(messages)]

    def _sources(self, messages: Sequence[Message]) -> list[list[Any]]:
        """Per message, what its items are copied from: the kept item (read-only) or items rendered here (kept here)."""
        known, now = self._unrevised, {}
        call_types: dict[str, str] | None = None
        sources: list[list[Any]] = []
        for message in messages:
            message_id = message.message_id
            # A restored view builds its messages anew on each read: the one met before is
            # told by equality, which for two holding the same stored text is a few
            # identity checks (see Message.__eq__).
            seen = known.get(message_id)
            same = seen is not None and (seen is message or seen == message)
            item = kept_item(message) if same else unrevised_item(message)
            if item is not None:
                now[message_id] = message
                sources.append([item])
                continue
            if call_types is None:  # only a message rendered from its blocks needs them
                call_types = call_types_of(messages)
            sources.append(message_to_items(message, call_types))
        self._unrevised = now
        return sources
