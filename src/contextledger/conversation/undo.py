"""Undo a reduction: the entries it evicted come back, its summary leaves, its revisions revert.

Nothing is deleted by a reduction, so a reduction can be reverted -- a summarizer that
wrote nonsense is rolled back and the original messages return. :func:`plan_undo` is
pure: from the active view, the conversation's reductions and the rows it needs, it
computes the one changeset-shaped :class:`UndoPlan` that the
:class:`~contextledger.Conversation` commits as a reduction of its own (strategy
``undo``, trigger ``manual``).

A later reduction *depends* on the one undone when it touched what that one produced or
changed: it evicted its summary (or entries an undo restored), revised a message it
revised, or restored what it evicted. Undoing under a dependent is refused with
:class:`~contextledger.errors.UndoConflict` unless ``cascade=True``, which reverts the
dependents too (newest first) in the same commit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contextledger.conversation.transaction import Transaction
from contextledger.core.changeset import ContentRevision, Edit, ReductionPlan
from contextledger.core.view import View, is_prompt, is_turn_opener_violation
from contextledger.errors import InvalidPlan, ReductionNotFound, UndoConflict
from contextledger.model.messages import decode_blocks
from contextledger.model.records import HistoryEntry, Reduction, Revision, SummaryEntry, ViewEntry, in_commit_order
from contextledger.stores.capabilities import HISTORY, TIME_TRAVEL

__all__ = ["UNDO_STRATEGY", "Undo", "UndoPlan", "dependents", "plan_undo"]

UNDO_STRATEGY = "undo"
"""The strategy recorded on an undo reduction."""


@dataclass(frozen=True)
class UndoPlan:
    """What one undo commits.

    Attributes:
        undone: The reductions reverted, newest first (the one asked for last).
        restore: Entries made active again, as the view will show them.
        evict: Active entries taken out (the summaries the undone reductions inserted).
        revisions: Contents put back (the originals the undone revisions kept).
    """

    undone: tuple[str, ...]
    restore: tuple[ViewEntry, ...]
    evict: tuple[str, ...]
    revisions: tuple[ContentRevision, ...]

    @property
    def detail(self) -> str:
        """The reduction's ``detail``: which reductions it reverts."""
        return "undo of " + ", ".join(self.undone)


def _produced(red: Reduction) -> set[str]:
    """Entries the reduction put into the view."""
    return ({red.summary_id} if red.summary_id else set()) | set(red.restored)


def dependents(reductions: Sequence[Reduction], reduction_id: str) -> list[Reduction]:
    """The later reductions that depend on ``reduction_id``, transitively, oldest first.

    Raises:
        ReductionNotFound: No reduction has that id.
    """
    position = next((i for i, r in enumerate(reductions) if r.reduction_id == reduction_id), None)
    if position is None:
        raise ReductionNotFound(f"no reduction {reduction_id!r} in this conversation")
    group = [reductions[position]]
    produced = _produced(reductions[position])
    evicted = set(reductions[position].evicted)
    revised = set(reductions[position].revised)
    out: list[Reduction] = []
    for later in reductions[position + 1 :]:
        if produced & set(later.evicted) or revised & set(later.revised) or evicted & set(later.restored):
            out.append(later)
            group.append(later)
            produced |= _produced(later)
            evicted |= set(later.evicted)
            revised |= set(later.revised)
    return out


def plan_undo(
    view: View,
    reductions: Sequence[Reduction],
    reduction_id: str,
    *,
    cascade: bool,
    entries: Callable[[Sequence[str]], list[HistoryEntry]],
    summaries: Callable[[], list[SummaryEntry]],
    revisions: Callable[[], list[Revision]],
) -> UndoPlan:
    """The plan reverting ``reduction_id`` (and its dependents with ``cascade``) on ``view``.

    Raises:
        ReductionNotFound: No reduction of the conversation has that id.
        UndoConflict: A later reduction depends on it and ``cascade`` is false.
        InvalidPlan: There is nothing to revert, or the view the undo leaves would break
            the view rules (an entry it would restore is gone, or the view would open badly
            or split a tool pair).
    """
    later = dependents(reductions, reduction_id)
    if later and not cascade:
        raise UndoConflict(
            f"reduction {reduction_id} cannot be undone alone: later reductions depend on it"
            f" ({', '.join(r.reduction_id for r in later)}); undo them first or pass cascade=True",
            dependents=tuple(r.reduction_id for r in later),
        )
    target = next(r for r in reductions if r.reduction_id == reduction_id)
    group = [*reversed(later), target]  # newest first
    active = set(view.ids)
    after = set(active)
    for red in group:
        if red.summary_id is not None:
            after.discard(red.summary_id)
        after -= set(red.restored)
        after |= set(red.evicted)
    restore_ids = [i for i in after if i not in active]
    evict_ids = sorted(active - after, key=lambda i: view.index_of(i) or 0)
    rows = {e.message.message_id: e for e in entries(restore_ids)} if restore_ids else {}
    missing = [i for i in restore_ids if i not in rows]
    summary_rows = {s.summary_id: s for s in summaries()} if missing else {}
    restored: list[ViewEntry] = []
    for entry_id in restore_ids:
        if entry_id in rows:
            row = rows[entry_id]
            restored.append(ViewEntry(entry_id=entry_id, seq=row.seq, message=row.message, tokens=row.tokens))
        elif entry_id in summary_rows:
            s = summary_rows[entry_id]
            restored.append(
                ViewEntry(entry_id=entry_id, kind="summary", seq=s.seq, message=s.to_message(), tokens=s.tokens)
            )
        else:
            raise InvalidPlan(f"cannot undo {reduction_id}: entry {entry_id} it evicted is gone (erased or pruned)")
    group_ids = {r.reduction_id for r in group}
    revised = {m for r in group for m in r.revised}
    reverts: list[ContentRevision] = []
    if revised:
        originals: dict[str, Revision] = {}
        for rev in sorted(revisions(), key=lambda r: r.number):
            if rev.reduction_id in group_ids and rev.message_id in revised and rev.message_id not in originals:
                originals[rev.message_id] = rev
        for message_id, rev in originals.items():
            if message_id in after:
                reverts.append(
                    ContentRevision(message_id=message_id, content=decode_blocks(rev.original), reason=UNDO_STRATEGY)
                )
    restored.sort(key=lambda e: (e.seq, e.kind != "summary"))
    if not (restored or evict_ids or reverts):
        raise InvalidPlan(
            f"nothing to undo: reduction {reduction_id} evicted, inserted and revised nothing"
            " (appended messages, such as a repair's, are not undone)"
        )
    plan = UndoPlan(
        undone=tuple(r.reduction_id for r in group),
        restore=tuple(restored),
        evict=tuple(evict_ids),
        revisions=tuple(reverts),
    )
    _check_rules(view, plan)
    return plan


def _check_rules(view: View, plan: UndoPlan) -> None:
    """Refuse an undo whose view a provider would reject (see :mod:`contextledger.core.viewrules`)."""
    kept = [e for e in view if e.entry_id not in set(plan.evict)]
    after = View(sorted([*kept, *plan.restore], key=lambda e: (e.seq, e.kind != "summary")))
    problems: list[str] = []
    if len(view) and not len(after):
        problems.append("it would empty the view")
    if _opens_badly(after) and not _opens_badly(view):
        problems.append("the view would open with an assistant message or a toolResult")
    if set(after.dangling_tool_uses()) - set(view.dangling_tool_uses()):
        problems.append("a toolUse would lose its result")
    if set(after.orphan_results()) - set(view.orphan_results()):
        problems.append("a toolResult would lose its call")
    if any(is_prompt(e) for e in view) and not any(is_prompt(e) for e in after):
        problems.append("the newest user prompt would leave the view")
    if problems:
        raise InvalidPlan(f"cannot undo {plan.undone[-1]}: {'; '.join(problems)}")


def _opens_badly(view: View) -> bool:
    first = next((e for e in view if e.message.role != "system"), None)
    return first is not None and is_turn_opener_violation(first)


class Undo:
    """The undo API of a conversation: each undo is one commit of its :class:`Transaction`.

    Attributes:
        transaction: Reads the rows an undo needs from its store, and commits the undo.
    """

    def __init__(self, transaction: Transaction) -> None:
        """Undo reductions of ``transaction``'s conversation."""
        self.transaction = transaction

    def undo(self, reduction_id: str, *, cascade: bool = False) -> Reduction:
        """Revert a reduction, committed as one reduction of its own (strategy ``undo``, trigger ``manual``).

        The entries it evicted become active again, a summary it inserted leaves the view
        (the one it superseded returns), its revisions are reverted. See the
        module docstring.

        Raises:
            ReductionNotFound: No reduction of this conversation has that id.
            UndoConflict: A later reduction depends on it (its summary was superseded, a
                message it revised was revised again, it was undone already) and
                ``cascade`` is false; nothing is written.
            InvalidPlan: The reduction changed nothing that can be reverted (a repair
                only appends), or the view the undo leaves would break the view rules.
        """
        store, sid, aid = self.transaction.store, self.transaction.session_id, self.transaction.agent_id

        def build(view: View) -> Edit:
            plan = plan_undo(
                view,
                in_commit_order(HISTORY.of(store, "undo").reductions(sid, aid)),
                reduction_id,
                cascade=cascade,
                entries=lambda ids: TIME_TRAVEL.of(store, "undo").entries(sid, aid, ids),
                summaries=lambda: HISTORY.of(store, "undo").summaries(sid, aid),
                revisions=lambda: HISTORY.of(store, "undo").revisions(sid, aid),
            )
            reduction = ReductionPlan(
                strategy=UNDO_STRATEGY, evict=plan.evict, revisions=plan.revisions, detail=plan.detail
            )
            # as_given: plan_undo held the view it leaves to the rules (restores included,
            # which the plan-level rules cannot see).
            return Edit(plan=reduction, restore=plan.restore, trigger="manual", strategy=UNDO_STRATEGY, as_given=True)

        reduction = self.transaction.edit(build)
        assert reduction is not None  # an undo always carries its reduction row
        return reduction
