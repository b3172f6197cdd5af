"""``contextledger tail SESSION``: follow a session in a terminal while its agents run.

Prints the newest events of every agent (or one), then asks the ledger again every
``--interval`` seconds and prints what was committed since: model calls, messages,
reductions (with why they ran) and pin changes. It only reads: an idle session costs
one state read per agent and interval, and nothing is printed until an agent commits.
Ctrl-C stops it (exit 130).

Ledger text is printed as plain text (never parsed as markup) on one line, with
control characters dropped, so content cannot move the cursor or recolour the terminal.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from contextledger.cli.options import AgentOption, SessionArg, UrlOption, agents_of, open_ledger
from contextledger.cli.render import console as make_console
from contextledger.ledger import Ledger
from contextledger.model.records import Snapshot
from contextledger.model.text import describe, short
from contextledger.web.timeline import why

__all__ = ["Event", "Follower", "tail"]

KIND_STYLES = {
    "agent": "bold",
    "call": "cyan",
    "message": "",
    "reduction": "bold magenta",
    "pin": "yellow",
}


@dataclass(frozen=True)
class Event:
    """One thing that happened in a conversation, as ``tail`` prints it."""

    at: datetime
    agent_id: str
    kind: str  # agent | call | message | reduction | pin
    text: str


@dataclass(frozen=True)
class _Seen:
    version: int
    calls: int
    next_seq: int


def _clean(text: str) -> str:
    """``text`` on one line, without control characters (ledger content never drives the terminal)."""
    return "".join(c if c.isprintable() else " " for c in " ".join(text.split()))


class Follower:
    """What was committed to a session since the last look: the events ``tail`` prints.

    Each :meth:`poll` reads every agent's state (and, for an agent that committed, its
    reductions and pin events); nothing is written.
    """

    def __init__(self, ledger: Ledger, session_id: str, agent: str | None = None) -> None:
        """Follow ``session_id`` (only ``agent`` when given).

        Raises:
            SessionNotFound: No such session, or the session has no agent ``agent``.
        """
        self.ledger = ledger
        self.session_id = session_id
        self.agent = agent
        self.seen: dict[str, _Seen] = {}
        agents_of(ledger, session_id, agent)

    def _agents(self) -> list[str]:
        return [self.agent] if self.agent is not None else self.ledger.agents(self.session_id)

    def backlog(self, last: int) -> list[Event]:
        """The newest ``last`` events so far (messages of the live view, reductions, pins), oldest first."""
        events: list[Event] = []
        for agent_id in self._agents():
            snap = self.ledger.store.load(self.session_id, agent_id)
            if snap is None:
                continue
            self.seen[agent_id] = _Seen(snap.state.version, snap.state.model_call_count, snap.state.next_seq)
            at = snap.state.updated_at
            events.append(
                Event(
                    snap.state.created_at,
                    agent_id,
                    "agent",
                    f"{snap.state.model_call_count} model calls, {len(snap.entries)} entries in view, "
                    f"{sum(e.tokens for e in snap.entries)} tokens, version {snap.state.version}",
                )
            )
            events += [
                Event(at, agent_id, "message", f"{e.message.role if e.kind == 'message' else 'summary'}: "
                      + describe(e.message, 160))
                for e in snap.entries[-last:]
            ]  # fmt: skip
            events += self._reductions(agent_id, 0)[-last:]
            events += self._pins(agent_id, 0)[-last:]
        head = [e for e in events if e.kind == "agent"]
        rest = sorted((e for e in events if e.kind != "agent"), key=lambda e: e.at)
        return head + rest[-last:]

    def poll(self) -> list[Event]:
        """Events committed since the previous call (or :meth:`backlog`), oldest first."""
        events: list[Event] = []
        for agent_id in self._agents():
            snap = self.ledger.store.load(self.session_id, agent_id)
            if snap is None:
                continue
            before = self.seen.get(agent_id)
            if before is None:
                before = _Seen(0, 0, 0)
                events.append(Event(snap.state.created_at, agent_id, "agent", "a new agent in the session"))
            if snap.state.version == before.version:
                continue
            events += self._changes(agent_id, snap, before)
            self.seen[agent_id] = _Seen(snap.state.version, snap.state.model_call_count, snap.state.next_seq)
        return events

    def _changes(self, agent_id: str, snap: Snapshot, before: _Seen) -> list[Event]:
        at = snap.state.updated_at
        events: list[Event] = []
        calls = snap.state.model_call_count
        if calls > before.calls:
            span = f"{before.calls + 1}" if calls == before.calls + 1 else f"{before.calls + 1}–{calls}"
            events.append(Event(at, agent_id, "call", f"model call {span}"))
        fresh = [e for e in snap.entries if e.kind == "message" and e.seq >= before.next_seq]
        if len(fresh) < snap.state.next_seq - before.next_seq:
            # Some were appended and evicted between two looks: read them from the history.
            events += [
                Event(h.created_at, agent_id, "message", f"{h.message.role}: {describe(h.message, 160)}"
                      + (" (already evicted)" if h.status == "evicted" else ""))
                for h in self.ledger.history(
                    self.session_id,
                    agent_id,
                    after=before.next_seq - 1 if before.next_seq else None,
                    before=snap.state.next_seq,
                )  # the rows appended since, only
            ]  # fmt: skip
        else:
            events += [Event(at, agent_id, "message", f"{e.message.role}: {describe(e.message, 160)}") for e in fresh]
        events += self._reductions(agent_id, before.version)
        events += self._pins(agent_id, before.version)
        return events

    def _reductions(self, agent_id: str, after_version: int) -> list[Event]:
        found = [r for r in self.ledger.reductions(self.session_id, agent_id) if r.version > after_version]
        return [
            Event(
                r.created_at,
                agent_id,
                "reduction",
                f"{r.trigger} · {r.strategy} at call {r.model_call_count}: {r.tokens_before}→{r.tokens_after} tokens, "
                f"{len(r.evicted)} evicted"
                + (f", summary {short(r.summary_id)}" if r.summary_id else "")
                + f" — {why(r)}",
            )
            for r in found
        ]

    def _pins(self, agent_id: str, after_version: int) -> list[Event]:
        events = [p for p in self.ledger.pin_history(self.session_id, agent_id) if p.version > after_version]
        return [
            Event(p.at, agent_id, "pin", f"{'pinned' if p.pinned else 'unpinned'} by {p.source}: {p.entry_id}")
            for p in events
        ]


def _print(console: Console, events: Iterable[Event], width: int) -> None:
    for event in events:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(event.at.strftime("%H:%M:%S "), style="dim")
        line.append(_clean(event.agent_id)[:width].ljust(width) + " ", style="bold")
        line.append(f"{event.kind:<9} ", style=KIND_STYLES.get(event.kind, ""))
        line.append(_clean(event.text))
        console.print(line, no_wrap=True, overflow="ellipsis", crop=True)
    console.file.flush()


def tail(
    session_id: SessionArg,
    url: UrlOption = None,
    agent: AgentOption = None,
    interval: Annotated[float, typer.Option(min=0.1, max=3600, help="Seconds between two looks at the ledger.")] = 1.0,
    last: Annotated[int, typer.Option(min=0, help="Events shown before following (the newest).")] = 10,
) -> None:
    """Follow a session as its agents run: model calls, messages, reductions and pins as they commit.

    Read-only. Ctrl-C stops it (exit 130).
    """
    console = make_console()
    with open_ledger(url) as ledger:
        follower = Follower(ledger, session_id, agent)
        width = max(len(a) for a in ledger.agents(session_id))
        _print(console, follower.backlog(last), min(width, 24))
        console.print(Text(f"following {_clean(session_id)} (Ctrl-C to stop)", style="dim"))
        console.file.flush()
        while True:
            time.sleep(interval)
            _print(console, follower.poll(), min(width, 24))
