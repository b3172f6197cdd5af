"""One reduction as pure steps: plan it, hold it to the view rules, give it its summary.

The :class:`~contextledger.Conversation` runs these inside its transaction. The one
outside call, the summarizer, is not made here: when a plan needs a summary that is not
written yet, :func:`reduction_edit` raises :class:`SummaryNeeded` so the conversation
can leave its lock and its retry loop, write the summary once (:func:`write_summary`)
and plan again -- reusing the text when the summarized entries did not change.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from contextledger.core.changeset import Edit, Planned, ReductionRequest, Summarize
from contextledger.core.view import View
from contextledger.core.viewrules import estimate_tokens, fit_plan
from contextledger.errors import ReductionFailed
from contextledger.managers.base import ConversationManager, as_planned
from contextledger.model.records import Reduction, ViewEntry
from contextledger.model.tokens import TokenCounter

__all__ = [
    "MAX_SUMMARIES",
    "SummaryNeeded",
    "Written",
    "log_committed",
    "log_skipped",
    "plan_reduction",
    "reduction_edit",
    "write_summary",
]

# The conversation writes these lines; applications filter on its logger's name.
logger = logging.getLogger("contextledger.conversation.conversation")

MAX_SUMMARIES = 3
"""Summarizer calls per reduction at most (the first, plus re-plans whose entries changed)."""

Written = list[tuple[tuple[ViewEntry, ...], str]]
"""Summaries written during one reduction: the entries each covers, and its text."""

_UNDONE = "the plan would break the view rules (pins, tool pairs, newest prompt) and nothing else was left"


class SummaryNeeded(Exception):
    """The plan needs a summary of ``entries`` that ``summarize`` has not written yet."""

    def __init__(self, entries: tuple[ViewEntry, ...], summarize: Summarize) -> None:
        """Carry what the summarizer needs out of the transaction."""
        super().__init__(f"a summary of {len(entries)} entries is needed")
        self.entries, self.summarize = entries, summarize


def plan_reduction(
    manager: ConversationManager, view: View, request: ReductionRequest, counter: TokenCounter
) -> Planned:
    """The manager's plan for ``view``, held to the view rules, with its token estimates.

    Raises:
        InvalidPlan: The plan breaks the view rules beyond correction.
        EntryNotFound: The plan names an entry that is not in the view.
    """
    planned = as_planned(manager.plan(view, request))
    plan = fit_plan(view, planned.plan)
    if planned.plan is not None and not planned.plan.is_empty and plan is None:
        return Planned(None, None, note=planned.note or _UNDONE)
    if plan is not None:
        plan = estimate_tokens(view, plan, counter)
    return dataclasses.replace(planned, plan=plan)


def reduction_edit(
    view: View, planned: Planned, request: ReductionRequest, written: Written, counter: TokenCounter
) -> tuple[Edit | None, dict[str, Any] | None]:
    """The edit committing ``planned`` and the manager state that goes with it.

    Raises:
        SummaryNeeded: The summary is not written yet for these entries.
        ReductionFailed: The plan needs a summary and the manager gave no summarizer.
    """
    plan = planned.plan
    if plan is None:
        return None, None
    if plan.summary is not None and plan.summary.content is None:
        entries = tuple(view[i] for i in (view.index_of(r) for r in plan.summary.replaces) if i is not None)
        text = next((t for covered, t in written if covered == entries), None)
        if text is None:
            if planned.summarize is None:
                raise ReductionFailed(f"the {plan.strategy} plan needs a summary but its manager gave no summarizer")
            raise SummaryNeeded(entries, planned.summarize)
        summary = plan.summary.model_copy(update={"content": text})
        plan = estimate_tokens(view, plan.model_copy(update={"summary": summary}), counter)
    state = planned.state
    manager_state = state.model_dump(mode="json") if isinstance(state, BaseModel) else _as_dict(state)
    return Edit(plan=plan, trigger=request.trigger, error=request.error), manager_state


def write_summary(need: SummaryNeeded) -> str:
    """Run the summarizer once.

    Raises:
        ReductionFailed: The summarizer raised.
    """
    try:
        return need.summarize(need.entries)
    except ReductionFailed:
        raise
    except Exception as exc:
        raise ReductionFailed(f"the summarizer failed on {len(need.entries)} entries: {exc}") from exc


def log_committed(session_id: str, agent_id: str, reduction: Reduction) -> None:
    """Log a committed reduction (one structured line)."""
    logger.info(
        "session_id=<%s>, agent_id=<%s>, trigger=<%s>, strategy=<%s>, evicted=<%d>, revised=<%d> | committed reduction",
        session_id,
        agent_id,
        reduction.trigger,
        reduction.strategy,
        len(reduction.evicted),
        len(reduction.revised),
    )


def log_skipped(session_id: str, agent_id: str, manager: str | None, trigger: str, reason: str, exc_info: bool) -> None:
    """Warn that a best-effort reduction came to nothing and the turn goes on."""
    logger.warning(
        "session_id=<%s>, agent_id=<%s>, manager=<%s>, trigger=<%s>, reason=<%s>"
        " | best-effort reduction skipped, the turn goes on",
        session_id,
        agent_id,
        manager,
        trigger,
        reason,
        exc_info=exc_info,
    )


def _as_dict(state: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if state is None else dict(state)
