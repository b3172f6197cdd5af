"""The shared base of the built-in managers: hook wiring, protection and typed state.

A :class:`PolicyManager` is a hook provider. It always subscribes to
:class:`~contextledger.core.hooks.BeforeModelCallEvent`,
:class:`~contextledger.core.hooks.AfterModelCallEvent` and
:class:`~contextledger.core.hooks.AfterInvocationEvent`, and decides *inside* each callback
whether to request a reduction, so options changed at run time
(``manager.per_turn = 3``, ``manager.proactive_compression = True``) take effect on
the next event. The :class:`~contextledger.Conversation` plans and commits what was
requested.

Reductions come in two kinds (seed design):

* reactive -- after a context-window overflow the conversation must reduce (and ask
  for the model call to be retried) or raise :class:`~contextledger.errors.ReductionFailed`;
* best-effort -- per-turn, proactive and end-of-invocation reductions never break the
  turn: any failure, a concurrency conflict included, is logged and the turn goes on.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import ConfigDict, Field, ValidationError

from contextledger.core.changeset import Planned, ReductionPlan, ReductionRequest
from contextledger.core.hooks import (
    AfterInvocationEvent,
    AfterModelCallEvent,
    BeforeModelCallEvent,
    ConversationContext,
    HookRegistry,
)
from contextledger.core.view import View
from contextledger.core.viewrules import fit_plan, newest_prompt
from contextledger.errors import ConfigurationError, InvalidPlan
from contextledger.managers.base import ManagerState, ProtectedMessages, require_ledger_registry
from contextledger.managers.options import (
    DEFAULT_COMPRESSION_THRESHOLD,
    Option,
    PolicyOptions,
    ProactiveCompression,
    ProactiveCompressionConfig,
    ProtectedSpec,
    describe,
    parse_proactive_compression,
    parse_protected_messages,
)

__all__ = [
    "DEFAULT_COMPRESSION_THRESHOLD",
    "PolicyManager",
    "PolicyState",
    "ProactiveCompression",
    "ProactiveCompressionConfig",
    "ProtectedSpec",
    "entry_ids",
    "evictable_groups",
    "parse_proactive_compression",
    "parse_protected_messages",
    "protected_indexes",
]

logger = logging.getLogger(__name__)


class PolicyState(ManagerState):
    """Counters every built-in manager persists with each commit.

    Attributes:
        manager: The name of the manager that owns the state.
        reductions: Reductions this manager planned and the conversation committed.
        removed: Entries taken out of the view by those reductions.
        revised: Messages whose content was rewritten (truncated tool results).
        summaries: Summaries created.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    reductions: int = Field(default=0, ge=0)
    removed: int = Field(default=0, ge=0)
    revised: int = Field(default=0, ge=0)
    summaries: int = Field(default=0, ge=0)


def protected_indexes(view: View, protected: ProtectedMessages) -> set[int]:
    """Indexes of ``view`` inside the protected first/last ranges."""
    size = len(view)
    indexes = set(range(min(protected.first, size)))
    indexes.update(range(max(0, size - protected.last), size))
    return indexes


def evictable_groups(view: View, protected: Collection[int]) -> list[list[int]]:
    """Tool-pair groups (oldest first) with no pinned member and no member in ``protected``.

    A group is protected as a whole when any member is, so a pin or a protected range
    also keeps the tool-pair partner of the entry it covers.
    """
    kept = view.pinned_indexes.union(protected)
    return [g for g in view.groups if kept.isdisjoint(g)]


def entry_ids(view: View, indexes: Sequence[int]) -> tuple[str, ...]:
    """The entry ids at ``indexes`` in view order."""
    return tuple(view[i].entry_id for i in sorted(set(indexes)))


class PolicyManager(ABC):
    """Base of the built-in managers: hooks, protection, proactive compression, typed state.

    Subclasses implement :meth:`make_plan` (pure: no I/O, deterministic for a view and a
    request). :meth:`plan` wraps it: it checks the plan against the view rules (with
    the manager's protected ranges, so the conversation never has to correct it) and
    returns it with the next :class:`PolicyState`; the manager object is not changed
    until the conversation commits and hands the committed state back
    (:meth:`restore_state`). Use one manager instance per conversation.

    Options live in :attr:`options` (a pydantic model validated on every assignment)
    and read and write as attributes.

    Raises:
        ConfigurationError: An option is invalid.
    """

    name: str = "policy"
    manages_end_of_invocation: ClassVar[bool] = False
    """Whether :class:`AfterInvocationEvent` requests a best-effort ``end_of_invocation`` reduction."""
    options_model: ClassVar[type[PolicyOptions]] = PolicyOptions
    state_model: ClassVar[type[PolicyState]] = PolicyState
    """The typed state this manager persists (a :class:`PolicyState`, or a subclass with more fields)."""

    _exported: tuple[PolicyState, dict[str, Any]] | None = None
    """The last state :meth:`export_state` exported, and its JSON."""

    proactive_compression = Option[ProactiveCompression, ProactiveCompression]()
    protected_messages = Option[ProtectedMessages, ProtectedSpec]()

    def __init__(self, **options: Any) -> None:
        """Validate the options; see the class docstring."""
        try:
            self.options: PolicyOptions = self.options_model(**options)
        except ValidationError as exc:
            raise ConfigurationError(describe(exc)) from exc
        self._state = self.state_model(manager=self.name)

    @property
    def compression_threshold(self) -> float | None:
        """The share of the context window that triggers proactive compression, or ``None``."""
        return parse_proactive_compression(self.options.proactive_compression)

    # -- state -----------------------------------------------------------------------------

    @property
    def state(self) -> PolicyState:
        """The committed typed state (frozen)."""
        return self._state

    def export_state(self) -> dict[str, Any] | None:
        """The committed state as JSON (a new dict for each state; do not change it).

        A state is frozen, so its JSON is made once: every commit of the conversation
        carries it, the model-call counts included.
        """
        state = self._state
        exported = self._exported
        if exported is None or exported[0] is not state:
            exported = self._exported = (state, state.model_dump(mode="json"))
        return exported[1]

    def restore_state(self, state: Mapping[str, Any] | None) -> None:
        """Load committed state (after a read or a commit of the conversation).

        ``None`` starts fresh. State written by a different manager (the conversation
        switched managers) is ignored with an info log.

        Raises:
            ConfigurationError: ``state`` is not valid state of this manager.
        """
        if state is None:
            self._state = self.state_model(manager=self.name)
            return
        if not isinstance(state, Mapping):
            raise ConfigurationError(f"{self.name} manager state must be a JSON object, got {type(state).__name__}")
        owner = state.get("manager")
        if isinstance(owner, str) and owner != self.name:
            logger.info("manager=<%s>, stored_manager=<%s> | state of another manager ignored", self.name, owner)
            self._state = self.state_model(manager=self.name)
            return
        try:
            self._state = self.state_model.model_validate(dict(state))
        except ValidationError as exc:
            raise ConfigurationError(f"invalid {self.name} manager state: {describe(exc)}") from exc

    # -- planning --------------------------------------------------------------------------

    @abstractmethod
    def make_plan(self, view: View, request: ReductionRequest) -> ReductionPlan | None:
        """Decide what to change for ``view``; ``None`` when nothing should or can change.

        Must not do I/O and must be deterministic given the view and the request; the
        plan must already follow the view rules (see :meth:`fit`).
        """

    def blocked(self, view: View, request: ReductionRequest) -> str | None:
        """Why nothing could be reduced although a reduction was due (``None``: none was due)."""
        return None

    def plan(self, view: View, request: ReductionRequest) -> Planned:
        """The plan for ``view`` and the state the manager has once it is committed (pure)."""
        if not _over_threshold(request):
            return Planned(None, None)
        plan = self.make_plan(view, request)
        if plan is None or plan.is_empty:
            return Planned(None, None, note=self.blocked(view, request))
        state = self._state.model_copy(
            update={
                "reductions": self._state.reductions + 1,
                "removed": self._state.removed + len(plan.removed_ids()),
                "revised": self._state.revised + len(plan.revisions),
                "summaries": self._state.summaries + (plan.summary is not None),
            }
        )
        return Planned(plan, state)

    def protected(self, view: View) -> set[int]:
        """Indexes of ``view`` this manager never removes: the first/last ranges and the newest prompt."""
        indexes = protected_indexes(view, self.options.protected_messages)
        newest = newest_prompt(view)
        if newest is not None:
            indexes.add(newest)
        return indexes

    def fit(self, view: View, plan: ReductionPlan, keep: Collection[int]) -> ReductionPlan | None:
        """``plan`` brought to the view rules without touching ``keep``; ``None`` when impossible."""
        try:
            return fit_plan(view, plan, keep=keep)
        except InvalidPlan:
            return None

    # -- hooks -----------------------------------------------------------------------------

    def register_hooks(self, registry: HookRegistry) -> None:
        """Subscribe to before/after model call and after invocation (checks run in the callbacks)."""
        require_ledger_registry(registry, self)
        registry.add_callback(BeforeModelCallEvent, self._on_before_model_call)
        registry.add_callback(AfterModelCallEvent, self._on_after_model_call)
        registry.add_callback(AfterInvocationEvent, self._on_after_invocation)

    def per_turn_due(self, context: ConversationContext) -> bool:
        """Whether a ``per_turn`` reduction runs before this model call (none by default)."""
        return False

    def _on_before_model_call(self, event: BeforeModelCallEvent) -> None:
        context = event.context
        if self.per_turn_due(context):
            event.request_reduction("per_turn")
        threshold = self.compression_threshold
        limit, projected = context.context_window_limit, context.projected_input_tokens
        if threshold is not None and limit and projected is not None and projected / limit >= threshold:
            logger.debug(
                "session_id=<%s>, agent_id=<%s>, projected=<%d>, limit=<%d>, threshold=<%s> | proactive compression",
                context.session_id,
                context.agent_id,
                projected,
                limit,
                threshold,
            )
            # The conversation re-projects after an earlier reduction of the same call.
            event.request_reduction("proactive", threshold=threshold)

    def _on_after_model_call(self, event: AfterModelCallEvent) -> None:
        if event.context.overflow:
            event.request_reduction("reactive")

    def _on_after_invocation(self, event: AfterInvocationEvent) -> None:
        if self.manages_end_of_invocation:
            event.request_reduction("end_of_invocation")


def _over_threshold(request: ReductionRequest) -> bool:
    threshold, limit, projected = request.threshold, request.context_window_limit, request.projected_input_tokens
    if threshold is None or not limit or projected is None:
        return True
    return projected / limit >= threshold
