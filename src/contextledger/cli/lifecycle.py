"""``contextledger prune``: delete evicted history past an age, or whole sessions idle for a period.

``--older-than`` deletes evicted entries (the active view is never touched); ``--idle``
expires whole sessions not written for that long (``Ledger.expire``): it lists what it
would remove and asks first, unless ``--yes``; ``--dry-run`` only lists.
"""

from __future__ import annotations

from typing import Annotated

import typer

from contextledger.cli.errors import ExitCode
from contextledger.cli.inspector import parse_since
from contextledger.cli.options import UrlOption, open_ledger

__all__ = ["prune"]


def prune(
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Prune what was evicted before this age (30d, 12h, 1w) or ISO-8601 time.",
            show_default=False,
        ),
    ] = None,
    url: UrlOption = None,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Only this session.")] = None,
    drop_summaries: Annotated[
        bool, typer.Option("--drop-summaries", help="Prune evicted summaries too (kept by default).")
    ] = False,
    idle: Annotated[
        str | None,
        typer.Option(
            "--idle",
            help="Expire whole sessions not written since this age (30d) or ISO-8601 time (asks first).",
            show_default=False,
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --idle: list the sessions that would expire, change nothing.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="With --idle: do not ask for confirmation.")] = False,
) -> None:
    """Delete evicted history older than --older-than, or expire sessions idle for --idle (writes).

    Each pruned entry leaves a tombstone; each expired conversation leaves an expiry
    record, and a writer still holding it gets SessionExpired.
    """
    if older_than is None and idle is None:
        raise typer.BadParameter("give --older-than (evicted history) or --idle (whole sessions)")
    if dry_run and idle is None:
        raise typer.BadParameter("--dry-run lists what --idle would expire; give --idle")
    with open_ledger(url, read_only=dry_run and older_than is None) as ledger:
        if older_than is not None:
            cutoff = parse_since(older_than, option="--older-than")
            assert cutoff is not None  # given
            pruned = ledger.prune(older_than=cutoff, keep_summaries=not drop_summaries, session_id=session)
            sessions = len({t.session_id for t in pruned})
            typer.echo(
                f"pruned {len(pruned)} evicted entries in {sessions} session(s), evicted before {cutoff.isoformat()}"
            )
        if idle is None:
            return
        since = parse_since(idle, option="--idle")
        assert since is not None  # given
        candidates = ledger.expire(idle=since, session_id=session, dry_run=True)
        names = sorted({e.session_id for e in candidates})
        for name in names:
            last = max(e.last_write for e in candidates if e.session_id == name)
            typer.echo(f"  {name} (last write {last.isoformat(timespec='seconds')})", err=dry_run is False)
        if dry_run:
            typer.echo(f"would expire {len(names)} session(s) not written since {since.isoformat()}")
            return
        if not names:
            typer.echo(f"expired 0 sessions: none idle since {since.isoformat()}")
            return
        if not yes:
            question = f"Expire these {len(names)} session(s) from {ledger.url}? This cannot be undone"
            try:
                confirmed = typer.confirm(question, default=False, err=True)
            except typer.Abort:  # stdin closed: nobody said yes
                confirmed = False
            if not confirmed:
                typer.echo("nothing expired", err=True)
                raise typer.Exit(ExitCode.ERROR)
        expired = ledger.expire(idle=since, session_id=session)
        done = len({e.session_id for e in expired})
        typer.echo(f"expired {done} session(s) ({len(expired)} conversations), not written since {since.isoformat()}")
