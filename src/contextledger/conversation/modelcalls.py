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
from contextledger.telemetry import spans as telemetry

__all__ = ["ModelCalls"]


class ModelCalls:
    """Counts model calls and fires the cycle's events; what they request is reduced by the reducer.

    Attributes:
        transaction: Commits the count (alone or with the next write).
        reader: Builds the events' contexts.
        reducer: Dispatches the events and runs their reductions.
    """

    def __init__(self, transaction: Transaction, reader: Reader, reducer: Reducer) -> None:
        """Drive the cycle of ``transaction``'s conversation."""
        self.transaction, self.reader, self.reducer = transaction, reader, reducer

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
        transaction = self.transaction
        with transaction.lock:
            transaction.announce_call(defer=defer_count)
            context = self.reader.context(projected=projected_input_tokens, limit=context_window_limit)
        try:
            return self.reducer.dispatch(BeforeModelCallEvent(context))
        finally:
            try:
                transaction.commit_count()
            finally:
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
        telemetry.window(self.transaction)
        event = self.reducer.dispatch(AfterModelCallEvent(self.reader.context(error=error)))
        reactive = next((r for r in event.requests if r.trigger == "reactive"), None)
        if reactive is not None and error is not None:
            self.reducer.reactive(reactive, error)
            event.retry_model_call = True
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
