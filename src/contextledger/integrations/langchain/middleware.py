"""``LedgerMiddleware``: a LangChain agent's context window kept and managed by the ledger.

An agent from ``langchain.agents.create_agent`` keeps its conversation in the graph
state's ``messages``. The middleware makes the ledger the record of what the model
receives, at the point where the agent hands it over (``wrap_model_call``):

1. the request's messages are mirrored into the ledger (new ones appended; whatever
   another middleware removed, summarized or rewrote recorded as a ``langchain:host``
   reduction, see :mod:`contextledger.integrations.mirror`);
2. the model call is counted and the manager's per-turn and proactive reductions run;
3. the model receives the active view -- exactly what ``view_at(model_call=N)`` gives
   back later -- and its answer is committed at once (a tool call before its tool runs);
4. on a context overflow (``langchain_core.exceptions.ContextOverflowError`` or the
   ``overflow_errors`` given) the manager reduces reactively and the call is retried
   once per reduction, counted as a call of its own, or :class:`ReductionFailed` is raised.

When the view differs from the graph state (a reduction, a repair), the state is set to
the view with the model's answer, so a checkpointer keeps what the ledger keeps. Before
the agent runs (``before_agent``) the state gets the conversation's active view, with the
new input after it: a new process, without a checkpointer, continues the conversation
from the ledger. After it (``after_agent``) the end-of-invocation management runs.

The agent's ``system_prompt`` is configuration, not conversation: it is not stored, and
``view_at`` equals the messages the model received after it. List the middleware last
in ``middleware=`` when others change the request (it then wraps the model call
innermost and records what the model really receives).

The ledger calls are the sync :class:`~contextledger.Conversation`'s; under
``ainvoke``/``astream`` they run in a worker thread (``asyncio.to_thread``), so the
event loop never blocks on the database. One source serves both: the async hooks call
the same steps as the sync ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from langgraph.types import Command

from contextledger.conversation.conversation import Conversation
from contextledger.errors import ConfigurationError
from contextledger.integrations.kept import kept_text
from contextledger.integrations.langchain.convert import KEY, ViewRenderer, to_ledger
from contextledger.integrations.mirror import plan_mirror
from contextledger.ledger import Ledger
from contextledger.managers.base import ConversationManager
from contextledger.model.messages import Message, new_message_id

__all__ = ["HOST_STRATEGY", "LedgerMiddleware"]

logger = logging.getLogger(__name__)

HOST_STRATEGY = "langchain:host"
"""The strategy of a reduction that mirrors what another middleware did to the messages."""

ManagerSpec = ConversationManager | Callable[[], ConversationManager | None] | None


class LedgerMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Agent middleware that records every model call's input in the ledger and manages it.

    Args:
        ledger: An open :class:`~contextledger.Ledger` (the middleware does not close it).
        session_id: The session every run of the agent belongs to; ``None`` takes each
            run's LangGraph ``thread_id`` (``config={"configurable": {"thread_id": ...}}``).
        agent_id: The conversation within the session.
        manager: The conversation manager, or a callable returning a fresh one per
            conversation (required for per-thread sessions: a manager keeps one
            conversation's state). ``None``: the view only grows.
        overflow_errors: Exception types besides LangChain's ``ContextOverflowError``
            that mean the input was too long.
        **options: Passed to :meth:`Ledger.conversation` (``context_window_limit``,
            ``token_counter``, ``max_retries``, ...).

    Raises:
        ConfigurationError: ``ledger`` is not a :class:`Ledger`, or one manager instance
            would serve every thread.
    """

    def __init__(
        self,
        ledger: Ledger,
        session_id: str | None = None,
        *,
        agent_id: str = "default",
        manager: ManagerSpec = None,
        overflow_errors: tuple[type[BaseException], ...] = (),
        **options: Any,
    ) -> None:
        """Remember where the conversations are; each is opened (read only) on first use."""
        super().__init__()
        if not isinstance(ledger, Ledger):
            raise ConfigurationError(f"ledger must be a contextledger.Ledger, got {type(ledger).__name__}")
        if session_id is None and isinstance(manager, ConversationManager):
            raise ConfigurationError(
                "a manager instance keeps one conversation's state: with per-thread sessions pass a callable"
                " that returns a new manager (manager=lambda: SlidingWindowConversationManager(...))"
            )
        self.ledger = ledger
        self.session_id = session_id
        self.agent_id = agent_id
        self._manager = manager
        self._options = {"overflow_errors": (ContextOverflowError, *overflow_errors), **options}
        self._conversations: dict[str, tuple[Conversation, ViewRenderer]] = {}
        self._opening = threading.Lock()

    # -- conversations -------------------------------------------------------------------

    def conversation(self, thread_id: str | None = None) -> Conversation:
        """The conversation of the middleware's session (or of ``thread_id``), opened on first use.

        Raises:
            ConfigurationError: No session: the middleware has no ``session_id`` and no
                ``thread_id`` is given.
        """
        return self._open(thread_id)[0]

    def _open(self, thread_id: str | None) -> tuple[Conversation, ViewRenderer]:
        session_id = self.session_id or thread_id
        if not session_id:
            raise ConfigurationError(
                "LedgerMiddleware without a session_id keeps each LangGraph thread as a session: run the agent with"
                ' config={"configurable": {"thread_id": ...}}'
            )
        with self._opening:
            opened = self._conversations.get(session_id)
            if opened is None:
                manager = self._manager() if callable(self._manager) else self._manager
                conversation = self.ledger.conversation(session_id, self.agent_id, manager=manager, **self._options)
                opened = self._conversations[session_id] = (conversation, ViewRenderer())
            return opened

    def _for(self, runtime: Runtime[Any] | None) -> tuple[Conversation, ViewRenderer]:
        info = runtime.execution_info if runtime is not None else None
        return self._open(info.thread_id if info is not None else None)

    # -- the steps (sync; the async hooks run the same ones in a worker thread) --------------

    def _restore(self, runtime: Runtime[Any], state: Mapping[str, Any]) -> dict[str, Any] | None:
        """The state update that starts a run from the active view, the new input after it."""
        conversation, render = self._for(runtime)
        conversation.refresh()  # another process may have written since
        view = render(conversation.view)
        in_view = {m.id for m in view}
        held: Sequence[BaseMessage] = state.get("messages", [])
        last_known = max((i for i, m in enumerate(held) if m.id in in_view), default=-1)
        stale = sum(1 for m in held[:last_known] if m.id not in in_view)
        if stale:
            logger.debug(
                "session_id=<%s>, dropped=<%d> | state messages the ledger no longer shows were left out",
                conversation.session_id,
                stale,
            )
        messages = [*view, *(m for m in held[last_known + 1 :] if m.id not in in_view)]
        return _replace_all(messages) if messages != list(held) else None

    def _prepare(self, request: ModelRequest[Any]) -> list[BaseMessage]:
        """Mirror the request into the ledger, count the call, run the managers; the messages to send."""
        conversation, render = self._for(request.runtime)
        hosted = [render.known(m) or to_ledger(m) for m in request.messages]

        def mirror(view: Any) -> Any:
            return plan_mirror(
                view,
                hosted,
                trigger="per_turn",
                strategy=HOST_STRATEGY,
                next_seq=conversation.state.next_seq,
                summarizer="langchain",
                summary_hint=_is_summary,
            )

        conversation.edit(mirror)
        conversation.before_model_call(defer_count=True)  # the count rides with the answer's commit
        return render(conversation.view)

    def _retry(self, request: ModelRequest[Any], error: BaseException) -> list[BaseMessage]:
        """After a failed call: reduce reactively and count the retry (the messages to send), or raise."""
        conversation, render = self._for(request.runtime)
        if not conversation.after_model_call(error):  # an overflow it cannot reduce raises here
            raise error
        conversation.before_model_call(defer_count=True)
        return render(conversation.view)

    def _finish(self, request: ModelRequest[Any], response: ModelResponse[Any]) -> ModelResponse[Any]:
        """Commit the model's answer (with the call's count); the response, every message with an id."""
        conversation, _ = self._for(request.runtime)
        conversation.after_model_call()
        result = [m if m.id else m.model_copy(update={"id": new_message_id()}) for m in response.result]
        conversation.append(*(to_ledger(m) for m in result))
        return dataclasses.replace(response, result=result)

    def _after(self, runtime: Runtime[Any], state: Mapping[str, Any]) -> dict[str, Any] | None:
        """End-of-invocation management; the state update when it changed the view."""
        conversation, render = self._for(runtime)
        conversation.after_invocation()
        view = render(conversation.view)
        return _replace_all(view) if view != list(state.get("messages", [])) else None

    # -- the agent's hooks -------------------------------------------------------------------

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Start the run from the conversation's active view (see the module docstring)."""
        return self._restore(runtime, state)

    async def abefore_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """:meth:`before_agent` for async runs (the ledger calls in a worker thread)."""
        return await asyncio.to_thread(self._restore, runtime, state)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Hand the model the managed view, record the call and its answer (see the module docstring).

        Raises:
            ReductionFailed: The context overflowed and nothing could be reduced.
        """
        sent = self._prepare(request)
        while True:
            try:
                response = handler(request.override(messages=cast("list[AnyMessage]", sent)))
            except Exception as error:
                sent = self._retry(request, error)
                continue
            return _with_state(request, sent, self._finish(request, response))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """:meth:`wrap_model_call` for async runs (the ledger calls in a worker thread)."""
        sent = await asyncio.to_thread(self._prepare, request)
        while True:
            try:
                response = await handler(request.override(messages=cast("list[AnyMessage]", sent)))
            except Exception as error:
                sent = await asyncio.to_thread(self._retry, request, error)
                continue
            return _with_state(request, sent, await asyncio.to_thread(self._finish, request, response))

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Run the end-of-invocation management and bring the state in line with the view."""
        return self._after(runtime, state)

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """:meth:`after_agent` for async runs (the ledger calls in a worker thread)."""
        return await asyncio.to_thread(self._after, runtime, state)

    def __repr__(self) -> str:
        return f"LedgerMiddleware(session_id={self.session_id!r}, agent_id={self.agent_id!r})"


def _replace_all(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]}


def _with_state(
    request: ModelRequest[Any], sent: list[BaseMessage], response: ModelResponse[Any]
) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
    """The response, with the state set to what the model was sent when that differs from the state."""
    if sent == request.messages:
        return response
    update = _replace_all([*sent, *response.result])
    return ExtendedModelResponse(model_response=response, command=Command(update=update))


def _is_summary(message: Message) -> bool:
    """Whether a message is LangChain's ``SummarizationMiddleware`` summary (it marks its ``lc_source``)."""
    text = kept_text(message, KEY)
    if text is None or "lc_source" not in text:  # the text test spares parsing every new message
        return False
    data = json.loads(text).get("data", {})
    kwargs = data.get("additional_kwargs") if isinstance(data, Mapping) else None
    return isinstance(kwargs, Mapping) and kwargs.get("lc_source") == "summarization"
