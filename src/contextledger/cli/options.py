"""Options shared by the inspector commands, and opening the ledger they name."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar

import typer

from contextledger.cli.errors import remember_url
from contextledger.errors import InvalidLedgerURL, SessionNotFound
from contextledger.ledger import DEFAULT_URL, Ledger
from contextledger.stores.urls import backend_of, mask, sqlite_path

T = TypeVar("T")

__all__ = [
    "AgentOption",
    "EntryOption",
    "JsonOption",
    "LastOption",
    "LimitOption",
    "NoPagerOption",
    "ProgressOption",
    "SessionArg",
    "SessionsOption",
    "UrlOption",
    "agents_of",
    "every_agent",
    "open_ledger",
    "resolve_url",
    "sqlite_path",
]

ENV_KEYS = "CONTEXTLEDGER_ENCRYPTION_KEYS"
"""The encryption keys of the ledger, when it is encrypted (see :mod:`contextledger.encryption`)."""

DEMO_URL = "sqlite:///contextledger-demo.db"
"""The demo's own ledger (``contextledger demo``), read when no other ledger is named or found."""

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        "-u",
        envvar="CONTEXTLEDGER_URL",
        help=(
            "Ledger URL: sqlite:///FILE, postgresql+psycopg://..., redis://..., memory:// "
            "[default: sqlite:///contextledger.db, else the demo's sqlite:///contextledger-demo.db]"
        ),
        show_envvar=True,
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables (for scripts).")]
AgentOption = Annotated[
    str | None, typer.Option("--agent", "-a", help="Only this agent of the session (default: every agent).")
]
SessionArg = Annotated[str, typer.Argument(help="The session id.", show_default=False)]
EntryOption = Annotated[
    str | None, typer.Option("--entry", "-e", help="Print this one entry whole instead of the view.")
]
LimitOption = Annotated[int | None, typer.Option("--limit", "-n", min=1, help="Only the first N rows.")]
LastOption = Annotated[int | None, typer.Option("--last", min=1, help="Only the last N rows (the newest).")]
NoPagerOption = Annotated[bool, typer.Option("--no-pager", help="Never page the output, even on a terminal.")]
SessionsOption = Annotated[
    list[str] | None, typer.Option("--session", "-s", help="Only this session (repeatable; default: all).")
]
ProgressOption = Annotated[
    bool | None,
    typer.Option(
        "--progress/--no-progress",
        help="Show a progress bar on stderr (default: when stderr is a terminal).",
        show_default=False,
    ),
]


def resolve_url(url: str | None) -> str:
    """The URL to open: ``url`` when given; else the default file, else the demo's file when only it exists.

    So ``contextledger sessions`` right after ``contextledger demo`` shows the demo's sessions.
    """
    if url is not None:
        remember_url(url)  # its credentials are masked in whatever the command prints
        return url
    default = sqlite_path(DEFAULT_URL)
    demo = sqlite_path(DEMO_URL)
    if default is not None and not default.is_file() and demo is not None and demo.is_file():
        return DEMO_URL
    return DEFAULT_URL


def is_sql_url(url: str) -> bool:
    """Whether ``url`` names a SQL ledger (SQLite or PostgreSQL), the only kind with a schema.

    Raises:
        InvalidLedgerURL: The URL is malformed or names no supported backend.
    """
    return backend_of(url) == "sql"


def open_ledger(url: str | None, *, must_exist: bool = True, read_only: bool = True) -> Ledger:
    """Open the ledger at ``url`` (see :func:`resolve_url` for ``None``).

    The inspector never changes a database: with ``read_only`` (the default) a SQL ledger
    is opened for reading only -- a SQLite file ``mode=ro``, never switched to WAL, no
    table created; a database without the ledger's tables is refused as "not a
    contextledger ledger". With ``must_exist`` a SQLite URL naming a missing file is
    refused instead of creating an empty ledger there.

    With ``CONTEXTLEDGER_ENCRYPTION_KEYS`` set, the ledger is opened with those keys
    (an encrypted ledger; see :mod:`contextledger.encryption`).

    Raises:
        InvalidLedgerURL: The URL is malformed, unsupported, or names a missing SQLite file.
        NotALedger: The database holds no ledger (another application's database).
        StoreUnavailable: The store could not be opened (unreachable, login refused, ...).
        SchemaOutOfDate: The schema is behind (``contextledger db upgrade``) or ahead (upgrade
            the contextledger package) of this library.
    """
    url = resolve_url(url)
    path = sqlite_path(url)
    if must_exist and path is not None and not path.is_file():
        raise InvalidLedgerURL(f"no ledger at {mask(url)}: the file {str(path)!r} does not exist")
    options: dict[str, Any] = {}
    if os.environ.get(ENV_KEYS, "").strip():
        # An encrypted ledger is read and written with the keys in the environment.
        from contextledger.encryption import Keyring

        options["encryption"] = Keyring.from_env()
    if read_only and is_sql_url(url):
        return Ledger.connect(url, read_only=True, **options)
    return Ledger.connect(url, **options)


def agents_of(ledger: Ledger, session_id: str, agent: str | None) -> list[str]:
    """The agents of ``session_id`` a command covers: ``agent`` alone when given, else every one.

    Raises:
        SessionNotFound: No such session, or it has no agent ``agent``.
    """
    agents = ledger.require_session(session_id)
    if agent is None:
        return agents
    if agent not in agents:
        raise SessionNotFound(f"session {session_id!r} has no agent {agent!r} (agents: {', '.join(agents)})")
    return [agent]


def every_agent(
    ledger: Ledger, session_id: str, agent: str | None, query: Callable[[str, str], Sequence[T]]
) -> list[T]:
    """``query(session_id, agent_id)`` for each agent :func:`agents_of` names, one list in agent order.

    Raises:
        SessionNotFound: No such session, or it has no agent ``agent``.
    """
    found: list[T] = []
    for agent_id in agents_of(ledger, session_id, agent):
        found += query(session_id, agent_id)
    return found
