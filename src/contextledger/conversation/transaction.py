"""The transaction of one conversation: the commit loop, its retries and exactly-once settlement.

:class:`Transaction` holds what one (session_id, agent_id) last committed (state and
active view) and is the only writer of it. Every write is one call of :meth:`Transaction.run`:
build an edit for the current view -> hold it to the view rules -> build one changeset
(with the pending model-call count, a host's riding write and the repair of a view left
mid-tool) -> commit with the version read. On a
:class:`~contextledger.errors.ConcurrencyConflict` it waits a random, growing moment
(:mod:`contextledger.core.retry`), re-reads and re-builds; a commit whose reply was lost
(:class:`~contextledger.errors.CommitOutcomeUnknown`) is settled by the next write, sent
again under its changeset id so that it applies at most once (DESIGN semantics 8).

It knows nothing of hooks, managers' plans or summaries: a reduction reaches it as a
build function (see :mod:`contextledger.conversation.reducer`).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, NamedTuple

from contextledger.conversation.shared import SharedViews
from contextledger.core.building import build_changeset, projected, ride_with
from contextledger.core.changeset import Changeset, Edit
from contextledger.core.reduction import log_committed
from contextledger.core.retry import backoff_delay, log_conflict
from contextledger.core.seam import WouldWait, pause
from contextledger.core.view import View
from contextledger.core.viewrules import fit_edit
from contextledger.errors import CommitOutcomeUnknown, ConcurrencyConflict
from contextledger.managers.base import ConversationManager
from contextledger.managers.repair import log_repair, needs_repair, plan_repair, with_repair
from contextledger.model.messages import Message
from contextledger.model.records import ConversationState, Reduction
from contextledger.model.tokens import TokenCounter
from contextledger.stores.base import LedgerStore
from contextledger.stores.capabilities import HISTORY
from contextledger.telemetry import spans as telemetry

__all__ = ["Build", "CallCount", "Planner", "Prepared", "Transaction"]

Planner = Callable[[View], Edit | None]
"""Builds the edit for a view (``None`` or an empty edit: nothing to do)."""
Build = Callable[[View], tuple[Edit | None, dict[str, Any] | None]]
"""Builds the edit for a view and the manager state that goes with it (``None``: the manager's own)."""


class _Again(enum.Enum):
    """From :meth:`Transaction._prepare`: a write that had to go first was committed; build again."""

    AGAIN = 0


_AGAIN = _Again.AGAIN


def _same(stored: ConversationState, held: ConversationState) -> bool:
    """Whether ``held`` is the state of the conversation ``stored`` is, at the same version (so the same view)."""
    return stored.version == held.version and stored.created_at == held.created_at


@cache
def _no_edit() -> Edit:
    """The edit of nothing, made once (it is frozen): every model-call count committed alone carries it."""
    return Edit()


_tuple_new = tuple.__new__


class Prepared(NamedTuple):
    """One write's changeset and the active view it leaves once committed (see :meth:`Transaction.prepare`).

    A named tuple: built once per commit, it costs a tuple (a frozen dataclass sets each
    field through ``object.__setattr__``).
    """

    changeset: Changeset
    view: View


@dataclass(slots=True)
class CallCount:
    """The model calls announced and not committed yet, and where the call in preparation stands.

    Attributes:
        pending: Calls announced since the last commit; the next commit carries them.
        preparing: A call is prepared and its input not handed to the model yet: what
            commits now is part of that call's input (time travel).
        defer: The pending count waits for a commit with something else in it instead
            of being committed on its own.
    """

    pending: int = 0
    preparing: bool = False
    defer: bool = False


class Transaction:
    """The commit loop of one conversation and the state it last committed.

    Thread-safe: every read-modify-commit runs under :attr:`lock` (re-entrant, so a
    caller may hold it across a read and the write that depends on it).

    Attributes:
        store: Where the ledger lives.
        session_id: The session.
        agent_id: The agent within the session.
        manager: Whose state is committed with each changeset and restored after a re-read.
        token_counter: Estimates the tokens of appended, revised and summary entries.
        max_retries: Conflict retries per commit.
        repair: Repair a view left mid-tool inside the next real write.
        app: The app named by the commit that creates the session.
        user: The user named by the commit that creates the session.
        lock: Held for each commit attempt and by readers needing a consistent view.
        calls: The model-call count not committed yet.
    """

    def __init__(
        self,
        store: LedgerStore,
        session_id: str,
        agent_id: str,
        *,
        manager: ConversationManager | None,
        token_counter: TokenCounter,
        max_retries: int,
        repair: bool,
        app: str | None = None,
        user: str | None = None,
        shared: SharedViews | None = None,
    ) -> None:
        """Hold the settings; nothing is read until :meth:`refresh` (the arguments are checked by the caller).

        ``shared``: the views the ledger's conversations last held (see
        :mod:`~contextledger.conversation.shared`), read by :meth:`refresh` and given
        every view this one commits or reads.
        """
        self.store, self.session_id, self.agent_id = store, session_id, agent_id
        self.shared = shared if shared is not None and shared.max_entries else None
        self.manager = manager
        self.token_counter = token_counter
        self.max_retries = max_retries
        self.repair = repair
        self.app, self.user = app, user
        self.lock = threading.RLock()
        self.calls = CallCount()
        self._state = ConversationState.model_construct(session_id=session_id, agent_id=agent_id)
        self._view = View(())
        self._unknown: Changeset | None = None  # a commit whose reply was lost
        self._riding: Planner | None = None  # a host's pending write, committed with the next commit

    @property
    def state(self) -> ConversationState:
        """The state as last committed (or re-read)."""
        return self._state

    @property
    def view(self) -> View:
        """The active view as last committed (or re-read)."""
        return self._view

    @property
    def model_call_count(self) -> int:
        """Model calls so far, including those announced but not committed yet."""
        return self._state.model_call_count + self.calls.pending

    def refresh(self) -> None:
        """Re-read state and active view from the store, when the stored conversation moved.

        On a store with the history capability, one read of the conversation's state
        tells: the same version of the same conversation (its ``created_at`` as the store
        keeps it) holds the same view, since every change to a view -- a commit, an
        erasure -- moves the version. That view is the one held here, or the one another
        conversation of the ledger last held (:attr:`shared`). Otherwise (and on a store
        without that read) one read of the active view follows. Pending model calls stay
        pending: they are added to the count read.
        """
        with self.lock:
            held, shared = self._state, self.shared
            key = (self.session_id, self.agent_id)
            other = shared.get(key) if shared is not None else None
            if (held.version or other is not None) and HISTORY.held_by(self.store):
                stored = HISTORY.of(self.store, "refresh").conversation_state(self.session_id, self.agent_id)
                view = None
                if stored is not None and _same(stored, held):
                    view = self._view
                elif stored is not None and other is not None and _same(stored, other.state):
                    view = other.view
                if stored is not None and view is not None:
                    self._state, self._view = stored, view  # the view is the one held
                    if shared is not None:
                        shared.put(key, stored, view)
                    if self.manager is not None:
                        self.manager.restore_state(stored.manager_state)
                    return
            snapshot = telemetry.restore(self.store, self.session_id, self.agent_id)
            if snapshot is None:
                self._state = ConversationState(session_id=self.session_id, agent_id=self.agent_id)
                self._view = View(())
            else:
                self._state, self._view = snapshot.state, View(snapshot.entries)
                if shared is not None:
                    shared.put(key, self._state, self._view)
            if self.manager is not None:
                self.manager.restore_state(self._state.manager_state)

    def converted(self, messages: Sequence[Message | Mapping[str, Any]]) -> tuple[list[Message], list[Message] | None]:
        """``messages`` as :class:`Message` objects, and the stored ones if all are stored already (an append's retry).

        Raises:
            InvalidMessage: A Strands message dict is malformed.
        """
        converted: list[Message] = list(messages)  # type: ignore[arg-type]  # each converted below
        if list(map(type, converted)).count(Message) != len(converted):  # all Message objects: checked in C
            for index, message in enumerate(messages):
                if not isinstance(message, Message):
                    converted[index] = Message.from_strands(message)
        if not converted:
            return converted, None
        # No lock: the view is one immutable object, read once (a commit replaces the
        # reference), and a commit racing this check is met by the store's duplicate check.
        return converted, self._view.stored_as(converted)

    def announce_call(self, *, defer: bool) -> None:
        """Count a model call being prepared (once: a call prepared again before it was handed is the same call)."""
        with self.lock:
            if not self.calls.preparing:
                self.calls.pending += 1
            self.calls.defer = defer
            self.calls.preparing = True

    def commit_count(self) -> None:
        """Commit the pending model-call count on its own, unless it is deferred or nothing is pending."""
        if self.calls.pending and not self.calls.defer:
            self.edit(lambda _view: None)

    @contextmanager
    def riding(self, pending: Planner | None) -> Iterator[None]:
        """Within the block, ``pending`` (a host's write) rides with the first commit; after it, it commits alone.

        The first commit that happens in the block builds ``pending`` for its view and
        commits both in one changeset (or ``pending`` first, alone, when the two cannot
        share one). What has not ridden by the end of the block is committed then.
        """
        self._riding = pending
        try:
            yield
        finally:
            riding, self._riding = self._riding, None
            if riding is not None:
                self.edit(riding)

    def edit(self, build: Planner) -> Reduction | None:
        """Commit ``build(view)``, its plan held to the view rules (see :meth:`run`).

        Returns:
            The reduction row committed, if the edit carried one.

        Raises:
            ConcurrencyConflict: Still conflicting after ``max_retries`` re-builds.
            InvalidPlan: The plan breaks the view rules beyond correction; nothing is committed.
            CommitOutcomeUnknown: The store's reply was lost; the next write settles it.
        """
        return self.run(lambda view: (fit_edit(view, build(view)), None))

    def append(self, messages: list[Message]) -> None:
        """Commit ``messages`` appended, as :meth:`edit` of ``Edit.appending(messages)`` commits them.

        ``messages`` are what :meth:`converted` returned (:class:`Message` objects, not
        looked at again). The edit is built once for every attempt (it does not depend on
        the view), and it has no plan, so the view rules have nothing to hold
        (:func:`fit_edit` would pass it unchanged).

        Raises:
            ConcurrencyConflict: Still conflicting after ``max_retries`` re-builds.
            DuplicateEntry: A message id is already stored as another message.
            CommitOutcomeUnknown: The store's reply was lost; the next write settles it.
        """
        built = (Edit.appending(messages, checked=True), None)
        self.run(lambda _view: built)

    def repair_interrupted_tools(self) -> Reduction | None:
        """Commit the repair of a view left mid-tool, when it needs one (else write nothing)."""
        return self.run(lambda view: (plan_repair(view, self._state.next_seq), None), repair=False)

    def run(self, build: Build, *, repair: bool = True) -> Reduction | None:
        """The commit loop: build for the current view, commit, re-build after a conflict.

        ``build`` is called under :attr:`lock` with the view projected past a riding
        write; it returns the edit (``None`` or empty: nothing to do) and the manager
        state to commit (``None``: the manager's exported state). A pending model-call
        count rides along with the commit (or is committed alone unless deferred), and
        so does the repair of a view left mid-tool (``repair``).

        Returns:
            The reduction row committed, if any.

        Raises:
            ConcurrencyConflict: Still conflicting after ``max_retries`` re-builds.
            CommitOutcomeUnknown: The store's reply was lost; the next write settles it.
        """
        for attempt in range(self.max_retries + 1):
            with self.lock:
                prepared = self._prepare(build, repair, nested=True)
                if prepared is _AGAIN:  # a write that had to commit first did: build again on its view
                    continue
                if prepared is None:
                    return None
                try:
                    version = telemetry.commit(self.store, prepared.changeset, attempt)
                except ConcurrencyConflict:
                    if attempt == self.max_retries:
                        raise
                    self.refresh()
                except CommitOutcomeUnknown:
                    self._unknown = prepared.changeset  # settled by the next write
                    raise
                else:
                    return self.finish(prepared, version)
            log_conflict(self.session_id, self.agent_id, attempt)
            pause(backoff_delay(attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def prepare(self, build: Planner) -> Prepared | None:
        """The changeset of :meth:`edit`'s ``build(view)`` for the current view, to be sent by the caller (no retry).

        The first of the three steps of :meth:`run` (prepare -> send -> :meth:`finish`) for a
        caller with a send of its own (the async API's native driver). Call it holding
        :attr:`lock`, and hold it until :meth:`finish`.

        Returns:
            What to send, or ``None`` when there is nothing to commit.

        Raises:
            WouldWait: The write is not one changeset built from the view as it is: a lost
                reply to settle, a host's riding write, or a repair to commit first. Nothing
                was committed; :meth:`run` does it.
        """
        prepared = self._prepare(lambda view: (fit_edit(view, build(view)), None), True, nested=False)
        if prepared is _AGAIN:  # pragma: no cover  # nested=False never commits
            raise AssertionError("unreachable")
        return prepared

    def lost(self, changeset: Changeset) -> None:
        """The reply to ``changeset``, sent by the caller, was lost: the next write settles it (as in :meth:`run`)."""
        self._unknown = changeset

    def finish(self, prepared: Prepared, version: int) -> Reduction | None:
        """Take ``prepared`` as committed at ``version`` (the last step of :meth:`run`); its reduction row, if any."""
        changeset = prepared.changeset
        self._state = changeset.state_after(self._state, version)
        before, self._view = self._view, prepared.view
        if self.shared is not None:
            self.shared.put((self.session_id, self.agent_id), self._state, self._view)
        calls = self.calls
        calls.pending, calls.defer = 0, False
        self._riding = None
        reduction = changeset.reduction
        if reduction is not None:
            if self.manager is not None:
                self.manager.restore_state(self._state.manager_state)
            log_committed(self.session_id, self.agent_id, reduction)
            telemetry.reduced(reduction, before)
        return reduction

    def _prepare(self, build: Build, repair: bool, *, nested: bool) -> Prepared | Literal[_Again.AGAIN] | None:
        """Build one changeset for the current view; ``_AGAIN`` after committing a write that must go first.

        With ``nested`` false nothing is committed here: where :meth:`run` would settle or
        commit first, :class:`WouldWait` is raised instead.
        """
        if self._unknown is not None:
            if not nested:
                raise WouldWait("a lost reply is settled first")
            self._settle(self._unknown)
        riding = self._riding
        if riding is None:  # no host write pending (every plain append): the view as it is
            ride = None
            edit, manager_state = build(self._view)
        else:
            if not nested:
                raise WouldWait("a host's write rides with this one")
            ride = fit_edit(self._view, riding(self._view))
            edit, manager_state = build(projected(self._state, self._view, ride, self.token_counter))
        if riding is not None and ride is not None and not ride.is_empty:
            merged = ride_with(ride, edit)
            if merged is None:  # they cannot share a changeset: the host's write commits first
                self._riding = None
                self.edit(riding)
                return _AGAIN
            edit = merged
        calls = self.calls
        if edit is not None and edit.appends:  # every append: a real write, whatever else the edit holds
            real_write = True
        else:
            if (edit is None or edit.is_empty) and (not calls.pending or calls.defer):
                return None
            edit = edit or _no_edit()
            real_write = bool(calls.pending)
        if repair and self.repair and real_write and self._view.mid_tool() and needs_repair(self._view, edit.appends):
            if not nested:
                raise WouldWait("a view left mid-tool is repaired with this write")
            if edit.plan is not None or edit.strategy is not None:
                # One reduction row per changeset: the repair commits first, alone.
                self.repair_interrupted_tools()
                return _AGAIN
            log_repair(self.session_id, self.agent_id)
            edit = with_repair(self._view, edit, self._state.next_seq)
        if manager_state is None and self.manager is not None:
            manager_state = self.manager.export_state()
        changeset, entries = build_changeset(
            self._state,
            self._view,
            edit,
            counter=self.token_counter,
            model_call_count=self._state.model_call_count + calls.pending,  # self.model_call_count
            count_changed=bool(calls.pending),
            manager_state=manager_state,
            before_call=calls.preparing,
        )
        if changeset.expected_version == 0 and (self.app is not None or self.user is not None):
            # Only the commit that creates the conversation names the session's owner.
            changeset = changeset.model_copy(update={"app": self.app, "user": self.user})
        return _tuple_new(Prepared, (changeset, entries))  # Prepared(changeset, entries), without its __new__'s frame

    def _settle(self, changeset: Changeset) -> None:
        """Learn the outcome of a commit whose reply was lost: sent again under its id, it applies once at most."""
        calls = self.model_call_count
        try:
            telemetry.commit(self.store, changeset, settling=True)
        except ConcurrencyConflict:  # it never applied, and others wrote since: what it carried is still due
            changeset = changeset.model_copy(update={"model_call_count": None})
        self._unknown = None
        self.refresh()
        if changeset.model_call_count is not None:  # counted now: only calls announced since stay pending
            self.calls.pending = max(0, calls - changeset.model_call_count)
