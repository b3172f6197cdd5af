"""Replace the oldest entries with a summary row that stays queryable with what it replaced."""

from __future__ import annotations

from contextledger.changeset import ReductionPlan, SummaryDraft
from contextledger.errors import ConfigurationError, ReductionFailed
from contextledger.managers.base import ReductionRequest
from contextledger.managers.policy import (
    PolicyManager,
    ProactiveCompression,
    ProtectedSpec,
    entry_ids,
    evictable_groups,
)
from contextledger.messages import Message
from contextledger.records import ViewEntry
from contextledger.summarizers import SUMMARY_MARK, ExtractiveSummarizer, Summarizer, summarize_texts, summarizer_name
from contextledger.view import View

__all__ = ["SummarizingConversationManager"]


class SummarizingConversationManager(PolicyManager):
    """Summarize the oldest part of the view when the context overflows (or proactively).

    A reduction takes ``max(1, int(len(view) * summary_ratio))`` of the oldest entries
    that are not protected -- whole tool-pair groups, never one of the
    ``preserve_recent_messages`` most recent entries, never a pinned entry or its
    partner, never one in the protected first/last ranges -- and replaces them with one
    :class:`~contextledger.changeset.SummaryDraft` naming exactly the entries replaced.
    Protected entries stay where they are in the view. An earlier summary that is active
    and not protected is replaced too: the new summary covers it (it is given to the
    summarizer) and supersedes it, and both stay queryable.

    Reactive reductions reduce or raise :class:`~contextledger.errors.ReductionFailed`
    (also when the summarizer fails); proactive ones are best-effort. The summarizer is
    called only inside :meth:`plan`, on copies of the messages.

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
        super().__init__(proactive_compression=proactive_compression, protected_messages=protected_messages)
        self.summary_ratio = summary_ratio
        self.preserve_recent_messages = preserve_recent_messages
        self.summarizer = summarizer if summarizer is not None else ExtractiveSummarizer()

    # -- validated options (also on assignment at run time) ----------------------------------

    @property
    def summary_ratio(self) -> float:
        """Share of the view summarized per reduction, in (0, 1]."""
        return self._summary_ratio

    @summary_ratio.setter
    def summary_ratio(self, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise ConfigurationError(f"summary_ratio must be a number in (0, 1], got {value!r}")
        self._summary_ratio = float(value)

    @property
    def preserve_recent_messages(self) -> int:
        """Most recent entries never summarized (>= 0)."""
        return self._preserve_recent_messages

    @preserve_recent_messages.setter
    def preserve_recent_messages(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigurationError(f"preserve_recent_messages must be an int >= 0, got {value!r}")
        self._preserve_recent_messages = value

    @property
    def summarizer(self) -> Summarizer:
        """The callable that writes summaries, ``(list[Message]) -> str``."""
        return self._summarizer

    @summarizer.setter
    def summarizer(self, value: Summarizer) -> None:
        if not callable(value):
            raise ConfigurationError(f"summarizer must be a callable (list[Message]) -> str, got {value!r}")
        self._summarizer = value

    @property
    def summarizer_name(self) -> str:
        """The name recorded on the summaries this manager makes."""
        return summarizer_name(self.summarizer)

    def make_plan(self, view: View, request: ReductionRequest) -> ReductionPlan | None:
        """Pick the entries to summarize and call the summarizer on them.

        Raises:
            ReductionFailed: The summarizer raised or returned no text.
        """
        size = len(view)
        protected = self.protected(view)
        protected.update(range(max(0, size - self.preserve_recent_messages), size))
        wanted = max(1, int(size * self.summary_ratio))
        selected: list[int] = []
        for group in evictable_groups(view, protected):
            if len(selected) >= wanted:
                break
            if all(view[i].kind == "summary" for i in group):
                continue  # earlier summaries are folded in below, they do not count
            selected.extend(group)
        if not selected:
            return None
        earlier = [i for i, e in enumerate(view) if e.kind == "summary" and i not in protected]
        replaced = sorted(set(selected) | set(earlier))
        name = self.summarizer_name
        try:
            content = summarize_texts(self.summarizer, [_for_summarizer(view[i]) for i in replaced])
        except Exception as exc:
            raise ReductionFailed(f"summarizer {name!r} failed on {len(replaced)} entries: {exc}") from exc
        if not isinstance(content, str) or not content.strip():
            raise ReductionFailed(f"summarizer {name!r} returned no summary text (got {content!r})")
        return ReductionPlan(
            strategy=self.name,
            summary=SummaryDraft(content=content, summarizer=name, replaces=entry_ids(view, replaced)),
            detail=f"summarized {len(replaced)} of {size} entries, {len(earlier)} of them earlier summaries",
        )


def _for_summarizer(entry: ViewEntry) -> Message:
    """The message handed to the summarizer; an earlier summary is marked as one."""
    if entry.kind != "summary":
        return entry.message
    return entry.message.model_copy(update={"metadata": {"custom": {"contextledger": {SUMMARY_MARK: entry.entry_id}}}})
