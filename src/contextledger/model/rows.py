"""A restored entry as the view holds it: one compact row, the records built when read.

A restore reads each active message as its id, seq, token count, role, metadata and
content text. Held as a :class:`~contextledger.model.records.ViewEntry` and a
:class:`~contextledger.model.messages.Message`, that is two pydantic objects and two
instance dicts per entry (528 bytes in CPython, more than the text of a typical
message). A :class:`Row` holds the same values in one tuple of six (88 bytes), sharing
the strings, and answers what the view's rules ask of an entry -- id, seq, tokens,
kind, pin, tool ids, usage -- from them. Its records are built, equal to the ones the
restore read, each time they are asked for (:meth:`Row.entry`), and not kept: an open
conversation nobody reads holds its rows only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import Any, Literal

from contextledger.model.messages import Message
from contextledger.model.metadata import links_in, pinned_in, usage_in
from contextledger.model.pending import PENDING, raw_fields, text_tool_ids
from contextledger.model.records import ViewEntry
from contextledger.model.restored import holding_text
from contextledger.model.trusted import trusted

__all__ = ["Row", "compacted", "entry_of"]


class Row(tuple[str, int, int, str, Mapping[str, Any], str]):
    """A restored message entry whose content is still its stored JSON text (see the module docstring).

    A tuple of the entry id, seq, token count, role, metadata and text (made by
    :func:`compacted`; a tuple is built and held for less than an object of slots). The
    tool ids are found in the text each time they are asked for: the view keeps what it
    derives from them.
    """

    __slots__ = ()

    kind: Literal["message"] = "message"
    entry_id: str = property(itemgetter(0))  # type: ignore[assignment]
    seq: int = property(itemgetter(1))  # type: ignore[assignment]
    tokens: int = property(itemgetter(2))  # type: ignore[assignment]
    role: str = property(itemgetter(3))  # type: ignore[assignment]
    metadata: Mapping[str, Any] = property(itemgetter(4))  # type: ignore[assignment]
    text: str = property(itemgetter(5))  # type: ignore[assignment]

    def entry(self) -> ViewEntry:
        """The view entry, built anew: equal to the one the row was made from."""
        entry_id, seq, tokens, role, metadata, text = self
        message = holding_text(entry_id, role, metadata, text)
        return trusted(
            ViewEntry, {"entry_id": entry_id, "kind": "message", "seq": seq, "message": message, "tokens": tokens}
        )

    @property
    def message(self) -> Message:
        """The message, built anew and holding its content as the text until read."""
        return holding_text(self[0], self[3], self[4], self[5])

    @property
    def pinned(self) -> bool:
        """:attr:`Message.pinned` of the entry's message."""
        return pinned_in(self[4])

    @property
    def usage(self) -> Mapping[str, Any] | None:
        """:attr:`Message.usage` of the entry's message."""
        return usage_in(self[4])

    @property
    def tool_use_ids(self) -> list[str]:
        """:attr:`Message.tool_use_ids` of the entry's message."""
        tools = text_tool_ids(self[5])
        return list(tools[1 : 1 + tools[0]])

    @property
    def tool_result_ids(self) -> list[str]:
        """:attr:`Message.tool_result_ids` of the entry's message."""
        tools = text_tool_ids(self[5])
        return list(tools[1 + tools[0] :])

    @property
    def tool_ids(self) -> set[str]:
        """:attr:`Message.tool_ids` of the entry's message."""
        return set(text_tool_ids(self[5])[1:]) | links_in(self[4])


_row = tuple.__new__


def compacted(entries: Iterable[ViewEntry | Row]) -> tuple[list[ViewEntry | Row], bool]:
    """``entries`` with each restored message whose content is still text as its row, and whether any is a row.

    One loop (a restore's hot path). An entry whose content was read (or that was never
    restored) stays as it is: its decoded content, or the caller's message it shares, is
    already held.
    """
    items: list[ViewEntry | Row] = []
    append = items.append
    rows = False
    for entry in entries:
        if type(entry) is ViewEntry:
            fields = raw_fields(entry)
            message = fields["message"]
            if type(message) is Message and fields["kind"] == "message":
                raw = raw_fields(message)
                text = raw.get(PENDING)
                entry_id = fields["entry_id"]
                if text is not None and raw["message_id"] == entry_id:
                    append(_row(Row, (entry_id, fields["seq"], fields["tokens"], raw["role"], raw["metadata"], text)))
                    rows = True
                    continue
        elif type(entry) is Row:
            rows = True
        append(entry)
    return items, rows


def entry_of(item: ViewEntry | Row) -> ViewEntry:
    """The view entry of ``item``: itself, or the row's entry built anew."""
    return item.entry() if isinstance(item, Row) else item
