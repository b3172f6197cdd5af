"""Messages and content blocks in the Converse shape used by Strands Agents: the names in one import.

A :class:`Message` keeps its content blocks as dictionaries so that every block kind --
including ones this library does not know -- survives a round trip unchanged. Binary
payloads (``image``/``document``/``video`` bytes, redacted reasoning) stay ``bytes`` in
memory; :func:`encode_blocks` / :func:`decode_blocks` turn them into a JSON-safe form
losslessly for storage.

Each name lives in the module that holds its kind and is importable from here too: the
model in :mod:`contextledger.model.message`, the JSON value rules in
:mod:`contextledger.model.jsonvalues`, the tool blocks' shapes in
:mod:`contextledger.model.blocks`, what metadata says in :mod:`contextledger.model.metadata`,
messages built from stored text in :mod:`contextledger.model.restored`.

A message is immutable and holds what a store gives back: on construction its content
and metadata are normalised the way JSON stores them (tuples become lists, non-string
dict keys strings, a surrogate pair written as two code points one character) and
frozen into read-only containers (:class:`FrozenDict`, :class:`FrozenList`; a deep copy
of one is an ordinary mutable ``dict``/``list``). Text that no backend can store -- a
lone surrogate, or nesting deeper than :data:`MAX_DEPTH` -- is refused there with
:class:`~contextledger.errors.InvalidMessage`, so the live view and a restored view are
always equal.
"""

from __future__ import annotations

from contextledger.model.blocks import ToolResultBlock, ToolUseBlock
from contextledger.model.jsonvalues import (
    MAX_DEPTH,
    MAX_ID_LENGTH,
    ContentBlock,
    FrozenDict,
    FrozenList,
    check_id,
    check_text,
    decode_blocks,
    encode_blocks,
    normalize_json,
    thaw,
)
from contextledger.model.message import Message, Role, new_message_id
from contextledger.model.metadata import LINKS_KEY, links_in, pinned_in, usage_in
from contextledger.model.restored import (
    holding_text,
    message_from_json,
    message_from_stored_content,
    restored_message,
    restored_record_message,
)

__all__ = [
    "LINKS_KEY",
    "MAX_DEPTH",
    "MAX_ID_LENGTH",
    "ContentBlock",
    "FrozenDict",
    "FrozenList",
    "Message",
    "Role",
    "ToolResultBlock",
    "ToolUseBlock",
    "check_id",
    "check_text",
    "decode_blocks",
    "encode_blocks",
    "holding_text",
    "links_in",
    "message_from_json",
    "message_from_stored_content",
    "new_message_id",
    "normalize_json",
    "pinned_in",
    "restored_message",
    "restored_record_message",
    "thaw",
    "usage_in",
]
