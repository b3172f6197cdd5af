"""Append cost: one turn appended to a conversation with a short vs a long history.

The hot path of every agent loop is ``Conversation.append(user, assistant)``: it must
cost the same whatever the conversation's history holds. Per backend (memory, SQLite,
PostgreSQL, Redis, Redis Cluster) three conversations are appended to alternately:

* ``short``: ``--window`` entries (50), all active;
* ``long``: ``--history`` entries (20,000) of which the same ``--window`` are active;
* ``wide``: ``--wide`` entries (2,000), all active -- a large *window* rather than a
  large history, for contrast (``--wide 0`` leaves it out).

``short`` and ``long`` alternate first (the headline ratio long/short, 1.0 meaning an
append does not grow with history), then ``short`` and ``wide`` (the ratio wide/short).
They are not all three interleaved because the wide case churns the process's memory,
which the append timed right after it pays for. After each timed append a sliding
window evicts the two oldest entries (not timed), so every window keeps its size. Then
one more append per conversation is observed to count what it sends: SQL statements
(and PostgreSQL protocol round trips), Redis commands and round trips.

    python benchmarks/append.py                              # every backend that is available
    python benchmarks/append.py --history 100000 --repeats 1000
    python benchmarks/append.py --backends memory,sqlite     # no servers
    python benchmarks/append.py --write-results              # also rewrite benchmarks/DETAILS.md

Servers come from the same places as for ``restore.py`` (environment URLs, else
throwaway local servers that are stopped at the end).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from _details import replace_section, versions
from _servers import (
    BACKENDS,
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
)
from contextledger import Message, ReductionPlan
from contextledger.conversation.conversation import Conversation

WARMUP = 10
QUESTION = "What did the report say about the second quarter, and which figures changed since the draft? "
ANSWER = "The report says revenue grew in the second quarter; the draft's margin figure was revised. " * 2


@dataclass
class Case:
    name: str
    entries: int
    active: int
    conversation: Conversation
    traffic: Traffic | None = None


@dataclass
class Result:
    backend: str
    cases: dict[str, Case]
    # phase -> case name -> seconds per append
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def median(self, phase: str, name: str) -> float:
        return median(self.samples[phase][name])

    def p95(self, phase: str, name: str) -> float:
        return p95(self.samples[phase][name])

    def ratio(self, phase: str, name: str) -> float:
        return self.median(phase, name) / self.median(phase, "short")


def slide(conversation: Conversation) -> None:
    """Evict the two oldest entries: keeps the window the size it was before the append."""
    conversation.apply_plan(
        lambda view: ReductionPlan(strategy="sliding_window", evict=tuple(view.ids[:2])), trigger="per_turn"
    )


def turn(conversation: Conversation, n: int) -> float:
    user, assistant = Message.user(f"{QUESTION}({n})"), Message.assistant(f"{ANSWER}({n})")
    t0 = time.perf_counter()
    conversation.append(user, assistant)
    elapsed = time.perf_counter() - t0
    slide(conversation)
    return elapsed


def alternate(cases: list[Case], repeats: int) -> dict[str, list[float]]:
    """Time ``repeats`` appends per case, alternating, the order flipped every round."""
    for n in range(WARMUP):
        for case in cases:
            turn(case.conversation, n)
    samples: dict[str, list[float]] = {c.name: [] for c in cases}
    for n in range(repeats):
        for case in cases if n % 2 == 0 else reversed(cases):
            samples[case.name].append(turn(case.conversation, n))
    return samples


def measure(backend: Backend, args: argparse.Namespace) -> Result:
    store = backend.store
    shapes = [("short", args.window, args.window), ("long", args.history, args.window)]
    if args.wide:
        shapes.append(("wide", args.wide, args.wide))
    sessions = colocated(backend, [name for name, _, _ in shapes])
    cases: dict[str, Case] = {}
    for (name, entries, active), session_id in zip(shapes, sessions, strict=True):
        started = time.perf_counter()
        bulk_load(store, session_id, total=entries, active=active)
        loaded = time.perf_counter() - started
        print(f"{backend.label}: {name} = {entries:,} entries ({active:,} active), loaded in {loaded:.1f}s")
        cases[name] = Case(name, entries, active, Conversation(store, session_id, "agent"))
    maintain(store, "VACUUM ANALYZE")
    result = Result(backend.label, cases)
    result.samples["history"] = alternate([cases["short"], cases["long"]], args.repeats)
    if args.wide:
        result.samples["window"] = alternate([cases["short"], cases["wide"]], args.repeats)
    for case in cases.values():
        user, assistant = Message.user(QUESTION), Message.assistant(ANSWER)
        with observe(backend) as traffic:
            case.conversation.append(user, assistant)
        case.traffic = traffic
        slide(case.conversation)
        assert len(case.conversation.view) == case.active, (case.name, len(case.conversation.view))
    return result


def table(results: list[Result], args: argparse.Namespace) -> str:
    wide = f" | {args.wide:,} active: median ms | p95 ms | ratio wide/short" if args.wide else ""
    lines = [
        f"| backend | {args.window} entries: median ms | p95 ms | {args.history:,} entries ({args.window} active): "
        f"median ms | p95 ms | ratio long/short{wide} |",
        "|---|---|---|---|---|---" + ("|---|---|---" if args.wide else "") + "|",
    ]
    for r in results:
        row = (
            f"| {r.backend} | {ms(r.median('history', 'short'))} | {ms(r.p95('history', 'short'))} | "
            f"{ms(r.median('history', 'long'))} | {ms(r.p95('history', 'long'))} | {r.ratio('history', 'long'):.2f}"
        )
        if args.wide:
            row += (
                f" | {ms(r.median('window', 'wide'))} | {ms(r.p95('window', 'wide'))} | {r.ratio('window', 'wide'):.2f}"
            )
        lines.append(row + " |")
    return "\n".join(lines)


def traffic_table(results: list[Result]) -> str:
    """What one append sent; one row per backend when every case sent the same."""
    lines = [
        "| backend | conversation | statements / commands | transaction control | round trips "
        "| history rows written | sent |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rows = {c.name: traffic_cells(c.traffic) for c in r.cases.values() if c.traffic is not None}
        if len(set(rows.values())) == 1:
            rows = {"all": next(iter(rows.values()))}
        for name, cells in rows.items():
            lines.append(f"| {r.backend} | {name} | {cells} |")
    return "\n".join(lines)


def traffic_cells(t: Traffic) -> str:
    if not t.commands and t.round_trips is None:
        return "0 | - | 0 (in-process) | - | nothing"
    sql = t.rows is not None
    trips = str(t.round_trips) if t.round_trips is not None else "0 (in-process)"
    return f"{t.statements} | {t.control if sql else '-'} | {trips} | {t.rows if sql else '-'} | {' '.join(t.commands)}"


SECTION = "## Append cost (`benchmarks/append.py`)"


def write_results(results: list[Result], servers: list[str], args: argparse.Namespace) -> None:
    wide = (
        f" Then the {args.window}-entry conversation alternates the same way with one of {args.wide:,} entries "
        "all active: a wide window rather than a long history, for contrast (ratio wide/short)."
        if args.wide
        else ""
    )
    replace_section(
        SECTION,
        [
            "`Conversation.append(user, assistant)` -- one turn -- on a conversation of "
            f"{args.window} entries all active vs one of {args.history:,} entries of which {args.window} are "
            f"active, in the same store and process, alternating, {args.repeats} appends each after {WARMUP} "
            "warm-up appends. After every append a sliding window evicts the two oldest entries (not timed), so "
            "the windows keep their size. Ratio = median(long) / median(short): 1.00 means an append does not "
            f"grow with history.{wide}",
            "",
            table(results, args),
            "",
            "What one more append per conversation sent, observed outside the timings: SQL statements as SQLite "
            "ran them (its trace callback, which also sees what the store sends on the driver's own cursor), on "
            "PostgreSQL from SQLAlchemy's cursor events plus transaction control; PostgreSQL round trips counted "
            "from libpq's protocol trace (one per ReadyForQuery), Redis commands and round trips counted by a "
            "connection class (a script call is one command; a pipeline is one round trip per node). History "
            "rows written = rows of `cl_entries` inserted or updated; on SQLite the commit log's `INSERT` comes "
            "first, then one multi-row `INSERT` of the turn's rows; `WITH` is PostgreSQL's one statement: the "
            "version-checked `UPDATE` and the `INSERT` of the rows in one data-modifying CTE.",
            "",
            traffic_table(results),
            "",
            "Reading it: the history costs an append nothing on any backend (long/short about 1.00), and it sends "
            "the same whatever the history. A wide *window* costs little or nothing more (wide/short): after an "
            "append-only commit `Conversation` extends its view in place, carrying what it knows of the view in "
            "O(appended) (`View.appended`); the store is sent the same either way. "
            "Every backend with a network sends an append as one round trip. On PostgreSQL the append is one "
            "statement run in autocommit mode, so psycopg sends no `BEGIN` or `COMMIT` (a transaction of the "
            "update and the executemany insert took 4 round trips: `BEGIN` on its own, `UPDATE`, `INSERT`, "
            "`COMMIT`); psycopg prepares the statement on the server on its fifth use on a connection, which "
            "costs that once one more round trip, outside these counts. On Redis Cluster the commit script also "
            "keeps the session's place in the index of sessions by last update, in the conversation's own slot, "
            "so nothing follows it (the session's agent set, in another slot, is written only when a "
            "conversation is created).",
            "",
            versions(servers) + " The throwaway PostgreSQL server runs with fsync and synchronous_commit off "
            "and the throwaway Redis servers without persistence, so the write figures leave out the disk flush "
            "a durable configuration adds (the same for short and long histories).",
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--window", type=int, default=50, help="active entries of the short and long cases")
    parser.add_argument("--history", type=int, default=20_000, help="entries of the long case")
    parser.add_argument("--wide", type=int, default=2_000, help="entries of the wide-window case (0: none)")
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--backends", type=backend_list, default=list(BACKENDS), help=",".join(BACKENDS))
    parser.add_argument("--write-results", action="store_true", help="rewrite DETAILS.md")
    args = parser.parse_args()
    if args.window < 2 or args.history < args.window:
        parser.error("need --window >= 2 and --history >= --window")

    results: list[Result] = []
    servers: list[str] = []
    with tempfile.TemporaryDirectory(prefix="contextledger-bench-") as directory:
        for name in args.backends:
            with open_backend(name, Path(directory)) as backend:
                if backend is None:
                    continue
                results.append(measure(backend, args))
                if backend.version and backend.version not in servers:
                    servers.append(backend.version)
                print(table(results[-1:], args).splitlines()[-1], flush=True)

    print(table(results, args))
    print()
    print(traffic_table(results))
    if args.write_results:
        write_results(results, servers, args)


if __name__ == "__main__":
    main()
