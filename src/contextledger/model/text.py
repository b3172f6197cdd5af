"""One-line texts of ledger records, shared by the inspector and the web view."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from contextledger.model.ids import is_time_ordered
from contextledger.model.messages import Message

__all__ = ["MAX_PREVIEW", "describe", "fmt_time", "short"]

MAX_PREVIEW = 72


def fmt_time(value: datetime) -> str:
    """A UTC timestamp to the second, e.g. ``2025-01-31 12:00:03Z``."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def short(identifier: str | None, width: int = 8) -> str:
    """``width`` characters of an id, enough to tell rows apart in a table (the last ones of a time-ordered id).

    An id the library made (:func:`~contextledger.model.ids.time_ordered_uuid`, of a
    message, summary or reduction) starts with the time, the same for everything made in
    a minute; its random end tells them apart. The CLI finds an entry by a unique start or
    end of its id alike.
    """
    if not identifier:
        return "-"
    if len(identifier) <= width:
        return identifier
    return identifier[-width:] if is_time_ordered(identifier) else identifier[:width]


def describe(message: Message, width: int = MAX_PREVIEW) -> str:
    """A one-line description of a message: tool calls and results marked, text previewed."""
    flat = " ".join(" ".join(_block_texts(message.content)).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _block_texts(blocks: Iterable[Any]) -> Iterable[str]:
    for block in blocks:
        if not isinstance(block, Mapping) or not block:
            continue
        if isinstance(block.get("text"), str):
            yield block["text"]
        elif isinstance(block.get("toolUse"), Mapping):
            tool = block["toolUse"]
            yield f"-> {tool.get('name')}({json.dumps(tool.get('input'), default=str, ensure_ascii=False)})"
        elif isinstance(block.get("toolResult"), Mapping):
            result = block["toolResult"]
            inner = result.get("content")
            yield f"<- [{result.get('status', 'success')}]"
            yield from _block_texts(inner if isinstance(inner, list) else [])
        else:
            yield f"[{next(iter(block))}]"
