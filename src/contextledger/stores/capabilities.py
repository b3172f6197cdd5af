"""Capabilities a store declares beside :class:`~contextledger.stores.base.LedgerStore`: lineage and expiry.

They are separate protocols so that a store written against the 0.2 protocol still
passes ``isinstance(store, LedgerStore)``; the built-in stores (memory, SQL, Redis)
implement both, and the operations that need one refuse a store without it with a
:class:`~contextledger.errors.ConfigurationError` instead of quietly doing less
(a fork whose lineage is not recorded could keep an erased secret).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from contextledger.errors import ConfigurationError
from contextledger.model.records import Expiry, LineageLink

__all__ = [
    "ExpiringStore",
    "LineageStore",
    "ResealingStore",
    "SettlesErasure",
    "Swap",
    "expiring",
    "resealing",
    "swap_in",
    "with_lineage",
]


@runtime_checkable
class LineageStore(Protocol):
    """A store that keeps, under each conversation, the forks (and copies) taken from it.

    Contract (checked by :class:`~contextledger.testing.lineage.LineageContract`):

    * :meth:`add_lineage` records each link under its ancestor conversation when that
      conversation exists (a link whose ancestor does not exist is skipped), and
      recording a link again (same :attr:`~contextledger.model.records.LineageLink.key`) changes
      nothing; the links go when the ancestor's session is deleted or expires.
    * :meth:`lineage` returns the links whose ancestor is in the session (or the one
      agent), oldest first. It only reads.
    """

    def add_lineage(self, links: Sequence[LineageLink]) -> int:
        """Record ``links`` under their ancestors; return how many were new."""
        ...

    def lineage(self, session_id: str, agent_id: str | None = None) -> list[LineageLink]:
        """The links whose ancestor is the session (or the one agent), oldest first."""
        ...


@runtime_checkable
class ExpiringStore(Protocol):
    """A store that removes whole idle sessions and remembers that they expired.

    Contract (checked by :class:`~contextledger.testing.lineage.ExpiryContract`):

    * :meth:`expire_session` removes every conversation of the session -- in one atomic
      step per store -- only when none of them was written at or after ``idle_before``
      (checked where the rows are, so a write that races with it keeps the session),
      and keeps one :class:`~contextledger.model.records.Expiry` per conversation.
    * A commit planned on a version > 0 of an expired conversation raises
      :class:`~contextledger.errors.SessionExpired`; a new conversation (version 0)
      may be created under the same ids.
    * :meth:`delete_session` forgets the session's expiries too.
    """

    def expire_session(self, session_id: str, *, idle_before: datetime, reason: str) -> list[Expiry]:
        """Remove the session if it was idle since before ``idle_before``; its expiries, or ``[]``."""
        ...

    def expirations(self, session_id: str) -> list[Expiry]:
        """The expiries kept for the session, oldest first."""
        ...


@runtime_checkable
class SettlesErasure(Protocol):
    """A store whose files can keep erased bytes for a while (SQLite's WAL, PostgreSQL's dead rows, Redis's AOF)."""

    def settle_erasure(self, *, timeout: float, vacuum: bool = False) -> str | None:
        """Make erased bytes leave the files the store writes, waiting at most ``timeout`` seconds.

        Returns ``None`` when no erased byte is known to remain, else a sentence saying
        where they remain and what to do. ``vacuum`` allows a rewrite that takes locks
        (PostgreSQL's ``VACUUM FULL`` of the ledger's tables).
        """
        ...


SwapPlace = Literal["content", "meta", "summary", "revision", "manager_state", "agent_state"]


@dataclass(frozen=True)
class Swap:
    """One sealed token to replace by another where it is still stored (a key rotation's unit).

    Attributes:
        where: Which value: a message's ``content`` or ``meta`` (``ident``: its id), a
            ``summary`` (its id), a ``revision``'s original (its message id and
            ``number``), or the conversation's ``manager_state`` / ``agent_state``.
        ident: The message or summary id (empty for state).
        number: The revision number (0 otherwise).
        old: The token stored now.
        new: The token to store instead.
    """

    where: SwapPlace
    ident: str
    old: str
    new: str
    number: int = 0


def swap_in(value: Any, old: str, new: str) -> tuple[Any, bool]:
    """``value`` (decoded JSON) with every string equal to ``old`` replaced by ``new``, and whether one was."""
    if isinstance(value, str):
        return (new, True) if value == old else (value, False)
    if isinstance(value, dict):
        found = False
        out: dict[str, Any] = {}
        for k, v in value.items():
            out[k], hit = swap_in(v, old, new)
            found = found or hit
        return out, found
    if isinstance(value, list | tuple):
        items = []
        found = False
        for v in value:
            item, hit = swap_in(v, old, new)
            items.append(item)
            found = found or hit
        return items, found
    return value, False


@runtime_checkable
class ResealingStore(Protocol):
    """A store that can replace sealed tokens in place (a key rotation: :mod:`contextledger.history.rotation`)."""

    def reseal(self, session_id: str, agent_id: str, swaps: Sequence[Swap]) -> int:
        """Apply the swaps of one conversation atomically, each only where its ``old`` token still is; return how many.

        A swap whose token is no longer there (the value was rewritten or erased since
        it was read) is skipped: the next rotation pass sees the new value. Versions,
        timestamps and everything else stay as they are.
        """
        ...


def resealing(store: object) -> ResealingStore:
    """``store`` as a :class:`ResealingStore`.

    Raises:
        ConfigurationError: The store cannot reseal values.
    """
    if not isinstance(store, ResealingStore):
        raise ConfigurationError(f"{type(store).__name__} cannot replace sealed values (reseal)")
    return store


def with_lineage(store: object) -> LineageStore:
    """``store`` as a :class:`LineageStore`.

    Raises:
        ConfigurationError: The store does not keep lineage.
    """
    if not isinstance(store, LineageStore):
        raise ConfigurationError(
            f"{type(store).__name__} does not record lineage (add_lineage, lineage): forks and erasure need it"
        )
    return store


def expiring(store: object) -> ExpiringStore:
    """``store`` as an :class:`ExpiringStore`.

    Raises:
        ConfigurationError: The store cannot expire sessions.
    """
    if not isinstance(store, ExpiringStore):
        raise ConfigurationError(f"{type(store).__name__} cannot expire sessions (expire_session, expirations)")
    return store
