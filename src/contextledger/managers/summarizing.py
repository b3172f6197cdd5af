"""Replace the oldest entries with a summary row that stays queryable with what it replaced."""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.changeset import Planned, ReductionPlan, ReductionRequest, SummaryDraft
from contextledger.errors import ReductionFailed
from contextledger.managers.options import Option, SummarizingOptions
from contextledger.managers.policy import PolicyManager, ProactiveCompression, ProtectedSpec, entry_ids
from contextledger.messages import Message
from contextledger.records import ViewEntry
from contextledger.summarizers import SUMMARY_MARK, ExtractiveSummarizer, Summarizer, summarize_texts, summarizer_name
from contextledger.view import View

__all__ = ["SummarizingConversationManager"]


class SummarizingConversationManager(PolicyManager):
    """Summarize the oldest part of the view when the context overflows (or proactively).

    A reduction takes a run of about ``max(1, int(len(view) * summary_ratio))`` of the
    oldest entries -- whole tool-pair groups, starting at the oldest one that is not
    protected -- and replaces them with one
    :class:`~contextledger.changeset.SummaryDraft` naming exactly the entries replaced.
    The run never takes a pinned entry or its partner (those stay, in order, ahead of
    the summary), and stops at the first protected entry: the protected first/last
    ranges, the ``preserve_recent_messages`` most recent entries and the newest user
    prompt. The summary then stands right before the oldest entry kept after the run,
    so no kept message is separated from the context the summary holds. Earlier
    summaries inside or right after the run are replaced too: the new summary covers
    them (they are given to the summarizer) and supersedes them; both stay queryable.

    The summarizer runs once per reduction, called by the conversation outside its
    retry loop and outside any lock (:meth:`write_summary`); plans are pure. Reactive
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

    def plan(self, view: View, request: ReductionRequest) -> Planned:
        """The plan (its summary not written yet) with the summarizer that writes it."""
        planned = super().plan(view, request)
        if planned.plan is None:
            return planned
        return Planned(planned.plan, planned.state, summarize=self.write_summary)

    def make_plan(self, view: View, request: ReductionRequest) -> ReductionPlan | None:
        """Pick the run of entries to summarize; the summary text is written later."""
        size = len(view)
        protected = self.protected(view)
        protected.update(range(max(0, size - self.options.preserve_recent_messages), size))
        wanted = max(1, int(size * self.options.summary_ratio))
        groups = view.groups
        starts = [k for k, g in enumerate(groups) if not any(i in protected or view[i].pinned for i in g)]
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
            if any(view[i].pinned for i in group):
                continue
            if any(i in protected for i in group):
                break
            earlier_summary = all(view[i].kind == "summary" for i in group)
            if counted >= wanted and not earlier_summary:
                break
            run.extend(group)
            counted += 0 if earlier_summary else len(group)
        return run if counted else []

    def write_summary(self, entries: Sequence[ViewEntry]) -> str:
        """Call the summarizer on copies of ``entries`` (earlier summaries marked as such).

        Raises:
            ReductionFailed: The summarizer raised or returned no text.
        """
        name = self.summarizer_name
        try:
            content = summarize_texts(self.options.summarizer, [_for_summarizer(e) for e in entries])
        except Exception as exc:
            raise ReductionFailed(f"summarizer {name!r} failed on {len(entries)} entries: {exc}") from exc
        if not isinstance(content, str) or not content.strip():
            raise ReductionFailed(f"summarizer {name!r} returned no summary text (got {content!r})")
        return content


def _for_summarizer(entry: ViewEntry) -> Message:
    """The message handed to the summarizer; an earlier summary is marked as one."""
    if entry.kind != "summary":
        return entry.message
    return entry.message.model_copy(update={"metadata": {"custom": {"contextledger": {SUMMARY_MARK: entry.entry_id}}}})
