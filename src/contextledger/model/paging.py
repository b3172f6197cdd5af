"""Pages of a listing: keyset bounds and a row count, checked once for every store.

A listing that pages (``history``, ``reductions``, ``summaries``, ``evictions``, ``pin_history``) takes the
same keyword-only arguments on the ledger and the stores:

* ``after`` / ``before`` -- cursors: only the records strictly after / before this
  position in the listing's order. A history cursor is an entry's ``seq`` (unique and
  increasing within a conversation), so the next page after ``page`` is
  ``after=page[-1].seq``; the other listings' cursor is :func:`cursor` of a record (the
  tuple of fields the listing is ordered by, unique within a session);
* ``limit`` -- at most this many records, the first ones of the range;
* ``last`` -- at most this many records, the last ones of the range (``--last N``).

Every page is in the listing's order, oldest first, whichever end it was counted from.
A store reads the page's rows only (keyset paging: an index range, never an offset).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from contextledger.errors import InvalidPage
from contextledger.model.records import Eviction, HistoryEntry, PinEvent, Reduction, SummaryEntry

__all__ = [
    "EVICTION_CURSOR",
    "PIN_CURSOR",
    "REDUCTION_CURSOR",
    "SUMMARY_CURSOR",
    "WHOLE",
    "Cursor",
    "Page",
    "Pages",
    "cursor",
    "key_cursor",
    "paged",
    "seq_cursor",
]

Cursor = int | tuple[Any, ...]
"""A position in a listing: a history entry's ``seq``, or :func:`cursor` of another listing's record."""


def cursor(record: HistoryEntry | Reduction | SummaryEntry | Eviction | PinEvent) -> Cursor:
    """The position of ``record`` in its listing, to page from (``after=`` / ``before=``).

    The listing's order: history by ``seq``; reductions by ``(created_at, agent_id,
    version)``; summaries by ``(created_at, agent_id, summary_id)``; evictions by
    ``(evicted_at, agent_id, seq, kind, entry_id)``; pin events by ``(at, agent_id,
    version, position)``.
    """
    if isinstance(record, HistoryEntry):
        return record.seq
    if isinstance(record, PinEvent):
        return (record.at, record.agent_id, record.version, record.position)
    if isinstance(record, Reduction):
        return (record.created_at, record.agent_id, record.version)
    if isinstance(record, SummaryEntry):
        return (record.created_at, record.agent_id, record.summary_id)
    return (record.evicted_at, record.agent_id, record.seq, record.kind, record.entry_id)


def seq_cursor(name: str, value: Any) -> Any:
    """A history cursor checked: an int >= 0.

    Raises:
        InvalidPage: It is not.
    """
    return _count(name, value)


def key_cursor(*kinds: type) -> Callable[[str, Any], Any]:
    """The check of a cursor that is a tuple of values of ``kinds`` (a listing's order key)."""

    def check(name: str, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, tuple) or len(value) != len(kinds):
            raise InvalidPage(
                f"{name} must be a cursor of this listing (see contextledger.model.paging.cursor), not {value!r}"
            )
        for item, kind in zip(value, kinds, strict=True):
            if not isinstance(item, kind) or isinstance(item, bool):
                raise InvalidPage(
                    f"{name} must be a cursor of this listing (see contextledger.model.paging.cursor), not {value!r}"
                )
            if isinstance(item, datetime) and item.tzinfo is None:
                raise InvalidPage(f"{name} holds a naive datetime; a cursor's time is aware (UTC)")
        return value

    return check


def _count(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidPage(f"{name} must be an int >= 0, not {value!r}")
    return value


REDUCTION_CURSOR = key_cursor(datetime, str, int)
"""The check of a reduction's cursor: ``(created_at, agent_id, version)``."""
SUMMARY_CURSOR = key_cursor(datetime, str, str)
"""The check of a summary's cursor: ``(created_at, agent_id, summary_id)``."""
EVICTION_CURSOR = key_cursor(datetime, str, int, str, str)
"""The check of an eviction's cursor: ``(evicted_at, agent_id, seq, kind, entry_id)``."""
PIN_CURSOR = key_cursor(datetime, str, int, int)
"""The check of a pin event's cursor: ``(at, agent_id, version, position)``."""


@dataclass(frozen=True, slots=True)
class Page:
    """Which records of a listing to read (all of them when every field is ``None``).

    Build it with :meth:`of`, which checks the values; stores take a checked page.

    Attributes:
        after: Only records after this cursor.
        before: Only records before this cursor.
        limit: At most this many, from the start of the range.
        last: At most this many, from the end of the range.
    """

    after: Any = None
    before: Any = None
    limit: int | None = None
    last: int | None = None

    @classmethod
    def of(
        cls,
        *,
        after: Any = None,
        before: Any = None,
        limit: Any = None,
        last: Any = None,
        check: Callable[[str, Any], Any] = seq_cursor,
    ) -> Page:
        """A checked page (``check``: the check of the listing's cursors, a history ``seq`` by default).

        Raises:
            InvalidPage: A cursor is not one of the listing's, a count is not an int >= 0
                (``bool`` included), or both ``limit`` and ``last`` are given.
        """
        page = cls(check("after", after), check("before", before), _count("limit", limit), _count("last", last))
        if limit is not None and last is not None:
            raise InvalidPage("give limit (the first rows) or last (the last rows), not both")
        return page

    @property
    def whole(self) -> bool:
        """Whether the page is the whole listing."""
        return self.after is None and self.before is None and self.limit is None and self.last is None

    def bounds(self) -> dict[str, Any]:
        """The fields that are set, by name."""
        values = {"after": self.after, "before": self.before, "limit": self.limit, "last": self.last}
        return {name: value for name, value in values.items() if value is not None}

    def admits(self, key: Any) -> bool:
        """Whether a record at cursor ``key`` lies in the range (the counts aside)."""
        return (self.after is None or key > self.after) and (self.before is None or key < self.before)

    def cut(self, ordered: list[Any]) -> list[Any]:
        """The page of ``ordered`` (records already in the range, in order) its counts keep."""
        if self.limit is not None:
            return ordered[: self.limit]
        if self.last is not None:
            return ordered[max(0, len(ordered) - self.last) :]
        return ordered


WHOLE = Page()
"""The page that is the whole listing."""


class Pages:
    """The pages that stream a listing, one after another (keyset: each starts after the last one read).

    One loop for the sync and the async iterators: ask :meth:`next` for the page to read,
    read it, hand what was read to :meth:`took`; ``None`` from :meth:`next` ends the
    stream. Memory stays one page whatever the listing's length.
    """

    __slots__ = ("_done", "_page", "size")

    def __init__(
        self,
        *,
        after: Any = None,
        before: Any = None,
        page_size: Any = 1000,
        check: Callable[[str, Any], Any] = seq_cursor,
    ) -> None:
        """Stream the range ``after`` .. ``before`` in pages of ``page_size``.

        Raises:
            InvalidPage: A cursor is not an int >= 0, or ``page_size`` is not an int >= 1.
        """
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise InvalidPage(f"page_size must be an int >= 1, not {page_size!r}")
        self.size = page_size
        self._page = Page.of(after=after, before=before, limit=page_size, check=check)
        self._done = False

    def next(self) -> Page | None:
        """The page to read next, or ``None`` when the stream has ended."""
        return None if self._done else self._page

    def took(self, count: int, last_key: Any) -> None:
        """Record a page read: ``count`` records, the last at cursor ``last_key``."""
        if count < self.size or last_key is None:
            self._done = True
        else:
            self._page = Page(after=last_key, before=self._page.before, limit=self.size)


def paged(records: list[Any], page: Page | None) -> list[Any]:
    """``records`` of one listing (any order) sorted by :func:`cursor` and cut to ``page`` (``None``: all).

    For the stores that hold a listing whole (memory) or read it whole (Redis).
    """
    page = page or WHOLE
    ordered = sorted(records, key=cursor)
    if page.after is not None or page.before is not None:
        ordered = [record for record in ordered if page.admits(cursor(record))]
    return page.cut(ordered)
