r"""NUL characters on PostgreSQL: stored losslessly in text, varchar, JSON and JSONB columns.

PostgreSQL text cannot hold U+0000, and JSONB refuses even the ``\u0000`` escape. Every
other backend stores NUL as it is, so here a string that holds NUL is written in an
escaped form and read back exactly:

* a string that holds NUL, or starts with the marker U+FDD0 (a Unicode noncharacter,
  never used in interchanged text), is written as the marker followed by the string
  with NUL as ``U+FDD0 "0"`` and U+FDD0 as ``U+FDD0 U+FDD0``;
* every other string -- all of the ledger's own ids and everything written by 0.1 --
  is written unchanged, so existing databases read as before.

The escape is applied to every string parameter and text result of a PostgreSQL
connection (a psycopg dumper and loaders registered on each connection), and to every
string inside JSON values (the engine's JSON serializer), so ids, summaries, reduction
errors, content, metadata and the JSONB id lists all take the same path. Equality is
preserved (the encoding is deterministic), so lookups by id work unchanged. An id is
limited to 255 characters *as stored*: each NUL in it counts twice, plus one.
"""

from __future__ import annotations

import json
import re
from typing import Any

from contextledger.errors import InvalidMessage
from contextledger.model.stored import parse_json

__all__ = [
    "ESCAPED_MARK_JSON",
    "MARK",
    "Undecodable",
    "dumps",
    "escape",
    "holds_escapes",
    "loads",
    "register_nul_adapters",
    "tolerant_loads",
    "unescape",
]

MARK = "\ufdd0"
_UNESCAPE = re.compile(MARK + "(.)", re.DOTALL)
ESCAPED_MARK_JSON = "\\ufdd0"
"""How ``json.dumps`` (``ensure_ascii``) writes the marker inside JSON text."""


def escape(value: str) -> str:
    """``value`` as PostgreSQL text can hold it (unchanged unless it holds NUL or starts with the marker)."""
    if "\x00" not in value and not value.startswith(MARK):
        return value
    return MARK + value.replace(MARK, MARK + MARK).replace("\x00", MARK + "0")


def unescape(value: str) -> str:
    """Invert :func:`escape`."""
    if not value.startswith(MARK):
        return value
    return _UNESCAPE.sub(lambda m: "\x00" if m.group(1) == "0" else MARK, value[1:])


def _walk(value: Any, convert: Any) -> Any:
    if isinstance(value, str):
        return convert(value)
    if isinstance(value, dict):
        return {convert(k): _walk(v, convert) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, convert) for v in value]
    return value


def dumps(value: Any) -> str:
    """JSON text for a PostgreSQL ``json``/``jsonb`` column, every string escaped.

    Raises:
        InvalidMessage: ``value`` holds something JSON has no form for (bytes, a set, an
            object): the stores check values before they write, so this guards a path
            that did not (a typed error, never the encoder's bare ``TypeError``).
    """
    try:
        text = json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"value cannot be stored as JSON: {exc}") from exc
    if "\\u0000" not in text and ESCAPED_MARK_JSON not in text:
        return text  # the common case: nothing to escape, no walk
    return json.dumps(_walk(value, escape))


def holds_escapes(text: str) -> bool:
    """Whether JSON text read from PostgreSQL may hold an escaped string (else :func:`loads` is ``json.loads``)."""
    return MARK in text or ESCAPED_MARK_JSON in text


def loads(text: str | bytes) -> Any:
    """Parse JSON written by :func:`dumps`."""
    raw = text if isinstance(text, str) else bytes(text).decode("utf-8")
    value = parse_json(raw)
    if not holds_escapes(raw):
        return value
    return _walk(value, unescape)


class Undecodable:
    """What a JSON column yields for a value that is not JSON (damaged outside contextledger).

    Returned instead of raising, because the driver decodes a column before the row
    reaches the store: the store then reports it as :class:`~contextledger.errors.CorruptRecord`
    naming the table and the row's id (no record field accepts an ``Undecodable``).
    """

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"<undecodable JSON: {self.error}>"


def tolerant_loads(text: str | bytes) -> Any:
    """:func:`loads`, but an invalid value becomes :class:`Undecodable` instead of an error."""
    try:
        return loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        return Undecodable(str(exc))


def tolerant_sqlite_loads(text: str | bytes) -> Any:
    """``json.loads`` for SQLite (which stores NUL as it is), tolerant like :func:`tolerant_loads`."""
    try:
        return parse_json(text)
    except (ValueError, UnicodeDecodeError) as exc:
        return Undecodable(str(exc))


def register_nul_adapters(dbapi_connection: Any) -> None:
    """Make a psycopg 3 connection escape string parameters and unescape text results."""
    from psycopg.types.string import StrDumperUnknown, TextBinaryLoader, TextLoader

    class _NulSafeStrDumper(StrDumperUnknown):
        def dump(self, obj: str) -> Any:
            return super().dump(escape(obj))

    class _NulSafeTextLoader(TextLoader):
        def load(self, data: Any) -> Any:
            value = super().load(data)
            return unescape(value) if isinstance(value, str) else value

    class _NulSafeTextBinaryLoader(TextBinaryLoader):
        def load(self, data: Any) -> Any:
            value = super().load(data)
            return unescape(value) if isinstance(value, str) else value

    adapters = dbapi_connection.adapters
    adapters.register_dumper(str, _NulSafeStrDumper)
    for name in ("text", "varchar"):
        adapters.register_loader(name, _NulSafeTextLoader)
        adapters.register_loader(name, _NulSafeTextBinaryLoader)
