"""Time travel in the inspector: ``contextledger show SESSION --at-call N``.

Read-only like every inspector command: the past view is rebuilt from the ledger's rows
(:func:`contextledger.history.travel.view_at`), nothing is written.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated

import typer

from contextledger.cli.errors import ExitCode, one_line
from contextledger.cli.options import (
    AgentOption,
    EntryOption,
    JsonOption,
    LastOption,
    LimitOption,
    NoPagerOption,
    SessionArg,
    UrlOption,
    agents_of,
    open_ledger,
)
from contextledger.cli.views import View, live_view, print_views
from contextledger.errors import ModelCallNotFound
from contextledger.ledger import Ledger

__all__ = ["show"]

AtCallOption = Annotated[
    int | None,
    typer.Option(
        "--at-call",
        min=1,
        help="Show exactly the input of model call N (1 = the first), rebuilt from the ledger.",
        show_default=False,
    ),
]


def show(
    session_id: SessionArg,
    url: UrlOption = None,
    agent: AgentOption = None,
    entry: EntryOption = None,
    limit: LimitOption = None,
    last: LastOption = None,
    as_json: JsonOption = False,
    no_pager: NoPagerOption = False,
    at_call: AtCallOption = None,
) -> None:
    """Show the live context window: the active view the model sees now (or one entry whole, with --entry).

    With --at-call N: exactly the input of model call N, rebuilt from the ledger (read only).
    """
    if entry is not None:
        from contextledger.cli.entries import print_entry

        print_entry(entry, url=url, session_id=session_id, agent=agent, as_json=as_json, no_pager=no_pager)
        return
    view_of = live_view if at_call is None else partial(_past_view, at_call=at_call)
    print_views(url, session_id, agent, limit, last, as_json=as_json, no_pager=no_pager, view_of=view_of)
    if at_call is None and not as_json:
        _print_origins(session_id, url, agent)


def _past_view(ledger: Ledger, session_id: str, agent_id: str, *, at_call: int) -> View:
    """Exactly the input of model call ``at_call``; no such call is one line on stderr and exit 5."""
    try:
        view = ledger.view_at(session_id, agent_id, model_call=at_call)
    except ModelCallNotFound as exc:
        typer.echo(f"error: {one_line(str(exc))}", err=True)
        raise typer.Exit(ExitCode.NOT_FOUND) from None
    facts = {"session_id": session_id, "agent_id": agent_id, "model_call": at_call}
    title = f"{session_id} / {agent_id} — input of model call {at_call}: {len(view)} entries"
    return View(facts, list(view), title, tokens=False)


def _print_origins(session_id: str, url: str | None, agent: str | None) -> None:
    """Its lineage, one line each: where a forked agent came from, its forks (of forks), its copies elsewhere."""
    with open_ledger(url) as ledger:
        for agent_id in agents_of(ledger, session_id, agent):
            origin = ledger.fork_origin(session_id, agent_id)
            if origin is not None:
                where = "its view then" if origin.at_call is None else f"model call {origin.at_call}"
                typer.echo(
                    f"{session_id} / {agent_id} was forked from {origin.session_id} / {origin.agent_id}"
                    f" at {where} (version {origin.version})"
                )
            for link in ledger.forks(session_id, agent_id, transitive=True):
                when = link.created_at.isoformat(timespec="seconds")
                if link.ledger is not None:
                    typer.echo(
                        f"{session_id} / {agent_id} was copied to {link.ledger} (version {link.version}, {when})"
                    )
                    continue
                cut = "its view then" if link.at_call is None else f"model call {link.at_call}"
                kin = "fork" if link.depth == 1 else f"fork of a fork (depth {link.depth})"
                detail = f"at {cut}, " if link.depth == 1 else ""
                typer.echo(
                    f"{session_id} / {agent_id} has a {kin}: {link.child_session_id} / {link.child_agent_id}"
                    f" ({detail}{when})"
                )
