"""The context windows ``contextledger show`` prints: the live view, or a past one, agent by agent.

A :class:`View` is one agent's window with its facts; :func:`print_views` prints the views
of a session's agents as tables, or with ``--json`` as one list of documents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from contextledger.cli.options import agents_of, open_ledger
from contextledger.cli.output import paged, window
from contextledger.cli.render import Cell, describe, dump_json, table, view_entry_json
from contextledger.errors import SessionNotFound
from contextledger.ledger import Ledger
from contextledger.model.records import ViewEntry

__all__ = ["View", "live_view", "print_views"]


@dataclass(frozen=True)
class View:
    """One agent's context window, as ``show`` prints it."""

    facts: dict[str, Any]
    """The JSON document's fields before its ``entries``."""
    entries: Sequence[ViewEntry]
    title: str
    tokens: bool
    """Whether the table has a ``tokens`` column."""


def print_views(
    url: str | None,
    session_id: str,
    agent: str | None,
    limit: int | None,
    last: int | None,
    *,
    as_json: bool,
    no_pager: bool,
    view_of: Callable[[Ledger, str, str], View],
) -> None:
    """Print ``view_of(ledger, session_id, agent_id)`` for each agent of the session (``agent`` alone when given).

    Each view's entries are cut by ``--limit`` / ``--last``; a table per agent, or one JSON list.

    Raises:
        SessionNotFound: No such session, or it has no agent ``agent``.
    """
    with open_ledger(url) as ledger, paged(enabled=not no_pager and not as_json) as out:
        documents: list[dict[str, Any]] = []
        for agent_id in agents_of(ledger, session_id, agent):
            view = view_of(ledger, session_id, agent_id)
            if as_json:
                documents.append(
                    {**view.facts, "entries": [view_entry_json(e) for e in window(view.entries, limit, last)]}
                )
                continue
            tokens = ["tokens"] if view.tokens else []
            rows: list[Sequence[Cell]] = [
                (
                    str(i),
                    str(e.seq),
                    e.kind,
                    e.message.role,
                    "pinned" if e.pinned else "",
                    *((str(e.tokens),) if view.tokens else ()),
                    describe(e.message),
                )
                for i, e in window(list(enumerate(view.entries)), limit, last)
            ]
            columns = ["#", "seq", "kind", "role", "pin", *tokens, "content"]
            out.print(table(view.title, columns, rows, drop=["#", "kind", *tokens, "seq", "pin"]))
        if as_json:
            dump_json(documents)


def live_view(ledger: Ledger, session_id: str, agent_id: str) -> View:
    """The active view the model sees now, with the conversation's version, model calls and manager.

    Raises:
        SessionNotFound: The agent was deleted since it was listed.
    """
    snapshot = ledger.store.load(session_id, agent_id)
    if snapshot is None:  # deleted between listing and loading
        raise SessionNotFound(f"session {session_id!r} has no agent {agent_id!r}")
    state = snapshot.state
    manager = (state.manager_state or {}).get("manager", "-")
    tokens = sum(e.tokens for e in snapshot.entries)
    facts = {
        "session_id": session_id,
        "agent_id": agent_id,
        "version": state.version,
        "model_call_count": state.model_call_count,
        "manager": manager,
        "manager_state": state.manager_state,
        "tokens": tokens,
    }
    title = (
        f"{session_id} / {agent_id} — {len(snapshot.entries)} entries, "
        f"~{tokens} tokens, model calls {state.model_call_count}, "
        f"version {state.version}, manager {manager}"
    )
    return View(facts, snapshot.entries, title, tokens=True)
