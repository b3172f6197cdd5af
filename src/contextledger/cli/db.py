"""``contextledger db``: schema migrations of a SQL ledger.

The schema is owned by Alembic migrations shipped inside the package, tracked in a
version table of contextledger's own so it can share an application's database.
Redis and memory ledgers are schemaless; for them both commands report so and succeed.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer
from sqlalchemy.engine import make_url

from contextledger.cli.options import JsonOption, UrlOption, open_ledger, sqlite_path
from contextledger.cli.render import console, dump_json
from contextledger.errors import InvalidLedgerURL
from contextledger.ledger import DEFAULT_URL

__all__ = ["current", "is_sql_url", "upgrade"]

_SQL_SCHEMES = ("sqlite", "postgresql", "postgres")


def is_sql_url(url: str) -> bool:
    """Whether ``url`` names a SQL ledger (the only kind with a schema to migrate)."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        raise InvalidLedgerURL(f"not a ledger URL: {url!r} (expected e.g. sqlite:///agents.db)")
    return scheme.split("+", 1)[0].lower() in _SQL_SCHEMES


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
    if not is_sql_url(url):
        _schemaless(url)
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


def current(url: UrlOption = DEFAULT_URL, as_json: JsonOption = False) -> None:
    """Show the schema revision of the ledger and the one this version of contextledger needs."""
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
            raise InvalidLedgerURL(f"no ledger at {url}: the file {str(path)!r} does not exist")
        sql = _sql()
        revision, head = sql.current(url), sql.head()
        document = {
            "url": make_url(url).render_as_string(hide_password=True),
            "current": revision,
            "head": head,
            "up_to_date": revision == head,
            "schemaless": False,
        }
    if as_json:
        dump_json(document)
        return
    if document["schemaless"]:
        console().print(f"{url.split('://', 1)[0]} ledgers are schemaless: nothing to migrate")
        return
    state = "up to date" if document["up_to_date"] else "out of date: run `contextledger db upgrade`"
    console().print(f"current {document['current'] or '<none>'}  head {document['head']}  ({state})")
