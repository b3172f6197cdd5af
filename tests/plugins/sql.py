"""SQLite and PostgreSQL fixtures.

PostgreSQL: ``CONTEXTLEDGER_TEST_POSTGRES_URL`` when set (its user needs CREATEDB),
else a testcontainers server when a Docker engine answers, else a throwaway server from
the local binaries (:mod:`tests.plugins.postgres_server`). If none can start the tests
skip with the reason, or fail under ``CI=true``. Each test gets its own database:
``postgres_store`` one cloned from a template migrated once per session, the migration
tests an empty one; :mod:`tests.plugins.postgres_databases` clones ahead and drops behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import SQLAlchemyError

from contextledger.errors import StoreUnavailable
from contextledger.stores.sql import SQLStore, upgrade
from contextledger.stores.sql.engine import parse_url
from tests.plugins import unavailable
from tests.plugins.postgres_databases import Databases


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=3).ping()
    except Exception:  # any failure means "no usable engine here"
        return False
    return True


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The URL of a PostgreSQL server's maintenance database for this test session."""
    env = os.environ.get("CONTEXTLEDGER_TEST_POSTGRES_URL")
    if env:
        yield parse_url(env).render_as_string(hide_password=False)
        return
    if _docker_answers():
        from testcontainers.community.postgres import PostgresContainer

        container = PostgresContainer("postgres:16-alpine", driver="psycopg")
        try:
            container.start()
        except Exception as exc:  # an image that cannot be pulled, a daemon error...
            unavailable(f"the PostgreSQL container did not start: {exc}")
            return
        try:
            yield container.get_connection_url()
        finally:
            container.stop()
        return
    from tests.plugins.postgres_server import start_postgres

    try:
        server = start_postgres()
    except StoreUnavailable as exc:
        unavailable(f"no PostgreSQL server could be started: {exc}")
        return
    try:
        yield server.url
    finally:
        server.stop()


def _with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def postgres_admin(postgres_url: str) -> Iterator[Engine]:
    engine = create_engine(postgres_url, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 10})
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        engine.dispose()
        unavailable(f"PostgreSQL at {make_url(postgres_url).render_as_string()} does not answer: {exc}")
        return
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def postgres_databases(postgres_admin: Engine) -> Iterator[Databases]:
    """Makes and drops the per-test databases, clones ahead and drops behind on a thread of its own."""
    databases = Databases(postgres_admin)
    yield databases
    databases.close()


@pytest.fixture(scope="session")
def postgres_template(postgres_databases: Databases, postgres_url: str) -> Iterator[str]:
    """A database migrated to head once per session, cloned for every test."""
    name = postgres_databases.create()
    upgrade(_with_database(postgres_url, name))
    yield name
    postgres_databases.give_back(name)


@pytest.fixture(scope="session")
def postgres_partitioned_template(postgres_databases: Databases, postgres_url: str) -> Iterator[str]:
    """A database at head whose entries table is hash-partitioned (``contextledger db partition``), once per session."""
    from contextledger.stores.sql.engine import build_engine
    from contextledger.stores.sql.partition import partition_entries

    name = postgres_databases.create()
    url = _with_database(postgres_url, name)
    upgrade(url)
    engine = build_engine(parse_url(url))
    try:
        partition_entries(engine, partitions=8)
    finally:
        engine.dispose()
    yield name
    postgres_databases.give_back(name)


@pytest.fixture
def postgres_partitioned_url(
    postgres_databases: Databases, postgres_url: str, postgres_partitioned_template: str
) -> Iterator[str]:
    """A fresh database cloned from the partitioned template, ahead of the test, and dropped after it."""
    name = postgres_databases.take(postgres_partitioned_template)
    yield _with_database(postgres_url, name)
    postgres_databases.give_back(name)


@pytest.fixture
def postgres_partitioned_store(postgres_partitioned_url: str) -> Iterator[SQLStore]:
    """A store on a ledger whose entries table is partitioned by conversation."""
    store = SQLStore.from_url(postgres_partitioned_url)
    yield store
    store.close()


@pytest.fixture
def postgres_empty_url(postgres_databases: Databases, postgres_url: str) -> Iterator[str]:
    """A fresh database without the ledger schema."""
    name = postgres_databases.create()
    yield _with_database(postgres_url, name)
    postgres_databases.give_back(name)


@pytest.fixture
def postgres_ledger_url(postgres_databases: Databases, postgres_url: str, postgres_template: str) -> Iterator[str]:
    """A fresh database already at the ledger's head revision, cloned ahead of the test and dropped after it."""
    name = postgres_databases.take(postgres_template)
    yield _with_database(postgres_url, name)
    postgres_databases.give_back(name)


@pytest.fixture
def postgres_quiet(postgres_databases: Databases) -> Iterator[None]:
    """No database is made or dropped on the server during the test (see :meth:`Databases.paused`)."""
    with postgres_databases.paused():
        yield


@pytest.fixture
def postgres_store(postgres_ledger_url: str) -> Iterator[SQLStore]:
    store = SQLStore.from_url(postgres_ledger_url)
    yield store
    store.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file that does not exist yet."""
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[SQLStore]:
    store = SQLStore.from_url(sqlite_url)
    yield store
    store.close()
