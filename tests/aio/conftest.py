"""Fixtures for the async API: a portal loop, and a fresh ledger of every backend that both APIs open."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.aio.portal import BlockingStore, Portal
from tests.conftest import STORE_BACKENDS
from tests.plugins.redis import purge

_MEASURED: dict[str, None] = {}  # in the order measured


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Show what the async tests measured (the event loop's lag on each backend)."""
    if not _MEASURED:
        return
    terminalreporter.write_sep("=", "async API figures")
    terminalreporter.write("\n".join(_MEASURED) + "\n")


@pytest.fixture
def report() -> Any:
    """Record one figure for the terminal summary."""
    return lambda line: _MEASURED.setdefault(line)


@pytest.fixture
def portal() -> Iterator[Portal]:
    """An event loop on its own thread for this test."""
    loop = Portal()
    yield loop
    loop.close()


@pytest.fixture(params=STORE_BACKENDS)
def backend_url(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(url, options)`` of a fresh, empty ledger on each backend (the options both APIs take)."""
    backend = request.param
    if backend == "memory":
        yield "memory://", {}
    elif backend == "sqlite":
        yield request.getfixturevalue("sqlite_url"), {}
    elif backend == "postgres":
        yield request.getfixturevalue("postgres_ledger_url"), {}
    else:
        url = request.getfixturevalue(f"{backend}_url")
        prefix = request.getfixturevalue("redis_key_prefix")
        yield url, {"key_prefix": prefix}
        purge(url, prefix)


@pytest.fixture
def async_store(portal: Portal, backend_url: tuple[str, dict[str, Any]]) -> Iterator[BlockingStore]:
    """A fresh store of each backend, every call handed to the async API's runner and awaited on the portal."""
    url, options = backend_url
    store = BlockingStore.open(portal, url, **options)
    yield store
    store.close()
