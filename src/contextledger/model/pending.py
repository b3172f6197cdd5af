"""Content a restored message still holds as its stored JSON text: the raw fields beneath ``Message.__dict__``.

A restore keeps each message's content as the text it was read from (see
:func:`~contextledger.model.restored.restored_message`); the message's instance dict
then holds that text under :data:`PENDING` instead of ``content``. The functions here
read and replace that dict beneath the ``__dict__`` property of
:class:`~contextledger.model.messages.Message`: decode the text once, answer tool ids
from it, or parse it into a mutable copy. Nothing else reads the raw dict.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel

from contextledger.model.stored import Unusual, load_json_text, parse_json_text, plain_json

__all__ = [
    "PENDING",
    "decoded_fields",
    "held_text",
    "parsed_text",
    "pending_tool_ids",
    "raw_fields",
    "set_raw_fields",
    "text_tool_ids",
]

# The instance-dict slot of every pydantic model, read and set beneath Message's __dict__ property.
raw_fields = BaseModel.__dict__["__dict__"].__get__
set_raw_fields = BaseModel.__dict__["__dict__"].__set__
# The instance-dict key of content still held as JSON text: not an identifier, so no
# attribute lookup finds it, and nothing but the functions here reads the raw dict.
PENDING = "content (stored JSON text)"
# Two threads decoding one message must end with one content object (``m.content is m.content``).
_DECODE_LOCK = threading.Lock()


def decoded_fields(message: BaseModel) -> dict[str, Any]:
    """The message's fields with its content decoded from the stored text (once; then held)."""
    with _DECODE_LOCK:
        raw: dict[str, Any] = raw_fields(message)
        text = raw.get(PENDING)
        if text is None:
            return raw  # another thread decoded it first
        # The same text decoded the same way it was when restored (the blocks were checked then).
        fields = {
            "message_id": raw["message_id"],
            "role": raw["role"],
            "content": load_json_text(text),
            "metadata": raw["metadata"],
        }
        set_raw_fields(message, fields)
        return fields


# The instance-dict key of the tool ids of content still held as text, found on first ask.
_TOOLS = "tool ids (of the stored JSON text)"
# The tool ids of content without any (see text_tool_ids).
_NO_TOOLS: tuple[Any, ...] = (0,)


def pending_tool_ids(message: BaseModel) -> tuple[Any, ...] | None:
    """The tool ids of a message whose content is still text (see :func:`text_tool_ids`); ``None`` once decoded.

    Found once, they are kept beside the text (the views built after a commit ask
    again): in CPython a dict of up to five keys has one size, so the raw dict of a
    restored message holds them for the cost of one small tuple. (The ids are not
    interned: a table of every id ever read would outgrow what it saves.)
    """
    raw = raw_fields(message)
    text = raw.get(PENDING)
    if text is None:
        return None
    known: tuple[Any, ...] | None = raw.get(_TOOLS)
    if known is None:
        known = raw[_TOOLS] = text_tool_ids(text)  # a raw dict a concurrent decode replaced is dropped with it
    return known


def text_tool_ids(text: str) -> tuple[Any, ...]:
    """The tool ids of content held as its stored JSON ``text``.

    Kept flat: the number of toolUse ids, then those ids, then the toolResult ids.

    They read the same from the parsed text as from the decoded content: decoding only
    turns tagged bytes into ``bytes`` and restores escaped keys, and neither is a tool
    block's key or id.
    """
    if '"toolUse"' not in text and '"toolResult"' not in text and "\\u" not in text:
        return _NO_TOOLS  # no such key, even escaped: no parse at all
    blocks = parse_json_text(text)
    uses = [b["toolUse"]["toolUseId"] for b in blocks if "toolUse" in b]
    results = [b["toolResult"]["toolUseId"] for b in blocks if "toolResult" in b]
    return (len(uses), *uses, *results)


def held_text(message: BaseModel) -> str | None:
    """The stored JSON text the message's content is still held as, or ``None`` once decoded (or never restored)."""
    text: str | None = raw_fields(message).get(PENDING)
    return text


def parsed_text(message: BaseModel) -> list[Any] | None:
    """A new mutable copy of the content parsed from its stored text, or ``None`` (decoded, or not plain)."""
    text = raw_fields(message).get(PENDING)
    if text is None:
        return None
    try:
        parsed: list[Any] = plain_json(text)
    except Unusual:
        return None
    return parsed
