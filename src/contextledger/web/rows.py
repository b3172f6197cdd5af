"""Ledger records as the plain rows and content blocks the templates draw.

Everything here is data: strings the templates escape, never markup. An image is
drawn only when its format is one of :data:`IMAGE_TYPES` (its bytes become a
``data:`` URI of that type); any other payload is described, not embedded.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextledger.model.messages import Message
from contextledger.model.records import HistoryEntry, PinEvent, Reduction, SummaryEntry, ViewEntry
from contextledger.model.text import describe, fmt_time

__all__ = [
    "IMAGE_TYPES",
    "PREVIEW",
    "Block",
    "PinRow",
    "Row",
    "history_row",
    "pin_rows",
    "render_blocks",
    "summary_row",
    "tool_partners",
    "view_row",
]

PREVIEW = 140
"""Characters of an entry's text shown in a listing."""
IMAGE_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "jpg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}
"""Image formats drawn inline (as ``data:`` URIs); any other format is only described."""


@dataclass(frozen=True)
class Block:
    """One content block ready to draw: ``kind`` picks the template's branch."""

    kind: str  # text | tool_use | tool_result | image | json
    text: str = ""
    name: str = ""
    tool_use_id: str = ""
    status: str = ""
    partner: str | None = None  # the entry holding the other half of the tool pair
    data_uri: str = ""
    children: tuple[Block, ...] = ()


@dataclass(frozen=True)
class Row:
    """One entry of a listing (history, live view, search hit)."""

    entry_id: str
    kind: str
    seq: int
    role: str
    status: str  # active | evicted | superseded
    pinned: bool
    tokens: int
    preview: str
    created_at: str
    evicted_by: Reduction | None = None
    replaced_by: str | None = None
    revisions: int = 0
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True)
class PinRow:
    """A pin or unpin of an entry: when, by whom (``api``, ``model``, ``host``, ...)."""

    entry_id: str
    pinned: bool
    at: str
    source: str
    preview: str
    from_call: int = 0


def history_row(
    h: HistoryEntry,
    *,
    reductions: Mapping[str, Reduction],
    replaced_by: Mapping[str, str],
    partners: Mapping[tuple[str, str], str] | None = None,
) -> Row:
    """A message of the history; with ``partners``, its content blocks too."""
    return Row(
        entry_id=h.message.message_id,
        kind="message",
        seq=h.seq,
        role=h.message.role,
        status=h.status,
        pinned=h.pinned,
        tokens=h.tokens,
        preview=describe(h.message, PREVIEW),
        created_at=fmt_time(h.created_at),
        evicted_by=reductions.get(h.evicted_by or ""),
        replaced_by=replaced_by.get(h.message.message_id),
        revisions=h.revision_count,
        blocks=render_blocks(h.message, partners) if partners is not None else (),
    )


def summary_row(s: SummaryEntry, *, reductions: Mapping[str, Reduction], with_blocks: bool = False) -> Row:
    """A summary as a listing row (``superseded`` when a newer summary replaced it)."""
    return Row(
        entry_id=s.summary_id,
        kind="summary",
        seq=s.seq,
        role="user",
        status="superseded" if s.superseded_by else s.status,
        pinned=False,
        tokens=s.tokens,
        preview=f"summary of {len(s.replaces)}: " + " ".join(s.content.split())[:PREVIEW],
        created_at=fmt_time(s.created_at),
        evicted_by=reductions.get(s.evicted_by or ""),
        replaced_by=s.superseded_by,
        blocks=(Block(kind="text", text=s.content),) if with_blocks else (),
    )


def view_row(e: ViewEntry, partners: Mapping[tuple[str, str], str] | None = None) -> Row:
    """An entry of the live view (a message or a summary); with ``partners``, its content blocks too."""
    return Row(
        entry_id=e.entry_id,
        kind=e.kind,
        seq=e.seq,
        role="summary" if e.kind == "summary" else e.message.role,
        status="active",
        pinned=e.pinned,
        tokens=e.tokens,
        preview=describe(e.message, PREVIEW),
        created_at="",
        blocks=render_blocks(e.message, partners) if partners is not None else (),
    )


def pin_rows(events: Sequence[PinEvent], previews: Mapping[str, str]) -> list[PinRow]:
    """Every pin change, oldest first, with a preview of the entry concerned."""
    return [
        PinRow(
            entry_id=e.entry_id,
            pinned=e.pinned,
            at=fmt_time(e.at),
            source=e.source,
            preview=previews.get(e.entry_id, ""),
            from_call=e.from_call,
        )
        for e in events
    ]


def tool_partners(messages: Iterable[Message]) -> dict[tuple[str, str], str]:
    """(``use`` | ``result``, toolUseId) -> the message id holding that half."""
    found: dict[tuple[str, str], str] = {}
    for m in messages:
        for tool_id in m.tool_use_ids:
            found.setdefault(("use", tool_id), m.message_id)
        for tool_id in m.tool_result_ids:
            found.setdefault(("result", tool_id), m.message_id)
    return found


def render_blocks(
    message: Message | Sequence[Mapping[str, Any]], partners: Mapping[tuple[str, str], str] | None = None
) -> tuple[Block, ...]:
    """Content blocks as :class:`Block` records (tool halves linked to their partner entry)."""
    blocks = message.content if isinstance(message, Message) else message
    return tuple(_block(b, partners or {}) for b in blocks)


def _block(block: Mapping[str, Any], partners: Mapping[tuple[str, str], str]) -> Block:
    if isinstance(block.get("text"), str):
        return Block(kind="text", text=block["text"])
    tool = block.get("toolUse")
    if isinstance(tool, Mapping):
        tool_id = str(tool.get("toolUseId", ""))
        return Block(
            kind="tool_use",
            name=str(tool.get("name", "")),
            tool_use_id=tool_id,
            text=json.dumps(_jsonable(tool.get("input")), indent=2, ensure_ascii=False, default=str),
            partner=partners.get(("result", tool_id)),
        )
    result = block.get("toolResult")
    if isinstance(result, Mapping):
        tool_id = str(result.get("toolUseId", ""))
        inner = result.get("content")
        children = (
            tuple(_block(b, partners) for b in inner if isinstance(b, Mapping)) if isinstance(inner, list) else ()
        )
        return Block(
            kind="tool_result",
            tool_use_id=tool_id,
            status=str(result.get("status", "success")),
            partner=partners.get(("use", tool_id)),
            children=children,
        )
    for kind in ("image", "document", "video"):
        body = block.get(kind)
        if isinstance(body, Mapping):
            source = body.get("source")
            raw = source.get("bytes") if isinstance(source, Mapping) else None
            fmt = str(body.get("format", ""))
            size = f"{len(raw)} bytes" if isinstance(raw, bytes) else ""
            mime = IMAGE_TYPES.get(fmt.lower() or "png") if kind == "image" else None
            if mime is not None and isinstance(raw, bytes):
                encoded = base64.b64encode(raw).decode("ascii")
                return Block(kind="image", name=fmt, text=size, data_uri=f"data:{mime};base64,{encoded}")
            return Block(kind="json", name=kind, text=f"{body.get('name') or fmt} {size}".strip())
    return Block(
        kind="json",
        name=str(next(iter(block), "block")),
        text=json.dumps(_jsonable(block), indent=2, ensure_ascii=False),
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def jsonable(value: Any) -> Any:
    """``value`` with bytes replaced by their size, ready for :func:`json.dumps`."""
    return _jsonable(value)
