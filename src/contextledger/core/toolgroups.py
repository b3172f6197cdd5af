"""A view's tool groups: its entries joined by the tool ids they share, carried from view to view.

Every reduction holds its plan to whole groups (a call is never split from its results),
so each view a commit makes needs its groups. Computing them reads the tool ids of every
entry -- for a restored row, by parsing its text -- so a view made from another by an
append or by evicting its oldest groups derives them from its parent's instead, reading
only the appended entries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from contextledger.core.viewfacts import facts_of
from contextledger.model.records import ViewEntry
from contextledger.model.rows import Row

__all__ = ["ToolGroups"]


class ToolGroups:
    """The groups of a view, as the root of each entry's group: the index of the group's first entry.

    Immutable once built (a derived view gets a new object). ``tools`` maps each tool id
    the view's entries mention to the root of the group holding it.
    """

    __slots__ = ("roots", "tools")

    def __init__(self, roots: list[int], tools: dict[str, int]) -> None:
        self.roots, self.tools = roots, tools

    @classmethod
    def of(cls, entries: Sequence[ViewEntry | Row]) -> ToolGroups:
        """The groups of a view of ``entries`` (their tool ids read once each)."""
        groups = cls([], {})
        for entry in entries:
            groups._add(facts_of(entry).tool_ids)
        return groups

    def extended(self, appends: Iterable[ViewEntry | Row]) -> ToolGroups:
        """The groups of the view with ``appends`` after it (only their tool ids are read)."""
        groups = ToolGroups(self.roots.copy(), self.tools.copy())
        for entry in appends:
            groups._add(facts_of(entry).tool_ids)
        return groups

    def without_oldest(self, count: int) -> ToolGroups | None:
        """The groups of the view without its ``count`` oldest entries, or ``None`` when that splits a group.

        Removing whole groups leaves the others as they were, their indexes ``count``
        lower; a group with entries on both sides of the cut would change, so the caller
        computes the groups afresh.
        """
        roots = self.roots
        if count < len(roots) and min(roots[count:]) < count:
            return None  # a group straddles the cut
        return ToolGroups(
            [root - count for root in roots[count:]],
            {tool_id: root - count for tool_id, root in self.tools.items() if root >= count},
        )

    def _add(self, tool_ids: set[str]) -> None:
        """Append an entry mentioning ``tool_ids``: it joins (and joins together) every group holding one."""
        index, roots, tools = len(self.roots), self.roots, self.tools
        linked = {tools[t] for t in tool_ids if t in tools}
        root = min(linked) if linked else index
        if len(linked) > 1:  # the entry joins groups that were apart: they become one, rooted at the oldest
            merged = linked - {root}
            roots[:] = [root if r in merged else r for r in roots]
            for tool_id, r in tools.items():
                if r in merged:
                    tools[tool_id] = root
        roots.append(root)
        for tool_id in tool_ids:
            tools[tool_id] = root

    def groups(self) -> list[list[int]]:
        """Every group, as ascending indexes, in order of their first index (singletons included)."""
        by_root: dict[int, list[int]] = {}
        for index, root in enumerate(self.roots):
            by_root.setdefault(root, []).append(index)
        # Met in index order, each group was added at its first index: already in order.
        return list(by_root.values())
