"""``LedgerHistory``: a Pydantic AI agent's message history kept and managed by the ledger.

One object per session, usable three ways:

* as a **capability** -- ``Agent(model, capabilities=[history])``: before each model
  request the run's messages are mirrored into the ledger, the call is counted, the
  manager's per-turn and proactive reductions run, and the request (and the run's
  history) become the active view -- what ``view_at(model_call=N)`` gives back later. On
  ``ModelContextWindowExceededError`` (or the ``overflow_errors`` given) the manager
  reduces reactively and the request is attempted again (``RetryModelRequest``), or
  :class:`~contextledger.errors.ReductionFailed` is raised. After the run its last answer
  is committed and the end-of-invocation management runs. A run given no
  ``message_history`` continues the conversation from the ledger. Each answer is
  committed as soon as Pydantic AI has completed it (after its model request node,
  before a tool it calls runs), with the call's count;
* as a **history processor** -- ``ProcessHistory(history.process)``: the same management
  before each request, without the retry on overflow and the commit after the run (call
  :meth:`LedgerHistory.save` with the result's messages);
* as **storage** -- :meth:`LedgerHistory.messages` for ``message_history=``,
  :meth:`LedgerHistory.save` for ``result.all_messages()`` and :meth:`LedgerHistory.extend`
  for ``result.new_messages()``.

Pydantic AI messages carry no id: each is matched to the entry it was read from by its
JSON (as ``ModelMessagesTypeAdapter`` dumps it); one that matches none is new, and one
that stands between two matched messages in place of an entry is that entry, edited.
What the host removed, edited or added between two calls is mirrored into the ledger
(:mod:`contextledger.integrations.mirror`, strategy ``pydantic_ai:host``).

What a crash loses: during a model request, that request's count (it rides with the
answer's commit); never a prompt, an answer or a tool result already committed. A
process killed while a tool runs leaves the call without its result; the next write
repairs it (an interrupted result, recorded). The ledger is read and written through
the async API (:class:`~contextledger.aio.AsyncConversation`); one run at a time per object.
"""

from __future__ import annotations

import asyncio
import logging
import operator
from collections.abc import Sequence
from typing import Any

from pydantic_ai import ModelRequestNode, RetryModelRequest
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tools import RunContext

from contextledger.aio import AsyncConversation, AsyncLedger
from contextledger.core.changeset import Edit
from contextledger.core.view import View
from contextledger.errors import ConfigurationError
from contextledger.integrations.mirror import match_ids, plan_mirror
from contextledger.integrations.pydantic_ai.convert import dump, rendered, to_ledger, tool_names_of
from contextledger.ledger import DEFAULT_URL
from contextledger.managers.base import ConversationManager
from contextledger.model.messages import Message, new_message_id

__all__ = ["HOST_STRATEGY", "LedgerHistory"]

logger = logging.getLogger(__name__)

HOST_STRATEGY = "pydantic_ai:host"
"""The strategy of a reduction that mirrors what the host did to the run's messages."""


class LedgerHistory(AbstractCapability[Any]):
    """A session's Pydantic AI message history in the ledger; a capability that manages it.

    Args:
        session_id: The session (the ledger's ``session_id``).
        ledger: An open :class:`~contextledger.aio.AsyncLedger` (not closed by :meth:`close`).
        url: A ledger URL to open instead (closed by :meth:`close`); default
            ``sqlite:///contextledger.db`` when neither is given.
        agent_id: The conversation within the session.
        manager: The conversation manager (``None``: the view only grows).
        overflow_errors: Exception types besides ``ModelContextWindowExceededError``
            that mean the input was too long.
        **options: Passed to ``AsyncLedger.conversation`` (``context_window_limit``,
            ``token_counter``, ``max_retries``, ...).

    Raises:
        ConfigurationError: Both ``ledger`` and ``url`` are given, or ``ledger`` is not an
            ``AsyncLedger``.
    """

    def __init__(
        self,
        session_id: str,
        *,
        ledger: AsyncLedger | None = None,
        url: str | None = None,
        agent_id: str = "default",
        manager: ConversationManager | None = None,
        overflow_errors: tuple[type[BaseException], ...] = (),
        **options: Any,
    ) -> None:
        """Remember where the conversation is; it is opened (read only) on first use."""
        if ledger is not None and url is not None:
            raise ConfigurationError("give LedgerHistory a ledger or a url, not both")
        if ledger is not None and not isinstance(ledger, AsyncLedger):
            raise ConfigurationError(f"ledger must be a contextledger.aio.AsyncLedger, got {type(ledger).__name__}")
        self.session_id = session_id
        self.agent_id = agent_id
        self._ledger = ledger
        self._url = url if ledger is None else None
        self._options: dict[str, Any] = {
            "manager": manager,
            "overflow_errors": (ModelContextWindowExceededError, *overflow_errors),
            **options,
        }
        self._conversation: AsyncConversation | None = None
        self._opening = asyncio.Lock()
        self._rendered: dict[str, tuple[Message, ModelMessage, str]] = {}
        # The view rendered last (walked once), its messages and the renderings they came from.
        self._last_render: tuple[View, list[ModelMessage], dict[str, Any]] | None = None
        self._sent_version: int | None = None

    # -- the conversation ----------------------------------------------------------------

    async def conversation(self) -> AsyncConversation:
        """The conversation behind the history (opened on first use; opening only reads).

        Raises:
            ConfigurationError: An option is invalid.
            StoreUnavailable: The ledger could not be reached.
        """
        async with self._opening:
            if self._conversation is None:
                if self._ledger is None:
                    self._ledger = await AsyncLedger.connect(self._url or DEFAULT_URL)
                self._conversation = await self._ledger.conversation(self.session_id, self.agent_id, **self._options)
            return self._conversation

    async def ledger(self) -> AsyncLedger:
        """The ledger the history writes to (for queries: ``view_at``, reductions, evictions)."""
        await self.conversation()
        assert self._ledger is not None
        return self._ledger

    async def close(self) -> None:
        """Close the ledger when the history opened it from a URL."""
        if self._url is not None and self._ledger is not None:
            await self._ledger.close()

    # -- storage -------------------------------------------------------------------------

    async def messages(self) -> list[ModelMessage]:
        """The active view as Pydantic AI messages, for ``message_history=`` (re-read from the ledger)."""
        opened = self._conversation is not None
        conversation = await self.conversation()
        if opened:
            await conversation.refresh()  # another process may have written since it was opened
        return self._render(conversation.view)

    async def save(self, messages: Sequence[ModelMessage]) -> None:
        """Bring the ledger in line with ``messages`` (e.g. ``result.all_messages()``) in one commit.

        New messages are appended; what ``messages`` no longer holds or holds edited is
        recorded as a ``pydantic_ai:host`` reduction. Saving the same list again writes nothing.

        Raises:
            InvalidMessage: A message cannot be kept losslessly.
        """
        await self._mirror(await self.conversation(), list(messages))

    async def extend(self, messages: Sequence[ModelMessage]) -> None:
        """Append ``messages`` (e.g. ``result.new_messages()``) as new entries, in one commit.

        Unlike :meth:`save`, nothing is compared with the view: each message is appended.

        Raises:
            InvalidMessage: A message cannot be kept losslessly; nothing is appended.
        """
        stored = [to_ledger(d, new_message_id()) for d in dump(messages)]
        if stored:
            await (await self.conversation()).append(*stored)

    # -- the history processor -----------------------------------------------------------------

    async def process(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        """A history processor: mirror ``messages``, count the model call, manage; the active view.

        Use it as ``ProcessHistory(history.process)``, or give the history itself as a
        capability (which adds the retry on overflow and the commit after the run).
        """
        conversation = await self.conversation()
        await self._mirror(conversation, messages, run_id=ctx.run_id)
        await conversation.before_model_call(defer_count=True)  # the count rides with the next commit
        self._sent_version = conversation.version
        return self._render(conversation.view)

    # -- the capability's hooks --------------------------------------------------------------

    async def before_run(self, ctx: RunContext[Any]) -> None:
        """Re-read the conversation when it is open: another process may have written since the last run."""
        if self._conversation is not None:
            await self._conversation.refresh()

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Manage the request's messages and make the view the run's history (see the module docstring)."""
        view = await self.process(ctx, list(request_context.messages))
        ctx.messages[:] = view
        request_context.messages = list(view)
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Send the view a reactive reduction left, on the attempt after it."""
        conversation = await self.conversation()
        if self._sent_version is not None and conversation.version != self._sent_version:
            view = self._render(conversation.view)
            ctx.messages[:] = view
            request_context.messages = list(view)
            self._sent_version = conversation.version
        return request_context

    async def on_model_request_error(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, error: Exception
    ) -> Any:
        """Reduce reactively after a context overflow and attempt the request again, or raise.

        Raises:
            RetryModelRequest: The view was reduced; Pydantic AI attempts the request again.
            ReductionFailed: The context overflowed and nothing could be reduced.
        """
        conversation = await self.conversation()
        if not await conversation.after_model_call(error):  # an overflow it cannot reduce raises here
            raise error
        await conversation.before_model_call(defer_count=True)  # the retried request is a call of its own
        raise RetryModelRequest()

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: Any
    ) -> Any:
        """Report the finished model call (the answer is committed once complete, see :meth:`after_node_run`)."""
        await (await self.conversation()).after_model_call()
        return response

    async def after_node_run(self, ctx: RunContext[Any], *, node: Any, result: Any) -> Any:
        """Commit a model request's answer once Pydantic AI has completed it (a tool call before its tool runs)."""
        if isinstance(node, ModelRequestNode):
            await self._mirror(await self.conversation(), list(ctx.messages))
        return result

    async def after_run(self, ctx: RunContext[Any], *, result: AgentRunResult[Any]) -> AgentRunResult[Any]:
        """Commit what the run holds beyond the ledger (nothing, usually) and run the end-of-invocation management."""
        conversation = await self.conversation()
        await self._mirror(conversation, result.all_messages())
        await conversation.after_invocation()
        return result

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not in agent specs: it holds a ledger connection."""
        return None

    # -- mirroring ---------------------------------------------------------------------------

    async def _mirror(
        self, conversation: AsyncConversation, messages: list[ModelMessage], *, run_id: str | None = None
    ) -> None:
        """Commit what ``messages`` add to or change in the view; a run's own messages alone continue it."""
        dumped = dump(messages)
        fresh = run_id is not None and all(m.run_id == run_id for m in messages)

        def plan(view: View) -> Edit | None:
            self._render(view)  # the host form of every entry, for matching
            known = [(self._rendered[entry.entry_id][2], entry.entry_id) for entry in view]
            ids = match_ids(dumped, known, same=operator.eq)
            host_form = {entry_id: text for text, entry_id in known}
            hosted = [
                view[view.index_of(i) or 0].message if host_form.get(i) == d else to_ledger(d, i)
                for d, i in zip(dumped, ids, strict=True)
            ]
            if fresh and not any(i in host_form for i in ids):
                hosted = [*view.messages, *hosted]  # a run given no message_history continues the conversation
            return plan_mirror(
                view,
                hosted,
                trigger="per_turn",
                strategy=HOST_STRATEGY,
                next_seq=conversation.state.next_seq,
                summarizer="pydantic_ai",
                detect_summaries=False,
            )

        await conversation.edit(plan)

    def _render(self, view: View) -> list[ModelMessage]:
        """The view as Pydantic AI messages; each entry's rendering kept while an equal message stands in the view.

        Each entry also keeps its host form (the JSON text the adapter writes for the
        message it renders as), which the mirror matches the host's messages against.
        """
        last = self._last_render
        # The same (immutable) view, its renderings still the ones held: a read nothing moved.
        if last is not None and last[0] is view and last[2] is self._rendered:
            return list(last[1])
        entries = list(view)  # built once: a restored view builds its entries anew on every read
        misses = [
            e
            for e in entries
            if (hit := self._rendered.get(e.entry_id)) is None or (hit[0] is not e.message and hit[0] != e.message)
        ]
        if misses:
            pairs = rendered([e.message for e in misses], tool_names_of([e.message for e in entries]))
            for entry, (model_message, text) in zip(misses, pairs, strict=True):
                self._rendered[entry.entry_id] = (entry.message, model_message, text)
        self._rendered = {e.entry_id: self._rendered[e.entry_id] for e in entries}  # entries that left are dropped
        out = [self._rendered[e.entry_id][1] for e in entries]
        self._last_render = (view, out, self._rendered)
        return list(out)

    def __repr__(self) -> str:
        return f"LedgerHistory(session_id={self.session_id!r}, agent_id={self.agent_id!r})"
