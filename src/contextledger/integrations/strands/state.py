"""The manager state the ledger keeps for a Strands agent.

A :class:`~contextledger.Conversation` commits its manager's exported state with every
changeset. For a Strands agent that state is the Strands side of the agent -- the
conversation manager's ``get_state()`` (its ``model_call_count``, its summary message)
and the internal state Strands restores (interrupt and model state) -- plus, when the
agent runs one of contextledger's managers through
:class:`~contextledger.integrations.strands.StrandsConversationManager`, that
manager's own typed state. :class:`StrandsState` carries all of it, so it moves with the
view in the same atomic commit.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from contextledger.core.changeset import Planned
from contextledger.core.hooks import BeforeModelCallEvent, HookRegistry
from contextledger.core.view import View
from contextledger.errors import ConfigurationError
from contextledger.integrations.strands.convert import decode_json, encode_json
from contextledger.managers.base import ConversationManager, ReductionRequest, as_planned

__all__ = ["StrandsSnapshot", "StrandsState"]

logger = logging.getLogger(__name__)

MANAGER_NAME = "strands"


class StrandsSnapshot(BaseModel):
    """The Strands side of an agent, as committed with its view.

    Attributes:
        manager: Always ``strands``.
        conversation_manager_class: The Strands conversation manager's class name.
        conversation_manager: Its ``get_state()`` (JSON-safe, bytes tagged).
        internal_state: Strands' internal agent state (interrupt and model state).
        inner: The typed state of the contextledger manager run through the adapter.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    manager: str = MANAGER_NAME
    conversation_manager_class: str | None = None
    conversation_manager: dict[str, Any] | None = None
    internal_state: dict[str, Any] | None = None
    inner: dict[str, Any] | None = None


class StrandsState:
    """The :class:`~contextledger.managers.base.ConversationManager` a Strands agent's conversation runs.

    It plans nothing itself: a Strands conversation manager reduces ``agent.messages``
    and the sync records what it did. It delegates planning and hooks to ``inner`` (one
    of contextledger's managers handed to the agent through the adapter), and exports
    the captured Strands state together with ``inner``'s state.

    Args:
        inner: The contextledger manager the adapter runs, if any.
        before_model_call: Called first on every
            :class:`~contextledger.core.hooks.BeforeModelCallEvent`, before ``inner``'s
            callbacks (the integration syncs the agent there, so the model-call count
            rides with that commit).
    """

    name = MANAGER_NAME

    def __init__(
        self,
        inner: ConversationManager | None = None,
        *,
        before_model_call: Callable[[BeforeModelCallEvent], None] | None = None,
    ) -> None:
        """Wrap ``inner``; see the class docstring."""
        self.inner = inner
        self._before_model_call = before_model_call
        self._captured: StrandsSnapshot | None = None
        self._stored = StrandsSnapshot()
        self._exported: tuple[StrandsSnapshot, dict[str, Any]] | None = None  # the last export and its snapshot

    # -- the Strands side ------------------------------------------------------------------

    def capture(
        self,
        conversation_manager_class: str | None,
        conversation_manager: Mapping[str, Any] | None,
        internal_state: Mapping[str, Any] | None,
    ) -> None:
        """Record the Strands state to commit with the next changeset."""
        self._captured = StrandsSnapshot(
            conversation_manager_class=conversation_manager_class,
            conversation_manager=encode_json(conversation_manager) if conversation_manager is not None else None,
            internal_state=encode_json(internal_state) if internal_state is not None else None,
        )

    @property
    def stored(self) -> StrandsSnapshot:
        """The state as last read from the ledger."""
        return self._stored

    def strands_conversation_manager_state(self) -> dict[str, Any] | None:
        """The stored Strands conversation-manager state, decoded (``None`` when absent)."""
        value = self._stored.conversation_manager
        return decode_json(value) if value is not None else None

    def strands_internal_state(self) -> dict[str, Any] | None:
        """The stored Strands internal agent state, decoded (``None`` when absent)."""
        value = self._stored.internal_state
        return decode_json(value) if value is not None else None

    def differs_from(self, stored: Mapping[str, Any] | None) -> bool:
        """Whether the next export would change the state stored as ``stored``."""
        return self.export_state() != (dict(stored) if stored is not None else None)

    # -- ConversationManager ---------------------------------------------------------------

    def register_hooks(self, registry: HookRegistry) -> None:
        """Subscribe the sync callback, then ``inner``'s callbacks."""
        if self._before_model_call is not None:
            registry.add_callback(BeforeModelCallEvent, self._before_model_call)
        if self.inner is not None:
            self.inner.register_hooks(registry)

    def plan(self, view: View, request: ReductionRequest) -> Planned:
        """``inner``'s plan, its next state wrapped in this state (the Strands side plans nothing)."""
        if self.inner is None:
            return Planned()
        planned = as_planned(self.inner.plan(view, request))
        if planned.state is None:
            return planned
        inner = planned.state
        inner_json = inner.model_dump(mode="json") if isinstance(inner, BaseModel) else dict(inner)
        base = self._captured if self._captured is not None else self._stored
        state = base.model_copy(update={"inner": inner_json}).model_dump(mode="json")
        return dataclasses.replace(planned, state=state)

    def export_state(self) -> dict[str, Any] | None:
        """The captured Strands state plus ``inner``'s state, as JSON.

        The same dict while neither changed (a sync asks several times a turn): as the
        :class:`~contextledger.managers.base.ConversationManager` contract allows, it is
        shared, and its readers never change it.
        """
        base = self._captured if self._captured is not None else self._stored
        inner = self.inner.export_state() if self.inner is not None else None
        exported = self._exported
        # A snapshot is immutable, so the same one exports the same JSON; inner's state is
        # compared by value, since a manager may hand out a dict it later replaces or edits.
        if exported is not None and exported[0] is base and exported[1]["inner"] == inner:
            return exported[1]
        state = base.model_copy(update={"inner": copy.deepcopy(inner)}).model_dump(mode="json")
        self._exported = (base, state)
        return state

    def restore_state(self, state: dict[str, Any] | None) -> None:
        """Load the stored state; hand ``inner`` its part.

        State written by something else (the conversation was run without the Strands
        integration before) is ignored with an info log.

        Raises:
            ConfigurationError: ``state`` claims to be Strands state but is malformed.
        """
        if state is None or state.get("manager") != MANAGER_NAME:
            if state is not None:
                logger.info("stored_manager=<%s> | state of another manager ignored", state.get("manager"))
            self._stored = StrandsSnapshot()
        else:
            try:
                self._stored = StrandsSnapshot.model_validate(state)
            except ValueError as exc:
                raise ConfigurationError(f"invalid Strands integration state: {exc}") from exc
        if self.inner is not None:
            self.inner.restore_state(self._stored.inner)
