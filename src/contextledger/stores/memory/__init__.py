"""The in-process store (see :mod:`.store`), one module per group of capabilities."""

from contextledger.stores.memory.store import MemoryStore

__all__ = ["MemoryStore"]
