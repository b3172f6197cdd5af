"""Compare a Strands agent's messages with the ledger's view and say what changed.

Strands conversation managers edit ``agent.messages`` in place. :func:`plan_sync`
turns the difference between that list and the active view, matched by id
(``tracking_id`` = ``message_id``), into one :class:`~contextledger.conversation.conversation.Edit`:

* a message the view does not hold is appended -- unless it was inserted in place of
  messages that disappeared, in which case it is the host's summary of them;
* a view entry the agent no longer holds was evicted (or replaced by that summary);
* a changed pin flag is a pin change; changed content of the same id is a content
  revision (the ledger keeps the original).

The function is pure: it reads the view and the messages and returns data.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from contextledger.conversation.conversation import Edit
from contextledger.core.changeset import ContentRevision, ReductionPlan, SummaryDraft
from contextledger.core.view import View
from contextledger.errors import InvalidMessage
from contextledger.integrations.mirror import summary_placement
from contextledger.integrations.strands.convert import is_pinned_dict, tracking_id
from contextledger.model.messages import Message
from contextledger.model.records import Trigger

__all__ = ["Placement", "placement", "plan_sync", "summary_text"]

logger = logging.getLogger(__name__)

_STR = frozenset({str})


def plan_sync(
    view: View,
    messages: Sequence[Mapping[str, Any]],
    *,
    trigger: Trigger,
    strategy: str,
    next_seq: int,
    error: str | None = None,
    summary_hint: str | None = None,
    summarizer: str = "strands",
    agent_state: dict[str, Any] | None = None,
) -> Edit | None:
    """The edit that brings ``view`` in line with the agent's ``messages``.

    Args:
        view: The active view as last committed.
        messages: The agent's messages, each with a ``tracking_id``.
        trigger: Recorded on the reduction if anything was evicted, summarized or revised.
        strategy: Recorded on that reduction (e.g. ``strands:SlidingWindowConversationManager``).
        next_seq: The conversation's next seq (places a summary that ends the view).
        error: The model error behind a reactive reduction.
        summary_hint: The ``tracking_id`` the host's manager reports as its summary.
        summarizer: Recorded on a summary row.
        agent_state: Host state to commit with the edit (``None`` keeps the stored one).

    Returns:
        The edit, or ``None`` when nothing differs and no state is given.

    Raises:
        InvalidMessage: Two messages share a ``tracking_id``, or one has none, or a new
            message is not a Strands message.
    """
    found: list[Any] = [m.get("tracking_id") for m in messages]
    # Every id a non-empty str, checked in C; else tracking_id() names the message without one.
    ids: list[str] = [tracking_id(m) for m in messages] if set(map(type, found)) - _STR or "" in found else found
    position = {message_id: i for i, message_id in enumerate(ids)}
    if len(position) != len(ids):
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        raise InvalidMessage(f"agent messages share tracking_id(s) {duplicates}; each message needs its own")

    entries = view.entries  # indexed directly: this runs over the whole window on every sync
    retained, removed, last_retained, new_positions, reordered = placement(
        [entry.entry_id for entry in entries], ids, position
    )
    if reordered:
        logger.warning(
            "strategy=<%s> | agent messages were reordered; the ledger keeps the order they were appended in",
            strategy,
        )

    summary_at = _summary_position(ids, new_positions, removed, last_retained, summary_hint)
    append_positions = [p for p in new_positions if p != summary_at]
    if any(p < last_retained for p in append_positions):
        logger.warning(
            "strategy=<%s> | a message was inserted before existing ones; the ledger appends it at the end",
            strategy,
        )
    appends = tuple(_to_message(messages[p]) for p in append_positions)

    summary: SummaryDraft | None = None
    evict = list(removed)
    if summary_at is not None:
        summary, evict = _summary_draft(
            view, messages, position, retained, removed, summary_at, next_seq, summarizer, ids[summary_at]
        )

    pins: dict[str, bool] = {}
    revisions: list[ContentRevision] = []
    kept = [entries[index] for index in retained]
    held = [messages[position[entry.entry_id]] for entry in kept]
    # Every kept entry's content at once, compared in C: a revision is rare, and this runs
    # over the whole window on every sync. Where it holds, an entry whose message carries
    # no "custom" metadata on either side (so no pin) is left at that.
    same_content = [current.get("content") for current in held] == [entry.message.content for entry in kept]
    for entry, current in zip(kept, held, strict=True):
        metadata = current.get("metadata")
        if (
            same_content
            and (metadata is None or (type(metadata) is dict and "custom" not in metadata))
            and "custom" not in entry.message.metadata
        ):
            continue
        entry_id = entry.entry_id
        # Most messages carry no metadata, so no pin: the common case without a call.
        pinned = metadata is not None and is_pinned_dict(current)
        if entry.kind != "message":
            if pinned:
                logger.debug("entry_id=<%s> | summaries cannot be pinned in the ledger, pin not stored", entry_id)
            continue
        message = entry.message
        if pinned != (bool(message.metadata) and message.pinned):
            pins[entry_id] = pinned
        content = current.get("content")
        if not isinstance(content, list):
            raise InvalidMessage(f"message {entry_id} has no content list")
        if content != message.content:
            revisions.append(
                ContentRevision(
                    message_id=entry_id,
                    content=copy.deepcopy(content),
                    reason=_revision_reason(message.content, content),
                )
            )

    plan: ReductionPlan | None = None
    if evict or revisions or summary is not None:
        plan = ReductionPlan(
            strategy=strategy,
            evict=tuple(evict),
            revisions=tuple(revisions),
            summary=summary,
            detail=f"synced from the Strands agent ({trigger})",
        )
    edit = Edit(
        appends=appends,
        pins=pins,
        pin_source="host",
        plan=plan,
        trigger=trigger,
        error=error,
        agent_state=agent_state,
        as_given=True,  # what the Strands agent already holds: the ledger mirrors it
    )
    return None if edit.is_empty else edit


class Placement(NamedTuple):
    """Where the view's entries stand among the agent's messages (see :func:`placement`)."""

    retained: Sequence[int]
    """Indexes of the view's entries the agent still holds, in view order."""
    removed: list[str]
    """Ids of the view's entries the agent no longer holds, in view order."""
    last_retained: int
    """The agent's position of the last message it still holds of the view (-1: none)."""
    new_positions: list[int]
    """The agent's positions of the messages the view does not hold, in order."""
    reordered: bool
    """Whether the agent holds the view's messages in another order than the view's."""


def placement(view_ids: list[str], ids: list[str], position: Mapping[str, int]) -> Placement:
    """Match the view's entry ids against the agent's message ids (``position``: id -> agent position).

    The usual sync -- the agent holds the view as it is, and perhaps new messages after
    it -- is told by one comparison of the two id lists, without a pass per question.
    """
    held = len(view_ids)
    if ids[:held] == view_ids:
        return Placement(range(held), [], held - 1, list(range(held, len(ids))), False)
    retained = [i for i, entry_id in enumerate(view_ids) if entry_id in position]
    removed = [entry_id for entry_id in view_ids if entry_id not in position]
    agent_order = [position[view_ids[i]] for i in retained]
    in_view = set(view_ids)
    return Placement(
        retained,
        removed,
        max(agent_order, default=-1),
        [i for i, message_id in enumerate(ids) if message_id not in in_view],
        agent_order != sorted(agent_order),
    )


def summary_text(message: Mapping[str, Any]) -> str:
    """The text a summary row stores for a Strands summary message (its text blocks)."""
    texts = [b["text"] for b in message.get("content", []) if isinstance(b, Mapping) and isinstance(b.get("text"), str)]
    return "\n".join(texts) or "(empty summary)"


def _summary_position(
    ids: Sequence[str],
    new_positions: Sequence[int],
    removed: Sequence[str],
    last_retained: int,
    hint: str | None,
) -> int | None:
    if not removed:
        return None
    if hint is not None:
        for p in new_positions:
            if ids[p] == hint:
                return p
    inserted = [p for p in new_positions if p < last_retained]
    return inserted[0] if len(inserted) == 1 else None


def _summary_draft(
    view: View,
    messages: Sequence[Mapping[str, Any]],
    position: Mapping[str, int],
    retained: Sequence[int],
    removed: Sequence[str],
    summary_at: int,
    next_seq: int,
    summarizer: str,
    summary_id: str,
) -> tuple[SummaryDraft, list[str]]:
    """The summary row for the message at ``summary_at`` and what is evicted besides it."""
    replaces, evict, seq = summary_placement(view, position, retained, removed, summary_at, next_seq)
    draft = SummaryDraft(
        content=summary_text(messages[summary_at]),
        summarizer=summarizer,
        replaces=tuple(replaces),
        summary_id=summary_id,
        seq=seq,
    )
    return draft, evict


def _to_message(message: Mapping[str, Any]) -> Message:
    return Message.from_strands(message)


def _revision_reason(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> str:
    results_before = [b for b in before if "toolResult" in b]
    results_after = [b for b in after if "toolResult" in b]
    if results_before and results_before != results_after:
        return "truncate_tool_result"
    return "rewrite"
