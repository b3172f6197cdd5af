"""Fixtures shared by the SQL store tests: one database of each engine per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contextledger.stores.sql import SQLStore, upgrade

ENGINES = ["sqlite", "postgres"]


@pytest.fixture(params=ENGINES)
def empty_url(request: pytest.FixtureRequest) -> str:
    """A URL of an empty database (no ledger schema) on each engine."""
    url: str = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_empty_url")
    return url


@pytest.fixture(params=ENGINES)
def ledger_url(request: pytest.FixtureRequest) -> str:
    """A URL of a database at the ledger's head revision on each engine."""
    if request.param == "sqlite":
        url: str = request.getfixturevalue("sqlite_url")
        upgrade(url)
        return url
    url = request.getfixturevalue("postgres_ledger_url")
    return url


@pytest.fixture
def sql_store(ledger_url: str) -> Iterator[SQLStore]:
    """A fresh SQL store on each engine."""
    store = SQLStore.from_url(ledger_url)
    yield store
    store.close()
