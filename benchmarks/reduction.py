"""Reduction cost and the Strands integration's overhead per turn.

1. **A reduction touches only the rows it changes.** A sliding-window reduction that
   evicts the two oldest entries, on a conversation of ``--window`` entries (50) all
   active vs one whose ``--evicted`` entries (20,000) were evicted earlier and whose
   window is the same, alternating in one store (SQLite, PostgreSQL, Redis, Redis
   Cluster). After each timed reduction one turn is appended (not timed), so the
   windows keep their size. Ratio large/small: 1.0 means a reduction does not grow with
   history. One more reduction per conversation is observed: SQL statements and the
   history rows written, Redis commands, and (standalone Redis, ``MONITOR``) the
   commands the commit script ran.
2. **What the session manager costs a Strands agent per turn.** Real ``strands.Agent``
   objects driven by a scripted model (no network) take ``--turns`` turns (400)
   alternately: one without a session manager (the baseline), one with Strands'
   ``FileSessionManager``, one with ``LedgerSessionManager`` on a SQLite file. All
   keep Strands' default conversation manager (a sliding window of 40 messages).
   Per-turn medians over turns 1-50 and over the last 50 turns, ratios vs the
   baseline.

    python benchmarks/reduction.py                         # both parts, every backend available
    python benchmarks/reduction.py --evicted 100000 --turns 1000
    python benchmarks/reduction.py --backends sqlite --no-strands
    python benchmarks/reduction.py --write-results         # also rewrite benchmarks/DETAILS.md
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _details import replace_section, versions
from _servers import (
    Backend,
    Traffic,
    backend_list,
    bulk_load,
    colocated,
    maintain,
    median,
    ms,
    observe,
    open_backend,
    p95,
    script_commands,
)
from contextledger import Message, ReductionPlan
from contextledger.conversation.conversation import Conversation

WARMUP = 10
REDUCTION_BACKENDS = ("sqlite", "postgres", "redis", "redis_cluster")

# -- 1. reductions ------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    conversation: Conversation
    samples: list[float] = field(default_factory=list)
    traffic: Traffic | None = None
    script: list[str] | None = None


@dataclass
class ReductionResult:
    backend: str
    small: Case
    large: Case

    @property
    def ratio(self) -> float:
        return median(self.large.samples) / median(self.small.samples)


def reduce_two(conversation: Conversation) -> None:
    conversation.apply_plan(
        lambda view: ReductionPlan(strategy="sliding_window", evict=tuple(view.ids[:2])), trigger="per_turn"
    )


def refill(conversation: Conversation, n: int) -> None:
    conversation.append(Message.user(f"question {n}: " + "words " * 20), Message.assistant(f"answer {n}"))


def timed_reduction(conversation: Conversation, n: int) -> float:
    t0 = time.perf_counter()
    reduce_two(conversation)
    elapsed = time.perf_counter() - t0
    refill(conversation, n)
    return elapsed


def measure_reductions(backend: Backend, args: argparse.Namespace) -> ReductionResult:
    store = backend.store
    small_id, large_id = colocated(backend, ["small", "large"])
    bulk_load(store, small_id, total=args.window, active=args.window)
    started = time.perf_counter()
    bulk_load(store, large_id, total=args.evicted + args.window, active=args.window)
    print(f"{backend.label}: loaded {args.evicted + args.window:,} entries in {time.perf_counter() - started:.1f}s")
    maintain(store, "VACUUM ANALYZE")
    small = Case("small", Conversation(store, small_id, "agent"))
    large = Case("large", Conversation(store, large_id, "agent"))
    cases = [small, large]
    for n in range(WARMUP):
        for case in cases:
            timed_reduction(case.conversation, n)
    for n in range(args.repeats):
        for case in cases if n % 2 == 0 else reversed(cases):
            case.samples.append(timed_reduction(case.conversation, n))
    for case in cases:
        with observe(backend) as traffic:
            reduce_two(case.conversation)
        case.traffic = traffic
        refill(case.conversation, -1)
        if backend.name == "redis" and backend.url is not None:
            with script_commands(backend.url) as seen:
                reduce_two(case.conversation)
            case.script = seen
            refill(case.conversation, -2)
        assert len(case.conversation.view) == args.window
    return ReductionResult(backend.label, small, large)


def reduction_table(results: list[ReductionResult], args: argparse.Namespace) -> str:
    lines = [
        f"| backend | {args.window} entries: median ms | p95 ms | {args.evicted:,} evicted + {args.window} active: "
        "median ms | p95 ms | ratio large/small |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.backend} | {ms(median(r.small.samples))} | {ms(p95(r.small.samples))} | "
            f"{ms(median(r.large.samples))} | {ms(p95(r.large.samples))} | {r.ratio:.2f} |"
        )
    return "\n".join(lines)


def reduction_traffic_table(results: list[ReductionResult]) -> str:
    lines = [
        "| backend | conversation | statements / commands | round trips | history rows written | sent "
        "| commands the script ran |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for case in (r.small, r.large):
            t = case.traffic
            if t is None:
                continue
            trips = str(t.round_trips) if t.round_trips is not None else "0 (in-process)"
            rows = str(t.rows) if t.rows is not None else "-"
            script = f"{len(case.script)}: {summarize(case.script)}" if case.script is not None else "-"
            lines.append(
                f"| {r.backend} | {case.name} | {t.statements} | {trips} | {rows} | {' '.join(t.commands)} | {script} |"
            )
    return "\n".join(lines)


def _script_read(results: list[ReductionResult]) -> str:
    """What the standalone Redis script ran for either conversation, as observed (``MONITOR``)."""
    for r in results:
        small, large = r.small.script, r.large.script
        if small is None or large is None:
            continue
        if small == large:
            return f"The Redis script runs the same {len(small)} commands for either conversation."
        return f"The Redis script runs {len(small)} commands for the small conversation, {len(large)} for the large."
    return ""


def summarize(commands: list[str]) -> str:
    """``TYPE x10, HGET, ...``: runs of the same command collapsed."""
    out: list[str] = []
    for command in commands:
        if out and out[-1].split(" x")[0] == command:
            count = int(out[-1].split(" x")[1]) + 1 if " x" in out[-1] else 2
            out[-1] = f"{command} x{count}"
        else:
            out.append(command)
    return ", ".join(out)


# -- 2. Strands ---------------------------------------------------------------------------


def scripted_model() -> Any:
    """A Strands model that answers every call with a short text (no provider, no network).

    A minimal version of the scripted model the Strands tests use.
    """
    from strands.models.model import Model
    from strands.types.content import Messages
    from strands.types.streaming import StreamEvent

    class Replies(Model):
        def __init__(self) -> None:
            self.calls = 0

        def update_config(self, **model_config: Any) -> None:
            pass

        def get_config(self) -> dict[str, Any]:
            return {"model_id": "scripted"}

        def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[dict[str, Any], None]:
            raise NotImplementedError("no structured output")

        async def stream(
            self, messages: Messages, tool_specs: Any = None, system_prompt: str | None = None, **kwargs: Any
        ) -> AsyncIterable[StreamEvent]:
            self.calls += 1
            text = f"Answer {self.calls}: " + "the figures are as reported " * 4
            yield {"messageStart": {"role": "assistant"}}
            yield {"contentBlockDelta": {"delta": {"text": text}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            tokens = sum(len(str(m)) for m in messages) // 4
            yield {
                "metadata": {
                    "usage": {"inputTokens": tokens, "outputTokens": 30, "totalTokens": tokens + 30},
                    "metrics": {"latencyMs": 1},
                }
            }

    return Replies()


@dataclass
class AgentRun:
    name: str
    agent: Any
    session_manager: Any
    samples: list[float] = field(default_factory=list)


@dataclass
class StrandsResult:
    runs: list[AgentRun]
    turns: int
    window: int
    ledger_turn: Traffic

    def ranges(self) -> list[tuple[str, slice]]:
        last = slice(max(self.turns - self.window, 0), self.turns)
        first = slice(0, min(self.window, self.turns))
        return [
            (f"turns 1-{first.stop}", first),
            (f"turns {last.start + 1}-{last.stop}", last),
        ]


def measure_strands(directory: Path, args: argparse.Namespace) -> StrandsResult:
    from strands import Agent
    from strands.session.file_session_manager import FileSessionManager

    from contextledger.integrations.strands import LedgerSessionManager
    from contextledger.ledger import Ledger

    ledger_url = f"sqlite:///{directory / 'strands-ledger.db'}"
    files = str(directory / "strands-files")

    def agents(session_id: str) -> list[AgentRun]:
        session_managers: list[tuple[str, Any]] = [
            ("no session manager", None),
            ("FileSessionManager", FileSessionManager(session_id, storage_dir=files)),
            ("LedgerSessionManager (SQLite)", LedgerSessionManager(session_id, url=ledger_url)),
        ]
        return [
            AgentRun(
                name, Agent(model=scripted_model(), callback_handler=None, session_manager=sm, agent_id="bench"), sm
            )
            for name, sm in session_managers
        ]

    def play(runs: list[AgentRun], turns: int) -> None:
        for n in range(turns):
            for run in runs if n % 2 == 0 else reversed(runs):
                t0 = time.perf_counter()
                run.agent(f"Question {n}: what changed in the figures since the last report?")
                run.samples.append(time.perf_counter() - t0)

    # first calls pay for imports, thread pools and caches: spend them on other sessions
    warm = agents("warm-up")
    play(warm, WARMUP)
    warm[2].session_manager.close()
    runs = agents("bench")
    play(runs, args.turns)
    # one more turn each, outside the timings, to see what the ledger-backed one sends
    ledger_manager = runs[2].session_manager
    observed = Backend("sqlite", "ledger", ledger_manager.ledger.store)
    for run in runs:
        with observe(observed) as traffic:
            run.agent("One more question.")
        if run is runs[2]:
            ledger_turn = traffic
    for run in runs:
        # every agent ends with the same window; the ledger kept every message
        assert len(run.agent.messages) == len(runs[0].agent.messages), run.name
    with Ledger.connect(ledger_url) as ledger:
        assert len(ledger.history("bench", "bench")) == 2 * (args.turns + 1)
    ledger_manager.close()
    return StrandsResult(runs, args.turns, args.window_turns, ledger_turn)


def strands_table(result: StrandsResult) -> str:
    ranges = result.ranges()
    header = "| agent | " + " | ".join(f"{label}: median ms | p95 ms | ratio" for label, _ in ranges) + " |"
    lines = [header, "|---|" + "---|---|---|" * len(ranges)]
    baseline = result.runs[0]
    for run in result.runs:
        cells = []
        for _, part in ranges:
            samples, base = run.samples[part], baseline.samples[part]
            cells.append(f"{ms(median(samples))} | {ms(p95(samples))} | {median(samples) / median(base):.2f}")
        lines.append(f"| {run.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def strands_overhead(result: StrandsResult) -> str:
    """Per-turn cost over the baseline, in ms, for each range."""
    baseline = result.runs[0]
    parts = []
    for run in result.runs[1:]:
        extra = [
            f"{label} {ms(median(run.samples[part]) - median(baseline.samples[part]))} ms"
            for label, part in result.ranges()
        ]
        parts.append(f"{run.name}: +" + ", +".join(extra))
    return "; ".join(parts)


def _commits_read(result: StrandsResult) -> str:
    """What the observed turn's commits were, when they are the two of a plain turn (else the list above says it)."""
    if result.ledger_turn.commands.count("COMMIT") != 2:
        return "The commits are those listed."
    return (
        "The two commits are the user message, as Strands appends it, and then the answer with the "
        "model-call count (which waits for the next write), the Strands state and the sliding window's eviction."
    )


def ledger_turn(result: StrandsResult) -> str:
    t = result.ledger_turn
    commits = t.commands.count("COMMIT")
    return f"{commits} commits, {t.statements} statements, {t.rows} history rows written (`{' '.join(t.commands)}`)"


# -- main ---------------------------------------------------------------------------------


SECTION_REDUCTION = "## Reduction cost (`benchmarks/reduction.py`)"
SECTION_STRANDS = "## Strands session manager overhead (`benchmarks/reduction.py`)"


def write_results(
    reductions: list[ReductionResult], strands: StrandsResult | None, servers: list[str], args: argparse.Namespace
) -> None:
    if reductions:
        replace_section(
            SECTION_REDUCTION,
            [
                "A sliding-window reduction evicting the two oldest entries (`Conversation.apply_plan`, one "
                f"commit) on a conversation of {args.window} entries all active vs one of {args.evicted:,} "
                f"evicted entries plus the same {args.window}-entry window, in the same store and process, "
                f"alternating, {args.repeats} reductions each after {WARMUP} warm-up ones. After every reduction "
                "one turn is appended (not timed), so the windows keep their size. Ratio = median(large) / "
                "median(small): 1.00 means a reduction does not grow with history.",
                "",
                reduction_table(reductions, args),
                "",
                "What one more reduction per conversation sent (counted as in the append section); on standalone "
                "Redis `MONITOR` also lists the commands the commit script ran on the server:",
                "",
                reduction_traffic_table(reductions),
                "",
                "The SQL reduction is the version-checked `UPDATE` of the conversation, the commit log's "
                "`INSERT`, a `SELECT` checking that the ids to evict are active (SQLite's hot path runs it "
                "first), the reduction row's `INSERT` and one `UPDATE` of exactly the evicted rows; on "
                "PostgreSQL each is a round trip, plus `BEGIN` and `COMMIT`. SQLite's statements are counted "
                f"as SQLite ran them (its trace callback). {_script_read(reductions)}",
                "",
                versions(servers),
            ],
        )
    if strands is not None:
        replace_section(
            SECTION_STRANDS,
            [
                f"Three real `strands.Agent`s driven by a scripted model (no network) take {strands.turns} turns "
                "(`agent(prompt)`: one user message, one model call, one assistant message) alternately in one "
                "process: without a session manager (the baseline), with Strands' `FileSessionManager`, and with "
                "`LedgerSessionManager` on a SQLite file. All keep Strands' default conversation manager (a "
                "sliding window of 40 messages), so from turn 21 on every turn also evicts. Per-turn median and "
                f"p95 over the first and the last {strands.window} turns; ratio = median / the baseline's median "
                "over the same turns.",
                "",
                strands_table(strands),
                "",
                f"Added per turn (median minus the baseline's): {strands_overhead(strands)}.",
                "",
                f"What one more turn of the ledger-backed agent sent to SQLite: {ledger_turn(strands)}. "
                f"{_commits_read(strands)} `FileSessionManager` writes a file per message and rewrites the "
                "agent's JSON when its state changed, where an eviction shows only as a count of removed messages.",
                "",
                "The baseline is a scripted model that answers at once, so the ratios divide by about 2 ms; next "
                "to a real model call of hundreds of milliseconds the millisecond or two a session manager adds per "
                "turn is under 1%. At this scale the figures vary by about a millisecond per turn from run to "
                "run, so compare the first and last ranges with care; `--turns 2000` shows over a longer "
                "conversation whether the cost per turn grows with the number of turns.",
                "",
                versions(servers),
            ],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--window", type=int, default=50, help="active entries of both conversations")
    parser.add_argument("--evicted", type=int, default=20_000, help="evicted entries of the large conversation")
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument(
        "--backends", type=backend_list, default=list(REDUCTION_BACKENDS), help=",".join(REDUCTION_BACKENDS)
    )
    parser.add_argument("--turns", type=int, default=400, help="turns of each Strands agent")
    parser.add_argument("--window-turns", type=int, default=50, help="turns per reported range")
    parser.add_argument("--no-strands", action="store_true")
    parser.add_argument("--no-reductions", action="store_true")
    parser.add_argument("--write-results", action="store_true", help="rewrite DETAILS.md")
    args = parser.parse_args()
    if args.window < 4:
        parser.error("need --window >= 4")

    reductions: list[ReductionResult] = []
    strands: StrandsResult | None = None
    servers: list[str] = []
    with tempfile.TemporaryDirectory(prefix="contextledger-bench-") as directory:
        if not args.no_reductions:
            for name in args.backends:
                with open_backend(name, Path(directory)) as backend:
                    if backend is None:
                        continue
                    reductions.append(measure_reductions(backend, args))
                    if backend.version and backend.version not in servers:
                        servers.append(backend.version)
                    print(reduction_table(reductions[-1:], args).splitlines()[-1], flush=True)
            print(reduction_table(reductions, args))
            print()
            print(reduction_traffic_table(reductions))
            print()
        if not args.no_strands:
            with warnings.catch_warnings():
                # Strands warns about agent-level state it cannot persist; not what is measured
                warnings.simplefilter("ignore", UserWarning)
                strands = measure_strands(Path(directory), args)
            print(strands_table(strands))
            print(f"Added per turn: {strands_overhead(strands)}")
            print(f"One turn of the ledger-backed agent: {ledger_turn(strands)}")
    if args.write_results:
        write_results(reductions, strands, servers, args)


if __name__ == "__main__":
    main()
