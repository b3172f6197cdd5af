"""Replace the oldest entries with a summary row that stays queryable with what it replaced."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import cast

from pydantic import Field

from contextledger.core.changeset import Planned, ReductionPlan, ReductionRequest, SummaryDraft
from contextledger.core.view import View
from contextledger.errors import ReductionFailed
from contextledger.managers.coverage import LedgerFacts, SummaryRecord, ledger_facts, stamped
from contextledger.managers.options import Option, SummarizingOptions
from contextledger.managers.policy import PolicyManager, PolicyState, ProactiveCompression, ProtectedSpec, entry_ids
from contextledger.managers.summarizers import ExtractiveSummarizer, Summarizer, summarize_texts, summarizer_name
from contextledger.model.records import ViewEntry, new_id

__all__ = ["SummarizingConversationManager", "SummarizingState"]

RETIRED_RECORDS = 2
"""Records of superseded summaries kept besides the active ones (an undo may bring them back)."""


class SummarizingState(PolicyState):
    """The summarizing manager's state: the counters, and a record of each summary it wrote.

    Attributes:
        records: Summary id -> what it covers and where it stands in the ledger (see
            :class:`~contextledger.managers.coverage.SummaryRecord`), for the summaries in
            the view and the last few they superseded; oldest first.
    """

    records: dict[str, SummaryRecord] = Field(default_factory=dict)


class SummarizingConversationManager(PolicyManager):
    """Summarize the oldest part of the view when the context overflows (or proactively).

    A reduction takes a run of about ``max(1, int(len(view) * summary_ratio))`` of the
    oldest entries -- whole tool-pair groups, starting at the oldest one that is not
    protected -- and replaces them with one
    :class:`~contextledger.core.changeset.SummaryDraft` naming exactly the entries replaced.
    The run never takes a pinned entry or its partner (those stay, in order, ahead of
    the summary), and stops at the first protected entry: the protected first/last
    ranges, the ``preserve_recent_messages`` most recent entries and the newest user
    prompt. The summary then stands right before the oldest entry kept after the run,
    so no kept message is separated from the context the summary holds. Earlier
    summaries inside or right after the run are replaced too: the new summary covers
    them (they are given to the summarizer) and supersedes them; both stay queryable.

    The summarizer gets copies of the replaced entries, each message stamped with its
    turn and each earlier summary with what it covered (see
    :mod:`contextledger.managers.coverage`), so a summary can state exactly what it
    covers, earlier summaries included. To count without reading the store, the
    manager commits a record of each summary it writes with the summary, in its state
    (:class:`SummarizingState`), and walks the view past it the next time.

    The summarizer runs once per reduction, called by the conversation outside its
    retry loop and outside any lock (:meth:`write_summary`); plans do no I/O. Reactive
    reductions reduce or raise :class:`~contextledger.errors.ReductionFailed` (also when
    the summarizer fails); proactive ones are best-effort.

    Args:
        summary_ratio: Share of the view summarized per reduction, in (0, 1].
        preserve_recent_messages: Most recent entries never summarized (>= 0).
        summarizer: ``(list[Message]) -> str``; default :class:`ExtractiveSummarizer`.
        proactive_compression: ``True``, ``{"compression_threshold": x}`` or ``None``.
        protected_messages: ``{"first": N, "last": M}`` entries never summarized.

    Options can be changed at run time (``manager.summary_ratio = 0.5``); an invalid
    value raises and leaves the option as it was.

    Raises:
        ConfigurationError: An option is invalid.
    """

    name: str = "summarizing"
    options_model = SummarizingOptions
    options: SummarizingOptions
    state_model = SummarizingState

    summary_ratio = Option[float, float]()
    preserve_recent_messages = Option[int, int]()
    summarizer = Option[Summarizer, Summarizer]()

    def __init__(
        self,
        summary_ratio: float = 0.3,
        preserve_recent_messages: int = 10,
        summarizer: Summarizer | None = None,
        *,
        proactive_compression: ProactiveCompression = None,
        protected_messages: ProtectedSpec = None,
    ) -> None:
        """Validate and keep the options; see the class docstring."""
        super().__init__(
            summary_ratio=summary_ratio,
            preserve_recent_messages=preserve_recent_messages,
            summarizer=summarizer if summarizer is not None else ExtractiveSummarizer(),
            proactive_compression=proactive_compression,
            protected_messages=protected_messages,
        )

    @property
    def summarizer_name(self) -> str:
        """The name recorded on the summaries this manager makes."""
        return summarizer_name(self.options.summarizer)

    @property
    def state(self) -> SummarizingState:
        """The committed typed state (frozen)."""
        return cast(SummarizingState, self._state)  # state_model makes every state one

    def plan(self, view: View, request: ReductionRequest) -> Planned:
        """The plan (its summary not written yet) with the summarizer that writes it.

        The summary gets its id here, and the next state a record of what it covers
        (committed with it), so the summary that later replaces it can say what both cover.
        """
        planned = super().plan(view, request)
        plan, state = planned.plan, planned.state
        if plan is None or plan.summary is None or not isinstance(state, SummarizingState):
            return planned
        records = self.state.records
        facts = ledger_facts(view, records)
        summary_id = new_id()
        record = facts.record_for(view, plan.summary.replaces, plan.removed_ids())
        plan = plan.model_copy(update={"summary": plan.summary.model_copy(update={"summary_id": summary_id})})
        state = state.model_copy(update={"records": _kept_records(records, view, plan, summary_id, record)})
        return Planned(plan, state, summarize=functools.partial(self.write_summary, facts=facts))

    def make_plan(self, view: View, request: ReductionRequest) -> ReductionPlan | None:
        """Pick the run of entries to summarize; the summary text is written later."""
        size = len(view)
        protected = self.protected(view)
        protected.update(range(max(0, size - self.options.preserve_recent_messages), size))
        wanted = max(1, int(size * self.options.summary_ratio))
        groups = view.groups
        kept = view.pinned_indexes.union(protected)
        starts = [k for k, g in enumerate(groups) if kept.isdisjoint(g)]
        for start in starts:
            run = self._run(view, groups[start:], protected, wanted)
            if not run:
                continue
            draft = SummaryDraft(summarizer=self.summarizer_name, replaces=entry_ids(view, run))
            plan = self.fit(view, ReductionPlan(strategy=self.name, summary=draft), protected)
            if plan is not None and plan.summary is not None:
                earlier = sum(view[i].kind == "summary" for i in run)
                detail = f"summarized {len(run)} of {size} entries, {earlier} of them earlier summaries"
                return plan.model_copy(update={"detail": detail})
        return None

    def blocked(self, view: View, request: ReductionRequest) -> str | None:
        """Why nothing could be summarized although a reduction was requested."""
        return f"{len(view)} entries but nothing can be summarized: every entry is pinned, protected or recent"

    @staticmethod
    def _run(view: View, groups: Sequence[list[int]], protected: set[int], wanted: int) -> list[int]:
        """Consecutive groups from the first of ``groups``: pinned ones stay, a protected one ends the run."""
        run: list[int] = []
        counted = 0
        for group in groups:
            if not view.pinned_indexes.isdisjoint(group):
                continue
            if any(i in protected for i in group):
                break
            earlier_summary = all(view[i].kind == "summary" for i in group)
            if counted >= wanted and not earlier_summary:
                break
            run.extend(group)
            counted += 0 if earlier_summary else len(group)
        return run if counted else []

    def write_summary(self, entries: Sequence[ViewEntry], facts: LedgerFacts | None = None) -> str:
        """Call the summarizer on copies of ``entries``.

        An earlier summary is marked as such (and carries its coverage when ``facts``
        has a record of it); each message carries its stamp from ``facts`` (see
        :mod:`contextledger.managers.coverage`). Without ``facts`` only the marks.

        Raises:
            ReductionFailed: The summarizer raised or returned no text.
        """
        name = self.summarizer_name
        try:
            content = summarize_texts(self.options.summarizer, [stamped(e, facts) for e in entries])
        except Exception as exc:
            raise ReductionFailed(f"summarizer {name!r} failed on {len(entries)} entries: {exc}") from exc
        if not isinstance(content, str) or not content.strip():
            raise ReductionFailed(f"summarizer {name!r} returned no summary text (got {content!r})")
        return content


def _kept_records(
    records: Mapping[str, SummaryRecord], view: View, plan: ReductionPlan, summary_id: str, record: SummaryRecord
) -> dict[str, SummaryRecord]:
    """The records to commit with ``plan``: the summaries in the view after it, and the last few to leave it.

    Oldest to leave first, so the ones this plan supersedes are the last dropped: an undo
    of the newest reduction brings them back, and the walk needs their records then.
    """
    shown = [e.entry_id for e in view if e.kind == "summary" and e.entry_id in records]
    gone = plan.removed_ids()
    order = [r for r in records if r not in shown]
    order += [r for r in shown if r in gone] + [r for r in shown if r not in gone]
    retired = {r for r in order if r not in shown or r in gone}
    leaving = [r for r in order if r in retired]
    keep = set(leaving[-RETIRED_RECORDS:]) if RETIRED_RECORDS else set()
    kept = {r: records[r] for r in order if r not in retired or r in keep}
    kept[summary_id] = record
    return kept
