"""What a view derives from its entries' messages: tool ids, pins, usage -- from a restored row without building it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from contextledger.model.pending import raw_fields
from contextledger.model.records import ViewEntry
from contextledger.model.rows import Row

__all__ = ["Facts", "ToolFacts", "facts_of", "projected_after"]


class Facts(Protocol):
    """What the view's rules read of an entry's message: a :class:`Message`, or the :class:`Row` answering for it."""

    @property
    def pinned(self) -> bool:
        """Whether the message is pinned."""
        ...

    @property
    def usage(self) -> Mapping[str, Any] | None:
        """The model usage recorded on the message, if any."""
        ...

    @property
    def tool_use_ids(self) -> list[str]:
        """Ids of its ``toolUse`` blocks, in order."""
        ...

    @property
    def tool_result_ids(self) -> list[str]:
        """Ids of its ``toolResult`` blocks, in order."""
        ...

    @property
    def tool_ids(self) -> set[str]:
        """Every toolUseId it mentions or travels with."""
        ...


def facts_of(item: ViewEntry | Row) -> Facts:
    """The facts of ``item``'s message: the message itself, or the row answering for it."""
    # A row answers for its message without building it.
    return item if isinstance(item, Row) else item.message


class ToolFacts:
    """The tool ids of a view: every call and result, and the calls and results left unpaired.

    ``dangling`` and ``orphans`` keep view order (their order is the order the
    repair reports them in).
    """

    __slots__ = ("dangling", "grown", "orphans", "results", "unique", "uses")

    def __init__(
        self, uses: set[str], results: set[str], dangling: list[str], orphans: list[str], unique: bool = False
    ) -> None:
        self.uses, self.results, self.dangling, self.orphans = uses, results, dangling, orphans
        # Whether ``uses``/``results`` were grown in place for a later view (then they hold
        # more than this object's views have, and only ``dangling``/``orphans`` stay true).
        self.grown = False
        # Whether no id is called, or answered, by two entries of the view: then the facts
        # of the view without some entries are these sets minus theirs (see ``without``).
        self.unique = unique

    @staticmethod
    def _ids(entries: Sequence[ViewEntry | Row]) -> tuple[list[str], list[str]]:
        uses: list[str] = []
        results: list[str] = []
        for entry in entries:
            if type(entry) is ViewEntry:
                # A message whose content is decoded (every appended one): its blocks are
                # read once for both lists, as its two accessors would read them.
                content = raw_fields(entry.message).get("content")
                if content is not None:
                    for block in content:
                        if "toolUse" in block:
                            uses.append(block["toolUse"]["toolUseId"])
                        if "toolResult" in block:
                            results.append(block["toolResult"]["toolUseId"])
                    continue
            # Through the message's own accessors, or the row's: a restored message answers
            # them from its stored text, without decoding its content.
            message = facts_of(entry)
            uses += message.tool_use_ids
            results += message.tool_result_ids
        return uses, results

    @classmethod
    def of(cls, entries: Sequence[ViewEntry | Row]) -> ToolFacts:
        """The facts of a view of ``entries``."""
        uses, results = cls._ids(entries)
        use_set, result_set = set(uses), set(results)
        return cls(
            use_set,
            result_set,
            [t for t in uses if t not in result_set],
            [t for t in results if t not in use_set],
            len(use_set) == len(uses) and len(result_set) == len(results),
        )

    def extended(
        self, appends: Sequence[ViewEntry], *, in_place: bool = False, ids: tuple[list[str], list[str]] | None = None
    ) -> ToolFacts:
        """The facts of the view with ``appends`` after it.

        ``in_place`` adds to this object's id sets instead of copying them (and marks it
        ``grown``), or returns this very object when ``appends`` hold no tool id: only for
        the view that took its parent's tail. Otherwise the facts are a new object with
        sets of its own. ``ids`` are the toolUse and toolResult ids of ``appends`` (in
        order) when the caller has them; else they are read from ``appends``.
        """
        uses, results = self._ids(appends) if ids is None else ids
        if not uses and not results and in_place:
            return self  # plain text turns: nothing to carry over but the facts themselves
        use_set, result_set = self.uses, self.results
        had_uses, had_results = len(use_set), len(result_set)
        # A copy never shares its sets: two views that each own a tail must never grow one set.
        if in_place:
            self.grown = True
            use_set.update(uses)
            result_set.update(results)
        else:
            use_set, result_set = use_set | set(uses), result_set | set(results)
        # Each set grew by every id appended only if none repeats and none was there already.
        unique = self.unique and len(use_set) == had_uses + len(uses) and len(result_set) == had_results + len(results)
        dangling, orphans = self.dangling, self.orphans
        if uses == results and not dangling and not orphans:
            # Each call answered in the same turn, in order (a tool turn's shape), on a view
            # with nothing unpaired: each appended id is in both sets, so nothing is unpaired.
            return ToolFacts(use_set, result_set, [], [], unique)
        return ToolFacts(
            use_set,
            result_set,
            # The earlier unpaired ones (none, nearly always), then the appended ones, in order.
            [t for t in (*dangling, *uses) if t not in result_set]
            if dangling
            else [t for t in uses if t not in result_set],
            [t for t in (*orphans, *results) if t not in use_set]
            if orphans
            else [t for t in results if t not in use_set],
            unique,
        )

    def without(self, removed: Sequence[ViewEntry | Row]) -> ToolFacts | None:
        """The facts of the view without ``removed`` (some of its entries), or ``None`` to compute afresh.

        An eviction keeps whole tool pairs, so the calls and results it removes leave
        together and the unpaired ones keep their order: the facts are these minus the
        removed ids, in O(removed). When that does not hold -- a removed result whose
        call stays (the call would become unpaired at its place in the view), an id
        held by two entries, sets grown for a later view -- ``None``.
        """
        if self.grown or not self.unique:
            return None
        gone_uses, gone_results = self._ids(removed)
        used, answered = set(gone_uses), set(gone_results)
        if any([t in self.uses and t not in used for t in answered]) or any(
            [t in self.results and t not in answered for t in used]
        ):
            return None
        return ToolFacts(
            self.uses - used,
            self.results - answered,
            [t for t in self.dangling if t not in used],
            [t for t in self.orphans if t not in answered],
            True,
        )


def projected_after(base: int | None, entries: Sequence[ViewEntry | Row]) -> int:
    """Projected input tokens of a view ending in ``entries``; ``base`` is that of what precedes them.

    The newest entry with reported usage resets the count; ``base`` is ``None`` when
    nothing precedes ``entries``.
    """
    for index in range(len(entries) - 1, -1, -1):
        usage = facts_of(entries[index]).usage
        if usage and isinstance(usage.get("inputTokens"), int):
            reported = int(usage["inputTokens"]) + int(usage.get("outputTokens") or 0)
            return reported + sum([e.tokens for e in entries[index + 1 :]])
    return (base or 0) + sum([e.tokens for e in entries])
