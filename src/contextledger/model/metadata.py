"""What a message's metadata says about it: its pin, its model usage, the tool calls it travels with.

Read straight from the metadata mapping, so a row can answer without building its message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["LINKS_KEY", "links_in", "pinned_in", "usage_in"]

LINKS_KEY = "links"
"""``Message.metadata[LINKS_KEY]``: toolUseIds a message travels with (see :attr:`Message.tool_ids`)."""


def pinned_in(metadata: Mapping[str, Any]) -> bool:
    """:attr:`Message.pinned` of a message with ``metadata``: whether ``custom.pinned`` is set."""
    custom = metadata.get("custom")
    if custom is None:  # the common case: asked of every entry by every manager and sync
        return False
    return isinstance(custom, Mapping) and custom.get("pinned") is True


def usage_in(metadata: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """:attr:`Message.usage` of a message with ``metadata``."""
    usage = metadata.get("usage")
    if usage is None:  # most messages: no ABC check (every append asks each message)
        return None
    return usage if isinstance(usage, Mapping) else None


def links_in(metadata: Mapping[str, Any]) -> set[str]:
    """The toolUseIds a message with ``metadata`` travels with (see :attr:`Message.tool_ids`)."""
    linked = metadata.get(LINKS_KEY)
    return {t for t in linked if isinstance(t, str)} if isinstance(linked, list | tuple) else set()
