"""``contextledger import adk DB_URL --url URL``: bring in the sessions of an ADK ``DatabaseSessionService``.

See :mod:`contextledger.integrations.adk.importer`: events, state, compactions; writes
only to the ledger, and importing twice changes nothing.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from contextledger.cli.importer import PROGRESS_THRESHOLD
from contextledger.cli.options import JsonOption, UrlOption, open_ledger
from contextledger.cli.output import progress_bar
from contextledger.cli.render import console, dump_json, table
from contextledger.errors import MissingDependency
from contextledger.ledger import DEFAULT_URL
from contextledger.stores.urls import mask

__all__ = ["adk"]


def adk(
    database: Annotated[
        str,
        typer.Argument(
            metavar="DB_URL",
            help="The database of an ADK DatabaseSessionService (sqlite:///sessions.db, postgresql://...).",
            show_default=False,
        ),
    ],
    url: UrlOption = DEFAULT_URL,
    app: Annotated[
        list[str] | None, typer.Option("--app", "-a", help="Only this app (repeatable; default: all).")
    ] = None,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help=f"Show a progress bar (default: when there are {PROGRESS_THRESHOLD} or more events).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Import ADK DatabaseSessionService sessions: events, session/app/user state, compactions (as reductions)."""
    try:
        from contextledger.integrations.adk.importer import count_events, import_adk_database
    except MissingDependency as exc:
        raise MissingDependency(f"importing ADK sessions needs google-adk: {exc}") from exc
    total = asyncio.run(count_events(database, app))
    show = progress if progress is not None else total >= PROGRESS_THRESHOLD
    with open_ledger(url, must_exist=False, read_only=False) as ledger:
        if show and not as_json:
            with progress_bar("import", "importing", "events", total) as advance:
                report = asyncio.run(import_adk_database(database, ledger, app_names=app, on_event=advance))
        else:
            report = asyncio.run(import_adk_database(database, ledger, app_names=app))
        if as_json:
            dump_json(
                [
                    {
                        "app_name": s.app_name,
                        "user_id": s.user_id,
                        "session_id": s.session_id,
                        "ledger_session_id": s.ledger_id,
                        "outcome": s.outcome,
                        "events": s.events,
                        "compactions": s.compactions,
                    }
                    for s in report.sessions
                ]
            )
            return
        rows = [
            (s.ledger_id, s.outcome, str(s.events), str(s.compactions) if s.compactions else "")
            for s in report.sessions
        ]
        out = console()
        out.print(
            table(
                f"ADK sessions from {mask(database)} into {ledger.url}",
                ["session", "outcome", "events", "compactions"],
                rows,
            )
        )
        out.print(
            f"{report.count('imported')} imported, {report.count('unchanged')} unchanged,"
            f" {report.count('skipped')} skipped"
        )
