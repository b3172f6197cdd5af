"""The inspector: read-only views of any ledger, plus export and delete.

Each command opens the ledger named by ``--url`` (or ``CONTEXTLEDGER_URL``), prints a
table or, with ``--json``, one JSON document, and closes the ledger.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from contextledger.cli.errors import ExitCode
from contextledger.cli.listing import Listing, dump_records, fetch_window, listing_command, per_agent
from contextledger.cli.options import (
    AgentOption,
    JsonOption,
    LastOption,
    LimitOption,
    NoPagerOption,
    SessionArg,
    UrlOption,
    agents_of,
    open_ledger,
)
from contextledger.cli.output import counted, print_table, window, write_file
from contextledger.cli.render import (
    Cell,
    describe,
    dump_json,
    fmt_time,
    history_row_json,
    short,
)
from contextledger.ledger import Ledger
from contextledger.model.records import HistoryEntry, Reduction, SummaryEntry, Trigger

__all__ = [
    "TriggerName",
    "delete",
    "evictions",
    "export",
    "history",
    "parse_since",
    "reductions",
    "sessions",
    "summaries",
]


class TriggerName(StrEnum):
    """The reduction triggers accepted by ``--trigger`` (mirrors :data:`~contextledger.model.records.Trigger`)."""

    per_turn = "per_turn"
    proactive = "proactive"
    reactive = "reactive"
    end_of_invocation = "end_of_invocation"
    manual = "manual"
    restore = "restore"
    import_ = "import"


_RELATIVE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(value: str | None, *, now: datetime | None = None, option: str = "--since") -> datetime | None:
    """Parse ``--since``: an ISO-8601 time (naive means UTC) or a relative age like ``15m``, ``2h``, ``7d``.

    Raises:
        typer.BadParameter: The value is neither (the message names ``option``).
    """
    if value is None:
        return None
    match = _RELATIVE.match(value)
    if match:
        delta = timedelta(**{_UNITS[match.group(2).lower()]: int(match.group(1))})
        return (now or datetime.now(UTC)) - delta
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise typer.BadParameter(
            f"{value!r} is neither an ISO-8601 time (2025-01-31T12:00:00Z) nor an age (30s, 15m, 2h, 7d, 1w)",
            param_hint=f"'{option}'",
        ) from exc
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def sessions(
    url: UrlOption = None,
    limit: Annotated[
        int,
        typer.Option("--limit", "-n", "--last", min=1, help="At most this many sessions (the most recently updated)."),
    ] = 50,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many (most recent first).")] = 0,
    app: Annotated[str | None, typer.Option("--app", help="Only the sessions of this app.", show_default=False)] = None,
    user: Annotated[
        str | None, typer.Option("--user", help="Only the sessions of this user.", show_default=False)
    ] = None,
    as_json: JsonOption = False,
    no_pager: NoPagerOption = False,
) -> None:
    """List sessions, most recently updated first (those of one app and/or user with --app / --user)."""
    with open_ledger(url) as ledger:
        infos = ledger.sessions(limit=limit, offset=offset, app=app, user=user)
        if as_json:
            return dump_records(infos)
        owned = any(i.app is not None or i.user is not None for i in infos)
        rows = [
            (
                i.session_id,
                *((i.app or "-", i.user or "-") if owned else ()),
                ", ".join(f"{a} (damaged)" if a in i.damaged else a for a in i.agents),
                str(i.active_entries),
                str(i.total_entries),
                fmt_time(i.created_at),
                fmt_time(i.updated_at),
            )
            for i in infos
        ]
        # The app and user columns only when a listed session has one: ledgers without stay as they were.
        columns = ["session", *(("app", "user") if owned else ()), "agents", "active", "total", "created", "updated"]
        scope = "".join(f" {name} {value!r}" for name, value in (("of app", app), ("of user", user)) if value)
        empty = "no sessions" + scope + (f" after offset {offset}" if offset else "")
        print_table(
            f"Sessions in {ledger.url}",
            columns,
            rows,
            drop=["created", "total", "active", "app"],
            empty=empty,
            no_pager=no_pager,
        )


def history(
    session_id: SessionArg,
    url: UrlOption = None,
    agent: AgentOption = None,
    limit: LimitOption = None,
    last: LastOption = None,
    as_json: JsonOption = False,
    no_pager: NoPagerOption = False,
) -> None:
    """Show every entry ever appended, evicted ones and every summary included."""
    with open_ledger(url) as ledger:
        agents = agents_of(ledger, session_id, agent)
        rows: list[HistoryEntry | SummaryEntry] = []
        page = counted(limit, last)
        for agent_id in agents:
            # The first (last) N rows of the listing hold at most the first (last) N messages
            # of each agent: read those only, one page per agent; summaries are few.
            rows += ledger.history(session_id, agent_id, limit=page["limit"], last=page["last"])
            rows += ledger.summaries(session_id, agent_id)
        rows.sort(key=lambda r: (r.agent_id, r.seq, isinstance(r, HistoryEntry)))
        rows = window(rows, limit, last)
        if as_json:
            dump_json([history_row_json(r) for r in rows])
            return
        lines: list[list[str]] = []
        styles: list[str] = []
        for r in rows:
            if isinstance(r, HistoryEntry):
                status = r.status if r.evicted_by is None else f"evicted by {short(r.evicted_by)}"
                text = describe(r.message)
                cells = [r.agent_id, str(r.seq), "message", short(r.message.message_id), r.message.role]
                cells += [status, "pinned" if r.pinned else "", str(r.revision_count or ""), text]
            else:
                if r.superseded_by:
                    status = f"superseded by {short(r.superseded_by)}"
                elif r.evicted_by:
                    status = f"evicted by {short(r.evicted_by)}"
                else:
                    status = "active"
                cells = [r.agent_id, str(r.seq), "summary", short(r.summary_id), "user", status, "", ""]
                cells.append(f"replaces {len(r.replaces)}: " + describe_text(r.content))
            lines.append(cells)
            styles.append("dim" if status != "active" else "")
        columns = ["agent", "seq", "kind", "id", "role", "status", "pin", "revs", "content"]
        drop = ["revs", "kind", "id", "role", "pin", "seq"]
        if len(agents) == 1:
            drop.insert(0, "agent")
        print_table(f"History of {session_id}", columns, lines, drop=drop, no_pager=no_pager, styles=styles)


def describe_text(text: str) -> str:
    """A one-line preview of plain text."""
    flat = " ".join(text.split())
    return flat if len(flat) <= 72 else flat[:71] + "…"


def evictions(
    session_id: SessionArg,
    url: UrlOption = None,
    agent: AgentOption = None,
    trigger: Annotated[TriggerName | None, typer.Option(help="Only evictions made by this trigger.")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only evictions at or after this time: ISO-8601 (UTC if naive) or an age: 15m, 2h, 7d."),
    ] = None,
    limit: LimitOption = None,
    last: LastOption = None,
    as_json: JsonOption = False,
    no_pager: NoPagerOption = False,
) -> None:
    """What was evicted, when, why (trigger and strategy), and which summary replaced it."""
    since_at = parse_since(since)
    with open_ledger(url) as ledger:
        trig: Trigger | None = trigger.value if trigger is not None else None
        found = fetch_window(
            ledger,
            session_id,
            agent,
            limit,
            last,
            lambda sid, aid, page: ledger.evictions(sid, aid, trigger=trig, since=since_at, **page),
            key=lambda e: (e.evicted_at, e.agent_id, e.seq),
        )
        if as_json:
            return dump_records(found)
        rows = [
            (
                fmt_time(e.evicted_at),
                e.agent_id,
                str(e.seq),
                e.kind,
                short(e.entry_id),
                e.role,
                e.trigger,
                e.strategy,
                short(e.reduction_id),
                short(e.replaced_by_summary) if e.replaced_by_summary else "",
                e.preview,
            )
            for e in found
        ]
        columns = [
            "evicted at",
            "agent",
            "seq",
            "kind",
            "id",
            "role",
            "trigger",
            "strategy",
            "reduction",
            "summary",
            "content",
        ]
        drop = ["reduction", "kind", "id", "summary", "agent", "role", "seq", "strategy", "evicted at"]
        print_table(
            f"Evictions in {session_id}", columns, rows, drop=drop, empty="no evictions match", no_pager=no_pager
        )


def _summary_rows(ledger: Ledger, session_id: str, found: Sequence[SummaryEntry]) -> list[Sequence[Cell]]:
    rows: list[Sequence[Cell]] = []
    for s in found:
        status = f"superseded by {short(s.superseded_by)}" if s.superseded_by else s.status
        rows.append(
            (
                fmt_time(s.created_at),
                s.agent_id,
                short(s.summary_id),
                status,
                str(len(s.replaces)),
                short(s.supersedes) if s.supersedes else "",
                s.summarizer,
                str(s.tokens),
                s.content,
            )
        )
    return rows


summaries = listing_command(
    Listing(
        doc="Every summary, superseded ones included, with what each replaced.",
        title="Summaries in {session_id}",
        columns=["created", "agent", "id", "status", "replaces", "supersedes", "summarizer", "tokens", "content"],
        drop=["summarizer", "tokens", "supersedes", "agent", "created", "replaces", "id"],
        empty="no summaries",
        read=per_agent(
            lambda ledger, sid, aid, page: ledger.summaries(sid, aid, **page), key=lambda s: (s.created_at, s.agent_id)
        ),
        rows=_summary_rows,
    )
)


def _reduction_rows(ledger: Ledger, session_id: str, found: Sequence[Reduction]) -> list[Sequence[Cell]]:
    return [
        (
            fmt_time(r.created_at),
            r.agent_id,
            short(r.reduction_id),
            r.trigger,
            r.strategy,
            str(r.model_call_count),
            f"{r.messages_before}→{r.messages_after}",
            f"{r.tokens_before}→{r.tokens_after}",
            str(len(r.evicted)),
            str(len(r.revised)),
            short(r.summary_id) if r.summary_id else "",
            r.error or r.detail or "",
        )
        for r in found
    ]


reductions = listing_command(
    Listing(
        doc="Every reduction in commit order: trigger, strategy, before/after, evictions, summary, error.",
        title="Reductions in {session_id}",
        columns=[
            "when",
            "agent",
            "id",
            "trigger",
            "strategy",
            "call",
            "messages",
            "tokens",
            "evicted",
            "revised",
            "summary",
            "why",
        ],
        # call, trigger, strategy and evicted say what happened: they keep a column longest.
        drop=["id", "revised", "summary", "agent", "messages", "tokens", "when", "evicted", "strategy", "call"],
        empty="no reductions",
        read=per_agent(
            lambda ledger, sid, aid, page: ledger.reductions(sid, aid, **page), key=lambda r: (r.created_at, r.agent_id)
        ),
        rows=_reduction_rows,
    )
)


def export(
    session_id: SessionArg,
    url: UrlOption = None,
    agent: AgentOption = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Export everything the session holds as JSON lines; `contextledger import FILE` loads it back exactly.

    Each line is one object whose "type" is conversation, message, summary, reduction,
    revision, pin or tombstone (see the README for the format).

    Message content keeps binary blocks base64-tagged.
    """
    from contextledger.history.transfer import dump_lines

    with open_ledger(url) as ledger:
        text = dump_lines(ledger.export_records(session_id, agent))
        if output is None:
            sys.stdout.write(text)
        else:
            write_file(output, text)
            typer.echo(f"exported {text.count(chr(10))} records of {session_id} to {output}", err=True)


def delete(
    session_id: SessionArg,
    url: UrlOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a session and everything it holds (asks first unless --yes)."""
    with open_ledger(url, read_only=False) as ledger:
        agents = ledger.require_session(session_id)
        entries = sum(len(ledger.history(session_id, a)) for a in agents)
        if not yes:
            question = (
                f"Delete session {session_id!r} ({len(agents)} agent(s), {entries} messages) "
                f"from {ledger.url}? This cannot be undone"
            )
            try:
                confirmed = typer.confirm(question, default=False, err=True)
            except typer.Abort:  # stdin closed: nobody said yes
                confirmed = False
            if not confirmed:
                typer.echo(f"not deleted: {session_id}", err=True)
                raise typer.Exit(ExitCode.ERROR)
        ledger.delete_session(session_id)
        typer.echo(f"deleted session {session_id} ({len(agents)} agent(s), {entries} messages)")
