"""Errors the Strands integration raises: contextledger's and Strands' at once."""

from __future__ import annotations

from strands.types.exceptions import ContextWindowOverflowException, SessionException

from contextledger.errors import ConfigurationError, ReductionFailed

__all__ = ["DuplicateAgentId", "StrandsReductionFailed"]


class StrandsReductionFailed(ReductionFailed, ContextWindowOverflowException):
    """A context overflow nothing could be reduced for, inside a Strands agent.

    It is contextledger's :class:`~contextledger.errors.ReductionFailed` and Strands'
    ``ContextWindowOverflowException`` both, so an application's ``except
    ContextWindowOverflowException`` handler catches it as it catches the overflows of
    Strands' own managers; the manager's original error is its ``__cause__``.
    """


class DuplicateAgentId(ConfigurationError, SessionException):
    """Another live agent (or Swarm/Graph) with the same id is already bound to the session.

    It is contextledger's :class:`~contextledger.errors.ConfigurationError` and Strands'
    ``SessionException`` both -- Strands' own session managers raise ``SessionException``
    here ("The `agent_id` of an agent must be unique in a session."), so an application
    catching either catches it.
    """
