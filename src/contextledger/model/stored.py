"""Stored messages decoded without re-validation: the restore's fast path.

A store's rows were validated when they were written. Restoring them through the
validating constructor would change nothing, so the functions here decode the JSON a
store holds and freeze it exactly as the constructor would (see
:mod:`contextledger.model.jsonvalues`), check the shape the ledger relies on (id, role,
blocks, tool ids), and give the message's fields for
:meth:`~contextledger.model.messages.Message.from_record` and
:func:`~contextledger.model.restored.message_from_json` to build it with. Anything else
raises -- :class:`Unusual` or the error the value provokes -- and the caller takes the
validating path, which reports it as it always has.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pydantic_core import from_json

from contextledger.errors import EncryptionKeyMissing
from contextledger.model.jsonvalues import (  # the codec's private parts: the walk mirrors its decoding
    _BYTES_TAG,
    _ESCAPED_TAG,
    _LEAVES,
    MAX_DEPTH,
    MAX_ID_LENGTH,
    FrozenDict,
    FrozenList,
    _decode_bytes,
    check_text,
)

__all__ = [
    "ROLES",
    "SEALED",
    "Unusual",
    "check_block",
    "checked_stored_content_fields",
    "checked_text_fields",
    "load_frozen",
    "load_json_text",
    "message_fields",
    "parse_json",
    "parse_json_text",
    "plain_json",
    "record_fields",
    "sealed_values_allowed",
    "stored_content_fields",
    "text_fields",
]

ROLES = frozenset(("system", "user", "assistant"))
"""The roles of a message."""
# Each role as one string object: a driver hands out a new string per row.
_ROLE = {role: role for role in ROLES}
# The parser makes a new string for every key of every row ("text", "toolUseId", ...);
# interned, a restored view holds each distinct key once (an interned string is freed
# with its last user, so this does not grow with what was read).
_intern = sys.intern
# The frozen containers refuse changes; the decoder fills the ones it has just made.
_list_set = list.__setitem__
_dict_set = dict.__setitem__
EMPTY = FrozenDict()
"""The empty metadata every stored message without any shares (read-only, so one suffices)."""


class Unusual(Exception):
    """A stored value the fast restore path leaves to the validating constructor."""


_BYTES_TAG_BYTES = _BYTES_TAG.encode("ascii")
# JSON's white space, as characters (text) and as byte values (bytes): none may stand
# around the value the stores write.
_SPACE = frozenset(" \t\n\r") | frozenset(b" \t\n\r")


def load_frozen(value: Any, depth: int = 0) -> Any:
    """Freshly parsed JSON decoded (tagged bytes) and frozen in one walk, as validation would.

    Raises :class:`Unusual` (or any error) for whatever the validating constructor
    must judge: non-JSON types, nesting deeper than :data:`MAX_DEPTH`.
    """
    kind = type(value)
    if kind is str:
        return value if value.isascii() else check_text(value)
    if kind is dict:
        if len(value) == 1 and _BYTES_TAG in value:
            return _decode_bytes(value[_BYTES_TAG])
        if depth >= MAX_DEPTH:
            raise Unusual
        return FrozenDict({_load_key(k): load_frozen(v, depth + 1) for k, v in value.items()}) if value else EMPTY
    if kind is list:
        if depth >= MAX_DEPTH:
            raise Unusual
        return FrozenList([load_frozen(v, depth + 1) for v in value])
    if kind is int or kind is float or kind is bool or value is None:
        return value
    raise Unusual


def _load_key(key: Any) -> str:
    if type(key) is not str:
        raise Unusual
    if key.startswith("~") and _ESCAPED_TAG.fullmatch(key):
        key = key[1:]
    return _intern(key) if key.isascii() else check_text(key)


def _freeze_plain(value: Any, depth: int) -> Any:
    """:func:`load_frozen` of JSON parsed from text that holds no tag, no escape and only ASCII.

    Such text has nothing to decode: no tagged bytes, no escaped key and no string that
    could hold a surrogate, so only the containers are frozen (and the depth checked).
    """
    # Loops filling the frozen containers in place, not comprehensions: each comprehension
    # is a function call of its own, and this runs for every block of every row read.
    kind = type(value)
    if kind is list:
        if depth >= MAX_DEPTH:
            raise Unusual
        depth += 1
        items = FrozenList(value)
        for i, item in enumerate(value):
            if type(item) not in _LEAVES:
                _list_set(items, i, _freeze_plain(item, depth))
        return items
    if kind is dict:
        if not value:
            return EMPTY
        if depth >= MAX_DEPTH:
            raise Unusual
        depth += 1
        frozen = FrozenDict()
        for key, item in value.items():
            _dict_set(frozen, _intern(key), item if type(item) in _LEAVES else _freeze_plain(item, depth))
        return frozen
    return value  # a scalar: the only other values JSON text parses to


def parse_json_text(text: str | bytes) -> Any:
    """``json.loads(text)`` for JSON text as the stores write it: ASCII, nothing around the value.

    Parsed by pydantic-core's parser (``pydantic_core.from_json``), three to five times
    as fast as ``json.loads`` on a message's content: the restore of a long view parses
    every row's content and metadata. It gives what ``json.loads`` gives -- the same
    values in new ``dict`` and ``list`` containers -- or refuses: a lone surrogate, a
    nesting deeper than its limit, a number with more digits than ``int`` takes. Anything
    it refuses, and anything else -- bytes that are not ASCII (``json.loads`` guesses
    their encoding), white space around the value, text that is not JSON -- raises
    :class:`Unusual`, and the caller takes the general path, which parses or reports it
    as ``json.loads`` does. Only keys go through pydantic-core's string cache: no
    message text stays in a cache after the message is gone.

    Raises:
        Unusual: The text is not of that kind.
    """
    if type(text) is not str and (type(text) is not bytes or not text.isascii()):
        raise Unusual
    if not text or text[0] in _SPACE or text[-1] in _SPACE:
        raise Unusual
    try:
        return from_json(text, cache_strings="keys")
    except (ValueError, TypeError):  # not JSON, or a value it does not take (see above)
        raise Unusual from None


def parse_json(text: str | bytes) -> Any:
    """``json.loads(text)``: by :func:`parse_json_text` when it takes the text, else by ``json.loads`` itself.

    The same value, or the same error, as ``json.loads``.

    Raises:
        ValueError: ``text`` is not JSON (``json.JSONDecodeError``).
        UnicodeDecodeError: ``text`` is bytes ``json.loads`` cannot decode.
    """
    try:
        return parse_json_text(text)
    except Unusual:
        return json.loads(text)


def load_json_text(text: str | bytes) -> Any:
    r"""``load_frozen(json.loads(text))`` for JSON text as the stores write it, in fewer steps.

    The text is parsed by :func:`parse_json_text`; text that is ASCII, without a ``\u``
    escape or a bytes tag, has nothing to decode and is frozen without looking at its
    strings.

    Raises:
        Unusual: The text is not of that kind (see :func:`parse_json_text`, :func:`load_frozen`).
    """
    value = parse_json_text(text)
    if isinstance(text, str):
        plain = text.isascii() and "\\u" not in text and _BYTES_TAG not in text
    else:  # ASCII, as parse_json_text checked
        plain = b"\\u" not in text and _BYTES_TAG_BYTES not in text
    return _freeze_plain(value, 0) if plain else load_frozen(value)


def plain_json(text: str) -> Any:
    r"""``json.loads(text)``, or :class:`Unusual` when decoding the text would change what it parses to.

    That is text as the stores write it (see :func:`parse_json_text`) holding only ASCII,
    no ``\u`` escape and no bytes tag: what it parses to is what :func:`load_json_text`
    freezes, value for value, in ordinary (mutable, new) containers.

    Raises:
        Unusual: The text is not of that kind.
    """
    if not text.isascii() or "\\u" in text or _BYTES_TAG in text:
        raise Unusual
    return parse_json_text(text)


def checked_text_fields(
    message_id: Any, role: Any, content: str | bytes, metadata: str | bytes | None
) -> tuple[dict[str, Any], str]:
    """:func:`text_fields` but the content, checked and left as its text (returned with the fields).

    For plain text (see :func:`plain_json`) the blocks are parsed and checked as
    :func:`message_fields` checks the frozen ones, without building those; anything else
    is checked by :func:`text_fields` itself. Either way :func:`load_json_text` of the
    returned text gives the content :func:`text_fields` would have held.

    Raises:
        Unusual: The record is not one the fast path takes (or the error it provokes).
    """
    text, blocks = _plain_blocks(content)
    if blocks is None:
        fields = text_fields(message_id, role, text, metadata)
    else:
        frozen = EMPTY if metadata is None or metadata == "{}" else load_json_text(metadata) or EMPTY
        if type(frozen) is not FrozenDict:
            raise Unusual
        fields = message_fields(message_id, role, blocks, frozen, block_type=dict)
    del fields["content"]
    return fields, text


def checked_stored_content_fields(record: Mapping[str, Any], content: str | bytes) -> tuple[dict[str, Any], str]:
    """:func:`stored_content_fields` but the content, checked and left as its text; see :func:`checked_text_fields`.

    Raises:
        Unusual: The record is not one the fast path takes (or the error it provokes).
    """
    text, blocks = _plain_blocks(content)
    if blocks is None:
        fields = stored_content_fields(record, text)
    else:
        metadata = record.get("metadata") or {}
        if type(metadata) is not dict:
            raise Unusual
        fields = message_fields(record["message_id"], record["role"], blocks, load_frozen(metadata), block_type=dict)
    del fields["content"]
    return fields, text


def _plain_blocks(content: str | bytes) -> tuple[str, list[Any] | None]:
    """The content's text, and its blocks parsed (not frozen) when the text is plain and shallow, else ``None``.

    Raises:
        Unusual: The content is neither text nor ASCII bytes, or parses to no list.
    """
    if type(content) is bytes:
        if not content.isascii():
            raise Unusual
        text = content.decode("ascii")
    elif type(content) is str:
        text = content
    else:
        raise Unusual
    # Nesting deeper than MAX_DEPTH needs that many brackets; with fewer no walk is needed.
    if text.count("[") + text.count("{") >= MAX_DEPTH:
        return text, None
    try:
        blocks = plain_json(text)
    except Unusual:
        return text, None
    if type(blocks) is not list:
        raise Unusual
    return text, blocks


def record_fields(record: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``Message.from_record(record)`` for a record that is what the codec writes.

    Raises:
        Unusual: Anything else (or the error it provokes).
    """
    message_id, role, content = record["message_id"], record["role"], record["content"]
    metadata = record.get("metadata") or {}
    if type(content) is not list or type(metadata) is not dict:
        raise Unusual
    return message_fields(message_id, role, load_frozen(content), load_frozen(metadata))


def text_fields(message_id: Any, role: Any, content: str | bytes, metadata: str | bytes | None) -> dict[str, Any]:
    """:func:`record_fields` of a record whose content and metadata are still JSON text (``None``: no metadata).

    Raises:
        Unusual: Anything else (or the error it provokes).
    """
    blocks = load_json_text(content)
    if type(blocks) is not FrozenList:
        raise Unusual
    # Most messages carry no metadata: ``{}`` needs no parse.
    frozen = EMPTY if metadata is None or metadata == "{}" else load_json_text(metadata) or EMPTY
    if type(frozen) is not FrozenDict:
        raise Unusual
    return message_fields(message_id, role, blocks, frozen)


def stored_content_fields(record: Mapping[str, Any], content: str | bytes) -> dict[str, Any]:
    """:func:`record_fields` of ``{**record, "content": json.loads(content)}``.

    Raises:
        Unusual: Anything else (or the error it provokes).
    """
    blocks = load_json_text(content)
    metadata = record.get("metadata") or {}
    if type(blocks) is not FrozenList or type(metadata) is not dict:
        raise Unusual
    return message_fields(record["message_id"], record["role"], blocks, load_frozen(metadata))


def message_fields(
    message_id: Any, role: Any, blocks: Any, metadata: FrozenDict, *, block_type: type[dict[str, Any]] = FrozenDict
) -> dict[str, Any]:
    """A message's fields from decoded, frozen values, once the shape the ledger relies on is checked.

    The id and role must be what a store writes (ASCII id within the length limit, a
    known role) and every block a non-empty mapping of a known shape (tool pairing,
    text) of exactly ``block_type``; anything else raises and is left to the
    validating constructor.
    """
    if type(message_id) is not str or not message_id or not message_id.isascii():
        raise Unusual
    role = _ROLE.get(role) if type(role) is str else None
    if role is None:
        raise Unusual
    if len(message_id) > MAX_ID_LENGTH:  # only a record changed outside the library: the constructor reports it
        raise Unusual
    for block in blocks:
        if type(block) is not block_type or not block:
            raise Unusual
        check_block(block)
    return {"message_id": message_id, "role": role, "content": blocks, "metadata": metadata}


SEALED = "cl_encrypted"
"""The key of content sealed by :mod:`contextledger.encryption` (a block of that one key)."""
_SEALED_OK: ContextVar[bool] = ContextVar("contextledger_sealed_ok", default=False)


@contextmanager
def sealed_values_allowed() -> Iterator[None]:
    """Let sealed content through (what :class:`~contextledger.stores.encrypted.EncryptedStore` reads and writes)."""
    token = _SEALED_OK.set(True)
    try:
        yield
    finally:
        _SEALED_OK.reset(token)


def check_block(block: Mapping[str, Any]) -> None:
    """Reject the known block kinds whose shape the ledger relies on (tool pairing, text).

    Raises:
        ValueError: ``block`` is a text, toolUse or toolResult block of another shape.
        EncryptionKeyMissing: ``block`` is sealed content read without the ledger's keys
            (never handed out in place of the content).
    """
    if SEALED in block and not _SEALED_OK.get():
        raise EncryptionKeyMissing(
            "this ledger is encrypted: open it with its keys (Ledger.connect(url, encryption=Keyring(...)), "
            "or CONTEXTLEDGER_ENCRYPTION_KEYS for the contextledger command)"
        )
    if "text" in block and not isinstance(block["text"], str):
        raise ValueError(f"a text block holds a string, got {type(block['text']).__name__}")
    for kind in ("toolUse", "toolResult"):
        if kind not in block:
            continue
        body = block[kind]
        if not (type(body) is dict or isinstance(body, Mapping)):  # a dict: no ABC check
            raise ValueError(f"a {kind} block holds a mapping, got {type(body).__name__}")
        tool_use_id = body.get("toolUseId")
        if not isinstance(tool_use_id, str) or not tool_use_id:
            raise ValueError(f"a {kind} block needs a non-empty string toolUseId, got {tool_use_id!r}")
        if kind == "toolResult" and not isinstance(body.get("content", []), list):
            raise ValueError(f"the content of toolResult {tool_use_id!r} must be a list of content blocks")
        if kind == "toolResult" and body.get("status", "success") not in ("success", "error"):
            raise ValueError(f"toolResult {tool_use_id!r}: status is 'success' or 'error', got {body['status']!r}")
