"""The :class:`Message` model: one message of a conversation, immutable, in the Converse shape.

A :class:`Message` keeps its content blocks as dictionaries so that every block kind --
including ones this library does not know -- survives a round trip unchanged. Binary
payloads (``image``/``document``/``video`` bytes, redacted reasoning) stay ``bytes`` in
memory; :meth:`Message.to_record` / :meth:`Message.from_record` turn them into a
JSON-safe form losslessly for storage (the JSON value rules live in
:mod:`contextledger.model.jsonvalues`).

A message is immutable and holds what a store gives back: on construction its content
and metadata are normalised the way JSON stores them (tuples become lists, non-string
dict keys strings, a surrogate pair written as two code points one character) and
frozen into read-only containers (:class:`~contextledger.model.jsonvalues.FrozenDict`,
:class:`~contextledger.model.jsonvalues.FrozenList`; a deep copy of one is an ordinary
mutable ``dict``/``list``). Text that no backend can store -- a lone surrogate, or
nesting deeper than :data:`~contextledger.model.jsonvalues.MAX_DEPTH` -- is refused there
with :class:`~contextledger.errors.InvalidMessage`, so the live view and a restored view
are always equal.
"""

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from contextledger.errors import ContextLedgerError, InvalidMessage
from contextledger.model.blocks import texts_in
from contextledger.model.ids import time_ordered_uuid
from contextledger.model.jsonvalues import (
    MAX_ID_LENGTH,
    ContentBlock,
    FrozenDict,
    check_text,
    decode_blocks,
    decode_shared,
    encode_blocks,
    encode_value,
    freeze_value,
    too_long,
)
from contextledger.model.metadata import LINKS_KEY, links_in, pinned_in, usage_in
from contextledger.model.pending import (
    PENDING,
    decoded_fields,
    parsed_text,
    pending_tool_ids,
    raw_fields,
    set_raw_fields,
)
from contextledger.model.stored import Unusual, check_block, record_fields
from contextledger.model.trusted import trusted

__all__ = ["Message", "Role", "new_message_id"]

Role = Literal["system", "user", "assistant"]


def new_message_id() -> str:
    """Return a fresh message id: a canonical time-ordered UUID (version 7).

    See :func:`~contextledger.model.ids.time_ordered_uuid` for why it is ordered by time.
    """
    return time_ordered_uuid()


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
            number, or nesting deeper than :data:`~contextledger.model.jsonvalues.MAX_DEPTH`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

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

        # A restored message may hold its content as the stored JSON text until first use
        # (see contextledger.model.restored): its instance dict then lacks ``content``. Everything that
        # reads the fields through ``__dict__`` -- equality, pickling, copies, repr,
        # ``model_dump`` (pydantic's serializer reads it too) -- gets them decoded, and
        # ``message.content`` (a miss in the instance dict) decodes them here.
        @property
        def __dict__(self) -> dict[str, Any]:
            raw = raw_fields(self)
            return decoded_fields(self) if PENDING in raw else raw

        @__dict__.setter
        def __dict__(self, value: dict[str, Any]) -> None:
            set_raw_fields(self, value)

        def __getattr__(self, item: str) -> Any:
            if item == "content" and PENDING in raw_fields(self):
                return decoded_fields(self)["content"]
            return super().__getattr__(item)

        def __eq__(self, other: object) -> bool:
            # Two restored messages holding the same stored text hold the same content: no
            # decoding needed to tell (a restored view builds its messages anew on each
            # read, so a host comparing what it rendered before meets this case each turn).
            if type(self) is Message and type(other) is Message:
                mine, theirs = raw_fields(self), raw_fields(other)
                text = mine.get(PENDING)
                if text is not None and text == theirs.get(PENDING):
                    return bool(
                        mine["message_id"] == theirs["message_id"]
                        and mine["role"] == theirs["role"]
                        and mine["metadata"] == theirs["metadata"]
                    )
            return super().__eq__(other)

    @field_validator("content", mode="before")
    @classmethod
    def _check_content(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError(f"content must be a list of content blocks, got {type(value).__name__}")
        for block in value:
            if not (type(block) is dict or isinstance(block, Mapping)) or not block:  # a dict: no ABC check
                raise ValueError(f"content block must be a non-empty mapping, got {block!r}")
            check_block(block)
        return value

    @field_validator("content", mode="after")
    @classmethod
    def _freeze_content(cls, value: list[ContentBlock]) -> list[ContentBlock]:
        return freeze_value(value, "message content")  # type: ignore[no-any-return]

    @field_validator("metadata", mode="after")
    @classmethod
    def _freeze_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        return freeze_value(value, "message metadata")  # type: ignore[no-any-return]

    @field_validator("message_id", mode="before")
    @classmethod
    def _check_id(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if len(value) > MAX_ID_LENGTH:
            raise InvalidMessage(too_long("message_id", value))
        return check_text(value, "message_id")

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> "Message":
        # Immutable all the way down: a deep copy can share the frozen content.
        return self.__copy__()

    # -- constructors ------------------------------------------------------------------

    @classmethod
    def text(cls, role: Role, text: str, **kwargs: Any) -> "Message":
        """Build a message holding one text block."""
        return cls(role=role, content=[{"text": text}], **kwargs)

    @classmethod
    def user(cls, text: str, **kwargs: Any) -> "Message":
        """Build a user text message."""
        return cls.text("user", text, **kwargs)

    @classmethod
    def assistant(cls, text: str, **kwargs: Any) -> "Message":
        """Build an assistant text message."""
        return cls.text("assistant", text, **kwargs)

    @classmethod
    def system(cls, text: str, **kwargs: Any) -> "Message":
        """Build a system text message."""
        return cls.text("system", text, **kwargs)

    @classmethod
    def tool_use(cls, tool_use_id: str, name: str, tool_input: Any, *, text: str | None = None) -> "Message":
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
    ) -> "Message":
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
    def from_strands(cls, message: Mapping[str, Any]) -> "Message":
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
            # No copy of the caller's values: validation freezes them into containers of
            # the message's own (see jsonvalues.freeze_value), as the constructor does.
            kwargs: dict[str, Any] = {"role": message["role"], "content": list(content)}
            if "metadata" in message:
                kwargs["metadata"] = dict(message["metadata"])
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

    def peek_content(self) -> Sequence[Mapping[str, Any]]:
        """The content, to read once: a restored message still holding its stored text stays undecoded.

        Such a message gives its text parsed into a new (mutable) copy, equal to
        :attr:`content`, when the text parses to the content as it is; any other gives
        :attr:`content` itself. For a reader that compares or converts each message of a
        view once (a host rendering a restored history): the message keeps holding the
        text, not the decoded blocks.
        """
        content = parsed_text(self)
        return self.content if content is None else content

    def to_strands(self) -> dict[str, Any]:
        """Return the Strands message dict, ``tracking_id`` and ``metadata`` included (a deep copy).

        A restored message whose content is still its stored text gives the text parsed
        (a new copy) and stays undecoded, when the text parses to the content as it is.
        """
        content = parsed_text(self)
        return {
            "role": self.role,
            "content": copy.deepcopy(self.content) if content is None else content,
            "tracking_id": self.message_id,
            "metadata": copy.deepcopy(self.metadata),
        }

    # -- storage codec -----------------------------------------------------------------

    def stored_copy(self) -> "Message":
        """The message as every store returns it: a plain :class:`Message` (no subclass rides along).

        A message is immutable all the way down (frozen model, frozen content and
        metadata), so a plain one is shared rather than copied: appending costs no copy.
        """
        if type(self) is Message:
            return self
        return Message.model_construct(
            message_id=self.message_id, role=self.role, content=self.content, metadata=self.metadata
        )

    def to_record(self) -> dict[str, Any]:
        """Return a JSON-safe dict (bytes tagged) that :meth:`from_record` inverts."""
        return {
            "message_id": self.message_id,
            "role": self.role,
            "content": encode_blocks(self.content),
            "metadata": encode_value(self.metadata),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Message":
        """Rebuild a message stored with :meth:`to_record`.

        Like the constructor, the message takes the record's values as they are (its
        blocks and metadata are new dicts; values nested in them may be the record's):
        stores hand it freshly decoded JSON, which is then not copied a second time.
        """
        try:
            return trusted(Message, record_fields(record))
        except (Unusual, ContextLedgerError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            pass  # anything unusual takes the validating path, which reports it
        content = record["content"]
        return cls(
            message_id=record["message_id"],
            role=record["role"],
            content=decode_shared(content) if type(content) is list else decode_blocks(content),
            metadata=decode_shared(record.get("metadata") or {}),
        )

    # -- views ---------------------------------------------------------------------------

    @property
    def pinned(self) -> bool:
        """Whether ``metadata.custom.pinned`` is set."""
        return pinned_in(self.metadata)

    def with_pin(self, pinned: bool) -> "Message":
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
        return self.model_copy(update={"metadata": freeze_value(metadata, "message metadata")})

    def with_content(self, content: Sequence[ContentBlock]) -> "Message":
        """Return a copy with ``content`` replaced (the id is kept)."""
        checked = Message(message_id=self.message_id, role=self.role, content=list(content)).content
        return self.model_copy(update={"content": checked})

    @property
    def tool_use_ids(self) -> list[str]:
        """Ids of the ``toolUse`` blocks, in order (a restored message's content stays undecoded)."""
        known = pending_tool_ids(self)
        if known is not None:
            return list(known[1 : 1 + known[0]])
        return [b["toolUse"]["toolUseId"] for b in self.content if "toolUse" in b]

    @property
    def tool_result_ids(self) -> list[str]:
        """Ids of the ``toolResult`` blocks, in order (a restored message's content stays undecoded)."""
        known = pending_tool_ids(self)
        if known is not None:
            return list(known[1 + known[0] :])
        return [b["toolResult"]["toolUseId"] for b in self.content if "toolResult" in b]

    @property
    def tool_ids(self) -> set[str]:
        """Every toolUseId this message mentions, as call or as result, or travels with.

        A message that neither calls nor answers a tool may name toolUseIds under
        ``metadata[LINKS_KEY]`` (a reasoning item and the call it led to): the view groups
        it with them, so every manager keeps or evicts them together.
        """
        # One pass over the blocks for both kinds (a view's groups ask this of every entry
        # on each reduction), and the metadata looked at only when it holds links.
        known = pending_tool_ids(self)
        if known is not None:
            ids = set(known[1:])
        else:
            ids = set()
            for block in self.content:
                if "toolUse" in block:
                    ids.add(block["toolUse"]["toolUseId"])
                if "toolResult" in block:
                    ids.add(block["toolResult"]["toolUseId"])
        metadata = self.metadata
        if LINKS_KEY in metadata:
            ids |= links_in(metadata)
        return ids

    @property
    def plain_text(self) -> str:
        """The concatenated text of the text blocks (tool results included)."""
        return "\n".join(texts_in(self.content))

    @property
    def usage(self) -> Mapping[str, Any] | None:
        """The model usage recorded on this message, if any."""
        return usage_in(self.metadata)


def _describe_validation_error(exc: ValidationError) -> str:
    """Pydantic's errors as one line: ``where: what (got value)`` for each."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ())) or "value"
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        got = "" if error.get("type") == "value_error" else f" (got {error.get('input')!r:.80})"
        parts.append(f"{where}: {message}{got}")
    return "; ".join(parts)
