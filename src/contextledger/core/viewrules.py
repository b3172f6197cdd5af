"""The view rules: every reduction leaves a view a model provider accepts.

:func:`fit_plan` is pure. It checks a :class:`~contextledger.core.changeset.ReductionPlan`
against the view it was made for and returns the plan corrected where that is safe,
or raises :class:`~contextledger.errors.InvalidPlan`. The
:class:`~contextledger.Conversation` runs it on every manager's plan; the built-in
managers run it themselves (with their protected ranges) so they never make a plan
the conversation has to correct. The rules:

1. Tool pairs and pins: a tool-pair group is removed whole or not at all; a pinned
   entry (or its partner) is never removed; nor is the newest user prompt.
2. The view never starts (after system messages) with an assistant message or a
   toolResult when it did not start with that very entry before: an eviction boundary
   advances to the next user prompt; where a pinned or protected entry stops it, the
   boundary moves back instead. A view that already opened badly (a toolUse whose
   result carries another id, say) is never made to open with another bad entry.
3. A non-empty view is never emptied.
4. A summary stands right before the oldest kept entry after what it replaced. Only
   pinned entries may stay inside the summarized span; they keep their order, ahead of
   the summary. A partly summarized tool pair or any other kept message inside the
   span cannot be corrected (the summary text is written for exactly its entries).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from contextledger.core.changeset import Edit, ReductionPlan
from contextledger.core.view import View, is_prompt, is_turn_opener_violation
from contextledger.errors import EntryNotFound, InvalidPlan
from contextledger.model.messages import Message
from contextledger.model.tokens import TokenCounter

__all__ = ["estimate_tokens", "fit_edit", "fit_plan", "newest_prompt"]


def newest_prompt(view: View) -> int | None:
    """Index of the newest user prompt (the last user message that is not only tool results)."""
    for index in range(len(view) - 1, -1, -1):
        if is_prompt(view[index]):
            return index
    return None


def fit_plan(view: View, plan: ReductionPlan | None, *, keep: Collection[int] = ()) -> ReductionPlan | None:
    """Return ``plan`` corrected to follow the view rules, or ``None`` when nothing is left of it.

    Args:
        view: The view the plan was made for.
        plan: The plan (``None`` passes through).
        keep: Indexes the caller never removes besides pins (a manager's protected
            ranges); corrections never remove them either.

    Returns:
        The plan with whole groups only, a boundary that opens on a user prompt, and the
        summary placed by rule 4 (its ``seq`` set). Calling it on its own result returns
        an equal plan.

    Raises:
        EntryNotFound: The plan names an entry that is not in the view.
        InvalidPlan: A summary would leave a kept message inside its span, or the view
            cannot open validly whatever is evicted.
    """
    if plan is None or plan.is_empty:
        return None
    fitter = _Fitter(view, plan, frozenset(keep))
    return fitter.fit()


def fit_edit(view: View, edit: Edit | None) -> Edit | None:
    """``edit`` with its plan held to the view rules by :func:`fit_plan` (pure).

    An edit without a plan, or marked ``as_given`` (a host's own reduction mirrored),
    passes unchanged.

    Raises:
        EntryNotFound: The plan names an entry that is not in the view.
        InvalidPlan: The plan breaks the rules beyond correction, or nothing of it
            would be left once corrected (it only removed what must stay).
    """
    if edit is None or edit.as_given or edit.plan is None or edit.plan.is_empty:
        return edit
    plan = fit_plan(view, edit.plan)
    if plan is None:
        raise InvalidPlan(
            f"the {edit.plan.strategy} plan would only remove what must stay (pinned entries, tool-pair partners"
            " of them, the newest user prompt or the last entries of the view): nothing was committed"
        )
    return edit if plan == edit.plan else edit.model_copy(update={"plan": plan})


def estimate_tokens(view: View, plan: ReductionPlan, counter: TokenCounter) -> ReductionPlan:
    """``plan`` with ``tokens_before``/``tokens_after`` estimated for ``view``.

    A summary not written yet counts as an empty message; revisions are counted at
    their new content.
    """
    removed = plan.removed_ids()
    revised = {r.message_id: r for r in plan.revisions}
    after = 0
    for entry in view:
        if entry.entry_id in removed:
            continue
        revision = revised.get(entry.entry_id)
        after += entry.tokens if revision is None else counter.count(entry.message.with_content(revision.content))
    if plan.summary is not None:
        after += counter.count(Message(role="user", content=[{"text": plan.summary.content or ""}]))
    return plan.model_copy(update={"tokens_before": view.tokens, "tokens_after": after})


class _Fitter:
    def __init__(self, view: View, plan: ReductionPlan, keep: frozenset[int]) -> None:
        self.view = view
        self.plan = plan
        self.keep = keep
        self.newest = newest_prompt(view)
        # What makes a group stay (see _fixed): pinned, protected by the caller, the newest prompt.
        self.fixed = view.pinned_indexes | keep | ({self.newest} if self.newest is not None else frozenset())
        self.evict = self._indexes(plan.evict)
        self.replaces = self._indexes(plan.summary.replaces) if plan.summary is not None else set()
        self.evict -= self.replaces
        self.old_head = self._first_non_system(range(len(view)))

    def _indexes(self, ids: Iterable[str]) -> set[int]:
        out: set[int] = set()
        for entry_id in ids:
            index = self.view.index_of(entry_id)
            if index is None:
                raise EntryNotFound(f"the plan names {entry_id}, which is not an active entry of the view")
            out.add(index)
        return out

    def _fixed(self, group: Iterable[int]) -> bool:
        """Whether a group must stay: pinned, protected by the caller, or the newest prompt."""
        return not self.fixed.isdisjoint(group)

    def _first_non_system(self, order: Iterable[int]) -> int | None:
        for index in order:
            entry = self.view[index]
            if not (entry.kind == "message" and entry.message.role == "system"):
                return index
        return None

    # -- the rules ---------------------------------------------------------------------------

    def fit(self) -> ReductionPlan | None:
        self._whole_groups()
        # Each pass either removes a group or keeps one again, so the loop is bounded.
        for _ in range(2 * len(self.view) + 2):
            self._check_span()
            if self._fix_empty() or self._fix_head():
                continue
            return self._result()
        raise InvalidPlan("the plan could not be brought to a valid view")  # pragma: no cover - bounded above

    def _whole_groups(self) -> None:
        # Only a group holding an entry to evict or replace can change either set (each
        # step below adds or takes members of its own group only): the rest are skipped.
        for group in self.view.groups_touching(self.evict | self.replaces):
            members = set(group)
            if members & self.replaces and (self._fixed(group) or not members <= self.replaces):
                self.replaces -= members
                if not self._fixed(group):
                    self.evict |= members & set(self.plan.evict)
            if members & self.evict:
                if self._fixed(group):
                    self.evict -= members
                else:
                    self.evict |= members - self.replaces

    def _removed(self) -> set[int]:
        return self.evict | self.replaces

    def _inside_kept(self) -> list[int]:
        if not self.replaces:
            return []
        low, high = min(self.replaces), max(self.replaces)
        removed = self._removed()
        return [i for i in range(low, high + 1) if i not in removed]

    def _check_span(self) -> None:
        for index in self._inside_kept():
            if not self.view.is_pinned(index):
                raise InvalidPlan(
                    f"the summary would separate the kept entry {self.view[index].entry_id} from the context"
                    " it summarizes: only pinned entries may stay inside a summarized span"
                )

    def _order(self) -> list[int | None]:
        """The new view as indexes of kept entries, ``None`` standing for the summary."""
        removed = self._removed()
        kept: list[int | None] = [i for i in range(len(self.view)) if i not in removed]
        if self.replaces:
            high = max(self.replaces)
            at = next((k for k, i in enumerate(kept) if i is not None and i > high), len(kept))
            kept.insert(at, None)
        return kept

    def _fix_empty(self) -> bool:
        if self._order() or not len(self.view):
            return False
        # Only evictions can empty the view (a summary stays): keep the newest group.
        last = max(self.evict)
        self.evict -= set(self.view.group_of(last))
        return True

    def _fix_head(self) -> bool:
        old = self.old_head
        if old is None:
            return False
        order = self._order()
        head = None
        for item in order:
            if item is None or not (self.view[item].kind == "message" and self.view[item].message.role == "system"):
                head = item
                break
        if head is None or not is_turn_opener_violation(self.view[head]):
            return False
        if head == old:
            return False  # the view opened with this very entry before: the reduction made nothing worse
        group = self.view.group_of(head)
        rest = [i for i in order if i is not None and i not in group and self.view[i].message.role != "system"]
        if not self._fixed(group) and (rest or None in order):
            self.evict |= set(group)  # advance the boundary to the next user prompt
            return True
        return self._retreat(head)

    def _retreat(self, head: int) -> bool:
        """Keep again the evicted entries from the last evicted user prompt before ``head``."""
        prompts = [j for j in sorted(self.evict) if j < head and is_prompt(self.view[j])]
        if not prompts:
            raise InvalidPlan(
                f"the view would open with {self.view[head].message.role} entry {self.view[head].entry_id}"
                " (pinned, protected or the last one left), and no evicted user prompt before it can be kept instead"
            )
        start = prompts[-1]
        back = {i for j in self.evict if start <= j < head for i in self.view.group_of(j)}
        self.evict -= back
        return True

    def _result(self) -> ReductionPlan | None:
        view, plan = self.view, self.plan
        removed = self._removed()
        summary = None
        if self.replaces and plan.summary is not None:
            inside = self._inside_kept()
            after = [i for i in self.replaces if not inside or i > max(inside)]
            summary = plan.summary.model_copy(
                update={
                    "replaces": tuple(view[i].entry_id for i in sorted(self.replaces)),
                    "seq": min(view[i].seq for i in after),
                }
            )
        revisions = tuple(r for r in plan.revisions if view.index_of(r.message_id) not in removed)
        fitted = plan.model_copy(
            update={
                "evict": tuple(view[i].entry_id for i in sorted(self.evict)),
                "summary": summary,
                "revisions": revisions,
            }
        )
        return None if fitted.is_empty else fitted
