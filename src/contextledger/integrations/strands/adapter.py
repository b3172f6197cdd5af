"""``StrandsConversationManager``: contextledger's managers as a Strands conversation manager."""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from strands.agent.conversation_manager import ConversationManager as StrandsManagerBase
from strands.hooks import AfterModelCallEvent, BeforeModelCallEvent, HookOrder, HookRegistry

from contextledger.aio.runner import Runner
from contextledger.errors import ConfigurationError
from contextledger.integrations.strands.binding import AgentBinding
from contextledger.ledger import Ledger
from contextledger.managers.base import ConversationManager
from contextledger.stores.memory import MemoryStore

if TYPE_CHECKING:
    from strands import Agent

__all__ = ["StrandsConversationManager"]


class StrandsConversationManager(StrandsManagerBase):
    """Hand one of contextledger's managers to a Strands ``Agent`` as its ``conversation_manager``.

    ``Agent(conversation_manager=StrandsConversationManager(SlidingWindowConversationManager(
    window_size=20, per_turn=2, protected_messages={"first": 1})))`` runs contextledger's
    policy -- protected first/last ranges, pins with tool-pair partners, per-turn,
    proactive and reactive reductions -- on the ledger, and writes the resulting view
    back into ``agent.messages``:

    * before each model call the manager's ``per_turn``/``proactive`` callbacks plan on
      the ledger (Strands' ``projected_input_tokens`` and the model's
      ``context_window_limit`` are passed on);
    * on a context overflow (Strands' ``ContextWindowOverflowException`` counts as one)
      :meth:`reduce_context` asks the manager for a reactive reduction, which reduces or
      raises :class:`~contextledger.integrations.strands.StrandsReductionFailed` (both
      contextledger's ``ReductionFailed`` and Strands' ``ContextWindowOverflowException``);
    * at the end of each invocation :meth:`apply_management` runs its
      ``end_of_invocation`` management.

    A plain turn is two commits: the prompt, then the answer together with the
    model-call count and the end-of-invocation reduction (planned on the view that holds
    the answer). A crash during the model call loses that call's count, never the prompt;
    a reduction made before a model call is committed at once, carrying the count.

    With a :class:`~contextledger.integrations.strands.LedgerSessionManager` on the agent
    the adapter works on that session's conversation, so every reduction is committed
    atomically and restored exactly. Without one it keeps the conversation in ``ledger``
    (an in-memory ledger by default). Use one adapter (and one manager) per agent.

    Args:
        manager: The contextledger manager, e.g.
            :class:`~contextledger.managers.SlidingWindowConversationManager`.
        ledger: Where to keep the conversation when the agent has no
            ``LedgerSessionManager`` (default: in memory).
        session_id: The session id used in that case (default: a fresh one).

    Raises:
        ConfigurationError: ``manager`` is not a contextledger conversation manager.
    """

    def __init__(
        self,
        manager: ConversationManager,
        *,
        ledger: Ledger | None = None,
        session_id: str | None = None,
    ) -> None:
        """Wrap ``manager``; see the class docstring."""
        if not isinstance(manager, ConversationManager):
            raise ConfigurationError(
                f"StrandsConversationManager wraps a contextledger ConversationManager, got {manager!r}"
            )
        super().__init__()
        self.manager = manager
        self._ledger = ledger
        self._session_id = session_id or f"strands-{uuid.uuid4().hex}"
        self._lock = threading.RLock()
        self._bindings: dict[str, AgentBinding] = {}
        self._attached: set[str] = set()
        self._runner: Runner | None = None  # made when a standalone agent first needs it

    def attach(self, agent_id: str, binding: AgentBinding) -> None:
        """Work on ``binding``'s conversation (called by ``LedgerSessionManager`` at initialize)."""
        with self._lock:
            self._bindings[agent_id] = binding
            self._attached.add(agent_id)

    def binding(self, agent: Agent) -> AgentBinding:
        """The agent's binding: the session's when attached, else a standalone one."""
        with self._lock:
            binding = self._bindings.get(agent.agent_id)
            if binding is None:
                if self._ledger is None:
                    self._ledger = Ledger(MemoryStore())
                binding = AgentBinding(self._ledger, self._session_id, agent.agent_id, inner=self.manager)
                self._bindings[agent.agent_id] = binding
                binding.start(agent)
            return binding

    def _standalone(self, agent: Agent) -> bool:
        with self._lock:
            return agent.agent_id not in self._attached

    # -- Strands ConversationManager -------------------------------------------------------

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        """Drive the manager's before/after model-call callbacks (a session manager does it when present).

        They are coroutines Strands awaits: without a session manager their ledger work
        runs on a worker thread (see :mod:`contextledger.aio.runner`), never on the agent's loop.
        """
        super().register_hooks(registry, **kwargs)
        registry.add_callback(BeforeModelCallEvent, self._before_model_call_first, order=HookOrder.SDK_FIRST)
        registry.add_callback(BeforeModelCallEvent, self._before_model_call_last, order=HookOrder.SDK_LAST)
        registry.add_callback(AfterModelCallEvent, self._after_model_call, order=HookOrder.SDK_FIRST)

    async def _before_model_call_first(self, event: BeforeModelCallEvent) -> None:
        if self._standalone(event.agent):
            await self._run(lambda: self.binding(event.agent).before_model_call_first(event.agent, event))

    async def _before_model_call_last(self, event: BeforeModelCallEvent) -> None:
        if self._standalone(event.agent):
            await self._run(lambda: self.binding(event.agent).before_model_call_last(event.agent, event))

    async def _after_model_call(self, event: AfterModelCallEvent) -> None:
        if self._standalone(event.agent):
            await self._run(lambda: self.binding(event.agent).after_model_call(event.agent, event))

    async def _run(self, work: Callable[[], None]) -> None:
        """Run ``work`` on a worker thread (one per call) and wait for it."""
        with self._lock:
            if self._runner is None:
                self._runner = Runner(workers=4, name="a StrandsConversationManager's ledger")
            runner = self._runner
        await runner.run(work)

    def apply_management(self, agent: Agent, **kwargs: Any) -> None:
        """End-of-invocation management by the wrapped manager, on the ledger."""
        self.binding(agent).manage(agent)

    def reduce_context(self, agent: Agent, e: Exception | None = None, **kwargs: Any) -> None:
        """Reduce now: reactively after the overflow ``e`` (must reduce or raise), else proactively.

        Raises:
            StrandsReductionFailed: Nothing could be reduced after an overflow; it is
                both ``ReductionFailed`` and Strands' ``ContextWindowOverflowException``.
            Exception: ``e`` itself when the wrapped manager does not handle overflows.
        """
        self.binding(agent).reduce(agent, e)

    def get_state(self) -> dict[str, Any]:
        """Strands' base state plus the wrapped manager's typed state."""
        state = super().get_state()
        # A copy: Strands keeps what it is handed, and a manager's export is shared (made once per state).
        state["manager_state"] = copy.deepcopy(self.manager.export_state())
        return state

    def restore_from_session(self, state: dict[str, Any]) -> list[Any] | None:
        """Restore state saved by a Strands session manager (the ledger restores it by itself).

        Raises:
            ValueError: ``state`` was saved by another conversation manager.
        """
        super().restore_from_session(state)
        self.manager.restore_state(state.get("manager_state"))
        return None
