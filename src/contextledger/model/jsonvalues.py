"""JSON values as every backend stores them: normalised, frozen, and their bytes tagged.

The rules every stored value follows, shared by messages, host state and the stores:

* :func:`normalize_json` gives a value as a JSON store gives it back (tuples become
  lists, number keys strings, a surrogate pair written as two code points one
  character) and, with ``freeze``, in read-only containers (:class:`FrozenDict`,
  :class:`FrozenList`); :func:`check_text` and :func:`check_id` refuse what no backend
  can store (lone surrogates, nesting deeper than :data:`MAX_DEPTH`, ids longer than
  :data:`MAX_ID_LENGTH`);
* :func:`encode_blocks` / :func:`decode_blocks` turn ``bytes`` into a tagged JSON-safe
  form and back losslessly; a user key that looks like the tag is escaped, so user
  data round-trips whatever keys it holds.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from contextledger.errors import ConfigurationError, CorruptRecord, InvalidMessage
from contextledger.model.jsontext import frozen_text

__all__ = [
    "MAX_DEPTH",
    "MAX_ID_LENGTH",
    "ContentBlock",
    "FrozenDict",
    "FrozenList",
    "check_id",
    "check_plain_json",
    "check_text",
    "decode_blocks",
    "decode_shared",
    "dumps_encoded",
    "encode_blocks",
    "encode_value",
    "freeze_value",
    "normalize_json",
    "storable_text",
    "thaw",
    "too_long",
]

ContentBlock = dict[str, Any]
"""One content block: a single-key mapping such as ``{"text": "hi"}``."""

_BYTES_TAG = "__contextledger_bytes__"
# A user key that the codec would read as its own tag is written with one more "~" in
# front (and read back with one less), so user data round-trips whatever keys it holds.
_ESCAPED_TAG = re.compile(r"~*" + re.escape(_BYTES_TAG))

MAX_DEPTH = 100
"""Deepest nesting of lists and mappings a message, its metadata or host state may hold."""
MAX_ID_LENGTH = 255
"""Longest session, agent or message id, the same on every backend (the SQL columns' width)."""


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses every change (content and metadata of a :class:`Message`).

    It is still a ``dict`` (``json.dumps``, ``isinstance`` and equality work unchanged);
    ``copy.deepcopy`` returns an ordinary mutable ``dict`` to edit and build a new
    message from.
    """

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("message content is read-only: build a new Message (e.g. with_content())")

    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> dict[str, Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> Any:
        return (dict, (thaw(self),))


class FrozenList(list[Any]):
    """A ``list`` that refuses every change; see :class:`FrozenDict`."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("message content is read-only: build a new Message (e.g. with_content())")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> list[Any]:
        return thaw(self)  # type: ignore[no-any-return]

    def __reduce__(self) -> Any:
        return (list, (thaw(self),))


def thaw(value: Any) -> Any:
    """A mutable deep copy of ``value`` (read-only containers become ``dict``/``list``).

    Any mapping becomes a ``dict``, any list or tuple a ``list``; anything else is kept.
    """
    # The exact types JSON values are made of are told by ``type`` first (a restore thaws
    # every item it hands a host); the isinstance checks below take any other mapping.
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is FrozenDict or kind is dict:
        return {k: v if type(v) in _LEAVES else thaw(v) for k, v in value.items()}
    if kind is FrozenList or kind is list or kind is tuple:
        return [v if type(v) in _LEAVES else thaw(v) for v in value]
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


_LEAVES = frozenset({str, int, float, bool, type(None)})
"""The exact types of a JSON value's immutable leaves (what a walk over its containers takes as they are)."""


def check_text(value: str, what: str = "text") -> str:
    """``value`` as every backend stores it, or :class:`InvalidMessage`.

    A surrogate pair written as two code points becomes the one character JSON reads it
    as; a lone surrogate (a truncated emoji, ``surrogateescape`` output) cannot be
    stored as UTF-8 and is refused. NUL characters are kept (every backend stores them).

    Raises:
        InvalidMessage: ``value`` holds a lone surrogate.
    """
    if type(value) is not str:
        value = str.__str__(value)
    if value.isascii():  # no surrogate, and no copy made to find out
        return value
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        pass
    try:
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError as exc:
        position = next(i for i, c in enumerate(value) if 0xD800 <= ord(c) <= 0xDFFF)
        raise InvalidMessage(
            f"{what} holds a lone surrogate {value[position]!r} at position {position}: it is not valid "
            "Unicode text and cannot be stored (decode with errors='replace' first)"
        ) from exc


def check_id(value: str, what: str = "id") -> str:
    """``value`` if it can serve as a session, agent or entry id on every backend.

    Raises:
        ConfigurationError: ``value`` holds a surrogate code point (not valid Unicode text)
            or is longer than :data:`MAX_ID_LENGTH`.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"{what} {value!r:.80} holds a lone surrogate: it is not valid Unicode text and cannot be stored"
        ) from exc
    if len(value) > MAX_ID_LENGTH:
        raise ConfigurationError(too_long(what, value))
    return value


def storable_text(value: str) -> str:
    """Diagnostic text (an error message, a reason) as every backend stores it: never refused.

    Like :func:`check_text`, but a lone surrogate -- which an exception's message may
    carry from any source -- becomes U+FFFD instead of an error: the text describes
    something, and recording it must not fail the write it belongs to.
    """
    try:
        return check_text(value)
    except InvalidMessage:
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def check_plain_json(value: Any, what: str) -> None:
    """Check that ``value`` is plain JSON: what host and manager state hold on every backend.

    State is stored as standard JSON text and read back as it was written, so it may hold
    only what JSON has a form for: ``dict`` (string keys), ``list``, ``str``, ``int``,
    finite ``float``, ``bool`` and ``None``. Bytes are refused (encode them first, e.g.
    base64): unlike message content, state has no codec tag that would read them back.

    Raises:
        InvalidMessage: ``value`` holds bytes, NaN or infinity, or something JSON cannot represent.
    """
    if frozen_text(value, compact=True) is not None:
        # Written by the C encoder built once (what every commit carrying state checks);
        # ``None`` means it could not be: the standard encoder below names the reason.
        return
    try:
        _SPACED.encode(value)
    except (TypeError, ValueError) as exc:
        where = _bytes_path(value, "")
        if where is not None:
            raise InvalidMessage(
                f"{what} holds bytes at {where or 'its top level'}: state is stored as plain JSON on every "
                "backend; encode bytes first (e.g. base64)"
            ) from exc
        raise InvalidMessage(f"{what} cannot be stored as JSON: {exc}") from exc


def _bytes_path(value: Any, path: str, seen: set[int] | None = None) -> str | None:
    """Where the first ``bytes`` value in ``value`` stands (``['k'][0]``), or ``None``.

    A container met again (a value holding itself) is not walked twice: the standard
    encoder names that error.
    """
    if isinstance(value, bytes | bytearray | memoryview):
        return path
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    seen = set() if seen is None else seen
    if id(value) in seen:
        return None
    seen.add(id(value))
    for key, item in items:
        found = _bytes_path(item, f"{path}[{key!r}]", seen)
        if found is not None:
            return found
    return None


def too_long(what: str, value: str) -> str:
    """The error text for an id longer than :data:`MAX_ID_LENGTH`."""
    return (
        f"{what} {value[:20]!r}... is {len(value)} characters long; ids hold at most {MAX_ID_LENGTH} on every backend"
    )


def _key(key: Any, what: str, coerce: bool) -> str:
    if isinstance(key, str):
        return check_text(key, what)
    if coerce and (key is None or isinstance(key, int | float)):
        return str(key)  # what the storage codec has always written for such keys
    raise InvalidMessage(f"{what} has a {type(key).__name__} key {key!r:.40}; keys must be strings")


def _normalize(value: Any, what: str, depth: int, coerce: bool, freeze: bool) -> Any:
    # The exact types a message is made of are told by ``type`` first, not by the isinstance
    # chain (this runs for every value of every message built): ASCII text needs no check,
    # a string key of a dict none but that, and ints, floats, bools and None stay as they are.
    kind = type(value)
    if kind is str:
        return value if value.isascii() else check_text(value, what)
    if kind in _KEPT:
        return value
    if kind is not dict and kind is not list:  # subclasses, bytes, tuples, other mappings
        if isinstance(value, str):
            return check_text(value, what)
        if isinstance(value, int):
            return int(value)  # bool, kept above, is the only int subclass that stays
        if isinstance(value, float):
            return float(value)
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
    if depth >= MAX_DEPTH:
        raise InvalidMessage(f"{what} is nested more than {MAX_DEPTH} levels deep")
    depth += 1
    # A list is told apart before the Mapping check: an ABC's isinstance costs more than the rest of a short list.
    if kind is dict or (kind is not list and isinstance(value, Mapping)):
        items = {}
        for k, v in value.items():
            key = k if type(k) is str and k.isascii() else _key(k, what, coerce)
            items[key] = v if type(v) in _KEPT else _normalize(v, what, depth, coerce, freeze)
        return FrozenDict(items) if freeze else items
    if kind is list or isinstance(value, list | tuple):
        seq = [v if type(v) in _KEPT else _normalize(v, what, depth, coerce, freeze) for v in value]
        return FrozenList(seq) if freeze else seq
    # Anything else (a set, an object) is kept so the store's JSON check names it.
    return value


_KEPT = frozenset({int, float, bool, type(None)})
"""The exact types :func:`_normalize` keeps as they are (an ``int`` or ``float`` subclass is converted)."""


def normalize_json(value: Any, what: str = "value", *, coerce_keys: bool = False, freeze: bool = False) -> Any:
    """``value`` as a JSON store gives it back: lists for tuples, checked text.

    Args:
        value: The value to normalise.
        what: What it is, for error messages.
        coerce_keys: Turn number keys into strings (as JSON does) instead of refusing them.
        freeze: Build read-only containers (:class:`FrozenDict`, :class:`FrozenList`).

    Raises:
        InvalidMessage: A key is not a string (or a number, with ``coerce_keys``), a
            string holds a lone surrogate, or the nesting is deeper than :data:`MAX_DEPTH`.
    """
    return _normalize(value, what, 0, coerce_keys, freeze)


def freeze_value(value: Any, what: str) -> Any:
    """``value`` normalised (number keys coerced) into read-only containers; see :func:`normalize_json`."""
    return _normalize(value, what, 0, True, True)


# The JSON scalars: returned as they are by the codec and the copy below. Exact types
# (not isinstance) are checked first because these walks run for every value of every
# message on the append and restore paths; subclasses take the general branch.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def encode_value(value: Any) -> Any:
    """A JSON-safe copy of ``value`` with every ``bytes`` value tagged (see :func:`encode_blocks`)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict or kind is FrozenDict:
        return {_escape_key(k if type(k) is str else str(k)): encode_value(v) for k, v in value.items()}
    if kind is list or kind is FrozenList:
        return [encode_value(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return {_BYTES_TAG: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {_escape_key(str(k)): encode_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode_value(v) for v in value]
    return value


def _escape_key(key: str) -> str:
    # endswith first: this runs for every key written, and almost none is the tag.
    return "~" + key if key.endswith(_BYTES_TAG) and _ESCAPED_TAG.fullmatch(key) else key


def _decode(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict or isinstance(value, Mapping):
        if len(value) == 1 and _BYTES_TAG in value:
            return _decode_bytes(value[_BYTES_TAG])
        return {(k[1:] if k.startswith("~") and _ESCAPED_TAG.fullmatch(k) else k): _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def _decode_bytes(encoded: Any) -> bytes:
    if not isinstance(encoded, str):
        raise CorruptRecord(f"damaged bytes value in stored content: not base64 text but {type(encoded).__name__}")
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CorruptRecord(f"damaged bytes value in stored content: {exc}") from exc


def decode_shared(value: Any) -> Any:
    """:func:`_decode` without copying: ``value`` itself when it holds no tagged bytes.

    Only the containers on the way to a tagged value are rebuilt, so freshly parsed
    JSON is walked once and not copied (the message validation copies the blocks).
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict or isinstance(value, Mapping):
        if len(value) == 1 and _BYTES_TAG in value:
            return _decode_bytes(value[_BYTES_TAG])
        if any(k.startswith("~") and _ESCAPED_TAG.fullmatch(k) for k in value):
            return _decode(value)  # an escaped user key: rebuild with the keys restored
        changed: dict[Any, Any] | None = None
        for key, item in value.items():
            decoded = decode_shared(item)
            if decoded is not item:
                if changed is None:
                    changed = dict(value)
                changed[key] = decoded
        return value if changed is None else changed
    if kind is list or isinstance(value, list):
        out: list[Any] | None = None
        for index, item in enumerate(value):
            decoded = decode_shared(item)
            if decoded is not item:
                if out is None:
                    out = list(value)
                out[index] = decoded
        return value if out is None else out
    return value


def encode_blocks(blocks: Sequence[ContentBlock]) -> list[ContentBlock]:
    """Return a JSON-safe deep copy of ``blocks`` with every ``bytes`` value tagged."""
    return [encode_value(b) for b in blocks]


def dumps_encoded(value: Any, *, compact: bool = False) -> str:
    """The JSON text of :func:`encode_value` (``value``) -- without building that copy when it would equal ``value``.

    Content and metadata are ``dict``/``list`` subclasses holding JSON scalars (a host's
    values before they become a message's: plain ones), so the standard library's C
    encoder writes them as they are unless something needs the codec: a ``bytes`` value
    (the encoder refuses it) or a key the codec would escape (such a key ends with the
    tag, so the tag shows in the text). Then -- and for anything else that encoder
    refuses -- the standard encoder writes the tagged copy, as before, and refuses what
    it refuses: NaN and infinity (``allow_nan=False``), a plain value holding itself.

    Args:
        value: Content blocks, metadata or another JSON value of a message.
        compact: Leave out the spaces after separators.

    Raises:
        TypeError, ValueError: ``value`` holds something JSON has no form for, as
            ``json.dumps`` raises them.
    """
    kind = type(value)
    if kind is FrozenList or kind is FrozenDict or kind is list or kind is dict:
        if not value:  # the metadata of most messages: no encoder call
            return _EMPTY_TEXT[kind]
        # Written by the encoder built once, without the cycle check: a message's content
        # and metadata are acyclic, and a plain value holding itself ends the encoder's
        # recursion (frozen_text gives None), so the standard encoder below names the cycle.
        text = frozen_text(value, compact=compact)
        if text is not None and _BYTES_TAG not in text:
            return text
    encoder = _COMPACT if compact else _SPACED
    try:
        text = encoder.encode(value)
    except TypeError:
        pass  # bytes (tagged below) or a foreign object (refused below)
    else:
        if _BYTES_TAG not in text:
            return text
    return encoder.encode(encode_value(value))


# Built once: json.dumps builds an encoder per call when given any option.
_SPACED = json.JSONEncoder(allow_nan=False)
_COMPACT = json.JSONEncoder(allow_nan=False, separators=(",", ":"))
_EMPTY_TEXT: dict[type, str] = {dict: "{}", FrozenDict: "{}", list: "[]", FrozenList: "[]"}


def decode_blocks(blocks: Sequence[Mapping[str, Any]]) -> list[ContentBlock]:
    """Invert :func:`encode_blocks` exactly."""
    return [_decode(b) for b in blocks]
