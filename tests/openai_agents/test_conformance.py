"""The OpenAI Agents ``Session`` contract (``contextledger.testing.openai_agents``) on every backend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from contextledger.testing.openai_agents import OpenAISessionContract
from tests.conftest import STORE_BACKENDS
from tests.plugins.redis import purge


@pytest.fixture(params=STORE_BACKENDS)
def ledger_url(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(url, options)`` of a fresh, empty ledger on each backend."""
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


class TestOpenAISessionContract(OpenAISessionContract):
    """Runs the OpenAI session contract against every backend."""
