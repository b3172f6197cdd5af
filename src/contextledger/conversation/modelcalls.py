"""The model-call cycle of a :class:`~contextledger.Conversation` and its reduction contract.

A host announces each model call (:meth:`ModelCallCycle.before_model_call`), reports
how it ended (:meth:`~ModelCallCycle.after_model_call`) and the end of an invocation
(:meth:`~ModelCallCycle.after_invocation`). Each fires its hook event through the
conversation's dispatch; what the callbacks requested then runs under one of two
contracts (DESIGN semantics 3): a per-turn, proactive or end-of-invocation reduction
is best-effort and never breaks the turn (a skipped one is logged), a reactive one
(after a context overflow) reduces or raises :class:`~contextledger.errors.ReductionFailed`,
at most once per model call.

A caller's own requests live here too: :meth:`ModelCallCycle.reduce` (plan and commit
now) and :meth:`ModelCallCycle.preview` (the plan, written nowhere). The conversation
owns the transaction and the dispatch; this mixin only decides what is asked of them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from contextledger.conversation.reading import ConversationReader
from contextledger.core.changeset import Edit, ReductionPlan, ReductionRequest
from contextledger.core.checks import check_trigger
from contextledger.core.hooks import AfterInvocationEvent, AfterModelCallEvent, BeforeModelCallEvent, HookEvent
from contextledger.core.reduction import log_skipped, plan_reduction
from contextledger.core.view import View
from contextledger.errors import ContextLedgerError, InvalidPlan, ReductionFailed
from contextledger.managers.base import ConversationManager
from contextledger.model.records import Reduction, Trigger
from contextledger.stores.base import LedgerStore
from contextledger.telemetry import spans as telemetry

__all__ = ["ModelCallCycle"]

_E = TypeVar("_E", bound=HookEvent)


class ModelCallCycle(ConversationReader):
    """Reductions asked for: by the cycle's events (counting model calls), by a caller, or previewed."""

    manager: ConversationManager | None
    store: LedgerStore
    _lock: threading.RLock
    _reactive_call: int | None
    _riding: Callable[[View], Edit | None] | None
    _defer_count: bool
    _note: str | None
    _preparing_call: bool  # a call is prepared and its input not handed yet: commits reach that input

    def edit(self, build: Callable[[View], Edit | None]) -> Reduction | None:
        """Commit ``build(view)`` (the conversation's transaction)."""
        raise NotImplementedError  # pragma: no cover - Conversation implements it

    def _dispatch(self, event: _E) -> _E:
        raise NotImplementedError  # pragma: no cover - Conversation implements it

    def _reduce(self, request: ReductionRequest) -> Reduction | None:
        raise NotImplementedError  # pragma: no cover - Conversation implements it

    # -- reductions a caller asks for ---------------------------------------------------------

    def preview(self, trigger: Trigger = "manual") -> ReductionPlan | None:
        """The plan :meth:`reduce` would commit now (tokens estimated), or ``None``; writes nothing.

        A summary the manager would write is named (``removed_ids()``) but not written.

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger.
            InvalidPlan: The manager's plan breaks the view rules beyond correction.
        """
        check_trigger(trigger)
        if self.manager is None:
            return None
        with self._lock:
            return plan_reduction(self.manager, self._view, self.request(trigger), self.token_counter).plan

    def reduce(self, trigger: Trigger = "manual", *, error: BaseException | None = None) -> Reduction | None:
        """Ask the manager for a plan now and commit it; ``None`` when nothing changed.

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger.
            InvalidPlan: The manager's plan breaks the view rules beyond correction.
            ReductionFailed: The summarizer failed.
        """
        check_trigger(trigger)
        return self._reduce(self.request(trigger, error))

    def before_model_call(
        self,
        *,
        context_window_limit: int | None = None,
        projected_input_tokens: int | None = None,
        defer_count: bool = False,
        handed: bool = True,
    ) -> BeforeModelCallEvent:
        """Count the model call, fire :class:`BeforeModelCallEvent`, run what it requested.

        The first commit (a requested reduction, else the count alone) carries the new
        count; requested reductions are best-effort and never break the turn. With
        ``defer_count`` a count nothing committed waits for the next commit (the host's
        next message) instead of a commit of its own: one commit fewer per turn, and a
        crash during the model call loses that call's count.

        What commits while a call is prepared is stamped as part of its input (time
        travel: :func:`~contextledger.history.travel.view_at`); what commits after it, as part
        of the next call's. By default the input is handed to the model when this
        returns. A host that still adds to the input afterwards (Strands appends hook
        input after its ``BeforeModelCallEvent``) passes ``handed=False`` and calls
        :meth:`input_handed` where it really hands the input over; until then every commit
        belongs to this call's input, and a call prepared again before it was handed
        (a Strands interrupt, resumed) is the same call, not counted twice.
        """
        with self._lock:
            if not self._preparing_call:  # a call prepared but never handed is prepared again
                self._pending_calls += 1
            self._defer_count = defer_count
            self._preparing_call = True
            context = self.context(projected=projected_input_tokens, limit=context_window_limit)
        try:
            return self._dispatch(BeforeModelCallEvent(context))
        finally:
            try:
                if self._pending_calls and not defer_count:
                    self.edit(lambda _view: None)
            finally:
                self._preparing_call = not handed

    def input_handed(self) -> None:
        """Note that the host handed the prepared call's input to the model.

        Only needed after ``before_model_call(handed=False)``: from now on commits reach
        the next call's input. :meth:`after_model_call` implies it; calling it when no
        call is prepared changes nothing.
        """
        with self._lock:
            self._preparing_call = False

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
        self.input_handed()  # the call is over: whatever commits now reaches the next one
        telemetry.window(self)
        event = self._dispatch(AfterModelCallEvent(self.context(error=error)))
        reactive = next((r for r in event.requests if r.trigger == "reactive"), None)
        if reactive is not None and error is not None:
            self._reduce_reactive(reactive, error)
            event.retry_model_call = True
        if event.retry_model_call:
            return True
        if error is not None and self.is_overflow(error):
            raise error
        return False

    def after_invocation(self, pending: Callable[[View], Edit | None] | None = None) -> None:
        """Fire :class:`AfterInvocationEvent` (end-of-invocation management).

        ``pending`` builds a write the host still owes (the final answer) for a view: the
        reductions requested plan on the view it leaves, and it is committed with the
        first of them -- one commit for the answer and the management -- or alone when
        none commits (or when a reduction would touch what it appends).
        """
        self._riding = pending
        try:
            self._dispatch(AfterInvocationEvent(self.context()))
        finally:
            riding, self._riding = self._riding, None
            if riding is not None:
                self.edit(riding)

    def _reduce_best_effort(self, request: ReductionRequest) -> bool:
        try:
            reduction = self._reduce(request)
        except Exception as exc:  # best-effort by contract: the turn must go on
            self._warn(
                request.trigger, f"{type(exc).__name__}: {exc}", exc_info=not isinstance(exc, ContextLedgerError)
            )
            return False
        if reduction is None and self._note:
            self._warn(request.trigger, self._note)
        return reduction is not None

    def _reduce_reactive(self, request: ReductionRequest, error: BaseException) -> None:
        call = self.model_call_count
        if self._reactive_call == call:
            raise ReductionFailed(
                f"session_id={self.session_id} agent_id={self.agent_id}: model call {call} was already reduced once;"
                " count the retried call with before_model_call()"
            ) from error
        try:
            reduction = self._reduce(request)
        except InvalidPlan as exc:
            raise ReductionFailed(f"session_id={self.session_id} agent_id={self.agent_id}: {exc}") from exc
        if reduction is None:
            raise ReductionFailed(
                f"session_id={self.session_id} agent_id={self.agent_id}: the context window overflowed and the"
                f" {getattr(self.manager, 'name', 'manager')} manager found nothing left to reduce"
                f" ({len(self._view)} entries: {self._note or 'all protected, pinned or too recent'})"
            ) from error
        self._reactive_call = call

    def _warn(self, trigger: str, reason: str, *, exc_info: bool = False) -> None:
        log_skipped(self.session_id, self.agent_id, getattr(self.manager, "name", None), trigger, reason, exc_info)
