"""The capabilities a store declares beside the required :class:`~contextledger.stores.base.LedgerStore`.

A store must load, commit and close (:class:`~contextledger.stores.base.LedgerStore`);
everything else is a capability it may have: the listings over a session's rows, time
travel, session listings and deletion, erasure, transfer, app/user scopes, lineage,
expiry, erasure settling, resealing. Each is a protocol (in
:mod:`contextledger.stores.protocols`, importable from here) with one contract file in
:mod:`contextledger.testing`, and one :class:`Capability` object naming it here.

A store *declares* a capability by implementing its protocol (structural, as before);
a store that wraps another (the encrypting store) narrows that with a ``capabilities``
attribute, the set of names it really offers. Features check with
:meth:`Capability.of`, which raises :class:`~contextledger.errors.CapabilityMissing`
before anything is read or written -- never a quiet partial result (a fork whose lineage
is not recorded could keep an erased secret).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast, runtime_checkable

from contextledger.errors import CapabilityMissing
from contextledger.stores.base import LedgerStore
from contextledger.stores.protocols import (
    ErasingStore,
    ExpiringStore,
    HistoryStore,
    ImportingStore,
    LineageStore,
    ResealingStore,
    ScopedStore,
    SessionStore,
    SettlesErasure,
    TimeTravelStore,
)
from contextledger.stores.swaps import Swap, swap_in

__all__ = [
    "ALL",
    "ERASURE",
    "EXPIRY",
    "HISTORY",
    "LINEAGE",
    "RESEAL",
    "SCOPES",
    "SESSIONS",
    "SETTLE_ERASURE",
    "TIME_TRAVEL",
    "TRANSFER",
    "Capability",
    "CompleteStore",
    "ErasingStore",
    "ExpiringStore",
    "HistoryStore",
    "ImportingStore",
    "LineageStore",
    "ResealingStore",
    "ScopedStore",
    "SessionStore",
    "SettlesErasure",
    "Swap",
    "TimeTravelStore",
    "capabilities_of",
    "complete",
    "expiring",
    "resealing",
    "swap_in",
    "with_lineage",
]

C = TypeVar("C")


@dataclass(frozen=True, eq=False)
class Capability(Generic[C]):
    """One optional part of the store protocol: its name and the protocol a store implements.

    Attributes:
        name: How declarations and errors name it (``"history"``, ``"erasure"``...).
        protocol: The runtime-checkable protocol holding its methods.
    """

    name: str
    protocol: Any  # a Protocol class (mypy refuses protocols where a concrete type[C] is expected)

    def held_by(self, store: object) -> bool:
        """Whether ``store`` declares this capability (see :func:`capabilities_of`)."""
        return self.name in capabilities_of(store)

    def of(self, store: object, feature: str) -> C:
        """``store`` typed as this capability's protocol.

        Raises:
            CapabilityMissing: ``store`` does not declare it; nothing was read or written.
        """
        if not self.held_by(store):
            raise CapabilityMissing(self.name, type(store).__name__, feature)
        return cast(C, store)

    def __repr__(self) -> str:
        return f"Capability({self.name!r})"


HISTORY: Capability[HistoryStore] = Capability("history", HistoryStore)
TIME_TRAVEL: Capability[TimeTravelStore] = Capability("time_travel", TimeTravelStore)
SESSIONS: Capability[SessionStore] = Capability("sessions", SessionStore)
ERASURE: Capability[ErasingStore] = Capability("erasure", ErasingStore)
TRANSFER: Capability[ImportingStore] = Capability("transfer", ImportingStore)
SCOPES: Capability[ScopedStore] = Capability("scopes", ScopedStore)
LINEAGE: Capability[LineageStore] = Capability("lineage", LineageStore)
EXPIRY: Capability[ExpiringStore] = Capability("expiry", ExpiringStore)
SETTLE_ERASURE: Capability[SettlesErasure] = Capability("settle_erasure", SettlesErasure)
RESEAL: Capability[ResealingStore] = Capability("reseal", ResealingStore)

ALL: tuple[Capability[Any], ...] = (
    HISTORY,
    TIME_TRAVEL,
    SESSIONS,
    ERASURE,
    TRANSFER,
    SCOPES,
    LINEAGE,
    EXPIRY,
    SETTLE_ERASURE,
    RESEAL,
)
"""Every capability, in the order the contract suite and the docs list them."""


def capabilities_of(store: object) -> frozenset[str]:
    """The names of the capabilities ``store`` declares.

    A ``capabilities`` attribute (a set of names) is the declaration when the store has
    one -- a wrapper passes on only what its inner store holds; otherwise each capability
    whose protocol the store implements is declared. A declared capability whose methods
    are missing is a broken store, which the required contract reports.
    """
    declared = getattr(store, "capabilities", None)
    if declared is not None:
        return frozenset(declared)
    kind = type(store)
    found = _IMPLEMENTED.get(kind)
    if found is None:
        found = frozenset(cap.name for cap in ALL if isinstance(store, cap.protocol))
        # What a class implements is known once (a protocol check costs about 100 us); a
        # class forwarding attributes through __getattr__ depends on its instance.
        if not hasattr(kind, "__getattr__"):
            _IMPLEMENTED[kind] = found
    return found


_IMPLEMENTED: dict[type, frozenset[str]] = {}


@runtime_checkable
class CompleteStore(
    LedgerStore,
    HistoryStore,
    TimeTravelStore,
    SessionStore,
    ErasingStore,
    ImportingStore,
    ScopedStore,
    LineageStore,
    ExpiringStore,
    ResealingStore,
    Protocol,
):
    """A store with every capability but :class:`SettlesErasure` (which depends on its files): memory, SQL, Redis.

    Code written for the built-in stores (the full contract suite, the host suites) types
    against this; features check what they need with :meth:`Capability.of`.
    """


_COMPLETE = (HISTORY, TIME_TRAVEL, SESSIONS, ERASURE, TRANSFER, SCOPES, LINEAGE, EXPIRY, RESEAL)


def complete(store: object, feature: str) -> CompleteStore:
    """``store`` typed as a :class:`CompleteStore`, for code that uses most capabilities (suites, tools).

    Raises:
        CapabilityMissing: ``store`` lacks one of them (the first missing is named).
    """
    for capability in _COMPLETE:
        capability.of(store, feature)
    return cast(CompleteStore, store)


def resealing(store: object) -> ResealingStore:
    """``store`` as a :class:`ResealingStore`.

    Raises:
        CapabilityMissing: The store cannot reseal values.
    """
    return RESEAL.of(store, "key rotation (reseal)")


def with_lineage(store: object) -> LineageStore:
    """``store`` as a :class:`LineageStore`.

    Raises:
        CapabilityMissing: The store does not keep lineage (forks and erasure need it).
    """
    return LINEAGE.of(store, "forks and erasure (add_lineage, lineage)")


def expiring(store: object) -> ExpiringStore:
    """``store`` as an :class:`ExpiringStore`.

    Raises:
        CapabilityMissing: The store cannot expire sessions.
    """
    return EXPIRY.of(store, "expiry (expire_session, expirations)")
