"""A realistic two-agent session of thousands of turns, written fast through the changeset API.

Driving a real ``Conversation`` costs milliseconds a turn (hooks, manager, one commit per
hook); a 2,000-turn fixture would take a minute. Here each turn is one changeset built
by :func:`~contextledger.core.building.build_changeset` (the function the conversation uses)
and committed to an in-memory store, whose commit checks what a real store checks
(unknown evictions, duplicate ids, versions). The records are then exported, given a
realistic clock (an afternoon of work, both agents interleaved) and imported into the
target ledger in one commit per agent.

The session holds what a long run of a real agent holds:

* ``lead`` -- a tool-using researcher: a prompt, a tool call and its result, an answer
  per turn; big tool results truncated by ``per_turn`` reductions (revisions kept);
  ``proactive`` summaries whose chain supersedes the previous one; a ``reactive``
  reduction after a context overflow now and then (its error text recorded); pins and
  unpins by the API, the model and the host; one crash mid-tool, repaired by a
  ``restore``/``tool_pair_repair`` reduction.
* ``writer`` -- a drafting agent under a per-turn sliding window (a reduction nearly
  every turn, the wall of markers a chart must cope with) and an ``end_of_invocation``
  summary every 25 turns.

Everything is deterministic (one seeded generator), so a test can name the turns it
looks for: :data:`NEEDLE` is said once, at turn :data:`NEEDLE_TURN` of ``lead``, and is
evicted and summarized long before the end.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from contextledger import Ledger, Message
from contextledger.core.building import build_changeset
from contextledger.core.changeset import ContentRevision, Edit, ReductionPlan, SummaryDraft
from contextledger.core.view import View
from contextledger.model.bundle import ConversationRecords
from contextledger.model.records import ConversationState
from contextledger.model.tokens import CharTokenCounter
from contextledger.stores.memory import MemoryStore

__all__ = ["NEEDLE", "NEEDLE_TURN", "LongSession", "build_long_session"]

NEEDLE = "the stale resolver cache in eu-west-3"
NEEDLE_TURN = 137
START = datetime(2025, 3, 14, 13, 0, tzinfo=UTC)
SERVICES = ("checkout", "search", "billing", "auth", "catalog", "ledger", "mailer", "images", "gateway")
PROSE = (
    "latency p99 rose after the deploy while error budgets held; the pool waited on connections and "
    "the retry storm doubled the load on the replica until the circuit breaker opened and traffic drained"
)
WORDS = PROSE.split(" ")


@dataclass
class LongSession:
    """What was written: the session, its agents and facts a test can look for."""

    session_id: str
    turns: int
    agents: tuple[str, ...] = ("lead", "writer")
    needle_entry: str = ""
    needle_summarized: bool = False
    pinned: list[str] = field(default_factory=list)
    started: datetime = START
    ended: datetime = START


class _Agent:
    """One conversation being written: its state, view and the clock of each version."""

    def __init__(self, store: MemoryStore, session_id: str, agent_id: str) -> None:
        self.store = store
        self.state = ConversationState(session_id=session_id, agent_id=agent_id)
        self.view = View(())
        self.counter = CharTokenCounter()
        self.times: dict[int, datetime] = {}

    def commit(
        self,
        edit: Edit,
        at: datetime,
        *,
        calls: int = 0,
        before_call: bool = False,
    ) -> None:
        count = self.state.model_call_count + calls
        changeset, view = build_changeset(
            self.state,
            self.view,
            edit,
            counter=self.counter,
            model_call_count=count,
            count_changed=calls > 0,
            manager_state={"manager": "scripted"},
            before_call=before_call,
        )
        version = self.store.commit(changeset)
        self.state = changeset.state_after(self.state, version)
        self.view = view
        self.times[version] = at

    def oldest_turns(self, keep_tokens: int, *, keep_last: int = 6) -> list[str]:
        """Ids of the oldest whole turns (user prompt up to the next) to drop to fit ``keep_tokens``."""
        entries = self.view.entries
        starts = [i for i, e in enumerate(entries) if e.kind == "message" and e.message.role == "user" and _opens(e)]
        tokens = self.view.tokens
        chosen: list[str] = []
        for n, start in enumerate(starts[:-keep_last] if len(starts) > keep_last else []):
            if tokens <= keep_tokens:
                break
            end = starts[n + 1]
            span = entries[start:end]
            if any(e.message.pinned for e in span) or any(e.kind == "summary" for e in span):
                continue
            chosen += [e.entry_id for e in span]
            tokens -= sum(e.tokens for e in span)
        return chosen


def _opens(entry: object) -> bool:
    message = getattr(entry, "message", None)
    return isinstance(message, Message) and not message.tool_result_ids


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _lead_turn(agent: _Agent, rng: random.Random, turn: int, at: datetime, out: LongSession) -> None:
    service = SERVICES[turn % len(SERVICES)]
    prompt = f"[turn {turn}] Why did {service} slow down around incident INC-{4000 + turn}?"
    if turn == NEEDLE_TURN:
        prompt += f" I suspect {NEEDLE}."
    big = turn % 5 == 0
    log = f"log of {service} at INC-{4000 + turn}: " + _text(rng, 260 if big else 45)
    use_id = f"call-{turn}"
    messages = [
        Message.user(prompt),
        Message.tool_use(use_id, "read_logs", {"service": service, "incident": 4000 + turn}, text="Reading logs."),
        Message.tool_result(use_id, log),
        Message.assistant(f"{service.capitalize()} at turn {turn}: " + _text(rng, 30)),
    ]
    pins: dict[str, bool] = {}
    if turn == 0:
        pins[messages[0].message_id] = True
        out.pinned.append(messages[0].message_id)
    if turn == NEEDLE_TURN:
        out.needle_entry = messages[0].message_id
    agent.commit(Edit(appends=tuple(messages)), at, calls=2)
    if turn and turn % 160 == 0:  # the model pins a finding; the host drops an older one
        source = "model" if turn % 320 == 0 else "host"
        agent.commit(Edit(pins={messages[3].message_id: True}, pin_source=source), at + timedelta(seconds=1))
        out.pinned.append(messages[3].message_id)
        if len(out.pinned) > 4:
            old = out.pinned.pop(1)
            if agent.view.index_of(old) is not None:
                agent.commit(Edit(pins={old: False}, pin_source="api"), at + timedelta(seconds=2))
    if big:  # the next call carries a truncated copy of the big tool result
        result = messages[2]
        short = [{"toolResult": {"toolUseId": use_id, "status": "success", "content": [{"text": log[:300] + " …"}]}}]
        plan = ReductionPlan(
            strategy="sliding_window",
            revisions=(ContentRevision(message_id=result.message_id, content=short),),
            detail="tool result over 1,000 characters truncated",
        )
        agent.commit(Edit(plan=plan, trigger="per_turn"), at + timedelta(seconds=3))
    if turn % 41 == 40:  # the model rejects an input too large for its window
        evict = agent.oldest_turns(agent.view.tokens // 2)
        if evict:
            plan = ReductionPlan(strategy="sliding_window", evict=tuple(evict))
            error = f"ContextWindowOverflowError: input of {agent.view.tokens} tokens is too long for the model"
            agent.commit(Edit(plan=plan, trigger="reactive", error=error), at + timedelta(seconds=4))
    elif agent.view.tokens > 9000:  # compress before the next call
        evict = agent.oldest_turns(4500)
        previous = [e.entry_id for e in agent.view.entries if e.kind == "summary"]
        if evict:
            replaced = tuple(previous[-1:] + evict)
            content = (
                f"Summary of turns up to {turn}: {len(evict)} messages about "
                + ", ".join(sorted({s for s in SERVICES if rng.random() < 0.4}))
                + ". "
                + _text(rng, 40)
            )
            if out.needle_entry and not out.needle_summarized and turn > NEEDLE_TURN:
                # The summarizer keeps the user's suspicion, whichever reduction evicted it.
                content += f" The user suspected {NEEDLE}."
                out.needle_summarized = True
            plan = ReductionPlan(
                strategy="summarizing", summary=SummaryDraft(content=content, summarizer="offline", replaces=replaced)
            )
            agent.commit(Edit(plan=plan, trigger="proactive"), at + timedelta(seconds=4))
    if turn == 1000:  # a crash after the model asked for a tool; the next write repairs it
        crash = Message.tool_use("call-crash", "read_logs", {"service": "gateway"}, text="Reading logs.")
        agent.commit(Edit(appends=(crash,)), at + timedelta(seconds=5), calls=1)
        repair = Message(
            role="user",
            content=[
                {
                    "toolResult": {
                        "toolUseId": "call-crash",
                        "status": "error",
                        "content": [{"text": "Tool execution was interrupted before it returned a result."}],
                    }
                }
            ],
        )
        agent.commit(Edit(appends=(repair,), trigger="restore", strategy="tool_pair_repair"), at + timedelta(minutes=3))


def _writer_turn(agent: _Agent, rng: random.Random, turn: int, at: datetime) -> None:
    agent.commit(
        Edit(
            appends=(
                Message.user(f"[draft {turn}] Write section {turn} of the incident report."),
                Message.assistant(f"Section {turn}. " + _text(rng, 50)),
            )
        ),
        at,
        calls=1,
    )
    if turn % 25 == 24:
        evict = agent.oldest_turns(agent.view.tokens // 3, keep_last=4)
        previous = [e.entry_id for e in agent.view.entries if e.kind == "summary"]
        if evict:
            content = f"Sections drafted before section {turn}: " + _text(rng, 30)
            plan = ReductionPlan(
                strategy="summarizing",
                summary=SummaryDraft(content=content, summarizer="offline", replaces=tuple(previous[-1:] + evict)),
            )
            agent.commit(Edit(plan=plan, trigger="end_of_invocation"), at + timedelta(seconds=2))
            return
    evict = agent.oldest_turns(2400, keep_last=10)
    if evict:
        plan = ReductionPlan(strategy="sliding_window", evict=tuple(evict))
        agent.commit(Edit(plan=plan, trigger="per_turn"), at + timedelta(seconds=1))


def _retimed(records: ConversationRecords, times: dict[int, datetime]) -> ConversationRecords:
    """``records`` with every timestamp taken from the clock of the version that wrote it."""

    def at(version: int) -> datetime:
        return times.get(version, START)

    by_reduction = {r.reduction_id: at(r.version) for r in records.reductions}
    return records.model_copy(
        update={
            "state": records.state.model_copy(update={"created_at": at(1), "updated_at": at(records.state.version)}),
            "messages": tuple(m.model_copy(update={"created_at": at(m.version)}) for m in records.messages),
            "summaries": tuple(
                s.model_copy(update={"created_at": by_reduction.get(s.reduction_id, START)}) for s in records.summaries
            ),
            "reductions": tuple(r.model_copy(update={"created_at": at(r.version)}) for r in records.reductions),
            "revisions": tuple(
                r.model_copy(update={"created_at": by_reduction.get(r.reduction_id or "", START)})
                for r in records.revisions
            ),
            "pins": tuple(p.model_copy(update={"at": at(p.version)}) for p in records.pins),
        }
    )


def build_long_session(
    url: str,
    session_id: str = "incident-2000",
    *,
    turns: int = 2000,
    seed: int = 7,
    progress: Callable[[str], None] | None = None,
) -> LongSession:
    """Write the two-agent session of ``turns`` turns per agent into the ledger at ``url``.

    ``lead`` answers a turn about every 40 seconds; ``writer`` drafts in bursts, so the
    two agents' model calls interleave unevenly on one clock.
    """
    rng = random.Random(seed)
    store = MemoryStore()
    out = LongSession(session_id=session_id, turns=turns)
    lead, writer = _Agent(store, session_id, "lead"), _Agent(store, session_id, "writer")
    clock_lead, clock_writer = START, START + timedelta(minutes=2)
    for turn in range(turns):
        _lead_turn(lead, rng, turn, clock_lead, out)
        clock_lead += timedelta(seconds=25 + rng.randrange(30))
        # The writer drafts fast for a while, then waits for the lead's findings.
        _writer_turn(writer, rng, turn, clock_writer)
        clock_writer += timedelta(seconds=8 + rng.randrange(10) if (turn // 100) % 2 == 0 else 60 + rng.randrange(30))
        if progress is not None and turn % 500 == 499:
            progress(f"{turn + 1} turns")
    out.ended = max(clock_lead, clock_writer)
    ledger = Ledger(store)
    records = {r.agent_id: r for r in ledger.export_records(session_id)}
    with Ledger.connect(url) as target:
        for agent in (lead, writer):
            target.import_records(_retimed(records[agent.state.agent_id], agent.times))
    return out
