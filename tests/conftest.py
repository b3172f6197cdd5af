"""Shared fixtures: a ``store`` fixture parametrized over every backend.

Each backend's fixtures live in a plugin under ``tests/plugins``. Real servers only:
a URL from the environment when set, else testcontainers when a Docker engine answers,
else a throwaway server started from the local binaries on a free loopback port. Under
``CI=true`` a backend that cannot start fails the run instead of skipping.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import settings

from contextledger.stores.base import LedgerStore
from contextledger.stores.memory import MemoryStore
from tests.plugins import in_ci

pytest_plugins = ["tests.plugins.sql", "tests.plugins.redis"]

# CI replays the same examples on every run, so a red CI is reproducible; local runs explore.
settings.register_profile("ci", derandomize=True, print_blob=True)
if in_ci():
    settings.load_profile("ci")

STORE_BACKENDS = ["memory", "sqlite", "postgres", "redis", "redis_cluster"]


@pytest.fixture
def memory_store() -> Iterator[LedgerStore]:
    """A fresh in-process store."""
    backend = MemoryStore()
    yield backend
    backend.close()


@pytest.fixture(params=STORE_BACKENDS)
def store(request: pytest.FixtureRequest) -> LedgerStore:
    """A fresh, empty store of each backend (``<name>_store`` fixtures of the plugins)."""
    backend: LedgerStore = request.getfixturevalue(f"{request.param}_store")
    return backend
