"""The active view: the entries the model sees, with tool-pair structure resolved."""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any

from contextledger.core.projection import Revision, projected_items
from contextledger.core.toolgroups import ToolGroups
from contextledger.core.viewfacts import ToolFacts, facts_of, projected_after
from contextledger.errors import PinError
from contextledger.model.messages import Message
from contextledger.model.records import SummaryEntry, ViewEntry
from contextledger.model.rows import Row, compacted, entry_of

__all__ = ["View", "is_prompt", "is_turn_opener_violation", "project_view"]

# Facts a view appended to another derives from that one's when first asked, each with the
# key of its base there: (the parent's fact, how many entries it covers).
_CARRIED = (("_tool_groups", "_groups_base"), ("pinned_indexes", "_pins_base"))

# Guards the hand-over of a view's tail (see View.appended): two threads extending one
# view must not both append to its list.
_TAIL_LOCK = threading.Lock()


class View:
    """An immutable, ordered sequence of active entries.

    Tool pairs are resolved once: :meth:`group_of` gives every index linked to an entry
    by a shared toolUseId (a call, all of its results, transitively), so a policy that
    evicts, pins or summarises whole groups can never split a pair.

    A restored message whose content is still its stored text is held as a compact
    :class:`~contextledger.model.rows.Row`, and its :class:`ViewEntry` (and message) is
    built each time it is read -- equal every time, and equal to the entry restored --
    while ids, seqs, token counts, pins and tool ids are answered from the row. So an
    open conversation nobody reads holds about its text, and reading it holds nothing
    more than what the reader keeps.
    """

    def __init__(self, entries: Sequence[ViewEntry]) -> None:
        """Wrap ``entries`` (already in view order)."""
        # ``_lazy``: whether some entry is a row; then the entries are built on read, never kept.
        self._items, self._lazy = compacted(entries)
        self._count = len(self._items)
        # Whether this view may append to ``_items`` (and to the position and tool-id
        # indexes it shares) in place: only the newest view of a chain of appends does.
        self._owns_tail = True

    # Facts derived from the entries (ids, positions, tool ids, token totals) are computed
    # at most once per view, on first use: a view never changes, and the hot paths
    # (before_model_call, append) ask for the same facts many times per view. A view made
    # by appending to another (:meth:`project`) derives them from its parent's.
    #
    # Appending is O(appended), whatever the window: the child shares its parent's list
    # and indexes and appends to them in place. The parent still sees only its own first
    # ``_count`` entries, and an index answers it only for positions below that count; a
    # view whose tail was taken by a child (a second branch from one view, e.g. a
    # projection) copies instead. So no view ever sees a change, and an open conversation
    # holds one list of its entries, not one per commit.

    @property
    def entries(self) -> tuple[ViewEntry, ...]:
        """The entries, in view order (restored ones built anew on each read; see the class docstring)."""
        known: tuple[ViewEntry, ...] | None = self.__dict__.get("_entries")
        if known is not None:
            return known
        if not self._lazy:  # every item an entry: kept once built
            entries = self.__dict__["_entries"] = tuple(self._items[: self._count])
            return entries
        return tuple(map(entry_of, self._items[: self._count]))

    def built(self) -> View:
        """This view with its restored entries built once and kept (``self`` when none is a row).

        For a reader that asks each entry many times -- a reduction's plan and the view
        rules holding it -- and then lets the view go: the same entries in the same order,
        whose facts are computed afresh.
        """
        if not self._lazy:
            return self
        view = View.__new__(View)
        view._items = list(self.entries)
        view._count = self._count
        view._owns_tail = True  # a list of its own
        view._lazy = False
        return view

    def _live(self) -> list[ViewEntry | Row]:
        """The items of this view (entries and rows), in order: what its facts are computed from."""
        return self._items[: self._count]

    def project(
        self,
        appends: Sequence[ViewEntry],
        removed: set[str],
        revised: Mapping[str, Revision],
        pins: Mapping[str, bool],
        summary: SummaryEntry | None,
    ) -> View:
        """The view after a changeset (see :func:`project_view`); ``self`` when it changes nothing."""
        if not (appends or removed or revised or pins or summary):
            return self  # a state-only commit (the model-call count) keeps every cached fact
        if not (removed or revised or pins or summary) and (
            not self._count or appends[0].seq > self._items[self._count - 1].seq
        ):
            return self.appended(tuple(appends))
        live = self._live()
        view = self._of(projected_items(live, appends, removed, revised, pins, summary))
        if removed and not (revised or summary) and not any([a.entry_id in removed for a in appends]):
            # An eviction (a sliding window's, every turn): carry the facts over in
            # O(removed + appended) instead of computing them over the whole window again.
            kept = len(live) - len(removed)
            oldest = (
                view._count == kept + len(appends)
                and all([item.entry_id in removed for item in live[: len(removed)]])
                # and the appends after every entry kept, in their order (a restore's go back in place)
                and [item.entry_id for item in view._items[kept:]] == [a.entry_id for a in appends]
            )
            if oldest:  # the oldest entries leave (nearly every eviction): the index and the groups too
                self._carry_positions(view, len(removed), appends)
                groups: ToolGroups | None = self.__dict__.get("_tool_groups")
                carried = groups.without_oldest(len(removed)) if groups is not None else None
                if carried is not None:
                    view.__dict__["_tool_groups"] = carried.extended(appends) if appends else carried
                pinned: frozenset[int] | None = self.__dict__.get("pinned_indexes")
                if pinned is not None and not pins:  # the kept entries' pins as they were, ``evicted`` lower
                    evicted = len(removed)
                    view.__dict__["_pins_base"] = (frozenset([i - evicted for i in pinned if i >= evicted]), kept)
            if "_tool_facts" in self.__dict__:
                gone = live[: len(removed)] if oldest else [item for item in live if item.entry_id in removed]
                facts = self._tool_facts.without(gone)
                if facts is not None:
                    view.__dict__["_tool_facts"] = facts.extended(appends, in_place=True) if appends else facts
        return view

    def _of(self, items: list[ViewEntry | Row]) -> View:
        """A view of ``items``: this view's own items (rows kept as rows) and entries it made, in view order.

        What :meth:`__init__` makes of them, without compacting them again: the rows among
        them are this view's, the rest were compacted when they came in, or are entries a
        commit made (an appended message, a revised or re-pinned copy, a summary).
        """
        view = View.__new__(View)
        view._items = items
        view._count = len(items)
        view._owns_tail = True  # a list of its own
        # Set-of-types in C: a view with no row left builds no entry anew on each read.
        view._lazy = self._lazy and Row in set(map(type, items))
        return view

    def _carry_positions(self, view: View, evicted: int, appends: Sequence[ViewEntry]) -> None:
        """Hand this view's position index to ``view``: this view less its ``evicted`` oldest entries, plus ``appends``.

        The index maps an id to its position plus the view's :attr:`_origin` (0 for an
        index computed afresh). Without its oldest entries every other entry moves down
        by ``evicted``, so the child's origin is ``evicted`` higher and its index is a
        copy of this one less the evicted ids: no kept entry is read, where computing the
        index afresh reads every entry of the window on the next append. Only a view that
        holds the tail of its index (no child appended to it in place, see
        :meth:`appended`) has nothing else in it; any other computes it afresh.
        """
        with _TAIL_LOCK:  # the tail not taken meanwhile (an in-place append extends the index under this lock)
            positions: dict[str, int] | None = self.__dict__.get("_positions")
            if positions is None or not self._owns_tail:
                return
            carried = positions.copy()
        for item in self._items[:evicted]:
            del carried[item.entry_id]
        origin = self._origin + evicted
        end = origin + self._count - evicted
        carried.update(zip([a.entry_id for a in appends], range(end, end + len(appends)), strict=True))
        view.__dict__["_positions"] = carried
        view.__dict__["_origin"] = origin

    def appended(self, appends: tuple[ViewEntry, ...], tool_ids: tuple[list[str], list[str]] | None = None) -> View:
        """``project(appends, set(), {}, {}, None)``: the view with ``appends`` after it (a plain append's).

        Its computed facts are carried over in O(appended). ``tool_ids``: the toolUse and
        toolResult ids of ``appends``, in order, when the caller has read them already
        (else they are read from the entries).
        """
        count = self._count
        if not appends or (count and appends[0].seq <= self._items[count - 1].seq):
            return self.project(appends, set(), {}, {}, None)
        with _TAIL_LOCK:  # one hand-over of the tail, and no index read while another grows it
            known = self.__dict__
            positions: dict[str, int] | None = known.get("_positions")
            ids = [e.entry_id for e in appends] if positions is not None else None
            in_place, self._owns_tail = self._owns_tail, False
            end = known.get("_origin", 0) + count  # where this view's positions end in its index
            if positions is not None and (
                # The tail's owner indexes no position past its own: an id it holds is active.
                not positions.keys().isdisjoint(ids)  # type: ignore[arg-type]
                if in_place
                else any([positions.get(i, end) < end for i in ids])  # type: ignore[union-attr]
            ):
                positions = None  # an id twice in one view (a projection of a refused append): index it afresh
            if in_place:
                items = self._items
                items.extend(appends)
            else:
                items = [*self._items[:count], *appends]
                if positions is not None:
                    positions = {k: i for k, i in positions.items() if i < end}
            child = View.__new__(View)
            # Every attribute __init__ sets, as one dict (a commit makes a view each time).
            facts: dict[str, Any] = {
                "_items": items,
                "_lazy": self._lazy,
                "_count": count + len(appends),
                "_owns_tail": True,
            }
            # The facts computed already are read from the instance dict they are cached in.
            tools: ToolFacts | None = known.get("_tool_facts")
            if tools is not None:
                # Facts whose sets a child grew in place are rebuilt, not extended, by a second branch.
                facts["_tool_facts"] = (
                    ToolFacts.of(items[: count + len(appends)])
                    if tools.grown and not in_place
                    else tools.extended(appends, in_place=in_place, ids=tool_ids)
                )
            # The groups and the pins are extended when first asked (by a reduction), not
            # here: an append reads nothing for them, however many come before a reduction.
            for fact, base in _CARRIED:
                if fact in known:
                    facts[base] = (known[fact], count)
                elif base in known:
                    facts[base] = known[base]
            if "projected_input_tokens" in known:
                facts["projected_input_tokens"] = projected_after(known["projected_input_tokens"], appends)
            if positions is not None:
                positions.update(zip(ids, range(end, end + len(appends)), strict=True))  # type: ignore[arg-type]
                facts["_positions"] = positions
                facts["_origin"] = end - count
            if "tokens" in known:
                facts["tokens"] = known["tokens"] + sum([e.tokens for e in appends])
            child.__dict__ = facts
            return child

    def __len__(self) -> int:
        """Number of active entries."""
        return self._count

    def __iter__(self) -> Iterator[ViewEntry]:
        """Iterate entries in order (restored ones built one at a time, as the iteration reaches them)."""
        if self._lazy:  # (a lazy view never keeps its entries: nothing built to reuse)
            # Not all at once: a reader that renders each entry and lets it go (a host
            # restoring its history) holds one at a time, and an entry that dies young is
            # never walked by the collector's older generations. The slice is this view's,
            # taken now: a later append to the list it shares is not seen.
            return map(entry_of, self._items[: self._count])
        return iter(self.entries)

    def __getitem__(self, index: int) -> ViewEntry:
        """Entry at ``index`` (negative counts from the end).

        Raises:
            IndexError: ``index`` is out of range.
        """
        count = self._count
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError("view index out of range")
        return entry_of(self._items[index])

    @property
    def messages(self) -> list[Message]:
        """The messages in order (summaries rendered as user messages; restored ones built anew on each read)."""
        known: list[Message] | None = self.__dict__.get("_messages")
        if known is not None:
            return known
        messages = [e.message for e in self._live()]
        if not self._lazy:
            self.__dict__["_messages"] = messages
        return messages

    @cached_property
    def ids(self) -> list[str]:
        """Entry ids in order."""
        return [e.entry_id for e in self._live()]

    # Where this view's first entry is in :attr:`_positions` (0 unless the index was
    # carried over from a view with older entries, see _carry_positions).
    _origin = 0

    @cached_property
    def _positions(self) -> dict[str, int]:
        # Computed afresh, it counts from 0 (an index carried over is set with its origin).
        return {e.entry_id: i for i, e in enumerate(self._live())}

    def index_of(self, entry_id: str) -> int | None:
        """The index of ``entry_id`` or ``None`` when it is not active."""
        index = self._positions.get(entry_id)
        if index is None:
            return None
        # The index may be shared with views appended after this one (see appended).
        index -= self._origin
        return index if index < self._count else None

    def tool_result_ids_at(self, index: int) -> list[str]:
        """``self[index].message.tool_result_ids``, answered without building a restored entry.

        Raises:
            IndexError: ``index`` is out of range.
        """
        count = self._count
        if not -count <= index < count:
            raise IndexError("view index out of range")
        return facts_of(self._items[index % count]).tool_result_ids

    @cached_property
    def tokens(self) -> int:
        """Sum of the stored token estimates."""
        return sum(e.tokens for e in self._live())

    @cached_property
    def projected_input_tokens(self) -> int:
        """The last reported input+output usage plus the estimate of every entry after it.

        Without any reported usage, the sum of the estimates (see
        :func:`contextledger.model.tokens.projected_input_tokens`).
        """
        return projected_after(None, self._live())

    @cached_property
    def _tool_groups(self) -> ToolGroups:
        # An appended view extends the groups of the view it was appended to (see appended).
        base: tuple[ToolGroups, int] | None = self.__dict__.get("_groups_base")
        if base is not None:
            groups, covered = base
            return groups.extended(self._live()[covered:])
        return ToolGroups.of(self._live())

    def group_of(self, index: int) -> list[int]:
        """Indexes tool-linked to ``index`` (itself included), ascending."""
        roots = self._tool_groups.roots
        root = roots[index]
        return [i for i, r in enumerate(roots) if r == root]

    @cached_property
    def groups(self) -> list[list[int]]:
        """All groups in order of their first index; singletons for plain messages."""
        return self._tool_groups.groups()

    def groups_touching(self, indexes: Collection[int]) -> list[list[int]]:
        """The groups of :attr:`groups` holding any of ``indexes`` (valid indexes of this view), in order."""
        if not indexes:
            return []
        roots = self._tool_groups.roots
        wanted = {roots[i] for i in indexes}
        return [group for group in self.groups if roots[group[0]] in wanted]

    @cached_property
    def pinned_indexes(self) -> frozenset[int]:
        """Indexes of the entries pinned themselves (their partners are not; see :meth:`is_pinned`).

        Read from restored rows without building them; every manager and the view rules
        ask it of each group they weigh.
        """
        items = self._live()
        # A view made by an append or an eviction starts from its parent's (see appended, project).
        base: tuple[frozenset[int], int] | None = self.__dict__.get("_pins_base")
        if base is None:
            return frozenset([i for i, item in enumerate(items) if facts_of(item).pinned])
        pinned, covered = base
        more = [i for i in range(covered, len(items)) if facts_of(items[i]).pinned]
        return pinned.union(more) if more else pinned

    def is_pinned(self, index: int) -> bool:
        """Whether the entry or any tool-pair partner of it is pinned."""
        return not self.pinned_indexes.isdisjoint(self.group_of(index))

    def id_at(self, index: int) -> str:
        """The id of the entry at ``index`` (negative counts from the end).

        Raises:
            PinError: ``index`` is not an int or is out of range.
        """
        if isinstance(index, bool) or not isinstance(index, int):
            raise PinError(f"index must be an int, got {index!r}")
        if not -len(self) <= index < len(self):
            raise PinError(f"index {index} is out of range: the conversation has {len(self)} messages")
        return self._items[index % len(self)].entry_id

    def stored_as(self, messages: Sequence[Message]) -> list[Message] | None:
        """The active messages ``messages`` were committed as, or ``None`` when any is not.

        A message counts as committed when its id is active with the same role, content
        and metadata (pins may have changed since): appending it again is a retry.
        """
        positions, count = self._positions, self._count  # index_of's lookup, without its call per message
        origin = self._origin
        end = origin + count
        found: list[int] = []
        for m in messages:
            i = positions.get(m.message_id, end)
            if i >= end:  # a new message (every append but a retry): stop at the first
                return None
            found.append(i - origin)
        stored = [self[i].message for i in found]
        return stored if all(map(_same_message, messages, stored)) else None

    @cached_property
    def _tool_facts(self) -> ToolFacts:
        return ToolFacts.of(self._live())

    def mid_tool(self) -> bool:
        """Whether a toolUse in the view has no result in it, or a toolResult no call (a view left mid-tool)."""
        facts = self._tool_facts
        return bool(facts.dangling or facts.orphans)

    def dangling_tool_uses(self) -> list[str]:
        """Return the toolUseIds called in the view that have no result in it."""
        return list(self._tool_facts.dangling)

    def orphan_results(self) -> list[str]:
        """Return the toolUseIds answered in the view whose call is not in it."""
        return list(self._tool_facts.orphans)


def _same_message(new: Message, stored: Message) -> bool:
    return (new.role, new.content, new.with_pin(False).metadata) == (
        stored.role,
        stored.content,
        stored.with_pin(False).metadata,
    )


def is_prompt(entry: ViewEntry) -> bool:
    """Whether ``entry`` is a user prompt: a user message with content other than tool results."""
    message = entry.message
    return (
        entry.kind == "message"
        and message.role == "user"
        and any("toolResult" not in block for block in message.content)
    )


def is_turn_opener_violation(entry: ViewEntry) -> bool:
    """Whether a view starting (after system messages) with ``entry`` is one a provider rejects.

    That is an assistant message, or a user message carrying tool results. A summary is
    rendered as a user text message and opens a view fine.
    """
    message = entry.message
    if entry.kind == "summary":
        return False
    return message.role == "assistant" or bool(message.tool_result_ids)


def project_view(
    view: View,
    appends: Sequence[ViewEntry],
    removed: set[str],
    revised: Mapping[str, Revision],
    pins: Mapping[str, bool],
    summary: SummaryEntry | None,
) -> list[ViewEntry]:
    """The entries of ``view`` after a changeset, computed locally so a commit needs no re-read (pure).

    Entries are ordered by seq; a summary sorts before a message of equal seq.
    """
    return [entry_of(e) for e in projected_items(list(view.entries), appends, removed, revised, pins, summary)]
