"""``LedgerChatMessageHistory``: LangChain's ``BaseChatMessageHistory`` on a ledger conversation.

For ``RunnableWithMessageHistory`` and other code written against LangChain's chat
history interface:

* ``messages`` / ``aget_messages()`` -- the active view (re-read, so another process's
  writes show), summaries as ``HumanMessage``;
* ``add_messages`` / ``aadd_messages`` -- one commit, every message kept losslessly (see
  :mod:`contextledger.integrations.langchain.convert`); with a manager, its
  end-of-invocation management runs after each add, recorded like every reduction;
* ``clear`` / ``aclear`` -- one recorded reduction (strategy ``clear``) that evicts the
  whole view; the history stays queryable and ``Ledger.delete_session`` erases.

Give a :class:`~contextledger.Ledger` (the async methods then run its calls in a worker
thread) or an :class:`~contextledger.aio.AsyncLedger` (the async methods await it; the
sync ones refuse, since they would block its event loop).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

from contextledger.aio import AsyncConversation, AsyncLedger
from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import ReductionPlan
from contextledger.core.view import View
from contextledger.errors import ConfigurationError
from contextledger.integrations.langchain.convert import ViewRenderer, to_ledgers
from contextledger.ledger import Ledger
from contextledger.managers.base import ConversationManager

__all__ = ["LedgerChatMessageHistory"]


class LedgerChatMessageHistory(BaseChatMessageHistory):
    """A chat message history whose messages live in a contextledger conversation.

    Args:
        session_id: The session (the ledger's ``session_id``).
        ledger: An open :class:`~contextledger.Ledger` or :class:`~contextledger.aio.AsyncLedger`
            (the history does not close it).
        agent_id: The conversation within the session.
        manager: The conversation manager (``None``: the view only grows).
        **options: Passed to the ledger's ``conversation`` (``token_counter``, ...).

    Raises:
        ConfigurationError: ``ledger`` is neither a ``Ledger`` nor an ``AsyncLedger``.
    """

    def __init__(
        self,
        session_id: str,
        *,
        ledger: Ledger | AsyncLedger,
        agent_id: str = "default",
        manager: ConversationManager | None = None,
        **options: Any,
    ) -> None:
        """Remember where the conversation is; it is opened (read only) on first use."""
        super().__init__()
        if not isinstance(ledger, Ledger | AsyncLedger):
            raise ConfigurationError(
                f"ledger must be a contextledger.Ledger or contextledger.aio.AsyncLedger, got {type(ledger).__name__}"
            )
        self.session_id = session_id
        self.agent_id = agent_id
        self.ledger = ledger
        self._options: dict[str, Any] = {"manager": manager, **options}
        self._sync: Conversation | None = None
        self._async: AsyncConversation | None = None
        self._render = ViewRenderer()
        self._opening = threading.Lock()
        self._aopening = asyncio.Lock()

    # -- the conversation ----------------------------------------------------------------

    def conversation(self) -> Conversation:
        """The sync conversation behind the history (opened on first use; opening only reads).

        Raises:
            ConfigurationError: The history was given an ``AsyncLedger`` (use the async methods).
        """
        if not isinstance(self.ledger, Ledger):
            raise ConfigurationError(
                "this history was given an AsyncLedger: use aget_messages/aadd_messages/aclear, or give it a Ledger"
            )
        with self._opening:
            if self._sync is None:
                self._sync = self.ledger.conversation(self.session_id, self.agent_id, **self._options)
                self._render = self._shared_renderer()
            return self._sync

    async def aconversation(self) -> AsyncConversation | Conversation:
        """The conversation the async methods use: the async one on an ``AsyncLedger``, else the sync one."""
        if not isinstance(self.ledger, AsyncLedger):
            return await asyncio.to_thread(self.conversation)
        async with self._aopening:
            if self._async is None:
                self._async = await self.ledger.conversation(self.session_id, self.agent_id, **self._options)
                self._render = self._shared_renderer()
            return self._async

    def _shared_renderer(self) -> ViewRenderer:
        """The renderer kept with the view the ledger shares for this conversation (made by the history before).

        A history object made per call (``RunnableWithMessageHistory``) then renders only
        the messages the one before did not. A renderer replaces what it holds and hands
        out copies, so objects of any thread may share it.
        """
        key = (self.session_id, self.agent_id)
        return self.ledger.shared_views.companion(key, "langchain", ViewRenderer)

    # -- BaseChatMessageHistory ---------------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]  # a read-only property of the base's attribute
        """The active view as LangChain messages, oldest first."""
        opened = self._sync is not None
        conversation = self.conversation()
        if opened:
            conversation.refresh()  # another process may have written since it was opened
        return self._render(conversation.view)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` in one commit (nothing is stored when one is invalid), then manage the window.

        Raises:
            InvalidMessage: A message cannot be kept losslessly.
        """
        stored = to_ledgers(messages)
        if stored:
            conversation = self.conversation()
            conversation.append(*stored)
            if conversation.manager is not None:
                conversation.after_invocation()

    def clear(self) -> None:
        """Evict the whole view as one recorded reduction (strategy ``clear``); the history stays."""
        self.conversation().apply_plan(_clear, trigger="manual", as_given=True)

    async def aget_messages(self) -> list[BaseMessage]:
        """:attr:`messages`, awaited."""
        opened = self._async is not None
        conversation = await self.aconversation()
        if isinstance(conversation, Conversation):
            return await asyncio.to_thread(lambda: self.messages)
        if opened:
            await conversation.refresh()  # another process may have written since it was opened
        return self._render(conversation.view)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """:meth:`add_messages`, awaited."""
        conversation = await self.aconversation()
        if isinstance(conversation, Conversation):
            await asyncio.to_thread(self.add_messages, messages)
            return
        stored = to_ledgers(messages)
        if stored:
            await conversation.append(*stored)
            if conversation.manager is not None:
                await conversation.after_invocation()

    async def aclear(self) -> None:
        """:meth:`clear`, awaited."""
        conversation = await self.aconversation()
        if isinstance(conversation, Conversation):
            await asyncio.to_thread(self.clear)
            return
        await conversation.apply_plan(_clear, trigger="manual", as_given=True)

    def __repr__(self) -> str:
        return f"LedgerChatMessageHistory(session_id={self.session_id!r}, agent_id={self.agent_id!r})"


def _clear(view: View) -> ReductionPlan | None:
    if not len(view):
        return None
    return ReductionPlan(strategy="clear", evict=tuple(view.ids), detail="BaseChatMessageHistory.clear")
