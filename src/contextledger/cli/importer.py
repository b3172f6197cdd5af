"""``contextledger import``: load an export back, or bring in sessions written by other tools.

``contextledger import FILE --url URL`` loads what ``contextledger export`` wrote, exactly
(see :mod:`contextledger.history.transfer`); ``contextledger import strands DIR --url URL`` reads
a Strands ``FileSessionManager`` storage directory (see
:mod:`contextledger.integrations.strands.importer`). Both write; neither deletes, and
importing twice changes nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from contextledger.cli.options import JsonOption, SessionsOption, UrlOption, open_ledger
from contextledger.cli.output import progress_bar
from contextledger.cli.render import console, dump_json, table
from contextledger.errors import ConfigurationError
from contextledger.ledger import DEFAULT_URL

__all__ = ["PROGRESS_THRESHOLD", "export_file", "strands"]


def export_file(
    path: Annotated[
        str,
        typer.Argument(
            metavar="FILE", help="A file written by `contextledger export` (- for stdin).", show_default=False
        ),
    ],
    url: UrlOption = DEFAULT_URL,
    as_json: JsonOption = False,
) -> None:
    """Load a `contextledger export` back exactly: each conversation one atomic commit, idempotent.

    A conversation that already exists with exactly the same records is left as it is; one
    that exists with different records stops the import before anything is written.
    """
    from contextledger.errors import InvalidExport
    from contextledger.history.transfer import import_lines

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        typer.echo(f"error: cannot read {path}: {exc.strerror or exc}", err=True)
        raise typer.Exit(1) from None
    except UnicodeDecodeError as exc:
        raise InvalidExport(f"{path} is not UTF-8 text: {exc}") from exc
    with open_ledger(url, must_exist=False, read_only=False) as ledger:
        # The whole file is checked, and every conflict looked for, before the first write.
        outcomes = import_lines(ledger.store, text.split("\n"))
        if as_json:
            dump_json(
                [
                    {
                        "session_id": r.session_id,
                        "agent_id": r.agent_id,
                        "outcome": outcome,
                        "messages": len(r.messages),
                        "version": r.state.version,
                    }
                    for r, outcome in outcomes
                ]
            )
            return
        rows = [
            (r.session_id, r.agent_id, outcome, str(len(r.messages)), str(r.state.version)) for r, outcome in outcomes
        ]
        out = console()
        out.print(table(f"{path} into {ledger.url}", ["session", "agent", "outcome", "messages", "version"], rows))
        imported = sum(1 for _, o in outcomes if o == "imported")
        out.print(f"{imported} imported, {len(outcomes) - imported} unchanged")


PROGRESS_THRESHOLD = 500
"""From this many message files on, ``--progress auto`` shows a progress bar."""


def strands(
    directory: Annotated[
        Path, typer.Argument(help="The storage_dir of a Strands FileSessionManager.", show_default=False)
    ],
    url: UrlOption = DEFAULT_URL,
    session: SessionsOption = None,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help=f"Show a progress bar (default: when there are {PROGRESS_THRESHOLD} or more messages).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Import Strands FileSessionManager sessions: messages, removed messages (as evictions), summary, pins, state."""
    try:
        from contextledger.integrations.strands.importer import count_file_messages, import_file_sessions
    except ImportError as exc:
        raise ConfigurationError(f"importing Strands sessions needs strands-agents: {exc}") from exc
    total = count_file_messages(directory, session)
    show = progress if progress is not None else total >= PROGRESS_THRESHOLD
    with open_ledger(url, must_exist=False, read_only=False) as ledger:
        if show and not as_json:
            with progress_bar("import", "importing", "messages", total) as advance:
                report = import_file_sessions(directory, ledger, session_ids=session, on_message=advance)
        else:
            report = import_file_sessions(directory, ledger, session_ids=session)
        if as_json:
            dump_json(
                [
                    {
                        "session_id": c.session_id,
                        "agent_id": c.agent_id,
                        "outcome": c.outcome,
                        "messages": c.messages,
                        "evicted": c.evicted,
                        "summary": c.summary,
                        "detail": c.detail,
                    }
                    for c in report.conversations
                ]
            )
            return
        rows = [
            (
                c.session_id,
                c.agent_id,
                c.outcome,
                str(c.messages),
                str(c.evicted),
                "yes" if c.summary else "",
                c.detail or "",
            )
            for c in report.conversations
        ]
        out = console()
        out.print(
            table(
                f"Strands sessions from {directory} into {ledger.url}",
                ["session", "agent", "outcome", "messages", "evicted", "summary", "detail"],
                rows,
            )
        )
        out.print(
            f"{report.count('imported')} imported, {report.count('unchanged')} unchanged,"
            f" {report.count('skipped')} skipped"
        )
