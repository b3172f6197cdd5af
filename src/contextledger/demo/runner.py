"""The demo run: several scripted agents, a stop, a restart from the database alone, a report.

Phase one opens the ledger, runs the first half of the turns of every session
(round-robin, so the sessions are live at once) and stops -- one agent in the middle
of a tool call, as a crash would leave it. Phase two closes the ledger, opens a new
one from the URL alone, discovers the sessions, restores each conversation, checks
that the restored view is exactly the view before the stop (pins and
``model_call_count`` included), repairs the interrupted tool call, and finishes the
remaining turns. The report is read back from the ledger with the query API.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextledger.conversation.conversation import Conversation
from contextledger.demo.agent import ScriptedAgent, TurnOutcome, resume_step
from contextledger.demo.scenarios import SCENARIOS, Scenario
from contextledger.errors import ConfigurationError
from contextledger.ledger import Ledger
from contextledger.model.records import ConversationState, Eviction, Reduction, SummaryEntry, ViewEntry

__all__ = ["DEFAULT_DEMO_URL", "Check", "DemoOptions", "DemoReport", "SessionReport", "connect", "run_demo"]

logger = logging.getLogger(__name__)

DEFAULT_DEMO_URL = "sqlite:///contextledger-demo.db"
"""The demo's own ledger, so it never mixes with an application's data."""

SESSION_PREFIX = "demo-"
MAX_SESSIONS = 12


@dataclass(frozen=True)
class DemoOptions:
    """How to run the demo.

    Attributes:
        url: The ledger URL (``memory://`` is refused: it does not survive a restart).
        sessions: Number of concurrent sessions (scenarios are cycled), 1..12.
        turns: User turns per session (>= 2: the stop comes after half of them).
        keep: Keep earlier demo sessions; this run's sessions get a unique suffix.
    """

    url: str = DEFAULT_DEMO_URL
    sessions: int = len(SCENARIOS)
    turns: int = 12
    keep: bool = False

    @property
    def stop_after(self) -> int:
        """The turn after which the demo stops and restarts."""
        return max(1, self.turns // 2)

    def validate(self) -> None:
        """Check the options.

        Raises:
            ConfigurationError: An option is out of range or the URL cannot survive a restart.
        """
        if not 1 <= self.sessions <= MAX_SESSIONS:
            raise ConfigurationError(f"--sessions must be between 1 and {MAX_SESSIONS}, got {self.sessions}")
        if self.turns < 2:
            raise ConfigurationError(f"--turns must be at least 2 (the demo stops half way), got {self.turns}")
        if self.url.split("://", 1)[0].lower() == "memory":
            raise ConfigurationError(
                "the demo restarts from the database alone; memory:// does not survive a restart "
                "(use sqlite:///FILE, postgresql+psycopg://... or redis://...)"
            )


@dataclass(frozen=True)
class Check:
    """One verified property of the run."""

    name: str
    ok: bool
    detail: str


@dataclass
class SessionReport:
    """What happened to one session, read back from the ledger after the run."""

    session_id: str
    agent_id: str
    scenario: Scenario
    stopped_after_turn: int
    before_stop: list[ViewEntry]
    restored: list[ViewEntry]
    restored_state: ConversationState
    state_before_stop: ConversationState
    identical: bool
    repaired: Reduction | None
    final: list[ViewEntry]
    state: ConversationState
    evictions: list[Eviction]
    summaries: list[SummaryEntry]
    reductions: list[Reduction]
    history_size: int
    model_calls: int = 0
    overflows: int = 0
    tool_calls: int = 0

    @property
    def model_call_count(self) -> int:
        """The persisted model call count at the end of the run."""
        return self.state.model_call_count


@dataclass
class DemoReport:
    """The outcome of a demo run."""

    url: str
    options: DemoOptions
    sessions: list[SessionReport] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return all(c.ok for c in self.checks)


ProgressCallback = Callable[[str, int], None]
"""Called with a phase description and the number of turns just completed."""


@dataclass
class _Live:
    session_id: str
    scenario: Scenario
    conversation: Conversation
    agent: ScriptedAgent
    counts: TurnOutcome = field(default_factory=TurnOutcome)

    def add(self, outcome: TurnOutcome) -> None:
        self.counts.model_calls += outcome.model_calls
        self.counts.overflows += outcome.overflows
        self.counts.tool_calls += outcome.tool_calls


def session_ids(options: DemoOptions, run_id: str | None = None) -> list[tuple[str, Scenario]]:
    """The sessions a run creates: ``demo-<n>-<scenario>`` (plus a run suffix with ``keep``)."""
    out = []
    for index in range(options.sessions):
        scenario = SCENARIOS[index % len(SCENARIOS)]
        session_id = f"{SESSION_PREFIX}{index + 1}-{scenario.name}"
        out.append((f"{session_id}-{run_id}" if run_id else session_id, scenario))
    return out


def run_demo(options: DemoOptions, progress: ProgressCallback | None = None) -> DemoReport:
    """Run the demo and return its report (see the module docstring).

    Raises:
        ConfigurationError: Invalid options.
        ContextLedgerError: The ledger failed (unreachable server, out-of-date schema, ...).
    """
    options.validate()
    notify = progress or (lambda _phase, _advance: None)
    started = time.perf_counter()
    run_id = uuid.uuid4().hex[:6] if options.keep else None
    planned = session_ids(options, run_id)
    scenarios = {s.agent_id: s for s in SCENARIOS}
    stop = options.stop_after

    # -- phase one: run the first half, then stop (one agent mid-tool) -----------------------
    with connect(options.url) as ledger:
        url = ledger.url
        if not options.keep:
            for session_id, _ in planned:
                ledger.delete_session(session_id)
        live = [_open(ledger, sid, scenario) for sid, scenario in planned]
        for turn in range(1, stop + 1):
            for item in live:
                item.add(item.agent.run_turn(turn))
                notify(f"turn {turn}/{options.turns}: {item.session_id}", 1)
        crashing = next((item for item in live if item.scenario.name == "triage"), None)
        if crashing is not None and stop < options.turns:
            crashing.add(crashing.agent.run_turn(stop + 1, crash_after_tool_use=True))
        before = {item.session_id: (list(item.conversation.view), item.conversation.state) for item in live}
        counts = {item.session_id: item.counts for item in live}
    logger.info("url=<%s>, sessions=<%d>, turn=<%d> | demo stopped; restarting from the database", url, len(live), stop)
    notify("stopped; restarting from the database alone", 0)

    # -- phase two: a new connection, sessions discovered and restored from the database ------
    wanted = {sid for sid, _ in planned}
    report = DemoReport(url=url, options=options)
    with connect(options.url) as ledger:
        found = [info for info in _all_sessions(ledger) if info.session_id in wanted]
        restored: list[_Live] = []
        extra: dict[str, dict[str, Any]] = {}
        for info in sorted(found, key=lambda i: [sid for sid, _ in planned].index(i.session_id)):
            for agent_id in info.agents:
                scenario = scenarios[agent_id]
                conversation = ledger.conversation(
                    info.session_id,
                    agent_id,
                    manager=scenario.manager(),
                    context_window_limit=scenario.context_window_limit,
                    repair=False,
                )
                item = _Live(info.session_id, scenario, conversation, ScriptedAgent(conversation, scenario))
                item.counts = counts.get(info.session_id, TurnOutcome())
                view, state = list(conversation.view), conversation.state
                repaired = conversation.repair_interrupted_tools()
                extra[info.session_id] = {"restored": view, "restored_state": state, "repaired": repaired}
                restored.append(item)
        notify(f"restored {len(restored)} sessions from {url}", 0)
        for item in restored:
            done = int(item.conversation.agent_state.get("turns_done", 0))
            extra[item.session_id]["stopped_after"] = done
            pending = resume_step(item.conversation.view, done + 1) if done < options.turns else None
            for turn in range(done + 1, options.turns + 1):
                resume = pending if turn == done + 1 else None
                item.add(item.agent.run_turn(turn, resume_from=resume))
                notify(f"turn {turn}/{options.turns}: {item.session_id}", 1)
        for item in restored:
            sid, agent_id = item.session_id, item.scenario.agent_id
            view_before, state_before = before.get(sid, ([], ConversationState(session_id=sid, agent_id=agent_id)))
            data = extra[sid]
            report.sessions.append(
                SessionReport(
                    session_id=sid,
                    agent_id=agent_id,
                    scenario=item.scenario,
                    stopped_after_turn=data["stopped_after"],
                    before_stop=view_before,
                    restored=data["restored"],
                    restored_state=data["restored_state"],
                    state_before_stop=state_before,
                    identical=same_view(view_before, data["restored"])
                    and same_state(state_before, data["restored_state"]),
                    repaired=data["repaired"],
                    final=list(item.conversation.view),
                    state=item.conversation.state,
                    evictions=ledger.evictions(sid, agent_id),
                    summaries=ledger.summaries(sid, agent_id),
                    reductions=ledger.reductions(sid, agent_id),
                    history_size=len(ledger.history(sid, agent_id)),
                    model_calls=item.counts.model_calls,
                    overflows=item.counts.overflows,
                    tool_calls=item.counts.tool_calls,
                )
            )
        report.checks = _checks(report, planned, ledger)
    report.seconds = time.perf_counter() - started
    return report


def connect(url: str) -> Ledger:
    """Open the demo's ledger, creating or upgrading a SQL schema (the demo sets up its own database).

    Raises:
        ContextLedgerError: The URL is invalid, the server unreachable, or the schema newer than this library.
    """
    if url.split("://", 1)[0].split("+", 1)[0].lower() in ("sqlite", "postgresql", "postgres"):
        return Ledger.connect(url, auto_upgrade=True)
    return Ledger.connect(url)


def _open(ledger: Ledger, session_id: str, scenario: Scenario) -> _Live:
    conversation = ledger.conversation(
        session_id, scenario.agent_id, manager=scenario.manager(), context_window_limit=scenario.context_window_limit
    )
    return _Live(session_id, scenario, conversation, ScriptedAgent(conversation, scenario))


def _all_sessions(ledger: Ledger) -> list[Any]:
    out: list[Any] = []
    page = 200
    while True:
        batch = ledger.sessions(limit=page, offset=len(out))
        out += batch
        if len(batch) < page:
            return out


def _entry_key(entry: ViewEntry) -> tuple[Any, ...]:
    return (entry.entry_id, entry.kind, entry.seq, entry.tokens, entry.message.to_record())


def same_view(a: Sequence[ViewEntry], b: Sequence[ViewEntry]) -> bool:
    """Whether two views hold the same entries in the same order, content and pins included."""
    return [_entry_key(e) for e in a] == [_entry_key(e) for e in b]


def same_state(a: ConversationState, b: ConversationState) -> bool:
    """Whether two states agree on what a restore must bring back."""
    fields = ("version", "model_call_count", "next_seq", "manager_state", "agent_state")
    return all(getattr(a, name) == getattr(b, name) for name in fields)


def _checks(report: DemoReport, planned: Sequence[tuple[str, Scenario]], ledger: Ledger) -> list[Check]:
    checks: list[Check] = []
    got = {s.session_id for s in report.sessions}
    missing = [sid for sid, _ in planned if sid not in got]
    checks.append(
        Check(
            "every session restored",
            not missing,
            f"{len(got)}/{len(planned)} from the database alone" + (f"; missing {missing}" if missing else ""),
        )
    )
    differing = [s.session_id for s in report.sessions if not s.identical]
    checks.append(
        Check(
            "restored view identical",
            not differing,
            "entries, content, pins, model_call_count and manager state equal the view before the stop"
            if not differing
            else f"differs for {differing}",
        )
    )
    broken = []
    pinned_lost = []
    for s in report.sessions:
        from contextledger.core.view import View

        view = View(s.final)
        if view.dangling_tool_uses() or view.orphan_results() or (s.final and s.final[0].message.tool_result_ids):
            broken.append(s.session_id)
        evicted_ids = {e.entry_id for e in s.evictions}
        pinned_now = {h.message.message_id for h in ledger.history(s.session_id, s.agent_id) if h.pinned}
        if pinned_now & evicted_ids:
            pinned_lost.append(s.session_id)
    checks.append(
        Check(
            "tool pairs intact",
            not broken,
            "no view starts with a result or ends in an unanswered call" if not broken else f"broken in {broken}",
        )
    )
    checks.append(
        Check(
            "pins honoured",
            not pinned_lost,
            "no pinned message was evicted" if not pinned_lost else f"pinned entries evicted in {pinned_lost}",
        )
    )
    done = [
        s.session_id
        for s in report.sessions
        if s.state.agent_state and s.state.agent_state.get("turns_done") == report.options.turns
    ]
    checks.append(
        Check(
            "all turns completed",
            len(done) == len(report.sessions),
            f"{len(done)}/{len(report.sessions)} sessions ran {report.options.turns} turns",
        )
    )
    return checks
