"""``contextledger db``: schema migrations of a SQL ledger.

The schema is owned by Alembic migrations shipped inside the package, tracked in a
version table of contextledger's own so it can share an application's database.
Redis and memory ledgers are schemaless; for them both commands report so and succeed
(``upgrade`` on Redis also indexes the history of conversations an earlier version wrote).
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer

from contextledger.cli.errors import ExitCode
from contextledger.cli.options import JsonOption, UrlOption, is_sql_url, open_ledger, resolve_url, sqlite_path
from contextledger.cli.render import console, dump_json
from contextledger.errors import InvalidLedgerURL
from contextledger.ledger import DEFAULT_URL
from contextledger.stores.urls import mask

__all__ = ["current", "is_sql_url", "partition", "upgrade"]


def _sql() -> Any:
    try:
        return importlib.import_module("contextledger.stores.sql")
    except ImportError as exc:
        raise InvalidLedgerURL(f"the SQL backend is not available: {exc}") from exc


def _schemaless(url: str) -> str:
    """Open a schemaless ledger (so an unreachable server still fails) and return its masked URL."""
    with open_ledger(url) as ledger:
        return ledger.url


def upgrade(
    url: UrlOption = None,
    revision: Annotated[str, typer.Option(help="Target revision.")] = "head",
) -> None:
    """Create or migrate the ledger schema to this version of contextledger (idempotent)."""
    url = url or DEFAULT_URL
    if not is_sql_url(url):
        with open_ledger(url, read_only=False) as ledger:
            ledger.upgrade()  # Redis: index the history of conversations written by an earlier version
        typer.echo(f"{url.split('://', 1)[0]} ledgers have no schema to migrate; nothing to do")
        return
    sql = _sql()
    before = sql.current(url)
    sql.upgrade(url, revision)
    after = sql.current(url)
    if before == after:
        typer.echo(f"schema already at {after}")
    else:
        typer.echo(f"upgraded schema from {before or '<none>'} to {after}")


def _read_revision(url: str) -> str | None:
    """The schema revision, read without writing anything (a SQLite file is opened read-only)."""
    from contextledger.stores.sql.engine import build_engine, parse_url

    engine = build_engine(parse_url(url), read_only=True)
    try:
        revision: str | None = _sql().current(engine)
        return revision
    finally:
        engine.dispose()


def current(url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Show the schema revision of the ledger and the one this version of contextledger needs.

    Exits 6 when the schema is not the one this version needs (a CI gate, like ``alembic check``).
    """
    url = resolve_url(url)
    if not is_sql_url(url):
        masked = _schemaless(url)
        document: dict[str, Any] = {
            "url": masked,
            "current": None,
            "head": None,
            "up_to_date": True,
            "schemaless": True,
        }
    else:
        path = sqlite_path(url)
        if path is not None and not path.is_file():
            raise InvalidLedgerURL(f"no ledger at {mask(url)}: the file {str(path)!r} does not exist")
        sql = _sql()
        revision, head = _read_revision(url), sql.head()
        document = {
            "url": mask(url),
            "current": revision,
            "head": head,
            "up_to_date": revision == head,
            "schemaless": False,
        }
    if as_json:
        dump_json(document)
    elif document["schemaless"]:
        console().print(f"{url.split('://', 1)[0]} ledgers are schemaless: nothing to migrate")
    else:
        if document["up_to_date"]:
            state = "up to date"
        elif document["current"] is not None and not _known(document["current"]):
            state = "newer than this contextledger: upgrade the contextledger package"
        else:
            state = "out of date: run `contextledger db upgrade`"
        console().print(f"current {document['current'] or '<none>'}  head {document['head']}  ({state})")
    if not document["up_to_date"]:
        raise typer.Exit(ExitCode.SCHEMA)


def _known(revision: str) -> bool:
    from contextledger.stores.sql.schema import is_known

    return is_known(revision)


def partition(
    url: UrlOption = None,
    partitions: Annotated[int, typer.Option(min=2, max=1024, help="How many hash partitions.")] = 16,
) -> None:
    """Partition the entries table by a hash of the conversation (PostgreSQL; opt-in, once; it writes).

    Rebuilds ``cl_entries`` in one transaction (writers wait for it); see the scaling-out
    page of the documentation. A database already partitioned is left as it is.
    """
    url = resolve_url(url)
    if not url.split("://", 1)[0].lower().startswith("postgres"):
        raise InvalidLedgerURL(f"only a PostgreSQL ledger can be partitioned, not {mask(url)}")
    from contextledger.stores.sql.engine import build_engine, parse_url
    from contextledger.stores.sql.partition import partition_entries
    from contextledger.stores.sql.schema import verify

    engine = build_engine(parse_url(url), statement_timeout=None)
    try:
        verify(engine)
        done = partition_entries(engine, partitions)
    finally:
        engine.dispose()
    if done:
        typer.echo(f"partitioned cl_entries into {partitions} hash partitions of the conversation")
    else:
        typer.echo("cl_entries is already partitioned; nothing to do")
