"""Fixtures of the ADK tests: a session service on every ledger backend, and ADK's own services beside them.

The ledger's service is opened from a URL, on the asyncio drivers, as an application opens
it. ADK's in-memory and database services run the same contract tests: what the tests
state is ADK's contract, not something of the ledger's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from google.adk.sessions import BaseSessionService, InMemorySessionService
from google.adk.sessions.database_session_service import DatabaseSessionService

from contextledger.integrations.adk import LedgerSessionService
from tests.cli.conftest import invoke  # noqa: F401 - the CLI runner fixture, for `contextledger import adk`
from tests.conftest import STORE_BACKENDS
from tests.plugins.redis import purge

LEDGER = [f"ledger-{backend}" for backend in STORE_BACKENDS]
SERVICES = [*LEDGER, "adk-in_memory", "adk-database"]

DIVERGENCES: dict[tuple[str, str], str] = {
    ("adk-database", "test_an_equal_event_delivered_again_is_stored_once"): (
        "ADK's database service inserts the event again and fails on its primary key; the in-memory"
        " service documents the re-delivery as idempotent, and the ledger's service keeps it so"
    ),
}
"""(service, contract test) -> why that one of ADK's own services fails it (an expected, strict failure)."""


@pytest.fixture
def anyio_backend() -> str:
    """The ADK tests run on asyncio (ADK's event loop)."""
    return "asyncio"


def _ledger_url(request: pytest.FixtureRequest, backend: str) -> tuple[str, dict[str, Any], Callable[[], None]]:
    if backend == "memory":
        return "memory://", {}, lambda: None
    if backend == "sqlite":
        return request.getfixturevalue("sqlite_url"), {}, lambda: None
    if backend == "postgres":
        return request.getfixturevalue("postgres_ledger_url"), {}, lambda: None
    url: str = request.getfixturevalue(f"{backend}_url")
    prefix: str = request.getfixturevalue("redis_key_prefix")
    return url, {"key_prefix": prefix}, lambda: purge(url, prefix)


@pytest.fixture(params=LEDGER)
def ledger_url(request: pytest.FixtureRequest) -> Any:
    """``(url, options)`` of a fresh, empty ledger on each backend."""
    url, options, cleanup = _ledger_url(request, request.param.removeprefix("ledger-"))
    yield url, options
    cleanup()


@pytest.fixture(params=SERVICES)
async def session_service(request: pytest.FixtureRequest) -> AsyncIterator[BaseSessionService]:
    """A fresh session service: the ledger's on each backend, then ADK's in-memory and database services."""
    name: str = request.param
    divergence = DIVERGENCES.get((name, request.node.originalname))
    if divergence is not None:
        request.node.add_marker(pytest.mark.xfail(strict=True, reason=divergence))
    if name == "adk-in_memory":
        yield InMemorySessionService()
        return
    if name == "adk-database":
        database = DatabaseSessionService("sqlite+aiosqlite:///:memory:")
        yield database
        await database.close()
        return
    url, options, cleanup = _ledger_url(request, name.removeprefix("ledger-"))
    service = LedgerSessionService(url, **options)
    try:
        yield service
    finally:
        await service.close()
        cleanup()
