"""The read side of a :class:`~contextledger.Conversation`: what it last committed.

:class:`ConversationReader` holds the committed state and active view of one
(session_id, agent_id) and answers every read from memory: the view, the counts, the
projected input tokens, and the read-only :class:`~contextledger.core.hooks.ConversationContext`
and :class:`~contextledger.core.changeset.ReductionRequest` that hooks and managers get.
Nothing here reads the store or writes; the conversation's transaction loop replaces
``_state`` and ``_view`` after each commit or re-read.
"""

from __future__ import annotations

from typing import Any

from contextledger.core.changeset import ReductionRequest, describe_error
from contextledger.core.hooks import ConversationContext
from contextledger.core.view import View
from contextledger.model.messages import Message
from contextledger.model.records import ConversationState, Trigger
from contextledger.model.tokens import TokenCounter

__all__ = ["ConversationReader"]


class ConversationReader:
    """Reads of one conversation as last committed (or re-read) by its owner.

    Attributes:
        session_id: The session.
        agent_id: The agent within the session.
        token_counter: Estimates per-message tokens.
        context_window_limit: The model's window, used when a caller gives none.
        overflow_errors: Exception types treated as a context-window overflow.
    """

    session_id: str
    agent_id: str
    token_counter: TokenCounter
    context_window_limit: int | None
    overflow_errors: tuple[type[BaseException], ...]
    _state: ConversationState
    _view: View
    _pending_calls: int

    @property
    def view(self) -> View:
        """The active view as last committed."""
        return self._view

    @property
    def messages(self) -> list[Message]:
        """The active messages, in order (summaries as user messages).

        Messages are immutable, so the list (new on each call) shares them with the view.
        """
        return list(self._view.messages)

    @property
    def state(self) -> ConversationState:
        """The state as last committed."""
        return self._state

    @property
    def version(self) -> int:
        """The version last read or committed (0 before the first commit)."""
        return self._state.version

    @property
    def model_call_count(self) -> int:
        """Model calls so far, including one announced but not yet committed."""
        return self._state.model_call_count + self._pending_calls

    @property
    def agent_state(self) -> dict[str, Any]:
        """Host key/value state (a copy)."""
        return dict(self._state.agent_state or {})

    def projected_input_tokens(self) -> int:
        """Last reported usage plus the estimate of every entry after it."""
        return self._view.projected_input_tokens

    def is_overflow(self, error: BaseException | None) -> bool:
        """Whether ``error`` is a context-window overflow."""
        return error is not None and isinstance(error, self.overflow_errors)

    def context(
        self, *, error: BaseException | None = None, projected: int | None = None, limit: int | None = None
    ) -> ConversationContext:
        """The read-only context hook events carry (a snapshot of this conversation)."""
        return ConversationContext(
            session_id=self.session_id,
            agent_id=self.agent_id,
            view=self._view,
            model_call_count=self.model_call_count,
            projected_input_tokens=projected if projected is not None else self.projected_input_tokens(),
            context_window_limit=limit or self.context_window_limit,
            error=error,
            overflow=self.is_overflow(error),
            version=self.version,
        )

    def request(self, trigger: Trigger, error: BaseException | None = None, **overrides: Any) -> ReductionRequest:
        """The :class:`ReductionRequest` a manager plans with for ``trigger`` now."""
        return ReductionRequest(
            trigger=trigger,
            error=describe_error(error),
            model_call_count=self.model_call_count,
            projected_input_tokens=self.projected_input_tokens(),
            context_window_limit=self.context_window_limit,
        ).model_copy(update=overrides)
