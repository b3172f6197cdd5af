"""Multi-agent state (Strands ``Swarm`` and ``Graph``) kept in the ledger.

Strands' session managers persist an orchestrator as one JSON document, the dict its
``serialize_state()`` returns (status, node history and results, the next nodes to
run, shared context, interrupt state), and restore it with ``deserialize_state()``.
The ledger keeps that document as the *agent state* of a conversation of its own in
the same session, under the reserved agent id ``multi_agent:<orchestrator id>`` (e.g.
``multi_agent:default_swarm``). It holds no messages; every sync is one atomic commit
of the whole document (optimistic concurrency, like every other commit), so a restore
sees the state of one sync point, never a mix. ``contextledger show SESSION`` lists it
under that agent id; ``Ledger.conversation(session, "multi_agent:<id>").agent_state``
returns the document.

Node agents keep no conversation of their own here: Strands refuses a session manager
on the agents of a ``Swarm`` or ``Graph`` (``ValueError``), and a node's results live in
the orchestrator's document, as with ``FileSessionManager``.
"""

from __future__ import annotations

import copy
import logging
import threading
import weakref
from typing import TYPE_CHECKING, Any

from contextledger.conversation.conversation import Conversation
from contextledger.errors import ConfigurationError
from contextledger.integrations.strands.convert import decode_json, encode_json
from contextledger.ledger import Ledger

if TYPE_CHECKING:
    from strands.multiagent.base import MultiAgentBase

__all__ = ["MULTI_AGENT_PREFIX", "MultiAgentBinding", "is_multi_agent_id", "multi_agent_id"]

logger = logging.getLogger(__name__)

MULTI_AGENT_PREFIX = "multi_agent:"
"""Agent ids starting with this are reserved for orchestrator state."""


def multi_agent_id(orchestrator_id: str) -> str:
    """The reserved agent id under which the state of orchestrator ``orchestrator_id`` is kept."""
    return f"{MULTI_AGENT_PREFIX}{orchestrator_id}"


def is_multi_agent_id(agent_id: str) -> bool:
    """Whether ``agent_id`` is reserved for orchestrator state."""
    return agent_id.startswith(MULTI_AGENT_PREFIX)


class MultiAgentBinding:
    """One Strands orchestrator bound to its state conversation.

    Args:
        ledger: Where the state lives.
        session_id: The session.
        source: The ``Swarm``, ``Graph`` or other ``MultiAgentBase``.

    Raises:
        ConfigurationError: ``source`` has no usable ``id``, or cannot serialize its
            state (``serialize_state`` is not implemented or fails).
    """

    def __init__(self, ledger: Ledger, session_id: str, source: MultiAgentBase) -> None:
        """Open the state conversation; see the class docstring."""
        orchestrator_id = getattr(source, "id", None)
        if not isinstance(orchestrator_id, str) or not orchestrator_id:
            raise ConfigurationError(
                f"{type(source).__name__} needs a non-empty string id to be persisted, got {orchestrator_id!r}"
            )
        self.kind = _kind(source)
        self.orchestrator_id = orchestrator_id
        self.lock = threading.RLock()
        self.conversation: Conversation = ledger.conversation(session_id, multi_agent_id(orchestrator_id))
        self._source: weakref.ReferenceType[MultiAgentBase] = weakref.ref(source)

    def source(self) -> MultiAgentBase | None:
        """The orchestrator, if it is still alive."""
        return self._source()

    def restore(self, source: MultiAgentBase) -> bool:
        """Load the stored state into ``source`` (nothing is written).

        Returns:
            Whether a stored state was restored (``False`` for a new orchestrator).

        Raises:
            ConfigurationError: The stored state belongs to another kind of orchestrator
                (a ``graph`` stored, a ``Swarm`` restoring), or ``source`` refuses it.
        """
        with self.lock:
            self._source = weakref.ref(source)
            if self.conversation.version == 0:
                return False
            payload = decode_json(self.conversation.agent_state)
            stored_kind = payload.get("type")
            if stored_kind != self.kind:
                raise ConfigurationError(
                    f"session {self.conversation.session_id!r} holds {stored_kind!r} state under id"
                    f" {self.orchestrator_id!r}; a {type(source).__name__} ({self.kind!r}) cannot resume it."
                    " Give the orchestrator another id"
                )
            try:
                source.deserialize_state(payload)
            except (KeyError, ValueError, TypeError) as exc:
                raise ConfigurationError(
                    f"stored {stored_kind} state {self.orchestrator_id!r} does not fit this {type(source).__name__}:"
                    f" {exc}"
                ) from exc
            logger.debug(
                "session_id=<%s>, multi_agent_id=<%s>, status=<%s> | restored multi-agent state",
                self.conversation.session_id,
                self.orchestrator_id,
                payload.get("status"),
            )
            return True

    def sync(self, source: MultiAgentBase) -> bool:
        """Commit ``source``'s state when it changed since the last commit (one commit).

        Returns:
            Whether a commit was made.
        """
        with self.lock:
            payload = encode_json(_serialize(source))
            if self.conversation.version > 0 and payload == self.conversation.agent_state:
                return False
            self.conversation.set_agent_state(copy.deepcopy(payload))
            logger.debug(
                "session_id=<%s>, multi_agent_id=<%s>, status=<%s> | committed multi-agent state",
                self.conversation.session_id,
                self.orchestrator_id,
                payload.get("status"),
            )
            return True


def _serialize(source: MultiAgentBase) -> dict[str, Any]:
    try:
        payload = source.serialize_state()
    except NotImplementedError as exc:
        raise ConfigurationError(
            f"{type(source).__name__} does not implement serialize_state(); Strands cannot persist it with a"
            " session manager"
        ) from exc
    if not isinstance(payload, dict):
        raise ConfigurationError(
            f"{type(source).__name__}.serialize_state() returned {type(payload).__name__}, not a dict"
        )
    return payload


def _kind(source: MultiAgentBase) -> str:
    """The ``type`` field the orchestrator writes (``swarm``, ``graph``), checked once at set-up."""
    kind = _serialize(source).get("type")
    return kind if isinstance(kind, str) and kind else type(source).__name__.lower()
