"""Time travel: the exact view the model received at a past model call, time or reduction.

Nothing is deleted by a reduction, so any past view is a reconstruction from the rows
the ledger already keeps; no write happens per model call. Every changeset carries a
*call stamp* (:attr:`~contextledger.core.changeset.Changeset.from_call`): the first model
call whose input reflects it -- the call being prepared for what commits inside
``before_model_call`` (the count it announces, the reductions it triggers, a repair),
the next call for everything else. Stores keep that stamp, and the version the commit
produced, with every appended entry, reduction and pin event.

:func:`view_at` rewinds the present to the cut: starting from the active view, it undoes
the reductions after the cut newest first (their summaries leave, the entries they
evicted come back, the entries an ``undo`` restored leave again, their revisions are
reverted), drops the entries appended after the cut, and restores each pin to its state
at the cut (pin events alternate, so each tells the state before it).

Cost: one read of the active view, one of the conversation's reduction rows and pin
events (small rows, no message content), and the message rows of the entries that were
active around the cut: the active entries and those the reductions after the cut
evicted, of which the store returns only the ones appended at or before the cut (the
filter runs where the rows are read: a SQL ``WHERE`` on the entry's call or version
stamp, the Redis read script). Never the history evicted before the cut, nor the rows
appended after it: a cut at the start of a 1,000-message conversation with a window of
10 reads about 10 message rows, not 1,000. What grows with the history after the cut is
the list of ids asked for (taken from the reduction rows) -- ids, not rows. Revisions
are read only when a reduction after the cut revised something, summaries only when one
touched a summary.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from contextledger.core.view import View
from contextledger.errors import ConfigurationError, ModelCallNotFound, ReductionNotFound, SessionNotFound
from contextledger.model.messages import decode_blocks
from contextledger.model.records import (
    HistoryEntry,
    PinEvent,
    Reduction,
    Revision,
    Snapshot,
    SummaryEntry,
    ViewEntry,
    in_commit_order,
)
from contextledger.stores.base import AppendedBy
from contextledger.stores.capabilities import HISTORY, TIME_TRAVEL

__all__ = ["Cut", "TravelStore", "cut_for", "travelling", "view_at"]

logger = logging.getLogger(__name__)


class TravelStore(Protocol):
    """What :func:`view_at` reads: the ``history`` and ``time_travel`` capabilities (see :func:`travelling`)."""

    def load(self, session_id: str, agent_id: str) -> Snapshot | None: ...  # noqa: D102

    def reductions(self, session_id: str, agent_id: str | None = None) -> list[Reduction]: ...  # noqa: D102

    def entries(  # noqa: D102
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]: ...

    def summaries(self, session_id: str, agent_id: str | None = None) -> list[SummaryEntry]: ...  # noqa: D102

    def revisions(  # noqa: D102
        self, session_id: str, agent_id: str, message_id: str | None = None
    ) -> list[Revision]: ...

    def pin_history(self, session_id: str, agent_id: str | None = None) -> list[PinEvent]: ...  # noqa: D102


def travelling(store: object, feature: str) -> TravelStore:
    """``store`` as a :class:`TravelStore`: it declares the ``history`` and ``time_travel`` capabilities.

    Raises:
        CapabilityMissing: It lacks one of them; nothing was read.
    """
    HISTORY.of(store, feature)
    TIME_TRAVEL.of(store, feature)
    return cast(TravelStore, store)


@dataclass(frozen=True)
class Cut:
    """Where history is cut: what committed after it is rewound.

    Attributes:
        label: How the cut is named in messages (``model call 3``, ``reduction ab12``...).
        after_entry: Whether an appended entry came after the cut.
        after_reduction: Whether a reduction came after the cut.
        after_pin: Whether a pin event came after the cut.
        appended_by: The same cut for entries, as a store filters them when it reads.
    """

    label: str
    after_entry: Callable[[HistoryEntry], bool]
    after_reduction: Callable[[Reduction], bool]
    after_pin: Callable[[PinEvent], bool]
    appended_by: AppendedBy | None = None


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def cut_for(
    snapshot: Snapshot,
    reductions: Sequence[Reduction],
    *,
    model_call: int | None = None,
    at: datetime | None = None,
    reduction: str | None = None,
) -> Cut:
    """The cut one of ``model_call``, ``at`` or ``reduction`` names.

    Raises:
        ConfigurationError: Not exactly one of them is given, or one has the wrong type.
        ModelCallNotFound: ``model_call`` is not between 1 and the conversation's count.
        ReductionNotFound: No reduction of the conversation has the id ``reduction``.
    """
    given = [
        name for name, value in (("model_call", model_call), ("at", at), ("reduction", reduction)) if value is not None
    ]
    if len(given) != 1:
        raise ConfigurationError(f"give exactly one of model_call, at or reduction (got {', '.join(given) or 'none'})")
    if model_call is not None:
        if isinstance(model_call, bool) or not isinstance(model_call, int):
            raise ConfigurationError(f"model_call must be an int, got {type(model_call).__name__}")
        count = snapshot.state.model_call_count
        if not 1 <= model_call <= count:
            raise ModelCallNotFound(
                f"session_id={snapshot.state.session_id} agent_id={snapshot.state.agent_id}: no model call"
                f" {model_call} (calls made: {count}; they count from 1)"
            )
        n = model_call
        return Cut(
            f"model call {n}",
            lambda e: e.from_call > n,
            lambda r: r.from_call > n,
            lambda p: p.from_call > n,
            AppendedBy(from_call=n),
        )
    if at is not None:
        if not isinstance(at, datetime):
            raise ConfigurationError(f"at must be a datetime, got {type(at).__name__}")
        t = _utc(at)
        return Cut(
            f"{t.isoformat()}",
            lambda e: e.created_at > t,
            lambda r: r.created_at > t,
            lambda p: p.at > t,
            AppendedBy(created_at=t),
        )
    assert reduction is not None
    found = next((r for r in reductions if r.reduction_id == reduction), None)
    if found is None:
        raise ReductionNotFound(
            f"session_id={snapshot.state.session_id} agent_id={snapshot.state.agent_id}: no reduction {reduction!r}"
        )
    if found.version > 0:
        v = found.version
        return Cut(
            f"reduction {reduction}",
            lambda e: e.version > v,
            lambda r: r.version > v,
            lambda p: p.version > v,
            AppendedBy(version=v),
        )
    # A reduction written before 0.2 has no version stamp: its time is the best cut.
    t = found.created_at
    position = reductions.index(found)
    later = {r.reduction_id for r in reductions[position + 1 :]}
    return Cut(
        f"reduction {reduction}",
        lambda e: e.created_at > t,
        lambda r: r.reduction_id in later,
        lambda p: p.at > t,
        AppendedBy(created_at=t),
    )


def view_at(
    store: TravelStore,
    session_id: str,
    agent_id: str = "default",
    *,
    model_call: int | None = None,
    at: datetime | None = None,
    reduction: str | None = None,
) -> View:
    """The view as it stood at a past point: exactly what the model received at a call.

    Give exactly one of:

    * ``model_call=N`` -- the input of model call ``N`` (1 is the first call): pins,
      summaries and truncated tool results as they were then, after the reductions that
      ``before_model_call`` committed for it.
    * ``at=datetime`` -- the view as committed at that moment (a naive datetime is UTC).
    * ``reduction=id`` -- the view that reduction left.

    Reads only (see the module docstring for the cost): the active view, the
    conversation's reduction rows and pin events, the message rows of the entries that
    were active around the cut (the active ones and those evicted after the cut, filtered
    by the store to the ones appended at or before it -- so an early call of a long
    conversation reads about a window of rows, not the history since), and revisions or
    summaries only when a reduction after the cut touched them. Token counts of entries whose revision was rewound are
    their current estimate.

    Raises:
        SessionNotFound: The conversation does not exist.
        ConfigurationError: Not exactly one of ``model_call``, ``at``, ``reduction``.
        ModelCallNotFound: No model call ``model_call`` was made.
        ReductionNotFound: No reduction of the conversation has the id ``reduction``.
    """
    snapshot = store.load(session_id, agent_id)
    if snapshot is None:
        raise SessionNotFound(f"no conversation {session_id!r} / {agent_id!r}")
    reductions = in_commit_order(store.reductions(session_id, agent_id))
    cut = cut_for(snapshot, reductions, model_call=model_call, at=at, reduction=reduction)
    later = [r for r in reductions if cut.after_reduction(r)]
    active = {e.entry_id: True for e in snapshot.entries}  # a dict: insertion-ordered
    for red in reversed(later):
        if red.summary_id is not None:
            active.pop(red.summary_id, None)
        for entry_id in red.restored:
            active.pop(entry_id, None)
        for entry_id in red.evicted:
            active[entry_id] = True
    rows = store.entries(session_id, agent_id, list(active), appended_by=cut.appended_by)
    messages = {e.message.message_id: e for e in rows}
    shown = {e.entry_id: e for e in snapshot.entries if e.kind == "summary"}
    summaries: dict[str, ViewEntry] = dict(shown)
    if any(i not in messages and i not in shown for i in active):
        summaries = {s.summary_id: _summary_entry(s) for s in store.summaries(session_id, agent_id)}
    originals = _originals(store, session_id, agent_id, later)
    events = store.pin_history(session_id, agent_id)
    if all(e.version > 0 for e in events):
        events = sorted(events, key=lambda e: e.version)  # stable: a commit's events keep their order
    pins = _pins_at_cut(events, cut)
    entries: list[ViewEntry] = []
    for entry_id in active:
        row = messages.get(entry_id)
        if row is not None:
            if cut.after_entry(row):
                continue
            message = row.message
            if entry_id in originals:
                message = message.with_content(decode_blocks(originals[entry_id]))
            if entry_id in pins and pins[entry_id] != message.pinned:
                message = message.with_pin(pins[entry_id])
            entries.append(ViewEntry(entry_id=entry_id, seq=row.seq, message=message, tokens=row.tokens))
            continue
        summary = summaries.get(entry_id)
        if summary is None:
            # Appended after the cut (the store did not return it), or pruned since.
            logger.debug(
                "session_id=<%s>, agent_id=<%s>, entry_id=<%s> | not in the view at the cut",
                session_id,
                agent_id,
                entry_id,
            )
            continue
        entries.append(summary)
    entries.sort(key=lambda e: (e.seq, e.kind != "summary"))
    logger.debug(
        "session_id=<%s>, agent_id=<%s>, cut=<%s>, rewound=<%d>, entries=<%d> | view_at",
        session_id,
        agent_id,
        cut.label,
        len(later),
        len(entries),
    )
    return View(entries)


def _summary_entry(summary: SummaryEntry) -> ViewEntry:
    """A summary row as the view shows it."""
    return ViewEntry(
        entry_id=summary.summary_id,
        kind="summary",
        seq=summary.seq,
        message=summary.to_message(),
        tokens=summary.tokens,
    )


def _originals(
    store: TravelStore, session_id: str, agent_id: str, later: Sequence[Reduction]
) -> dict[str, list[dict[str, Any]]]:
    """Message id -> content at the cut, for the messages revised after it."""
    revising = {r.reduction_id for r in later if r.revised}
    if not revising:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    # Oldest first: the first revision after the cut holds the content the cut saw.
    for rev in sorted(store.revisions(session_id, agent_id), key=lambda r: (r.message_id, r.number)):
        if rev.reduction_id in revising and rev.message_id not in out:
            out[rev.message_id] = rev.original
    return out


def _pins_at_cut(events: Sequence[PinEvent], cut: Cut) -> dict[str, bool]:
    """Entry id -> pinned at the cut, for the entries whose pin changed after it."""
    before: dict[str, bool] = {}
    out: dict[str, bool] = {}
    for event in events:
        if cut.after_pin(event):
            if event.entry_id not in out:
                # Pin events alternate (a pin that changes nothing is not recorded), so the
                # state before the first event after the cut is the opposite of it.
                out[event.entry_id] = before.get(event.entry_id, not event.pinned)
        else:
            before[event.entry_id] = event.pinned
    return out
