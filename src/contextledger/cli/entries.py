"""``contextledger message`` (one entry whole), ``revisions`` (rewritten contents) and ``pins``.

All of them only read the ledger.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.rule import Rule
from rich.text import Text

from contextledger.cli.listing import Listing, listing_command, per_agent
from contextledger.cli.options import AgentOption, JsonOption, NoPagerOption, UrlOption, agents_of, open_ledger
from contextledger.cli.output import paged
from contextledger.cli.render import Cell, describe, dump_json, fmt_time, record_json, short
from contextledger.errors import EntryNotFound
from contextledger.ledger import Ledger
from contextledger.model.messages import Message
from contextledger.model.paging import cursor
from contextledger.model.records import HistoryEntry, PinEvent, Reduction, Revision, SummaryEntry
from contextledger.stores.capabilities import TIME_TRAVEL

__all__ = ["find_entry", "message", "pins", "print_entry", "revisions"]

SESSION_PAGE = 500


def _conversations(ledger: Ledger, session_id: str | None, agent: str | None) -> Iterator[tuple[str, str]]:
    if session_id is not None:
        for agent_id in agents_of(ledger, session_id, agent):
            yield session_id, agent_id
        return
    offset = 0
    while True:
        page = ledger.sessions(limit=SESSION_PAGE, offset=offset)
        for info in page:
            for agent_id in info.agents:
                if agent is None or agent_id == agent:
                    yield info.session_id, agent_id
        if len(page) < SESSION_PAGE:
            return
        offset += SESSION_PAGE


def find_entry(
    ledger: Ledger, entry_id: str, session_id: str | None = None, agent: str | None = None
) -> HistoryEntry | SummaryEntry:
    """The message or summary whose id is ``entry_id`` (or, when unique, starts or ends with it).

    A table shows an id the library made by its end (see :func:`~contextledger.model.text.short`),
    other ids by their start: either finds the entry.

    Without ``session_id`` every session is searched (a scan of the ledger).

    Raises:
        EntryNotFound: No entry has that id.
        typer.BadParameter: The prefix names more than one entry.
    """
    found: list[HistoryEntry | SummaryEntry] = []
    for sid, aid in _conversations(ledger, session_id, agent):
        for h in ledger.history(sid, aid):
            if h.message.message_id == entry_id:
                return h
            if _part_of(h.message.message_id, entry_id):
                found.append(h)
        for s in ledger.summaries(sid, aid):
            if s.summary_id == entry_id:
                return s
            if _part_of(s.summary_id, entry_id):
                found.append(s)
    if not found:
        where = f" in session {session_id!r}" if session_id else ""
        raise EntryNotFound(f"no entry {entry_id!r}{where} in {ledger.url}")
    if len(found) > 1:
        ids = ", ".join(_id(f) for f in found[:5])
        raise typer.BadParameter(
            f"{entry_id!r} is the start or end of {len(found)} entry ids ({ids}, ...)", param_hint="ENTRY_ID"
        )
    return found[0]


def _part_of(identifier: str, given: str) -> bool:
    """Whether ``given`` is a start or an end of ``identifier`` (what :func:`find_entry` accepts for an id)."""
    return identifier.startswith(given) or identifier.endswith(given)


def _id(row: HistoryEntry | SummaryEntry) -> str:
    return row.message.message_id if isinstance(row, HistoryEntry) else row.summary_id


def message(
    entry_id: Annotated[
        str, typer.Argument(help="The entry's id (a message or summary id, or its unique start or end).")
    ],
    url: UrlOption = None,
    session: Annotated[
        str | None, typer.Option("--session", "-s", help="Look in this session only (default: every session).")
    ] = None,
    agent: AgentOption = None,
    as_json: JsonOption = False,
    no_pager: NoPagerOption = False,
) -> None:
    """Print one entry whole: every content block, its originals if it was rewritten, why it left the view."""
    print_entry(entry_id, url=url, session_id=session, agent=agent, as_json=as_json, no_pager=no_pager)


def print_entry(
    entry_id: str,
    *,
    url: str | None,
    session_id: str | None,
    agent: str | None,
    as_json: bool,
    no_pager: bool,
) -> None:
    """Find the entry and print it whole (the body of ``message`` and ``show --entry``)."""
    with open_ledger(url) as ledger:
        row = find_entry(ledger, entry_id, session_id, agent)
        reduction = _reduction(ledger, row)
        originals = (
            ledger.revisions(row.session_id, row.agent_id, row.message.message_id)
            if isinstance(row, HistoryEntry)
            else []
        )
    if as_json:
        document = record_json(row)
        document["kind"] = "message" if isinstance(row, HistoryEntry) else "summary"
        document["evicted_by_reduction"] = record_json(reduction) if reduction else None
        document["revisions"] = [record_json(r) for r in originals]
        dump_json(document)
        return
    with paged(enabled=not no_pager) as out:
        _print_whole(out, row, reduction, originals)


def _reduction(ledger: Ledger, row: HistoryEntry | SummaryEntry) -> Reduction | None:
    if not row.evicted_by:
        return None
    return next((r for r in ledger.reductions(row.session_id, row.agent_id) if r.reduction_id == row.evicted_by), None)


def _print_whole(
    out: Console, row: HistoryEntry | SummaryEntry, reduction: Reduction | None, originals: Sequence[Revision]
) -> None:
    kind = "message" if isinstance(row, HistoryEntry) else "summary"
    head = Text.assemble((f"{kind} {_id(row)}", "bold"), f"  session {row.session_id} / agent {row.agent_id}")
    out.print(head)
    facts = [f"seq {row.seq}", f"{row.tokens} tokens", f"created {fmt_time(row.created_at)}"]
    if isinstance(row, HistoryEntry):
        facts.insert(0, row.message.role)
        if row.pinned:
            facts.append("pinned")
    status: str = row.status
    if isinstance(row, SummaryEntry) and row.superseded_by:
        status = f"superseded by summary {row.superseded_by}"
    if reduction is not None:
        status = (
            f"evicted at model call {reduction.model_call_count} ({fmt_time(reduction.created_at)}) by a "
            f"{reduction.trigger} {reduction.strategy} reduction {reduction.reduction_id}"
        )
        if reduction.error:
            status += f": {reduction.error}"
    out.print(Text(" · ".join([*facts, status])))
    if isinstance(row, SummaryEntry):
        out.print(Rule(f"summary by {row.summarizer}", align="left"))
        out.print(Text(row.content))
        out.print(Rule(f"replaces {len(row.replaces)} entries", align="left"))
        for replaced in row.replaces:
            out.print(Text(f"  {replaced}"))
        if row.supersedes:
            out.print(Text(f"supersedes summary {row.supersedes}"))
        return
    out.print(Rule(f"content: {len(row.message.content)} block(s)", align="left"))
    for line in block_lines(row.message.content):
        out.print(Text(line))
    for revision in originals:
        out.print(
            Rule(f"original #{revision.number} ({revision.reason}, {fmt_time(revision.created_at)})", align="left")
        )
        for line in block_lines(revision.original):
            out.print(Text(line))
    if row.message.metadata:
        out.print(Rule("metadata", align="left"))
        out.print(Text(json.dumps(_plain(row.message.metadata), indent=2, ensure_ascii=False)))


def block_lines(blocks: Iterable[Mapping[str, Any]], indent: str = "") -> Iterator[str]:
    """Every content block in full, as lines of text (binary payloads named with their size)."""
    for block in blocks:
        if isinstance(block.get("text"), str):
            yield from (indent + line for line in block["text"].splitlines() or [""])
        elif isinstance(block.get("toolUse"), Mapping):
            tool = block["toolUse"]
            yield f"{indent}[toolUse {tool.get('name')} id={tool.get('toolUseId')}]"
            text = json.dumps(_plain(tool.get("input")), indent=2, ensure_ascii=False)
            yield from (indent + "  " + line for line in text.splitlines())
        elif isinstance(block.get("toolResult"), Mapping):
            result = block["toolResult"]
            yield f"{indent}[toolResult id={result.get('toolUseId')} {result.get('status', 'success')}]"
            inner = result.get("content")
            yield from block_lines(
                [b for b in inner if isinstance(b, Mapping)] if isinstance(inner, list) else [], indent + "  "
            )
        else:
            kind = next(iter(block), "block")
            body = block.get(kind)
            source = body.get("source") if isinstance(body, Mapping) else None
            raw = source.get("bytes") if isinstance(source, Mapping) else None
            if isinstance(raw, bytes):
                fmt = body.get("format", "") if isinstance(body, Mapping) else ""
                yield f"{indent}[{kind} {fmt}, {len(raw)} bytes]"
            else:
                yield f"{indent}[{kind}] " + json.dumps(_plain(body), ensure_ascii=False)


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _revision_rows(ledger: Ledger, session_id: str, found: Sequence[Revision]) -> list[Sequence[Cell]]:
    return [
        (
            fmt_time(r.created_at),
            r.agent_id,
            short(r.message_id),
            str(r.number),
            r.reason,
            short(r.reduction_id) if r.reduction_id else "",
            describe(Message(role="user", content=r.original)) if r.original else "",
        )
        for r in found
    ]


revisions = listing_command(
    Listing(
        doc="Every content rewrite (tool-result truncation), oldest first, with the original kept.",
        title="Revisions in {session_id}",
        columns=["when", "agent", "message", "#", "reason", "reduction", "original"],
        drop=["reduction", "#", "agent", "when", "reason"],
        empty="no revisions",
        # Revisions are few: every one is read, then cut.
        read=per_agent(
            lambda ledger, sid, aid, page: ledger.revisions(sid, aid),
            key=lambda r: (r.created_at, r.agent_id, r.message_id, r.number),
        ),
        rows=_revision_rows,
    )
)


def _pin_rows(ledger: Ledger, session_id: str, found: Sequence[PinEvent]) -> list[Sequence[Cell]]:
    texts: dict[tuple[str, str], str] = {}
    for agent_id in sorted({e.agent_id for e in found}):
        wanted = sorted({e.entry_id for e in found if e.agent_id == agent_id})
        for h in TIME_TRAVEL.of(ledger.store, "contextledger pins").entries(session_id, agent_id, wanted):  # those only
            texts[agent_id, h.message.message_id] = describe(h.message)
    return [
        (
            fmt_time(e.at),
            e.agent_id,
            "pin" if e.pinned else "unpin",
            e.source,
            short(e.entry_id),
            texts.get((e.agent_id, e.entry_id), ""),
        )
        for e in found
    ]


pins = listing_command(
    Listing(
        doc="Every pin and unpin, oldest first: when, which entry, and who asked (api, model, host).",
        title="Pin changes in {session_id}",
        columns=["when", "agent", "change", "by", "entry", "content"],
        drop=["agent", "by", "entry", "change", "when"],  # "when" is the point of this listing: it goes last
        empty="no pin changes",
        read=per_agent(lambda ledger, sid, aid, page: ledger.pin_history(sid, aid, **page), key=cursor),
        rows=_pin_rows,
    )
)
