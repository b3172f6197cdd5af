"""A view's entries after a changeset, computed locally (pure): what a commit leaves without a re-read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any, Protocol

from contextledger.model.records import SummaryEntry, ViewEntry
from contextledger.model.rows import Row, entry_of

__all__ = ["Revision", "projected_items"]


class Revision(Protocol):
    """What a projection reads of a content revision (structural, so no import): its content and token count."""

    @property
    def content(self) -> list[dict[str, Any]]:
        """The revised content blocks."""
        ...

    @property
    def tokens(self) -> int | None:
        """The revised content's token count (``None``: keep the entry's)."""
        ...


def projected_items(
    items: list[ViewEntry | Row],
    appends: Sequence[ViewEntry],
    removed: set[str],
    revised: Mapping[str, Revision],
    pins: Mapping[str, bool],
    summary: SummaryEntry | None,
) -> list[ViewEntry | Row]:
    """A view's items (rows and entries, in view order) after a changeset: a row nothing changes stays a row.

    Entries are ordered by seq; a summary sorts before a message of equal seq.
    """
    in_order = not appends or not items or appends[0].seq > items[-1].seq
    if in_order and not (removed or revised or pins or summary):
        # Appends take seqs above every active entry, so the order holds without a sort
        # and the hot path (a turn appended) costs O(appended), not O(window log window).
        return [*items, *appends]
    entries: list[ViewEntry | Row] = []
    for item in chain(items, appends):
        entry_id = item.entry_id
        if entry_id in removed:
            continue
        if entry_id in revised or entry_id in pins:
            entry = entry_of(item)
            message = entry.message
            if entry_id in revised:
                message = message.with_content(revised[entry_id].content)
            if entry_id in pins:
                message = message.with_pin(pins[entry_id])
            revision = revised.get(entry_id)
            tokens = revision.tokens if revision is not None and revision.tokens is not None else entry.tokens
            item = entry.model_copy(update={"message": message, "tokens": tokens})
        entries.append(item)
    if summary is not None:
        entries.append(
            ViewEntry(
                entry_id=summary.summary_id,
                kind="summary",
                seq=summary.seq,
                message=summary.to_message(),
                tokens=summary.tokens,
            )
        )
    entries.sort(key=lambda e: (e.seq, e.kind != "summary"))
    return entries
