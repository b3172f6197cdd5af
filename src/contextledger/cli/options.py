"""Options shared by the inspector commands, and opening the ledger they name."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from contextledger.errors import InvalidLedgerURL
from contextledger.ledger import Ledger

__all__ = ["AgentOption", "JsonOption", "UrlOption", "open_ledger", "sqlite_path"]

UrlOption = Annotated[
    str,
    typer.Option(
        "--url",
        "-u",
        envvar="CONTEXTLEDGER_URL",
        help="Ledger URL: sqlite:///FILE, postgresql+psycopg://..., redis://..., memory://",
        show_envvar=True,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables (for scripts).")]
AgentOption = Annotated[
    str | None, typer.Option("--agent", "-a", help="Only this agent of the session (default: every agent).")
]


def sqlite_path(url: str) -> Path | None:
    """The database file a ``sqlite`` URL names; ``None`` for other URLs and in-memory SQLite."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+", 1)[0].lower() != "sqlite":
        return None
    # sqlite:///relative.db and sqlite:////absolute.db; query options follow '?'.
    database = rest[1:] if rest.startswith("/") else rest
    database = database.split("?", 1)[0]
    if database in {"", ":memory:"} or database.startswith("file:"):
        return None
    return Path(database)


def open_ledger(url: str, *, must_exist: bool = True) -> Ledger:
    """Open the ledger at ``url``.

    An inspector never creates a database by accident: with ``must_exist`` a SQLite URL
    naming a missing file is refused instead of creating an empty ledger there.

    Raises:
        InvalidLedgerURL: The URL is malformed, unsupported, or names a missing SQLite file.
        StoreUnavailable: The store could not be opened (unreachable, login refused, ...).
        SchemaOutOfDate: The schema needs ``contextledger db upgrade``.
    """
    path = sqlite_path(url)
    if must_exist and path is not None and not path.is_file():
        raise InvalidLedgerURL(f"no ledger at {url}: the file {str(path)!r} does not exist")
    return Ledger.connect(url)
