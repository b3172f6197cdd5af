"""A restored entry as the view holds it: one compact row, the records built when read.

A restore reads each active message as its id, seq, token count, role, metadata and
content text. Held as a :class:`~contextledger.model.records.ViewEntry` and a
:class:`~contextledger.model.messages.Message`, that is two pydantic objects and two
instance dicts per entry (528 bytes in CPython, more than the text of a typical
message). A :class:`Row` holds the same values in one object of seven slots, sharing
the strings, and answers what the view's rules ask of an entry -- id, seq, tokens,
kind, pin, tool ids, usage -- from them. Its records are built, equal to the ones the
restore read, each time they are asked for (:meth:`Row.entry`), and not kept: an open
conversation nobody reads holds its rows only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from contextledger.model.messages import Message, holding_text, links_in, pinned_in, usage_in
from contextledger.model.pending import PENDING, TOOLS, raw_fields, text_tool_ids
from contextledger.model.records import ViewEntry
from contextledger.model.trusted import trusted

__all__ = ["Row", "compact", "entry_of"]


class Row:
    """A restored message entry whose content is still its stored JSON text (see the module docstring).

    Immutable by convention: its values are those of the entry it was made from, and
    only ``tools`` (the text's tool ids, found on first ask) is ever set afterwards.
    """

    __slots__ = ("entry_id", "metadata", "role", "seq", "text", "tokens", "tools")

    kind: Literal["message"] = "message"

    def __init__(
        self,
        entry_id: str,
        seq: int,
        tokens: int,
        role: str,
        metadata: Mapping[str, Any],
        text: str,
        tools: tuple[Any, ...] | None,
    ) -> None:
        """Hold the values of a restored entry (checked by the restore; nothing is validated here)."""
        self.entry_id, self.seq, self.tokens, self.role = entry_id, seq, tokens, role
        self.metadata, self.text, self.tools = metadata, text, tools

    def entry(self) -> ViewEntry:
        """The view entry, built anew: equal to the one the row was made from."""
        fields = {"entry_id": self.entry_id, "kind": "message", "seq": self.seq, "message": self.message}
        fields["tokens"] = self.tokens  # in field order, as trusted() takes them
        return trusted(ViewEntry, fields)

    @property
    def message(self) -> Message:
        """The message, built anew and holding its content as the text until read."""
        return holding_text(self.entry_id, self.role, self.metadata, self.text, self.tools)

    @property
    def pinned(self) -> bool:
        """:attr:`Message.pinned` of the entry's message."""
        return pinned_in(self.metadata)

    @property
    def usage(self) -> Mapping[str, Any] | None:
        """:attr:`Message.usage` of the entry's message."""
        return usage_in(self.metadata)

    def _tool_ids(self) -> tuple[Any, ...]:
        tools = self.tools
        if tools is None:
            tools = self.tools = text_tool_ids(self.text)  # two threads find the same ids
        return tools

    @property
    def tool_use_ids(self) -> list[str]:
        """:attr:`Message.tool_use_ids` of the entry's message."""
        tools = self._tool_ids()
        return list(tools[1 : 1 + tools[0]])

    @property
    def tool_result_ids(self) -> list[str]:
        """:attr:`Message.tool_result_ids` of the entry's message."""
        tools = self._tool_ids()
        return list(tools[1 + tools[0] :])

    @property
    def tool_ids(self) -> set[str]:
        """:attr:`Message.tool_ids` of the entry's message."""
        return set(self._tool_ids()[1:]) | links_in(self.metadata)


def compact(entry: ViewEntry | Row) -> ViewEntry | Row:
    """The row of ``entry`` when it is a restored message whose content is still text, else ``entry`` itself.

    An entry whose content was read (or that was never restored) stays as it is: its
    decoded content, or the caller's message it shares, is already held.
    """
    if type(entry) is not ViewEntry:
        return entry
    fields = raw_fields(entry)
    message = fields["message"]
    if fields["kind"] != "message" or type(message) is not Message:
        return entry
    raw = raw_fields(message)
    text = raw.get(PENDING)
    entry_id = fields["entry_id"]
    if text is None or raw["message_id"] != entry_id:
        return entry
    return Row(entry_id, fields["seq"], fields["tokens"], raw["role"], raw["metadata"], text, raw.get(TOOLS))


def entry_of(item: ViewEntry | Row) -> ViewEntry:
    """The view entry of ``item``: itself, or the row's entry built anew."""
    return item.entry() if isinstance(item, Row) else item
