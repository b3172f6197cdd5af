"""``AsyncConversation``: the coroutine face of :class:`~contextledger.Conversation`.

Each coroutine runs the sync method of the same name in a greenlet (see
:mod:`contextledger.aio.shell`); calls on one ``AsyncConversation`` are serialized by an
:class:`asyncio.Lock`, as the sync conversation's lock serializes threads. Properties
read the last committed state and stay properties.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from contextledger.aio.shell import coroutine_of, run
from contextledger.conversation import Conversation
from contextledger.hooks import HookRegistry
from contextledger.managers.base import ConversationManager
from contextledger.messages import Message
from contextledger.records import ConversationState
from contextledger.stores.base import LedgerStore
from contextledger.tokens import TokenCounter
from contextledger.view import View

__all__ = ["AsyncConversation"]

R = TypeVar("R")


class AsyncConversation:
    """One conversation's active view on the async API; every I/O method is a coroutine.

    Open one with ``await ledger.conversation(...)`` on an
    :class:`~contextledger.aio.AsyncLedger` (or :meth:`open` on a store from
    :func:`~contextledger.aio.open_async_store`). The managers, hook providers, rules
    and errors are the sync conversation's own: this class holds no logic of its own.
    """

    def __init__(self, conversation: Conversation) -> None:
        """Wrap an open sync ``conversation`` whose store runs on asyncio drivers."""
        self._sync = conversation
        self._lock = asyncio.Lock()

    @classmethod
    async def open(
        cls,
        store: LedgerStore,
        session_id: str,
        agent_id: str = "default",
        *,
        manager: ConversationManager | None = None,
        token_counter: TokenCounter | None = None,
        context_window_limit: int | None = None,
        **options: Any,
    ) -> AsyncConversation:
        """Open the conversation (reads only), as :class:`~contextledger.Conversation` does.

        Raises:
            ConfigurationError: An option is invalid.
        """
        conversation = await run(
            Conversation,
            store,
            session_id,
            agent_id,
            manager=manager,
            token_counter=token_counter,
            context_window_limit=context_window_limit,
            **options,
        )
        return cls(conversation)

    async def _call(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        async with self._lock:
            return await run(fn, *args, **kwargs)

    @property
    def sync(self) -> Conversation:
        """The sync conversation this one runs (its methods block: call them only in a greenlet)."""
        return self._sync

    # -- the last committed state ------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session."""
        return self._sync.session_id

    @property
    def agent_id(self) -> str:
        """The agent within the session."""
        return self._sync.agent_id

    @property
    def store(self) -> LedgerStore:
        """The store (on asyncio drivers)."""
        return self._sync.store

    @property
    def manager(self) -> ConversationManager | None:
        """The manager whose hooks are registered."""
        return self._sync.manager

    @property
    def hooks(self) -> HookRegistry:
        """The hook registry (callbacks are sync functions; they run inside the call's greenlet)."""
        return self._sync.hooks

    @property
    def token_counter(self) -> TokenCounter:
        """The per-message token estimator."""
        return self._sync.token_counter

    @property
    def context_window_limit(self) -> int | None:
        """The model's window, used when a caller gives none."""
        return self._sync.context_window_limit

    @property
    def view(self) -> View:
        """The active view as last committed."""
        return self._sync.view

    @property
    def messages(self) -> list[Message]:
        """Copies of the active messages, in order (summaries as user messages)."""
        return self._sync.messages

    @property
    def state(self) -> ConversationState:
        """The state as last committed."""
        return self._sync.state

    @property
    def version(self) -> int:
        """The version last read or committed."""
        return self._sync.version

    @property
    def model_call_count(self) -> int:
        """Model calls so far, including one announced but not yet committed."""
        return self._sync.model_call_count

    @property
    def agent_state(self) -> dict[str, Any]:
        """Host key/value state (a copy)."""
        return self._sync.agent_state

    # -- every method of Conversation, as a coroutine ---------------------------------------

    refresh = coroutine_of(Conversation.refresh)
    append = coroutine_of(Conversation.append)
    pin = coroutine_of(Conversation.pin)
    unpin = coroutine_of(Conversation.unpin)
    pin_index = coroutine_of(Conversation.pin_index)
    set_agent_state = coroutine_of(Conversation.set_agent_state)
    preview = coroutine_of(Conversation.preview)
    reduce = coroutine_of(Conversation.reduce)
    apply_plan = coroutine_of(Conversation.apply_plan)
    repair_interrupted_tools = coroutine_of(Conversation.repair_interrupted_tools)
    edit = coroutine_of(Conversation.edit)
    before_model_call = coroutine_of(Conversation.before_model_call)
    after_model_call = coroutine_of(Conversation.after_model_call)
    after_invocation = coroutine_of(Conversation.after_invocation)
    projected_input_tokens = coroutine_of(Conversation.projected_input_tokens)
    is_overflow = coroutine_of(Conversation.is_overflow)
    context = coroutine_of(Conversation.context)
    request = coroutine_of(Conversation.request)  # type: ignore[arg-type]  # **overrides could name ``self``

    def __repr__(self) -> str:
        return f"AsyncConversation(session_id={self.session_id!r}, agent_id={self.agent_id!r})"
