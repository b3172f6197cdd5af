"""The model-call cycle of a :class:`~contextledger.Conversation`.

A host announces each model call (:meth:`ModelCalls.before_model_call`), reports how it
ended (:meth:`~ModelCalls.after_model_call`) and the end of an invocation
(:meth:`~ModelCalls.after_invocation`). Each fires its hook event through the
:class:`~contextledger.conversation.reducer.Reducer`, which runs what the callbacks
requested; the count itself is the :class:`~contextledger.conversation.transaction.Transaction`'s
to commit. This class only decides what is asked of them, and when.
"""

from __future__ import annotations

from contextledger.conversation.reading import Reader
from contextledger.conversation.reducer import Reducer
from contextledger.conversation.transaction import Planner, Transaction
from contextledger.core.hooks import AfterInvocationEvent, AfterModelCallEvent, BeforeModelCallEvent
from contextledger.core.seam import WouldWait
from contextledger.managers.repair import needs_repair
from contextledger.telemetry import spans as telemetry

__all__ = ["ModelCalls"]


class ModelCalls:
    """Counts model calls and fires the cycle's events; what they request is reduced by the reducer.

    Attributes:
        transaction: Commits the count (alone or with the next write).
        reader: Builds the events' contexts.
        reducer: Dispatches the events and runs their reductions.
        defer_count: What :meth:`before_model_call` does when its caller does not say:
            ``True`` -- the count rides with the next commit (no commit of its own when
            nothing else is written); ``False`` -- a count nothing else committed is
            committed on its own before the call.
    """

    def __init__(
        self, transaction: Transaction, reader: Reader, reducer: Reducer, *, defer_count: bool = False
    ) -> None:
        """Drive the cycle of ``transaction``'s conversation."""
        self.transaction, self.reader, self.reducer = transaction, reader, reducer
        self.defer_count = defer_count

    def before_model_call(
        self,
        *,
        context_window_limit: int | None = None,
        projected_input_tokens: int | None = None,
        defer_count: bool | None = None,
        handed: bool = True,
    ) -> BeforeModelCallEvent:
        """Count the model call, fire :class:`BeforeModelCallEvent`, run what it requested.

        See :meth:`contextledger.Conversation.before_model_call`; ``defer_count=None``
        takes :attr:`defer_count`, except that a view left mid-tool is repaired (and the
        count committed with the repair) before the call.
        """
        transaction = self.transaction
        with transaction.lock:
            if defer_count is None:
                # By default a view left mid-tool is repaired before the call, with its count: the
                # model must not get a toolUse without its result. A host deferring explicitly
                # shows the repaired view itself and lets its next write record the repair.
                defer_count = self.defer_count and not (transaction.repair and needs_repair(transaction.view))
            transaction.announce_call(defer=defer_count)
            context = self.reader.context(projected=projected_input_tokens, limit=context_window_limit)
        try:
            event = self.reducer.dispatch(BeforeModelCallEvent(context))
        except WouldWait:
            raise  # inline, a reduction would have waited: as in _count, the call stays announced and prepared
        except BaseException:
            self._count(handed)
            raise
        self._count(handed)
        return event

    def _count(self, handed: bool) -> None:
        """Commit the announced call's count unless deferred; the call is prepared until handed."""
        transaction = self.transaction
        try:
            transaction.commit_count()
        except WouldWait:
            # Run inline by the async API, the commit would have waited: nothing was
            # committed, and the call stays announced and prepared, so its run on a worker
            # counts it once (announce_call does not count a prepared call again).
            raise
        except BaseException:
            transaction.calls.preparing = not handed
            raise
        transaction.calls.preparing = not handed

    def input_handed(self) -> None:
        """Note that the host handed the prepared call's input to the model.

        Only needed after ``before_model_call(handed=False)``: from now on commits reach
        the next call's input. :meth:`after_model_call` implies it; calling it when no
        call is prepared changes nothing.
        """
        with self.transaction.lock:
            self.transaction.calls.preparing = False

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
        ended = self.transaction.view  # the window the call ended with, before any reduction
        waited = False
        try:
            event = self.reducer.dispatch(AfterModelCallEvent(self.reader.context(error=error)))
            reactive = next((r for r in event.requests if r.trigger == "reactive"), None)
            if reactive is not None and error is not None:
                self.reducer.reactive(reactive, error)
                event.retry_model_call = True
        except WouldWait:
            waited = True  # inline, a reduction would have waited: the worker's run records the window
            raise
        finally:
            if not waited:
                telemetry.window(self.transaction, ended)
        if event.retry_model_call:
            return True
        if error is not None and self.reader.is_overflow(error):
            raise error
        return False

    def after_invocation(self, pending: Planner | None = None) -> None:
        """Fire :class:`AfterInvocationEvent` (end-of-invocation management).

        ``pending`` builds a write the host still owes (the final answer) for a view: the
        reductions requested plan on the view it leaves, and it is committed with the
        first of them -- one commit for the answer and the management -- or alone when
        none commits (or when a reduction would touch what it appends).
        """
        with self.transaction.riding(pending):
            self.reducer.dispatch(AfterInvocationEvent(self.reader.context()))
