"""Ledger stores: one required protocol, declared capabilities, interchangeable implementations.

:class:`LedgerStore` is what every store must do (load, commit, close); the rest are
capabilities a store declares (:mod:`contextledger.stores.capabilities`).

:class:`MemoryStore` is imported on first use (PEP 562), so a process on another
backend never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from contextledger.stores.base import LedgerStore

if TYPE_CHECKING:
    from contextledger.stores.memory import MemoryStore

__all__ = ["LedgerStore", "MemoryStore"]


def __getattr__(name: str) -> Any:
    if name != "MemoryStore":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from contextledger.stores.memory import MemoryStore

    globals()[name] = MemoryStore
    return MemoryStore
