"""The manager that never reduces: a context-window overflow reaches the caller."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextledger.core.changeset import ReductionPlan
from contextledger.core.hooks import HookRegistry
from contextledger.core.view import View
from contextledger.errors import ConfigurationError
from contextledger.managers.base import ReductionRequest, require_ledger_registry

__all__ = ["NullConversationManager"]


class NullConversationManager:
    """Registers no hooks and plans nothing.

    With it, :meth:`Conversation.after_model_call <contextledger.Conversation.after_model_call>`
    re-raises a context-window overflow unchanged, and the view only ever grows.
    """

    name: str = "null"

    def register_hooks(self, registry: HookRegistry) -> None:
        """Register nothing (seed design: the null provider registers zero hooks)."""
        require_ledger_registry(registry, self)

    def plan(self, view: View, request: ReductionRequest) -> ReductionPlan | None:
        """Never reduce."""
        return None

    def export_state(self) -> dict[str, Any] | None:
        """No state."""
        return None

    def restore_state(self, state: Mapping[str, Any] | None) -> None:
        """Accept any earlier state (e.g. of a manager used before) and keep none.

        Raises:
            ConfigurationError: ``state`` is neither ``None`` nor a JSON object.
        """
        if state is not None and not isinstance(state, Mapping):
            raise ConfigurationError(f"manager state must be a JSON object or None, got {type(state).__name__}")
