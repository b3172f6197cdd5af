"""Messages and content blocks in the Converse shape used by Strands Agents.

A :class:`Message` keeps its content blocks as dictionaries so that every block kind --
including ones this library does not know -- survives a round trip unchanged. Binary
payloads (``image``/``document``/``video`` bytes, redacted reasoning) stay ``bytes`` in
memory; :func:`encode_blocks` / :func:`decode_blocks` turn them into a JSON-safe form
losslessly for storage.

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

import base64
import binascii
import copy
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from contextledger.errors import ConfigurationError, CorruptRecord, InvalidMessage

__all__ = [
    "MAX_DEPTH",
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
    "new_message_id",
    "normalize_json",
    "thaw",
]

Role = Literal["system", "user", "assistant"]
ContentBlock = dict[str, Any]
"""One content block: a single-key mapping such as ``{"text": "hi"}``."""

_BYTES_TAG = "__contextledger_bytes__"
# A user key that the codec would read as its own tag is written with one more "~" in
# front (and read back with one less), so user data round-trips whatever keys it holds.
_ESCAPED_TAG = re.compile(r"~*" + re.escape(_BYTES_TAG))

MAX_DEPTH = 100
"""Deepest nesting of lists and mappings a message, its metadata or host state may hold."""


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


def new_message_id() -> str:
    """Return a fresh message id (a canonical UUID v4, as Strands uses)."""
    return str(uuid.uuid4())


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
    """A mutable deep copy of ``value`` (read-only containers become ``dict``/``list``)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


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
        ConfigurationError: ``value`` holds a surrogate code point (not valid Unicode text).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"{what} {value!r:.80} holds a lone surrogate: it is not valid Unicode text and cannot be stored"
        ) from exc
    return value


def _key(key: Any, what: str, coerce: bool) -> str:
    if isinstance(key, str):
        return check_text(key, what)
    if coerce and (key is None or isinstance(key, int | float)):
        return str(key)  # what the storage codec has always written for such keys
    raise InvalidMessage(f"{what} has a {type(key).__name__} key {key!r:.40}; keys must be strings")


def _normalize(value: Any, what: str, depth: int, coerce: bool, freeze: bool) -> Any:
    if isinstance(value, str):
        return check_text(value, what)
    if value is None or value is True or value is False:
        return value
    if isinstance(value, int):
        return value if type(value) is int else int(value)
    if isinstance(value, float):
        return value if type(value) is float else float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if depth >= MAX_DEPTH:
        raise InvalidMessage(f"{what} is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, Mapping):
        items = {_key(k, what, coerce): _normalize(v, what, depth + 1, coerce, freeze) for k, v in value.items()}
        return FrozenDict(items) if freeze else items
    if isinstance(value, list | tuple):
        seq = [_normalize(v, what, depth + 1, coerce, freeze) for v in value]
        return FrozenList(seq) if freeze else seq
    # Anything else (a set, an object) is kept so the store's JSON check names it.
    return value


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


def _freeze_content(value: Any, what: str) -> Any:
    return _normalize(value, what, 0, True, True)


# The JSON scalars: returned as they are by the codec and the copy below. Exact types
# (not isinstance) are checked first because these walks run for every value of every
# message on the append and restore paths; subclasses take the general branch.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _encode(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict or kind is FrozenDict:
        return {_escape_key(k if type(k) is str else str(k)): _encode(v) for k, v in value.items()}
    if kind is list or kind is FrozenList:
        return [_encode(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return {_BYTES_TAG: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {_escape_key(str(k)): _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
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


def _decode_shared(value: Any) -> Any:
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
            decoded = _decode_shared(item)
            if decoded is not item:
                if changed is None:
                    changed = dict(value)
                changed[key] = decoded
        return value if changed is None else changed
    if kind is list or isinstance(value, list):
        out: list[Any] | None = None
        for index, item in enumerate(value):
            decoded = _decode_shared(item)
            if decoded is not item:
                if out is None:
                    out = list(value)
                out[index] = decoded
        return value if out is None else out
    return value


def encode_blocks(blocks: Sequence[ContentBlock]) -> list[ContentBlock]:
    """Return a JSON-safe deep copy of ``blocks`` with every ``bytes`` value tagged."""
    return [_encode(b) for b in blocks]


def decode_blocks(blocks: Sequence[Mapping[str, Any]]) -> list[ContentBlock]:
    """Invert :func:`encode_blocks` exactly."""
    return [_decode(b) for b in blocks]


class Message(BaseModel):
    """One message of a conversation.

    Attributes:
        message_id: Stable id; the Strands ``tracking_id`` when the host supplied one.
        role: ``system``, ``user`` or ``assistant``.
        content: Content blocks in the Converse shape; unknown kinds are kept verbatim.
        metadata: Host metadata (``usage``, ``metrics``, ``custom``). Pin state lives in
            ``metadata["custom"]["pinned"]`` exactly as Strands stores it.

    A message is immutable: its fields cannot be reassigned and its content and
    metadata are read-only containers (see the module docstring); ``with_content`` and
    ``with_pin`` return changed copies.

    Raises:
        InvalidMessage: On construction, when a field is invalid: an unknown role,
            content that is not a list of non-empty blocks, a ``text`` block without a
            string, a ``toolUse``/``toolResult`` block without a string ``toolUseId``, a
            lone surrogate in any text or id, a dict key that is not a string or a
            number, or nesting deeper than :data:`MAX_DEPTH`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    message_id: str = Field(default_factory=new_message_id, min_length=1)
    role: Role
    content: list[ContentBlock]
    metadata: dict[str, Any] = Field(default_factory=FrozenDict)

    if not TYPE_CHECKING:
        # Runtime only, so type checkers keep the field-typed constructor pydantic generates.
        def __init__(self, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise InvalidMessage(f"invalid message: {_describe_validation_error(exc)}") from exc

    @field_validator("content", mode="before")
    @classmethod
    def _check_content(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError(f"content must be a list of content blocks, got {type(value).__name__}")
        for block in value:
            if not isinstance(block, Mapping) or not block:
                raise ValueError(f"content block must be a non-empty mapping, got {block!r}")
            _check_block(block)
        return value

    @field_validator("content", mode="after")
    @classmethod
    def _freeze_content(cls, value: list[ContentBlock]) -> list[ContentBlock]:
        return _freeze_content(value, "message content")  # type: ignore[no-any-return]

    @field_validator("metadata", mode="after")
    @classmethod
    def _freeze_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _freeze_content(value, "message metadata")  # type: ignore[no-any-return]

    @field_validator("message_id", mode="before")
    @classmethod
    def _check_id(cls, value: Any) -> Any:
        return check_text(value, "message_id") if isinstance(value, str) else value

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Message:
        # Immutable all the way down: a deep copy can share the frozen content.
        return self.__copy__()

    # -- constructors ------------------------------------------------------------------

    @classmethod
    def text(cls, role: Role, text: str, **kwargs: Any) -> Message:
        """Build a message holding one text block."""
        return cls(role=role, content=[{"text": text}], **kwargs)

    @classmethod
    def user(cls, text: str, **kwargs: Any) -> Message:
        """Build a user text message."""
        return cls.text("user", text, **kwargs)

    @classmethod
    def assistant(cls, text: str, **kwargs: Any) -> Message:
        """Build an assistant text message."""
        return cls.text("assistant", text, **kwargs)

    @classmethod
    def system(cls, text: str, **kwargs: Any) -> Message:
        """Build a system text message."""
        return cls.text("system", text, **kwargs)

    @classmethod
    def tool_use(cls, tool_use_id: str, name: str, tool_input: Any, *, text: str | None = None) -> Message:
        """Build an assistant message requesting one tool call."""
        blocks: list[ContentBlock] = [{"text": text}] if text else []
        blocks.append({"toolUse": {"toolUseId": tool_use_id, "name": name, "input": tool_input}})
        return cls(role="assistant", content=blocks)

    @classmethod
    def tool_result(
        cls,
        tool_use_id: str,
        result: str | Sequence[ContentBlock],
        *,
        status: Literal["success", "error"] = "success",
    ) -> Message:
        """Build the user message carrying one tool result.

        Raises:
            InvalidMessage: ``result`` is neither text nor a list of blocks, or ``status``
                is not ``success``/``error``.
        """
        if not isinstance(result, str | list | tuple):
            raise InvalidMessage(f"a tool result is text or a list of content blocks, got {type(result).__name__}")
        content = [{"text": result}] if isinstance(result, str) else list(result)
        return cls(
            role="user",
            content=[{"toolResult": {"toolUseId": tool_use_id, "status": status, "content": content}}],
        )

    @classmethod
    def from_strands(cls, message: Mapping[str, Any]) -> Message:
        """Convert a Strands message dict; its ``tracking_id`` becomes the ``message_id``.

        ``from_strands(d).to_strands()`` equals ``d`` with its ``tracking_id`` (a new one
        when ``d`` had none) and its ``metadata`` (``{}`` when absent): the ledger form,
        the one every store returns.

        Raises:
            InvalidMessage: The dict is not a Strands message.
        """
        if not isinstance(message, Mapping):
            raise InvalidMessage(f"not a Strands message: expected a dict, got {type(message).__name__}")
        try:
            tracking_id = message.get("tracking_id")
            unknown = set(message) - {"role", "content", "tracking_id", "metadata"}
            if unknown:
                raise ValueError(f"unknown message keys {sorted(unknown)}")
            missing = {"role", "content"} - set(message)
            if missing:
                raise ValueError(f"missing message keys {sorted(missing)}")
            content = message["content"]
            if not isinstance(content, list | tuple):
                raise ValueError(f"content must be a list of content blocks, got {type(content).__name__}")
            if "metadata" in message and not isinstance(message["metadata"], Mapping):
                raise ValueError(f"metadata must be a dict, got {type(message['metadata']).__name__}")
            kwargs: dict[str, Any] = {"role": message["role"], "content": copy.deepcopy(list(content))}
            if "metadata" in message:
                kwargs["metadata"] = copy.deepcopy(dict(message["metadata"]))
            if tracking_id:
                kwargs["message_id"] = tracking_id
            result = cls(**kwargs)
        except InvalidMessage as exc:
            cause = exc.__cause__
            detail = _describe_validation_error(cause) if isinstance(cause, ValidationError) else str(exc)
            raise InvalidMessage(f"not a Strands message: {detail}") from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidMessage(f"not a Strands message: {exc}") from exc
        return result

    def to_strands(self) -> dict[str, Any]:
        """Return the Strands message dict, ``tracking_id`` and ``metadata`` included (a deep copy)."""
        return {
            "role": self.role,
            "content": copy.deepcopy(self.content),
            "tracking_id": self.message_id,
            "metadata": copy.deepcopy(self.metadata),
        }

    # -- storage codec -----------------------------------------------------------------

    def stored_copy(self) -> Message:
        """A deep copy, as every store returns it (no host shape rides along)."""
        return self.model_copy(deep=True)

    def to_record(self) -> dict[str, Any]:
        """Return a JSON-safe dict (bytes tagged) that :meth:`from_record` inverts."""
        return {
            "message_id": self.message_id,
            "role": self.role,
            "content": encode_blocks(self.content),
            "metadata": _encode(self.metadata),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Message:
        """Rebuild a message stored with :meth:`to_record`.

        Like the constructor, the message takes the record's values as they are (its
        blocks and metadata are new dicts; values nested in them may be the record's):
        stores hand it freshly decoded JSON, which is then not copied a second time.
        """
        content = record["content"]
        return cls(
            message_id=record["message_id"],
            role=record["role"],
            content=_decode_shared(content) if type(content) is list else decode_blocks(content),
            metadata=_decode_shared(record.get("metadata") or {}),
        )

    # -- views ---------------------------------------------------------------------------

    @property
    def pinned(self) -> bool:
        """Whether ``metadata.custom.pinned`` is set."""
        custom = self.metadata.get("custom")
        return isinstance(custom, Mapping) and custom.get("pinned") is True

    def with_pin(self, pinned: bool) -> Message:
        """Return a copy whose pin flag is ``pinned`` (unpinning removes the flag)."""
        metadata = copy.deepcopy(self.metadata)
        custom = dict(metadata.get("custom") or {})
        if pinned:
            custom["pinned"] = True
        else:
            custom.pop("pinned", None)
        metadata["custom"] = custom
        if not custom:
            metadata.pop("custom")
        return self.model_copy(update={"metadata": _freeze_content(metadata, "message metadata")})

    def with_content(self, content: Sequence[ContentBlock]) -> Message:
        """Return a copy with ``content`` replaced (the id is kept)."""
        checked = Message(message_id=self.message_id, role=self.role, content=list(content)).content
        return self.model_copy(update={"content": checked})

    @property
    def tool_use_ids(self) -> list[str]:
        """Ids of the ``toolUse`` blocks, in order."""
        return [b["toolUse"]["toolUseId"] for b in self.content if "toolUse" in b]

    @property
    def tool_result_ids(self) -> list[str]:
        """Ids of the ``toolResult`` blocks, in order."""
        return [b["toolResult"]["toolUseId"] for b in self.content if "toolResult" in b]

    @property
    def tool_ids(self) -> set[str]:
        """Every toolUseId this message mentions, as call or as result."""
        return set(self.tool_use_ids) | set(self.tool_result_ids)

    @property
    def plain_text(self) -> str:
        """The concatenated text of the text blocks (tool results included)."""
        return "\n".join(_texts(self.content))

    @property
    def usage(self) -> Mapping[str, Any] | None:
        """The model usage recorded on this message, if any."""
        usage = self.metadata.get("usage")
        return usage if isinstance(usage, Mapping) else None


def _check_block(block: Mapping[str, Any]) -> None:
    """Reject the known block kinds whose shape the ledger relies on (tool pairing, text)."""
    if "text" in block and not isinstance(block["text"], str):
        raise ValueError(f"a text block holds a string, got {type(block['text']).__name__}")
    for kind in ("toolUse", "toolResult"):
        if kind not in block:
            continue
        body = block[kind]
        if not isinstance(body, Mapping):
            raise ValueError(f"a {kind} block holds a mapping, got {type(body).__name__}")
        tool_use_id = body.get("toolUseId")
        if not isinstance(tool_use_id, str) or not tool_use_id:
            raise ValueError(f"a {kind} block needs a non-empty string toolUseId, got {tool_use_id!r}")
        if kind == "toolResult" and not isinstance(body.get("content", []), list):
            raise ValueError(f"the content of toolResult {tool_use_id!r} must be a list of content blocks")
        if kind == "toolResult" and body.get("status", "success") not in ("success", "error"):
            raise ValueError(f"toolResult {tool_use_id!r}: status is 'success' or 'error', got {body['status']!r}")


def _describe_validation_error(exc: ValidationError) -> str:
    """Pydantic's errors as one line: ``where: what (got value)`` for each."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ())) or "value"
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        got = "" if error.get("type") == "value_error" else f" (got {error.get('input')!r:.80})"
        parts.append(f"{where}: {message}{got}")
    return "; ".join(parts)


def _texts(blocks: Iterable[Mapping[str, Any]]) -> Iterable[str]:
    for block in blocks:
        if isinstance(block.get("text"), str):
            yield block["text"]
        elif "toolResult" in block:
            yield from _texts(block["toolResult"].get("content", []))
        elif "toolUse" in block:
            yield f"{block['toolUse'].get('name')}({block['toolUse'].get('input')!r})"
