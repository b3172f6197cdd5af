"""``LedgerSession``: the OpenAI Agents SDK's ``Session`` protocol on an :class:`~contextledger.aio.AsyncConversation`.

Every method is a thin shell over the items mapping and the async conversation:

* ``get_items(limit)`` -- the active view as items; ``limit`` keeps the newest items
  without splitting a tool group (:func:`newest_messages`).
* ``add_items(items)`` -- one commit; a reasoning item is linked to the call that follows
  it in the batch, so the two stay together under every manager. Any JSON item is kept
  exactly as given (a wrapper's envelope too, such as ``EncryptedSession`` stores).
* ``pop_item()`` -- a recorded reduction (strategy ``pop``) evicting the newest entry; it
  leaves the view and stays in the history.
* ``clear_session()`` -- one recorded reduction (strategy ``clear``) evicting the whole
  view; :meth:`AsyncLedger.delete_session` is the way to erase.

Both are recorded exactly as the SDK asked (``as_given``): the view rules that hold a
manager's plans do not second-guess the host's own request.

The model calls: ``Runner.run(..., session=session, run_config=session.run_config())``
hands each call's input to :meth:`LedgerSession.call_model_input_filter`, which counts
the call, runs the manager's per-turn and proactive management and gives the model the
managed view -- so ``view_at(model_call=N)`` is exactly what call ``N`` received (see
:mod:`~contextledger.integrations.openai_agents.modelinput`).

Any loop, any thread: each method is one call of the async API (``add_items`` appends
as the ledger's own conversations do, inline or by a native send where the ledger takes
them; the others are one hop to a worker thread of the ledger, see
:mod:`contextledger.aio.runner`), and opening is guarded by a thread lock taken on that
worker, so one session serves tasks of several event loops at once -- the
``Runner.run_sync`` pattern in a threaded web server -- without losing or reordering a
write.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from agents.items import TResponseInputItem
from agents.memory import SessionSettings
from agents.memory.session_settings import coerce_session_settings
from agents.run import CallModelData, ModelInputData, RunConfig
from agents.run_config import CallModelInputFilter

from contextledger.aio import AsyncConversation, AsyncLedger
from contextledger.aio.runner import default_runner
from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import ReductionPlan
from contextledger.core.view import View
from contextledger.errors import ConfigurationError
from contextledger.integrations.openai_agents.items import (
    items_to_messages,
)
from contextledger.integrations.openai_agents.modelinput import mirror_filter, unsaved_items
from contextledger.integrations.openai_agents.rendering import (
    ItemRenderer,
    is_opaque,
    messages_to_items,
)
from contextledger.ledger import DEFAULT_URL, open_store
from contextledger.managers.base import ConversationManager
from contextledger.model.jsonvalues import thaw
from contextledger.model.messages import Message
from contextledger.model.metadata import LINKS_KEY

__all__ = ["LedgerSession"]

logger = logging.getLogger(__name__)


class LedgerSession:
    """An ``agents.memory.Session`` whose items live in a contextledger conversation.

    ``Runner.run(agent, input, session=LedgerSession("user-42", url="sqlite:///agents.db"))``
    works unchanged. The managers manage what ``get_items`` returns, every reduction is
    recorded and queryable (``contextledger evictions``), and nothing is deleted. Pass
    ``run_config=session.run_config()`` as well and each model call is counted, managed
    (per-turn, proactive) and given exactly the managed view, which time travel then
    rebuilds (:meth:`call_model_input_filter`).

    Args:
        session_id: The session (the ledger's ``session_id``).
        ledger: An open :class:`~contextledger.aio.AsyncLedger` (the session does not close it).
        url: A ledger URL to open instead (closed by :meth:`close`); default
            ``sqlite:///contextledger.db`` when neither is given.
        agent_id: The conversation within the session.
        manager: The conversation manager (``None``: the view only grows).
        session_settings: The SDK's settings, a ``SessionSettings`` or its dict (``limit``
            applies when ``get_items`` gets none).
        input_filter: An application's ``call_model_input_filter`` (the SDK's
            ``ToolOutputTrimmer``, say) run on the managed view before each model call; what
            it changes is recorded as a reduction (strategy ``openai:<its class>``), so the
            model's input and the ledger still agree. It may change items in place or drop
            whole ones.
        **options: Passed to ``AsyncLedger.conversation`` (``token_counter``,
            ``context_window_limit``, ``max_retries``, ...) and, with ``url``, nothing else.

    Raises:
        ConfigurationError: Both ``ledger`` and ``url`` are given, ``ledger`` is not an
            ``AsyncLedger``, ``session_settings`` is not settings, or ``input_filter`` is
            not callable.
    """

    def __init__(
        self,
        session_id: str,
        *,
        ledger: AsyncLedger | None = None,
        url: str | None = None,
        agent_id: str = "default",
        manager: ConversationManager | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        input_filter: CallModelInputFilter | None = None,
        **options: Any,
    ) -> None:
        """Remember where the conversation is; it is opened (read only) on first use."""
        if ledger is not None and url is not None:
            raise ConfigurationError("give LedgerSession a ledger or a url, not both")
        if ledger is not None and not isinstance(ledger, AsyncLedger):
            raise ConfigurationError(f"ledger must be a contextledger.aio.AsyncLedger, got {type(ledger).__name__}")
        if input_filter is not None and not callable(input_filter):
            raise ConfigurationError(f"input_filter must be a call_model_input_filter, got {input_filter!r}")
        self.session_id = session_id
        self.agent_id = agent_id
        self.session_settings = session_settings  # the setter converts a dict
        self.input_filter = input_filter
        self._ledger = ledger
        self._url = url if ledger is None else None
        self._owns_ledger = ledger is None
        self._options: dict[str, Any] = {"manager": manager, **options}
        self._conversation: AsyncConversation | None = None
        self._opening = threading.Lock()  # taken on a worker thread, never on a loop
        self._renderer = ItemRenderer()  # each view message's fingerprint checked once, not on every read
        # What the runner of the current run holds (see call_model_input_filter): the
        # history it read (as a view and limit), the items stored since, and those stored early for a call.
        self._read: tuple[View, int | None] | None = None  # the view the last get_items read, and its limit
        self._read_items: list[dict[str, Any]] | None = None  # the items of _read, made once when the filter asks
        self._added: list[dict[str, Any]] = []
        self._stored_early: list[dict[str, Any]] = []
        self._prepared = 0  # calls counted by the input filter, not yet started

    @property
    def session_settings(self) -> SessionSettings | None:
        """The SDK's session settings (a dict given is converted, as the SDK's own sessions do)."""
        return self._settings

    @session_settings.setter
    def session_settings(self, value: SessionSettings | Mapping[str, Any] | None) -> None:
        if value is None:
            self._settings: SessionSettings | None = None
            return
        try:
            self._settings = coerce_session_settings(dict(value) if isinstance(value, Mapping) else value)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"session_settings must be SessionSettings or its dict: {exc}") from exc

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
                # The renderer kept with the view the ledger shares: a session made per request
                # renders only what the one before did not (it replaces what it holds: shareable).
                key = (self.session_id, self.agent_id)
                self._renderer = ledger.sync.shared_views.companion(key, "openai-agents", ItemRenderer)
                self._conversation = ledger.wrap(sync)  # the ledger's inline or native append, as opened there
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

        def read(conversation: Conversation) -> tuple[View, list[Any]]:
            conversation.refresh()  # another process may have written since
            view = conversation.view
            return view, self._renderer.view_items(view, limit)

        view, items = await (await self.conversation()).run_sync(read)
        # The history a run starts from: the input filter lines the runner's input up with
        # it. Kept as the (immutable) view and limit: their items, made again when the
        # filter asks, equal the ones returned, whatever the caller does to those.
        self._read, self._read_items, self._added, self._stored_early = (view, limit), None, [], []
        return items

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items in one commit (nothing is stored when one is invalid).

        Items the input filter already stored for a model call (a streamed run saves its
        input after the call started) are not stored twice.

        Raises:
            InvalidMessage: An item is not one the mapping can keep losslessly.
        """
        given: list[Any] = [dict(item) if isinstance(item, Mapping) else item for item in items]
        early = 0
        while early < len(given) and early < len(self._stored_early) and given[early] == self._stored_early[early]:
            early += 1
        rest = given[early:]
        messages = link_reasoning(items_to_messages(rest))
        if messages:
            await (await self.conversation()).append(*messages)
        del self._stored_early[:early]
        self._added.extend(thaw(rest))  # JSON values (checked above): a copy the caller cannot change

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

    # -- the model calls ---------------------------------------------------------------------

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` whose ``call_model_input_filter`` is this session's (``options``: the rest).

        Raises:
            ConfigurationError: ``options`` name a ``call_model_input_filter`` (give it to the
                session as ``input_filter=`` instead, so what it changes is recorded).
        """
        if "call_model_input_filter" in options:
            raise ConfigurationError(
                "pass your call_model_input_filter as LedgerSession(input_filter=...): the session runs it on"
                " the managed view and records what it changes"
            )
        return RunConfig(call_model_input_filter=self.call_model_input_filter, **options)

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """Make the input of the model call the runner is about to make, from the ledger.

        Use it as ``RunConfig(call_model_input_filter=session.call_model_input_filter)``
        (:meth:`run_config`). In order, as one model call:

        1. the items of the runner's input the ledger does not hold yet are appended (a
           streamed run saves its input after the call started; they are not stored
           twice when it does);
        2. the call is counted and the manager's per-turn and proactive management runs
           (``before_model_call``), then the application's ``input_filter``, whose changes
           are recorded;
        3. the model is given the managed view as items, with the runner's instructions.

        So ``view_at(model_call=N)`` is exactly the input of call ``N``, and a reduction
        made for a call reaches that very call.

        Raises:
            InvalidMessage: An item of the runner's input cannot be kept.
            ConfigurationError: The application's input filter added or reordered items, or
                the session holds items a wrapper encoded (an ``EncryptedSession`` around
                this session: run it without the filter).
        """
        conversation = await self.conversation()
        if any(is_opaque(message) for message in conversation.view.messages):
            raise ConfigurationError(
                f"session {self.session_id!r} holds items a wrapper encoded (neither type nor role, as"
                " EncryptedSession stores them): they cannot be the model's input; run such a session"
                " without the input filter"
            )
        runner_items = [dict(item) for item in data.model_data.input]
        new = [
            dict(item)
            for item in unsaved_items(
                runner_items,
                self._history_read(),
                self._added,
                lambda: self._renderer.view_items(conversation.view),
            )
        ]
        if new:
            await conversation.append(*link_reasoning(items_to_messages(new)))
            self._stored_early.extend(thaw(new))
            self._added.extend(thaw(new))
        await conversation.before_model_call(handed=self.input_filter is None)
        try:
            if self.input_filter is not None:
                await self._run_input_filter(conversation, data)
        finally:
            if self.input_filter is not None:
                await conversation.input_handed()
        self._prepared += 1
        items = self._renderer.view_items(conversation.view)
        logger.debug(
            "session_id=<%s>, agent_id=<%s>, model_call=<%d>, items=<%d>, stored_first=<%d> | model input",
            self.session_id,
            self.agent_id,
            conversation.model_call_count,
            len(items),
            len(new),
        )
        return ModelInputData(input=items, instructions=data.model_data.instructions)  # type: ignore[arg-type]

    def _history_read(self) -> list[dict[str, Any]] | None:
        """The items the last ``get_items`` returned, made again from its view once (``None``: not read).

        Every model call of a run compares the runner's input with them; the items are
        this session's own, never handed out, so one rendering serves them all.
        """
        if self._read is not None and self._read_items is None:
            self._read_items = self._renderer.view_items(*self._read)
        return self._read_items

    async def _run_input_filter(self, conversation: AsyncConversation, data: CallModelData[Any]) -> None:
        assert self.input_filter is not None
        view = conversation.view
        groups = self._renderer.groups(view.messages)
        given = ModelInputData(input=[i for g in groups for i in g], instructions=data.model_data.instructions)  # type: ignore[misc]
        result = self.input_filter(CallModelData(model_data=given, agent=data.agent, context=data.context))
        returned = await result if inspect.isawaitable(result) else result
        if not isinstance(returned, ModelInputData):
            raise ConfigurationError(f"the input filter returned {type(returned).__name__}, not ModelInputData")
        strategy = f"openai:{type(self.input_filter).__name__}"
        changed = [dict(item) for item in returned.input]

        def plan(current: View) -> ReductionPlan | None:
            if current is not view:  # another writer moved the view: its items are planned again
                return mirror_filter(current, self._renderer.groups(current.messages), changed, strategy)
            return mirror_filter(view, groups, changed, strategy)

        await conversation.apply_plan(plan, trigger="per_turn", as_given=True)  # the model gets exactly this

    async def before_model_call(self) -> Any:
        """What ``LedgerRunHooks(session)`` calls as a model call starts.

        The call was counted and managed by :meth:`call_model_input_filter` already; this
        only checks that it was.

        Raises:
            ConfigurationError: The run does not use the session's input filter: without it
                the runner gives the model its own copy of the history, which the ledger
                cannot see (pass ``run_config=session.run_config()``).
        """
        if self._prepared:
            self._prepared -= 1
            return None
        raise ConfigurationError(
            f"session {self.session_id!r}: a model call started without the session's input filter; pass"
            " run_config=session.run_config() (or RunConfig(call_model_input_filter=session.call_model_input_filter))"
            " to Runner.run so the ledger counts, manages and records each model call"
        )

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
