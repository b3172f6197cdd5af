"""The bodies of the tool content blocks, and the text a list of blocks reads as.

Blocks themselves are plain mappings (:data:`~contextledger.model.jsonvalues.ContentBlock`)
so that every kind survives a round trip; these name the shape of the two kinds the
view's tool-pair rules read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NotRequired, TypedDict

from contextledger.model.jsonvalues import ContentBlock

__all__ = ["ToolResultBlock", "ToolUseBlock", "texts_in"]


class ToolUseBlock(TypedDict):
    """The body of a ``toolUse`` block."""

    toolUseId: str
    name: str
    input: Any


class ToolResultBlock(TypedDict):
    """The body of a ``toolResult`` block."""

    toolUseId: str
    status: NotRequired[Literal["success", "error"]]
    content: list[ContentBlock]


def texts_in(blocks: Iterable[Mapping[str, Any]]) -> Iterable[str]:
    """The texts of ``blocks`` in order: text blocks, tool results' texts, and each tool call as ``name(input)``."""
    for block in blocks:
        if isinstance(block.get("text"), str):
            yield block["text"]
        elif "toolResult" in block:
            yield from texts_in(block["toolResult"].get("content", []))
        elif "toolUse" in block:
            yield f"{block['toolUse'].get('name')}({block['toolUse'].get('input')!r})"
