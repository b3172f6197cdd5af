"""``LedgerSession``: the OpenAI Agents SDK's ``Session`` protocol on an :class:`~contextledger.aio.AsyncConversation`.

Every method is a thin shell over the items mapping and the async conversation:

* ``get_items(limit)`` -- the active view as items; ``limit`` keeps the newest items
  without splitting a tool group (:func:`newest_messages`).
* ``add_items(items)`` -- one commit; a reasoning item is linked to the call that follows
  it in the batch, so the two stay together under every manager.
* ``pop_item()`` -- a recorded reduction (strategy ``pop``) evicting the newest entry; it
  leaves the view and stays in the history.
* ``clear_session()`` -- one recorded reduction (strategy ``clear``) evicting the whole
  view; :meth:`AsyncLedger.delete_session` is the way to erase.

Both are recorded exactly as the SDK asked (``as_given``): the view rules that hold a
manager's plans do not second-guess the host's own request.

The session also offers ``before_model_call`` / ``after_model_call``, so
``LedgerRunHooks(session)`` counts model calls and runs per-turn and proactive management
on the same conversation the session reads and writes.

Any loop, any thread: each method is one call of the async API (one hop to a worker
thread of the ledger, see :mod:`contextledger.aio.runner`), and opening is guarded by a
thread lock taken on that worker, so one session serves tasks of several event loops
at once -- the ``Runner.run_sync`` pattern in a threaded web server -- without losing
or reordering a write.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from agents.items import TResponseInputItem
from agents.memory import SessionSettings

from contextledger.aio import AsyncConversation, AsyncLedger
from contextledger.aio.runner import default_runner
from contextledger.changeset import ReductionPlan
from contextledger.conversation import Conversation
from contextledger.errors import ConfigurationError
from contextledger.integrations.openai_agents.items import items_to_messages, messages_to_items, newest_messages
from contextledger.ledger import DEFAULT_URL, open_store
from contextledger.managers.base import ConversationManager
from contextledger.messages import LINKS_KEY, Message
from contextledger.view import View

__all__ = ["LedgerSession"]

logger = logging.getLogger(__name__)


class LedgerSession:
    """An ``agents.memory.Session`` whose items live in a contextledger conversation.

    ``Runner.run(agent, input, session=LedgerSession("user-42", url="sqlite:///agents.db"))``
    works unchanged. The managers manage what ``get_items`` returns, every reduction is
    recorded and queryable (``contextledger evictions``), and nothing is deleted.

    Args:
        session_id: The session (the ledger's ``session_id``).
        ledger: An open :class:`~contextledger.aio.AsyncLedger` (the session does not close it).
        url: A ledger URL to open instead (closed by :meth:`close`); default
            ``sqlite:///contextledger.db`` when neither is given.
        agent_id: The conversation within the session.
        manager: The conversation manager (``None``: the view only grows).
        session_settings: The SDK's settings (``limit`` applies when ``get_items`` gets none).
        **options: Passed to ``AsyncLedger.conversation`` (``token_counter``,
            ``context_window_limit``, ``max_retries``, ...) and, with ``url``, nothing else.

    Raises:
        ConfigurationError: Both ``ledger`` and ``url`` are given, or ``ledger`` is not an
            ``AsyncLedger``.
    """

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        *,
        ledger: AsyncLedger | None = None,
        url: str | None = None,
        agent_id: str = "default",
        manager: ConversationManager | None = None,
        session_settings: SessionSettings | None = None,
        **options: Any,
    ) -> None:
        """Remember where the conversation is; it is opened (read only) on first use."""
        if ledger is not None and url is not None:
            raise ConfigurationError("give LedgerSession a ledger or a url, not both")
        if ledger is not None and not isinstance(ledger, AsyncLedger):
            raise ConfigurationError(f"ledger must be a contextledger.aio.AsyncLedger, got {type(ledger).__name__}")
        self.session_id = session_id
        self.agent_id = agent_id
        self.session_settings = session_settings
        self._ledger = ledger
        self._url = url if ledger is None else None
        self._owns_ledger = ledger is None
        self._options: dict[str, Any] = {"manager": manager, **options}
        self._conversation: AsyncConversation | None = None
        self._opening = threading.Lock()  # taken on a worker thread, never on a loop

    async def conversation(self) -> AsyncConversation:
        """The conversation behind the session (opened on first use; opening only reads).

        Raises:
            ConfigurationError: An option is invalid.
            StoreUnavailable: The ledger could not be reached.
        """
        conversation = self._conversation
        if conversation is None:
            runner = self._ledger.runner if self._ledger is not None else default_runner()
            conversation = await runner.run(self._open)
        return conversation

    def _open(self) -> AsyncConversation:
        """Open the ledger (from the URL) and the conversation once, whichever loop or thread asks first."""
        with self._opening:
            if self._conversation is None:
                if self._ledger is None:
                    self._ledger = AsyncLedger(open_store(self._url or DEFAULT_URL))
                ledger = self._ledger
                sync = ledger.sync.conversation(self.session_id, self.agent_id, **self._options)
                self._conversation = AsyncConversation(sync, ledger.runner)
            return self._conversation

    async def ledger(self) -> AsyncLedger:
        """The ledger the session writes to (for queries: evictions, reductions, ...)."""
        await self.conversation()
        assert self._ledger is not None
        return self._ledger

    # -- the Session protocol --------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The active view as items, oldest first; with ``limit``, the newest items without splitting a tool group.

        Raises:
            ConfigurationError: ``limit`` is not ``None`` or an int >= 0.
        """
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit

        def read(conversation: Conversation) -> list[Any]:
            conversation.refresh()  # another process may have written since
            return messages_to_items(newest_messages(conversation.view, limit))

        items: list[TResponseInputItem] = await (await self.conversation()).run_sync(read)
        return items

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items in one commit (nothing is stored when one is invalid).

        Raises:
            InvalidMessage: An item is not one the mapping can keep losslessly.
        """
        messages = link_reasoning(items_to_messages(items))
        if messages:
            await (await self.conversation()).append(*messages)

    async def pop_item(self) -> TResponseInputItem | None:
        """Take the newest entry out of the view (a recorded ``pop`` reduction) and return its item.

        The item stays in the history. ``None`` when the view is empty.
        """
        conversation = await self.conversation()
        popped: list[Message] = []

        def plan(view: View) -> ReductionPlan | None:
            popped[:] = [view[-1].message] if len(view) else []
            if not popped:
                return None
            return ReductionPlan(strategy="pop", evict=(view[-1].entry_id,), detail="Session.pop_item")

        await conversation.apply_plan(plan, trigger="manual", as_given=True)  # the host asked for exactly this
        if not popped:
            return None
        item: TResponseInputItem = messages_to_items(popped)[-1]  # type: ignore[assignment]
        return item

    async def clear_session(self) -> None:
        """Evict the whole view as one recorded reduction (strategy ``clear``); the history stays."""
        conversation = await self.conversation()

        def plan(view: View) -> ReductionPlan | None:
            if not len(view):
                return None
            return ReductionPlan(strategy="clear", evict=view.ids, detail="Session.clear_session")

        await conversation.apply_plan(plan, trigger="manual", as_given=True)  # the host asked for exactly this

    # -- the model-call cycle, for LedgerRunHooks(session) ------------------------------------

    async def before_model_call(self) -> Any:
        """Count a model call and run per-turn / proactive management (see ``Conversation.before_model_call``)."""
        return await (await self.conversation()).before_model_call()

    async def after_model_call(self, error: BaseException | None = None) -> bool:
        """Report the finished model call (see ``Conversation.after_model_call``)."""
        return await (await self.conversation()).after_model_call(error)

    async def close(self) -> None:
        """Close the ledger when the session opened it (from ``url`` or the default URL)."""
        if self._owns_ledger and self._ledger is not None:
            await self._ledger.close()

    def __repr__(self) -> str:
        return f"LedgerSession(session_id={self.session_id!r}, agent_id={self.agent_id!r})"


def link_reasoning(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with each reasoning message linked to the message after it.

    The Responses API rejects a reasoning item sent without the item that followed it, so
    the two must be kept or evicted whole, pinned together and never split by a summary.
    A reasoning message names the calls of a following tool call under
    ``metadata[LINKS_KEY]``; before any other item, both name the reasoning message's id.
    """
    out = list(messages)
    for index in range(len(out) - 1):
        message, following = out[index], out[index + 1]
        if message.tool_ids or not any("reasoningContent" in block for block in message.content):
            continue
        if following.tool_use_ids:
            out[index] = _linked(message, following.tool_use_ids)
        else:
            out[index] = _linked(message, [message.message_id])
            out[index + 1] = _linked(following, [message.message_id])
    return out


def _linked(message: Message, ids: Sequence[str]) -> Message:
    links = [*message.metadata.get(LINKS_KEY, ()), *ids]
    return Message(
        message_id=message.message_id,
        role=message.role,
        content=list(message.content),
        metadata={**message.metadata, LINKS_KEY: links},
    )
