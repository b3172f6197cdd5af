"""The live view of one (session_id, agent_id), composed from collaborators with typed interfaces.

:class:`Conversation` owns the hooks and composes, each in its own module and testable alone:

- :class:`~contextledger.conversation.transaction.Transaction` -- the committed state, the
  commit loop, its conflict retries and the exactly-once settlement of a lost reply;
- :class:`~contextledger.conversation.reading.Reader` -- the contexts and requests hooks
  and managers get;
- :class:`~contextledger.conversation.reducer.Reducer` -- one reduction as one straight
  line: hook -> plan -> summarize once -> commit;
- :class:`~contextledger.conversation.modelcalls.ModelCalls` -- the model-call cycle;
- :class:`~contextledger.conversation.pins.Pins` and :class:`~contextledger.conversation.undo.Undo`.

Its settings and what it last committed are read through its base class,
:class:`~contextledger.conversation.accessors.Accessors`. This module holds the rest of
the public API, the writes, and nothing else: each method checks its arguments and
hands over to one collaborator. It is longer than the collaborators because each public
method states its contract here, once: the async shells (:mod:`contextledger.aio`) and the
API reference take their docstrings from these methods. The pure steps sit next to what they belong to:
changeset building in :mod:`contextledger.core.changeset`, planning and summary reuse in
:mod:`contextledger.core.reduction`, the view rules in :mod:`contextledger.core.viewrules`,
the repair of an interrupted tool call in :mod:`contextledger.managers.repair`, and the
back-off in :mod:`contextledger.core.retry`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from contextledger.conversation.accessors import Accessors
from contextledger.conversation.modelcalls import ModelCalls
from contextledger.conversation.pins import Pins
from contextledger.conversation.reading import Reader
from contextledger.conversation.reducer import Reducer
from contextledger.conversation.shared import SharedViews
from contextledger.conversation.transaction import Planner, Transaction
from contextledger.conversation.undo import Undo
from contextledger.core.changeset import Edit, ReductionPlan
from contextledger.core.checks import check_agent_state, check_conversation_options, check_owner, check_trigger
from contextledger.core.hooks import BeforeModelCallEvent, HookRegistry, MessageAddedEvent
from contextledger.core.reduction import MAX_SUMMARIES
from contextledger.core.retry import BACKOFF_BASE, BACKOFF_CAP, MAX_RETRIES
from contextledger.core.view import View
from contextledger.errors import ConfigurationError, ContextWindowOverflowError, DuplicateEntry
from contextledger.managers.base import ConversationManager
from contextledger.managers.repair import INTERRUPTED_TOOL_TEXT, REPAIR_STRATEGY
from contextledger.model.messages import Message
from contextledger.model.records import Reduction, Trigger
from contextledger.model.tokens import CharTokenCounter, TokenCounter
from contextledger.stores.base import LedgerStore

# The retry and summary constants stay importable here, where they were first defined.
__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "INTERRUPTED_TOOL_TEXT",
    "MAX_SUMMARIES",
    "REPAIR_STRATEGY",
    "Conversation",
    "Edit",
]


class Conversation(Accessors):
    """One conversation's active view, kept in step with its store.

    Every change (append, pin, reduction, model-call count) is committed as one
    changeset with the version this object read. On a
    :class:`~contextledger.errors.ConcurrencyConflict` it waits a random, growing
    moment, re-reads, re-plans and retries up to ``max_retries`` times; then the
    conflict propagates. A commit whose outcome stayed unknown
    (:class:`~contextledger.errors.CommitOutcomeUnknown`) is settled by the next write:
    sent again under its changeset id, it applies at most once. Opening and reading
    never write. Methods are thread-safe.

    Args:
        store: Where the ledger lives.
        session_id: The session.
        agent_id: The agent within the session.
        manager: The policy whose hooks are registered (``None`` registers nothing).
        token_counter: Estimates per-message tokens (default: :class:`CharTokenCounter`).
        context_window_limit: The model's window, used when a caller gives none.
        max_retries: Conflict retries per commit.
        overflow_errors: Exception types treated as a context-window overflow.
        repair: Repair a view left mid-tool by a crash inside the next real write (an
            append that is not the missing result, or a model call).
        app: The app the session belongs to, set by the commit that creates the session.
        user: The user of ``app`` the session belongs to, set the same way.
        defer_count: The default of :meth:`before_model_call`'s ``defer_count``: the
            count of a model call rides with the next commit (``True``), or is
            committed before the call when nothing else is (``False``).
        shared: The views the ledger's conversations last held (see
            :mod:`~contextledger.conversation.shared`); ``None``: this one's alone.

    Attributes:
        hooks: The registry the manager's (and any other provider's) callbacks are in.
        transaction: The commit loop and the state it last committed.
    """

    def __init__(
        self,
        store: LedgerStore,
        session_id: str,
        agent_id: str = "default",
        *,
        manager: ConversationManager | None = None,
        token_counter: TokenCounter | None = None,
        context_window_limit: int | None = None,
        max_retries: int = MAX_RETRIES,
        overflow_errors: tuple[type[BaseException], ...] = (),
        repair: bool = True,
        app: str | None = None,
        user: str | None = None,
        defer_count: bool = False,
        shared: SharedViews | None = None,
    ) -> None:
        """Open the conversation (read only; a new one is created by its first commit).

        Raises:
            ConfigurationError: An id is not a non-empty string, ``manager`` is not a
                :class:`ConversationManager`, ``token_counter`` has no ``count``,
                ``context_window_limit`` is not a positive int, ``max_retries`` is negative,
                ``overflow_errors`` holds something that is not an exception type, or
                ``app`` / ``user`` is not ``None`` or a non-empty string, or
                ``defer_count`` is not a bool, or ``shared`` is not a :class:`SharedViews`.
        """
        if shared is not None and not isinstance(shared, SharedViews):
            raise ConfigurationError(f"shared must be a SharedViews or None, got {type(shared).__name__}")
        if not isinstance(defer_count, bool):
            raise ConfigurationError(f"defer_count must be a bool, got {defer_count!r}")
        check_conversation_options(
            session_id,
            agent_id,
            is_manager=isinstance(manager, ConversationManager),
            manager=manager,
            token_counter=token_counter,
            context_window_limit=context_window_limit,
            max_retries=max_retries,
            overflow_errors=overflow_errors,
        )
        check_owner(app, user)
        self.hooks = HookRegistry()
        transaction = Transaction(
            store,
            session_id,
            agent_id,
            manager=manager,
            token_counter=token_counter or CharTokenCounter(),
            max_retries=max_retries,
            repair=repair,
            app=app,
            user=user,
            shared=shared,
        )
        reader = Reader(
            transaction,
            context_window_limit=context_window_limit,
            overflow_errors=(ContextWindowOverflowError, *overflow_errors),
        )
        self._reducer = Reducer(transaction, reader, self.hooks, manager)
        super().__init__(transaction, reader, ModelCalls(transaction, reader, self._reducer, defer_count=defer_count))
        self._pins = Pins(transaction)
        self._undo = Undo(transaction)
        self.refresh()
        if manager is not None:
            self.hooks.add_hook(manager)

    # -- writing -------------------------------------------------------------------------

    def append(self, *messages: Message | Mapping[str, Any]) -> list[Message]:
        """Append messages in one commit, then fire :class:`MessageAddedEvent` for each.

        Strands message dicts are accepted and converted with :meth:`Message.from_strands`.
        Appending again messages whose ids are already stored as the same messages (a
        retry after an error) writes nothing and returns the stored ones.

        Raises:
            InvalidMessage: A message is malformed or holds a value JSON cannot store;
                nothing is appended.
            DuplicateEntry: A message id is already in the conversation as another
                message; nothing is appended.
        """
        converted, stored = self.transaction.converted(messages)
        if stored is not None or not converted:
            return stored if stored is not None else []
        transaction = self.transaction
        try:
            transaction.append(converted)
        except DuplicateEntry:
            transaction.refresh()
            stored = transaction.view.stored_as(converted)
            if stored is None:
                raise
            return stored
        if self.hooks.has_callbacks(MessageAddedEvent):  # the hot path builds no context otherwise
            for message in converted:
                self._reducer.dispatch(MessageAddedEvent(self._reader.context(), message=message))
        return converted

    def set_agent_state(self, state: Mapping[str, Any]) -> None:
        """Replace the host key/value state (one commit).

        Raises:
            InvalidMessage: ``state`` is not a mapping, has a key that is not a string,
                or holds a value JSON cannot store.
        """
        snapshot = check_agent_state(state)
        self.transaction.edit(lambda _view: Edit(agent_state=snapshot))

    def edit(self, build: Planner) -> Reduction | None:
        """Turn ``build(view)`` into one changeset and commit it.

        ``build`` is called again on a fresh view after each concurrency conflict; it
        returns ``None`` (or an empty edit) when there is nothing to do. A plan it carries
        is held to the view rules (corrected where safe, else refused) unless the edit is
        ``as_given``. A pending model-call increment rides along with the first commit
        that happens, and so does the repair of a view left mid-tool (see ``repair``).

        Returns:
            The reduction row committed, if the edit carried one.

        Raises:
            ConcurrencyConflict: Still conflicting after ``max_retries`` re-plans.
            InvalidPlan: The plan breaks the view rules beyond correction; nothing is committed.
        """
        return self.transaction.edit(build)

    # -- pins ----------------------------------------------------------------------------

    def pin(self, entry_id: str, *, source: str = "api") -> None:
        """Pin an active message (persisted at once, recorded as a pin event from ``source``).

        Raises:
            PinError: ``entry_id`` is not an active message (summaries cannot be pinned).
        """
        self._pins.pin(entry_id, source=source)

    def unpin(self, entry_id: str, *, source: str = "api") -> None:
        """Unpin an active message (persisted at once, recorded as a pin event from ``source``).

        Raises:
            PinError: ``entry_id`` is not an active message.
        """
        self._pins.unpin(entry_id, source=source)

    def pin_index(self, index: int, pinned: bool = True, *, source: str = "api") -> str:
        """Pin or unpin the message at ``index`` of the view and return its id.

        ``source`` says who asked (``api``, ``model`` for the ``pin_message`` tool, ``host``).

        Raises:
            PinError: ``index`` is not an int, is out of range or names a summary.
        """
        return self._pins.pin_index(index, pinned, source=source)

    # -- reductions ----------------------------------------------------------------------

    def preview(self, trigger: Trigger = "manual") -> ReductionPlan | None:
        """The plan :meth:`reduce` would commit now (tokens estimated), or ``None``; writes nothing.

        A summary the manager would write is named (``removed_ids()``) but not written.

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger.
            InvalidPlan: The manager's plan breaks the view rules beyond correction.
        """
        check_trigger(trigger)
        return self._reducer.preview(trigger)

    def reduce(self, trigger: Trigger = "manual", *, error: BaseException | None = None) -> Reduction | None:
        """Ask the manager for a plan now and commit it; ``None`` when nothing changed.

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger.
            InvalidPlan: The manager's plan breaks the view rules beyond correction.
            ReductionFailed: The summarizer failed.
        """
        check_trigger(trigger)
        return self._reducer.reduce(self._reader.request(trigger, error))

    def apply_plan(
        self,
        planner: Callable[[View], ReductionPlan | None],
        *,
        trigger: Trigger,
        error: BaseException | None = None,
        as_given: bool = False,
    ) -> Reduction | None:
        """Commit the plan ``planner`` makes for the current view (re-planned on conflict).

        The plan is held to the view rules like a manager's (:func:`~contextledger.core.viewrules.fit_plan`):
        corrected where that is safe, else refused. ``as_given=True`` records it exactly
        instead, for a host mirroring a reduction it already made (see :class:`Edit`).

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger.
            InvalidPlan: The plan breaks the view rules beyond correction; nothing is committed.
            EntryNotFound: The plan names an entry that is not in the view.
        """
        check_trigger(trigger)
        return self._reducer.apply_plan(planner, trigger=trigger, error=error, as_given=as_given)

    def undo(self, reduction_id: str, *, cascade: bool = False) -> Reduction:
        """Revert a reduction, committed as one reduction of its own (strategy ``undo``, trigger ``manual``).

        The entries it evicted become active again, a summary it inserted leaves the view
        (the one it superseded returns), its revisions are reverted (see
        :mod:`contextledger.conversation.undo`).

        Raises:
            ReductionNotFound: No reduction of this conversation has that id.
            UndoConflict: A later reduction depends on it (its summary was superseded, a
                message it revised was revised again, it was undone already) and
                ``cascade`` is false; nothing is written.
            InvalidPlan: The reduction changed nothing that can be reverted (a repair
                only appends), or the view the undo leaves would break the view rules.
        """
        return self._undo.undo(reduction_id, cascade=cascade)

    def repair_interrupted_tools(self) -> Reduction | None:
        """Repair a view left mid-tool by a crash now, recording a ``restore``/``tool_pair_repair`` reduction.

        Writes only when the view needs it (see :mod:`contextledger.managers.repair`).
        """
        return self.transaction.repair_interrupted_tools()

    # -- the model-call cycle --------------------------------------------------------------

    def before_model_call(
        self,
        *,
        context_window_limit: int | None = None,
        projected_input_tokens: int | None = None,
        defer_count: bool | None = None,
        handed: bool = True,
    ) -> BeforeModelCallEvent:
        """Count the model call, fire :class:`BeforeModelCallEvent`, run what it requested.

        The first commit (a requested reduction, else the count alone) carries the new
        count; requested reductions are best-effort and never break the turn. With
        ``defer_count`` a count nothing committed waits for the next commit (the host's
        next message, any write) instead of a commit of its own: nothing is written when
        nothing is to do (one commit fewer per call), the count is durable once the next
        write returns, and a crash (or an abandoned conversation) before that write loses
        the count of the calls since, whose answers were not written either (see the
        reliability page). ``None`` takes the conversation's :attr:`defer_count`
        (default ``False``); when that defers, a view left mid-tool by a crash is still
        repaired before the call, the count committed with the repair (``repair`` on),
        while an explicit ``defer_count=True`` leaves the repair to the next write (a host
        that shows the model the repaired view itself).

        What commits while a call is prepared is stamped as part of its input (time
        travel: :func:`~contextledger.history.travel.view_at`); what commits after it, as part
        of the next call's. By default the input is handed to the model when this
        returns. A host that still adds to the input afterwards (Strands appends hook
        input after its ``BeforeModelCallEvent``) passes ``handed=False`` and calls
        :meth:`input_handed` where it really hands the input over; until then every commit
        belongs to this call's input, and a call prepared again before it was handed
        (a Strands interrupt, resumed) is the same call, not counted twice.
        """
        return self._calls.before_model_call(
            context_window_limit=context_window_limit,
            projected_input_tokens=projected_input_tokens,
            defer_count=defer_count,
            handed=handed,
        )

    def input_handed(self) -> None:
        """Note that the host handed the prepared call's input to the model.

        Only needed after ``before_model_call(handed=False)``: from now on commits reach
        the next call's input. :meth:`after_model_call` implies it; calling it when no
        call is prepared changes nothing.
        """
        self._calls.input_handed()

    def after_model_call(self, error: BaseException | None = None) -> bool:
        """Fire :class:`AfterModelCallEvent`; return whether the model call should be retried.

        A reactive reduction a callback requested runs once per model call: committed,
        it asks for the retry; impossible, it raises without asking.

        Raises:
            ReductionFailed: A reactive reduction was requested and nothing could be
                reduced without breaking the view rules (or the summarizer failed).
            BaseException: ``error`` itself when it is a context overflow that no callback
                handled (the null manager re-raises this way).
        """
        return self._calls.after_model_call(error)

    def after_invocation(self, pending: Planner | None = None) -> None:
        """Fire :class:`AfterInvocationEvent` (end-of-invocation management).

        ``pending`` builds a write the host still owes (the final answer) for a view: the
        reductions requested plan on the view it leaves, and it is committed with the
        first of them -- one commit for the answer and the management -- or alone when
        none commits (or when a reduction would touch what it appends).
        """
        self._calls.after_invocation(pending)
