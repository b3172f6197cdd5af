"""Fixtures of the reliability suite: durable servers it may crash, and a figures report.

``CONTEXTLEDGER_SOAK=1`` runs the long mode (100 kills per backend instead of 8, more
examples, rounds and appends); the default mode stays well under three minutes.
Every figure a test measures is printed in pytest's terminal summary (and recorded in
RELIABILITY.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.plugins import unavailable
from tests.reliability.servers import DurablePostgres, DurableRedis, postgres_binaries, redis_binary
from tests.soak import SOAK as SOAK  # the long mode: one switch for the whole suite

_FIGURES: list[str] = []

Report = Callable[[str], None]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print every figure the reliability tests measured."""
    if _FIGURES:
        terminalreporter.section("reliability figures")
        for line in _FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture
def report() -> Report:
    """Record one figure (shown in the terminal summary)."""
    return _FIGURES.append


@pytest.fixture(scope="session")
def durable_postgres() -> Iterator[DurablePostgres]:
    """A PostgreSQL server with fsync on that tests may crash and restart."""
    if postgres_binaries() is None:
        unavailable("no PostgreSQL binaries for the reliability suite")
    server = DurablePostgres()
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def durable_redis() -> Iterator[DurableRedis]:
    """A Redis server with appendfsync always that tests may crash and restart."""
    if redis_binary() is None:
        unavailable("no redis-server for the reliability suite")
    server = DurableRedis()
    try:
        server.start()
        yield server
    finally:
        server.close()


def fresh_database(server: DurablePostgres) -> str:
    """A new empty database on ``server`` with the ledger schema; returns its URL."""
    from sqlalchemy import create_engine, text

    from contextledger.stores.sql import upgrade

    name = f"rel_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server.url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    url = server.url.rsplit("/", 1)[0] + f"/{name}"
    upgrade(url)
    return url
