"""The manager protocol, its typed state, and the protection settings shared by policies."""

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from contextledger.core.changeset import Planned, ReductionPlan, ReductionRequest
from contextledger.core.hooks import HookRegistry
from contextledger.core.view import View
from contextledger.errors import ConfigurationError

__all__ = [
    "ConversationManager",
    "ManagerState",
    "Planned",
    "ProtectedMessages",
    "ReductionRequest",
    "as_planned",
    "require_ledger_registry",
]


class ProtectedMessages(BaseModel):
    """Positional protection: the first ``first`` and last ``last`` entries of the view."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    first: int = Field(default=0, ge=0, strict=True)
    last: int = Field(default=0, ge=0, strict=True)


class ManagerState(BaseModel):
    """Base of every manager's persisted, typed state."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    manager: str


@runtime_checkable
class ConversationManager(Protocol):
    """A pure policy that plans reductions and subscribes to the hooks it needs.

    ``plan`` must not do I/O nor change the manager: the
    :class:`~contextledger.Conversation` commits what it returns (the plan and the
    manager's next state together), and may call it again on a fresh view after a
    concurrency conflict. Its callbacks request reductions on the event
    (:meth:`~contextledger.core.hooks.HookEvent.request_reduction`); they never commit.
    A ``plan`` that returns a bare :class:`ReductionPlan` (or ``None``) keeps its state.
    Under the async API on SQLite and in-memory stores, the callbacks and ``plan`` run on
    the caller's event-loop thread: they must not block (a summary is written on a worker
    thread, before the summarizer is called).
    """

    name: str

    def register_hooks(self, registry: HookRegistry) -> None:
        """Subscribe the manager's callbacks."""
        ...

    def plan(self, view: View, request: ReductionRequest) -> Planned | ReductionPlan | None:
        """Return what to change for ``view`` and the manager's next state."""
        ...

    def export_state(self) -> dict[str, Any] | None:
        """The manager's committed state as JSON, persisted with every commit.

        The dict may be shared: it rides with the commits that carry it, and a manager
        may hand out the same one while its state is unchanged. Callers read it, never
        change it (copy it first).
        """
        ...

    def restore_state(self, state: dict[str, Any] | None) -> None:
        """Load committed state (``None`` for a new conversation)."""
        ...


def as_planned(result: Planned | ReductionPlan | tuple[Any, ...] | None) -> Planned:
    """Normalize what a manager's ``plan`` returned.

    Raises:
        TypeError: ``result`` is none of a :class:`Planned`, a :class:`ReductionPlan`,
            ``None`` or a ``(plan, state)`` pair.
    """
    if isinstance(result, Planned):
        return result
    if result is None or isinstance(result, ReductionPlan):
        return Planned(result)
    if isinstance(result, tuple) and len(result) == 2:
        plan, state = result
        if (plan is None or isinstance(plan, ReductionPlan)) and (
            state is None or isinstance(state, BaseModel | Mapping)
        ):
            return Planned(plan, state)
    raise TypeError(f"a manager's plan() returns Planned, a ReductionPlan or None, got {result!r}")


def require_ledger_registry(registry: object, manager: object) -> None:
    """Refuse a host's hook registry: a manager subscribes to a Conversation's hooks only.

    A Strands ``Agent`` hands its ``conversation_manager`` its own registry at set-up;
    contextledger's managers share Strands' class names, so passing one directly is an
    easy mistake that would otherwise fail deep inside Strands on the first turn.

    Raises:
        ConfigurationError: ``registry`` is not a contextledger :class:`HookRegistry`.
    """
    if not isinstance(registry, HookRegistry):
        name = type(manager).__name__
        raise ConfigurationError(
            f"{name} is a contextledger manager, not a Strands one: wrap it as"
            f" conversation_manager=StrandsConversationManager({name}(...))"
            " (from contextledger.integrations.strands)"
        )
