"""How an edit becomes a changeset: :func:`build_changeset` and the pure helpers around it.

:func:`build_changeset` turns an :class:`~contextledger.core.changeset.Edit` made against
a view into the one :class:`~contextledger.core.changeset.Changeset` a store commits
atomically and the view that commit leaves; :func:`projected` is the view alone,
:func:`ride_with` merges a host's pending write into an edit, :func:`pin_edit` is the
edit of a pin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextledger.core.changeset import Changeset, ContentRevision, Edit, ReductionPlan
from contextledger.core.view import View
from contextledger.errors import EntryNotFound, InvalidMessage, PinError
from contextledger.model.ids import random_uuid_hex
from contextledger.model.jsonvalues import storable_text
from contextledger.model.messages import Message
from contextledger.model.records import ConversationState, Reduction, SummaryEntry, ViewEntry, new_id
from contextledger.model.tokens import CharTokenCounter, TokenCounter
from contextledger.model.trusted import maker, trusted

__all__ = ["build_changeset", "describe_error", "pin_edit", "projected", "ride_with"]

# The records every append builds, from dicts naming every field (see trusted.maker).
_view_entry = maker(ViewEntry)
_changeset = maker(Changeset)


def projected(state: ConversationState, view: View, edit: Edit | None, counter: TokenCounter) -> View:
    """The view ``edit`` would leave, computed without committing anything (pure)."""
    if edit is None or edit.is_empty:
        return view
    _, entries = build_changeset(
        state,
        view,
        edit,
        counter=counter,
        model_call_count=state.model_call_count,
        count_changed=False,
        manager_state=None,
    )
    return entries


def ride_with(ride: Edit, edit: Edit | None) -> Edit | None:
    """``ride`` (a host's pending write) and ``edit`` (planned on the view ``ride`` leaves) as one edit.

    Returns ``None`` when they cannot share a changeset: both carry a reduction (one
    reduction row per changeset), or ``edit``'s plan evicts, revises or summarizes what
    ``ride`` appends (the store applies a plan to the entries it already holds).
    """
    if edit is None or edit.is_empty:
        return ride
    appended = {m.message_id for m in ride.appends}
    plan = edit.plan if edit.plan is not None and not edit.plan.is_empty else None
    if plan is not None and (plan.removed_ids() | {r.message_id for r in plan.revisions}) & appended:
        return None
    if (plan is not None or edit.strategy) and ((ride.plan is not None and not ride.plan.is_empty) or ride.strategy):
        return None
    reducing = edit if plan is not None or edit.strategy else ride
    return Edit(
        appends=(*ride.appends, *edit.appends),
        pins={**ride.pins, **edit.pins},
        pin_source=edit.pin_source if edit.pins else ride.pin_source,
        plan=reducing.plan,
        trigger=reducing.trigger,
        error=reducing.error,
        strategy=reducing.strategy,
        agent_state=edit.agent_state if edit.agent_state is not None else ride.agent_state,
        as_given=True,  # each part was held to the rules (or given) on its own
    )


def describe_error(error: BaseException | None) -> str | None:
    """The text a reduction row records for the model error that caused it."""
    return None if error is None else f"{type(error).__name__}: {error}"


def pin_edit(view: View, entry_id: str, pinned: bool, source: str) -> Edit | None:
    """The edit pinning (or unpinning) ``entry_id`` of ``view``, as asked by ``source``.

    ``None`` when the entry already is: a pin that changes nothing commits nothing and
    records no pin event.

    Raises:
        PinError: ``entry_id`` is not an active message of ``view`` (summaries cannot be pinned).
    """
    index = view.index_of(entry_id)
    if index is None or view[index].kind != "message":
        raise PinError(f"{entry_id} is not an active message of this conversation")
    if view[index].message.pinned == pinned:
        return None
    return Edit(pins={entry_id: pinned}, pin_source=source)


def build_changeset(
    state: ConversationState,
    view: View,
    edit: Edit,
    *,
    counter: TokenCounter,
    model_call_count: int,
    count_changed: bool,
    manager_state: dict[str, Any] | None,
    before_call: bool = False,
) -> tuple[Changeset, View]:
    """The changeset that applies ``edit`` to ``view`` and the view it leaves (pure).

    The view left is ``view`` itself when the changeset changes no entry (a state-only
    commit such as the model-call count), so what ``view`` has computed stays cached.

    Args:
        state: The conversation state ``view`` was read with (its version is expected).
        view: The active view.
        edit: What to change.
        counter: Estimates the tokens of appended, revised and summary entries.
        model_call_count: The count recorded on a reduction row (and committed when
            ``count_changed``).
        count_changed: Whether the changeset carries a new ``model_call_count``.
        manager_state: The manager state to commit (``None`` keeps the stored one).
        before_call: The changeset commits while model call ``model_call_count`` is being
            prepared (its request not sent yet), so that call sees it.

    Raises:
        EntryNotFound: A revision names an entry that is not an active message.
        InvalidMessage: A summary draft has no content (it must be written first).
    """
    # The edit's fields read from its one dict (a subscript each, not an attribute lookup
    # through the class): this runs on every append.
    fields = edit.__dict__
    appended = fields["appends"]
    appends, tool_ids = _appended_entries(appended, state.next_seq, counter) if appended else ((), None)
    # Only what commits while the call is prepared reaches it: a count deferred to ride
    # with the answer (the Strands adapter) commits after the call, like the answer.
    from_call = model_call_count if before_call else model_call_count + 1
    if (
        fields["plan"] is None
        and fields["strategy"] is None
        and not (fields["pins"] or fields["restore"])
        # _plain(edit, manager_state), spelled out: this is every append
        and 0 < len(fields["pin_source"]) <= 32
        and (manager_state is None or type(manager_state) is dict)
        and ((agent_state := fields["agent_state"]) is None or type(agent_state) is dict)
    ):
        # The hot path (a turn appended, perhaps with state): nothing to evict, revise,
        # summarize or pin, so the view only grows; see _trusted_changeset.
        entries = view.appended(appends, tool_ids) if appends else view
        return _trusted_changeset(
            state, edit, appends, from_call, model_call_count, count_changed, manager_state
        ), entries
    plan = edit.plan if edit.plan is not None and not edit.plan.is_empty else None
    # A pin that changes nothing is not a change: no pin event, so the pin history of an
    # entry alternates and every event tells the state before it (time travel needs that).
    pins = {
        entry_id: pinned
        for entry_id, pinned in edit.pins.items()
        if (i := view.index_of(entry_id)) is None or view[i].message.pinned != pinned
    }
    removed = plan.removed_ids() if plan else set()
    # Only a changeset with a reduction row needs an id for it (a plain append makes none).
    reduction_id = new_id() if plan is not None or edit.strategy is not None else ""
    summary = _summary_entry(state, view, plan, reduction_id, counter, state.next_seq + len(appends))
    restored = {e.entry_id: e for e in edit.restore}
    revisions = tuple(
        r.model_copy(update={"tokens": counter.count(_revised(view, r, restored))})
        for r in (plan.revisions if plan else ())
    )
    revised = {r.message_id: r for r in revisions}
    entries = view.project((*edit.restore, *appends), removed, revised, pins, summary)
    reduction: Reduction | None = None
    if plan is not None or edit.strategy is not None:
        reduction = Reduction(
            reduction_id=reduction_id,
            session_id=state.session_id,
            agent_id=state.agent_id,
            trigger=edit.trigger,
            strategy=edit.strategy or (plan.strategy if plan else "manual"),
            messages_before=len(view) + len(appends),
            restored=tuple(restored),
            messages_after=len(entries),
            tokens_before=view.tokens + sum(a.tokens for a in appends),
            tokens_after=entries.tokens,
            evicted=tuple(sorted(removed, key=lambda r: view.index_of(r) or 0)),
            revised=tuple(revised),
            summary_id=summary.summary_id if summary else None,
            model_call_count=model_call_count,
            # Diagnostic text: a lone surrogate in an exception's message must not fail the write.
            error=storable_text(edit.error) if edit.error is not None else None,
            detail=storable_text(plan.detail) if plan and plan.detail is not None else None,
            from_call=from_call,
            version=state.version + 1,
        )
    if reduction is None and not (pins or edit.restore) and _plain(edit, manager_state):
        # An empty plan (or pins that change nothing): as the hot path above.
        changeset = _trusted_changeset(state, edit, appends, from_call, model_call_count, count_changed, manager_state)
        return changeset, entries
    changeset = Changeset(
        session_id=state.session_id,
        agent_id=state.agent_id,
        expected_version=state.version,
        appends=appends,
        evict=tuple(sorted(set(plan.evict))) if plan else (),
        revisions=revisions,
        summary=summary,
        reduction=reduction,
        pins=pins,
        pin_source=edit.pin_source,
        from_call=from_call,
        model_call_count=model_call_count if count_changed else None,
        next_seq=state.next_seq + len(appends) if appends else None,
        manager_state=manager_state,
        agent_state=edit.agent_state,
        restore=edit.restore,
    )
    return changeset, entries


def _trusted_changeset(
    state: ConversationState,
    edit: Edit,
    appends: tuple[ViewEntry, ...],
    from_call: int,
    model_call_count: int,
    count_changed: bool,
    manager_state: dict[str, Any] | None,
) -> Changeset:
    """The changeset of an edit without a reduction, pins or restore, built without a second validation.

    Every value is one :func:`build_changeset` built or one already validated (``edit``
    is, and :func:`_plain` holds for it and ``manager_state``).
    """
    known = state.__dict__  # read from its one dict, as build_changeset reads the edit's
    return _changeset(
        {
            "session_id": known["session_id"],
            "agent_id": known["agent_id"],
            "expected_version": known["version"],
            "appends": appends,
            "evict": (),
            "revisions": (),
            "summary": None,
            "reduction": None,
            "pins": {},
            "pin_source": edit.pin_source,
            "changeset_id": random_uuid_hex(),  # new_id(), without its call
            "from_call": from_call,
            "model_call_count": model_call_count if count_changed else None,
            "next_seq": known["next_seq"] + len(appends) if appends else None,
            "manager_state": manager_state,
            "agent_state": edit.agent_state,
            "restore": (),
            "app": None,
            "user": None,
        },
    )


def _appended_entries(
    messages: tuple[Message, ...], first_seq: int, counter: TokenCounter
) -> tuple[tuple[ViewEntry, ...], tuple[list[str], list[str]]]:
    """The view entries of ``messages`` appended from ``first_seq``, and the tool ids they call and answer.

    Each message is counted once: all in one call by a :class:`CharTokenCounter` itself
    (:meth:`~contextledger.model.tokens.CharTokenCounter.counts`), one by one by any other
    counter. The entry of a plain :class:`Message` with a plain ``int`` count is built here
    without a validation (as :func:`_appended` builds it, without a call per message); any
    other by :func:`_appended`. The ids are those :meth:`ToolFacts.extended
    <contextledger.core.viewfacts.ToolFacts.extended>` reads from the entries (toolUse
    ids, toolResult ids, in order), read here in the same pass, so the view's facts grow
    without a second walk.
    """
    counts = counter.counts(messages) if type(counter) is CharTokenCounter else [counter.count(m) for m in messages]
    entries: list[ViewEntry] = []
    add = entries.append
    uses: list[str] = []
    results: list[str] = []
    for seq, message in enumerate(messages, first_seq):
        tokens = counts[seq - first_seq]
        if type(tokens) is int and type(message) is Message:
            # Every field has its type: an id a Message validated, a seq and a count that are ints.
            add(
                _view_entry(
                    {
                        "entry_id": message.message_id,
                        "kind": "message",
                        "seq": seq,
                        "message": message,
                        "tokens": tokens,
                    }
                )
            )
        else:
            add(_appended(message, seq, tokens))
        for block in message.content:
            if "toolUse" in block:
                uses.append(block["toolUse"]["toolUseId"])
            if "toolResult" in block:
                results.append(block["toolResult"]["toolUseId"])
    return tuple(entries), (uses, results)


def _appended(message: Message, seq: int, tokens: Any) -> ViewEntry:
    """The view entry of an appended message (validated only when the counter gave no plain ``int``)."""
    if type(tokens) is int:
        # Every field has its type: an id a Message validated, a seq and a count that are ints.
        return trusted(
            ViewEntry,
            {
                "entry_id": message.message_id,
                "kind": "message",
                "seq": seq,
                "message": message if type(message) is Message else message.stored_copy(),
                "tokens": tokens,
            },
        )
    return ViewEntry(entry_id=message.message_id, seq=seq, message=message.stored_copy(), tokens=tokens)


def _plain(edit: Edit, manager_state: Any) -> bool:
    """Whether the values of a changeset without a reduction need no validation (see :class:`Changeset`)."""
    return (
        0 < len(edit.pin_source) <= 32
        and (manager_state is None or type(manager_state) is dict)
        and (edit.agent_state is None or type(edit.agent_state) is dict)
    )


def _summary_entry(
    state: ConversationState,
    view: View,
    plan: ReductionPlan | None,
    reduction_id: str,
    counter: TokenCounter,
    next_seq: int,
) -> SummaryEntry | None:
    if plan is None or plan.summary is None:
        return None
    draft = plan.summary
    if draft.content is None:
        raise InvalidMessage("a summary draft has no content yet: the summarizer must write it before the commit")
    indexes = [i for i in (view.index_of(r) for r in draft.replaces) if i is not None]
    previous = [view[i].entry_id for i in indexes if view[i].kind == "summary"]
    seq = draft.seq if draft.seq is not None else min((view[i].seq for i in indexes), default=next_seq)
    return SummaryEntry(
        summary_id=draft.summary_id or new_id(),
        session_id=state.session_id,
        agent_id=state.agent_id,
        seq=seq,
        content=draft.content,
        summarizer=draft.summarizer,
        reduction_id=reduction_id,
        replaces=draft.replaces,
        supersedes=previous[-1] if previous else None,
        tokens=counter.count(Message(role="user", content=[{"text": draft.content}])),
    )


def _revised(view: View, revision: ContentRevision, restored: Mapping[str, ViewEntry]) -> Message:
    index = view.index_of(revision.message_id)
    if index is None:
        if revision.message_id in restored:
            return restored[revision.message_id].message.with_content(revision.content)
        raise EntryNotFound(f"cannot revise {revision.message_id}: not an active message")
    return view[index].message.with_content(revision.content)
