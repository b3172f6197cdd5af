"""Ledger stores: one protocol, interchangeable implementations."""

from contextledger.stores.base import LedgerStore
from contextledger.stores.memory import MemoryStore

__all__ = ["LedgerStore", "MemoryStore"]
