"""The read side of a :class:`~contextledger.Conversation`: what it last committed, as hooks and managers see it.

:class:`Reader` answers every read from the transaction's committed state, in memory:
the projected input tokens, whether an error is an overflow, and the read-only
:class:`~contextledger.core.hooks.ConversationContext` and
:class:`~contextledger.core.changeset.ReductionRequest` that hooks and managers get.
Nothing here reads the store or writes.
"""

from __future__ import annotations

from typing import Any

from contextledger.conversation.transaction import Transaction
from contextledger.core.building import describe_error
from contextledger.core.changeset import ReductionRequest
from contextledger.core.hooks import ConversationContext
from contextledger.model.records import Trigger

__all__ = ["Reader"]


class Reader:
    """Reads of one conversation as its transaction last committed (or re-read) it.

    Attributes:
        transaction: Whose committed state is read.
        context_window_limit: The model's window, used when a caller gives none.
        overflow_errors: Exception types treated as a context-window overflow.
    """

    def __init__(
        self,
        transaction: Transaction,
        *,
        context_window_limit: int | None,
        overflow_errors: tuple[type[BaseException], ...],
    ) -> None:
        """Read ``transaction``'s state (the settings are checked by the caller)."""
        self.transaction = transaction
        self.context_window_limit = context_window_limit
        self.overflow_errors = overflow_errors

    def projected_input_tokens(self) -> int:
        """Last reported usage plus the estimate of every entry after it."""
        return self.transaction.view.projected_input_tokens

    def is_overflow(self, error: BaseException | None) -> bool:
        """Whether ``error`` is a context-window overflow."""
        return error is not None and isinstance(error, self.overflow_errors)

    def context(
        self, *, error: BaseException | None = None, projected: int | None = None, limit: int | None = None
    ) -> ConversationContext:
        """The read-only context hook events carry (a snapshot of the conversation)."""
        transaction = self.transaction
        view = transaction.view
        return ConversationContext(
            session_id=transaction.session_id,
            agent_id=transaction.agent_id,
            view=view,
            model_call_count=transaction.model_call_count,
            projected_input_tokens=projected if projected is not None else view.projected_input_tokens,
            context_window_limit=limit or self.context_window_limit,
            error=error,
            overflow=self.is_overflow(error),
            version=transaction.state.version,
        )

    def request(self, trigger: Trigger, error: BaseException | None = None, **overrides: Any) -> ReductionRequest:
        """The :class:`ReductionRequest` a manager plans with for ``trigger`` now."""
        return ReductionRequest(
            trigger=trigger,
            error=describe_error(error),
            model_call_count=self.transaction.model_call_count,
            projected_input_tokens=self.projected_input_tokens(),
            context_window_limit=self.context_window_limit,
        ).model_copy(update=overrides)
