"""``LedgerSessionManager``: a Strands session manager backed by the ledger."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from strands.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    AfterMultiAgentInvocationEvent,
    AfterNodeCallEvent,
    AgentInitializedEvent,
    BaseHookEvent,
    BeforeInvocationEvent,
    BeforeModelCallEvent,
    HookCallback,
    HookOrder,
    HookRegistry,
    MessageAddedEvent,
    MultiAgentInitializedEvent,
)
from strands.session.session_manager import SessionManager
from strands.types.content import Message as StrandsMessage

from contextledger.aio.conversation import check_inline, inline_for
from contextledger.aio.runner import Runner
from contextledger.conversation.conversation import Conversation
from contextledger.core.seam import WouldWait, run_inline
from contextledger.errors import ConfigurationError
from contextledger.integrations.strands.binding import AgentBinding
from contextledger.integrations.strands.errors import DuplicateAgentId
from contextledger.integrations.strands.multiagent import MULTI_AGENT_PREFIX, MultiAgentBinding, is_multi_agent_id
from contextledger.ledger import DEFAULT_URL, Ledger
from contextledger.model.tokens import TokenCounter

if TYPE_CHECKING:
    from strands import Agent
    from strands.multiagent.base import MultiAgentBase

__all__ = ["LedgerSessionManager"]

logger = logging.getLogger(__name__)

E = TypeVar("E", bound=BaseHookEvent)


class LedgerSessionManager(SessionManager):
    """A Strands ``SessionManager`` that keeps each agent's conversation in a ledger.

    ``Agent(session_manager=LedgerSessionManager("s1", url="sqlite:///agents.db"))`` is
    all it takes; with neither ``url`` nor ``ledger`` the embedded SQLite default
    (:data:`contextledger.ledger.DEFAULT_URL`) is used.

    What it guarantees, unlike Strands' file/S3 session managers:

    * **Two commits per plain turn.** The prompt is committed when Strands adds it,
      before the model is called; the answer is committed when the invocation ends,
      together with the model-call count, the agent state, the Strands manager state
      and what the end-of-invocation management evicted. A toolUse is committed before
      its tool runs, a toolResult when it arrives, and a reduction Strands' manager makes
      before a model call at once (with the count). Each commit compares
      ``agent.messages`` with the ledger's active view by id (``tracking_id`` =
      ``message_id``) and writes the difference as one changeset: new messages, evicted
      ones with the trigger that evicted them (``per_turn``, ``proactive``,
      ``reactive``, ``end_of_invocation``), a new summary as a summary row naming what
      it replaced, pin changes, content revisions (the original kept).
      A crash during a model call loses that call's count, never the prompt or a
      reduction; a crash between the final answer and the end of ``agent(...)``
      (in-process work only) loses that answer, which the caller never received.
    * **Exact restore.** A new ``Agent`` on the same session gets exactly the view that
      was live: same messages in the same order, pins, summary, truncated content,
      ``model_call_count``, agent state; the Strands conversation manager's state is
      restored too, so ``per_turn`` continues in step. No ``removed_message_count``
      offset is involved.
    * **Crash-safe tool pairs.** A conversation interrupted between a toolUse and its
      toolResult is shown to the restored agent repaired; restoring writes nothing, and the
      repair is recorded in the ledger with the next write (a ``restore`` reduction).
    * **Several agents** (different ``agent_id``) share a session, each with its own
      conversation; all methods are thread-safe.
    * **Swarm and Graph.** ``Swarm(..., session_manager=LedgerSessionManager("s1", url=...))``
      (or ``GraphBuilder().set_session_manager(...)``) commits the orchestrator's state
      after every node and at the end of the run, atomically, under the reserved agent
      id ``multi_agent:<id>``; a new ``Swarm``/``Graph`` with the same id on the same
      session resumes where the interrupted run stopped, as with ``FileSessionManager``
      (see :mod:`contextledger.integrations.strands.multiagent`).

    It works with Strands' own conversation managers, and with contextledger's
    managers through :class:`~contextledger.integrations.strands.StrandsConversationManager`.

    Args:
        session_id: The session.
        ledger: An open ledger to use (left open by :meth:`close`).
        url: A ledger URL to open (e.g. ``sqlite:///agents.db``); not with ``ledger``.
        token_counter: Per-message token estimates stored with the entries.
        context_window_limit: Used when the agent's model reports none.
        repair: Repair conversations left mid-tool when an agent is restored (shown at once,
            committed with the next write).
        inline: Whether the callbacks that commit one message or the end of an invocation
            (the two commits of a plain turn) run on the caller's thread when they can,
            instead of on a worker thread (see :meth:`register_hooks`). ``None`` (the
            default): on SQLite and in-memory ledgers, whose commit waits on no network;
            ``True`` is refused for other stores.
        **options: Passed to :meth:`Ledger.connect` with ``url``.

    Raises:
        ConfigurationError: ``session_id`` is empty, both ``ledger`` and ``url`` are given,
            or ``inline`` is not a bool or ``None`` or is true for a store other than SQLite
            or in-memory.
        InvalidLedgerURL: ``url`` names no supported backend.
    """

    def __init__(
        self,
        session_id: str,
        *,
        ledger: Ledger | None = None,
        url: str | None = None,
        token_counter: TokenCounter | None = None,
        context_window_limit: int | None = None,
        repair: bool = True,
        inline: bool | None = None,
        **options: Any,
    ) -> None:
        """Open (or connect to) the ledger; see the class docstring."""
        check_inline(inline)
        if not isinstance(session_id, str) or not session_id:
            raise ConfigurationError(f"session_id must be a non-empty string, got {session_id!r}")
        if ledger is not None and url is not None:
            raise ConfigurationError("pass either ledger= or url=, not both")
        if ledger is not None and options:
            raise ConfigurationError(f"connection options {sorted(options)} need url=, not ledger=")
        self.session_id = session_id
        self._owns_ledger = ledger is None
        self.ledger = ledger if ledger is not None else Ledger.connect(url or DEFAULT_URL, **options)
        self.token_counter = token_counter
        self.context_window_limit = context_window_limit
        self.repair = repair
        self._lock = threading.RLock()
        self._bindings: dict[str, AgentBinding] = {}
        self._multi_agents: dict[str, MultiAgentBinding] = {}
        self._runner = Runner(name=self.ledger.url)  # threads start with the first awaited callback
        try:
            self._inline = inline_for(self.ledger.store, inline)
        except ConfigurationError:
            if self._owns_ledger:
                self.ledger.close()
            raise

    @property
    def inline(self) -> bool:
        """Whether the commits of a message and of an invocation's end run on the caller's thread when they can."""
        return self._inline

    # -- hooks -------------------------------------------------------------------------------

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Subscribe to the agent's lifecycle (every callback routes to the agent's binding).

        Every callback that may reach the store is a coroutine that Strands awaits: its
        work runs as one call on a worker thread of this manager (see
        :mod:`contextledger.aio.runner`), so an agent under ``invoke_async`` or
        ``stream_async`` never blocks its loop on the ledger. A callback whose work this
        time reads and writes no store (the model call's first note when ``agent.messages``
        did not move, its last note when, besides, no contextledger manager plans on it and
        no other ledger callback hears it, its end when no contextledger manager reacts to
        it, the final answer left to the invocation's end) runs at once instead. Strands calls
        ``AgentInitializedEvent`` callbacks synchronously only (the restore, a read).

        With ``inline`` (the default on SQLite and in-memory ledgers) the commit of a
        message and the end of an invocation -- the two commits of a plain turn -- also run
        on the caller's thread, as the async API's inline appends do, when they can commit
        without waiting: where one would wait (SQLite's write lock held elsewhere, a
        retry's sleep, a changeset off the one-transaction path) nothing has been
        committed, and it runs again on a worker.
        """
        awaited = self._awaited
        registry.add_callback(AgentInitializedEvent, lambda event: self.initialize(event.agent))
        registry.add_callback(BeforeInvocationEvent, lambda e: self.binding(e.agent.agent_id).before_invocation())
        registry.add_callback(
            MessageAddedEvent,
            awaited(
                lambda e: self.append_message(e.message, e.agent),
                local=lambda e: self.binding(e.agent.agent_id).holds_answer(e.agent, e.message),
                inline=True,
            ),
        )
        registry.add_callback(
            BeforeModelCallEvent,
            awaited(
                lambda e: self.binding(e.agent.agent_id).before_model_call_first(e.agent, e),
                local=lambda e: self.binding(e.agent.agent_id).in_sync(e.agent),
            ),
            order=HookOrder.SDK_FIRST,
        )
        registry.add_callback(
            BeforeModelCallEvent,
            awaited(
                lambda e: self.binding(e.agent.agent_id).before_model_call_last(e.agent, e),
                local=lambda e: self.binding(e.agent.agent_id).counts_locally(e.agent),
            ),
            order=HookOrder.SDK_LAST,
        )
        registry.add_callback(
            AfterModelCallEvent,
            awaited(
                lambda e: self.binding(e.agent.agent_id).after_model_call(e.agent, e),
                local=lambda e: self.binding(e.agent.agent_id).call_ends_locally(e),
                inline=lambda e: self.binding(e.agent.agent_id).call_ends_inline(),
            ),
            order=HookOrder.SDK_FIRST,  # the input was handed: nothing after this belongs to it
        )
        registry.add_callback(
            AfterInvocationEvent,
            awaited(lambda e: self.binding(e.agent.agent_id).after_invocation(e.agent), inline=True),
        )
        registry.add_callback(MultiAgentInitializedEvent, awaited(lambda e: self.initialize_multi_agent(e.source)))
        registry.add_callback(AfterNodeCallEvent, awaited(lambda e: self.sync_multi_agent(e.source)))
        registry.add_callback(AfterMultiAgentInvocationEvent, awaited(lambda e: self.sync_multi_agent(e.source)))

    def _awaited(
        self,
        work: Callable[[E], object],
        local: Callable[[E], bool] | None = None,
        *,
        inline: bool | Callable[[E], bool] = False,
    ) -> HookCallback[E]:
        """A coroutine callback that runs ``work(event)`` on a worker thread and waits for it.

        When ``local(event)`` says the work reads and writes no store this time, it runs at
        once on the caller's thread instead: it blocks nothing (no driver, no lock the store
        holds), and a hop to a worker and back costs more than the work (about 90 us; a
        Strands turn makes six callbacks, four of which usually touch no store). With
        ``inline`` (or when ``inline(event)`` says so), on a manager that commits inline, the
        work runs on the caller's thread too, unless it would wait (it then committed
        nothing and runs on a worker): ``work`` is one commit, or commits that running it
        again completes rather than repeats. A closed manager still refuses every callback
        (``LedgerClosed``, from its worker pool).
        """

        async def callback(event: E) -> None:
            if not self._runner.closed:
                if local is not None and local(event):
                    work(event)
                    return
                if (
                    self._inline
                    and (inline is True or (callable(inline) and inline(event)))
                    and not isinstance(run_inline(work, event), WouldWait)
                ):
                    return
            await self._runner.run(work, event)

        return callback

    # -- SessionManager ----------------------------------------------------------------------

    def initialize(self, agent: Agent, **kwargs: Any) -> None:
        """Bind ``agent`` to its conversation: create it, or restore the agent from it.

        Raises:
            DuplicateAgentId: Another live agent with the same ``agent_id`` is bound (both
                ``ConfigurationError`` and Strands' ``SessionException``).
            ConfigurationError: The ``agent_id`` starts with the reserved ``multi_agent:``.
        """
        from contextledger.integrations.strands.adapter import StrandsConversationManager

        if is_multi_agent_id(agent.agent_id):
            raise ConfigurationError(
                f"agent_id {agent.agent_id!r}: ids starting with {MULTI_AGENT_PREFIX!r} are reserved for"
                " Swarm/Graph state; choose another agent_id"
            )

        cm = agent.conversation_manager
        adapter = cm if isinstance(cm, StrandsConversationManager) else None
        with self._lock:
            _claim(
                self._bindings.get(agent.agent_id),
                agent,
                lambda _bound: (
                    f"agent_id {agent.agent_id!r} is already bound in session {self.session_id!r}: the `agent_id`"
                    " of an agent must be unique in a session"
                ),
            )
            binding = AgentBinding(
                self.ledger,
                self.session_id,
                agent.agent_id,
                inner=adapter.manager if adapter is not None else None,
                token_counter=self.token_counter,
                context_window_limit=self.context_window_limit,
                repair=self.repair,
            )
            self._bindings[agent.agent_id] = binding
        if adapter is not None:
            adapter.attach(agent.agent_id, binding)
        binding.start(agent)

    def append_message(self, message: StrandsMessage, agent: Agent, **kwargs: Any) -> None:
        """Commit the new message together with anything else that changed since the last sync.

        Strands calls this after the message was put into ``agent.messages``; the sync
        stores it from there, under its ``tracking_id``. The final answer of an invocation
        is committed when the invocation ends, together with the end-of-invocation
        management (see :meth:`AgentBinding.message_added`).

        Called directly with a message the agent does not hold, the message is recorded
        (as Strands' own session managers persist what they are given) and appended to
        ``agent.messages``, so the live agent shows what a restore would show.

        Raises:
            InvalidMessage: ``message`` is not a Strands message; nothing is changed.
            ConfigurationError: ``agent`` was not initialized with this session manager.
        """
        self.binding(agent.agent_id).message_added(agent, message)

    def sync_agent(self, agent: Agent, **kwargs: Any) -> None:
        """Commit what changed; right after a context overflow the reduction is recorded as ``reactive``."""
        self.binding(agent.agent_id).sync_after_reduction(agent)

    def redact_latest_message(self, redact_message: StrandsMessage, agent: Agent, **kwargs: Any) -> None:
        """Replace the latest message's content; the original stays in the ledger as a revision."""
        self.binding(agent.agent_id).redact(agent, redact_message)

    # -- multi-agent (Swarm, Graph) -----------------------------------------------------------

    def initialize_multi_agent(self, source: MultiAgentBase, **kwargs: Any) -> None:
        """Bind a ``Swarm``/``Graph`` to its state and restore it when the session holds one.

        Nothing is written here; the first node that finishes commits the state.

        Raises:
            DuplicateAgentId: Another live orchestrator with the same id is bound to this
                session manager (both ``ConfigurationError`` and Strands' ``SessionException``).
            ConfigurationError: The stored state belongs to another kind of orchestrator,
                or ``source`` cannot serialize its state.
        """
        binding = MultiAgentBinding(self.ledger, self.session_id, source)
        with self._lock:
            _claim(
                self._multi_agents.get(binding.orchestrator_id),
                source,
                lambda bound: (
                    f"a {type(bound).__name__} with id {binding.orchestrator_id!r} is already bound in"
                    f" session {self.session_id!r}; give each orchestrator of a session its own id"
                ),
            )
            self._multi_agents[binding.orchestrator_id] = binding
        binding.restore(source)

    def sync_multi_agent(self, source: MultiAgentBase, **kwargs: Any) -> None:
        """Commit the orchestrator's state (one atomic commit; nothing when it did not change).

        Raises:
            ConfigurationError: ``source`` was not initialized with this session manager.
        """
        with self._lock:
            binding = self._multi_agents.get(getattr(source, "id", ""))
        if binding is None or binding.source() is not source:
            raise ConfigurationError(
                f"{type(source).__name__} {getattr(source, 'id', None)!r} is not initialized with session"
                f" {self.session_id!r} (pass session_manager= to the Swarm or Graph)"
            )
        binding.sync(source)

    # -- access ------------------------------------------------------------------------------

    def binding(self, agent_id: str) -> AgentBinding:
        """The binding of an initialized agent.

        Raises:
            ConfigurationError: No agent with that id was initialized with this manager.
        """
        with self._lock:
            binding = self._bindings.get(agent_id)
        if binding is None:
            raise ConfigurationError(
                f"agent {agent_id!r} is not initialized with session {self.session_id!r}"
                " (pass session_manager= to the Agent)"
            )
        return binding

    def conversation(self, agent_id: str = "default") -> Conversation:
        """The ledger conversation of an initialized agent (for pins, queries, tests)."""
        return self.binding(agent_id).conversation

    def close(self) -> None:
        """Close the ledger and the manager's worker threads if this manager opened the ledger.

        A ledger passed in stays open, and so do the threads that serve it (idle, they cost nothing).
        """
        if self._owns_ledger:
            self._runner.close()
            self.ledger.close()

    def __enter__(self) -> LedgerSessionManager:
        """Return self."""
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the ledger if this manager opened it."""
        self.close()


def _claim(current: AgentBinding | MultiAgentBinding | None, claimant: object, taken: Callable[[object], str]) -> None:
    """Refuse to bind ``claimant`` where another live agent or orchestrator is bound.

    Raises:
        DuplicateAgentId: ``current`` is bound to another object that is still alive.
    """
    if current is None:
        return
    bound = current.agent() if isinstance(current, AgentBinding) else current.source()
    if bound is not None and bound is not claimant:
        raise DuplicateAgentId(taken(bound))
