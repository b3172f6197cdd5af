"""Alembic plumbing: where the migrations are, and upgrade / downgrade / current / head.

The ledger keeps its Alembic history in its own version table
(:data:`VERSION_TABLE`), so it can share a database with an application that runs
its own Alembic history in ``alembic_version``; neither touches the other's tables.

The functions accept a URL (``str`` or :class:`sqlalchemy.engine.URL`), an
:class:`~sqlalchemy.Engine` or a :class:`~sqlalchemy.Connection`. Given a URL they
open and dispose a short-lived engine; given an engine or connection they leave it open.

Alembic is imported only when a migration must run or a revision must be resolved:
opening a ledger whose schema is current reads the version table with one plain
``SELECT`` and compares it with :data:`~contextledger.stores.sql.reader.SCHEMA_HEAD`,
which keeps a fresh process's open cheap (a test keeps that constant equal to
Alembic's head).
"""

from __future__ import annotations

import importlib.resources
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from contextledger.errors import ConfigurationError, ContextLedgerError, NotALedger, SchemaOutOfDate
from contextledger.stores.sql.engine import BEGIN_OPTION, build_engine, describe, mask, parse_url, translate
from contextledger.stores.sql.models import Base
from contextledger.stores.sql.reader import SCHEMA_HEAD, VERSION_TABLE

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

__all__ = [
    "VERSION_TABLE",
    "Target",
    "current",
    "downgrade",
    "fix_command",
    "head",
    "include_object",
    "is_known",
    "migrations_dir",
    "upgrade",
    "upgrade_command",
    "verify",
]

logger = logging.getLogger(__name__)

Target = str | URL | Engine | Connection
"""What the schema functions operate on."""

# Serialises concurrent upgrades of one PostgreSQL database (an arbitrary constant).
_PG_UPGRADE_LOCK = 0x636C6564676572  # "cledger"


@cache
def migrations_dir() -> Path:
    """The directory holding ``env.py`` and ``versions/``.

    Installed from a wheel the migrations ship as the package resource
    ``contextledger/migrations``; in a source checkout they are the repository's
    top-level ``migrations/``.

    Raises:
        ConfigurationError: Neither location holds the migrations.
    """
    candidates: list[Path] = []
    try:
        resource = importlib.resources.files("contextledger") / "migrations"
        candidates.append(Path(str(resource)))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - contextledger is importable here
        pass
    # src/contextledger/stores/sql/schema.py -> the checkout's root is four levels up.
    candidates.append(Path(__file__).resolve().parents[4] / "migrations")
    for path in candidates:
        if (path / "env.py").is_file() and (path / "versions").is_dir():
            return path
    raise ConfigurationError(
        "the contextledger migrations are missing from this installation "
        f"(looked in {', '.join(str(p) for p in candidates)})"
    )


def alembic_config(connection: Connection | None = None, url: str | None = None) -> Config:
    """An Alembic :class:`~alembic.config.Config` for the ledger's migrations.

    Args:
        connection: A connection (in a transaction) the migrations run on.
        url: The database URL for offline (``--sql``) mode.
    """
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@cache
def _script() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def _at_head(target: Target) -> bool:
    """Whether the database is at the head, by one plain ``SELECT`` (no Alembic, no write).

    ``False`` means "not known to be": the caller takes the full path, which raises the
    right error or migrates. A connection the caller holds is never used here (a failed
    statement would abort its PostgreSQL transaction).
    """
    if isinstance(target, Connection):
        return False
    try:
        with _transaction(target, write=False) as connection:
            found = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    except ContextLedgerError:
        return False  # no version table yet, or the server is away: the full path says which
    return found == [SCHEMA_HEAD]


def head() -> str:
    """The revision this version of the library needs."""
    revision = _script().get_current_head()
    if revision is None:  # pragma: no cover - the package ships at least one migration
        raise ConfigurationError("the contextledger migrations have no head revision")
    return revision


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Autogenerate filter: only the ledger's tables, never an application's."""
    if type_ == "table":
        return name in Base.metadata.tables
    table = getattr(obj, "table", None)
    return table is None or table.name in Base.metadata.tables


def _url_of(target: Target) -> URL:
    if isinstance(target, Connection):
        return target.engine.url
    if isinstance(target, Engine):
        return target.url
    return parse_url(target)


def upgrade_command(target: Target) -> str:
    """The command that upgrades ``target``, its password masked."""
    return f"contextledger db upgrade --url {mask(_url_of(target))}"


@contextmanager
def _transaction(target: Target, *, write: bool) -> Iterator[Connection]:
    url = _url_of(target)
    engine: Engine | None = None
    try:
        if isinstance(target, Connection):
            if target.in_transaction():
                yield target
            else:
                with target.begin():
                    yield target
            return
        if isinstance(target, Engine):
            source = target
        else:
            engine = source = build_engine(url)
        with source.connect() as connection:
            if write:
                connection.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
            with connection.begin():
                if write and connection.dialect.name == "postgresql":
                    connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_UPGRADE_LOCK})
                yield connection
    except SQLAlchemyError as exc:
        raise translate(exc, url) from exc
    finally:
        if engine is not None:
            engine.dispose()


def _current(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def current(target: Target) -> str | None:
    """The ledger revision the database is at (``None`` when the schema is absent).

    Raises:
        StoreUnavailable: The database could not be reached.
    """
    with _transaction(target, write=False) as connection:
        return _current(connection)


def _known(revision: str) -> bool:
    from alembic.util.exc import CommandError

    try:
        return _script().get_revision(revision) is not None
    except CommandError:
        return False


def is_known(revision: str) -> bool:
    """Whether ``revision`` is one of this library's migrations (not one of a newer version)."""
    return _known(revision)


def fix_command(target: Target, found: str | None) -> str:
    """What fixes a schema at ``found``: ``db upgrade``, or a newer library when ``found`` is unknown."""
    if found is not None and not _known(found):
        return "pip install --upgrade contextledger"
    return upgrade_command(target)


def verify(target: Target, *, absent_is_foreign: bool = False) -> None:
    """Check that the database is exactly at :func:`head`.

    Args:
        target: The database.
        absent_is_foreign: Report a database without the ledger's schema as
            :class:`NotALedger` (a reader must not offer to create tables in it).

    Raises:
        SchemaOutOfDate: The schema is absent, behind or ahead of this library (ahead:
            the advice is to upgrade the contextledger package).
        NotALedger: ``absent_is_foreign`` and the schema is absent.
    """
    if _at_head(target):
        return
    found = current(target)
    expected = head()
    if found is None and absent_is_foreign:
        raise NotALedger(
            f"{describe(_url_of(target))} is not a contextledger ledger (it has no ledger tables; "
            f"to keep a ledger in it, run `{upgrade_command(target)}`)"
        )
    if found != expected:
        raise SchemaOutOfDate(found, expected, fix_command(target, found))


def upgrade(target: Target, revision: str = "head") -> None:
    """Migrate the ledger schema up to ``revision`` (default: this library's head).

    Concurrent upgrades of one database are serialised (SQLite write lock, PostgreSQL
    advisory lock), so processes starting together may all call it.

    Raises:
        SchemaOutOfDate: The database is at a revision this library does not know
            (it was migrated by a newer version).
        StoreUnavailable: The database could not be reached.
    """
    if revision == "head" and _at_head(target):
        logger.debug("url=<%s> | ledger schema already up to date", mask(_url_of(target)))
        return
    from alembic import command

    with _transaction(target, write=True) as connection:
        found = _current(connection)
        if found is not None and not _known(found):
            raise SchemaOutOfDate(found, head(), fix_command(target, found))
        command.upgrade(alembic_config(connection), revision)
        reached = _current(connection)
        # Every SQLite open upgrades: only a real change is worth an info line.
        level = logging.INFO if reached != found else logging.DEBUG
        message = "upgraded ledger schema" if reached != found else "ledger schema already up to date"
        logger.log(level, "url=<%s>, from=<%s>, to=<%s> | %s", mask(_url_of(target)), found, reached, message)


def downgrade(target: Target, revision: str) -> None:
    """Migrate the ledger schema down to ``revision`` (``"base"`` drops every ledger table).

    Raises:
        SchemaOutOfDate: The database is at a revision this library does not know.
        StoreUnavailable: The database could not be reached.
    """
    from alembic import command

    with _transaction(target, write=True) as connection:
        found = _current(connection)
        if found is not None and not _known(found):
            raise SchemaOutOfDate(found, head(), upgrade_command(target))
        command.downgrade(alembic_config(connection), revision)
        logger.info("url=<%s>, from=<%s>, to=<%s> | downgraded ledger schema", mask(_url_of(target)), found, revision)
