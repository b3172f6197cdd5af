"""The shared base of the built-in managers: hook wiring, protection and typed state.

A :class:`PolicyManager` is a hook provider. It always subscribes to
:class:`~contextledger.hooks.BeforeModelCallEvent`,
:class:`~contextledger.hooks.AfterModelCallEvent` and
:class:`~contextledger.hooks.AfterInvocationEvent`, and decides *inside* each callback
whether to act, so options changed at run time (``manager.per_turn = 3``,
``manager.proactive_compression = True``) take effect on the next event.

Reductions come in two kinds (seed design):

* reactive -- after a context-window overflow the manager must reduce (and ask for the
  model call to be retried) or raise :class:`~contextledger.errors.ReductionFailed`;
* best-effort -- per-turn, proactive and end-of-invocation reductions never break the
  turn: any failure, a concurrency conflict included, is logged and the turn goes on.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from pydantic import ConfigDict, Field, ValidationError

from contextledger.changeset import ReductionPlan
from contextledger.errors import ConfigurationError, ContextLedgerError, ReductionFailed
from contextledger.hooks import AfterInvocationEvent, AfterModelCallEvent, BeforeModelCallEvent, HookRegistry
from contextledger.managers.base import ManagerState, ProtectedMessages, ReductionRequest
from contextledger.records import Reduction, Trigger
from contextledger.view import View

if TYPE_CHECKING:
    from contextledger.conversation import Conversation

__all__ = [
    "DEFAULT_COMPRESSION_THRESHOLD",
    "PolicyManager",
    "PolicyState",
    "ProactiveCompressionConfig",
    "evictable_groups",
    "parse_proactive_compression",
    "parse_protected_messages",
    "protected_indexes",
]

logger = logging.getLogger(__name__)

DEFAULT_COMPRESSION_THRESHOLD = 0.7
"""The share of the context window at which ``proactive_compression=True`` compresses."""


class ProactiveCompressionConfig(TypedDict):
    """``proactive_compression={"compression_threshold": 0.8}``: compress at 80% of the window."""

    compression_threshold: float


ProactiveCompression = bool | ProactiveCompressionConfig | Mapping[str, Any] | None
ProtectedSpec = ProtectedMessages | Mapping[str, Any] | None


class PolicyState(ManagerState):
    """Counters every built-in manager persists with each commit.

    Attributes:
        manager: The name of the manager that owns the state.
        reductions: Reductions this manager planned and the conversation committed.
        removed: Entries taken out of the view by those reductions.
        revised: Messages whose content was rewritten (truncated tool results).
        summaries: Summaries created.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    reductions: int = Field(default=0, ge=0)
    removed: int = Field(default=0, ge=0)
    revised: int = Field(default=0, ge=0)
    summaries: int = Field(default=0, ge=0)


def parse_proactive_compression(value: object) -> float | None:
    """Validate a ``proactive_compression`` option and return its threshold.

    Args:
        value: ``None``/``False`` (off), ``True`` (threshold
            :data:`DEFAULT_COMPRESSION_THRESHOLD`), or ``{"compression_threshold": x}``
            with ``0 < x <= 1``.

    Returns:
        The threshold, or ``None`` when proactive compression is off.

    Raises:
        ConfigurationError: Any other value.
    """
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT_COMPRESSION_THRESHOLD
    if isinstance(value, Mapping):
        unknown = set(value) - {"compression_threshold"}
        if unknown:
            raise ConfigurationError(
                f"proactive_compression: unknown keys {sorted(map(str, unknown))}; only 'compression_threshold'"
            )
        threshold = value.get("compression_threshold", DEFAULT_COMPRESSION_THRESHOLD)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold <= 1:
            raise ConfigurationError(
                f"proactive_compression: compression_threshold must be a number in (0, 1], got {threshold!r}"
            )
        return float(threshold)
    raise ConfigurationError(
        f"proactive_compression must be None, a bool or {{'compression_threshold': x}}, got {value!r}"
    )


def parse_protected_messages(value: object) -> ProtectedMessages:
    """Validate a ``protected_messages`` option (``{"first": N, "last": M}`` or :class:`ProtectedMessages`).

    Raises:
        ConfigurationError: Not a mapping/``ProtectedMessages``, unknown keys, or negative counts.
    """
    if value is None:
        return ProtectedMessages()
    if isinstance(value, ProtectedMessages):
        return value
    if isinstance(value, Mapping):
        try:
            return ProtectedMessages.model_validate(dict(value))
        except ValidationError as exc:
            raise ConfigurationError(f"protected_messages: {_first_error(exc)}") from exc
    raise ConfigurationError(f"protected_messages must be {{'first': N, 'last': M}}, got {value!r}")


def protected_indexes(view: View, protected: ProtectedMessages) -> set[int]:
    """Indexes of ``view`` inside the protected first/last ranges."""
    size = len(view)
    indexes = set(range(min(protected.first, size)))
    indexes.update(range(max(0, size - protected.last), size))
    return indexes


def evictable_groups(view: View, protected: set[int]) -> list[list[int]]:
    """Tool-pair groups (oldest first) with no pinned member and no member in ``protected``.

    A group is protected as a whole when any member is, so a pin or a protected range
    also keeps the tool-pair partner of the entry it covers.
    """
    return [g for g in view.groups if not any(i in protected or view[i].pinned for i in g)]


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error.get("loc", ())) or "value"
    return f"{where}: {error.get('msg')}"


class PolicyManager(ABC):
    """Base of the built-in managers: hooks, protection, proactive compression, typed state.

    Subclasses implement :meth:`make_plan` (pure: no I/O, deterministic for a view and a
    request). :meth:`plan` wraps it and stages the counters of :class:`PolicyState`, which
    the :class:`~contextledger.Conversation` commits together with the reduction (after a
    concurrency conflict the conversation re-reads the stored state before re-planning,
    so nothing is counted twice). Use one manager instance per conversation.

    Args:
        proactive_compression: See :func:`parse_proactive_compression`.
        protected_messages: Positional protection, see :func:`parse_protected_messages`.

    Raises:
        ConfigurationError: An option is invalid.
    """

    name: str = "policy"
    manages_end_of_invocation: ClassVar[bool] = False
    """Whether :class:`AfterInvocationEvent` runs a best-effort ``end_of_invocation`` reduction."""

    def __init__(
        self,
        *,
        proactive_compression: ProactiveCompression = None,
        protected_messages: ProtectedSpec = None,
    ) -> None:
        """Validate the shared options; see the class docstring."""
        self.proactive_compression = proactive_compression
        self.protected_messages = protected_messages
        self._state = PolicyState(manager=self.name)

    # -- options (validated on every assignment) -------------------------------------------

    @property
    def proactive_compression(self) -> ProactiveCompression:
        """The option as given; assigning validates it (``ConfigurationError``)."""
        return self._proactive_compression

    @proactive_compression.setter
    def proactive_compression(self, value: ProactiveCompression) -> None:
        self._compression_threshold = parse_proactive_compression(value)
        self._proactive_compression = value

    @property
    def compression_threshold(self) -> float | None:
        """The share of the context window that triggers proactive compression, or ``None``."""
        return self._compression_threshold

    @property
    def protected_messages(self) -> ProtectedMessages:
        """The protected first/last ranges; assign a dict or :class:`ProtectedMessages`."""
        return self._protected_messages

    @protected_messages.setter
    def protected_messages(self, value: ProtectedSpec) -> None:
        self._protected_messages = parse_protected_messages(value)

    # -- state -----------------------------------------------------------------------------

    @property
    def state(self) -> PolicyState:
        """The typed state (frozen)."""
        return self._state

    def export_state(self) -> dict[str, Any] | None:
        """The state as JSON, committed with every changeset of the conversation."""
        return self._state.model_dump(mode="json")

    def restore_state(self, state: Mapping[str, Any] | None) -> None:
        """Load state exported by an earlier run.

        ``None`` starts fresh. State written by a different manager (the conversation
        switched managers) is ignored with an info log.

        Raises:
            ConfigurationError: ``state`` is not valid state of this manager.
        """
        if state is None:
            self._state = PolicyState(manager=self.name)
            return
        if not isinstance(state, Mapping):
            raise ConfigurationError(f"{self.name} manager state must be a JSON object, got {type(state).__name__}")
        owner = state.get("manager")
        if isinstance(owner, str) and owner != self.name:
            logger.info("manager=<%s>, stored_manager=<%s> | state of another manager ignored", self.name, owner)
            self._state = PolicyState(manager=self.name)
            return
        try:
            self._state = PolicyState.model_validate(dict(state))
        except ValidationError as exc:
            raise ConfigurationError(f"invalid {self.name} manager state: {_first_error(exc)}") from exc

    # -- planning --------------------------------------------------------------------------

    @abstractmethod
    def make_plan(self, view: View, request: ReductionRequest) -> ReductionPlan | None:
        """Decide what to change for ``view``; ``None`` when nothing should or can change.

        Must not do I/O and must be deterministic given the view and the request.
        """

    def plan(self, view: View, request: ReductionRequest) -> ReductionPlan | None:
        """Return :meth:`make_plan`'s plan and stage the counters committed with it."""
        plan = self.make_plan(view, request)
        if plan is None or plan.is_empty:
            return None
        self._state = self._state.model_copy(
            update={
                "reductions": self._state.reductions + 1,
                "removed": self._state.removed + len(plan.removed_ids()),
                "revised": self._state.revised + len(plan.revisions),
                "summaries": self._state.summaries + (plan.summary is not None),
            }
        )
        return plan

    def protected(self, view: View) -> set[int]:
        """Indexes of ``view`` this manager never evicts positionally (first/last ranges)."""
        return protected_indexes(view, self._protected_messages)

    # -- hooks -----------------------------------------------------------------------------

    def register_hooks(self, registry: HookRegistry) -> None:
        """Subscribe to before/after model call and after invocation (checks run in the callbacks)."""
        registry.add_callback(BeforeModelCallEvent, self._on_before_model_call)
        registry.add_callback(AfterModelCallEvent, self._on_after_model_call)
        registry.add_callback(AfterInvocationEvent, self._on_after_invocation)

    def per_turn_due(self, conversation: Conversation) -> bool:
        """Whether a ``per_turn`` reduction runs before this model call (none by default)."""
        return False

    def _on_before_model_call(self, event: BeforeModelCallEvent) -> None:
        conversation = event.conversation
        reduced = None
        if self.per_turn_due(conversation):
            reduced = self.reduce_best_effort(conversation, "per_turn")
        threshold = self._compression_threshold
        limit = event.context_window_limit
        projected = event.projected_input_tokens
        if threshold is None or not limit or projected is None:
            return
        if reduced is not None:
            # The host's projection predates the per-turn reduction; a reduction only lowers it.
            projected = min(projected, conversation.projected_input_tokens())
        if projected / limit >= threshold:
            logger.debug(
                "session_id=<%s>, agent_id=<%s>, projected=<%d>, limit=<%d>, threshold=<%s> | proactive compression",
                conversation.session_id,
                conversation.agent_id,
                projected,
                limit,
                threshold,
            )
            self.reduce_best_effort(
                conversation, "proactive", projected_input_tokens=projected, context_window_limit=limit
            )

    def _on_after_model_call(self, event: AfterModelCallEvent) -> None:
        conversation = event.conversation
        if not conversation.is_overflow(event.error):
            return
        self.reduce_reactive(conversation, event)

    def _on_after_invocation(self, event: AfterInvocationEvent) -> None:
        if self.manages_end_of_invocation:
            self.reduce_best_effort(event.conversation, "end_of_invocation")

    def reduce_reactive(self, conversation: Conversation, event: AfterModelCallEvent) -> Reduction:
        """Reduce after an overflow and ask for a retry, or raise.

        Raises:
            ReductionFailed: Nothing could be reduced (chained to the overflow error), or
                the plan itself failed (e.g. the summarizer raised).
            ContextLedgerError: The commit failed (e.g. conflicts beyond the retry budget).
        """
        error = event.error
        request = conversation.request("reactive", error)
        try:
            reduction = conversation.apply_plan(lambda view: self.plan(view, request), trigger="reactive", error=error)
        except BaseException:
            self._rollback(conversation)
            raise
        if reduction is None:
            raise ReductionFailed(
                f"session_id={conversation.session_id} agent_id={conversation.agent_id}: the context window "
                f"overflowed and the {self.name} manager found nothing left to reduce "
                f"({len(conversation.view)} entries, all protected, pinned or too recent)"
            ) from error
        event.retry_model_call = True
        return reduction

    def reduce_best_effort(self, conversation: Conversation, trigger: Trigger, **request: Any) -> Reduction | None:
        """Reduce now; on any failure log a structured warning and return ``None``."""
        req = conversation.request(trigger, **request)
        try:
            return conversation.apply_plan(lambda view: self.plan(view, req), trigger=trigger)
        except Exception as exc:  # best-effort by contract: the turn must go on
            self._rollback(conversation)
            logger.warning(
                "session_id=<%s>, agent_id=<%s>, manager=<%s>, trigger=<%s>, error=<%s: %s>"
                " | best-effort reduction failed, the turn goes on",
                conversation.session_id,
                conversation.agent_id,
                self.name,
                trigger,
                type(exc).__name__,
                exc,
                exc_info=not isinstance(exc, ContextLedgerError),
            )
            return None

    def _rollback(self, conversation: Conversation) -> None:
        """Drop counters staged by a plan that was not committed."""
        try:
            self.restore_state(conversation.state.manager_state)
        except ConfigurationError:  # pragma: no cover - the stored state was validated on load
            self._state = PolicyState(manager=self.name)


def entry_ids(view: View, indexes: Sequence[int]) -> tuple[str, ...]:
    """The entry ids at ``indexes`` in view order."""
    return tuple(view[i].entry_id for i in sorted(set(indexes)))
