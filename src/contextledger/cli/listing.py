"""The per-session listings (``summaries``, ``reductions``, ``revisions``, ``pins``): one signature, one body.

A listing is a :class:`Listing`: how it reads its records (already cut by ``--limit`` /
``--last``), how one record shows as a table row, and the table's title, columns and
empty line. :func:`listing_command` makes the typer command of it, so the options these
commands share are declared once. ``--json`` prints the records themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from contextledger.cli.options import (
    AgentOption,
    JsonOption,
    LastOption,
    LimitOption,
    NoPagerOption,
    SessionArg,
    UrlOption,
    every_agent,
    open_ledger,
)
from contextledger.cli.output import counted, print_table, window
from contextledger.cli.render import Cell, dump_json, record_json
from contextledger.ledger import Ledger

__all__ = ["Listing", "Page", "Reader", "dump_records", "fetch_window", "listing_command", "per_agent"]

T = TypeVar("T")

Reader = Callable[[Ledger, str, str | None, int | None, int | None], list[T]]
"""``read(ledger, session_id, agent, limit, last)``: a listing's records, already cut by ``--limit`` / ``--last``.

Raises:
    SessionNotFound: No such session, or it has no agent ``agent``.
"""

Page = dict[str, int | None]
"""The ``limit`` / ``last`` keywords to read one agent's page with (see :func:`~contextledger.cli.output.counted`)."""


def fetch_window(
    ledger: Ledger,
    session_id: str,
    agent: str | None,
    limit: int | None,
    last: int | None,
    read: Callable[[str, str, Page], Sequence[T]],
    key: Callable[[T], Any],
) -> list[T]:
    """The rows ``--limit`` / ``--last`` select of ``read(session_id, agent_id, page)`` over the agents, by ``key``.

    Each agent is read one page (at most N rows, see :func:`~contextledger.cli.output.counted`);
    the merged rows are sorted by ``key`` and cut by :func:`~contextledger.cli.output.window`.

    Raises:
        SessionNotFound: No such session, or it has no agent ``agent``.
    """
    page = counted(limit, last)
    found = every_agent(ledger, session_id, agent, lambda sid, aid: read(sid, aid, page))
    found.sort(key=key)
    return window(found, limit, last)


def per_agent(read: Callable[[Ledger, str, str, Page], Sequence[T]], key: Callable[[T], Any]) -> Reader[T]:
    """The :data:`Reader` of a listing read agent by agent (``read(ledger, session_id, agent_id, page)``), by ``key``.

    See :func:`fetch_window`.
    """

    def reader(ledger: Ledger, session_id: str, agent: str | None, limit: int | None, last: int | None) -> list[T]:
        return fetch_window(
            ledger, session_id, agent, limit, last, lambda sid, aid, page: read(ledger, sid, aid, page), key
        )

    return reader


def dump_records(records: Iterable[Any]) -> None:
    """Print ``records`` as one JSON list (each as :func:`~contextledger.cli.render.record_json` gives it)."""
    dump_json([record_json(r) for r in records])


@dataclass(frozen=True)
class Listing(Generic[T]):
    """One per-session listing: what it reads and how it shows it."""

    doc: str
    """The command's help (its first line is the summary ``--help`` lists)."""
    title: str
    """The table's title; ``{session_id}`` is filled in."""
    columns: Sequence[str]
    drop: Sequence[str]
    """The columns given up first when the terminal is narrow (see :func:`~contextledger.cli.render.table`)."""
    empty: str
    """Printed under the table when it has no rows."""
    read: Reader[T]
    """The records to list (see :data:`Reader`)."""
    rows: Callable[[Ledger, str, Sequence[T]], list[Sequence[Cell]]]
    """``rows(ledger, session_id, records)``: the table's rows (the ledger is still open)."""


def listing_command(listing: Listing[T]) -> Callable[..., None]:
    """The typer command printing ``listing``: a table, or with ``--json`` the records.

    Its help is ``listing.doc``; its options are those every per-session listing takes.
    """

    def command(
        session_id: SessionArg,
        url: UrlOption = None,
        agent: AgentOption = None,
        limit: LimitOption = None,
        last: LastOption = None,
        as_json: JsonOption = False,
        no_pager: NoPagerOption = False,
    ) -> None:
        with open_ledger(url) as ledger:
            found = listing.read(ledger, session_id, agent, limit, last)
            if as_json:
                return dump_records(found)
            rows = listing.rows(ledger, session_id, found)
            title = listing.title.format(session_id=session_id)
            print_table(title, listing.columns, rows, drop=listing.drop, empty=listing.empty, no_pager=no_pager)

    command.__doc__ = listing.doc
    return command
