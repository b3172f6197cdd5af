"""``AsyncConversation``: the coroutine face of :class:`~contextledger.Conversation`.

Each coroutine runs the sync method of the same name as one job on a worker thread of
the ledger's runner (see :mod:`contextledger.aio.runner`). Calls on one
``AsyncConversation`` run one at a time in the order they were made, whichever loop or
thread they come from (a :class:`~contextledger.aio.job.Lane`: a call waiting for its
turn holds no thread). Properties read the last committed state and stay properties.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from contextledger.aio.native import append_native, on_worker
from contextledger.aio.runner import Lane, Runner, default_runner
from contextledger.aio.shell import ShellBase, coroutine_of, synced
from contextledger.conversation.conversation import Conversation
from contextledger.conversation.transaction import Planner
from contextledger.core.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    BeforeModelCallEvent,
    HookEvent,
    HookRegistry,
    MessageAddedEvent,
)
from contextledger.core.seam import WouldWait, run_inline
from contextledger.core.view import View
from contextledger.errors import ConfigurationError
from contextledger.managers.base import ConversationManager
from contextledger.model.messages import Message
from contextledger.model.records import ConversationState, Reduction
from contextledger.model.tokens import TokenCounter
from contextledger.stores.base import LedgerStore

R = TypeVar("R")

if TYPE_CHECKING:
    from contextledger.aio.native import NativeSend

__all__ = ["AsyncConversation"]


_INLINE_SCHEMES = ("sqlite", "memory")
"""Stores whose append commits without waiting on a network: ``inline=True`` is taken for these only."""


def inline_for(store: LedgerStore, inline: bool | None) -> bool:
    """``inline`` checked against ``store`` (see :meth:`AsyncLedger.connect`); ``None``: where the store takes it.

    Raises:
        ConfigurationError: ``inline`` is not a bool or ``None``, or is true for a store
            that is not SQLite or in-memory.
    """
    check_inline(inline)
    takes = str(store.url).startswith(_INLINE_SCHEMES)
    if inline is None:
        return takes
    if inline and not takes:
        raise ConfigurationError(
            f"inline=True runs appends on the event loop's thread, which only SQLite and in-memory stores allow;"
            f" {store.url} waits on a network"
        )
    return inline


def check_inline(inline: object) -> None:
    """Refuse an ``inline`` that is not a bool or ``None``.

    Raises:
        ConfigurationError: It is not.
    """
    if inline is not None and not isinstance(inline, bool):
        raise ConfigurationError(f"inline must be a bool or None, got {inline!r}")


class AsyncConversation(ShellBase[Conversation]):
    """One conversation's active view on the async API; every I/O method is a coroutine.

    Open one with ``await ledger.conversation(...)`` on an
    :class:`~contextledger.aio.AsyncLedger` (or :meth:`open` on any store). The managers, hook providers, rules
    and errors are the sync conversation's own: this class holds no logic of its own.

    On a ledger opened with ``inline=True`` (SQLite and in-memory stores only),
    :meth:`append` runs on the calling thread, blocking its loop for the commit, when no
    other call of this conversation is running or waiting and no callback but the
    manager's hears :class:`~contextledger.MessageAddedEvent` (a callback may expect to
    run off the loop); otherwise it is one job on a worker thread like every other call.
    :meth:`edit` runs inline the same way (its ``build`` then runs on the calling thread;
    it is called again after a conflict, so it is pure), and so do
    :meth:`before_model_call`, :meth:`after_model_call` and :meth:`after_invocation` when
    no callback but the manager's hears the event they fire: a manager plans without I/O
    (its contract), so its reductions commit inline too, and one that would write a
    summary (a summarizer may call a model) runs on a worker; a count is committed at
    once, or rides with the next write. :meth:`input_handed` (a flag) runs inline whenever
    the lane is free; :meth:`after_invocation` with a ``pending`` write always runs on a
    worker. Inline, nothing waits: where the call would wait -- SQLite's write lock held
    by another connection or thread, a retry's sleep after a conflict, a changeset off
    the one-transaction hot path, a WAL checkpoint due (inline commits leave those to a
    commit on a worker) -- nothing has been committed (a model call stays counted
    once), and it runs again as a job on a worker
    (:data:`~contextledger.core.seam.INLINE`). Either way it runs in a copy of the caller's
    context, in this conversation's order of calls, and a cancellation never stops it
    half-way.
    """

    def __init__(
        self,
        conversation: Conversation,
        runner: Runner | None = None,
        *,
        inline: bool = False,
        native: NativeSend | None = None,
    ) -> None:
        """Wrap an open sync ``conversation``; its calls run on ``runner`` (default: the process-wide one).

        With ``inline``, :meth:`append` runs on the calling thread when it can (see
        :meth:`append`); the caller (:class:`~contextledger.aio.AsyncLedger`) checked that the
        store is one whose commit does not wait on a network. With ``native`` (a Redis or
        PostgreSQL store's, from :func:`~contextledger.aio.native.native_for`), :meth:`append`
        sends its one script or statement from the calling loop when it can (see :mod:`contextledger.aio.native`).
        """
        super().__init__(conversation, runner, Lane())
        self._inline = inline
        self._native = native

    @classmethod
    async def open(
        cls,
        store: LedgerStore,
        session_id: str,
        agent_id: str = "default",
        *,
        runner: Runner | None = None,
        inline: bool | None = False,
        native: NativeSend | None = None,
        **options: Any,
    ) -> AsyncConversation:
        """Open the conversation on ``store`` (reads only), with the arguments of :class:`Conversation`.

        Its calls run on ``runner`` (an :class:`~contextledger.aio.AsyncLedger` passes its own;
        default: the process-wide one); ``inline``: see :meth:`AsyncLedger.connect
        <contextledger.aio.AsyncLedger.connect>` (here ``False`` by default); ``native``: see
        :meth:`__init__` (an :class:`~contextledger.aio.AsyncLedger` passes its own).

        Raises:
            ConfigurationError: An option is invalid.
        """
        inline = inline_for(store, inline)
        runner = runner if runner is not None else default_runner()
        opened = await runner.run(Conversation, store, session_id, agent_id, **options)
        return cls(opened, runner, inline=inline, native=native)

    # -- the last committed state, as the sync conversation's attributes and properties --------

    mirrors = Conversation
    session_id: synced[str] = synced()
    agent_id: synced[str] = synced()
    store: synced[LedgerStore] = synced()
    manager: synced[ConversationManager | None] = synced()
    hooks: synced[HookRegistry] = synced()
    token_counter: synced[TokenCounter] = synced()
    context_window_limit: synced[int | None] = synced()
    overflow_errors: synced[tuple[type[BaseException], ...]] = synced()
    max_retries: synced[int] = synced()
    repair: synced[bool] = synced()
    defer_count: synced[bool] = synced()
    app: synced[str | None] = synced()
    user: synced[str | None] = synced()
    view: synced[View] = synced()
    messages: synced[list[Message]] = synced()
    state: synced[ConversationState] = synced()
    version: synced[int] = synced()
    model_call_count: synced[int] = synced()
    agent_state: synced[dict[str, Any]] = synced()

    # -- every method of Conversation, as a coroutine ---------------------------------------

    refresh = coroutine_of(Conversation.refresh)
    _append = coroutine_of(Conversation.append)

    async def append(self, *messages: Message | Mapping[str, Any]) -> list[Message]:
        """:meth:`Conversation.append`'s (the docstring is replaced by it below; inline: see the class)."""
        if self._inline or self._native is not None:
            lane = self._taken_lane(MessageAddedEvent)
            if lane is not None and self._inline:
                return await self._in_lane(lane, self._sync.append, messages, {})
            if lane is not None and self._native is not None:
                return await append_native(self._sync, self._runner, lane, self._native, messages)
        return await self._append(*messages)

    def _taken_lane(self, event: type[HookEvent] | None) -> Lane | None:
        """This conversation's lane, taken, when a call may run without a worker hop; else ``None``.

        Not while another call of the conversation runs or waits (order is kept), nor with a
        callback subscribed to ``event`` (the one the call fires, if any) other than the
        conversation's manager's (a callback may expect to run off the loop; a manager's
        only request reductions, and a reduction that would wait -- a summary to write, a
        lock held elsewhere -- runs again on a worker), nor for the conversation's first
        commit (it claims and lists the session: more than one statement or script).
        """
        sync, runner, lane = self._sync, self._runner, self._lane
        if (
            lane is None
            or runner.closed
            or not sync.version
            or (event is not None and not sync.hooks.heard_only_by(event, sync.manager))
        ):
            return None
        return lane if lane.take() else None

    async def _in_lane(self, lane: Lane, call: Callable[..., R], args: tuple[Any, ...], kwargs: dict[str, Any]) -> R:
        """``call(*args, **kwargs)`` inline in ``lane`` (taken); on a worker, still in the lane, if it would wait."""
        try:
            done = run_inline(call, *args, **kwargs)
        except BaseException:
            self._runner.leave(lane)
            raise
        if isinstance(done, WouldWait):  # nothing was committed: again on a worker, still in the lane
            return await on_worker(self._runner, lane, call, args, kwargs, cancelled=False)
        self._runner.leave(lane)
        return done

    append.__doc__ = Conversation.append.__doc__  # the shell states the sync method's contract, as every other

    pin = coroutine_of(Conversation.pin)
    unpin = coroutine_of(Conversation.unpin)
    pin_index = coroutine_of(Conversation.pin_index)
    set_agent_state = coroutine_of(Conversation.set_agent_state)
    preview = coroutine_of(Conversation.preview)
    reduce = coroutine_of(Conversation.reduce)
    apply_plan = coroutine_of(Conversation.apply_plan)
    undo = coroutine_of(Conversation.undo)
    repair_interrupted_tools = coroutine_of(Conversation.repair_interrupted_tools)
    _edit = coroutine_of(Conversation.edit)
    # Written out: each runs inline when only the manager hears the event it fires (see the class).
    _before_model_call = coroutine_of(Conversation.before_model_call)
    _input_handed = coroutine_of(Conversation.input_handed)
    _after_model_call = coroutine_of(Conversation.after_model_call)
    _after_invocation = coroutine_of(Conversation.after_invocation)

    async def before_model_call(
        self,
        *,
        context_window_limit: int | None = None,
        projected_input_tokens: int | None = None,
        defer_count: bool | None = None,
        handed: bool = True,
    ) -> BeforeModelCallEvent:
        """:meth:`Conversation.before_model_call`'s (the docstring is replaced by it below; inline: see the class)."""
        options: dict[str, Any] = {
            "context_window_limit": context_window_limit,
            "projected_input_tokens": projected_input_tokens,
            "defer_count": defer_count,
            "handed": handed,
        }
        return await self._first_inline(
            BeforeModelCallEvent, self._sync.before_model_call, self._before_model_call, options
        )

    async def input_handed(self) -> None:
        """:meth:`Conversation.input_handed`'s (the docstring is replaced by it below; inline: see the class)."""
        await self._first_inline(None, self._sync.input_handed, self._input_handed, {})  # it sets a flag

    async def after_model_call(self, error: BaseException | None = None) -> bool:
        """:meth:`Conversation.after_model_call`'s (the docstring is replaced by it below; inline: see the class)."""
        return await self._first_inline(
            AfterModelCallEvent, self._sync.after_model_call, self._after_model_call, {"error": error}
        )

    async def edit(self, build: Planner) -> Reduction | None:
        """:meth:`Conversation.edit`'s (the docstring is replaced by it below; inline: see the class)."""
        return await self._first_inline(None, self._sync.edit, self._edit, {"build": build})

    async def after_invocation(self, pending: Planner | None = None) -> None:
        """:meth:`Conversation.after_invocation`'s (the docstring is replaced by it below; inline: see the class)."""
        if pending is not None:  # a write the host owes rides with it: a job on a worker, as before
            await self._after_invocation(pending)
        else:
            await self._first_inline(AfterInvocationEvent, self._sync.after_invocation, self._after_invocation, {})

    async def _first_inline(
        self,
        event: type[HookEvent] | None,
        call: Callable[..., R],
        on_worker: Callable[..., Awaitable[R]],
        options: dict[str, Any],
    ) -> R:
        """``call(**options)`` inline if the lane is free and only the manager hears ``event``, else on a worker."""
        lane = self._taken_lane(event) if self._inline else None
        if lane is None:
            return await on_worker(**options)
        return await self._in_lane(lane, call, (), options)

    for _method in (edit, before_model_call, input_handed, after_model_call, after_invocation):
        _method.__doc__ = getattr(Conversation, _method.__name__).__doc__
    del _method

    projected_input_tokens = coroutine_of(Conversation.projected_input_tokens)
    is_overflow = coroutine_of(Conversation.is_overflow)
    context = coroutine_of(Conversation.context)
    request = coroutine_of(Conversation.request)  # type: ignore[arg-type]  # **overrides could name ``self``

    def __repr__(self) -> str:
        return f"AsyncConversation(session_id={self.session_id!r}, agent_id={self.agent_id!r})"
