"""``contextledger prune``: delete evicted history past an age (the active view is never touched)."""

from __future__ import annotations

from typing import Annotated

import typer

from contextledger.cli.inspector import parse_since
from contextledger.cli.options import UrlOption, open_ledger

__all__ = ["prune"]


def prune(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            help="Prune what was evicted before this age (30d, 12h, 1w) or ISO-8601 time.",
            show_default=False,
        ),
    ],
    url: UrlOption = None,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Only this session.")] = None,
    drop_summaries: Annotated[
        bool, typer.Option("--drop-summaries", help="Prune evicted summaries too (kept by default).")
    ] = False,
) -> None:
    """Delete evicted history older than --older-than; each entry leaves a tombstone (writes)."""
    cutoff = parse_since(older_than, option="--older-than")
    assert cutoff is not None  # the option is required
    with open_ledger(url, read_only=False) as ledger:
        pruned = ledger.prune(older_than=cutoff, keep_summaries=not drop_summaries, session_id=session)
        sessions = len({t.session_id for t in pruned})
        typer.echo(
            f"pruned {len(pruned)} evicted entries in {sessions} session(s), evicted before {cutoff.isoformat()}"
        )
