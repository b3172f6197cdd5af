"""Mirror a host's own list of messages into the ledger: what changed, as one edit.

A host that keeps its own copy of the conversation (a LangChain agent's state, a
Pydantic AI run's history) hands the ledger that list at each model call.
:func:`plan_mirror` compares it with the active view, matched by message id, and says
what changed as one :class:`~contextledger.core.changeset.Edit`:

* a message the view does not hold is appended -- unless it was inserted in place of
  entries that disappeared, in which case it is the host's summary of them (a summary
  row that names exactly what it replaced);
* a view entry the host no longer holds was evicted by the host -- with the other half
  of its tool pair, should the host keep that (a tool call and its result go together:
  the view handed back never holds half a pair);
* changed content under the same id is a content revision (the ledger keeps the original).

The edit is recorded ``as_given``: the host already made these changes to its own copy,
so the ledger mirrors them rather than holding them to the view rules. Pins are the
ledger's own (no host here has them) and are left as they are.

The function is pure: it reads the view and the messages and returns data. Hosts whose
messages carry no id (Pydantic AI) first match them to view entries with
:func:`match_ids`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from contextledger.core.changeset import ContentRevision, Edit, ReductionPlan, SummaryDraft
from contextledger.core.view import View
from contextledger.errors import InvalidMessage
from contextledger.model.messages import Message, new_message_id
from contextledger.model.records import Trigger

__all__ = ["match_ids", "plan_mirror", "summary_placement"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def plan_mirror(
    view: View,
    messages: Sequence[Message],
    *,
    trigger: Trigger,
    strategy: str,
    next_seq: int,
    summarizer: str,
    summary_hint: Callable[[Message], bool] | None = None,
    detect_summaries: bool = True,
) -> Edit | None:
    """The edit that brings ``view`` in line with the host's ``messages``.

    Args:
        view: The active view as last committed.
        messages: The host's messages in its order, each with the id the ledger knows it by.
        trigger: Recorded on the reduction when anything was evicted, summarized or revised.
        strategy: Recorded on that reduction (e.g. ``langchain:host``).
        next_seq: The conversation's next seq (places a summary that ends the view).
        summarizer: Recorded on a summary row the host made.
        summary_hint: Tells a host's summary message apart from a new message; without it
            a message is taken for a summary only when it is the one message inserted
            before a kept entry in place of removed ones.
        detect_summaries: ``False`` takes no message for a summary (a host whose ids are
            matched by :func:`match_ids` has an edited message keep its id instead).

    Returns:
        The edit, or ``None`` when the host's list equals the view.

    Raises:
        InvalidMessage: Two messages share an id.
    """
    ids = [m.message_id for m in messages]
    position = {message_id: i for i, message_id in enumerate(ids)}
    if len(position) != len(ids):
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        raise InvalidMessage(f"the host's messages share id(s) {duplicates}; each message needs its own")

    entries = view.entries
    gone = _whole_groups(view, [i for i, entry in enumerate(entries) if entry.entry_id not in position])
    if len(gone) > sum(1 for entry in entries if entry.entry_id not in position):
        logger.debug("strategy=<%s> | the host removed half of a tool pair: the other half leaves with it", strategy)
    retained = [i for i in range(len(entries)) if i not in gone]
    removed = [entries[i].entry_id for i in sorted(gone)]
    host_order = [position[entries[i].entry_id] for i in retained]
    if host_order != sorted(host_order):
        logger.warning("strategy=<%s> | the host reordered messages; the ledger keeps the order they came in", strategy)
    last_retained = max(host_order, default=-1)
    in_view = {entry.entry_id for entry in entries}
    new_positions = [i for i, message_id in enumerate(ids) if message_id not in in_view]

    summary_at = (
        _summary_position(messages, new_positions, removed, last_retained, summary_hint) if detect_summaries else None
    )
    append_positions = [p for p in new_positions if p != summary_at]
    if any(p < last_retained for p in append_positions):
        logger.warning("strategy=<%s> | the host inserted a message before others; the ledger appends it", strategy)
    appends = tuple(messages[p] for p in append_positions)

    summary: SummaryDraft | None = None
    evict = list(removed)
    if summary_at is not None:
        summary, evict = _summary_draft(view, position, retained, removed, summary_at, next_seq, summarizer, messages)

    revisions: list[ContentRevision] = []
    for index in retained:
        entry = entries[index]
        if entry.kind != "message":
            continue  # a summary the host still holds as the ledger rendered it
        current = messages[position[entry.entry_id]]
        if current.content != entry.message.content:
            reason = "truncate_tool_result" if entry.message.tool_result_ids else "rewrite"
            revisions.append(ContentRevision(message_id=entry.entry_id, content=list(current.content), reason=reason))

    plan: ReductionPlan | None = None
    if evict or revisions or summary is not None:
        plan = ReductionPlan(
            strategy=strategy,
            evict=tuple(evict),
            revisions=tuple(revisions),
            summary=summary,
            detail=f"mirrored from the host's messages ({trigger})",
        )
    edit = Edit(appends=appends, plan=plan, trigger=trigger, as_given=True)
    return None if edit.is_empty else edit


def match_ids(
    messages: Sequence[T],
    known: Sequence[tuple[T, str]],
    *,
    same: Callable[[T, T], bool],
) -> list[str]:
    """Ledger ids for host messages that carry none, matched to the messages the ledger knows.

    ``known`` lists the host form of the view's entries with their entry ids, in view
    order. Matching moves forward only, so two equal messages at different places keep
    their own ids: each of ``messages`` takes the id of the first known message after
    the last match that is the same object, else equal by ``same``. Then a run of
    unmatched messages between two matches (or a match and an end) that stands in place
    of as many unmatched known ones takes their ids in order: those are entries the host
    edited. Any other message is new and gets a fresh id.
    """
    found: list[int | None] = []
    start = 0
    for message in messages:
        hit = next((k for k in range(start, len(known)) if known[k][0] is message), None)
        if hit is None:
            hit = next((k for k in range(start, len(known)) if same(known[k][0], message)), None)
        found.append(hit)
        if hit is not None:
            start = hit + 1
    _pair_edits(found, len(known))
    return [known[k][1] if k is not None else new_message_id() for k in found]


def _pair_edits(found: list[int | None], known: int) -> None:
    """Give each run of unmatched messages the known indexes it stands in place of, when the counts agree."""
    position = 0
    while position < len(found):
        if found[position] is not None:
            position += 1
            continue
        end = position
        while end < len(found) and found[end] is None:
            end += 1
        low = found[position - 1] if position > 0 else -1
        high = found[end] if end < len(found) else known
        assert low is not None  # the run is bounded by matches or the ends
        assert high is not None
        if end < len(found) and high - low - 1 == end - position:
            found[position:end] = list(range(low + 1, high))
        position = end


def _whole_groups(view: View, removed: Sequence[int]) -> set[int]:
    """The indexes of ``removed`` and of every entry tool-linked to one of them."""
    out = set(removed)
    for index in removed:
        out.update(view.group_of(index))
    return out


def _summary_position(
    messages: Sequence[Message],
    new_positions: Sequence[int],
    removed: Sequence[str],
    last_retained: int,
    hint: Callable[[Message], bool] | None,
) -> int | None:
    if not removed:
        return None
    if hint is not None:
        hinted = [p for p in new_positions if hint(messages[p])]
        if hinted:
            return hinted[0]
    inserted = [p for p in new_positions if p < last_retained]
    return inserted[0] if len(inserted) == 1 else None


def summary_placement(
    view: View,
    position: Mapping[str, int],
    retained: Sequence[int],
    removed: Sequence[str],
    summary_at: int,
    next_seq: int,
) -> tuple[list[str], list[str], int]:
    """Where a host's summary message goes: what it replaces, what is evicted besides, its seq.

    ``retained`` are the view indexes the host kept, ``position`` their places in the host's
    new list, ``summary_at`` the summary's place there. The summary replaces the removed
    entries before the first entry kept after it; hosts keep pinned messages of the
    summarized range ahead of the summary, so it is placed after the last entry kept before
    it and before the first kept after.
    """
    before = [i for i in retained if position[view[i].entry_id] < summary_at]
    after = [i for i in retained if position[view[i].entry_id] > summary_at]
    bound = min(after) if after else len(view)
    replaces = [r for r in removed if (view.index_of(r) or 0) < bound]
    evict = [r for r in removed if r not in set(replaces)]
    if not replaces:  # the summary sits before everything that went: it still replaced them
        replaces, evict = list(removed), []
    low = view[max(before)].seq if before else -1
    high = view[min(after)].seq if after else None
    inside = [
        view[i].seq
        for i in (view.index_of(r) for r in replaces)
        if i is not None and view[i].seq > low and (high is None or view[i].seq < high)
    ]
    seq = min(inside) if inside else high if high is not None else max(next_seq, low + 1)
    return replaces, evict, seq


def _summary_draft(
    view: View,
    position: dict[str, int],
    retained: Sequence[int],
    removed: Sequence[str],
    summary_at: int,
    next_seq: int,
    summarizer: str,
    messages: Sequence[Message],
) -> tuple[SummaryDraft, list[str]]:
    """The summary row for the message at ``summary_at`` and what is evicted besides it."""
    replaces, evict, seq = summary_placement(view, position, retained, removed, summary_at, next_seq)
    message = messages[summary_at]
    draft = SummaryDraft(
        content=message.plain_text or "(empty summary)",
        summarizer=summarizer,
        replaces=tuple(replaces),
        summary_id=message.message_id,
        seq=seq,
    )
    return draft, evict
