"""Fixtures for the OpenAI Agents SDK tests: no tracing export, no network, a ledger URL per backend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agents import set_tracing_disabled

from tests.conftest import STORE_BACKENDS
from tests.plugins.redis import purge


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    # The SDK would try to export traces to its hosted backend; these tests stay on loopback.
    set_tracing_disabled(True)


@pytest.fixture(params=STORE_BACKENDS)
def ledger_url(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(url, options)`` of a fresh, empty ledger on each backend (opened by each test in its own loop)."""
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
