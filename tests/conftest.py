"""Shared fixtures: a ``store`` fixture parametrized over every backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contextledger.stores.base import LedgerStore
from contextledger.stores.memory import MemoryStore


@pytest.fixture(params=["memory"])
def store(request: pytest.FixtureRequest) -> Iterator[LedgerStore]:
    """A fresh, empty store of each backend."""
    backend = MemoryStore()
    yield backend
    backend.close()
