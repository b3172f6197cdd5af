"""The read side of a :class:`~contextledger.conversation.conversation.Conversation`: settings, last committed state.

:class:`Accessors` is the base class of ``Conversation``. It holds the collaborators those
are read from -- the :class:`~contextledger.conversation.transaction.Transaction` (the
committed state and the commit loop's settings), the
:class:`~contextledger.conversation.reading.Reader` (the window, overflow errors,
contexts and requests) and :class:`~contextledger.conversation.modelcalls.ModelCalls`
(whether counts are deferred) -- and states each setting and each read once, as a
property or a method that hands over to one of them. Nothing here writes: the settings
that can be changed only change what later calls do, and :meth:`Accessors.refresh`
reads the store again. ``Conversation`` adds the hooks and every write.
"""

from __future__ import annotations

from typing import Any

from contextledger.conversation.modelcalls import ModelCalls
from contextledger.conversation.reading import Reader
from contextledger.conversation.transaction import Transaction
from contextledger.core.changeset import ReductionRequest
from contextledger.core.hooks import ConversationContext
from contextledger.core.view import View
from contextledger.managers.base import ConversationManager
from contextledger.model.messages import Message
from contextledger.model.records import ConversationState, Trigger
from contextledger.model.tokens import TokenCounter
from contextledger.stores.base import LedgerStore

__all__ = ["Accessors"]


class Accessors:
    """A conversation's settings and last committed state, read from the collaborators that hold them.

    Attributes:
        transaction: The commit loop and the state it last committed.
    """

    def __init__(self, transaction: Transaction, reader: Reader, calls: ModelCalls) -> None:
        """Read through ``transaction``, ``reader`` and ``calls`` (the conversation's own)."""
        self.transaction = transaction
        self._reader = reader
        self._calls = calls

    # -- settings ------------------------------------------------------------------------

    @property
    def store(self) -> LedgerStore:
        """Where the ledger lives."""
        return self.transaction.store

    @property
    def session_id(self) -> str:
        """The session."""
        return self.transaction.session_id

    @property
    def agent_id(self) -> str:
        """The agent within the session."""
        return self.transaction.agent_id

    @property
    def app(self) -> str | None:
        """The app named by the commit that creates the session."""
        return self.transaction.app

    @property
    def user(self) -> str | None:
        """The user named by the commit that creates the session."""
        return self.transaction.user

    @property
    def manager(self) -> ConversationManager | None:
        """The policy whose hooks are registered."""
        return self.transaction.manager

    @property
    def token_counter(self) -> TokenCounter:
        """Estimates per-message tokens."""
        return self.transaction.token_counter

    @property
    def max_retries(self) -> int:
        """Conflict retries per commit."""
        return self.transaction.max_retries

    @max_retries.setter
    def max_retries(self, value: int) -> None:
        self.transaction.max_retries = value

    @property
    def repair(self) -> bool:
        """Whether a view left mid-tool is repaired inside the next real write."""
        return self.transaction.repair

    @repair.setter
    def repair(self, value: bool) -> None:
        self.transaction.repair = value

    @property
    def defer_count(self) -> bool:
        """Whether a model call's count rides with the next commit unless :meth:`before_model_call` says otherwise."""
        return self._calls.defer_count

    @defer_count.setter
    def defer_count(self, value: bool) -> None:
        self._calls.defer_count = value

    @property
    def context_window_limit(self) -> int | None:
        """The model's window, used when a caller gives none."""
        return self._reader.context_window_limit

    @context_window_limit.setter
    def context_window_limit(self, value: int | None) -> None:
        self._reader.context_window_limit = value

    @property
    def overflow_errors(self) -> tuple[type[BaseException], ...]:
        """Exception types treated as a context-window overflow."""
        return self._reader.overflow_errors

    @overflow_errors.setter
    def overflow_errors(self, value: tuple[type[BaseException], ...]) -> None:
        self._reader.overflow_errors = value

    # -- reading -------------------------------------------------------------------------

    @property
    def view(self) -> View:
        """The active view as last committed."""
        return self.transaction.view

    @property
    def messages(self) -> list[Message]:
        """The active messages, in order (summaries as user messages).

        Messages are immutable, so the list (new on each call) shares them with the view.
        """
        return list(self.transaction.view.messages)

    @property
    def state(self) -> ConversationState:
        """The state as last committed."""
        return self.transaction.state

    @property
    def version(self) -> int:
        """The version last read or committed (0 before the first commit)."""
        return self.transaction.state.version

    @property
    def model_call_count(self) -> int:
        """Model calls so far, including one announced but not yet committed."""
        return self.transaction.model_call_count

    @property
    def agent_state(self) -> dict[str, Any]:
        """Host key/value state (a copy)."""
        return dict(self.transaction.state.agent_state or {})

    def projected_input_tokens(self) -> int:
        """Last reported usage plus the estimate of every entry after it."""
        return self._reader.projected_input_tokens()

    def is_overflow(self, error: BaseException | None) -> bool:
        """Whether ``error`` is a context-window overflow."""
        return self._reader.is_overflow(error)

    def context(
        self, *, error: BaseException | None = None, projected: int | None = None, limit: int | None = None
    ) -> ConversationContext:
        """The read-only context hook events carry (a snapshot of this conversation)."""
        return self._reader.context(error=error, projected=projected, limit=limit)

    def request(self, trigger: Trigger, error: BaseException | None = None, **overrides: Any) -> ReductionRequest:
        """The :class:`ReductionRequest` a manager plans with for ``trigger`` now."""
        return self._reader.request(trigger, error, **overrides)

    def refresh(self) -> None:
        """Re-read state and active view from the store: one read of the state, and of the view when it moved.

        Another process's commit or erasure moves the stored version; an unmoved
        conversation keeps the view held (see ``Transaction.refresh``).
        """
        self.transaction.refresh()
