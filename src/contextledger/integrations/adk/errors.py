"""The errors the ADK session service raises: ADK's own types, rooted in contextledger's hierarchy too.

Code written for ADK's services catches ``StaleSessionError``, ``AlreadyExistsError`` and
``SessionNotFoundError``; code written for the ledger catches
:class:`~contextledger.errors.ContextLedgerError`. Each error here is both.
"""

from __future__ import annotations

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError

from contextledger.errors import ContextLedgerError, SessionExists, SessionNotFound

__all__ = ["AdkSessionExists", "AdkSessionNotFound", "AdkStaleSession"]


class AdkStaleSession(ContextLedgerError, StaleSessionError):
    """A session object older than the stored session was given to ``append_event`` (reload it)."""


class AdkSessionExists(SessionExists, AlreadyExistsError):
    """``create_session`` named a session id the app's user already has."""

    def __init__(self, message: str) -> None:
        """Keep ``message`` where ADK's error keeps it (``.message``)."""
        super().__init__(message)
        self.message = message


class AdkSessionNotFound(SessionNotFound, SessionNotFoundError):
    """An event was appended to a session that does not exist (or was deleted)."""
