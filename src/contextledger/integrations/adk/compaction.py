"""ADK's event compaction recorded as a ledger reduction, its summary as a summary row.

ADK compacts a session by appending an event whose ``actions.compaction`` names a time
range and the summary of the events in it; its own rendering then shows the summary in
their place, and a later compaction whose range contains an earlier one supersedes it.
The ledger records the same thing the way it records every reduction: the active entries
in the range (whole tool pairs, and the summaries of the compactions the range contains)
are replaced by a summary row holding the compacted text, in one commit with the
compaction event itself. It is recorded as ADK made it (the host's own reduction, as a
Strands manager's is), with two exceptions the ledger never gives up: a call and its
response go together, and a pinned entry (with its pair) stays in the view.
"""

from __future__ import annotations

from collections.abc import Mapping

from google.adk.events import Event

from contextledger.core.changeset import ReductionPlan, SummaryDraft
from contextledger.core.view import View
from contextledger.integrations.adk.events import EVENT_KEY
from contextledger.integrations.adk.record import SessionRecord

__all__ = ["COMPACTION_STRATEGY", "COMPACTION_SUMMARIZER", "compaction_plan", "summary_id_of"]

COMPACTION_STRATEGY = "adk_compaction"
"""The strategy of a reduction that records an ADK compaction."""
COMPACTION_SUMMARIZER = "adk:events_compaction"
"""The summarizer named on its summary row."""


def summary_id_of(event: Event) -> str:
    """The id of the summary row recording the compaction ``event``."""
    return f"{event.id}.summary"


def compaction_plan(
    view: View, record: SessionRecord, event: Event
) -> tuple[ReductionPlan | None, dict[str, list[float]]]:
    """The reduction recording ``event``'s compaction on ``view``, and the record's compaction ranges after it.

    Returns ``(None, ranges)`` when the event compacts nothing (not a compaction, no
    summary, nothing of the view in its range, or a range the view rules keep whole).
    """
    compaction = event.actions.compaction if event.actions is not None else None
    if compaction is None or compaction.compacted_content is None:
        return None, record.compactions
    start, end = compaction.start_timestamp, compaction.end_timestamp
    covered: set[int] = set()
    for index, entry in enumerate(view):
        if entry.kind == "summary":
            earlier = record.compactions.get(entry.entry_id)
            if earlier is not None and start <= earlier[0] and earlier[1] <= end:
                covered.add(index)
            continue
        stamp = _timestamp(entry.message.metadata)
        if stamp is not None and start <= stamp <= end:
            group = view.group_of(index)  # a call and its response go together
            if not any(view.is_pinned(i) for i in group):
                covered.update(group)
    if not covered:
        return None, record.compactions
    text = "\n".join(p.text for p in compaction.compacted_content.parts or [] if p.text)
    summary_id = summary_id_of(event)
    plan = ReductionPlan(
        strategy=COMPACTION_STRATEGY,
        summary=SummaryDraft(
            content=text,
            summarizer=COMPACTION_SUMMARIZER,
            replaces=tuple(view[i].entry_id for i in sorted(covered)),
            summary_id=summary_id,
        ),
        detail=f"ADK event compaction of {start!r}..{end!r} (event {event.id})",
    )
    ranges = {k: v for k, v in record.compactions.items() if k not in set(plan.removed_ids())}
    ranges[summary_id] = [start, end]
    return plan, ranges


def _timestamp(metadata: Mapping[str, object]) -> float | None:
    """The timestamp of the event a message keeps (``None`` for a message that is no event, or a compaction)."""
    kept = metadata.get(EVENT_KEY)
    if not isinstance(kept, Mapping) or kept.get("compaction") is True:
        return None
    stamp = kept.get("timestamp")
    return float(stamp) if isinstance(stamp, int | float) and not isinstance(stamp, bool) else None
