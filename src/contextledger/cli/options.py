"""Options shared by the inspector commands, and opening the ledger they name."""

from __future__ import annotations

from typing import Annotated

import typer

from contextledger.errors import InvalidLedgerURL
from contextledger.ledger import Ledger
from contextledger.urls import mask, sqlite_path

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
        raise InvalidLedgerURL(f"no ledger at {mask(url)}: the file {str(path)!r} does not exist")
    return Ledger.connect(url)
