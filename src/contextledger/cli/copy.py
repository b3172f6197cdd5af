"""``contextledger copy``: copy sessions between any two ledgers, exactly and idempotently.

Built on :func:`contextledger.history.transfer.copy_sessions`: each conversation is read whole
from the source and written to the target in one atomic commit; a conversation the
target already holds unchanged is skipped, one it holds with different records stops
the copy with an error (what was copied before it stays). The source records each copy
(``Ledger.forks`` lists it), so an erasure there reports the copy, or erases it too.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from contextledger.cli.options import JsonOption, ProgressOption, SessionsOption, open_ledger
from contextledger.cli.output import progress_bar
from contextledger.cli.render import console, dump_json
from contextledger.errors import ConfigurationError

__all__ = ["copy"]


def copy(
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="The ledger URL to copy from (its sessions are read; the copy is recorded in it, for erasure).",
            show_default=False,
        ),
    ],
    target: Annotated[
        str, typer.Option("--to", help="The ledger URL to copy to (created if needed).", show_default=False)
    ],
    session: SessionsOption = None,
    progress: ProgressOption = None,
    as_json: JsonOption = False,
) -> None:
    """Copy sessions between ledgers (SQLite, PostgreSQL, Redis, either way): exact, idempotent, one commit each."""
    from contextledger.history.transfer import list_sessions

    if source == target:
        raise ConfigurationError("--from and --to name the same ledger")
    # The source records the copy (its lineage), so that an erasure there can say the copy exists.
    with open_ledger(source, read_only=False) as src, open_ledger(target, must_exist=False, read_only=False) as dst:
        ids = list(session) if session else list_sessions(src.store)
        total = sum(len(src.require_session(s)) for s in ids) if session else None
        show = progress if progress is not None else sys.stderr.isatty()
        if show:
            if total is None:
                total = sum(len(src.agents(s)) for s in ids)
            with progress_bar("copy", "copying", "conversations", total) as advance:
                report = src.copy_to(dst, ids, on_conversation=lambda *_: advance(1))
        else:
            report = src.copy_to(dst, ids)
        if as_json:
            dump_json([{"session_id": s, "agent_id": a, "outcome": o} for s, a, o in report.conversations])
            return
        console().print(
            f"{len(report.conversations)} conversations of {len(ids)} sessions from {src.url} to {dst.url}: "
            f"{report.count('imported')} copied, {report.count('unchanged')} unchanged"
        )
