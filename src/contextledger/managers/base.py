"""The manager protocol, the reduction request, and protection settings shared by policies."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from contextledger.changeset import ReductionPlan
from contextledger.hooks import HookRegistry
from contextledger.records import Trigger
from contextledger.view import View

__all__ = ["ConversationManager", "ManagerState", "ProtectedMessages", "ReductionRequest"]


class ReductionRequest(BaseModel):
    """Why a plan is asked for, with what the policy may need to know.

    Attributes:
        trigger: What asked for the reduction.
        error: The model error text for a reactive reduction.
        model_call_count: The conversation's model call count (this call included).
        projected_input_tokens: Projected tokens of the next model input, when known.
        context_window_limit: The model's context window, when known.
    """

    model_config = ConfigDict(frozen=True)

    trigger: Trigger
    error: str | None = None
    model_call_count: int = 0
    projected_input_tokens: int | None = None
    context_window_limit: int | None = None


class ProtectedMessages(BaseModel):
    """Positional protection: the first ``first`` and last ``last`` entries of the view."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    first: int = Field(default=0, ge=0)
    last: int = Field(default=0, ge=0)


class ManagerState(BaseModel):
    """Base of every manager's persisted, typed state."""

    model_config = ConfigDict(extra="forbid")

    manager: str


@runtime_checkable
class ConversationManager(Protocol):
    """A pure policy that plans reductions and subscribes to the hooks it needs.

    ``plan`` must not do I/O: the :class:`~contextledger.Conversation` commits what it
    returns, and may call it again on a fresh view after a concurrency conflict.
    """

    name: str

    def register_hooks(self, registry: HookRegistry) -> None:
        """Subscribe the manager's callbacks."""
        ...

    def plan(self, view: View, request: ReductionRequest) -> ReductionPlan | None:
        """Return what to change for ``view``, or ``None`` when nothing should change."""
        ...

    def export_state(self) -> dict[str, Any] | None:
        """The manager's typed state as JSON, persisted with every commit."""
        ...

    def restore_state(self, state: dict[str, Any] | None) -> None:
        """Load state exported by a previous run (``None`` for a new conversation)."""
        ...
